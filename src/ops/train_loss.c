/* train_loss.c: the TrainLoss node's attributes and shape inference (train_loss.h). */
#include "train_loss.h"

#include <string.h>

#include "../train/train_state.h"

/* Input 4, when bound, overrides the grad_scale attribute (read on the host). */
double train_loss_grad_scale(const train_loss_layout *l, const tensor *const *in, int n_in) {
    double gs = l->grad_scale;
    if (n_in > 4 && in[4] && in[4]->data && tensor_numel(in[4]) == 1)
        gs = (double)*(const float *)in[4]->data;
    return gs != 0.0 ? gs : 1.0;
}

graft_status train_loss_read(const ir_node *node, int n_in, int n_out, train_loss_layout *l,
                             graft_err *e) {
    memset(l, 0, sizeof *l);
    int64_t kind = attr_i(node, "kind", -1);
    l->label_smoothing = attr_f(node, "label_smoothing", 0.0f);
    l->grad_scale = attr_f(node, "grad_scale", 0.0f);
    l->accumulate = attr_i(node, "accumulate", 1);
    l->fp16 = attr_i(node, "fp16", 0) != 0;
    if (kind < 0 || kind > 2 || !(l->label_smoothing >= 0.0 && l->label_smoothing <= 1.0) ||
        !(l->grad_scale >= 0.0) || l->accumulate < 1)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                        "needs kind 0 to 2, label_smoothing in [0, 1], grad_scale >= 0 and "
                        "accumulate >= 1");
    l->kind = (int)kind;
    if (n_in < 4 || n_in > 5 || n_out != 1)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                        "has %d inputs and %d outputs; expected 4 or 5 (logits, targets, weights, "
                        "state[, grad_scale]) and 1",
                        n_in, n_out);
    return GRAFT_OK;
}

static bool dims_are(const value_info *v, int ndim, const int64_t *dims) {
    if (v->ndim < 0) return true;
    if (v->ndim != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (v->dims[d] >= 0 && dims[d] >= 0 && v->dims[d] != dims[d]) return false;
    return true;
}

graft_status op_infer_TrainLoss(const ir_node *node, const value_info *in, int n_in,
                                value_info *out, int n_out, graft_err *e) {
    train_loss_layout l;
    TRY(train_loss_read(node, n_in, n_out, &l, e));
    const value_info *x = &in[0], *y = &in[1], *w = &in[2], *st = &in[3];
    if (!x->present || (x->dtype != GRAFT_DTYPE_F32 && x->dtype != GRAFT_DTYPE_UNDEFINED) ||
        (x->ndim >= 0 && x->ndim != 2))
        return op_error(node, e, GRAFT_E_SHAPE, "the logits must be float32 (N, C)");
    int64_t n = x->ndim == 2 ? x->dims[0] : -1, c = x->ndim == 2 ? x->dims[1] : -1;
    graft_dtype want = l.kind == 0 ? GRAFT_DTYPE_I64 : GRAFT_DTYPE_F32;
    int64_t ydims[2] = {n, c};
    if (!y->present || (y->dtype != want && y->dtype != GRAFT_DTYPE_UNDEFINED) ||
        !dims_are(y, l.kind == 0 ? 1 : 2, ydims))
        return op_error(node, e, GRAFT_E_SHAPE, "the targets must be %s",
                        l.kind == 0 ? "int64 (N) class indices" : "float32 (N, C)");
    if (w->present && ((w->dtype != GRAFT_DTYPE_F32 && w->dtype != GRAFT_DTYPE_UNDEFINED) ||
                       !dims_are(w, 1, &c) || l.kind == 2))
        return op_error(node, e, GRAFT_E_SHAPE, "the weights must be float32 (C), and not MSE's");
    int64_t sd = (int64_t)sizeof(train_state);
    if (!st->present || (st->dtype != GRAFT_DTYPE_U8 && st->dtype != GRAFT_DTYPE_UNDEFINED) ||
        !dims_are(st, 1, &sd))
        return op_error(node, e, GRAFT_E_SHAPE, "input 3 must be the uint8 (%lld) training state",
                        (long long)sd);
    int64_t one = 1;
    if (n_in > 4 && in[4].present &&
        ((in[4].dtype != GRAFT_DTYPE_F32 && in[4].dtype != GRAFT_DTYPE_UNDEFINED) ||
         !dims_are(&in[4], 1, &one)))
        return op_error(node, e, GRAFT_E_SHAPE, "input 4 (grad_scale) must be float32 (1)");
    memset(&out[0], 0, sizeof out[0]);
    out[0].present = true;
    out[0].dtype = GRAFT_DTYPE_F32;
    out[0].ndim = 2;
    out[0].dims[0] = n, out[0].dims[1] = c;
    return GRAFT_OK;
}

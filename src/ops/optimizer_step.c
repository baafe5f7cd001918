/* optimizer_step.c: the OptimizerStep node's attributes and shape inference (optimizer_step.h). */
#include "optimizer_step.h"

#include <string.h>

#include "../train/train_state.h"

static graft_status bad(const ir_node *node, graft_err *e, const char *what) {
    return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "%s", what);
}

static graft_status read_lists(const ir_node *node, optimizer_step_layout *l, graft_err *e) {
    int64_t nd = attr_ints(node, "decay", &l->decay);
    const tensor *ls = attr_t(node, "lr_scale");
    int64_t ns = ls && ls->dtype == GRAFT_DTYPE_F64 && ls->data ? tensor_numel(ls) : -1;
    l->lr_scale = ns >= 0 ? ls->data : NULL;
    if (nd != l->n_params || ns != l->n_params)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                        "has %d parameters but %lld decay flags and %lld lr_scale values "
                        "(a float64 tensor)",
                        l->n_params, (long long)nd, (long long)ns);
    for (int i = 0; i < l->n_params; i++)
        if (!(l->lr_scale[i] >= 0.0f))
            return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "lr_scale %d is %g", i,
                            l->lr_scale[i]);
    return GRAFT_OK;
}

graft_status optimizer_step_read(const ir_node *node, int n_in, int n_out, optimizer_step_layout *l,
                                 graft_err *e) {
    memset(l, 0, sizeof *l);
    int64_t kind = attr_i(node, "kind", -1);
    if (kind < 0 || kind > 3) return bad(node, e, "needs kind 0 (SGD) to 3 (LAMB)");
    l->kind = (int)kind;
    l->weight_decay = attr_f(node, "weight_decay", 0.0f);
    l->dampening = attr_f(node, "dampening", 0.0f);
    l->beta2 = attr_f(node, "beta2", 0.999f);
    l->eps = attr_f(node, "eps", 1e-8f);
    l->max_norm = attr_f(node, "max_norm", 0.0f);
    l->nesterov = attr_i(node, "nesterov", 0) != 0;
    l->amsgrad = attr_i(node, "amsgrad", 0) != 0;
    l->fp16 = attr_i(node, "fp16", 0) != 0;
    if (!(l->weight_decay >= 0.0f) || !(l->beta2 >= 0.0f && l->beta2 < 1.0f) || !(l->eps >= 0.0f) ||
        !(l->max_norm >= 0.0f) || !(l->dampening >= 0.0f))
        return bad(node, e, "has an out-of-range weight_decay, beta2, eps, dampening or max_norm");
    if (n_out != 1 || n_in < OPTIMIZER_STEP_FIRST ||
        (n_in - OPTIMIZER_STEP_FIRST) % OPTIMIZER_STEP_SLOTS != 0)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                        "has %d inputs and %d outputs; expected 2 + %d per parameter and 1", n_in,
                        n_out, OPTIMIZER_STEP_SLOTS);
    l->n_params = (n_in - OPTIMIZER_STEP_FIRST) / OPTIMIZER_STEP_SLOTS;
    bool sgd = l->kind == 0, adam = l->kind == 1 || l->kind == 2;
    l->slot_used[0] = !sgd || (node->inputs && node->inputs[OPTIMIZER_STEP_FIRST + 2] >= 0);
    l->slot_used[1] = !sgd;
    l->slot_used[2] = adam && l->amsgrad;
    return read_lists(node, l, e);
}

/* Parameter i's inputs: present where they must be, float32 of the weights' shape. */
static graft_status check_param(const ir_node *node, const optimizer_step_layout *l,
                                const value_info *in, int i, graft_err *e) {
    const value_info *w = &in[OPTIMIZER_STEP_FIRST + i * OPTIMIZER_STEP_SLOTS];
    for (int k = 0; k < OPTIMIZER_STEP_SLOTS; k++) {
        const value_info *v = &w[k];
        bool want = k < 2 || l->slot_used[k - 2];
        if (v->present != want)
            return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "parameter %d's input %d is %s", i, k,
                            want ? "missing" : "not used by this optimizer");
        if (!want) continue;
        if (v->dtype != GRAFT_DTYPE_F32 && v->dtype != GRAFT_DTYPE_UNDEFINED)
            return op_error(node, e, GRAFT_E_DTYPE, "parameter %d's input %d is %s, not float32", i,
                            k, graft_dtype_name(v->dtype));
        bool same = v->ndim == w->ndim;
        for (int d = 0; same && d < v->ndim; d++)
            same = v->dims[d] < 0 || w->dims[d] < 0 || v->dims[d] == w->dims[d];
        if (v->ndim >= 0 && w->ndim >= 0 && !same)
            return op_error(node, e, GRAFT_E_SHAPE,
                            "parameter %d's input %d has another shape than its weights", i, k);
    }
    return GRAFT_OK;
}

graft_status op_infer_OptimizerStep(const ir_node *node, const value_info *in, int n_in,
                                    value_info *out, int n_out, graft_err *e) {
    optimizer_step_layout l;
    TRY(optimizer_step_read(node, n_in, n_out, &l, e));
    const value_info *st = &in[0], *hy = &in[1];
    if (!st->present || (st->dtype != GRAFT_DTYPE_U8 && st->dtype != GRAFT_DTYPE_UNDEFINED) ||
        (st->ndim == 1 && st->dims[0] >= 0 && st->dims[0] != (int64_t)sizeof(train_state)))
        return op_error(node, e, GRAFT_E_SHAPE, "input 0 must be the uint8 (%zu) training state",
                        sizeof(train_state));
    if (!hy->present || (hy->dtype != GRAFT_DTYPE_F32 && hy->dtype != GRAFT_DTYPE_UNDEFINED) ||
        (hy->ndim == 1 && hy->dims[0] >= 0 && hy->dims[0] != 2))
        return op_error(node, e, GRAFT_E_SHAPE, "input 1 must be float32 (2): lr, momentum");
    for (int i = 0; i < l.n_params; i++) TRY(check_param(node, &l, in, i, e));
    memset(&out[0], 0, sizeof out[0]);
    out[0].present = true;
    out[0].dtype = GRAFT_DTYPE_F32;
    out[0].ndim = 1;
    out[0].dims[0] = 2;
    return GRAFT_OK;
}

/* broadcast_plan.c: broadcast plans of the element-wise ops and of MatMul, shared by the reference
 * kernels and the device backends' host-side glue. */
#include "broadcast_plan.h"

#include <string.h>

static graft_status broadcast_error(const ir_node *node, graft_err *e, const tensor *t,
                                    const tensor *y) {
    char st[256], sy[256];
    return op_error(
        node, e, GRAFT_E_SHAPE, "input of shape %s does not broadcast to the output shape %s",
        shape_str(st, sizeof st, t->ndim, t->dims), shape_str(sy, sizeof sy, y->ndim, y->dims));
}

/* Strides of input `t` over the output's dims (0 where broadcast); error when it does not
 * broadcast to them. */
static graft_status input_strides(const ir_node *node, graft_err *e, const tensor *t,
                                  const tensor *y, int64_t *strides) {
    int off = y->ndim - t->ndim;
    if (off < 0) return broadcast_error(node, e, t, y);
    int64_t s = 1;
    for (int i = y->ndim - 1; i >= 0; i--) {
        int64_t d = i >= off ? t->dims[i - off] : 1;
        if (d != y->dims[i] && d != 1) return broadcast_error(node, e, t, y);
        strides[i] = d == 1 ? 0 : s;
        s *= d;
    }
    return GRAFT_OK;
}

graft_status bcast_plan_make(const ir_node *node, graft_err *e, const tensor *const *ins, int n_in,
                             const tensor *y, bcast_plan *p) {
    int64_t full[BCAST_MAX_INPUTS][GRAFT_MAX_DIMS];
    for (int k = 0; k < n_in; k++) {
        if (!ins[k] || (!ins[k]->data && tensor_numel(ins[k]) != 0))
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "input %d is missing", k);
        TRY(input_strides(node, e, ins[k], y, full[k]));
    }
    memset(p, 0, sizeof *p);
    p->n_in = n_in;
    p->numel = tensor_numel(y);
    for (int i = 0; i < y->ndim; i++) {
        if (y->dims[i] == 1) continue;
        int last = p->ndim - 1;
        bool merge = last >= 0;
        for (int k = 0; k < n_in && merge; k++)
            merge = p->strides[k][last] == full[k][i] * y->dims[i];
        if (merge) {
            p->dims[last] *= y->dims[i];
            for (int k = 0; k < n_in; k++) p->strides[k][last] = full[k][i];
            continue;
        }
        p->dims[p->ndim] = y->dims[i];
        for (int k = 0; k < n_in; k++) p->strides[k][p->ndim] = full[k][i];
        p->ndim++;
    }
    if (p->ndim == 0) {
        p->ndim = 1;
        p->dims[0] = 1;
    }
    return GRAFT_OK;
}

void matmul_bcast_make(const tensor *a, const tensor *b, matmul_bcast *p) {
    p->k = a->dims[a->ndim - 1];
    p->m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
    p->n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    p->nb = nba > nbb ? nba : nbb;
    int64_t stride_a = p->m * p->k, stride_b = p->k * p->n, stride_y = p->m * p->n;
    for (int i = p->nb - 1; i >= 0; i--) {
        int ia = i - (p->nb - nba), ib = i - (p->nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        p->dims[i] = da > db ? da : db;
        p->sa[i] = da == 1 ? 0 : stride_a;
        p->sb[i] = db == 1 ? 0 : stride_b;
        p->sy[i] = stride_y;
        stride_a *= da;
        stride_b *= db;
        stride_y *= p->dims[i];
    }
}

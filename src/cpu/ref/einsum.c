/* einsum.c: reference kernel of Einsum: every output element sums, over the contracted labels,
 * the product of the operands' elements those labels select (double accumulation for floats,
 * 64-bit wrap-around for integers). */
#include <string.h>

#include "../../core/scalar.h"
#include "../../ops/einsum.h"

static double load_f(const tensor *t, int64_t i) {
    return t->dtype == GRAFT_DTYPE_F32 ? (double)((const float *)t->data)[i] : tensor_get_f64(t, i);
}

/* Sum over the contracted loops for the output element at operand offsets base[]. */
static void contract(const einsum_loops *L, const op_call *c, const int64_t *base, bool flt,
                     double *fsum, uint64_t *isum) {
    int n_ops = c->n_in, first = L->n_out;
    int64_t off[EINSUM_MAX_OPERANDS], cnt[EINSUM_MAX_LABELS] = {0};
    memcpy(off, base, sizeof(int64_t) * (size_t)n_ops);
    for (int j = first; j < L->n_all; j++)
        if (L->dims[j] == 0) return;
    for (;;) {
        if (flt) {
            double v = 1.0;
            for (int k = 0; k < n_ops; k++) v *= load_f(c->in[k], off[k]);
            *fsum += v;
        } else {
            uint64_t v = 1;
            for (int k = 0; k < n_ops; k++)
                v *= (uint64_t)scalar_load_int(c->in[k]->data, c->in[k]->dtype, off[k]);
            *isum += v;
        }
        int j = L->n_all - 1;
        for (; j >= first; j--) {
            for (int k = 0; k < n_ops; k++) off[k] += L->strides[k][j];
            if (++cnt[j] < L->dims[j]) break;
            for (int k = 0; k < n_ops; k++) off[k] -= L->strides[k][j] * L->dims[j];
            cnt[j] = 0;
        }
        if (j < first) return;
    }
}

graft_status ref_Einsum(const op_call *c) {
    value_info vi[EINSUM_MAX_OPERANDS];
    if (c->n_in < 1 || c->n_in > EINSUM_MAX_OPERANDS)
        return op_error(c->node, c->err, GRAFT_E_UNSUPPORTED, "Einsum of %d operands", c->n_in);
    for (int k = 0; k < c->n_in; k++)
        if (!c->in[k]) return op_missing_input(c, k);
    int n = call_value_infos(c, vi, EINSUM_MAX_OPERANDS);
    einsum_plan p;
    TRY(einsum_make_plan(c->node, vi, n, &p, c->err));
    int64_t out_dims[GRAFT_MAX_DIMS];
    for (int d = 0; d < p.out_ndim; d++) out_dims[d] = p.label_dim[p.out_label[d]];
    tensor *y = c->out[0];
    TRY(op_expect_output(c, y, c->in[0]->dtype, p.out_ndim, out_dims));
    einsum_loops L;
    int op_ndim[EINSUM_MAX_OPERANDS];
    const int64_t *op_dims[EINSUM_MAX_OPERANDS];
    for (int k = 0; k < c->n_in; k++) {
        op_ndim[k] = c->in[k]->ndim;
        op_dims[k] = c->in[k]->dims;
    }
    einsum_make_loops(&p, op_ndim, op_dims, &L);
    bool flt = dtype_is_float(y->dtype);
    int64_t total = tensor_numel(y);
    for (int64_t o = 0; o < total; o++) {
        int64_t base[EINSUM_MAX_OPERANDS] = {0}, rest = o;
        for (int j = L.n_out - 1; j >= 0; j--) {
            int64_t i = rest % L.dims[j];
            rest /= L.dims[j];
            for (int k = 0; k < c->n_in; k++) base[k] += i * L.strides[k][j];
        }
        double fsum = 0.0;
        uint64_t isum = 0;
        contract(&L, c, base, flt, &fsum, &isum);
        if (flt)
            tensor_set_f64(y, o, fsum);
        else
            scalar_store_int(y->data, y->dtype, o, (int64_t)isum);
    }
    return GRAFT_OK;
}

/* cuda_einsum.c: Einsum on the GPU: the equation planned on the host (src/ops/einsum.c), the
 * loops handed to einsum.cu; integer and f64 operands, and plans with more loops than the kernel
 * takes, go to the CPU fallback. */
#include "../ops/einsum.h"
#include "cuda_internal.h"
#include "cuda_tensor.h"
#include "einsum_launch.h"

static bool kernel_dtype(graft_dtype t) {
    return t == GRAFT_DTYPE_F32 || t == GRAFT_DTYPE_F16 || t == GRAFT_DTYPE_BF16;
}

graft_status cuda_tensor_einsum(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = false;
    if (c->n_in < 1 || c->n_in > CUDA_EINSUM_MAX_OPERANDS) return GRAFT_OK;
    for (int k = 0; k < c->n_in; k++) {
        if (!c->in[k]) return op_missing_input(c, k);
        if (c->in[k]->dtype != c->in[0]->dtype) return GRAFT_OK;
    }
    if (!kernel_dtype(c->in[0]->dtype)) return GRAFT_OK;
    value_info vi[EINSUM_MAX_OPERANDS];
    int n = call_value_infos(c, vi, EINSUM_MAX_OPERANDS);
    einsum_plan p;
    TRY(einsum_make_plan(c->node, vi, n, &p, c->err));
    int op_ndim[EINSUM_MAX_OPERANDS];
    const int64_t *op_dims[EINSUM_MAX_OPERANDS];
    const void *data[CUDA_EINSUM_MAX_OPERANDS];
    for (int k = 0; k < c->n_in; k++) {
        op_ndim[k] = c->in[k]->ndim;
        op_dims[k] = c->in[k]->dims;
        data[k] = c->in[k]->data;
    }
    einsum_loops L;
    einsum_make_loops(&p, op_ndim, op_dims, &L);
    if (L.n_all > CUDA_EINSUM_MAX_LOOPS) return GRAFT_OK;
    int64_t out_dims[GRAFT_MAX_DIMS];
    for (int d = 0; d < p.out_ndim; d++) out_dims[d] = p.label_dim[p.out_label[d]];
    TRY(op_expect_output(c, c->out[0], c->in[0]->dtype, p.out_ndim, out_dims));
    cuda_einsum_loops K = {.n_ops = c->n_in, .n_out = L.n_out, .n_all = L.n_all};
    for (int j = 0; j < L.n_all; j++) {
        K.dims[j] = L.dims[j];
        for (int k = 0; k < c->n_in; k++) K.strides[k][j] = L.strides[k][j];
    }
    *handled = true;
    return cuda_fail_if(c->err,
                        cuda_einsum(c->out[0]->data, data, c->in[0]->dtype, &K,
                                    tensor_numel(c->out[0]), be->stream),
                        "launching the Einsum kernel");
}

/* cuda_backward.c: the Backward node's CUDA kernel: reads the node's layout (src/ops/backward.h),
 * hands the call to the rule of its forward op (cuda_backward.h), and leaves every case no rule
 * covers (another dtype, an op without a GPU rule) to the CPU reference on copies. */
#include "cuda_backward.h"
#include "elementwise_launch.h"

#include <stdlib.h>
#include <string.h>

#include "../ops/backward.h"

graft_status cuda_bwd_fail(const cuda_bwd *b, graft_status st, const char *what) {
    return op_error(b->call->node, b->call->err, st, "backward of %s: %s", b->op, what);
}

static cuda_bwd_rule find_rule(const char *op) {
    if (!strcmp(op, "Conv")) return cuda_bwd_conv;
    if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") || !strcmp(op, "GlobalAveragePool") ||
        !strcmp(op, "GlobalMaxPool"))
        return cuda_bwd_pool;
    if (!strcmp(op, "BatchNormalization")) return cuda_bwd_batchnorm;
    if (!strcmp(op, "Gemm")) return cuda_bwd_gemm;
    if (!strcmp(op, "MatMul")) return cuda_bwd_matmul;
    if (!strcmp(op, "Gather") || !strcmp(op, "Slice") || !strcmp(op, "Pad")) return cuda_bwd_index;
    return cuda_bwd_eltwise;
}

static void free_bwd_state(void *p) {
    cuda_bwd_state *s = p;
    if (s && s->free_fn) s->free_fn(s->p);
    free(s);
}

/* Every present tensor f32 and each gradient of its value's size. */
static bool plain_f32(const cuda_bwd *b) {
    for (int i = 0; i < b->n_in; i++) {
        const tensor *x = b->in[i], *d = b->din[i];
        if (d && (!x || d->dtype != GRAFT_DTYPE_F32 || tensor_numel(d) != tensor_numel(x)))
            return false;
    }
    for (int i = 0; i < b->n_out; i++) {
        const tensor *y = b->out[i], *d = b->dout[i];
        if (d && (!y || d->dtype != GRAFT_DTYPE_F32 || tensor_numel(d) != tensor_numel(y)))
            return false;
    }
    return true;
}

/* No gradient flows in: every wanted gradient is zero. */
static graft_status zero_all(const cuda_bwd *b) {
    for (int i = 0; i < b->n_in; i++) {
        tensor *d = b->din[i];
        if (!d) continue;
        cudaError_t err = cudaMemsetAsync(d->data, 0, (size_t)tensor_nbytes(d), b->be->stream);
        if (err != cudaSuccess) return cuda_fail(b->call->err, err, "zeroing a gradient");
    }
    return GRAFT_OK;
}

/* Cast: the gradient converted to its input's dtype (what the CPU rule does: the half-precision
 * emulation's rounding pairs run it in any float dtype); a pair ew_cast lacks goes to the CPU. */
static graft_status cast_backward(const cuda_bwd *b, bool *handled) {
    const tensor *dy = b->dout[0];
    tensor *dx = b->din[0];
    *handled = false;
    if (b->n_in < 1 || b->n_out < 1 || !dx) return GRAFT_OK;
    cudaStream_t s = b->be->stream;
    if (!dy) { /* no gradient flows in */
        cudaError_t z = cudaMemsetAsync(dx->data, 0, (size_t)tensor_nbytes(dx), s);
        if (z != cudaSuccess) return cuda_fail(b->call->err, z, "zeroing Cast's gradient");
        *handled = true;
        return GRAFT_OK;
    }
    if (tensor_numel(dx) != tensor_numel(dy)) return GRAFT_OK;
    cudaError_t err = dy->dtype == dx->dtype
                          ? cudaMemcpyAsync(dx->data, dy->data, (size_t)tensor_nbytes(dx),
                                            cudaMemcpyDeviceToDevice, s)
                          : ew_cast(dy->dtype, dy->data, dx->dtype, dx->data, tensor_numel(dx), s);
    if (err == cudaErrorNotSupported) return GRAFT_OK;
    if (err != cudaSuccess) return cuda_fail(b->call->err, err, "converting Cast's gradient");
    *handled = true;
    return GRAFT_OK;
}

static graft_status k_backward(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    *handled = false;
    backward_layout l;
    graft_err scratch = {0}; /* a malformed node: the reference kernel reports it */
    if (backward_read_layout(c->node, c->n_in, c->n_out, &l, &scratch) != GRAFT_OK) return GRAFT_OK;
    cuda_bwd_state *s = *state;
    if (s && strcmp(s->op, l.op) != 0) return GRAFT_OK; /* cannot happen: one node, one op */
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return err_set(c->err, GRAFT_E_OUT_OF_MEMORY, "out of memory for kernel state");
        s->op = l.op;
        *state = s;
    }
    bool any_out = false;
    for (int i = 0; i < l.n_fwd_out; i++) any_out = any_out || c->in[l.n_fwd_in + l.n_fwd_out + i];
    cuda_bwd b = {.be = be,
                  .call = c,
                  .op = l.op,
                  .fwd_opset = l.fwd_opset,
                  .in = c->in,
                  .n_in = l.n_fwd_in,
                  .out = c->in + l.n_fwd_in,
                  .n_out = l.n_fwd_out,
                  .dout = c->in + l.n_fwd_in + l.n_fwd_out,
                  .din = c->out,
                  .state = s};
    if (!strcmp(l.op, "Cast")) return cast_backward(&b, handled);
    if (!plain_f32(&b)) return GRAFT_OK;
    if (!any_out) {
        *handled = true;
        return zero_all(&b);
    }
    return find_rule(l.op)(&b, handled);
}

const cuda_kernel cuda_backward_kernels[] = {
    {"Backward", k_backward, free_bwd_state},
    {NULL, NULL, NULL},
};

/* dnnl_backward.h: the Backward node's f32 fast path on the CPU (dnnl_backward*.c), shared. */
#ifndef GRAFT_CPU_DNNL_BACKWARD_H
#define GRAFT_CPU_DNNL_BACKWARD_H

#include "cpu_backend.h"

/* One Backward call seen as its forward op's gradient (layout in src/ops/backward.h). Every
 * present tensor is f32; dout[i] NULL: no gradient flows into output i (zero); din[i] NULL: the
 * gradient of input i is not wanted. The node carries the forward's attributes. */
typedef struct bwd_call {
    const op_call *call;
    const tensor *const *in; /* the forward inputs (n_in; NULL where omitted) */
    int n_in;
    const tensor *const *out; /* the forward outputs (n_out) */
    int n_out;
    const tensor *const *dout; /* n_out */
    tensor *const *din;        /* n_in */
    int threads;               /* OpenMP threads for graft's own loops */
} bwd_call;

/* c (m, n) = alpha * op(a) * op(b) + beta * c, row-major, op: 'N' or 'T' (oneDNN's sgemm, which
 * threads itself outside a parallel region and runs on one thread inside one). Returns false
 * when oneDNN reports an error. Handles empty m, n and k. */
bool bwd_sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* An error naming the node for a failed sgemm or allocation. */
graft_status bwd_fail(const bwd_call *b, const char *what);

/* The rules; *handled = false for a case they leave to the reference kernel. */
graft_status bwd_gemm(const bwd_call *b, bool *handled);
graft_status bwd_matmul(const bwd_call *b, bool *handled);
graft_status bwd_conv(const bwd_call *b, bool *handled); /* dnnl_backward_conv.c */

#endif

/* fuse_bert_launch.h: launchers of the kernels of BERT's fused groups (fuse_bert.cu). */
#ifndef GRAFT_CUDA_FUSE_BERT_LAUNCH_H
#define GRAFT_CUDA_FUSE_BERT_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher enqueues on `stream` and returns cudaGetLastError() after its launch
 * (cudaErrorInvalidValue for a dtype or size it has no kernel for). dt is F32, F16 or BF16;
 * the math is f32 with one rounding on store. Scalar operands are device pointers to one
 * element of dt, read by the kernel: the host never needs their values. */

/* What the GELU kernel computes on each element v. */
enum {
    /* PyTorch's exported chain Div, Erf, Add, Mul, Mul: ((erf(v / c0) + c1) * v) * c2, in
     * the nodes' order of operations. */
    CUDA_BERT_GELU_CHAIN = 0,
    CUDA_BERT_GELU_ERF = 1,  /* Gelu: 0.5 v (1 + erf(v / sqrt 2)) */
    CUDA_BERT_GELU_TANH = 2, /* Gelu approximate="tanh" */
};

/* y[i] = gelu(y[i]) in place over count elements; c0, c1, c2 only for CUDA_BERT_GELU_CHAIN
 * (else NULL). */
cudaError_t cuda_bert_gelu(void *y, int64_t count, int form, const void *c0, const void *c1,
                           const void *c2, graft_dtype dt, cudaStream_t stream);

/* Softmax over the last axis of (x op scale) + mask, with x contiguous of shape
 * (d0, d1, d2, n): op is division (scale_mul false) or multiplication by the scalar *scale.
 * mask element (i0, i1, i2, j) is at i0 * ms[0] + i1 * ms[1] + i2 * ms[2] + j * ms[3] (a
 * stride is 0 along a broadcast dim). n <= 1024. y may be x. */
cudaError_t cuda_bert_scaled_masked_softmax(const void *x, const void *scale, bool scale_mul,
                                            const void *mask, const int64_t ms[4], void *y,
                                            int64_t d0, int64_t d1, int64_t d2, int64_t n,
                                            graft_dtype dt, cudaStream_t stream);

/* LayerNormalization as exporters before opset 17 write it (ReduceMean, Sub, Pow 2,
 * ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias) over `rows` contiguous rows of n <= 1024:
 * y = d / sqrt(mean(d^2) + eps) * scale + bias with d = s - mean(s), s = x (+ res when res is not
 * NULL, rounded to dt as the Add would). eps is a device scalar; scale and bias hold n values. */
cudaError_t cuda_bert_layernorm_decomposed(const void *x, const void *res, const void *eps,
                                           const void *scale, const void *bias, void *y,
                                           int64_t rows, int64_t n, graft_dtype dt,
                                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/* attention_launch.h: launchers of the fused attention kernels (attention.cu, attention_mma.cu). */
#ifndef GRAFT_CUDA_ATTENTION_LAUNCH_H
#define GRAFT_CUDA_ATTENTION_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element strides of attention's operands: q, v and out by (batch, head, row), their head dim
 * contiguous; k by (batch, head, key, dim), with either its keys (k[2] == 1: K^T as a dense
 * (d, s) matrix per head) or its head dim (k[3] == 1: K as rows) contiguous. */
typedef struct cuda_attn_strides {
    int64_t q[3], v[3], out[3], k[4];
} cuda_attn_strides;

/* The dense layout cuda_attention takes: q, v, out (b, h, s, d), kt (b, h, d, s). */
void cuda_attn_strides_dense(cuda_attn_strides *st, int64_t h, int64_t s, int64_t d);

/* Whether cuda_attention has a kernel for bh = batch * heads, sequence s, head dim d and dtype
 * dt: F16 or BF16, d 32, 64 or 128, bh < 2^31, s < 65536 * 64 (and bh * ceil(s / 64) < 2^31). */
bool cuda_attention_supported(int64_t bh, int64_t s, int64_t d, graft_dtype dt);

/* out = softmax((q kt op scale) + mask) v per (batch, head), the softmax over the keys, with
 * q (bh, s, d), kt (bh, d, s) (the keys transposed), v (bh, s, d) and out (bh, s, d) contiguous,
 * bh = b * h. op divides by *scale (scale_mul false) or multiplies by it; scale is a device
 * scalar of dt. mask element (batch i0, head i1, query i, key j) is at
 * i0 * ms[0] + i1 * ms[1] + i * ms[2] + j * ms[3] (0 along a broadcast dim). The scores and the
 * sums are f32; the probabilities are rounded to dt before the product with v (as a separate
 * Softmax node's half output would be). Enqueued on stream; returns cudaGetLastError(). */
cudaError_t cuda_attention(const void *q, const void *kt, const void *v, const void *scale,
                           bool scale_mul, const void *mask, const int64_t ms[4], void *out,
                           int64_t b, int64_t h, int64_t s, int64_t d, graft_dtype dt,
                           cudaStream_t stream);

/* The register-tiled kernel behind cuda_attention (attention_mma.cu), for q, kt, v and out
 * 16-byte aligned, s % 8 == 0 and d 32, 64 or 128; cuda_attention takes the WMMA kernel
 * otherwise. Same contract as cuda_attention. */
bool cuda_attention_mma_takes(const void *q, const void *kt, const void *v, const void *out,
                              int64_t s, int64_t d);
cudaError_t cuda_attention_mma(const void *q, const void *kt, const void *v, const void *scale,
                               bool scale_mul, const void *mask, const int64_t ms[4], void *out,
                               int64_t b, int64_t h, int64_t s, int64_t d, graft_dtype dt,
                               cudaStream_t stream);

/* The register-tiled kernel through strides (a Transpose before or after the attention read or
 * written in place): every pointer 16-byte aligned, every stride but the contiguous ones a
 * multiple of 8, s % 8 == 0, d 32, 64 or 128. Same contract as cuda_attention otherwise. */
bool cuda_attention_mma_takes_strided(const void *q, const void *k, const void *v, const void *out,
                                      const cuda_attn_strides *st, int64_t s, int64_t d);
cudaError_t cuda_attention_mma_strided(const void *q, const void *k, const void *v,
                                       const void *scale, bool scale_mul, const void *mask,
                                       const int64_t ms[4], void *out, const cuda_attn_strides *st,
                                       int64_t b, int64_t h, int64_t s, int64_t d, graft_dtype dt,
                                       cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

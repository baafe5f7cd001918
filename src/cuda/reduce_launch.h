/* reduce_launch.h: launchers of the reduce family's CUDA kernels (reduce.cu, reduce_sum.cu). */
#ifndef GRAFT_CUDA_REDUCE_LAUNCH_H
#define GRAFT_CUDA_REDUCE_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher enqueues on `stream` and returns cudaGetLastError() after its launches
 * (cudaErrorInvalidValue for a dtype it has no kernel for). Tensors are contiguous row-major and
 * viewed as (outer, n, inner): n elements along the processed axis, `inner` apart. Float dtypes
 * are F32, F16 and BF16, computed in f32 (sums of ReduceSum/ReduceMean/CumSum in f64). */

/* Softmax (or log-softmax) along n. */
cudaError_t cuda_softmax(const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                         bool log_form, graft_dtype dt, cudaStream_t stream);

/* LayerNormalization of `rows` contiguous rows of n: y = (x - mean) * inv_std * scale + bias.
 * scale and bias (bias may be NULL) hold n values of dtype dt. mean and inv_std (each may be
 * NULL) receive one value per row in stat_dt (F32 or BF16). Statistics are two-pass in f32. */
cudaError_t cuda_layernorm(const void *x, const void *scale, const void *bias, void *y, void *mean,
                           void *inv_std, graft_dtype stat_dt, int64_t rows, int64_t n, float eps,
                           graft_dtype dt, cudaStream_t stream);

/* The same on s = x + residual (s rounded to dt, as an Add node would), also writing s to sum
 * when sum is not NULL: a residual add fused into the normalisation (not used yet). */
cudaError_t cuda_add_layernorm(const void *x, const void *residual, const void *scale,
                               const void *bias, void *sum, void *y, int64_t rows, int64_t n,
                               float eps, graft_dtype dt, cudaStream_t stream);

/* How many pieces to split each reduced run into so that a reduction with few outputs still
 * fills the GPU; above 1, cuda_reduce_sum needs outer * inner * splits * 8 bytes of partials. */
int64_t cuda_reduce_sum_splits(int64_t outer, int64_t n, int64_t inner, int sm_count);

/* y[o, i] = sum over j of x[o, j, i] (divided by n when mean). dt is a float dtype, I32 or I64
 * (integers wrap around; their mean truncates toward zero). n >= 1. */
cudaError_t cuda_reduce_sum(const void *x, void *y, void *partials, int64_t outer, int64_t n,
                            int64_t inner, int64_t splits, bool mean, graft_dtype dt,
                            cudaStream_t stream);

/* Fill count elements of a float dtype with NaN (a mean over nothing). */
cudaError_t cuda_fill_nan(void *y, int64_t count, graft_dtype dt, cudaStream_t stream);

/* y[o, i] = the index along n of the largest x[o, :, i]; NaN counts as the largest; ties go to
 * the first index, or the last with select_last. dt is a float dtype, I32 or I64. n >= 1. */
cudaError_t cuda_argmax(const void *x, int64_t *y, int64_t outer, int64_t n, int64_t inner,
                        bool select_last, graft_dtype dt, cudaStream_t stream);

/* Cumulative sum along n, optionally exclusive and / or from the end. dt is a float dtype, I32
 * or I64. */
cudaError_t cuda_cumsum(const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                        bool exclusive, bool reverse, graft_dtype dt, cudaStream_t stream);

/* The Reduce* kinds, numbered as src/ops/reduce.h's reduce_kind. */
enum {
    CUDA_REDUCE_SUM,
    CUDA_REDUCE_MEAN,
    CUDA_REDUCE_MAX,
    CUDA_REDUCE_MIN,
    CUDA_REDUCE_PROD,
    CUDA_REDUCE_L1,
    CUDA_REDUCE_L2,
    CUDA_REDUCE_SUM_SQUARE,
    CUDA_REDUCE_LOG_SUM,
    CUDA_REDUCE_LOG_SUM_EXP,
};

/* y[o, i] = the reduction of kind `kind` of x[o, :, i] over n >= 1 elements, accumulated in f64
 * for float dtypes (F32, F16, BF16) and in 64-bit wrapping integers for I32 and I64 (whose
 * kinds are Sum, Mean, Max, Min, Prod, L1 and SumSquare; the others give
 * cudaErrorInvalidValue). NaN propagates through Max and Min. */
cudaError_t cuda_reduce_kind(const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                             int kind, graft_dtype dt, cudaStream_t stream);

/* TopK along n: values (dt) and indices of the k largest (or smallest) of each x[o, :, i], in
 * order, ties by index; NaN above every number. dt is a float dtype, I32 or I64. Work grows as
 * outer * inner * n * n (each element counts the ones that beat it). */
cudaError_t cuda_topk(const void *x, void *values, int64_t *indices, int64_t outer, int64_t n,
                      int64_t inner, int64_t k, bool largest, graft_dtype dt, cudaStream_t stream);

/* BatchNormalization folded per group: scale_out = scale / sqrt(var + eps) and
 * shift_out = bias - mean * scale_out, computed in f64. Each parameter may be F32, F16, BF16 or
 * F64 (pdt[0..3]: scale, bias, mean, var), count values each. */
cudaError_t cuda_batchnorm_fold(const void *scale, const void *bias, const void *mean,
                                const void *var, const graft_dtype pdt[4], int64_t count,
                                double eps, float *scale_out, float *shift_out,
                                cudaStream_t stream);

/* y = x * scale[g] + shift[g] with g = (element / run) % groups, over total elements. */
cudaError_t cuda_batchnorm_apply(const void *x, void *y, const float *scale, const float *shift,
                                 int64_t total, int64_t groups, int64_t run, graft_dtype dt,
                                 cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

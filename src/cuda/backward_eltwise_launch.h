/* backward_eltwise_launch.h: launchers of the element-wise backward kernels (backward_eltwise.cu)
 * and, for C, the helpers the Backward rule files share (cuda_backward_eltwise.c). */
#ifndef GRAFT_CUDA_BACKWARD_ELTWISE_LAUNCH_H
#define GRAFT_CUDA_BACKWARD_ELTWISE_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher enqueues on `stream`, launches nothing for empty work and returns
 * cudaGetLastError() after its launches. All tensors are f32, dense and row-major; the math runs
 * in f64 (as the CPU reference's rules do) and sums accumulate in f64. */

/* ---- sums over broadcast axes ---------------------------------------------------------------- */

/* dst = scale * src summed over the axes along which dst was broadcast to src: src's dims after
 * dropping 1s, merged into alternating runs of kept and summed axes, outermost first, with
 * their element strides in src. */
typedef struct bw_reduce_plan {
    int n_kept, n_red;
    int64_t kept_dims[GRAFT_MAX_DIMS], kept_strides[GRAFT_MAX_DIMS];
    int64_t red_dims[GRAFT_MAX_DIMS], red_strides[GRAFT_MAX_DIMS];
    int64_t n_dst, n_sum; /* elements of dst; src elements summed into each */
    bool rows;            /* the innermost src axis is summed: lanes walk the summed elements */
    int64_t splits;       /* pieces each sum is split into (partials when > 1) */
    float scale;
} bw_reduce_plan;

/* Plan src (ndim, dims) summed to dst (sndim, sdims: right-aligned, each dim 1 or src's).
 * False when dst's shape does not broadcast to src's. */
bool bw_reduce_plan_make(int ndim, const int64_t *dims, int sndim, const int64_t *sdims,
                         float scale, int sm_count, bw_reduce_plan *p);
/* Device scratch bw_reduce_to needs (0: none). */
size_t bw_reduce_scratch_bytes(const bw_reduce_plan *p);
/* dst (n_dst) = the planned sums of src; scratch: bw_reduce_scratch_bytes of device memory. */
cudaError_t bw_reduce_to(const float *src, float *dst, void *scratch, const bw_reduce_plan *p,
                         cudaStream_t stream);

/* ---- strided gathers and broadcasts ---------------------------------------------------------- */

/* dst (dense over dims, outermost first) = scale * src at offset sum(idx[d] * strides[d]). */
typedef struct bw_view {
    int ndim; /* 0..GRAFT_MAX_DIMS */
    int64_t dims[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS];
} bw_view;
cudaError_t bw_gather(const float *src, float *dst, const bw_view *v, float scale,
                      cudaStream_t stream);

/* ---- one-input activations: dx = dy * f'(x) ------------------------------------------------- */

typedef enum bw_unary_op {
    BW_RELU,
    BW_GELU,
    BW_GELU_TANH,
    BW_TANH,
    BW_SIGMOID,
    BW_HARD_SIGMOID, /* alpha, beta */
    BW_HARD_SWISH,
    BW_ELU, /* alpha */
    BW_SOFTPLUS,
    BW_SQRT,
    BW_ERF,
    BW_NEG,
    BW_EXP,
    BW_CLIP /* dy where lo <= x <= hi (see bw_clip_bounds) */
} bw_unary_op;

/* Clip's bounds: a device pointer to an f32 value, or NULL for the host value beside it. */
typedef struct bw_clip_bounds {
    const float *lo_dev, *hi_dev;
    float lo, hi;
} bw_clip_bounds;

/* dx (n) = dy (n) * f'(x (n)). clip: Clip's bounds (BW_CLIP only, else NULL). */
cudaError_t bw_unary(bw_unary_op op, const float *x, const float *dy, float *dx, int64_t n,
                     double alpha, double beta, const bw_clip_bounds *clip, cudaStream_t stream);

/* ---- two-input ops with broadcasting -------------------------------------------------------- */

typedef enum bw_binary_op { BW_MUL, BW_DIV, BW_POW, BW_PRELU } bw_binary_op;

/* y's elements (n of them) with A's and B's element offsets: dims outermost first, strides 0
 * along broadcast dims. */
typedef struct bw_bcast {
    int ndim; /* 1..GRAFT_MAX_DIMS */
    int64_t n;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t strides[2][GRAFT_MAX_DIMS];
} bw_bcast;

/* ga (n) and gb (n), each in y's full shape (either may be NULL), from dy (n) = the partials of
 * a op b times dy. b is f32 except for BW_POW (F32, F64, I32 or I64: b_dt). Pow as the CPU: no
 * base gradient where the exponent is 0, none to the exponent where the base is 0 and the
 * exponent >= 0. PRelu: a is X, b the slope. */
cudaError_t bw_binary(bw_binary_op op, const float *a, const void *b, graft_dtype b_dt,
                      const float *dy, float *ga, float *gb, const bw_bcast *plan,
                      cudaStream_t stream);

/* Where: gx = cond ? dy : 0 and gy = cond ? 0 : dy (n each, y's full shape; either may be NULL),
 * the condition (bool bytes) read through plan's first strides. */
cudaError_t bw_where(const uint8_t *cond, const float *dy, float *gx, float *gy,
                     const bw_bcast *plan, cudaStream_t stream);

/* ---- normalisations ------------------------------------------------------------------------- */

/* Softmax over x viewed as (outer, n, inner): dx = y * (dy - sum over n of dy * y). */
cudaError_t bw_softmax(const float *y,  // (outer, n, inner)
                       const float *dy, // (outer, n, inner)
                       float *dx,       // (outer, n, inner)
                       int64_t outer, int64_t n, int64_t inner, cudaStream_t stream);

/* LayerNormalization over rows of n, mean and 1/std recomputed from x: dx (or NULL) and
 * dyxhat = dy * (x - mean) / std (or NULL), both (rows, n); scale (n). */
cudaError_t bw_layernorm(const float *x,     // (rows, n)
                         const float *dy,    // (rows, n)
                         const float *scale, // (n)
                         int64_t rows, int64_t n, double eps,
                         float *dx,     // (rows, n) or NULL
                         float *dyxhat, // (rows, n) or NULL
                         cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#ifndef __cplusplus
#include "cuda_backward.h"

/* The C side the rule files share (cuda_backward_eltwise.c). dst (its own shape) = scale *
 * src (ndim, dims: device f32) summed over the axes along which dst's shape broadcasts to dims;
 * *handled = false when it does not (nothing enqueued). */
graft_status cuda_bwd_reduce_to(const cuda_bwd *b, const float *src, int ndim, const int64_t *dims,
                                tensor *dst, float scale, bool *handled);
/* dst = src, n floats on the stream (nothing when dst is src). */
graft_status cuda_bwd_copy(const cuda_bwd *b, float *dst, const float *src, int64_t n);
/* dst = 0. */
graft_status cuda_bwd_zero(const cuda_bwd *b, tensor *dst);
/* A launcher's result as a status naming the node. */
graft_status cuda_bwd_launched(const cuda_bwd *b, cudaError_t err, const char *what);
/* The forward node as the shared plan helpers expect it: op type and opset of the forward. */
ir_node cuda_bwd_fwd_node(const cuda_bwd *b);
/* Whether t's data can be read on the host (host memory), not only on the device. */
bool cuda_bwd_host_readable(const tensor *t);
/* The shape, data-movement and reduction rules (cuda_backward_shape.c); *handled = false for an
 * op they do not know. */
graft_status cuda_bwd_shape(const cuda_bwd *b, bool *handled);
#endif

#endif

/* backward_conv_launch.h: launchers of backward_conv.cu's f32 kernels for the backward rules of
 * Conv, the pools and BatchNormalization (cuda_backward_conv.c), plain C interface. */
#ifndef GRAFT_CUDA_BACKWARD_CONV_LAUNCH_H
#define GRAFT_CUDA_BACKWARD_CONV_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "conv_util_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pool window seen as 3-D (leading axes of size 1, one tap): src/ops/grad_util.h's gr_window
 * over `planes` = N * C planes. */
typedef struct bwd_pool_geom {
    int64_t planes;
    int64_t in[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3], out[3];
} bwd_pool_geom;

/* MaxPool: dx (planes, in...) is zeroed, then each dy (planes, out...) goes to its window's first
 * maximum of x (planes, in...) in scan order (a NaN first tap wins). `disjoint`: no two windows
 * share an input element (plain stores; else atomic adds). */
cudaError_t bwd_maxpool_launch(const float *x, const float *dy, float *dx, bwd_pool_geom g,
                               bool disjoint, cudaStream_t stream);

/* AveragePool: dx (planes, in...) = the sum over the windows holding each element of dy (planes,
 * out...) / the window's divisor (count_include_pad: the taps inside the pads; else the taps
 * inside the input). One thread per input element: deterministic. */
cudaError_t bwd_avgpool_launch(const float *dy, float *dx, bwd_pool_geom g, bool include_pad,
                               cudaStream_t stream);

/* GlobalAveragePool (is_max false): dx (planes, size) = dy (planes) / size. GlobalMaxPool: dy at
 * the plane's first maximum of x (planes, size) in memory order (element 0 when it is NaN), 0
 * elsewhere. */
cudaError_t bwd_global_pool_launch(const float *x, const float *dy, float *dx, int64_t planes,
                                   int64_t size, bool is_max, cudaStream_t stream);

/* db (channels) = dy (n, channels, inner) summed over n and inner (in double). */
cudaError_t bwd_channel_sum_launch(const float *dy, float *db, int64_t n, int64_t channels,
                                   int64_t inner, cudaStream_t stream);

/* dst (planes, in...) = the part of src (planes, out...) that starts at `before` on each axis:
 * the gradient of conv_pad_launch's padding. */
cudaError_t bwd_crop_launch(const float *src, float *dst, conv_pad_geom g, cudaStream_t stream);

/* BatchNormalization in inference mode over x (n, groups, run) with per-group scale, mean, var:
 * dx = dy * scale / sqrt(var + eps); per group dscale = sum dy * (x - mean) / sqrt(var + eps),
 * dbias = sum dy, dmean = -scale / sqrt(var + eps) * dbias, dvar = -scale / (2 (var + eps)) *
 * dscale. Each output may be NULL (not wanted). */
typedef struct bwd_bn_args {
    const float *x, *dy, *scale, *mean, *var; /* (n, groups, run), then (groups) each */
    float *dx;                                /* (n, groups, run) */
    float *dscale, *dbias, *dmean, *dvar;     /* (groups) each */
    int64_t n, groups, run;
    double eps;
} bwd_bn_args;

cudaError_t bwd_batchnorm_launch(const bwd_bn_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

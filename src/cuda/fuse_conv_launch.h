/* fuse_conv_launch.h: the launcher of the epilogue kernel of fused Conv groups (fuse_conv.cu). */
#ifndef GRAFT_CUDA_FUSE_CONV_LAUNCH_H
#define GRAFT_CUDA_FUSE_CONV_LAUNCH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* In place on y (outer, channels, inner), in f32 and rounded once:
 *   v = y + bias[channel] (when bias), v = v + z (when z, same shape as y), y = clamp(v, lo, hi)
 * with Clip's order (max with lo first, then min with hi; NaN passes). lo = -inf, hi = +inf
 * for no activation, lo = 0 for Relu. dtype F32, F16 or BF16 for all of y, bias and z. */
cudaError_t conv_epilogue_launch(void *y, const void *bias, const void *z, int64_t outer,
                                 int64_t channels, int64_t inner, float lo, float hi,
                                 graft_dtype dtype, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

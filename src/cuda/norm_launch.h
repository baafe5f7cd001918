/* norm_launch.h: launchers of the kernels in norm.cu (InstanceNormalization, GroupNormalization
 * and Resize's passes), plain C interface. */
#ifndef GRAFT_CUDA_NORM_LAUNCH_H
#define GRAFT_CUDA_NORM_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x viewed as (n, groups, chans_per_group * spatial): each (sample, group) normalised with its
 * own mean and variance (two passes in f32), then y = v * scale[p] + bias[p], p the channel
 * (or the group when per_group). dt is F32, F16 or BF16 (else cudaErrorInvalidValue). */
cudaError_t cuda_group_norm(const void *x, const void *scale, const void *bias, void *y, int64_t n,
                            int64_t groups, int64_t chans_per_group, int64_t spatial,
                            bool per_group, float eps, graft_dtype dt, cudaStream_t stream);

/* One Resize pass along one axis of x viewed as (outer, in, inner) into y (outer, out, inner),
 * with ONNX's taps (src/ops/resize.c's, computed per output element in double): mode 0
 * nearest, 1 linear, 2 cubic; coord and rounding as resize_coord / resize_rounding. x_dt and
 * y_dt are F32, F16 or BF16 (a pass between two passes reads and writes F32). No antialias. */
typedef struct cuda_resize_axis {
    int mode, coord, rounding;
    bool exclude_outside;
    double cubic_a, extrapolation;
    int64_t outer, in, out, inner;
    double scale, roi_start, roi_end;
} cuda_resize_axis;

cudaError_t cuda_resize_pass(const void *x, graft_dtype x_dt, void *y, graft_dtype y_dt,
                             const cuda_resize_axis *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

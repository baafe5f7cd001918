/* conv_util_launch.h: launchers of the small kernels around cuDNN and cuBLASLt: explicit padding
 * of an image, a per-channel bias add, and the broadcast copy of Gemm's C. */
#ifndef GRAFT_CUDA_CONV_UTIL_LAUNCH_H
#define GRAFT_CUDA_CONV_UTIL_LAUNCH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An image (planes, in[0], in[1], in[2]) copied into a larger one (planes, out[0], out[1],
 * out[2]) with before[i] padding elements in front of axis i; the rest is padding. */
typedef struct conv_pad_geom {
    int64_t planes; /* N * C */
    int64_t in[3];
    int64_t out[3];
    int64_t before[3];
} conv_pad_geom;

/* y = x padded with the element whose bits are fill_bits; elem_bytes is 2 or 4. */
cudaError_t conv_pad_launch(const void *x, void *y, conv_pad_geom g, int elem_bytes,
                            uint32_t fill_bits, cudaStream_t stream);

/* y (outer, channels, inner) += bias (channels), in f32, rounded once; dtype F32, F16 or BF16. */
cudaError_t conv_bias_add_launch(void *y, const void *bias, int64_t outer, int64_t channels,
                                 int64_t inner, graft_dtype dtype, cudaStream_t stream);

/* y (rows, cols) = c (c_rows, c_cols) broadcast, where c_rows is 1 or rows and c_cols is 1 or
 * cols: a bit copy, elem_bytes 2 or 4. */
cudaError_t gemm_broadcast_c_launch(const void *c, int64_t c_rows, int64_t c_cols, void *y,
                                    int64_t rows, int64_t cols, int elem_bytes,
                                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/* jpeg_resize_launch.h: the launcher of jpeg_resize.cu (decoded RGB images to model inputs on
 * the GPU: Pillow's resize, center crop, normalisation and layout), plain C interface. */
#ifndef GRAFT_CUDA_JPEG_RESIZE_LAUNCH_H
#define GRAFT_CUDA_JPEG_RESIZE_LAUNCH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One image of a batch. Its tables (int32, at coefs + coef) hold, for the crop's columns then
 * its rows: first[crop], count[crop], w[crop * taps] (src/data/resample.c's fixed-point
 * weights of the resized image's column/row the crop takes; count 0: the crop's padding, byte
 * 0). A pass the CPU skips (size unchanged) is the identity: count 1, weight 1 << 22. */
typedef struct jpeg_item {
    const uint8_t *src; /* (height, width, 3) decoded pixels, device */
    int width, height;  /* of src */
    int vertical_first; /* resample_vertical_first: the vertical pass rounds to bytes first */
    int taps_h, taps_v; /* stride of the weight tables */
    int64_t coef;       /* offset of the tables in coefs (int32 units) */
    int64_t slot;       /* the image's index in dst */
} jpeg_item;

/* dst kinds: F32 / F16 write lut[c * 256 + byte] (the bits of ((v / 255 - mean) / std) as f32,
 * or as f16), U8 the byte itself. */
enum { JPEG_OUT_F32 = 0, JPEG_OUT_F16 = 1, JPEG_OUT_U8 = 2 };

/* For each of n items: dst slot (3, crop, crop) or (crop, crop, 3) with nhwc. items, coefs and
 * lut are device memory. */
cudaError_t cuda_jpeg_resize(const jpeg_item *items, int n, const int32_t *coefs,
                             const uint32_t *lut, void *dst, int kind, int nhwc, int crop,
                             cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/* transforms.h: image transforms with torchvision's semantics (on PIL images): resize of the
 * shorter side with antialiasing, center crop, random-resized-crop, horizontal flip, and the
 * final conversion to a normalised float tensor (CHW or HWC, f32 or f16). */
#ifndef GRAFT_DATA_TRANSFORMS_H
#define GRAFT_DATA_TRANSFORMS_H

#include <stdbool.h>
#include <stdint.h>

#include "graft.h"
#include "image.h"

/* Functions that make an image allocate out->pixels (release with image_free; out must not be
 * the input) and leave *out zeroed on error. */

/* torchvision.transforms.Resize(size) on a PIL image (bilinear, antialiased as PIL does): the
 * shorter side becomes `size`, the other keeps the aspect ratio (int(size * long / short)). */
graft_status transform_resize_shorter(image_u8 *out, const image_u8 *in, int size, graft_err *e);
/* Resize to exactly (width, height), bilinear with PIL's antialiasing, byte-exact with Pillow
 * 13 (pass order included: see resample.c). */
graft_status transform_resize(image_u8 *out, const image_u8 *in, int width, int height,
                              graft_err *e);
/* The size transform_resize_shorter resizes a width x height image to. */
graft_status transform_shorter_size(int width, int height, int size, int *out_w, int *out_h,
                                    graft_err *e);
/* Where CenterCrop's box starts along an axis of n pixels (negative: padded in front). */
int transform_center_offset(int n, int crop);

/* What transform_resize computes, for other implementations of it (the GPU's, cuda_jpeg.c).
 * Fixed point: weights scaled by 2^RESAMPLE_FIX_BITS; a pass's output byte is
 * clamp((2^(FIX-1) + sum(pixel * w)) >> FIX, 0, 255). */
#define RESAMPLE_FIX_BITS 22
/* The weights of one 1-D pass: for each output index, the first input index it reads, how many
 * it reads, and that many fixed-point weights (stride `taps`). */
typedef struct resample_coeffs {
    int taps;   /* longest kernel: 2 * ceil(support) + 1 */
    int *first; /* (out_size) */
    int *count; /* (out_size) */
    int32_t *w; /* (out_size, taps) */
} resample_coeffs;
graft_status resample_coeffs_make(resample_coeffs *c, int in_size, int out_size, graft_err *e);
void resample_coeffs_free(resample_coeffs *c);
/* Whether a resize that changes both sizes runs the vertical pass first (else horizontal
 * first; each pass rounds to bytes). */
bool resample_vertical_first(int in_w, int in_h, int out_w, int out_h);

/* torchvision CenterCrop(size): crop_top = round((h - size) / 2), pads with 0 when smaller. */
graft_status transform_center_crop(image_u8 *out, const image_u8 *in, int width, int height,
                                   graft_err *e);
/* The box torchvision's RandomResizedCrop.get_params picks (scale and ratio ranges, 10 tries,
 * then the central fallback), drawn from *rng (src/core/rng.h). */
void transform_rrc_box(int *x, int *y, int *w, int *h, int img_w, int img_h, double scale_min,
                       double scale_max, double ratio_min, double ratio_max, uint64_t *rng);
/* Crop the box then resize to (width, height). */
graft_status transform_crop_resize(image_u8 *out, const image_u8 *in, int x, int y, int w, int h,
                                   int width, int height, graft_err *e);
void transform_hflip(image_u8 *img);
/* ToTensor + Normalize: (pixel / 255 - mean[c]) / std[c], written as CHW (nhwc false) or HWC,
 * f32 or f16, into dst (3 * height * width elements of dtype). */
/* The pixels as they are, uint8, written as CHW (nhwc false) or HWC into dst (3 * height *
 * width bytes): what a model with a uint8 input (graft_model_set_uint8_input) takes. */
graft_status transform_to_u8(void *dst, bool nhwc, const image_u8 *img, graft_err *e);
graft_status transform_to_tensor(void *dst, graft_dtype dtype, bool nhwc, const image_u8 *img,
                                 const float mean[3], const float std[3], graft_err *e);

/* One image file as options say (decode, resize and crop or random-resized-crop + flip, then
 * normalise) into dst; seed drives the augmentation (image_folder.c). */
graft_status image_prepare(const char *path, const graft_image_options *o, void *dst, uint64_t seed,
                           graft_err *e);
/* The same from an encoded image in memory (`what` names it in errors), never augmented. */
graft_status image_prepare_memory(const void *data, size_t size, const char *what,
                                  const graft_image_options *o, void *dst, graft_err *e);

#endif

/* transforms.c: torchvision's crops, flip, random-resized-crop box and tensor conversion. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/rng.h"
#include "transforms.h"

/* Python's round() on a double: to nearest, ties to even. */
static double round_half_even(double v) {
    double f = floor(v);
    double d = v - f;
    if (d > 0.5) return f + 1.0;
    if (d < 0.5) return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0;
}

graft_status transform_shorter_size(int width, int height, int size, int *out_w, int *out_h,
                                    graft_err *e) {
    *out_w = *out_h = 0;
    if (width <= 0 || height <= 0 || size <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "transforms: resize of the shorter side to %d of an empty image or to a "
                       "non-positive size",
                       size);
    bool w_short = width <= height;
    int64_t shorter = w_short ? width : height;
    int64_t longer = w_short ? height : width;
    /* torchvision: int(size * long / short), a true division then truncation. */
    double other = (double)((int64_t)size * longer) / (double)shorter;
    if (other >= (double)INT_MAX)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "transforms: resizing %dx%d to shorter side %d is too large", width, height,
                       size);
    *out_w = w_short ? size : (int)other;
    *out_h = w_short ? (int)other : size;
    return GRAFT_OK;
}

graft_status transform_resize_shorter(image_u8 *out, const image_u8 *in, int size, graft_err *e) {
    memset(out, 0, sizeof *out);
    int w = 0, h = 0;
    TRY(transform_shorter_size(in ? in->width : 0, in ? in->height : 0, size, &w, &h, e));
    return transform_resize(out, in, w, h, e);
}

/* out (h, w, 3) = in's pixels from (x, y) on; what falls outside `in` is 0 (PIL's crop). */
static graft_status crop_box(image_u8 *out, const image_u8 *in, int x, int y, int w, int h,
                             graft_err *e) {
    memset(out, 0, sizeof *out);
    if (!in || !in->pixels || in->width <= 0 || in->height <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: cannot crop an empty image");
    if (w <= 0 || h <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: cannot crop a %dx%d box", w, h);
    if ((int64_t)w * h > IMAGE_MAX_PIXELS)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "transforms: a %dx%d crop = %lld pixels is over the limit of %d", w, h,
                       (long long)w * h, IMAGE_MAX_PIXELS);
    uint8_t *dst = calloc((size_t)w * h * 3, 1); // (h, w, 3)
    if (!dst) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "transforms: out of memory cropping");
    /* Columns [c0, c1) of the box lie inside the image. */
    int64_t c0 = x < 0 ? -(int64_t)x : 0;
    int64_t c1 = (int64_t)in->width - x < w ? (int64_t)in->width - x : w;
    for (int r = 0; r < h && c1 > c0; r++) {
        int64_t sy = (int64_t)y + r;
        if (sy < 0 || sy >= in->height) continue;
        memcpy(dst + ((size_t)r * w + (size_t)c0) * 3,
               in->pixels + ((size_t)sy * in->width + (size_t)(x + c0)) * 3, (size_t)(c1 - c0) * 3);
    }
    out->width = w;
    out->height = h;
    out->pixels = dst;
    return GRAFT_OK;
}

/* Offset of the crop along one axis: torchvision pads (crop - n) // 2 in front when the crop is
 * larger, else starts at round((n - crop) / 2) with Python's ties-to-even. */
int transform_center_offset(int n, int crop) {
    if (crop > n) return -((crop - n) / 2);
    return (int)round_half_even((n - crop) / 2.0);
}

graft_status transform_center_crop(image_u8 *out, const image_u8 *in, int width, int height,
                                   graft_err *e) {
    memset(out, 0, sizeof *out);
    if (!in) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: center crop of NULL");
    return crop_box(out, in, transform_center_offset(in->width, width),
                    transform_center_offset(in->height, height), width, height, e);
}

void transform_rrc_box(int *x, int *y, int *w, int *h, int img_w, int img_h, double scale_min,
                       double scale_max, double ratio_min, double ratio_max, uint64_t *rng) {
    *x = *y = *w = *h = 0;
    if (img_w <= 0 || img_h <= 0) return;
    double area = (double)img_w * img_h;
    double lr0 = log(ratio_min), lr1 = log(ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (scale_min + (scale_max - scale_min) * rng_uniform(rng));
        double aspect = exp(lr0 + (lr1 - lr0) * rng_uniform(rng));
        double cw = round_half_even(sqrt(target * aspect));
        double ch = round_half_even(sqrt(target / aspect));
        if (cw > 0 && cw <= img_w && ch > 0 && ch <= img_h) {
            *w = (int)cw;
            *h = (int)ch;
            *y = (int)rng_below(rng, (uint64_t)(img_h - *h + 1));
            *x = (int)rng_below(rng, (uint64_t)(img_w - *w + 1));
            return;
        }
    }
    /* Fallback: the central crop, the image's ratio clamped into [ratio_min, ratio_max]. */
    double rmin = ratio_min < ratio_max ? ratio_min : ratio_max;
    double rmax = ratio_min < ratio_max ? ratio_max : ratio_min;
    double in_ratio = (double)img_w / (double)img_h;
    *w = img_w;
    *h = img_h;
    if (in_ratio < rmin) {
        *h = (int)round_half_even(img_w / rmin);
    } else if (in_ratio > rmax) {
        *w = (int)round_half_even(img_h * rmax);
    }
    *y = (img_h - *h) / 2;
    *x = (img_w - *w) / 2;
}

graft_status transform_crop_resize(image_u8 *out, const image_u8 *in, int x, int y, int w, int h,
                                   int width, int height, graft_err *e) {
    memset(out, 0, sizeof *out);
    image_u8 crop;
    TRY(crop_box(&crop, in, x, y, w, h, e));
    graft_status st = transform_resize(out, &crop, width, height, e);
    free(crop.pixels);
    return st;
}

void transform_hflip(image_u8 *img) {
    if (!img || !img->pixels) return;
    for (int r = 0; r < img->height; r++) {
        uint8_t *row = img->pixels + (size_t)r * img->width * 3;
        for (int a = 0, b = img->width - 1; a < b; a++, b--) {
            for (int c = 0; c < 3; c++) {
                uint8_t t = row[3 * a + c];
                row[3 * a + c] = row[3 * b + c];
                row[3 * b + c] = t;
            }
        }
    }
}

/* ToTensor divides the byte by 255 in f32, Normalize subtracts the mean and divides by the std,
 * also in f32: a 256-entry table per channel gives the same bits for every pixel. */
graft_status transform_to_tensor(void *dst, graft_dtype dtype, bool nhwc, const image_u8 *img,
                                 const float mean[3], const float std[3], graft_err *e) {
    if (!dst || !img || !img->pixels || img->width <= 0 || img->height <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: to_tensor of an empty image");
    if (dtype != GRAFT_DTYPE_F32 && dtype != GRAFT_DTYPE_F16)
        return err_set(e, GRAFT_E_DTYPE, "transforms: to_tensor writes F32 or F16, not dtype %d",
                       (int)dtype);
    for (int c = 0; c < 3; c++)
        if (!(std[c] != 0.0f))
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: normalisation std[%d] is %g",
                           c, (double)std[c]);
    float lut[3][256];
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) lut[c][v] = ((float)v / 255.0f - mean[c]) / std[c];
    size_t plane = (size_t)img->width * img->height;
    float *f32 = dtype == GRAFT_DTYPE_F32 ? dst : NULL;    // (3, H, W) or (H, W, 3)
    uint16_t *f16 = dtype == GRAFT_DTYPE_F16 ? dst : NULL; // (3, H, W) or (H, W, 3)
    for (size_t i = 0; i < plane; i++) {
        for (int c = 0; c < 3; c++) {
            float v = lut[c][img->pixels[i * 3 + (size_t)c]];
            size_t at = nhwc ? i * 3 + (size_t)c : (size_t)c * plane + i;
            if (f32)
                f32[at] = v;
            else
                f16[at] = f32_to_f16(v);
        }
    }
    return GRAFT_OK;
}

graft_status transform_to_u8(void *dst, bool nhwc, const image_u8 *img, graft_err *e) {
    if (!dst || !img || !img->pixels || img->width <= 0 || img->height <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: to_u8 of an empty image");
    size_t plane = (size_t)img->width * img->height;
    uint8_t *out = dst; // (3, H, W) or (H, W, 3)
    if (nhwc) {
        memcpy(out, img->pixels, plane * 3);
        return GRAFT_OK;
    }
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++) out[(size_t)c * plane + i] = img->pixels[i * 3 + (size_t)c];
    return GRAFT_OK;
}

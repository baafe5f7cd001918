/* resample.c: antialiased bilinear resize of 8-bit RGB images, computed as Pillow computes it. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms.h"

/* Pillow's 8-bit path works in fixed point: each weight is scaled by 2^22 (32 bits minus 8 for
 * the pixel and 2 for headroom), the accumulator starts at half a unit, and the sum shifted
 * right by 22 and clamped is the output byte. The same precision gives the same bytes. */
#define FIX_BITS RESAMPLE_FIX_BITS

typedef resample_coeffs pass_coeffs;

void resample_coeffs_free(resample_coeffs *c) {
    if (!c) return;
    free(c->first);
    free(c->count);
    free(c->w);
    memset(c, 0, sizeof *c);
}

/* The triangle ("bilinear") filter, support 1. */
static double triangle(double t) {
    if (t < 0.0) t = -t;
    return t < 1.0 ? 1.0 - t : 0.0;
}

/* Scaled-to-integer weight, rounding half away from zero as Pillow's normalisation does. */
static int32_t to_fixed(double k) {
    double s = k * (double)(1 << FIX_BITS);
    return (int32_t)(k < 0 ? s - 0.5 : s + 0.5);
}

/* (transforms.h) Weights mapping in_size samples onto out_size: output i is centred at (i + 0.5) *
 * scale in input coordinates; when shrinking, the filter is stretched by the scale (antialiasing).
 * The double-precision weights of each output are normalised to sum 1 before going to fixed point.
 */
graft_status resample_coeffs_make(resample_coeffs *c, int in_size, int out_size, graft_err *e) {
    memset(c, 0, sizeof *c);
    double scale = (double)in_size / out_size;
    double fscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * fscale;
    int taps = (int)ceil(support) * 2 + 1;
    if ((size_t)out_size > SIZE_MAX / sizeof(double) / (size_t)taps)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "transforms: resize from %d to %d needs too many weights", in_size,
                       out_size);
    c->taps = taps;
    c->first = malloc((size_t)out_size * sizeof *c->first);
    c->count = malloc((size_t)out_size * sizeof *c->count);
    c->w = calloc((size_t)out_size * (size_t)taps, sizeof *c->w);
    double *k = malloc((size_t)taps * sizeof *k); // (taps) one output's weights
    if (!c->first || !c->count || !c->w || !k) {
        free(k);
        resample_coeffs_free(c);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "transforms: out of memory for resize weights");
    }
    double inv = 1.0 / fscale;
    for (int o = 0; o < out_size; o++) {
        double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5);
        int hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in_size) hi = in_size;
        int n = hi - lo;
        double sum = 0.0;
        for (int j = 0; j < n; j++) {
            k[j] = triangle((j + lo - center + 0.5) * inv);
            sum += k[j];
        }
        for (int j = 0; j < n; j++) {
            if (sum != 0.0) k[j] /= sum;
            c->w[(size_t)o * taps + j] = to_fixed(k[j]);
        }
        c->first[o] = lo;
        c->count[o] = n;
    }
    free(k);
    return GRAFT_OK;
}

static uint8_t fixed_to_u8(int32_t acc) {
    int32_t v = acc >> FIX_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass over rows [row0, row0 + rows) of src (src_w wide) into dst (rows, out_w, 3). */
static void pass_horizontal(uint8_t *dst, const uint8_t *src, int src_w, int row0, int rows,
                            int out_w, const pass_coeffs *c) {
    for (int y = 0; y < rows; y++) {
        const uint8_t *line = src + (size_t)(row0 + y) * src_w * 3;
        uint8_t *o = dst + (size_t)y * out_w * 3;
        for (int x = 0; x < out_w; x++) {
            const int32_t *w = c->w + (size_t)x * c->taps;
            const uint8_t *p = line + (size_t)c->first[x] * 3;
            int32_t a0 = 1 << (FIX_BITS - 1), a1 = a0, a2 = a0;
            for (int j = 0; j < c->count[x]; j++) {
                a0 += p[3 * j + 0] * w[j];
                a1 += p[3 * j + 1] * w[j];
                a2 += p[3 * j + 2] * w[j];
            }
            o[3 * x + 0] = fixed_to_u8(a0);
            o[3 * x + 1] = fixed_to_u8(a1);
            o[3 * x + 2] = fixed_to_u8(a2);
        }
    }
}

/* Vertical pass: src (any rows, w wide) into dst (out_h, w, 3); row_shift is subtracted from the
 * first-row indices (src may hold only the rows the pass reads). */
static void pass_vertical(uint8_t *dst, const uint8_t *src, int w, int out_h, int row_shift,
                          const pass_coeffs *c) {
    size_t stride = (size_t)w * 3;
    for (int y = 0; y < out_h; y++) {
        const int32_t *wt = c->w + (size_t)y * c->taps;
        const uint8_t *base = src + (size_t)(c->first[y] - row_shift) * stride;
        uint8_t *o = dst + (size_t)y * stride;
        for (size_t i = 0; i < stride; i++) {
            int32_t a = 1 << (FIX_BITS - 1);
            for (int j = 0; j < c->count[y]; j++) a += base[(size_t)j * stride + i] * wt[j];
            o[i] = fixed_to_u8(a);
        }
    }
}

static graft_status check_image(const image_u8 *img, const char *what, graft_err *e) {
    if (!img || !img->pixels || img->width <= 0 || img->height <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: %s is an empty image", what);
    return GRAFT_OK;
}

/* Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many
 * pixels as the width does (Pillow PR #9549); earlier Pillows always start horizontally. The
 * order changes some bytes by one, so it is matched: found by comparing both orders with
 * Pillow 13.0 on a few hundred random sizes (the rule explained every case). */
bool resample_vertical_first(int in_w, int in_h, int out_w, int out_h) {
    return out_h < in_h && (int64_t)(in_h - out_h) > 2 * ((int64_t)in_w - out_w);
}

/* PIL's order (see vertical_first for the exception): a horizontal pass (only over the rows the
 * vertical pass will read), rounded to bytes, then a vertical pass; a pass whose size does not
 * change is skipped. */
graft_status transform_resize(image_u8 *out, const image_u8 *in, int width, int height,
                              graft_err *e) {
    memset(out, 0, sizeof *out);
    TRY(check_image(in, "resize input", e));
    if (width <= 0 || height <= 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "transforms: cannot resize to %dx%d", width,
                       height);
    if ((int64_t)width * height > IMAGE_MAX_PIXELS)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "transforms: resizing %dx%d to %dx%d = %lld pixels is over the limit of %d",
                       in->width, in->height, width, height, (long long)width * height,
                       IMAGE_MAX_PIXELS);
    uint8_t *dst = malloc((size_t)width * height * 3); // (height, width, 3)
    if (!dst) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "transforms: out of memory resizing");
    bool do_h = width != in->width, do_v = height != in->height;
    pass_coeffs ch = {0}, cv = {0};
    uint8_t *tmp = NULL; // (rows, width, 3) after the horizontal pass
    graft_status st = GRAFT_OK;
    if (do_h) st = resample_coeffs_make(&ch, in->width, width, e);
    if (st == GRAFT_OK && do_v) st = resample_coeffs_make(&cv, in->height, height, e);
    if (st != GRAFT_OK) goto done;
    if (!do_h && !do_v) {
        memcpy(dst, in->pixels, (size_t)width * height * 3);
    } else if (!do_v) {
        pass_horizontal(dst, in->pixels, in->width, 0, height, width, &ch);
    } else if (!do_h) {
        pass_vertical(dst, in->pixels, width, height, 0, &cv);
    } else if (resample_vertical_first(in->width, in->height, width, height)) {
        tmp = malloc((size_t)height * in->width * 3);
        if (!tmp) {
            st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "transforms: out of memory resizing");
            goto done;
        }
        pass_vertical(tmp, in->pixels, in->width, height, 0, &cv);
        pass_horizontal(dst, tmp, in->width, 0, height, width, &ch);
    } else {
        int row0 = cv.first[0];
        int row1 = cv.first[height - 1] + cv.count[height - 1];
        tmp = malloc((size_t)(row1 - row0) * width * 3);
        if (!tmp) {
            st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "transforms: out of memory resizing");
            goto done;
        }
        pass_horizontal(tmp, in->pixels, in->width, row0, row1 - row0, width, &ch);
        pass_vertical(dst, tmp, width, height, row0, &cv);
    }
done:
    free(tmp);
    resample_coeffs_free(&ch);
    resample_coeffs_free(&cv);
    if (st != GRAFT_OK) {
        free(dst);
        return st;
    }
    out->width = width;
    out->height = height;
    out->pixels = dst;
    return GRAFT_OK;
}

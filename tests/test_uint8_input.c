/* test_uint8_input.c: graft_model_set_uint8_input: a model fed uint8 pixels (NHWC or NCHW) gives
 * the float-fed model's outputs, before or after a cut and in either order with set_precision;
 * bad calls are clear errors; the exported model takes uint8 (tools/check_export.py runs it in
 * ONNX Runtime); graft_image_load's U8 pixels normalise to exactly its F32 tensor.
 * Usage: test_uint8_input GEN OUT_DIR IMAGE_FILE */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "test_util.h"

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};
static const char *gen;

static graft_model *load(graft_ctx *ctx, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    graft_model *m = NULL;
    return graft_model_load(ctx, path, &m) == GRAFT_OK ? m : NULL;
}

/* Pixels u (N, H, W, C) as uint8 NHWC / NCHW and as the float path's normalised (N, C, H, W). */
typedef struct pixels {
    int64_t n, c, h, w;
    uint8_t *nhwc, *nchw;
    float *f;
} pixels;

static void make_pixels(pixels *p, int64_t n, int64_t c, int64_t h, int64_t w) {
    *p = (pixels){n, c, h, w, NULL, NULL, NULL};
    size_t total = (size_t)(n * c * h * w);
    p->nhwc = malloc(total), p->nchw = malloc(total), p->f = malloc(total * sizeof(float));
    uint32_t s = 12345;
    for (int64_t b = 0; b < n; b++)
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++)
                for (int64_t k = 0; k < c; k++) {
                    s = s * 1664525u + 1013904223u;
                    uint8_t v = (uint8_t)(s >> 24);
                    size_t hw = (size_t)(((b * h + y) * w + x) * c + k);
                    size_t cw = (size_t)(((b * c + k) * h + y) * w + x);
                    p->nhwc[hw] = p->nchw[cw] = v;
                    p->f[cw] = ((float)v / 255.0f - MEAN[k]) / STD[k]; /* transforms.c's rule */
                }
}

static void free_pixels(pixels *p) {
    free(p->nhwc), free(p->nchw), free(p->f);
}

/* Run m on input `name` and copy output 0 (float) into *out (malloc'd); its count in *count. */
static int run_copy(graft_model *m, const char *name, graft_dtype dt, int nhwc, const pixels *p,
                    float **out, int64_t *count) {
    graft_named_tensor in = {name, {dt, 4, {p->n, p->c, p->h, p->w}, NULL}};
    if (dt == GRAFT_DTYPE_F32)
        in.tensor.data = p->f;
    else if (nhwc) {
        int64_t d[4] = {p->n, p->h, p->w, p->c};
        memcpy(in.tensor.dims, d, sizeof d);
        in.tensor.data = p->nhwc;
    } else
        in.tensor.data = p->nchw;
    const graft_tensor *t;
    if (graft_model_run(m, &in, 1) != GRAFT_OK || graft_model_output(m, 0, &t) != GRAFT_OK)
        return -1;
    *count = graft_tensor_numel(t);
    *out = malloc(sizeof(float) * (size_t)*count);
    memcpy(*out, t->data, sizeof(float) * (size_t)*count);
    return 0;
}

static double rel(const float *a, const float *b, int64_t n) {
    double d = 0, ref = 1e-12;
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (!(x <= d)) d = x;
        if (fabs(b[i]) > ref) ref = fabs(b[i]);
    }
    return d / ref;
}

/* The uint8-fed model (optionally cut first, or after set_precision) against the float one. */
static void compare(graft_ctx *ctx, const char *test, int nhwc, int cut, graft_dtype precision,
                    int precision_first, double tol) {
    graft_model *f = load(ctx, "mobilenet_tiny"), *u = load(ctx, "mobilenet_tiny");
    if (!f || !u) {
        MISSING(test, "mobilenet_tiny.onnx");
        graft_model_free(f), graft_model_free(u);
        return;
    }
    int ok = 1;
    if (cut)
        ok = graft_model_cut(f, "auto", GRAFT_POOLING_AUTO) == GRAFT_OK &&
             graft_model_cut(u, "auto", GRAFT_POOLING_AUTO) == GRAFT_OK;
    if (ok && precision != GRAFT_DTYPE_F32) ok = graft_model_set_precision(f, precision) == 0;
    if (ok && precision_first) ok = graft_model_set_precision(u, precision) == GRAFT_OK;
    if (ok) ok = graft_model_set_uint8_input(u, NULL, nhwc, MEAN, STD, 3) == GRAFT_OK;
    if (ok && !precision_first && precision != GRAFT_DTYPE_F32)
        ok = graft_model_set_precision(u, precision) == GRAFT_OK;
    pixels p;
    make_pixels(&p, 2, 3, 64, 64);
    float *want = NULL, *got = NULL;
    int64_t nw = 0, ng = -1;
    if (ok) ok = run_copy(f, "input", GRAFT_DTYPE_F32, 0, &p, &want, &nw) == 0;
    if (ok) ok = run_copy(u, "input", GRAFT_DTYPE_U8, nhwc, &p, &got, &ng) == 0;
    double r = ok && nw == ng ? rel(got, want, nw) : INFINITY;
    CHECK(test, ok && nw == ng && r <= tol, "ok %d, %lld vs %lld values, rel %.3g: %s", ok,
          (long long)ng, (long long)nw, r, graft_last_error(ctx));
    free(want), free(got), free_pixels(&p);
    graft_model_free(f), graft_model_free(u);
}

static void expect_error(graft_ctx *ctx, const char *test, const char *model, const char *input,
                         int twice, const float *std, int channels, const char *words) {
    graft_model *m = load(ctx, model);
    if (!m) {
        MISSING(test, model);
        return;
    }
    graft_status st = GRAFT_OK;
    if (twice) st = graft_model_set_uint8_input(m, input, 1, MEAN, STD, channels);
    if (st == GRAFT_OK) st = graft_model_set_uint8_input(m, input, 1, MEAN, std, channels);
    const char *msg = graft_last_error(ctx);
    CHECK(test, st != GRAFT_OK && strstr(msg, words), "status %d, message '%s' (wanted '%s')",
          (int)st, msg, words);
    graft_model_free(m);
}

static void errors(graft_ctx *ctx) {
    float zero[3] = {0.229f, 0.0f, 0.225f}, nan_std[3] = {0.229f, NAN, 0.225f};
    expect_error(ctx, "u8_unknown_input", "mobilenet_tiny", "pixels", 0, STD, 3, "'pixels'");
    expect_error(ctx, "u8_twice", "mobilenet_tiny", NULL, 1, STD, 3, "already takes uint8");
    expect_error(ctx, "u8_std_zero", "mobilenet_tiny", NULL, 0, zero, 3, "channel 1");
    expect_error(ctx, "u8_std_nan", "mobilenet_tiny", NULL, 0, nan_std, 3, "channel 1");
    expect_error(ctx, "u8_channels", "mobilenet_tiny", NULL, 0, STD, 1, "3 channels");
    expect_error(ctx, "u8_channels_8", "conv_acts", NULL, 0, STD, 3, "8 channels");
    expect_error(ctx, "u8_not_image", "bert_tiny_decomposed", "input_ids", 0, STD, 3,
                 "a uint8 image input replaces");
    expect_error(ctx, "u8_no_image_input", "bert_tiny_decomposed", NULL, 0, STD, 3,
                 "no rank-4 float input");
}

/* Export the NHWC model with its inputs and outputs for check_export.py; reload it in graft. */
static void export_check(graft_ctx *ctx, const char *dir) {
    graft_model *m = load(ctx, "mobilenet_tiny");
    if (!m) {
        MISSING("u8_export", "mobilenet_tiny.onnx");
        return;
    }
    pixels p;
    make_pixels(&p, 2, 3, 64, 64);
    float *want = NULL, *got = NULL;
    int64_t nw = 0, ng = -1;
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/mobilenet_u8_nhwc.onnx", dir);
    int ok = graft_model_set_uint8_input(m, NULL, 1, MEAN, STD, 3) == GRAFT_OK &&
             run_copy(m, "input", GRAFT_DTYPE_U8, 1, &p, &want, &nw) == 0 &&
             graft_model_export(m, path, NULL) == GRAFT_OK;
    graft_tensor in = {GRAFT_DTYPE_U8, 4, {2, 64, 64, 3}, p.nhwc};
    graft_tensor out = {GRAFT_DTYPE_F32, 2, {2, nw / 2}, want};
    snprintf(path, sizeof path, "%s/mobilenet_u8_nhwc.in.input.npy", dir);
    if (ok) ok = npy_write(path, &in, err, sizeof err) == 0;
    snprintf(path, sizeof path, "%s/mobilenet_u8_nhwc.graft.logits.npy", dir);
    if (ok) ok = npy_write(path, &out, err, sizeof err) == 0;
    CHECK("u8_export", ok, "%s", graft_last_error(ctx));
    graft_model *r = NULL;
    graft_value_info v;
    snprintf(path, sizeof path, "%s/mobilenet_u8_nhwc.onnx", dir);
    ok = ok && graft_model_load(ctx, path, &r) == GRAFT_OK &&
         graft_model_input_info(r, 0, &v) == GRAFT_OK && v.dtype == GRAFT_DTYPE_U8 &&
         v.dims[3] == 3 && run_copy(r, "input", GRAFT_DTYPE_U8, 1, &p, &got, &ng) == 0 &&
         ng == nw && rel(got, want, nw) <= 1e-6;
    CHECK("u8_export_reload", ok, "%s", graft_last_error(ctx));
    free(want), free(got), free_pixels(&p);
    graft_model_free(m), graft_model_free(r);
}

/* graft_image_load: U8 pixels, normalised as transforms.c does, are the F32 tensor's bits. */
static void image_load(graft_ctx *ctx, const char *image, int nhwc, int gray) {
    char test[64];
    snprintf(test, sizeof test, "u8_image_load_%s%s", nhwc ? "nhwc" : "nchw", gray ? "_gray" : "");
    graft_image_options o = GRAFT_IMAGE_OPTIONS_INIT;
    o.resize = 40, o.crop = 32, o.nhwc = nhwc, o.grayscale = gray;
    int c = gray ? 1 : 3;
    size_t n = (size_t)c * 32 * 32;
    float *f = malloc(n * sizeof(float));
    uint8_t *u = malloc(n);
    int ok = graft_image_load(ctx, image, &o, f, n * sizeof(float)) == GRAFT_OK;
    o.dtype = GRAFT_DTYPE_U8;
    ok = ok && graft_image_load(ctx, image, &o, u, n) == GRAFT_OK;
    size_t bad = 0;
    for (size_t i = 0; ok && i < n; i++) {
        int k = nhwc ? (int)(i % (size_t)c) : (int)(i / (32 * 32));
        float want = gray ? (float)u[i] * (1.0f / (255.0f * STD[0])) - MEAN[0] / STD[0]
                          : ((float)u[i] / 255.0f - MEAN[k]) / STD[k];
        if (f[i] != want) bad++;
    }
    CHECK(test, ok && !bad, "ok %d, %zu of %zu differ: %s", ok, bad, n, graft_last_error(ctx));
    o.dtype = GRAFT_DTYPE_U8;
    ok = graft_image_load(ctx, image, &o, u, n - 1) != GRAFT_OK;
    if (!nhwc && !gray) CHECK("u8_image_load_small_buffer", ok, "a short buffer was accepted");
    free(f), free(u);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: test_uint8_input GEN OUT_DIR IMAGE_FILE\n");
        return 2;
    }
    gen = argv[1];
    graft_ctx *ctx = NULL, *ref = NULL;
    graft_ctx_create(NULL, &ctx);
    graft_ctx_options ro = GRAFT_CTX_OPTIONS_INIT;
    ro.use_reference_kernels = 1;
    graft_ctx_create(&ro, &ref);
    compare(ctx, "u8_nhwc", 1, 0, GRAFT_DTYPE_F32, 0, 1e-5);
    compare(ctx, "u8_nchw", 0, 0, GRAFT_DTYPE_F32, 0, 1e-5);
    compare(ctx, "u8_after_cut_nhwc", 1, 1, GRAFT_DTYPE_F32, 0, 1e-5);
    /* bf16 on the reference kernels: the rewrite before and after set_precision */
    compare(ref, "u8_then_bf16", 1, 0, GRAFT_DTYPE_BF16, 0, 3e-2);
    compare(ref, "bf16_then_u8", 1, 0, GRAFT_DTYPE_BF16, 1, 3e-2);
    errors(ctx);
    export_check(ctx, argv[2]);
    for (int nhwc = 0; nhwc < 2; nhwc++)
        for (int gray = 0; gray < 2; gray++) image_load(ctx, argv[3], nhwc, gray);
    graft_ctx_free(ctx), graft_ctx_free(ref);
    return test_failures ? 1 : 0;
}

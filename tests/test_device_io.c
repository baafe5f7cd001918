/* test_device_io.c: inputs and outputs in GPU memory (graft_model_set_device_io) against host
 * runs of the same model: every combination, buffers that move between runs (CUDA-graph
 * replays), a cut model, asynchronous copies from pinned memory (graft_model_copy_async), and
 * the errors on the CPU. Args: digits_cnn.onnx */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graft.h"
#include "test_util.h"

#define TRY_STATUS(x)                                                                              \
    do {                                                                                           \
        graft_status s_ = (x);                                                                     \
        if (s_ != GRAFT_OK) return s_;                                                             \
    } while (0)
#define OUT_MAX 1024

#define BATCH 4
#define IN_N (BATCH * 64)

static void make_input(float *x, uint32_t seed) {
    for (int i = 0; i < IN_N; i++)
        seed = seed * 1103515245u + 12345u, x[i] = (float)(seed >> 16) / 4096.0f;
}

static graft_model *load(const char *device, const char *path, graft_ctx **ctx) {
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.device = device;
    graft_model *m = NULL;
    if (graft_ctx_create(&o, ctx) != GRAFT_OK) return NULL;
    if (graft_model_load(*ctx, path, &m) != GRAFT_OK) return NULL;
    return m;
}

/* The output of a host run on x: (n) floats into out. */
static graft_status host_run(graft_model *m, const float *x, float *out, int64_t *n) {
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {BATCH, 1, 8, 8}, (void *)x}};
    const graft_tensor *y = NULL;
    TRY_STATUS(graft_model_run(m, &in, 1));
    TRY_STATUS(graft_model_output(m, 0, &y));
    *n = graft_tensor_numel(y);
    if (*n > OUT_MAX) return GRAFT_E_SHAPE;
    memcpy(out, y->data, sizeof(float) * (size_t)*n);
    return GRAFT_OK;
}

/* One run with inputs/outputs where `ins`/`outs` say; x is uploaded to dev_in first when ins. */
static graft_status io_run(graft_model *m, int ins, int outs, const float *x, void *dev_in,
                           float *out, int64_t n) {
    TRY_STATUS(graft_model_set_device_io(m, ins, outs));
    void *data = (void *)x;
    if (ins) {
        TRY_STATUS(graft_model_copy(m, dev_in, x, sizeof(float) * IN_N, GRAFT_COPY_HOST_TO_DEVICE));
        data = dev_in;
    }
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {BATCH, 1, 8, 8}, data}};
    const graft_tensor *y = NULL;
    TRY_STATUS(graft_model_run(m, &in, 1));
    TRY_STATUS(graft_model_output(m, 0, &y));
    if (graft_tensor_numel(y) != n) return GRAFT_E_SHAPE;
    if (outs)
        return graft_model_copy(m, out, y->data, sizeof(float) * (size_t)n,
                                GRAFT_COPY_DEVICE_TO_HOST);
    memcpy(out, y->data, sizeof(float) * (size_t)n);
    return GRAFT_OK;
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

/* Each of the three device combinations, five runs each on two alternating device buffers with
 * new data every run (the plan is learnt, recorded, then replayed), against host runs. */
static void combinations(graft_ctx *ctx, graft_model *m, const char *what) {
    void *dev[2] = {NULL, NULL};
    graft_status st = graft_model_device_alloc(m, sizeof(float) * IN_N, &dev[0]);
    if (st == GRAFT_OK) st = graft_model_device_alloc(m, sizeof(float) * IN_N, &dev[1]);
    static const int combo[3][2] = {{1, 1}, {1, 0}, {0, 1}};
    for (int c = 0; c < 3 && st == GRAFT_OK; c++) {
        double worst = 0;
        int runs = 0;
        for (int r = 0; r < 5 && st == GRAFT_OK; r++, runs++) {
            float x[IN_N], want[OUT_MAX], got[OUT_MAX];
            int64_t n = 0;
            make_input(x, 100u + 7u * (uint32_t)r + 31u * (uint32_t)c);
            st = graft_model_set_device_io(m, 0, 0);
            if (st == GRAFT_OK) st = host_run(m, x, want, &n);
            if (st == GRAFT_OK) st = io_run(m, combo[c][0], combo[c][1], x, dev[r % 2], got, n);
            if (st == GRAFT_OK) worst = fmax(worst, max_diff(want, got, n));
        }
        char name[96];
        snprintf(name, sizeof name, "device_io_%s_in%d_out%d", what, combo[c][0], combo[c][1]);
        CHECK(name, st == GRAFT_OK && worst <= 1e-5, "status %d (%s), %d runs, max diff %g", st,
              graft_last_error(ctx), runs, worst);
    }
    graft_model_set_device_io(m, 0, 0);
    graft_model_device_free(m, dev[0]);
    graft_model_device_free(m, dev[1]);
}

#define BIG 16384 /* rows of the asynchronous copies: 4 MiB, long enough to be under way */

/* A host run of rows (BIG, 1, 8, 8) into out (BIG * 5). */
static graft_status big_host_run(graft_model *m, const float *x, float *out) {
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {BIG, 1, 8, 8}, (void *)x}};
    const graft_tensor *y = NULL;
    TRY_STATUS(graft_model_set_device_io(m, 0, 0));
    TRY_STATUS(graft_model_run(m, &in, 1));
    TRY_STATUS(graft_model_output(m, 0, &y));
    if (graft_tensor_numel(y) != (int64_t)BIG * 5) return GRAFT_E_SHAPE;
    memcpy(out, y->data, sizeof(float) * BIG * 5);
    return GRAFT_OK;
}

static void make_big(float *x, uint32_t seed) {
    for (int i = 0; i < BIG * 64; i++)
        seed = seed * 1103515245u + 12345u, x[i] = (float)(seed >> 16) / 4096.0f;
}

/* Batch r of `runs` pipelined: the copy of r + 1 into one buffer started, then r run from the
 * other (its copy started a run earlier, or just now for the first); worst difference against
 * want[r]. */
static graft_status pipelined(graft_model *m, float *pinned[2], void *dev[2], float **want,
                              int runs, double *worst) {
    make_big(pinned[0], 500u);
    TRY_STATUS(graft_model_set_device_io(m, 1, 0));
    TRY_STATUS(graft_model_copy_async(m, dev[0], pinned[0], sizeof(float) * BIG * 64));
    for (int r = 0; r < runs; r++) {
        if (r + 1 < runs) { /* pinned[(r + 1) % 2] fed run r - 1, which has returned */
            make_big(pinned[(r + 1) % 2], 500u + 11u * (uint32_t)(r + 1));
            TRY_STATUS(graft_model_copy_async(m, dev[(r + 1) % 2], pinned[(r + 1) % 2],
                                              sizeof(float) * BIG * 64));
        }
        graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {BIG, 1, 8, 8}, dev[r % 2]}};
        const graft_tensor *y = NULL;
        TRY_STATUS(graft_model_run(m, &in, 1));
        TRY_STATUS(graft_model_output(m, 0, &y));
        *worst = fmax(*worst, max_diff(want[r], y->data, (int64_t)BIG * 5));
    }
    return GRAFT_OK;
}

/* graft_model_copy_async: a run right after the copy into its own input sees the new data (it
 * waits on the GPU), the pipelined loop's every batch matches a host run, and a pageable source
 * is refused. */
static void async_copies(graft_ctx *ctx, graft_model *m) {
    enum { RUNS = 6 };
    float *pinned[2] = {NULL, NULL}, *host = malloc(sizeof(float) * BIG * 64), *want[RUNS] = {0};
    void *dev[2] = {NULL, NULL};
    graft_status st = host ? GRAFT_OK : GRAFT_E_OUT_OF_MEMORY;
    for (int i = 0; i < 2 && st == GRAFT_OK; i++) {
        st = graft_model_host_alloc(m, sizeof(float) * BIG * 64, (void **)&pinned[i]);
        if (st == GRAFT_OK) st = graft_model_device_alloc(m, sizeof(float) * BIG * 64, &dev[i]);
    }
    for (int r = 0; r < RUNS && st == GRAFT_OK; r++) {
        want[r] = malloc(sizeof(float) * BIG * 5);
        make_big(host, 500u + 11u * (uint32_t)r);
        st = want[r] ? big_host_run(m, host, want[r]) : GRAFT_E_OUT_OF_MEMORY;
    }
    double worst = 0;
    if (st == GRAFT_OK) { /* dev[0] holds batch 1's data; batch 0 is copied over it, then run */
        make_big(host, 511u);
        st = graft_model_copy(m, dev[0], host, sizeof(float) * BIG * 64, GRAFT_COPY_HOST_TO_DEVICE);
        float *first[1] = {want[0]};
        if (st == GRAFT_OK) st = pipelined(m, pinned, dev, first, 1, &worst);
    }
    CHECK("device_io_async_run_waits_for_its_copy", st == GRAFT_OK && worst <= 1e-5,
          "status %d (%s), max diff %g", st, graft_last_error(ctx), worst);
    worst = 0;
    if (st == GRAFT_OK) st = pipelined(m, pinned, dev, want, RUNS, &worst);
    CHECK("device_io_async_pipelined", st == GRAFT_OK && worst <= 1e-5,
          "status %d (%s), %d runs, max diff %g", st, graft_last_error(ctx), RUNS, worst);
    graft_status bad = graft_model_copy_async(m, dev[0], host, 64);
    CHECK("device_io_async_pageable_refused",
          bad == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), "page-locked"),
          "status %d: %s", bad, graft_last_error(ctx));
    CHECK("device_io_async_wait", graft_model_copy_wait(m) == GRAFT_OK, "%s",
          graft_last_error(ctx));
    graft_model_set_device_io(m, 0, 0);
    for (int i = 0; i < 2; i++)
        graft_model_host_free(m, pinned[i]), graft_model_device_free(m, dev[i]);
    for (int r = 0; r < RUNS; r++) free(want[r]);
    free(host);
}

/* Large copies (staged through pinned buffers, the host's side on several threads) both ways,
 * against direct copies from and to pinned memory: the bytes come back as they went. */
static void large_copies(graft_ctx *ctx, graft_model *m) {
    const size_t bytes = ((size_t)16 << 20) + 12345; /* shares of uneven size */
    unsigned char *a = malloc(bytes), *b = malloc(bytes), *pinned = NULL;
    void *dev = NULL;
    graft_status st = a && b ? GRAFT_OK : GRAFT_E_OUT_OF_MEMORY;
    if (st == GRAFT_OK) st = graft_model_host_alloc(m, bytes, (void **)&pinned);
    if (st == GRAFT_OK) st = graft_model_device_alloc(m, bytes, &dev);
    uint32_t seed = 77u;
    for (size_t i = 0; st == GRAFT_OK && i < bytes; i++)
        seed = seed * 1103515245u + 12345u, a[i] = (unsigned char)(seed >> 16);
    /* pageable -> device (staged), device -> pinned (direct) */
    if (st == GRAFT_OK) st = graft_model_copy(m, dev, a, bytes, GRAFT_COPY_HOST_TO_DEVICE);
    if (st == GRAFT_OK) st = graft_model_copy(m, pinned, dev, bytes, GRAFT_COPY_DEVICE_TO_HOST);
    int up = st == GRAFT_OK && memcmp(a, pinned, bytes) == 0;
    /* pinned -> device (asynchronous), device -> pageable (staged) */
    for (size_t i = 0; st == GRAFT_OK && i < bytes; i++) pinned[i] = (unsigned char)(a[i] ^ 0x5a);
    if (st == GRAFT_OK) st = graft_model_copy_async(m, dev, pinned, bytes);
    if (st == GRAFT_OK) st = graft_model_copy(m, b, dev, bytes, GRAFT_COPY_DEVICE_TO_HOST);
    int down = st == GRAFT_OK && memcmp(b, pinned, bytes) == 0;
    CHECK("device_io_large_copies_round_trip", st == GRAFT_OK && up && down,
          "status %d (%s), upload %s, download %s", st, graft_last_error(ctx),
          up ? "ok" : "differs", down ? "ok" : "differs");
    graft_model_device_free(m, dev);
    graft_model_host_free(m, pinned);
    free(a), free(b);
}

static void on_cpu(const char *path) {
    graft_ctx *ctx = NULL;
    graft_model *m = load("cpu", path, &ctx);
    if (!m) {
        CHECK("device_io_cpu_setup", 0, "%s", ctx ? graft_last_error(ctx) : "no context");
        graft_ctx_free(ctx);
        return;
    }
    graft_status st = graft_model_set_device_io(m, 1, 0);
    CHECK("device_io_cpu_refused",
          st == GRAFT_E_UNSUPPORTED && strstr(graft_last_error(ctx), "runs on the CPU"),
          "status %d: %s", st, graft_last_error(ctx));
    void *p = (void *)1;
    st = graft_model_device_alloc(m, 64, &p);
    CHECK("device_io_cpu_alloc_refused", st == GRAFT_E_UNSUPPORTED && p == NULL, "status %d", st);
    float pinned_src[4] = {0};
    st = graft_model_host_alloc(m, 64, &p);
    graft_status st2 = graft_model_copy_async(m, pinned_src, pinned_src, sizeof pinned_src);
    CHECK("device_io_cpu_async_refused",
          st == GRAFT_E_UNSUPPORTED && p == NULL && st2 == GRAFT_E_UNSUPPORTED &&
              graft_model_copy_wait(m) == GRAFT_E_UNSUPPORTED,
          "status %d, %d: %s", st, st2, graft_last_error(ctx));
    CHECK("device_io_cpu_off_is_fine", graft_model_set_device_io(m, 0, 0) == GRAFT_OK, "%s",
          graft_last_error(ctx));
    float x[IN_N], y[OUT_MAX];
    int64_t n = 0;
    make_input(x, 1);
    CHECK("device_io_cpu_runs_after", host_run(m, x, y, &n) == GRAFT_OK && n == BATCH * 5, "%s",
          graft_last_error(ctx));
    graft_model_free(m);
    graft_ctx_free(ctx);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s digits_cnn.onnx\n", argv[0]);
        return 2;
    }
    on_cpu(argv[1]);
    char why[256] = "";
    if (graft_gpu_count(why, sizeof why) < 1) {
        printf("SKIP device_io_gpu: %s\n", why[0] ? why : "no GPU");
        return test_failures ? 1 : 0;
    }
    graft_ctx *ctx = NULL;
    graft_model *m = load("cuda:0", argv[1], &ctx);
    CHECK("device_io_gpu_load", m != NULL, "%s", ctx ? graft_last_error(ctx) : "no context");
    if (m) combinations(ctx, m, "fp32");
    if (m) async_copies(ctx, m);
    if (m) large_copies(ctx, m);
    if (m && graft_model_cut(m, "auto", GRAFT_POOLING_NONE) == GRAFT_OK)
        combinations(ctx, m, "cut");
    graft_model_free(m);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}

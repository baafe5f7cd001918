/* test_cpu_bf16.c: bf16 inference on the CPU (graft_model_set_precision(bf16) without a GPU):
 * where the CPU has AVX512_BF16 or AMX, the generated ResNet-18 and ResNet-50 on 32 images give
 * the fp32 model's classes (every image whose fp32 top two are further apart than twice the
 * largest logit error; random weights make near ties, so at least 30 of 32 in all) and logits
 * within 3e-2 of the largest, BERT-base's output within 5e-2 of its largest; elsewhere the call
 * fails with a message naming what the CPU lacks and the model keeps running in fp32. fp16 on the
 * CPU stays refused. Usage: test_cpu_bf16 GEN */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "../src/core/rng.h"
#include "../src/cpu/cpu_backend.h"
#include "test_util.h"

enum { N = 32, CLASSES_MAX = 4096 };

static const char *gen;

/* The first output of model `name` on images x (N, 3, 224, 224), copied into out; its width. */
static int64_t run(graft_ctx *ctx, const char *name, bool bf16, const float *x, float *out,
                   graft_status *set) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    graft_model *m = NULL;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) return -1;
    *set = bf16 ? graft_model_set_precision(m, GRAFT_DTYPE_BF16) : GRAFT_OK;
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {N, 3, 224, 224}, (void *)x}};
    const graft_tensor *y = NULL;
    int64_t width = -1;
    if (graft_model_run(m, &in, 1) == GRAFT_OK && graft_model_output(m, 0, &y) == GRAFT_OK &&
        y->ndim == 2 && y->dims[0] == N && y->dims[1] <= CLASSES_MAX) {
        width = y->dims[1];
        memcpy(out, y->data, sizeof(float) * (size_t)(N * width));
    }
    graft_model_free(m);
    return width;
}

static int argmax(const float *v, int64_t n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

/* The gap between the largest and the second largest of v (n >= 2). */
static double margin(const float *v, int64_t n) {
    double a = -INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] > a)
            b = a, a = v[i];
        else if (v[i] > b)
            b = v[i];
    }
    return a - b;
}

static void compare(graft_ctx *ctx, const char *name, const float *x) {
    static float f32[N * CLASSES_MAX], b16[N * CLASSES_MAX];
    char test[96];
    snprintf(test, sizeof test, "cpu_bf16_%s_matches_fp32", name);
    graft_status set;
    int64_t w = run(ctx, name, false, x, f32, &set);
    int64_t wb = run(ctx, name, true, x, b16, &set);
    if (w < 0 || wb != w || set != GRAFT_OK) {
        CHECK(test, 0, "fp32 width %lld, bf16 width %lld, set %d: %s", (long long)w, (long long)wb,
              set, graft_last_error(ctx));
        return;
    }
    double diff = 0, big = 1e-30;
    int agree = 0, clear_misses = 0;
    for (int64_t i = 0; i < N * w; i++) {
        diff = fmax(diff, fabs((double)b16[i] - f32[i]));
        big = fmax(big, fabs((double)f32[i]));
    }
    for (int i = 0; i < N; i++) {
        bool same = argmax(f32 + i * w, w) == argmax(b16 + i * w, w);
        agree += same;
        /* a class change is an error unless fp32's top two are closer than bf16's rounding */
        clear_misses += !same && margin(f32 + i * w, w) > 2.0 * diff;
    }
    CHECK(test, agree >= N - 2 && clear_misses == 0 && diff <= 3e-2 * big,
          "top-1 agreement %d/%d (%d where fp32's top two are further apart than twice the "
          "largest logit error), logits within %.3g of the largest (bound 3e-2)",
          agree, N, clear_misses, diff / big);
    printf("  %s: top-1 agreement %d/%d, logits within %.2g of the largest\n", name, agree, N,
           diff / big);
}

/* BERT-base (its saved inputs): the encoder's output in bf16 within 5e-2 of fp32's largest. */
static void compare_text(graft_ctx *ctx) {
    static const char *names[3] = {"input_ids", "attention_mask", "token_type_ids"};
    graft_named_tensor in[3];
    char path[1024], err[200];
    int n = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/bert_base.in.%s.npy", gen, names[i]);
        in[n].name = names[i];
        if (npy_read(path, &in[n].tensor, err, sizeof err) == 0) n++;
    }
    snprintf(path, sizeof path, "%s/bert_base.onnx", gen);
    float *out[2] = {NULL, NULL};
    int64_t count = 0;
    for (int k = 0; k < 2 && n == 3; k++) {
        graft_model *m = NULL;
        const graft_tensor *y = NULL;
        graft_status st = graft_model_load(ctx, path, &m);
        if (st == GRAFT_OK && k) st = graft_model_set_precision(m, GRAFT_DTYPE_BF16);
        if (st == GRAFT_OK) st = graft_model_run(m, in, 3);
        if (st == GRAFT_OK) st = graft_model_output(m, 0, &y);
        if (st == GRAFT_OK && y->dtype == GRAFT_DTYPE_F32) {
            count = graft_tensor_numel(y);
            out[k] = malloc(sizeof(float) * (size_t)count);
            if (out[k]) memcpy(out[k], y->data, sizeof(float) * (size_t)count);
        }
        graft_model_free(m);
    }
    double diff = INFINITY, big = 1e-30;
    if (out[0] && out[1]) {
        diff = 0;
        for (int64_t i = 0; i < count; i++) {
            diff = fmax(diff, fabs((double)out[1][i] - out[0][i]));
            big = fmax(big, fabs((double)out[0][i]));
        }
    }
    CHECK("cpu_bf16_bert_base_matches_fp32", diff <= 5e-2 * big,
          "%d inputs read, output within %.3g of the largest (bound 5e-2): %s", n, diff / big,
          graft_last_error(ctx));
    printf("  bert_base: output within %.2g of the largest\n", diff / big);
    for (int i = 0; i < n; i++) free(in[i].tensor.data);
    free(out[0]), free(out[1]);
}

int main(int argc, char **argv) {
    gen = argc > 1 ? argv[1] : "tests/data/gen";
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    graft_ctx *ctx = NULL;
    if (graft_ctx_create(&o, &ctx) != GRAFT_OK) {
        CHECK("cpu_bf16_context", 0, "no context");
        return 1;
    }
    float *x = malloc(sizeof(float) * N * 3 * 224 * 224);
    uint64_t s = 5;
    for (int64_t i = 0; x && i < (int64_t)N * 3 * 224 * 224; i++)
        x[i] = (float)(2.0 * rng_uniform(&s) - 1.0);
    char why[160] = "";
    bool capable = cpu_backend_bf16_capable(why, sizeof why);
    if (capable) {
        compare(ctx, "resnet18", x);
        compare(ctx, "resnet50", x);
        compare_text(ctx);
    } else {
        SKIP("cpu_bf16_resnet18_matches_fp32", why);
        SKIP("cpu_bf16_resnet50_matches_fp32", why);
        SKIP("cpu_bf16_bert_base_matches_fp32", why);
        char path[1024];
        snprintf(path, sizeof path, "%s/resnet18.onnx", gen);
        graft_model *m = NULL;
        graft_status set = graft_model_load(ctx, path, &m);
        if (set == GRAFT_OK) set = graft_model_set_precision(m, GRAFT_DTYPE_BF16);
        const char *msg = graft_last_error(ctx);
        CHECK("cpu_bf16_refused_clearly", set == GRAFT_E_UNSUPPORTED && strstr(msg, why),
              "status %d: %s", set, msg);
        graft_model_free(m);
    }
    graft_model *m = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/resnet18.onnx", gen);
    graft_status st = graft_model_load(ctx, path, &m);
    if (st == GRAFT_OK) st = graft_model_set_precision(m, GRAFT_DTYPE_F16);
    CHECK("cpu_fp16_refused", st == GRAFT_E_UNSUPPORTED && strstr(graft_last_error(ctx), "GPU"),
          "status %d: %s", st, graft_last_error(ctx));
    graft_model_free(m);
    free(x);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}

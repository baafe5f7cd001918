/* test_parity.c: graft's outputs against ONNX Runtime's recorded ones on the models made by
 * tools/make_models.py (max relative error <= 1e-4, relative to each output's largest value). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/cli/npy.h"
#include "graft.h"
#include "test_util.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* max |a-b| / max(max|b|, tiny): robust for outputs with values near zero. */
static double rel_error(const graft_tensor *a, const graft_tensor *b) {
    int64_t n = graft_tensor_numel(b);
    double maxdiff = 0, maxref = 1e-12;
    const float *x = a->data, *y = b->data;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= maxdiff)) maxdiff = d; /* NaN propagates */
        if (fabs(y[i]) > maxref) maxref = fabs(y[i]);
    }
    return maxdiff / maxref;
}

static void check_model(const char *dir, const char *name, int reference) {
    char path[1024], test[256], err[512];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    snprintf(test, sizeof test, "parity_%s%s", name, reference ? "_reference" : "");
    FILE *f = fopen(path, "rb");
    if (!f) {
        SKIP(test, "model not generated (run tools/make_models.py)");
        return;
    }
    fclose(f);
    graft_ctx_options opts = GRAFT_CTX_OPTIONS_INIT;
    opts.use_reference_kernels = reference;
    graft_ctx *ctx;
    graft_model *m = NULL;
    graft_ctx_create(&opts, &ctx);
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        CHECK(test, 0, "load failed: %s", graft_last_error(ctx));
        graft_ctx_free(ctx);
        return;
    }
    int ni = graft_model_input_count(m);
    graft_named_tensor *in = calloc((size_t)ni, sizeof *in);
    int ok = 1;
    for (int i = 0; i < ni && ok; i++) {
        graft_value_info info;
        graft_model_input_info(m, i, &info);
        snprintf(path, sizeof path, "%s/%s.in.%s.npy", dir, name, info.name);
        in[i].name = info.name;
        if (npy_read(path, &in[i].tensor, err, sizeof err) != 0) {
            CHECK(test, 0, "%s", err);
            ok = 0;
        }
    }
    double t0 = now();
    if (ok && graft_model_run(m, in, ni) != GRAFT_OK) {
        CHECK(test, 0, "run failed: %s", graft_last_error(ctx));
        ok = 0;
    }
    double secs = now() - t0;
    for (int o = 0; ok && o < graft_model_output_count(m); o++) {
        graft_value_info info;
        const graft_tensor *got;
        graft_tensor want;
        graft_model_output_info(m, o, &info);
        graft_model_output(m, o, &got);
        snprintf(path, sizeof path, "%s/%s.out.%s.npy", dir, name, info.name);
        char sub[512];
        snprintf(sub, sizeof sub, "%s:%s", test, info.name);
        if (npy_read(path, &want, err, sizeof err) != 0) {
            CHECK(sub, 0, "%s", err);
            continue;
        }
        int same_shape = got->ndim == want.ndim && got->dtype == want.dtype &&
                         memcmp(got->dims, want.dims, sizeof(int64_t) * (size_t)want.ndim) == 0;
        double rel = same_shape && want.dtype == GRAFT_DTYPE_F32 ? rel_error(got, &want) : INFINITY;
        CHECK(sub, same_shape && rel <= 1e-4, "shape/dtype match %d, max relative error %.3g",
              same_shape, rel);
        printf("  %s: max relative error %.3g, run %.3f s\n", sub, rel, secs);
        free(want.data);
    }
    graft_run_stats stats;
    if (ok && graft_model_run_stats(m, &stats) == GRAFT_OK)
        printf("  %s: peak activations %.1f MB of %.1f MB total\n", test,
               stats.peak_activation_bytes / 1e6, stats.total_activation_bytes / 1e6);
    for (int i = 0; i < ni; i++) free(in[i].tensor.data);
    free(in);
    graft_model_free(m);
    graft_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/data/gen";
    int reference = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--reference") == 0)
            reference = 1;
        else
            check_model(dir, argv[i], reference);
    }
    return test_failures ? 1 : 0;
}

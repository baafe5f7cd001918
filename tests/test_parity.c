/* test_parity.c: graft's outputs against ONNX Runtime's recorded ones on the models made by
 * tools/make_models.py (max relative error <= 1e-4, relative to each output's largest value). */
#include <math.h>
#include <stdbool.h>
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

/* Max difference over the reference's root mean square: the scale of errors half precision makes
 * through a whole network. */
static double rms_error(const graft_tensor *a, const graft_tensor *b) {
    int64_t n = graft_tensor_numel(b);
    double maxdiff = 0, ss = 0;
    const float *x = a->data, *y = b->data;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= maxdiff)) maxdiff = d;
        ss += (double)y[i] * y[i];
    }
    return maxdiff / (sqrt(ss / (double)(n > 0 ? n : 1)) + 1e-12);
}

static graft_dtype precision = GRAFT_DTYPE_F32;
static graft_log_level log_level = GRAFT_LOG_WARN;

static int check_run(const char *dir, const char *name, graft_model *m, graft_ctx *ctx,
                     const graft_named_tensor *in, int ni, const char *test) {
    char path[1024], err[512];
    int ok = 1;
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
        bool half = precision != GRAFT_DTYPE_F32;
        double rel = !same_shape || want.dtype != GRAFT_DTYPE_F32 ? INFINITY
                     : half                                       ? rms_error(got, &want)
                                                                  : test_rel_error(got, &want);
        /* Half precision end to end: max error over the output's RMS. bf16 keeps 3 bits fewer
         * than fp16, so ~8x its error (ResNet-50 on an H200: fp16 0.0135, bf16 0.108). */
        double tol = !half ? 1e-4 : precision == GRAFT_DTYPE_F16 ? 3e-2 : 2e-1;
        CHECK(sub, same_shape && rel <= tol, "shape/dtype match %d, max relative error %.3g",
              same_shape, rel);
        printf("  %s: max relative error %.3g, run %.3f s\n", sub, rel, secs);
        free(want.data);
    }
    return ok;
}

static void check_model(const char *dir, const char *name, int reference, const char *device) {
    char path[1024], test[256], err[512];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    snprintf(test, sizeof test, "parity_%s%s%s%s%s%s", name, reference ? "_reference" : "",
             device ? "_" : "", device ? device : "", precision != GRAFT_DTYPE_F32 ? "_" : "",
             precision != GRAFT_DTYPE_F32 ? graft_dtype_name(precision) : "");
    if (device && strncmp(device, "cuda", 4) == 0 && graft_gpu_count(err, sizeof err) == 0) {
        char why[600];
        snprintf(why, sizeof why, "no usable GPU (%s)", err);
        SKIP(test, why);
        return;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        MISSING(test, "model not generated (run tools/make_models.py)");
        return;
    }
    fclose(f);
    graft_ctx_options opts = GRAFT_CTX_OPTIONS_INIT;
    opts.use_reference_kernels = reference;
    opts.device = device;
    opts.log_level = log_level;
    graft_ctx *ctx;
    graft_model *m = NULL;
    graft_ctx_create(&opts, &ctx);
    if (graft_model_load(ctx, path, &m) != GRAFT_OK ||
        graft_model_set_precision(m, precision) != GRAFT_OK) {
        CHECK(test, 0, "load failed: %s", graft_last_error(ctx));
        graft_model_free(m);
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
    /* The first run learns the memory plan; on the CPU the second runs from it (reshapes as
     * views of their inputs); on a device the second records a CUDA graph and the third replays
     * it: every one must give the same answer. */
    bool on_device = device && strcmp(device, "cpu") != 0;
    int runs = on_device ? 3 : 2;
    for (int r = 0; r < runs && ok; r++) {
        char run_test[300];
        snprintf(run_test, sizeof run_test, "%s%s", test,
                 r == 0       ? ""
                 : !on_device ? "_planned"
                 : r == 1     ? "_recorded"
                              : "_replayed");
        ok = check_run(dir, name, m, ctx, in, ni, run_test);
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
    const char *device = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--reference") == 0)
            reference = 1;
        else if (strcmp(argv[i], "--verbose") == 0)
            log_level = GRAFT_LOG_DEBUG; /* e.g. which nodes a GPU fuses */
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
            i++;
            precision = !strcmp(argv[i], "fp16")   ? GRAFT_DTYPE_F16
                        : !strcmp(argv[i], "bf16") ? GRAFT_DTYPE_BF16
                                                   : GRAFT_DTYPE_F32;
        } else
            check_model(dir, argv[i], reference, device);
    }
    return test_failures ? 1 : 0;
}

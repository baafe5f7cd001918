/* test_cpu_fusion.c: the CPU's fused groups (Conv -> Relu, Conv -> Add -> Relu, Conv -> Add as
 * oneDNN convolutions with post-ops, src/cpu/dnnl_fuse.c; BERT's MatMul -> Add(bias) [-> GELU]
 * as inner products, src/cpu/dnnl_fuse_bert.c): groups form on ResNet- and BERT-style models
 * (the "fused group" debug lines), they give what the unfused reference kernels give (max
 * relative error <= 1e-4), on the first run and on later ones (kept state), and the
 * reference-kernels mode fuses nothing.
 * Usage: test_cpu_fusion GEN_DIR [MODEL...] (default resnet18 resnet50) */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "graft.h"
#include "graft_config.h"
#include "test_util.h"

static void count_fused(graft_log_level level, const char *message, void *user) {
    if (level == GRAFT_LOG_DEBUG && strncmp(message, "fused group ", 12) == 0) ++*(int *)user;
}

typedef struct loaded {
    graft_ctx *ctx;
    graft_model *m;
    int fused; /* "fused group" lines logged */
} loaded;

static bool load(const char *path, bool reference, loaded *l, const char *test) {
    memset(l, 0, sizeof *l);
    graft_ctx_options opts = GRAFT_CTX_OPTIONS_INIT;
    opts.use_reference_kernels = reference;
    opts.device = "cpu";
    opts.log_level = GRAFT_LOG_DEBUG;
    opts.log_fn = count_fused;
    opts.log_user = &l->fused;
    if (graft_ctx_create(&opts, &l->ctx) != GRAFT_OK) {
        CHECK(test, 0, "could not create a context");
        return false;
    }
    if (graft_model_load(l->ctx, path, &l->m) != GRAFT_OK) {
        CHECK(test, 0, "load failed: %s", graft_last_error(l->ctx));
        return false;
    }
    return true;
}

static void unload(loaded *l) {
    if (l->m) graft_model_free(l->m);
    if (l->ctx) graft_ctx_free(l->ctx);
}

static void check_model(const char *dir, const char *name) {
    char path[1024], test[256], err[512];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    snprintf(test, sizeof test, "cpu_fusion_%s", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        MISSING(test, "model not generated (run tools/make_models.py)");
        return;
    }
    fclose(f);
    loaded fused = {0}, ref = {0};
    memset(&ref, 0, sizeof ref);
    bool ok = load(path, false, &fused, test) && load(path, true, &ref, test);
    int ni = ok ? graft_model_input_count(fused.m) : 0;
    graft_named_tensor *in = calloc((size_t)ni + 1, sizeof *in);
    for (int i = 0; i < ni && ok; i++) {
        graft_value_info info;
        graft_model_input_info(fused.m, i, &info);
        snprintf(path, sizeof path, "%s/%s.in.%s.npy", dir, name, info.name);
        in[i].name = info.name;
        if (npy_read(path, &in[i].tensor, err, sizeof err) != 0) {
            CHECK(test, 0, "%s", err);
            ok = false;
        }
    }
    if (ok && graft_model_run(ref.m, in, ni) != GRAFT_OK) {
        CHECK(test, 0, "reference run failed: %s", graft_last_error(ref.ctx));
        ok = false;
    }
    for (int r = 0; r < 2 && ok; r++) { /* the second run reuses the fused primitives */
        if (graft_model_run(fused.m, in, ni) != GRAFT_OK) {
            CHECK(test, 0, "run failed: %s", graft_last_error(fused.ctx));
            ok = false;
            break;
        }
        for (int o = 0; o < graft_model_output_count(fused.m); o++) {
            const graft_tensor *a, *b;
            graft_value_info info;
            graft_model_output_info(fused.m, o, &info);
            graft_model_output(fused.m, o, &a);
            graft_model_output(ref.m, o, &b);
            char sub[512];
            snprintf(sub, sizeof sub, "%s:%s%s", test, info.name, r ? "_again" : "");
            bool same = a->ndim == b->ndim && a->dtype == b->dtype && a->dtype == GRAFT_DTYPE_F32 &&
                        !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim);
            double rel = same ? test_rel_error(a, b) : INFINITY;
            CHECK(sub, same && rel <= 1e-4,
                  "fused against reference kernels: max relative error %.3g", rel);
        }
    }
    if (ok) {
#if GRAFT_HAVE_DNNL
        CHECK(test, fused.fused > 0, "%d fused groups ran (want some)", fused.fused);
#else
        CHECK(test, fused.fused == 0, "%d fused groups ran without oneDNN", fused.fused);
#endif
        char sub[300];
#if GRAFT_HAVE_DNNL
        /* a profile lists the fused groups' time under the groups' names */
        graft_op_time ops[64];
        int n = graft_model_set_profiling(fused.m, 1) == GRAFT_OK &&
                        graft_model_run(fused.m, in, ni) == GRAFT_OK
                    ? graft_model_profile(fused.m, ops, 64)
                    : -1;
        int groups = 0;
        for (int i = 0; i < n && i < 64; i++)
            if (ops[i].op[0] >= 'a' && ops[i].op[0] <= 'z' && ops[i].count > 0) groups++;
        snprintf(sub, sizeof sub, "%s_profile_names_groups", test);
        CHECK(sub, groups > 0, "no fused group (lower-case name) in the profile (%d entries)", n);
#endif
        snprintf(sub, sizeof sub, "%s_reference_unfused", test);
        CHECK(sub, ref.fused == 0, "%d fused groups ran with reference kernels only", ref.fused);
        printf("  %s: %d fused groups\n", test, fused.fused);
    }
    for (int i = 0; i < ni; i++) free(in[i].tensor.data);
    free(in);
    unload(&fused);
    unload(&ref);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "tests/data/gen";
    if (argc > 2)
        for (int i = 2; i < argc; i++) check_model(dir, argv[i]);
    else {
        check_model(dir, "resnet18");
        check_model(dir, "resnet50");
    }
    return test_failures ? 1 : 0;
}

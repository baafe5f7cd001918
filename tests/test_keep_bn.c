/* test_keep_bn.c: models loaded with keep_batchnorm (BatchNormalization left as nodes) compute
 * what the folded load computes, on the CPU and on a GPU where there is one, and
 * model_fold_batchnorm folds them afterwards. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/graph/model.h"
#include "test_model.h"
#include "test_util.h"

static const char *gen;

static int count_op(const graft_model *m, const char *op) {
    int n = 0;
    for (int i = 0; i < m->g.n_nodes; i++) n += !strcmp(m->g.nodes[i].op_type, op);
    return n;
}

/* The model's first output for its recorded inputs, copied (NULL on failure). */
static float *run_copy(loaded *l, int64_t *n) {
    return loaded_run_copy(l, 0, n);
}

/* max |a - b| / max |b| */
static double rel(const float *a, const float *b, int64_t n) {
    graft_tensor x = {.dtype = GRAFT_DTYPE_F32, .ndim = 1, .dims = {n}, .data = (void *)a};
    graft_tensor y = {.dtype = GRAFT_DTYPE_F32, .ndim = 1, .dims = {n}, .data = (void *)b};
    return test_rel_error(&x, &y);
}

static int open_model(loaded *l, const char *model, bool keep_bn, const char *device) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, model);
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.keep_batchnorm = keep_bn;
    o.device = device;
    if (access(path, R_OK) == 0 && loaded_open_opts(l, path, gen, model, &o) == 0) return 0;
    MISSING(model, path);
    if (l->ctx) printf("  %s\n", graft_last_error(l->ctx));
    loaded_close(l);
    return -1;
}

/* A keep_batchnorm model cut at `at` (model_set_output re-runs the passes) keeps its BN nodes. */
static void check_cut(const char *at) {
    loaded l;
    if (open_model(&l, "resnet18", true, NULL) != 0) return;
    graft_err e = {0};
    int v = ir_find_value(&l.m->g, at);
    graft_status st = v >= 0 ? model_set_output(l.m, v, &e) : GRAFT_E_NOT_FOUND;
    int bn = count_op(l.m, "BatchNormalization");
    /* layer1 to layer3 and the stem: 1 + 3 * 4 + 2 downsampling BNs */
    CHECK("keep_bn_cut_keeps_bn", st == GRAFT_OK && bn == 15, "status %d (%s), %d BN nodes", st,
          e.msg, bn);
    loaded_close(&l);
}

static void check_resnet18(void) {
    loaded folded, kept;
    if (open_model(&folded, "resnet18", false, NULL) != 0) return;
    if (open_model(&kept, "resnet18", true, NULL) != 0) {
        loaded_close(&folded);
        return;
    }
    int bn_folded = count_op(folded.m, "BatchNormalization");
    int bn_kept = count_op(kept.m, "BatchNormalization");
    CHECK("keep_bn_nodes", bn_folded == 0 && bn_kept == 20,
          "%d BatchNormalization nodes folded, %d kept (want 0 and 20)", bn_folded, bn_kept);
    int64_t n1 = 0, n2 = 0, n3 = 0;
    float *a = run_copy(&folded, &n1), *b = run_copy(&kept, &n2);
    double d = a && b && n1 == n2 ? rel(b, a, n1) : NAN;
    char name[256];
    snprintf(name, sizeof name, "keep_bn_output (rel err %.2g)", d);
    CHECK(name, d <= 1e-4, "keep_batchnorm output differs from the folded one: %.3g (%s)", d,
          graft_last_error(kept.ctx));
    graft_err e = {0};
    graft_status st = model_fold_batchnorm(kept.m, &e);
    int bn_after = count_op(kept.m, "BatchNormalization");
    CHECK("keep_bn_fold_later", st == GRAFT_OK && bn_after == 0 && !kept.m->keep_batchnorm,
          "status %d (%s), %d BN nodes left", st, e.msg, bn_after);
    float *c = st == GRAFT_OK ? run_copy(&kept, &n3) : NULL;
    double d2 = a && c && n1 == n3 ? rel(c, a, n1) : NAN;
    snprintf(name, sizeof name, "keep_bn_fold_later_output (rel err %.2g)", d2);
    CHECK(name, d2 <= 1e-5, "folded after load differs from folded at load: %.3g", d2);
    free(a), free(b), free(c);
    loaded_close(&folded);
    loaded_close(&kept);
}

/* On a GPU: the kept BN nodes run there (no CPU fallback), the output as the CPU's. */
static void check_gpu(void) {
    char why[256];
    if (graft_gpu_count(why, sizeof why) < 1) {
        SKIP("keep_bn_cuda", why);
        return;
    }
    loaded cpu, gpu;
    if (open_model(&cpu, "resnet18", false, NULL) != 0) return;
    if (open_model(&gpu, "resnet18", true, "cuda:0") != 0) {
        loaded_close(&cpu);
        return;
    }
    int on_host = 0;
    for (int i = 0; i < gpu.m->g.n_nodes; i++)
        on_host += gpu.m->exec.node_fallback && gpu.m->exec.node_fallback[i] &&
                   !strcmp(gpu.m->g.nodes[i].op_type, "BatchNormalization");
    int64_t n1 = 0, n2 = 0;
    float *a = run_copy(&cpu, &n1), *b = run_copy(&gpu, &n2);
    double d = a && b && n1 == n2 ? rel(b, a, n1) : NAN;
    char name[256];
    snprintf(name, sizeof name, "keep_bn_cuda (rel err %.2g, %d BN nodes on the host)", d, on_host);
    CHECK(name, d <= 1e-4 && on_host == 0 && count_op(gpu.m, "BatchNormalization") == 20,
          "rel err %.3g, %d BN nodes on the CPU (%s)", d, on_host, graft_last_error(gpu.ctx));
    free(a), free(b);
    loaded_close(&cpu);
    loaded_close(&gpu);
}

/* argv: the generated models' folder (tests/data/gen). */
int main(int argc, char **argv) {
    gen = argc > 1 ? argv[1] : "tests/data/gen";
    check_resnet18();
    check_cut("/layer3/layer3.1/relu_1/Relu_output_0");
    check_gpu();
    return test_failures ? 1 : 0;
}

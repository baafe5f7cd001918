/* test_gpu_backward.c: training graphs (forward and every Backward node) on the device against
 * the CPU, on the cases tools/make_backward_cases.py writes (DIR/cases.txt): the output and every
 * weight's gradient within 1e-4 of the CPU's (relative to the tensor's largest value, or to 1e-3
 * of the largest gradient when that is more; fp32 with TF32 off, the sums in another order), at
 * two batch sizes, and no Backward node on the CPU
 * unless the case allows it (fallback-ok).
 *
 * usage: test_gpu_backward DIR [--device D] [--filter SUB] [--verbose]
 *   --device  default $GRAFT_TEST_GPU_DEVICE, else cuda:0; "cpu-ref" runs the CPU's reference
 *             kernels against its fast ones (oneDNN and dnnl_backward.c): a check of the
 *             harness where there is no GPU. Without a usable GPU every case prints SKIP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/graph/model.h"
#include "../src/train/train_exec.h"
#include "../src/train/train_graph.h"
#include "gpu_test_util.h"

#define TOL 1e-4

typedef struct bwd_case {
    char name[128], model[256], from[128], to[128], flags[128];
} bwd_case;

static int passed, failed, skipped, verbose;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static float urand(void) { /* in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static void fill_random(tensor *t) {
    float *p = t->data;
    for (int64_t i = 0; i < tensor_numel(t); i++) p[i] = urand();
}

/* One side of the comparison: a model, its training graph and the executor running it. */
typedef struct side {
    graft_ctx *ctx;
    graft_model *m;
    train_graph tg, fwd;
    train_exec x, fx;
    bool have_tg, have_fwd, have_x, have_fx;
} side;

static void side_free(side *s) {
    if (s->have_x) train_exec_free(&s->x);
    if (s->have_fx) train_exec_free(&s->fx);
    if (s->have_tg) train_graph_free(&s->tg);
    if (s->have_fwd) train_graph_free(&s->fwd);
    graft_model_free(s->m);
    graft_ctx_free(s->ctx);
    memset(s, 0, sizeof *s);
}

/* device: a CUDA device, "cpu" (the fast CPU kernels) or "cpu-ref" (reference kernels only).
 * The training graph is built from src (the CPU's model, so both sides run one graph), or from
 * the side's own model when src is NULL. */
static int side_open(side *s, const char *device, const bwd_case *c, const char *dir,
                     const ir_graph *src, gpu_log *log, char *why, size_t n) {
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.device = gpu_test_is_cpu(device) ? NULL : device;
    o.use_reference_kernels = strcmp(device, "cpu-ref") == 0;
    o.log_fn = gpu_log_fn;
    o.log_user = log;
    o.allow_tf32 = 0;
    o.keep_batchnorm = strstr(c->flags, "keep-bn") != NULL;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, c->model);
    graft_err e;
    err_clear(&e);
    if (graft_ctx_create(&o, &s->ctx) != GRAFT_OK || graft_model_load(s->ctx, path, &s->m)) {
        snprintf(why, n, "loading %s on %s: %s", path, device,
                 s->ctx ? graft_last_error(s->ctx) : "");
        return -1;
    }
    train_graph_options fo = {.forward_only = true};
    if (!src) src = &s->m->g;
    graft_status st = train_graph_build(src, c->from, c->to, NULL, &s->tg, &e);
    s->have_tg = st == GRAFT_OK;
    if (st == GRAFT_OK) st = train_graph_build(src, c->from, c->to, &fo, &s->fwd, &e);
    s->have_fwd = st == GRAFT_OK;
    bool ref = strcmp(device, "cpu-ref") == 0;
    if (st == GRAFT_OK)
        st = ref ? train_exec_init(&s->x, &s->tg.g, true, 0, &e)
                 : train_exec_init_device(&s->x, &s->tg.g, 0, s->m, &e);
    s->have_x = st == GRAFT_OK;
    if (st == GRAFT_OK) st = train_exec_init(&s->fx, &s->fwd.g, ref, 0, &e);
    s->have_fx = st == GRAFT_OK;
    if (st != GRAFT_OK) snprintf(why, n, "training graph on %s: %s", device, e.msg);
    return st == GRAFT_OK ? 0 : -1;
}

/* The graph's inputs for a batch of n: from (random), the parameters (the model's weights),
 * d_to (random, the output's shape found by a forward run). */
static int make_inputs(side *s, int64_t n, tensor *in, char *why, size_t len) {
    const ir_graph *g = &s->tg.g;
    graft_err e;
    err_clear(&e);
    const ir_value *from = &g->values[g->inputs[0]];
    int64_t dims[GRAFT_MAX_DIMS];
    memcpy(dims, from->dims, sizeof dims);
    dims[0] = n;
    if (s->tg.n_side != 0 || tensor_make(&in[0], GRAFT_DTYPE_F32, from->ndim, dims, &e)) {
        snprintf(why, len, "the case has side inputs or a bad input shape");
        return -1;
    }
    fill_random(&in[0]);
    for (int i = 0; i < s->tg.n_params; i++) {
        in[1 + i] = s->m->g.values[s->tg.model_params[i]].data;
    }
    if (train_exec_run(&s->fx, in, &e) != GRAFT_OK) {
        snprintf(why, len, "forward run: %s", e.msg);
        return -1;
    }
    const tensor *to = train_exec_output(&s->fx, 0);
    tensor *dto = &in[g->n_inputs - 1];
    if (tensor_make(dto, GRAFT_DTYPE_F32, to->ndim, to->dims, &e)) return -1;
    fill_random(dto);
    return 0;
}

static double max_abs(const tensor *t) {
    const float *p = t->data;
    double m = 0;
    for (int64_t i = 0; i < tensor_numel(t); i++) m = fmax(m, fabs((double)p[i]));
    return m;
}

/* max |a - b| / max(max |b|, floor); floor keeps a gradient that is zero up to rounding (a
 * key bias under softmax, whose shift it cannot see) from dividing noise by noise. */
static double rel_error(const tensor *a, const tensor *b, double floor) {
    if (tensor_numel(a) != tensor_numel(b) || a->dtype != b->dtype) return INFINITY;
    const float *p = a->data, *q = b->data;
    double diff = 0;
    for (int64_t i = 0; i < tensor_numel(a); i++) {
        double d = fabs((double)p[i] - (double)q[i]);
        if (!(d <= diff)) diff = d; /* NaN wins */
    }
    double scale = fmax(max_abs(b), floor);
    return diff == 0 ? 0 : diff / (scale > 0 ? scale : 1e-30);
}

/* One batch size: run both sides on the same inputs; the worst relative error and its name. */
static int compare_batch(side *dev, side *cpu, int64_t n, double *worst, char *worst_name,
                         char *why, size_t len) {
    const ir_graph *g = &cpu->tg.g;
    tensor *in = calloc((size_t)g->n_inputs, sizeof *in);
    int rc = in ? make_inputs(cpu, n, in, why, len) : -1;
    graft_err e;
    err_clear(&e);
    if (rc == 0 && (train_exec_run(&cpu->x, in, &e) || train_exec_run(&dev->x, in, &e))) {
        snprintf(why, len, "run (batch %lld): %s", (long long)n, e.msg);
        rc = -1;
    }
    double floor = 0; /* 1e-3 of the largest gradient */
    for (int k = 1; rc == 0 && k < g->n_outputs; k++)
        floor = fmax(floor, 1e-3 * max_abs(train_exec_output(&cpu->x, k)));
    for (int k = 0; rc == 0 && k < g->n_outputs; k++) {
        double r = rel_error(train_exec_output(&dev->x, k), train_exec_output(&cpu->x, k), floor);
        if (verbose)
            printf("  %s batch %lld: %.3g\n", g->values[g->outputs[k]].name, (long long)n, r);
        if (!(r <= *worst)) {
            *worst = r;
            snprintf(worst_name, 160, "%s (batch %lld)", g->values[g->outputs[k]].name,
                     (long long)n);
        }
    }
    if (in) tensor_release(&in[0]), tensor_release(&in[g->n_inputs - 1]);
    free(in);
    return rc;
}

static void run_case(const bwd_case *c, const char *dir, const char *device) {
    gpu_log log;
    gpu_log_reset(&log);
    side dev = {0}, cpu = {0};
    char why[1400] = "", worst_name[160] = "exact";
    double worst = 0;
    int rc = side_open(&cpu, "cpu", c, dir, NULL, &log, why, sizeof why);
    if (rc == 0) rc = side_open(&dev, device, c, dir, &cpu.m->g, &log, why, sizeof why);
    if (rc == 0) rc = compare_batch(&dev, &cpu, 3, &worst, worst_name, why, sizeof why);
    if (rc == 0) rc = compare_batch(&dev, &cpu, 5, &worst, worst_name, why, sizeof why);
    bool fallback_ok = strstr(c->flags, "fallback-ok") != NULL;
    if (rc == 0 && !(worst <= TOL))
        snprintf(why, sizeof why, "%s differs by %.3g relative (tolerance %g)", worst_name, worst,
                 TOL),
            rc = -1;
    if (rc == 0 && log.fallbacks && !fallback_ok)
        snprintf(why, sizeof why, "ran on the CPU: %s", log.fallback_ops), rc = -1;
    if (rc == 0) {
        printf("PASS %s: worst %.2g (%s), %d params%s%s\n", c->name, worst, worst_name,
               cpu.tg.n_params, log.fallbacks ? ", CPU fallback: " : "",
               log.fallbacks ? log.fallback_ops : "");
        passed++;
    } else {
        printf("FAIL %s: %s\n", c->name, why);
        if (log.len) printf("%s\n", log.warnings);
        failed++;
    }
    fflush(stdout);
    side_free(&dev);
    side_free(&cpu);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *device_cli = NULL, *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device_cli = argv[++i];
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else
            dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: test_gpu_backward DIR [--device D] [--filter SUB] [--verbose]\n");
        return 2;
    }
    const char *device = gpu_test_device(device_cli);
    char path[600], line[1024], why[256] = "";
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("FAIL cases: cannot open %s (run tools/make_backward_cases.py --out %s)\n", path,
               dir);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    int usable = gpu_test_usable(device, why, sizeof why);
    gpu_test_describe(device);
    while (fgets(line, sizeof line, f)) {
        bwd_case c;
        if (line[0] == '#' || sscanf(line, "%127s %255s %127s %127s %127s", c.name, c.model, c.from,
                                     c.to, c.flags) != 5)
            continue;
        if (filter && !strstr(c.name, filter)) continue;
        if (!usable) {
            printf("SKIP %s: %s\n", c.name, why);
            skipped++;
            continue;
        }
        run_case(&c, dir, device);
    }
    fclose(f);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}

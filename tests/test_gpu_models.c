/* test_gpu_models.c: the models of tools/make_models.py on the GPU against the CPU backend:
 * fp32 outputs within 1e-4 (|a - b| <= 1e-4 * max(|b|, rms(b))), no node on the CPU except the
 * allow-list's ops, and the time per batch on each side (information, never asserted).
 *
 * usage: test_gpu_models GEN [NAME...] [--runs N] [--device DEV] [--allow OP[,OP...]]
 *   NAME     models to run (default: resnet18 resnet50 mobilenet_tiny bert_tiny_decomposed
 *            bert_base); GEN/NAME.onnx with inputs GEN/NAME.in.<input>.npy
 *   --runs   timed runs per side after the checked one (default 5; the CPU does at most 3)
 *   --device the device under test (default $GRAFT_TEST_GPU_DEVICE, else cuda:0; cpu: the CPU
 *            against itself)
 *   --allow  ops that may run on the CPU (default: Shape,Constant, which only read shapes or
 *            hold constants)
 * Without a usable GPU every model prints a SKIP line and the program exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "gpu_test_util.h"

#define MAX_IO 8
#define TOL_MODEL 1e-4
#define DEFAULT_ALLOW "Shape,Constant"

static const char *const default_models[] = {"resnet18", "resnet50", "mobilenet_tiny",
                                             "bert_tiny_decomposed", "bert_base"};

typedef struct options {
    const char *gen, *device, *allow;
    int runs;
} options;

typedef struct side {
    graft_model *m;
    graft_named_tensor in[MAX_IO];
    int n_in;
    double first_ms, median_ms;
} side;

static int passed, failed, skipped;

static void side_free(side *s) {
    for (int i = 0; i < s->n_in; i++) free(s->in[i].tensor.data);
    graft_model_free(s->m);
    memset(s, 0, sizeof *s);
}

/* Load the model on ctx and bind its recorded inputs. */
static int side_load(graft_ctx *ctx, const options *o, const char *name, side *s, char *err,
                     size_t n) {
    char path[1024];
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "%s/%s.onnx", o->gen, name);
    if (graft_model_load(ctx, path, &s->m) != GRAFT_OK) {
        snprintf(err, n, "loading %.300s: %.600s", path, graft_last_error(ctx));
        return -1;
    }
    for (int i = 0; i < graft_model_input_count(s->m) && i < MAX_IO; i++) {
        graft_value_info info;
        graft_tensor file;
        char why[512];
        graft_model_input_info(s->m, i, &info);
        snprintf(path, sizeof path, "%s/%s.in.%s.npy", o->gen, name, info.name);
        if (npy_read(path, &file, why, sizeof why) != 0) {
            snprintf(err, n, "%s", why);
            return -1;
        }
        s->in[i].name = info.name;
        int rc = gpu_convert_input(&file, info.dtype, &s->in[i].tensor, why, sizeof why);
        free(file.data);
        if (rc) {
            snprintf(err, n, "input %s: %s", info.name, why);
            return -1;
        }
        s->n_in = i + 1;
    }
    return 0;
}

/* Run `runs` times; the first time goes to first_ms, the median of the rest to median_ms (the
 * first's when there is only one). */
static int side_time(graft_ctx *ctx, side *s, int runs, char *err, size_t n) {
    double times[32];
    int done = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = gpu_now();
        if (graft_model_run(s->m, s->in, s->n_in) != GRAFT_OK) {
            snprintf(err, n, "run %d: %.600s", r + 1, graft_last_error(ctx));
            return -1;
        }
        double ms = 1e3 * (gpu_now() - t0);
        if (r == 0 && s->first_ms == 0)
            s->first_ms = ms;
        else if (done < 32)
            times[done++] = ms;
    }
    s->median_ms = done ? gpu_median(times, done) : s->first_ms;
    return 0;
}

/* Is every op in `ops` (comma-separated) in the allow-list? The first one that is not goes to
 * `bad`. */
static int ops_allowed(const char *ops, const char *allow, char *bad, size_t n) {
    for (const char *p = ops; *p;) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (const char *q = allow; *q && !found;) {
            size_t l2 = strcspn(q, ",");
            found = l2 == len && strncmp(p, q, len) == 0;
            q += l2 + (q[l2] == ',');
        }
        if (!found) {
            snprintf(bad, n, "%.*s", (int)len, p);
            return 0;
        }
        p += len + (p[len] == ',');
    }
    return 1;
}

/* max |a - b| / max |b| against ONNX Runtime's recorded output, when there is one (info). */
static void note_ort(const options *o, const char *name, const char *out_name,
                     const graft_tensor *got) {
    char path[1024], err[512];
    graft_tensor want;
    snprintf(path, sizeof path, "%s/%s.out.%s.npy", o->gen, name, out_name);
    if (npy_read(path, &want, err, sizeof err) != 0) return;
    if (gpu_same_shape(got, &want) && graft_tensor_numel(got) > 0) {
        double maxdiff = 0, maxref = 1e-30;
        for (int64_t i = 0; i < graft_tensor_numel(got); i++) {
            double a = gpu_get_f64(got, i), b = gpu_get_f64(&want, i);
            if (!(fabs(a - b) <= maxdiff)) maxdiff = fabs(a - b);
            if (fabs(b) > maxref) maxref = fabs(b);
        }
        printf("# %s:%s: device vs ONNX Runtime: max |a-b| / max |b| = %.3g\n", name, out_name,
               maxdiff / maxref);
    }
    free(want.data);
}

/* Compare every output; 1 when all are within the tolerance. */
static int compare_all(const options *o, const char *name, const side *dev, const side *ref,
                       char *detail, size_t n, int note) {
    double worst = 0;
    size_t len = 0;
    for (int i = 0; i < graft_model_output_count(ref->m); i++) {
        const graft_tensor *a, *b;
        graft_value_info info;
        graft_model_output_info(ref->m, i, &info);
        if (graft_model_output(dev->m, i, &a) != GRAFT_OK ||
            graft_model_output(ref->m, i, &b) != GRAFT_OK) {
            snprintf(detail, n, "output %s missing", info.name);
            return 0;
        }
        gpu_tol_kind kind = gpu_dtype_is_float(b->dtype) ? GPU_TOL_REL : GPU_TOL_EXACT;
        gpu_cmp r = gpu_compare(a, b, kind, TOL_MODEL, NULL, -1);
        if (a->dtype != b->dtype) {
            snprintf(detail, n, "output %s: dtype %s, reference %s", info.name,
                     graft_dtype_name(a->dtype), graft_dtype_name(b->dtype));
            return 0;
        }
        if (!r.ok) {
            snprintf(detail, n, "output %s: %s", info.name, r.why);
            return 0;
        }
        if (note) note_ort(o, name, info.name, a);
        if (kind == GPU_TOL_REL && r.max_err > worst) worst = r.max_err;
        if (len < n)
            len += (size_t)snprintf(detail + len, n - len, "%s%s err %.2e", len ? ", " : "",
                                    info.name, r.max_err);
    }
    if (len < n) snprintf(detail + len, n - len, " (tol %.0e)", TOL_MODEL);
    return 1;
}

/* After the timed runs (replays once a CUDA graph is recorded): the outputs again, then both
 * sides on other inputs (the first one reversed). Returns 1 when both match. */
static int check_later_runs(graft_ctx *cpu, graft_ctx *dev_ctx, const options *o, const char *name,
                            side *dev, side *ref, char *detail, size_t n) {
    char sub[700];
    if (o->runs > 0 && !compare_all(o, name, dev, ref, sub, sizeof sub, 0)) {
        snprintf(detail, n, "run %d (after %d good): %s", o->runs + 1, o->runs, sub);
        return 0;
    }
    gpu_tensor_reverse(&dev->in[0].tensor);
    gpu_tensor_reverse(&ref->in[0].tensor);
    if (graft_model_run(ref->m, ref->in, ref->n_in) != GRAFT_OK) {
        snprintf(detail, n, "reference (CPU) on other inputs: %.600s", graft_last_error(cpu));
        return 0;
    }
    if (graft_model_run(dev->m, dev->in, dev->n_in) != GRAFT_OK) {
        snprintf(detail, n, "run on other inputs: %.600s", graft_last_error(dev_ctx));
        return 0;
    }
    if (!compare_all(o, name, dev, ref, sub, sizeof sub, 0)) {
        snprintf(detail, n, "run on other inputs (the first one reversed): %s", sub);
        return 0;
    }
    return 1;
}

static void check_model(graft_ctx *cpu, graft_ctx *dev_ctx, gpu_log *log, const options *o,
                        const char *name) {
    char path[1024], err[1024] = "", detail[1024] = "", test[256], bad[64];
    snprintf(test, sizeof test, "gpu_%s", name);
    snprintf(path, sizeof path, "%s/%s.onnx", o->gen, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP %s: %s not generated (run tools/make_models.py --out %s)\n", test, path,
               o->gen);
        skipped++;
        return;
    }
    fclose(f);
    side ref = {0}, dev = {0};
    gpu_log_reset(log);
    int cpu_runs = 1 + (o->runs < 3 ? o->runs : 3);
    if (side_load(cpu, o, name, &ref, err, sizeof err) != 0 ||
        side_time(cpu, &ref, cpu_runs, err, sizeof err) != 0) {
        printf("FAIL %s: reference (CPU): %s\n", test, err);
        failed++;
    } else if (side_load(dev_ctx, o, name, &dev, err, sizeof err) != 0 ||
               side_time(dev_ctx, &dev, 1, err, sizeof err) != 0) {
        printf("FAIL %s: %s\n", test, err);
        failed++;
    } else {
        int ok = compare_all(o, name, &dev, &ref, detail, sizeof detail, 1);
        if (ok && side_time(dev_ctx, &dev, o->runs, err, sizeof err) != 0) {
            if (snprintf(detail, sizeof detail, "a later run failed: %s", err) >=
                (int)sizeof detail)
                detail[sizeof detail - 2] = '~';
            ok = 0;
        }
        char later[1024];
        if (ok && !check_later_runs(cpu, dev_ctx, o, name, &dev, &ref, later, sizeof later)) {
            snprintf(detail, sizeof detail, "%s", later);
            ok = 0;
        }
        if (ok && log->fallbacks && !ops_allowed(log->fallback_ops, o->allow, bad, sizeof bad)) {
            snprintf(detail, sizeof detail, "ops ran on the CPU: %s (%s is not in the allow-list)",
                     log->fallback_ops, bad);
            ok = 0;
        }
        printf("%s %s%s %s; %s: %.2f ms per batch (first run %.1f ms), cpu %.2f ms per batch "
               "(%.1fx)\n",
               ok ? "PASS" : "FAIL", test, ok ? "" : ":", detail, graft_model_device(dev.m),
               dev.median_ms, dev.first_ms, ref.median_ms,
               dev.median_ms > 0 ? ref.median_ms / dev.median_ms : 0.0);
        if (log->fallbacks) printf("# %s: ops on the CPU: %s\n", test, log->fallback_ops);
        if (log->len) printf("%s\n", log->warnings);
        if (ok)
            passed++;
        else
            failed++;
    }
    fflush(stdout);
    side_free(&dev);
    side_free(&ref);
}

int main(int argc, char **argv) {
    options o = {NULL, NULL, DEFAULT_ALLOW, 5};
    const char *names[64], *device = NULL;
    int n_names = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            o.runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (strcmp(argv[i], "--allow") == 0 && i + 1 < argc)
            o.allow = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s GEN [NAME...] [--runs N] [--device DEV] [--allow OPS]\n",
                    argv[0]);
            return 2;
        } else if (!o.gen)
            o.gen = argv[i];
        else if (n_names < 64)
            names[n_names++] = argv[i];
    }
    if (!o.gen) o.gen = "tests/data/gen";
    if (o.runs < 0) o.runs = 0;
    if (n_names == 0)
        for (size_t i = 0; i < sizeof default_models / sizeof *default_models; i++)
            names[n_names++] = default_models[i];
    o.device = gpu_test_device(device);
    char why[512] = "";
    if (!gpu_test_usable(o.device, why, sizeof why)) {
        for (int i = 0; i < n_names; i++)
            printf("SKIP gpu_%s: no usable GPU (%s)\n", names[i], why);
        return 0;
    }
    gpu_test_describe(o.device);
    printf("# allow-list (ops that may run on the CPU): %s\n", o.allow[0] ? o.allow : "(none)");
    gpu_log cpu_log, dev_log;
    gpu_log_reset(&cpu_log);
    gpu_log_reset(&dev_log);
    graft_ctx *cpu = gpu_ctx_create("cpu", &cpu_log, why, sizeof why);
    graft_ctx *dev = cpu ? gpu_ctx_create(o.device, &dev_log, why, sizeof why) : NULL;
    if (!cpu || !dev) {
        printf("FAIL gpu_models: %s\n", why);
        graft_ctx_free(cpu);
        return 1;
    }
    for (int i = 0; i < n_names; i++) check_model(cpu, dev, &dev_log, &o, names[i]);
    graft_ctx_free(dev);
    graft_ctx_free(cpu);
    printf("# gpu_models on %s: %d passed, %d failed, %d skipped\n", o.device, passed, failed,
           skipped);
    return failed ? 1 : 0;
}

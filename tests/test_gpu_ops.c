/* test_gpu_ops.c: every op's CUDA kernel against the CPU backend, on the single-op cases that
 * tools/make_gpu_op_cases.py writes (index DIR/cases.txt; tolerances documented there).
 * Each case checks the device's first run, its run after the timed ones (a CUDA graph replay by
 * then), and a run on other inputs (the first input reversed, against a second CPU run), and
 * fails when the backend reports running the node on the CPU (unless flagged fallback-ok).
 *
 * usage: test_gpu_ops DIR [--filter SUB[,SUB...]] [--small] [--no-half] [--runs N] [--device D]
 *   --filter  only cases whose name contains one of the substrings (e.g. .f32)
 *   --small   only the cases flagged small (fast enough for compute-sanitizer)
 *   --no-half only the fp32 and integer cases (leave out the fp16 and bf16 ones)
 *   --runs    timed GPU runs per case after the checked one (default 5; median reported)
 *   --device  the device under test (default $GRAFT_TEST_GPU_DEVICE, else cuda:0); "cpu" runs
 *             the CPU against itself, "cpu-ref" its reference kernels against its oneDNN ones:
 *             checks of the cases and the tolerances themselves (half cases the CPU cannot run
 *             in fp16/bf16 are skipped then)
 * Without a usable GPU every selected case prints a SKIP line and the program exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/npy.h"
#include "gpu_test_util.h"

#define MAX_IO 16
#define TOL_F32 1e-5
#define TOL_HALF 1e-2

typedef struct op_case {
    char name[128], dtype[32], tol[32], model[256], ref[256], inputs[4096], flags[256];
} op_case;

typedef struct options {
    const char *dir, *filters, *device;
    int small, no_half, runs;
} options;

typedef struct case_inputs {
    int n;
    char names[MAX_IO][64];
    graft_tensor file[MAX_IO];
} case_inputs;

/* A loaded model with its inputs bound (converted to its declared dtypes). */
typedef struct bound_model {
    graft_model *m;
    graft_named_tensor in[MAX_IO];
    int n_in;
} bound_model;

static int passed, failed, skipped;

static int has_flag(const op_case *c, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = c->flags; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, flag, n) == 0) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* A case's "half-fused-NAME-N" flag (in half precision the device runs group NAME of N nodes)
 * as the log's "NAME: N nodes" in want; 0 without one. */
static int fused_flag(const op_case *c, char *want, size_t n) {
    const char *p = strstr(c->flags, "half-fused-");
    if (!p) return 0;
    p += strlen("half-fused-");
    size_t len = strcspn(p, ","), dash = len;
    while (dash > 0 && p[dash - 1] != '-') dash--;
    if (dash < 2) return 0;
    snprintf(want, n, "%.*s: %.*s nodes", (int)(dash - 1), p, (int)(len - dash), p + dash);
    return 1;
}

static int selected(const op_case *c, const options *o) {
    if (o->small && !has_flag(c, "small")) return 0;
    if (o->no_half && (strcmp(c->dtype, "f16") == 0 || strcmp(c->dtype, "bf16") == 0)) return 0;
    if (!o->filters) return 1;
    for (const char *p = o->filters; *p;) {
        size_t len = strcspn(p, ",");
        char sub[128];
        snprintf(sub, sizeof sub, "%.*s", (int)(len < sizeof sub ? len : sizeof sub - 1), p);
        if (strstr(c->name, sub)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static void case_inputs_free(case_inputs *in) {
    for (int i = 0; i < in->n; i++) free(in->file[i].data);
    in->n = 0;
}

static int case_inputs_read(const options *o, const op_case *c, case_inputs *in, char *err,
                            size_t n) {
    in->n = 0;
    if (strcmp(c->inputs, "-") == 0) return 0;
    for (const char *p = c->inputs; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        if (!eq || in->n == MAX_IO) {
            snprintf(err, n, "malformed inputs field '%.200s'", c->inputs);
            return -1;
        }
        char path[1024];
        snprintf(in->names[in->n], sizeof in->names[0], "%.*s", (int)(eq - p), p);
        snprintf(path, sizeof path, "%s/%.*s", o->dir, (int)(len - (size_t)(eq - p) - 1), eq + 1);
        if (npy_read(path, &in->file[in->n], err, n) != 0) return -1;
        in->n++;
        p += len + (p[len] == ',');
    }
    return 0;
}

static void bound_free(bound_model *b) {
    for (int i = 0; i < b->n_in; i++) free(b->in[i].tensor.data);
    graft_model_free(b->m);
    memset(b, 0, sizeof *b);
}

/* Bind the case's inputs to the model's, converted to the dtypes it declares (again: the
 * previous binding is replaced). */
static int bound_bind(bound_model *b, const case_inputs *in, char *err, size_t n) {
    for (int i = 0; i < b->n_in; i++) free(b->in[i].tensor.data);
    b->n_in = 0;
    int count = graft_model_input_count(b->m);
    for (int i = 0; i < count && i < MAX_IO; i++) {
        graft_value_info info;
        graft_model_input_info(b->m, i, &info);
        int k = 0;
        while (k < in->n && strcmp(in->names[k], info.name) != 0) k++;
        if (k == in->n) {
            snprintf(err, n, "no input file for '%s'", info.name);
            return -1;
        }
        char why[256];
        b->in[i].name = info.name;
        if (gpu_convert_input(&in->file[k], info.dtype, &b->in[i].tensor, why, sizeof why)) {
            snprintf(err, n, "input '%s': %s", info.name, why);
            return -1;
        }
        b->n_in = i + 1;
    }
    return 0;
}

/* Load dir/file on ctx and bind the case's inputs to it. */
static int bound_load(graft_ctx *ctx, const options *o, const char *file, const case_inputs *in,
                      bound_model *b, char *err, size_t n) {
    char path[1024];
    memset(b, 0, sizeof *b);
    snprintf(path, sizeof path, "%s/%s", o->dir, file);
    if (graft_model_load(ctx, path, &b->m) != GRAFT_OK) {
        snprintf(err, n, "loading %.300s: %.600s", file, graft_last_error(ctx));
        return -1;
    }
    return bound_bind(b, in, err, n);
}

static int bound_run(graft_ctx *ctx, bound_model *b, double *seconds, char *err, size_t n) {
    double t0 = gpu_now();
    graft_status st = graft_model_run(b->m, b->in, b->n_in);
    if (seconds) *seconds = gpu_now() - t0;
    if (st != GRAFT_OK) {
        snprintf(err, n, "run: %s", graft_last_error(ctx));
        return -1;
    }
    return 0;
}

/* "Conv", or "Cast+Add" for graphs of several op types. */
static void op_list(const graft_model *m, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < graft_model_op_type_count(m) && len < n; i++) {
        const char *op;
        int64_t count;
        if (graft_model_op_type(m, i, &op, &count) == GRAFT_OK)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "+" : "", op);
    }
}

static int tol_parse(const char *tol, gpu_tol_kind *kind, double *bound, int *axis) {
    *axis = -1;
    *bound = 0;
    if (strcmp(tol, "exact") == 0)
        *kind = GPU_TOL_EXACT;
    else if (strcmp(tol, "f32") == 0)
        *kind = GPU_TOL_REL, *bound = TOL_F32;
    else if (strcmp(tol, "half") == 0)
        *kind = GPU_TOL_HALF, *bound = TOL_HALF;
    else if (strncmp(tol, "half:", 5) == 0 && atof(tol + 5) > 0)
        *kind = GPU_TOL_HALF, *bound = atof(tol + 5);
    else if (strncmp(tol, "argmax:", 7) == 0)
        *kind = GPU_TOL_ARGMAX, *axis = atoi(tol + 7);
    else
        return -1;
    return 0;
}

static graft_dtype case_float_dtype(const op_case *c) {
    if (strcmp(c->dtype, "f16") == 0) return GRAFT_DTYPE_F16;
    if (strcmp(c->dtype, "bf16") == 0) return GRAFT_DTYPE_BF16;
    return GRAFT_DTYPE_F32;
}

/* Compare every output of the device run with the reference's copies. Returns 1 when all
 * match; `detail` gets the worst error (or the first failure). */
static int compare_outputs(const op_case *c, const bound_model *dev, const graft_tensor *ref,
                           int n_ref, char *detail, size_t n) {
    gpu_tol_kind kind;
    double bound;
    int axis;
    if (tol_parse(c->tol, &kind, &bound, &axis)) {
        snprintf(detail, n, "unknown tolerance class '%s'", c->tol);
        return 0;
    }
    int n_out = graft_model_output_count(dev->m);
    if (n_out != n_ref) {
        snprintf(detail, n, "%d outputs, reference %d", n_out, n_ref);
        return 0;
    }
    double worst = 0;
    for (int o = 0; o < n_out; o++) {
        const graft_tensor *got;
        graft_value_info info;
        graft_model_output_info(dev->m, o, &info);
        if (graft_model_output(dev->m, o, &got) != GRAFT_OK) {
            snprintf(detail, n, "output %s: missing", info.name);
            return 0;
        }
        graft_dtype want_dt = ref[o].dtype;
        if (strcmp(c->ref, "-") != 0 && want_dt == GRAFT_DTYPE_F32) want_dt = case_float_dtype(c);
        if (got->dtype != want_dt) {
            snprintf(detail, n, "output %s: dtype %s, expected %s", info.name,
                     graft_dtype_name(got->dtype), graft_dtype_name(want_dt));
            return 0;
        }
        const graft_tensor *data = dev->n_in ? &dev->in[0].tensor : NULL;
        gpu_cmp r = gpu_compare(got, &ref[o], kind, bound, data, axis);
        if (!r.ok) {
            snprintf(detail, n, "output %s: %s", info.name, r.why);
            return 0;
        }
        if (r.max_err > worst) worst = r.max_err;
    }
    if (kind == GPU_TOL_EXACT || kind == GPU_TOL_ARGMAX)
        snprintf(detail, n, "exact");
    else
        snprintf(detail, n, "err %.2e (tol %.0e)", worst, bound);
    return 1;
}

/* The reference outputs: the CPU runs the fp32 twin (half cases) or the model itself. */
static int run_reference(graft_ctx *cpu, const options *o, const op_case *c, const case_inputs *in,
                         graft_tensor *ref, int *n_ref, double *secs, char *err, size_t n) {
    bound_model b;
    *n_ref = 0;
    int rc = bound_load(cpu, o, strcmp(c->ref, "-") ? c->ref : c->model, in, &b, err, n);
    if (rc == 0) rc = bound_run(cpu, &b, secs, err, n);
    for (int i = 0; rc == 0 && i < graft_model_output_count(b.m) && i < MAX_IO; i++) {
        const graft_tensor *t;
        if (graft_model_output(b.m, i, &t) != GRAFT_OK || gpu_tensor_copy(t, &ref[i]) != 0) {
            snprintf(err, n, "copying output %d", i);
            rc = -1;
            break;
        }
        *n_ref = i + 1;
    }
    bound_free(&b);
    return rc;
}

static void report(const char *verdict, const op_case *c, const char *ops, const char *detail,
                   double gpu_ms, double cpu_ms) {
    printf("%s %s [%s]%s %s", verdict, c->name, ops[0] ? ops : "?",
           strcmp(verdict, "PASS") == 0 ? "" : ":", detail);
    if (gpu_ms >= 0) printf("; gpu %.3f ms (median)", gpu_ms);
    if (cpu_ms >= 0) printf("%s cpu %.3f ms", gpu_ms >= 0 ? "," : ";", cpu_ms);
    printf("\n");
    fflush(stdout);
}

/* The median time of `runs` runs (for information; never asserted), in ms; -1 for none. */
static double time_runs(graft_ctx *ctx, bound_model *b, int runs, char *err, size_t n) {
    double times[64];
    int done = 0;
    for (int r = 0; r < runs && done < 64; r++) {
        if (bound_run(ctx, b, &times[done], err, n) != 0) return -2;
        done++;
    }
    return done ? 1e3 * gpu_median(times, done) : -1;
}

/* Other data of the same shape, still in the op's domain (the first input reversed), for the
 * check that a later run (a CUDA graph replay) reads new inputs. */
static void reverse_first_input(case_inputs *in) {
    if (in->n) gpu_tensor_reverse(&in->file[0]);
}

typedef struct case_refs {
    graft_tensor a[MAX_IO], b[MAX_IO]; /* outputs for the inputs as given, and reversed */
    int n_a, n_b;
    double cpu_ms;
} case_refs;

/* The device side: the first run, `runs` timed runs (replays once a CUDA graph is recorded)
 * whose last outputs are checked again, then a run on the reversed inputs. Returns 1 when every
 * check passed; detail says what failed (or the worst error). */
static int device_runs(graft_ctx *dev_ctx, const options *o, const op_case *c, case_inputs *in,
                       const case_refs *refs, bound_model *dev, double *gpu_ms, char *detail,
                       size_t n) {
    char err[700], sub[700];
    if (!compare_outputs(c, dev, refs->a, refs->n_a, detail, n)) return 0;
    *gpu_ms = time_runs(dev_ctx, dev, o->runs, err, sizeof err);
    if (*gpu_ms == -2) {
        snprintf(detail, n, "a later run failed: %s", err);
        return 0;
    }
    if (o->runs > 0 && !compare_outputs(c, dev, refs->a, refs->n_a, sub, sizeof sub)) {
        snprintf(detail, n, "run %d (after %d good): %s", o->runs + 1, o->runs, sub);
        return 0;
    }
    reverse_first_input(in);
    if (bound_bind(dev, in, err, sizeof err) != 0 ||
        bound_run(dev_ctx, dev, NULL, err, sizeof err)) {
        snprintf(detail, n, "run on other inputs: %s", err);
        return 0;
    }
    if (!compare_outputs(c, dev, refs->b, refs->n_b, sub, sizeof sub)) {
        snprintf(detail, n, "run on other inputs (the first one reversed): %s", sub);
        return 0;
    }
    return 1;
}

/* Run the case on the device and judge it against the reference outputs. */
static void check_device(graft_ctx *dev_ctx, gpu_log *log, const options *o, const op_case *c,
                         case_inputs *in, const case_refs *refs) {
    char err[1024] = "", detail[1024] = "", ops[128] = "";
    bound_model dev = {0};
    int half = strcmp(c->dtype, "f16") == 0 || strcmp(c->dtype, "bf16") == 0;
    gpu_log_reset(log);
    if (bound_load(dev_ctx, o, c->model, in, &dev, err, sizeof err) != 0 ||
        bound_run(dev_ctx, &dev, NULL, err, sizeof err) != 0) {
        if (dev.m) op_list(dev.m, ops, sizeof ops);
        if (gpu_test_is_cpu(o->device) && half) { /* the CPU need not run every op in halves */
            printf("SKIP %s [%s]: the CPU backend cannot run it in %s (%s)\n", c->name, ops,
                   c->dtype, err);
            skipped++;
        } else {
            report("FAIL", c, ops, err, -1, refs->cpu_ms);
            failed++;
        }
        bound_free(&dev);
        return;
    }
    op_list(dev.m, ops, sizeof ops);
    double gpu_ms = -1;
    int ok = device_runs(dev_ctx, o, c, in, refs, &dev, &gpu_ms, detail, sizeof detail);
    char want[96];
    if (ok && half && !gpu_test_is_cpu(o->device) && fused_flag(c, want, sizeof want) &&
        !strstr(log->fused, want)) {
        snprintf(detail, sizeof detail, "the fused group '%s' did not run (ran: %.600s)", want,
                 log->fused[0] ? log->fused : "none");
        ok = 0;
    }
    if (ok && log->fallbacks && !has_flag(c, "fallback-ok")) {
        snprintf(detail, sizeof detail, "fell back to the CPU (%s), so its kernel was not tested",
                 log->fallback_ops[0] ? log->fallback_ops : "?");
        ok = 0;
    }
    report(ok ? "PASS" : "FAIL", c, ops, detail, gpu_ms, refs->cpu_ms);
    if (log->len) printf("%s\n", log->warnings);
    if (ok)
        passed++;
    else
        failed++;
    bound_free(&dev);
}

static void run_case(graft_ctx *cpu, graft_ctx *dev_ctx, gpu_log *log, const options *o,
                     const op_case *c) {
    char err[1024] = "", detail[1100];
    case_inputs in = {0}, other = {0};
    case_refs refs = {.n_a = 0, .n_b = 0, .cpu_ms = -1};
    double cpu_s = 0;
    int rc = case_inputs_read(o, c, &in, err, sizeof err);
    if (rc == 0) rc = run_reference(cpu, o, c, &in, refs.a, &refs.n_a, &cpu_s, err, sizeof err);
    if (rc == 0) rc = case_inputs_read(o, c, &other, err, sizeof err);
    if (rc == 0) {
        reverse_first_input(&other);
        rc = run_reference(cpu, o, c, &other, refs.b, &refs.n_b, NULL, err, sizeof err);
    }
    if (rc != 0) {
        snprintf(detail, sizeof detail, "reference (CPU): %s", err);
        report("FAIL", c, "", detail, -1, -1);
        failed++;
    } else {
        refs.cpu_ms = cpu_s * 1e3;
        check_device(dev_ctx, log, o, c, &in, &refs);
    }
    for (int i = 0; i < refs.n_a; i++) free(refs.a[i].data);
    for (int i = 0; i < refs.n_b; i++) free(refs.b[i].data);
    case_inputs_free(&in);
    case_inputs_free(&other);
}

static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->runs = 5;
    const char *device = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            o->filters = argv[++i];
        else if (strcmp(argv[i], "--small") == 0)
            o->small = 1;
        else if (strcmp(argv[i], "--no-half") == 0)
            o->no_half = 1;
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            o->runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (argv[i][0] != '-' && !o->dir)
            o->dir = argv[i];
        else
            return -1;
    }
    o->device = gpu_test_device(device);
    return o->dir ? 0 : -1;
}

int main(int argc, char **argv) {
    options o;
    if (parse_args(argc, argv, &o) != 0) {
        fprintf(stderr,
                "usage: %s DIR [--filter SUB[,SUB]] [--small] [--no-half] [--runs N] "
                "[--device DEV]\n",
                argv[0]);
        return 2;
    }
    char path[1024], line[8192], why[512] = "";
    snprintf(path, sizeof path, "%s/cases.txt", o.dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("FAIL gpu_ops: cannot open %s (run tools/make_gpu_op_cases.py --out %s)\n", path,
               o.dir);
        return 1;
    }
    int usable = gpu_test_usable(o.device, why, sizeof why);
    graft_ctx *cpu = NULL, *dev = NULL;
    gpu_log cpu_log, dev_log;
    gpu_log_reset(&cpu_log);
    gpu_log_reset(&dev_log);
    if (usable) {
        gpu_test_describe(o.device);
        cpu = gpu_ctx_create("cpu", &cpu_log, why, sizeof why);
        dev = gpu_ctx_create(o.device, &dev_log, why, sizeof why);
        if (!cpu || !dev) {
            printf("FAIL gpu_ops: %s\n", why);
            fclose(f);
            return 1;
        }
    }
    if (usable)
        printf("# times: the wall time of graft_model_run, host inputs and outputs copied each "
               "run (gpu: median of --runs %d after the checked run; cpu: the reference's "
               "first run)\n",
               o.runs);
    double t0 = gpu_now();
    while (fgets(line, sizeof line, f)) {
        op_case c;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%127s %31s %31s %255s %255s %4095s %255s", c.name, c.dtype, c.tol,
                   c.model, c.ref, c.inputs, c.flags) != 7) {
            printf("FAIL gpu_ops: malformed line in %s: %s", path, line);
            failed++;
            continue;
        }
        if (!selected(&c, &o)) continue;
        if (!usable) {
            printf("SKIP %s: no usable GPU (%s)\n", c.name, why);
            skipped++;
            continue;
        }
        run_case(cpu, dev, &dev_log, &o, &c);
    }
    fclose(f);
    graft_ctx_free(dev);
    graft_ctx_free(cpu);
    printf("# gpu_ops on %s: %d passed, %d failed, %d skipped in %.1f s\n", o.device, passed,
           failed, skipped, gpu_now() - t0);
    return failed ? 1 : 0;
}

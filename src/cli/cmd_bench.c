/* cmd_bench.c: `graft bench MODEL`: latency and throughput per batch size on the CPU. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "cli_util.h"
#include "commands.h"

#define CMD "bench"
#define MAX_BATCHES 32

typedef struct {
    const char *model;
    long batches[MAX_BATCHES];
    int n_batches;
    long iters, warmup, threads, seq_len;
    int json, profile, uint8, resident, pinned;
    char device[32];
    graft_dtype precision;
} bench_args;

typedef struct {
    double median_ms, p90_ms, min_ms, samples_per_s;
} bench_result;

static const char *const precisions[] = {"fp32", "fp16", "bf16", NULL};

static const cli_option bench_options[] = {
    {"batch", "LIST", "1,8,32", NULL, NULL, "comma-separated batch sizes"},
    {"iters", "N", "20", NULL, NULL, "timed runs per batch size"},
    {"warmup", "N", "3", NULL, NULL, "untimed runs first"},
    {"threads", "N", "0: all cores", NULL, NULL, "compute threads"},
    {"seq-len", "N", "128", NULL, NULL, "size of symbolic dimensions other than the batch"},
    {"device", "D", "cpu", NULL, NULL, "where to run: cpu, auto, cuda or cuda:N"},
    {"precision", "P", "fp32", precisions, NULL,
     "fp16 and bf16 are for a GPU: weights and activations in half precision, fp32 "
     "accumulation; inputs and outputs stay fp32"},
    {"uint8", NULL, NULL, NULL, NULL,
     "feed the image input as uint8 NHWC pixels, normalised inside the model (the mean and std of "
     "its metadata, else ImageNet's): 4x less to copy to a GPU than float32"},
    {"resident", NULL, NULL, NULL, NULL,
     "a GPU's inputs and outputs stay in its memory (graft_model_set_device_io): the inputs are "
     "copied there once, nothing is copied per run (the forward alone, as a pipeline that keeps "
     "data on the device runs it)"},
    {"pinned", NULL, NULL, NULL, NULL,
     "a GPU's inputs come from page-locked host memory (graft_model_host_alloc), two batches "
     "of it: each timed run starts the copy of the next batch (graft_model_copy_async) and runs "
     "this one, whose copy ran beside the run before (how a loader feeds a GPU); outputs are "
     "copied back"},
    {"profile", NULL, NULL, NULL, NULL,
     "after each batch size's timing, as many runs again with every node timed (on a GPU by "
     "events queued around each node, node by node without a CUDA graph) and a table of the "
     "time per op type, most first (a fused group is listed under its name, e.g. conv_add_act or "
     "attention), with the rate its nodes reached (GFLOP/s: their operations, a multiply-add "
     "counting 2, estimated from the shapes, over their time)"},
    {"json", NULL, NULL, NULL, NULL,
     "JSON lines, one per batch size: {batch, iters, median_ms, p90_ms, min_ms, samples_per_s}"},
};

static const cli_command bench_command = {
    .name = "bench",
    .usage = "MODEL [options]",
    .about = "Times MODEL's forward pass (on a GPU: inputs copied in, outputs copied back, as "
             "graft_model_run does) for each batch size and prints a table of latency (median, "
             "90th percentile and fastest run, in milliseconds per batch) and throughput "
             "(samples per second over the timed runs).\n\n"
             "Inputs are made from the model's declared inputs: float tensors get small "
             "pseudo-random values (seeded, the same every run), integer tensors zeros (ones "
             "for inputs whose name contains \"mask\"). A symbolic first dimension is the "
             "batch; every other symbolic dimension takes --seq-len. A model with a fixed batch "
             "dimension is timed at that batch only (a note on stderr says so).",
    .options = bench_options,
    .n_options = CLI_COUNT(bench_options),
    .examples = "graft bench models/digits_cnn.onnx\n"
                "graft bench bert.onnx --batch=1,16 --seq-len 64 --iters 50 --threads 8\n"
                "graft bench resnet50.onnx --device cuda:0 --precision fp16 --profile",
    .writes = "The table on stdout (JSON lines with --json); no files.",
    .exit_status = "0 on success, 1 when the model cannot be loaded or run, 2 for bad usage.",
};

static int parse_option(bench_args *a, const char *name, const char *v) {
    char o[32];
    snprintf(o, sizeof o, "--%s", name);
    if (strcmp(name, "batch") == 0)
        return (a->n_batches = cli_int_list(CMD, o, v, 1, 65536, a->batches, MAX_BATCHES)) < 0;
    if (strcmp(name, "iters") == 0) return cli_int(CMD, o, v, 1, 1000000, &a->iters) != 0;
    if (strcmp(name, "warmup") == 0) return cli_int(CMD, o, v, 0, 1000000, &a->warmup) != 0;
    if (strcmp(name, "threads") == 0) return cli_int(CMD, o, v, 0, 4096, &a->threads) != 0;
    if (strcmp(name, "seq-len") == 0) return cli_int(CMD, o, v, 1, 1 << 20, &a->seq_len) != 0;
    if (strcmp(name, "precision") == 0) return cli_precision(CMD, v, &a->precision) != 0;
    if (strcmp(name, "json") == 0) return a->json = 1, 0;
    if (strcmp(name, "profile") == 0) return a->profile = 1, 0;
    if (strcmp(name, "uint8") == 0) return a->uint8 = 1, 0;
    if (strcmp(name, "resident") == 0) return a->resident = 1, 0;
    if (strcmp(name, "pinned") == 0) return a->pinned = 1, 0;
    return cli_device(CMD, v, a->device, sizeof a->device) != 0; /* --device */
}

static int parse_args(int argc, char **argv, bench_args *a) {
    *a = (bench_args){NULL, {1, 8, 32}, 3, 20, 3, 0, 128, 0, 0, 0, 0, 0, "cpu", GRAFT_DTYPE_F32};
    const cli_option *o;
    const char *v;
    cli_parser p;
    int k;
    cli_parser_init(&p, &bench_command, NULL, argc, argv);
    while ((k = cli_next(&p, &o, &v)) > 0) {
        if (k == CLI_OPTION) {
            if (parse_option(a, o->name, v)) return 2;
        } else if (a->model) {
            return cli_error(CMD, "more than one model given: '%s'", v);
        } else {
            a->model = v;
        }
    }
    if (k < 0) return cli_stop_status(k);
    if (!a->model) return cli_error(CMD, "no model given (usage: graft bench MODEL [options])");
    return -1;
}

static uint32_t next_random(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*state >> 33);
}

/* Fill one input: floats pseudo-random in [-1, 1), masks ones, other integers zeros. */
static void fill_input(graft_tensor *t, const char *name, int64_t numel) {
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    int mask = strstr(name, "mask") != NULL;
    for (int64_t i = 0; i < numel; i++) {
        switch (t->dtype) {
        case GRAFT_DTYPE_F32:
            ((float *)t->data)[i] = (float)next_random(&state) / 2147483648.0f - 1.0f;
            break;
        case GRAFT_DTYPE_F64:
            ((double *)t->data)[i] = (double)next_random(&state) / 2147483648.0 - 1.0;
            break;
        case GRAFT_DTYPE_I64:
            ((int64_t *)t->data)[i] = mask;
            break;
        case GRAFT_DTYPE_I32:
            ((int32_t *)t->data)[i] = mask;
            break;
        case GRAFT_DTYPE_BOOL:
        case GRAFT_DTYPE_U8:
            ((uint8_t *)t->data)[i] = (uint8_t)mask;
            break;
        default:
            return; /* calloc'ed zeros */
        }
    }
}

/* Allocate and fill every input for this batch size. Returns 0, or -1 after an error. */
static int make_inputs(const graft_model *m, const bench_args *a, long batch,
                       graft_named_tensor *in, int n) {
    for (int i = 0; i < n; i++) {
        graft_value_info v;
        graft_model_input_info(m, i, &v);
        if (v.ndim < 0)
            return cli_error(CMD, "input '%s' has an unknown rank; graft bench cannot shape it",
                             v.name),
                   -1;
        in[i].name = v.name;
        in[i].tensor = (graft_tensor){v.dtype, v.ndim, {0}, NULL};
        for (int d = 0; d < v.ndim; d++)
            in[i].tensor.dims[d] = v.dims[d] >= 0 ? v.dims[d] : d == 0 ? batch : a->seq_len;
        int64_t numel = graft_tensor_numel(&in[i].tensor);
        size_t es = graft_dtype_size(v.dtype);
        if (numel < 0 || es == 0 || !(in[i].tensor.data = calloc((size_t)(numel ? numel : 1), es)))
            return cli_error(CMD, "cannot allocate input '%s' (%s)", v.name,
                             graft_dtype_name(v.dtype)),
                   -1;
        fill_input(&in[i].tensor, v.name, numel);
    }
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --resident: the inputs' data copied into device memory (the host copies freed). */
static int to_device(graft_ctx *ctx, graft_model *m, graft_named_tensor *in, int n) {
    for (int i = 0; i < n; i++) {
        graft_tensor *t = &in[i].tensor;
        size_t bytes = (size_t)graft_tensor_numel(t) * graft_dtype_size(t->dtype);
        void *dev = NULL;
        if (graft_model_device_alloc(m, bytes, &dev) != GRAFT_OK ||
            graft_model_copy(m, dev, t->data, bytes, GRAFT_COPY_HOST_TO_DEVICE) != GRAFT_OK) {
            cli_error(CMD, "--resident: %s", graft_last_error(ctx));
            graft_model_device_free(m, dev);
            for (int j = 0; j < n; j++) { /* none left to free_inputs */
                if (j < i)
                    graft_model_device_free(m, in[j].tensor.data);
                else
                    free(in[j].tensor.data);
                in[j].tensor.data = NULL;
            }
            return -1;
        }
        free(t->data);
        t->data = dev;
    }
    return 0;
}

static void free_inputs(graft_model *m, const bench_args *a, graft_named_tensor *in, int n) {
    for (int i = 0; in && i < n; i++) {
        if (a->resident)
            graft_model_device_free(m, in[i].tensor.data);
        else
            free(in[i].tensor.data);
    }
    free(in);
}

/* Time warmup + iters runs at one batch size. */
/* --profile: iters more runs with every node timed, then the time per op type. */
static int profile_runs(graft_ctx *ctx, graft_model *m, const bench_args *a,
                        const graft_named_tensor *in, int n) {
    graft_model_set_profiling(m, 1);
    for (long it = 0; it < a->iters; it++)
        if (graft_model_run(m, in, n) != GRAFT_OK) {
            cli_error(CMD, "profiling: %s", graft_last_error(ctx));
            graft_model_set_profiling(m, 0);
            return -1;
        }
    graft_op_time ops[32];
    int k = graft_model_profile(m, ops, 32);
    double total = 0;
    for (int i = 0; i < k && i < 32; i++) total += ops[i].seconds;
    FILE *to = a->json ? stderr : stdout; /* JSON lines stay parseable on stdout */
    fprintf(to, "  %-22s %12s %12s %7s %9s\n", "op (profiled)", "nodes/run", "ms/run", "share",
            "GFLOP/s");
    for (int i = 0; i < k && i < 32; i++)
        fprintf(to, "  %-22s %12.1f %12.3f %6.1f%% %9.1f\n", ops[i].op,
                (double)ops[i].count / (double)a->iters, 1e3 * ops[i].seconds / (double)a->iters,
                total > 0 ? 100.0 * ops[i].seconds / total : 0.0,
                ops[i].seconds > 0 ? 1e-9 * ops[i].flops / ops[i].seconds : 0.0);
    graft_model_set_profiling(m, 0);
    return 0;
}

/* --pinned: each input twice in page-locked host memory and twice on the device; run k reads
 * slot k % 2, whose copy started before run k - 1. */
typedef struct {
    void *host[2], *dev[2];
    size_t bytes;
} pinned_input;

static void pinned_free(graft_model *m, pinned_input *p, int n) {
    graft_model_copy_wait(m);
    for (int i = 0; p && i < n; i++)
        for (int s = 0; s < 2; s++)
            graft_model_host_free(m, p[i].host[s]), graft_model_device_free(m, p[i].dev[s]);
    free(p);
}

/* The inputs' host data moved into the pinned slots (and freed). */
static pinned_input *pinned_make(graft_ctx *ctx, graft_model *m, graft_named_tensor *in, int n) {
    pinned_input *p = calloc(n > 0 ? (size_t)n : 1, sizeof *p);
    graft_status st = p ? GRAFT_OK : GRAFT_E_OUT_OF_MEMORY;
    for (int i = 0; i < n && st == GRAFT_OK; i++) {
        const graft_tensor *t = &in[i].tensor;
        p[i].bytes = (size_t)graft_tensor_numel(t) * graft_dtype_size(t->dtype);
        for (int s = 0; s < 2 && st == GRAFT_OK; s++) {
            st = graft_model_host_alloc(m, p[i].bytes, &p[i].host[s]);
            if (st == GRAFT_OK) st = graft_model_device_alloc(m, p[i].bytes, &p[i].dev[s]);
            if (st == GRAFT_OK) memcpy(p[i].host[s], t->data, p[i].bytes);
        }
    }
    if (st == GRAFT_OK) {
        for (int i = 0; i < n; i++) free(in[i].tensor.data), in[i].tensor.data = NULL;
        return p;
    }
    cli_error(CMD, "--pinned: %s", p ? graft_last_error(ctx) : "out of memory");
    pinned_free(m, p, n);
    return NULL;
}

/* Start the copy of run k's inputs into slot k % 2. */
static graft_status pinned_feed(graft_model *m, pinned_input *p, int n, long k) {
    for (int i = 0; i < n; i++) {
        int s = (int)(k % 2);
        graft_status st = graft_model_copy_async(m, p[i].dev[s], p[i].host[s], p[i].bytes);
        if (st != GRAFT_OK) return st;
    }
    return GRAFT_OK;
}

/* The inputs for this batch size where the options want them: on the host, resident on the
 * device, or (--pinned) in pinned slots with slot 0's copy started and `in` pointing at it.
 * Returns 0, or -1 after an error (inputs_release still frees what was made). */
static int inputs_ready(graft_ctx *ctx, graft_model *m, const bench_args *a, long batch,
                        graft_named_tensor *in, int n, pinned_input **pin) {
    if (make_inputs(m, a, batch, in, n) != 0 || (a->resident && to_device(ctx, m, in, n)))
        return -1;
    if (!a->pinned) return 0;
    if (!(*pin = pinned_make(ctx, m, in, n))) return -1;
    if (pinned_feed(m, *pin, n, 0) != GRAFT_OK)
        return cli_error(CMD, "--pinned: %s", graft_last_error(ctx)), -1;
    for (int i = 0; i < n; i++) in[i].tensor.data = (*pin)[i].dev[0];
    return 0;
}

static void inputs_release(graft_model *m, const bench_args *a, graft_named_tensor *in, int n,
                           pinned_input *pin) {
    if (pin) { /* in points at the device slots: the host inputs are in the pinned copies */
        pinned_free(m, pin, n);
        for (int i = 0; i < n; i++) in[i].tensor.data = NULL;
    }
    free_inputs(m, a, in, n);
}

/* One timed (or warm-up) run: with --pinned, the next run's copy started first. */
static graft_status one_run(graft_model *m, pinned_input *p, graft_named_tensor *in, int n,
                            long it) {
    if (p) {
        for (int i = 0; i < n; i++) in[i].tensor.data = p[i].dev[it % 2];
        graft_status st = pinned_feed(m, p, n, it + 1);
        if (st != GRAFT_OK) return st;
    }
    return graft_model_run(m, in, n);
}

static int time_batch(graft_ctx *ctx, graft_model *m, const bench_args *a, long batch,
                      bench_result *r) {
    int n = graft_model_input_count(m), rc = -1;
    graft_named_tensor *in = calloc((size_t)(n ? n : 1), sizeof *in);
    double *ms = malloc(sizeof *ms * (size_t)a->iters), total = 0;
    pinned_input *pin = NULL;
    if (!in || !ms)
        cli_error(CMD, "out of memory");
    else if (inputs_ready(ctx, m, a, batch, in, n, &pin) == 0) {
        rc = 0;
        for (long it = 0; rc == 0 && it < a->warmup + a->iters; it++) {
            double t0 = now_ms();
            if (one_run(m, pin, in, n, it) != GRAFT_OK) {
                cli_error(CMD, "batch %ld: %s", batch, graft_last_error(ctx));
                rc = -1;
            } else if (it >= a->warmup) {
                ms[it - a->warmup] = now_ms() - t0;
                total += ms[it - a->warmup];
            }
        }
    }
    if (rc == 0) {
        qsort(ms, (size_t)a->iters, sizeof *ms, cmp_double);
        long p90 = (a->iters * 9 + 9) / 10 - 1;
        r->median_ms =
            a->iters % 2 ? ms[a->iters / 2] : (ms[a->iters / 2 - 1] + ms[a->iters / 2]) / 2;
        r->p90_ms = ms[p90];
        r->min_ms = ms[0];
        r->samples_per_s = total > 0 ? 1e3 * (double)batch * (double)a->iters / total : 0;
    }
    inputs_release(m, a, in, n, pin);
    free(ms);
    return rc;
}

static int profile_batch(graft_ctx *ctx, graft_model *m, const bench_args *a, long batch) {
    int n = graft_model_input_count(m), rc = -1;
    graft_named_tensor *in = calloc((size_t)(n ? n : 1), sizeof *in);
    pinned_input *pin = NULL;
    if (!in)
        cli_error(CMD, "out of memory");
    else if (inputs_ready(ctx, m, a, batch, in, n, &pin) == 0) /* --pinned: slot 0, copied once */
        rc = profile_runs(ctx, m, a, in, n);
    inputs_release(m, a, in, n, pin);
    return rc;
}

/* A fixed first dimension on the inputs pins the batch size. */
static void pin_batch(const graft_model *m, bench_args *a) {
    graft_value_info v;
    if (graft_model_input_count(m) < 1 || graft_model_input_info(m, 0, &v) != GRAFT_OK ||
        v.ndim < 1 || v.dims[0] < 0)
        return;
    if (a->n_batches == 1 && a->batches[0] == v.dims[0]) return;
    fprintf(stderr, "graft bench: note: input '%s' has a fixed batch of %lld; timing that only\n",
            v.name, (long long)v.dims[0]);
    a->batches[0] = (long)v.dims[0];
    a->n_batches = 1;
}

int cmd_bench(int argc, char **argv) {
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != -1) return rc;
    graft_ctx *ctx = cli_ctx(CMD, (int)a.threads, a.device);
    graft_model *m = NULL;
    if (!ctx) return 1;
    rc = 0;
    if (graft_model_load(ctx, a.model, &m) != GRAFT_OK ||
        graft_model_set_precision(m, a.precision) != GRAFT_OK) {
        cli_error(CMD, "%s", graft_last_error(ctx));
        rc = 1;
    } else if (a.uint8 && cli_uint8_input(CMD, ctx, m)) {
        rc = 1;
    } else if (a.resident && a.pinned) {
        rc = cli_error(CMD, "--resident and --pinned: choose one (inputs kept on the GPU, or "
                            "copied in from pinned host memory each run)");
    } else if (a.resident && graft_model_set_device_io(m, 1, 1) != GRAFT_OK) {
        cli_error(CMD, "--resident: %s", graft_last_error(ctx));
        rc = 1;
    } else if (a.pinned && graft_model_set_device_io(m, 1, 0) != GRAFT_OK) {
        cli_error(CMD, "--pinned: %s", graft_last_error(ctx));
        rc = 1;
    } else {
        pin_batch(m, &a);
        char threads[32] = "all cores";
        if (a.threads) snprintf(threads, sizeof threads, "%ld threads", a.threads);
        if (!a.json)
            printf("model %s on the %s (%s), %ld warm-up + %ld timed runs per batch\n"
                   "%7s %11s %11s %11s %13s\n",
                   a.model, graft_model_device(m), threads, a.warmup, a.iters, "batch", "median ms",
                   "p90 ms", "min ms", "samples/s");
    }
    for (int b = 0; rc == 0 && b < a.n_batches; b++) {
        bench_result r;
        if (time_batch(ctx, m, &a, a.batches[b], &r) != 0) {
            rc = 1;
        } else if (a.json) {
            printf("{\"device\": \"%s\", \"batch\": %ld, \"iters\": %ld, \"median_ms\": %.4f, "
                   "\"p90_ms\": %.4f, \"min_ms\": %.4f, \"samples_per_s\": %.2f}\n",
                   graft_model_device(m), a.batches[b], a.iters, r.median_ms, r.p90_ms, r.min_ms,
                   r.samples_per_s);
        } else {
            printf("%7ld %11.3f %11.3f %11.3f %13.1f\n", a.batches[b], r.median_ms, r.p90_ms,
                   r.min_ms, r.samples_per_s);
        }
        if (rc == 0 && a.profile) rc = profile_batch(ctx, m, &a, a.batches[b]) ? 1 : 0;
        fflush(stdout);
    }
    graft_model_free(m);
    graft_ctx_free(ctx);
    return rc;
}

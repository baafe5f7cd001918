/* gpu_test_util.h: what the GPU-against-CPU tests share: choosing the device, catching the
 * backend's CPU-fallback warnings, converting tensors and comparing them with a tolerance. */
#ifndef GRAFT_GPU_TEST_UTIL_H
#define GRAFT_GPU_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/half.h"
#include "core/tensor.h"
#include "graft.h"

/* ---- device and logging ------------------------------------------------------------------ */

/* The device the "GPU" side runs on: --device, else $GRAFT_TEST_GPU_DEVICE, else cuda:0.
 * GRAFT_TEST_GPU_DEVICE=cpu runs the CPU against itself, and cpu-ref the CPU's plain reference
 * kernels against its default ones (oneDNN): checks of the tests' own logic and tolerances
 * where no GPU is at hand (cpu-ref sums in another order, as a GPU does). */
static inline const char *gpu_test_device(const char *from_cli) {
    if (from_cli && *from_cli) return from_cli;
    const char *env = getenv("GRAFT_TEST_GPU_DEVICE");
    return env && *env ? env : "cuda:0";
}

static inline int gpu_test_is_cpu(const char *device) {
    return strcmp(device, "cpu") == 0 || strcmp(device, "cpu-ref") == 0;
}

/* 1 when the device can run models; else 0 and `why` says what is missing. */
static inline int gpu_test_usable(const char *device, char *why, size_t why_size) {
    if (gpu_test_is_cpu(device)) return 1;
    int n = graft_gpu_count(why, why_size);
    if (n > 0) return 1;
    if (!why[0]) snprintf(why, why_size, "graft_gpu_count() is 0");
    return 0;
}

/* For the tests that need a real GPU (nvJPEG): 1 after printing SKIP NAME when there is none
 * (or the device is a CPU stand-in), else 0. */
static inline int gpu_test_skip_without_gpu(const char *name, const char *device) {
    char why[256] = "";
    if (!gpu_test_is_cpu(device) && gpu_test_usable(device, why, sizeof why)) return 0;
    printf("SKIP %s: %s\n", name, gpu_test_is_cpu(device) ? "needs a GPU (nvJPEG)" : why);
    fflush(stdout);
    return 1;
}

/* One line about the GPU (or the CPU stand-in) for the log. */
static inline void gpu_test_describe(const char *device) {
    if (gpu_test_is_cpu(device)) {
        printf("# device: %s (a stand-in for the GPU: the CPU against itself)\n", device);
        return;
    }
    int index = 0;
    if (strncmp(device, "cuda:", 5) == 0) index = atoi(device + 5);
    graft_gpu_info info;
    if (graft_gpu_info_get(index, &info) != GRAFT_OK) {
        printf("# device: %s (no details)\n", device);
        return;
    }
    printf("# device: %s: %s, cc %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d, cuDNN %zu, "
           "cuBLASLt %zu\n",
           device, info.name, info.cc_major, info.cc_minor, info.multiprocessors,
           (double)info.total_bytes / (1024.0 * 1024.0 * 1024.0), info.driver_version,
           info.runtime_version, info.cudnn_version, info.cublaslt_version);
}

/* What a context's log said: warnings are kept, and the ops the CUDA backend reported running
 * on the CPU ("... (Op): no CUDA kernel covers ..." per node, "N nodes run on the CPU (no CUDA
 * kernel): Op, Op" per model) are collected. */
typedef struct gpu_log {
    char warnings[4096];
    size_t len;
    int fallbacks;
    char fallback_ops[512]; /* comma-separated, each op once */
    char fused[1024];       /* the fused groups that ran: "name: N nodes;" each */
} gpu_log;

static inline void gpu_log_reset(gpu_log *l) {
    l->fused[0] = 0;
    l->warnings[0] = 0;
    l->len = 0;
    l->fallbacks = 0;
    l->fallback_ops[0] = 0;
}

static inline void gpu_log_add_op(gpu_log *l, const char *op, size_t n) {
    char name[64];
    while (n && (*op == ' ' || *op == ',')) op++, n--;
    while (n && (op[n - 1] == ' ' || op[n - 1] == ',' || op[n - 1] == '\n')) n--;
    if (!n || n >= sizeof name) return;
    memcpy(name, op, n);
    name[n] = 0;
    /* Already listed? Compare whole names between commas. */
    const char *p = l->fallback_ops;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0) return;
        p += len + (p[len] == ',');
    }
    size_t used = strlen(l->fallback_ops);
    if (used + n + 2 < sizeof l->fallback_ops)
        snprintf(l->fallback_ops + used, sizeof l->fallback_ops - used, "%s%s", used ? "," : "",
                 name);
}

static inline void gpu_log_parse_fallback(gpu_log *l, const char *msg) {
    const char *node_form = strstr(msg, "): no CUDA kernel");
    if (node_form) {
        const char *open = node_form;
        while (open > msg && *open != '(') open--;
        if (*open == '(') gpu_log_add_op(l, open + 1, (size_t)(node_form - open - 1));
        return;
    }
    const char *model_form = strstr(msg, "(no CUDA kernel):");
    if (model_form) {
        const char *p = model_form + strlen("(no CUDA kernel):");
        while (*p) {
            size_t n = strcspn(p, ",");
            gpu_log_add_op(l, p, n);
            p += n + (p[n] == ',');
        }
    }
}

static inline void gpu_log_fn(graft_log_level level, const char *msg, void *user) {
    gpu_log *l = user;
    if (level == GRAFT_LOG_DEBUG && strncmp(msg, "fused group ", 12) == 0) {
        size_t used = strlen(l->fused), n = strcspn(msg + 12, ",");
        if (used + n + 2 < sizeof l->fused)
            snprintf(l->fused + used, sizeof l->fused - used, "%.*s;", (int)n, msg + 12);
    }
    if (level < GRAFT_LOG_WARN) return;
    if (strstr(msg, "no CUDA kernel")) {
        l->fallbacks++;
        gpu_log_parse_fallback(l, msg);
    }
    int w = snprintf(l->warnings + l->len, sizeof l->warnings - l->len, "%s%s",
                     l->len ? "\n# warn: " : "# warn: ", msg);
    if (w > 0)
        l->len =
            l->len + (size_t)w < sizeof l->warnings ? l->len + (size_t)w : sizeof l->warnings - 1;
}

/* A context for `device` whose log goes to `log`. NULL on failure (message in err). */
static inline graft_ctx *gpu_ctx_create(const char *device, gpu_log *log, char *err, size_t n) {
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.device = gpu_test_is_cpu(device) ? NULL : device;
    o.use_reference_kernels = strcmp(device, "cpu-ref") == 0;
    o.log_fn = gpu_log_fn;
    o.log_user = log;
    o.log_level = GRAFT_LOG_DEBUG; /* the "fused group" lines; gpu_log_fn keeps warnings */
    o.allow_tf32 = 0;              /* fp32 must stay fp32: the tolerances assume it */
    graft_ctx *ctx = NULL;
    graft_status st = graft_ctx_create(&o, &ctx);
    if (st != GRAFT_OK) {
        snprintf(err, n, "graft_ctx_create(%s): %s", device, graft_status_str(st));
        return NULL;
    }
    return ctx;
}

/* ---- timing ---------------------------------------------------------------------------- */

static inline double gpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int gpu_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double gpu_median(double *v, int n) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, gpu_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- tensors ----------------------------------------------------------------------------- */

static inline int gpu_dtype_is_float(graft_dtype d) {
    return d == GRAFT_DTYPE_F32 || d == GRAFT_DTYPE_F16 || d == GRAFT_DTYPE_BF16 ||
           d == GRAFT_DTYPE_F64;
}

/* Element i as double (graft's own conversion); bool as its raw byte, so a kernel writing
 * anything but 0 or 1 for a bool is seen; NaN for a dtype graft does not know. */
static inline double gpu_get_f64(const graft_tensor *t, int64_t i) {
    if (t->dtype == GRAFT_DTYPE_BOOL) return ((const uint8_t *)t->data)[i];
    return dtype_is_valid(t->dtype) ? tensor_get_f64(t, i) : NAN;
}

static inline int64_t gpu_get_i64(const graft_tensor *t, int64_t i) {
    switch (t->dtype) {
    case GRAFT_DTYPE_I64:
        return ((const int64_t *)t->data)[i];
    case GRAFT_DTYPE_U64:
        return (int64_t)((const uint64_t *)t->data)[i];
    default:
        return (int64_t)gpu_get_f64(t, i);
    }
}

/* A copy of a tensor (the data too): a run's outputs are overwritten by the next run. */
static inline int gpu_tensor_copy(const graft_tensor *src, graft_tensor *dst) {
    *dst = *src;
    size_t bytes = (size_t)graft_tensor_numel(src) * graft_dtype_size(src->dtype);
    dst->data = malloc(bytes ? bytes : 1);
    if (!dst->data) return -1;
    if (bytes) memcpy(dst->data, src->data, bytes);
    return 0;
}

/* Reverse a tensor's element order in place: other data of the same shape and the same values
 * (still valid indices, masks or pixels), to check that a later run reads new inputs. */
static inline void gpu_tensor_reverse(graft_tensor *t) {
    int64_t count = graft_tensor_numel(t);
    size_t es = graft_dtype_size(t->dtype);
    unsigned char tmp[16], *p = t->data;
    if (es > sizeof tmp) return;
    for (int64_t i = 0, j = count - 1; i < j; i++, j--) {
        memcpy(tmp, p + (size_t)i * es, es);
        memcpy(p + (size_t)i * es, p + (size_t)j * es, es);
        memcpy(p + (size_t)j * es, tmp, es);
    }
}

/* A .npy file's tensor as the dtype a model declares for that input. Float files convert
 * between f32, f16 and bf16 (a U16 file holds raw bf16 bits); other dtypes must match. The
 * result owns new memory. */
static inline int gpu_convert_input(const graft_tensor *file, graft_dtype want, graft_tensor *out,
                                    char *err, size_t n) {
    *out = *file;
    out->dtype = want;
    int64_t count = graft_tensor_numel(file);
    graft_dtype from = file->dtype == GRAFT_DTYPE_U16 ? GRAFT_DTYPE_BF16 : file->dtype;
    size_t bytes = (size_t)count * graft_dtype_size(want);
    out->data = malloc(bytes ? bytes : 1);
    if (!out->data) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    if (from == want) {
        memcpy(out->data, file->data, bytes);
        return 0;
    }
    graft_tensor src = *file;
    src.dtype = from;
    if (!gpu_dtype_is_float(from) || !gpu_dtype_is_float(want) || want == GRAFT_DTYPE_F64) {
        snprintf(err, n, "the file holds %s, the model wants %s", graft_dtype_name(file->dtype),
                 graft_dtype_name(want));
        free(out->data);
        out->data = NULL;
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        float v = (float)gpu_get_f64(&src, i);
        if (want == GRAFT_DTYPE_F32)
            ((float *)out->data)[i] = v;
        else if (want == GRAFT_DTYPE_F16)
            ((uint16_t *)out->data)[i] = f32_to_f16(v);
        else
            ((uint16_t *)out->data)[i] = f32_to_bf16(v);
    }
    return 0;
}

/* ---- comparison ---------------------------------------------------------------------------- */

typedef enum gpu_tol_kind {
    GPU_TOL_EXACT,  /* a == b (NaN matches NaN) */
    GPU_TOL_REL,    /* |a - b| <= tol * max(|b|, rms(b)) */
    GPU_TOL_HALF,   /* |a - b| <= tol * (|b| + mean|b|) */
    GPU_TOL_ARGMAX, /* exact, ties in the data allowed */
} gpu_tol_kind;

typedef struct gpu_cmp {
    int ok;
    double max_err; /* in units of the bound's scale (exact: count of mismatches) */
    int64_t worst;  /* index of the worst element (-1: none) */
    double got, want;
    char why[256];
} gpu_cmp;

static inline int gpu_same_shape(const graft_tensor *a, const graft_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

static inline void gpu_shape_str(const graft_tensor *t, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    if (len < n) snprintf(buf + len, n - len, ")");
}

/* Are the input's values at indices ia and ib along `axis` equal (an ArgMax tie)? */
static inline int gpu_argmax_tie(const graft_tensor *x, int axis, int64_t out_index, int64_t ia,
                                 int64_t ib) {
    if (!x || axis < 0 || axis >= x->ndim) return 0;
    int64_t inner = 1, n = x->dims[axis];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->dims[d];
    if (ia < 0 || ib < 0 || ia >= n || ib >= n) return 0;
    int64_t outer = out_index / inner, in = out_index % inner;
    return gpu_get_f64(x, (outer * n + ia) * inner + in) ==
           gpu_get_f64(x, (outer * n + ib) * inner + in);
}

/* Compare output `a` (device run) with `b` (reference). argmax_in/axis: the ArgMax case's data. */
static inline gpu_cmp gpu_compare(const graft_tensor *a, const graft_tensor *b, gpu_tol_kind kind,
                                  double tol, const graft_tensor *argmax_in, int argmax_axis) {
    gpu_cmp r = {1, 0.0, -1, 0.0, 0.0, ""};
    if (!gpu_same_shape(a, b)) {
        char sa[128], sb[128];
        gpu_shape_str(a, sa, sizeof sa);
        gpu_shape_str(b, sb, sizeof sb);
        snprintf(r.why, sizeof r.why, "shape %.100s, reference %.100s", sa, sb);
        r.ok = 0;
        return r;
    }
    int64_t n = graft_tensor_numel(b);
    int ints = !gpu_dtype_is_float(a->dtype) && !gpu_dtype_is_float(b->dtype);
    double sum_sq = 0, sum_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = gpu_get_f64(b, i);
        if (isfinite(v)) sum_sq += v * v, sum_abs += fabs(v);
    }
    double rms = n ? sqrt(sum_sq / (double)n) : 0, mean_abs = n ? sum_abs / (double)n : 0;
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = gpu_get_f64(a, i), y = gpu_get_f64(b, i), err;
        if (kind == GPU_TOL_EXACT || kind == GPU_TOL_ARGMAX) {
            int same =
                ints ? gpu_get_i64(a, i) == gpu_get_i64(b, i) : (x == y || (isnan(x) && isnan(y)));
            if (!same && kind == GPU_TOL_ARGMAX)
                same =
                    gpu_argmax_tie(argmax_in, argmax_axis, i, gpu_get_i64(a, i), gpu_get_i64(b, i));
            if (!same && mismatches++ == 0) {
                r.worst = i;
                r.got = x;
                r.want = y;
            }
            continue;
        } else if (isnan(y) || isinf(y) || isnan(x) || isinf(x)) {
            err = (x == y || (isnan(x) && isnan(y))) ? 0.0 : INFINITY;
        } else {
            double scale = kind == GPU_TOL_REL ? fmax(fabs(y), rms) : fabs(y) + mean_abs;
            double d = fabs(x - y);
            err = d == 0 ? 0.0 : scale > 0 ? d / scale : INFINITY;
        }
        if (err > r.max_err) {
            r.max_err = err;
            r.worst = i;
            r.got = x;
            r.want = y;
        }
    }
    if (kind == GPU_TOL_EXACT || kind == GPU_TOL_ARGMAX) {
        r.max_err = (double)mismatches;
        r.ok = mismatches == 0;
        if (!r.ok)
            snprintf(r.why, sizeof r.why,
                     "%lld of %lld elements differ; first at %lld: %.9g, "
                     "reference %.9g",
                     (long long)mismatches, (long long)n, (long long)r.worst, r.got, r.want);
    } else {
        r.ok = r.max_err <= tol;
        if (!r.ok)
            snprintf(r.why, sizeof r.why,
                     "max error %.3g > %.0e (scaled) at %lld: %.9g, "
                     "reference %.9g",
                     r.max_err, tol, (long long)r.worst, r.got, r.want);
    }
    return r;
}

#endif

/* conformance.c: runs ONNX's own node tests (model.onnx + test_data_set_N) through graft. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graft.h"
#include "onnx.pb-c.h"
#include "core/half.h"
#include "core/tensor.h"
#include "onnx/onnx_io.h"
#include "ops/op.h"
#include "conformance_report.h"

#define DEFAULT_DATA_DIR "/usr/share/libonnx-testdata/data/node"
#define PATH_BUF 4096
#define REASON_BUF 1536
#define EXIT_SKIPPED 77 /* meson's "test skipped" code: no test data on this machine */

/* Float tolerances: |got - expected| <= atol + rtol * |expected|. The 16-bit types carry fewer
 * mantissa bits, so their rtol is about one unit in the last place of that type. */
#define RTOL_F32 1e-4
#define ATOL_F32 1e-5
#define RTOL_F16 1e-3
#define RTOL_BF16 8e-3

typedef struct options {
    const char *data_dir;
    const char **filters;
    int n_filters;
    const char *known_path;
    bool reference;
    const char *device;
    bool verbose;
    bool all;
} options;

/* What the runner learned about a model without loading it: whether graft claims every node,
 * and which op the test is attributed to in the per-op table. */
typedef struct model_facts {
    bool parsed;
    bool claimed;
    char op[128];      /* first op that is not Constant (or Constant when all are) */
    char why_not[256]; /* when not claimed */
} model_facts;

/* The test being run, for the crash handler: a crash in the library should still name it. */
static char current_test[256];
static struct sigaction previous_actions[NSIG];

static void write_str(const char *s) {
    ssize_t unused = write(STDERR_FILENO, s, strlen(s));
    (void)unused;
}

/* AddressSanitizer calls this hook (when present) before it prints a report. */
void __asan_on_error(void);
void __asan_on_error(void) {
    write_str("\nCRASH ");
    write_str(current_test[0] ? current_test : "(between tests)");
    write_str("\n");
}

static void on_fatal_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    __asan_on_error();
    sigaction(sig, &previous_actions[sig], NULL);
    /* A real fault re-occurs when we return, reaching the previous (e.g. ASan's) handler with
     * the faulting stack; a signal that was sent (abort, kill) has to be raised again. */
    if (sig == SIGABRT || info->si_code <= 0) raise(sig);
}

static void install_crash_handlers(void) {
    const int signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(signals[i], &sa, &previous_actions[signals[i]]);
    }
}

/* ---- small utilities ---------------------------------------------------------------------- */

static bool path_join(char *buf, const char *a, const char *b) {
    int n = snprintf(buf, PATH_BUF, "%s/%s", a, b);
    return n > 0 && n < PATH_BUF;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_strings(char **list, int n) {
    for (int i = 0; i < n; i++) free(list[i]);
    free(list);
}

/* Sorted names of the sub-directories of `dir` that start with `prefix`; -1 on failure. */
static int list_dirs(const char *dir, const char *prefix, char ***out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *ent;
    char path[PATH_BUF];
    while ((ent = readdir(d)) != NULL) {
        if (strncmp(ent->d_name, prefix, strlen(prefix)) != 0) continue;
        if (!path_join(path, dir, ent->d_name) || !dir_exists(path)) continue;
        if (n == cap) {
            int new_cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, (size_t)new_cap * sizeof *grown);
            if (!grown) break;
            names = grown;
            cap = new_cap;
        }
        names[n] = strdup(ent->d_name);
        if (!names[n]) break;
        n++;
    }
    closedir(d);
    if (n > 0) qsort(names, (size_t)n, sizeof *names, compare_strings);
    *out = names;
    return n;
}

static bool read_whole_file(const char *path, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    bool ok = fseek(f, 0, SEEK_END) == 0;
    long len = ok ? ftell(f) : -1;
    ok = ok && len >= 0 && fseek(f, 0, SEEK_SET) == 0;
    uint8_t *buf = ok ? malloc(len > 0 ? (size_t)len : 1) : NULL;
    ok = buf && fread(buf, 1, (size_t)len, f) == (size_t)len;
    fclose(f);
    if (!ok) {
        free(buf);
        return false;
    }
    *data = buf;
    *size = (size_t)len;
    return true;
}

/* ---- which tests graft claims --------------------------------------------------------------- */

static bool is_default_domain(const char *domain) {
    return !domain || !domain[0] || strcmp(domain, "ai.onnx") == 0;
}

static int64_t default_opset(const Onnx__ModelProto *m) {
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (is_default_domain(m->opset_import[i]->domain)) return m->opset_import[i]->version;
    return -1;
}

/* A node is claimed when its op is in graft's registry for the model's opset. */
static bool node_claimed(const Onnx__NodeProto *node, int64_t opset, char *why, size_t why_size) {
    const char *op = node->op_type ? node->op_type : "";
    if (!is_default_domain(node->domain)) {
        snprintf(why, why_size, "op %s of domain '%s'", op, node->domain);
        return false;
    }
    const op_def *def = op_find(op);
    if (!def || op_is_internal(def)) {
        snprintf(why, why_size, "op %s not in the registry", op);
        return false;
    }
    if (opset >= 0 && (opset < def->since || opset > def->until)) {
        snprintf(why, why_size, "op %s at opset %lld (graft: %d..%d)", op, (long long)opset,
                 def->since, def->until);
        return false;
    }
    return true;
}

/* Parse model.onnx just far enough to list its ops (cheaper and more precise than a load). */
static void read_model_facts(const char *model_path, model_facts *facts) {
    memset(facts, 0, sizeof *facts);
    snprintf(facts->op, sizeof facts->op, "?");
    uint8_t *data;
    size_t size;
    if (!read_whole_file(model_path, &data, &size)) {
        snprintf(facts->why_not, sizeof facts->why_not, "cannot read model.onnx");
        return;
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
    free(data);
    if (!m || !m->graph) {
        snprintf(facts->why_not, sizeof facts->why_not, "cannot parse model.onnx");
        if (m) onnx__model_proto__free_unpacked(m, NULL);
        return;
    }
    facts->parsed = true;
    facts->claimed = true;
    int64_t opset = default_opset(m);
    const Onnx__GraphProto *g = m->graph;
    const char *first_op = NULL, *first_computing_op = NULL;
    for (size_t i = 0; i < g->n_node; i++) {
        const char *op = g->node[i]->op_type ? g->node[i]->op_type : "";
        if (!first_op) first_op = op;
        if (!first_computing_op && strcmp(op, "Constant") != 0) first_computing_op = op;
        if (facts->claimed &&
            !node_claimed(g->node[i], opset, facts->why_not, sizeof facts->why_not))
            facts->claimed = false;
    }
    if (first_computing_op) first_op = first_computing_op;
    if (first_op) snprintf(facts->op, sizeof facts->op, "%s", first_op);
    onnx__model_proto__free_unpacked(m, NULL);
}

/* ---- comparing outputs ---------------------------------------------------------------------- */

static bool dtype_is_floating(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F64 || dt == GRAFT_DTYPE_F16 ||
           dt == GRAFT_DTYPE_BF16;
}

static double float_at(const graft_tensor *t, int64_t i) {
    switch (t->dtype) {
    case GRAFT_DTYPE_F32:
        return ((const float *)t->data)[i];
    case GRAFT_DTYPE_F64:
        return ((const double *)t->data)[i];
    case GRAFT_DTYPE_F16:
        return f16_to_f32(((const uint16_t *)t->data)[i]);
    case GRAFT_DTYPE_BF16:
        return bf16_to_f32(((const uint16_t *)t->data)[i]);
    default:
        return NAN;
    }
}

/* Integers compared exactly: signed ones as int64, unsigned ones as uint64 (both fit). */
static bool dtype_is_unsigned(graft_dtype dt) {
    return dt == GRAFT_DTYPE_U8 || dt == GRAFT_DTYPE_U16 || dt == GRAFT_DTYPE_U32 ||
           dt == GRAFT_DTYPE_U64 || dt == GRAFT_DTYPE_BOOL;
}

static uint64_t unsigned_at(const graft_tensor *t, int64_t i) {
    switch (t->dtype) {
    case GRAFT_DTYPE_U8:
        return ((const uint8_t *)t->data)[i];
    case GRAFT_DTYPE_BOOL:
        return ((const uint8_t *)t->data)[i] != 0;
    case GRAFT_DTYPE_U16:
        return ((const uint16_t *)t->data)[i];
    case GRAFT_DTYPE_U32:
        return ((const uint32_t *)t->data)[i];
    case GRAFT_DTYPE_U64:
        return ((const uint64_t *)t->data)[i];
    default:
        return 0;
    }
}

static int64_t signed_at(const graft_tensor *t, int64_t i) {
    switch (t->dtype) {
    case GRAFT_DTYPE_I8:
        return ((const int8_t *)t->data)[i];
    case GRAFT_DTYPE_I16:
        return ((const int16_t *)t->data)[i];
    case GRAFT_DTYPE_I32:
        return ((const int32_t *)t->data)[i];
    case GRAFT_DTYPE_I64:
        return ((const int64_t *)t->data)[i];
    default:
        return 0;
    }
}

static double rtol_for(graft_dtype dt) {
    if (dt == GRAFT_DTYPE_F16) return RTOL_F16;
    if (dt == GRAFT_DTYPE_BF16) return RTOL_BF16;
    return RTOL_F32;
}

static bool floats_match(double got, double want, double rtol) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs(got - want) <= ATOL_F32 + rtol * fabs(want);
}

/* Does element i match? On mismatch, write both values into got_s / want_s. */
static bool element_matches(const graft_tensor *got, const graft_tensor *want, int64_t i,
                            char *got_s, char *want_s, size_t size) {
    graft_dtype dt = want->dtype;
    if (dtype_is_floating(dt)) {
        double g = float_at(got, i), w = float_at(want, i);
        if (floats_match(g, w, rtol_for(dt))) return true;
        snprintf(got_s, size, "%.9g", g);
        snprintf(want_s, size, "%.9g", w);
    } else if (dtype_is_unsigned(dt)) {
        uint64_t g = unsigned_at(got, i), w = unsigned_at(want, i);
        if (g == w) return true;
        snprintf(got_s, size, "%llu", (unsigned long long)g);
        snprintf(want_s, size, "%llu", (unsigned long long)w);
    } else {
        int64_t g = signed_at(got, i), w = signed_at(want, i);
        if (g == w) return true;
        snprintf(got_s, size, "%lld", (long long)g);
        snprintf(want_s, size, "%lld", (long long)w);
    }
    return false;
}

/* Format flat index i of a tensor with the given shape as "[a, b, c]". */
static void index_str(char *buf, size_t size, int ndim, const int64_t *dims, int64_t i) {
    int64_t coords[GRAFT_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
        coords[d] = dims[d] > 0 ? i % dims[d] : 0;
        i = dims[d] > 0 ? i / dims[d] : 0;
    }
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "",
                                 (long long)coords[d]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

static bool dtype_is_comparable(graft_dtype dt) {
    return dtype_is_floating(dt) || dtype_is_unsigned(dt) || dt == GRAFT_DTYPE_I8 ||
           dt == GRAFT_DTYPE_I16 || dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64;
}

/* Compare output `name` against the expected tensor; false with a reason on the first
 * mismatch (and how many elements differ in all). */
static bool compare_output(const char *name, const graft_tensor *got, const graft_tensor *want,
                           char *reason, size_t size) {
    char gs[160], ws[160];
    if (got->dtype != want->dtype) {
        snprintf(reason, size, "output '%s': dtype %s, expected %s", name,
                 graft_dtype_name(got->dtype), graft_dtype_name(want->dtype));
        return false;
    }
    if (!shapes_equal(got->ndim, got->dims, want->ndim, want->dims)) {
        snprintf(reason, size, "output '%s': shape %s, expected %s", name,
                 shape_str(gs, sizeof gs, got->ndim, got->dims),
                 shape_str(ws, sizeof ws, want->ndim, want->dims));
        return false;
    }
    if (!dtype_is_comparable(want->dtype)) {
        snprintf(reason, size, "output '%s': cannot compare dtype %s", name,
                 graft_dtype_name(want->dtype));
        return false;
    }
    int64_t n = tensor_numel(want);
    if (n > 0 && (!got->data || !want->data)) {
        snprintf(reason, size, "output '%s': %s data", name, got->data ? "no expected" : "no");
        return false;
    }
    int64_t first = -1, n_bad = 0;
    char first_got[64] = "", first_want[64] = "", eg[64], ew[64];
    for (int64_t i = 0; i < n; i++) {
        if (element_matches(got, want, i, eg, ew, sizeof eg)) continue;
        if (first < 0) {
            first = i;
            memcpy(first_got, eg, sizeof eg);
            memcpy(first_want, ew, sizeof ew);
        }
        n_bad++;
    }
    if (first < 0) return true;
    char idx[160];
    index_str(idx, sizeof idx, want->ndim, want->dims, first);
    snprintf(reason, size, "output '%s'%s: got %s, expected %s (%lld of %lld elements differ)",
             name, idx, first_got, first_want, (long long)n_bad, (long long)n);
    return false;
}

/* ---- running one data set ------------------------------------------------------------------- */

/* The tensors of one test_data_set_N directory's input_K.pb (or output_K.pb) files, in order. */
typedef struct tensor_files {
    graft_tensor *tensors;
    char **names;
    int n;
} tensor_files;

static void tensor_files_free(tensor_files *tf) {
    for (int i = 0; i < tf->n; i++) {
        tensor_release(&tf->tensors[i]);
        free(tf->names[i]);
    }
    free(tf->tensors);
    free(tf->names);
    memset(tf, 0, sizeof *tf);
}

static bool read_tensor_files(const char *set_dir, const char *stem, tensor_files *tf, char *reason,
                              size_t size) {
    memset(tf, 0, sizeof *tf);
    for (int k = 0;; k++) {
        char file[64], path[PATH_BUF];
        snprintf(file, sizeof file, "%s_%d.pb", stem, k);
        if (!path_join(path, set_dir, file) || !file_exists(path)) return true;
        graft_tensor *tensors = realloc(tf->tensors, (size_t)(k + 1) * sizeof *tensors);
        if (tensors) tf->tensors = tensors;
        char **names = realloc(tf->names, (size_t)(k + 1) * sizeof *names);
        if (names) tf->names = names;
        if (!tensors || !names) {
            snprintf(reason, size, "out of memory reading %s", file);
            return false;
        }
        memset(&tf->tensors[k], 0, sizeof tf->tensors[k]);
        tf->names[k] = NULL;
        graft_err err;
        err_clear(&err);
        if (onnx_read_tensor_file(path, &tf->tensors[k], &tf->names[k], &err) != GRAFT_OK) {
            tensor_release(&tf->tensors[k]);
            free(tf->names[k]);
            snprintf(reason, size, "cannot read %s/%s: %s", strrchr(set_dir, '/') + 1, file,
                     err.msg);
            return false;
        }
        tf->n = k + 1;
    }
}

/* Which model input input_K.pb binds to: its own name when the model has such an input,
 * otherwise the K-th model input (ONNX's runners bind by position). false when none fits. */
static bool bind_input(const graft_model *model, const char *tensor_name, int k,
                       graft_value_info *info) {
    int n = graft_model_input_count(model);
    if (tensor_name && tensor_name[0]) {
        for (int i = 0; i < n; i++)
            if (graft_model_input_info(model, i, info) == GRAFT_OK && info->name &&
                strcmp(info->name, tensor_name) == 0)
                return true;
    }
    return k < n && graft_model_input_info(model, k, info) == GRAFT_OK && info->name;
}

/* ONNX's test data (numpy has no bfloat16) stores bfloat16 tensors as their uint16 bits. */
static graft_tensor as_bf16_if_bits(graft_tensor t, graft_dtype wanted) {
    if (wanted == GRAFT_DTYPE_BF16 && t.dtype == GRAFT_DTYPE_U16) t.dtype = GRAFT_DTYPE_BF16;
    return t;
}

static bool run_inputs(graft_ctx *ctx, graft_model *model, const tensor_files *in, char *reason,
                       size_t size) {
    graft_named_tensor *bound = calloc(in->n > 0 ? (size_t)in->n : 1, sizeof *bound);
    if (!bound) {
        snprintf(reason, size, "out of memory binding inputs");
        return false;
    }
    bool ok = true;
    for (int k = 0; k < in->n && ok; k++) {
        graft_value_info info;
        ok = bind_input(model, in->names[k], k, &info);
        if (!ok) {
            snprintf(reason, size, "input_%d.pb ('%s') matches no model input (model has %d)", k,
                     in->names[k] ? in->names[k] : "", graft_model_input_count(model));
            break;
        }
        bound[k].name = info.name;
        bound[k].tensor = as_bf16_if_bits(in->tensors[k], info.dtype);
    }
    if (ok && graft_model_run(model, bound, in->n) != GRAFT_OK) {
        snprintf(reason, size, "run: %s", graft_last_error(ctx));
        ok = false;
    }
    free(bound);
    return ok;
}

static bool check_outputs(graft_ctx *ctx, const graft_model *model, const tensor_files *want,
                          char *reason, size_t size) {
    int n_out = graft_model_output_count(model);
    if (want->n > n_out) {
        snprintf(reason, size, "test expects %d outputs, model has %d", want->n, n_out);
        return false;
    }
    for (int k = 0; k < want->n; k++) {
        graft_value_info info;
        const char *name = "?";
        if (graft_model_output_info(model, k, &info) == GRAFT_OK && info.name) name = info.name;
        const graft_tensor *got = NULL;
        if (graft_model_output(model, k, &got) != GRAFT_OK || !got) {
            snprintf(reason, size, "output '%s': %s", name, graft_last_error(ctx));
            return false;
        }
        graft_tensor expected = as_bf16_if_bits(want->tensors[k], got->dtype);
        if (!compare_output(name, got, &expected, reason, size)) return false;
    }
    return true;
}

static bool run_data_set(graft_ctx *ctx, graft_model *model, const char *set_dir, char *reason,
                         size_t size) {
    tensor_files in = {0}, want = {0};
    bool ok = read_tensor_files(set_dir, "input", &in, reason, size) &&
              read_tensor_files(set_dir, "output", &want, reason, size);
    if (ok && want.n == 0) {
        snprintf(reason, size, "%s has no output_0.pb", strrchr(set_dir, '/') + 1);
        ok = false;
    }
    ok = ok && run_inputs(ctx, model, &in, reason, size);
    ok = ok && check_outputs(ctx, model, &want, reason, size);
    tensor_files_free(&in);
    tensor_files_free(&want);
    return ok;
}

/* Load the test's model and run every data set; false with a reason on the first failure. */
static bool run_test(graft_ctx *ctx, const char *test_dir, char *reason, size_t size) {
    char path[PATH_BUF];
    if (!path_join(path, test_dir, "model.onnx")) {
        snprintf(reason, size, "path too long");
        return false;
    }
    graft_model *model = NULL;
    if (graft_model_load(ctx, path, &model) != GRAFT_OK || !model) {
        snprintf(reason, size, "load: %s", graft_last_error(ctx));
        return false;
    }
    char **sets;
    int n_sets = list_dirs(test_dir, "test_data_set_", &sets);
    bool ok = n_sets > 0;
    if (!ok) snprintf(reason, size, "no test_data_set_* directory");
    for (int s = 0; s < n_sets && ok; s++) {
        char set_dir[PATH_BUF];
        ok = path_join(set_dir, test_dir, sets[s]);
        if (!ok) snprintf(reason, size, "path too long");
        ok = ok && run_data_set(ctx, model, set_dir, reason, size);
        if (!ok && n_sets > 1) {
            char inner[REASON_BUF];
            snprintf(inner, sizeof inner, "%s", reason);
            snprintf(reason, size, "%s: %.1400s", sets[s], inner);
        }
    }
    free_strings(sets, n_sets > 0 ? n_sets : 0);
    graft_model_free(model);
    return ok;
}

/* ---- the driver ----------------------------------------------------------------------------- */

static void usage(FILE *to) {
    fprintf(
        to,
        "usage: conformance [--data DIR] [--filter SUBSTR]... [--known FILE] [--reference]\n"
        "                   [--device D] [--verbose] [--all]\n"
        "Runs ONNX node tests (DIR/test_*/model.onnx with test_data_set_*/{input,output}_N.pb)\n"
        "through graft and compares the outputs (floats: |got-exp| <= %g + %g*|exp|).\n"
        "  --data DIR       test folders (default " DEFAULT_DATA_DIR ")\n"
        "  --filter SUBSTR  only tests whose name contains SUBSTR (repeatable: any matches)\n"
        "  --known FILE     known exceptions, lines of 'test_name  reason' (# comments)\n"
        "  --reference      use the plain reference kernels only\n"
        "  --device D       where to run: cpu (default), cuda:N\n"
        "  --verbose        also say which tests are skipped, and why\n"
        "  --all            also run tests whose ops graft does not claim\n"
        "Exit status: 0 when nothing failed unexpectedly, 1 otherwise, 2 on bad usage,\n"
        "77 when the data directory does not exist.\n",
        ATOL_F32, RTOL_F32);
}

/* Returns -1 to go on, or the exit status to stop with. */
static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--data") == 0 && has_value) {
            o->data_dir = argv[++i];
        } else if (strcmp(a, "--filter") == 0 && has_value) {
            o->filters[o->n_filters++] = argv[++i];
        } else if (strcmp(a, "--known") == 0 && has_value) {
            o->known_path = argv[++i];
        } else if (strcmp(a, "--reference") == 0) {
            o->reference = true;
        } else if (strcmp(a, "--device") == 0 && has_value) {
            o->device = argv[++i];
        } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            o->verbose = true;
        } else if (strcmp(a, "--all") == 0) {
            o->all = true;
        } else {
            fprintf(stderr, "conformance: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    return -1;
}

static bool selected(const options *o, const char *test) {
    if (o->n_filters == 0) return true;
    for (int i = 0; i < o->n_filters; i++)
        if (strstr(test, o->filters[i])) return true;
    return false;
}

static void report(run_totals *t, known_list *kl, const options *o, const char *test,
                   const char *op, bool ok, const char *reason) {
    known_entry *k = known_find(kl, test);
    if (k) k->seen = true;
    if (ok) {
        printf(k ? "FIXED %s\n" : "PASS %s\n", test);
        tally(t, op, OUTCOME_PASS);
    } else if (k) {
        if (o->verbose)
            printf("KNOWN %s: %s [now: %s]\n", test, k->reason, reason);
        else
            printf("KNOWN %s: %s\n", test, k->reason);
        tally(t, op, OUTCOME_KNOWN);
    } else {
        printf("FAIL %s: %s\n", test, reason);
        tally(t, op, OUTCOME_FAIL);
    }
}

static void run_one(graft_ctx *ctx, const options *o, known_list *kl, run_totals *t,
                    const char *test) {
    char test_dir[PATH_BUF], model_path[PATH_BUF], reason[REASON_BUF] = "";
    if (!path_join(test_dir, o->data_dir, test) || !path_join(model_path, test_dir, "model.onnx")) {
        report(t, kl, o, test, "?", false, "path too long");
        return;
    }
    model_facts facts;
    read_model_facts(model_path, &facts); /* unparsable: let the loader say what is wrong */
    if (facts.parsed && !facts.claimed && !o->all) {
        t->not_claimed++;
        if (o->verbose) printf("SKIP %s: %s\n", test, facts.why_not);
        return;
    }
    snprintf(current_test, sizeof current_test, "%s", test);
    bool ok = run_test(ctx, test_dir, reason, sizeof reason);
    current_test[0] = '\0';
    report(t, kl, o, test, facts.op, ok, reason);
}

static int run_all(graft_ctx *ctx, const options *o, known_list *kl) {
    char **tests;
    int n = list_dirs(o->data_dir, "test_", &tests);
    if (n < 0) {
        fprintf(stderr, "conformance: cannot list %s: %s\n", o->data_dir, strerror(errno));
        return 2;
    }
    run_totals totals;
    memset(&totals, 0, sizeof totals);
    for (int i = 0; i < n; i++)
        if (selected(o, tests[i])) run_one(ctx, o, kl, &totals, tests[i]);
    print_table(&totals);
    if (o->verbose)
        for (int i = 0; i < kl->n; i++)
            if (!kl->items[i].seen && selected(o, kl->items[i].test))
                printf("note: known exception %s did not run\n", kl->items[i].test);
    printf("conformance: %d passed, %d failed, %d known exceptions, %d not claimed\n",
           totals.passed, totals.failed, totals.known, totals.not_claimed);
    int status = totals.failed > 0 ? 1 : 0;
    totals_free(&totals);
    free_strings(tests, n);
    return status;
}

int main(int argc, char **argv) {
    options o = {.data_dir = DEFAULT_DATA_DIR};
    o.filters = calloc((size_t)argc, sizeof *o.filters);
    if (!o.filters) return 2;
    int status = parse_args(argc, argv, &o);
    known_list kl = {0};
    if (status < 0 && !dir_exists(o.data_dir)) {
        fprintf(stderr, "conformance: no test data at %s (skipped)\n", o.data_dir);
        status = EXIT_SKIPPED;
    }
    if (status < 0 && o.known_path && !known_load(o.known_path, &kl)) status = 2;
    graft_ctx *ctx = NULL;
    if (status < 0) {
        graft_ctx_options copts = GRAFT_CTX_OPTIONS_INIT;
        copts.use_reference_kernels = o.reference ? 1 : 0;
        copts.device = o.device;
        if (graft_ctx_create(&copts, &ctx) != GRAFT_OK) {
            fprintf(stderr, "conformance: cannot create a graft context\n");
            status = 2;
        }
    }
    if (status < 0) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        install_crash_handlers();
        status = run_all(ctx, &o, &kl);
    }
    graft_ctx_free(ctx);
    known_free(&kl);
    free(o.filters);
    return status;
}

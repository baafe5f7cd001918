/* test_exec_plans.c: the executor keeps a plan (and on a GPU a recording) per input shape: inputs
 * whose shapes alternate give the outputs of a model that keeps only the last shape's plan, and
 * a shape seen before (among the cache's most recent) runs from its plan without learning it
 * again. Usage: test_exec_plans GEN_DIR [--device cuda:0] [--recorded] MODEL... (--recorded:
 * the models that follow must replay CUDA graphs, one per shape kept). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/graph/model.h"
#include "gpu_test_util.h"
#include "test_model.h"
#include "test_util.h"

enum { N_SHAPES = 3, N_RUNS = 10, MAX_IN = 8 };

/* Each shape visited at least 3 times (learn, record, replay on a GPU), rarely twice in a row. */
static const int sequence[N_RUNS] = {0, 1, 0, 2, 1, 0, 2, 1, 2, 0};

/* Shape k of a recorded input: batch rows cycled from the recorded ones (1, 3 or 2 rows); a 2-D
 * integer input (token ids, masks) also cut to fewer columns (all, 3/4, 1/2 of them). */
static int make_variant(const graft_tensor *rec, int k, graft_tensor *out) {
    static const int64_t rows[N_SHAPES] = {1, 3, 2};
    static const int cols_num[N_SHAPES] = {4, 3, 2};
    *out = *rec;
    if (rec->ndim < 1 || rec->dims[0] < 1) return -1;
    int64_t row_elems = graft_tensor_numel(rec) / rec->dims[0];
    bool ids = rec->ndim == 2 && (rec->dtype == GRAFT_DTYPE_I64 || rec->dtype == GRAFT_DTYPE_I32);
    int64_t cols = ids ? rec->dims[1] * cols_num[k] / 4 : row_elems;
    if (cols < 1) cols = 1;
    size_t es = graft_dtype_size(rec->dtype);
    out->dims[0] = rows[k];
    if (ids) out->dims[1] = cols;
    out->data = malloc((size_t)(rows[k] * cols) * es + 1);
    if (!out->data) return -1;
    for (int64_t r = 0; r < rows[k]; r++)
        memcpy((char *)out->data + (size_t)(r * cols) * es,
               (const char *)rec->data + (size_t)((r % rec->dims[0]) * row_elems) * es,
               (size_t)cols * es);
    return 0;
}

/* Hits an LRU cache of `capacity` plans besides the current one gives on the sequence. */
static int expected_hits(int capacity) {
    int recent[N_SHAPES], n = 0, hits = 0;
    for (int r = 0; r < N_RUNS; r++) {
        int s = sequence[r], at = -1;
        for (int i = 0; i < n; i++)
            if (recent[i] == s) at = i;
        if (at > 0 && at <= capacity) hits++;
        if (at < 0) at = n < capacity + 1 ? n++ : n - 1;
        for (int i = at; i > 0; i--) recent[i] = recent[i - 1];
        recent[0] = s;
    }
    return hits;
}

/* The largest difference of output o between two runs, relative to the reference's largest. */
static double output_diff(graft_model *a, graft_model *b, int o) {
    const graft_tensor *ta, *tb;
    if (graft_model_output(a, o, &ta) != GRAFT_OK || graft_model_output(b, o, &tb) != GRAFT_OK)
        return INFINITY;
    int64_t n = graft_tensor_numel(ta);
    if (n != graft_tensor_numel(tb) || ta->dtype != tb->dtype) return INFINITY;
    if (ta->dtype != GRAFT_DTYPE_F32)
        return memcmp(ta->data, tb->data, (size_t)n * graft_dtype_size(ta->dtype)) ? 1.0 : 0.0;
    const float *x = ta->data, *y = tb->data;
    double diff = 0, ref = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= diff)) diff = d;
        if (fabs((double)y[i]) > ref) ref = fabs((double)y[i]);
    }
    return diff / ref;
}

/* How many of the executor's plans hold a recording (CUDA graph). */
static int recordings(const executor *x) {
    int n = x->plan.graph != NULL;
    for (int k = 0; k < EXEC_PLAN_CACHE; k++) n += x->cached[k].graph != NULL;
    return n;
}

/* The sequence through a model with `capacity` cached plans and one with none. */
static void check_capacity(loaded *with, loaded *plain, int capacity, const char *test,
                           const char *device, bool recorded) {
    with->m->exec.plan_cache = capacity;
    plain->m->exec.plan_cache = 0;
    double worst = 0;
    graft_status st = GRAFT_OK;
    for (int r = 0; r < N_RUNS && st == GRAFT_OK; r++) {
        graft_named_tensor in[MAX_IN];
        int made = 0;
        for (int i = 0; i < with->n_in; i++, made++) {
            in[i].name = with->in[i].name;
            if (make_variant(&with->in[i].tensor, sequence[r], &in[i].tensor) != 0) break;
        }
        if (made == with->n_in) st = graft_model_run(with->m, in, with->n_in);
        if (made == with->n_in && st == GRAFT_OK) st = graft_model_run(plain->m, in, with->n_in);
        if (made != with->n_in) st = GRAFT_E_OUT_OF_MEMORY;
        for (int o = 0; st == GRAFT_OK && o < graft_model_output_count(with->m); o++) {
            double d = output_diff(with->m, plain->m, o);
            if (!(d <= worst)) worst = d;
        }
        for (int i = 0; i < made; i++) free(in[i].tensor.data);
    }
    /* The same kernels on the same shapes: equal on the CPU; on a GPU the two models' cuBLASLt
     * choices (timed per backend) may differ in rounding. */
    double tol = device ? 1e-5 : 0.0;
    int64_t hits = with->m->exec.plan_hits, want = expected_hits(capacity);
    /* --recorded: every shape seen three times replays a recording, kept with its plan */
    int kept = recordings(&with->m->exec), want_kept = recorded ? (capacity > 1 ? 3 : 1) : 0;
    CHECK(test,
          st == GRAFT_OK && worst <= tol && hits == want && plain->m->exec.plan_hits == 0 &&
              kept >= want_kept,
          "status %d (%s), outputs differ by %g (limit %g), %lld plan hits (want %lld), %d "
          "recordings kept (want %d): %s",
          st, st ? graft_last_error(with->ctx) : "", worst, tol, (long long)hits, (long long)want,
          kept, want_kept, with->m->exec.unsafe_why);
    printf("  %s: %lld of %d runs from a cached plan, %d recordings kept\n", test, (long long)hits,
           N_RUNS, recordings(&with->m->exec));
}

static void check_model(const char *gen, const char *name, const char *device, bool recorded) {
    char path[1024], test[256];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, name);
    for (int capacity = 1; capacity <= EXEC_PLAN_CACHE; capacity += EXEC_PLAN_CACHE - 1) {
        snprintf(test, sizeof test, "exec_plans_%s_cache%d%s%s", name, capacity, device ? "_" : "",
                 device ? device : "");
        loaded with, plain;
        int ok = loaded_open_on(&with, path, gen, name, device) == 0 &&
                 loaded_open_on(&plain, path, gen, name, device) == 0 && with.n_in <= MAX_IN;
        if (ok)
            check_capacity(&with, &plain, capacity, test, device, recorded);
        else
            CHECK(test, 0, "loading failed: %s", with.ctx ? graft_last_error(with.ctx) : "");
        loaded_close(&with);
        loaded_close(&plain);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s GEN_DIR [--device DEVICE] MODEL...\n", argv[0]);
        return 2;
    }
    const char *device = NULL;
    bool recorded = false;
    CHECK("exec_plans_lru_model", expected_hits(1) == 2 && expected_hits(2) == 7,
          "the test's own LRU model gives %d and %d hits", expected_hits(1), expected_hits(2));
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = argv[++i];
            if (gpu_test_skip_without_gpu("exec_plans_device", device)) return 0;
            continue;
        }
        if (strcmp(argv[i], "--recorded") == 0) {
            recorded = true;
            continue;
        }
        check_model(argv[1], argv[i], device, recorded);
    }
    return test_failures ? 1 : 0;
}

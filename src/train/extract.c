/* extract.c: features for the head: batch sources (whole tensors among them), the frozen
 * backbone run once per sample, and the feature cache that spares later runs even that. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/context.h"
#include "../core/hash.h"
#include "feature_cache.h"
#include "trainer.h"
#include "../core/clock.h"

/* Rows [start, start + count) of t along dim 0, as a view. */
static graft_tensor rows_of(const graft_tensor *t, int64_t start, int64_t count) {
    graft_tensor v = *t;
    int64_t row = t->dims[0] ? graft_tensor_numel(t) / t->dims[0] : 0;
    v.dims[0] = count;
    v.data = (char *)t->data + (size_t)(start * row) * graft_dtype_size(t->dtype);
    return v;
}

static graft_status tensor_read_labels(void *user, int64_t start, int64_t count,
                                       graft_tensor *labels) {
    tensor_source *s = user;
    *labels = rows_of(s->labels, start, count);
    return GRAFT_OK;
}

static graft_status tensor_read(void *user, int64_t start, int64_t count,
                                graft_named_tensor *inputs, graft_tensor *labels,
                                unsigned char *kept) {
    tensor_source *s = user;
    memset(kept, 1, (size_t)count);
    for (int i = 0; i < s->source.n_inputs; i++) {
        inputs[i] = s->in[i];
        inputs[i].tensor = rows_of(&s->in[i].tensor, start, count);
    }
    return tensor_read_labels(user, start, count, labels);
}

graft_status tensor_source_init(tensor_source *s, const graft_named_tensor *in, int n_in,
                                const graft_tensor *labels, graft_err *e) {
    memset(s, 0, sizeof *s);
    if (n_in < 1 || n_in > 32 || !in)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "give 1 to 32 inputs (got %d)", n_in);
    if (!labels || !labels->data || labels->ndim < 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no labels given");
    hash64_state h;
    hash64_init(&h, 0x74656e736f7273ull);
    for (int i = 0; i < n_in; i++) {
        const graft_tensor *t = &in[i].tensor;
        if (t->ndim < 1 || t->dims[0] != labels->dims[0] || !t->data || graft_tensor_numel(t) < 1)
            return err_set(e, GRAFT_E_SHAPE,
                           "input '%s' must hold the %lld samples of the labels along dim 0",
                           in[i].name ? in[i].name : "?", (long long)labels->dims[0]);
        hash64_update_str(&h, in[i].name ? in[i].name : "");
        hash64_update_u64(&h, (uint64_t)t->dtype);
        for (int d = 0; d < t->ndim; d++) hash64_update_u64(&h, (uint64_t)t->dims[d]);
        hash64_update(&h, t->data, (size_t)graft_tensor_numel(t) * graft_dtype_size(t->dtype));
    }
    s->in = in;
    s->labels = labels;
    snprintf(s->identity, sizeof s->identity, "tensors:%016llx",
             (unsigned long long)hash64_final(&h));
    s->source = (graft_batch_source){labels->dims[0],    n_in, tensor_read, s, s->identity,
                                     tensor_read_labels, NULL};
    return GRAFT_OK;
}

static graft_status check_batch(const graft_batch_source *src, const graft_named_tensor *in,
                                int64_t m, graft_err *e) {
    for (int i = 0; i < src->n_inputs; i++)
        if (in[i].tensor.ndim < 1 || in[i].tensor.dims[0] != m)
            return err_set(e, GRAFT_E_SHAPE, "the source gave input '%s' without %lld samples",
                           in[i].name ? in[i].name : "?", (long long)m);
    return GRAFT_OK;
}

/* Whether every sample of [at, at + m) has its features in the cache and the source can give
 * their labels alone. */
static bool all_cached(const feature_cache *fc, const graft_batch_source *src, int64_t at,
                       int64_t m) {
    if (!fc || !src->read_labels) return false;
    for (int64_t i = 0; i < m; i++)
        if (!feature_cache_has(fc, at + i)) return false;
    return true;
}

static graft_status check_labels(const graft_trainer *t, const graft_tensor *y, int64_t m,
                                 graft_err *e) {
    if (!y->data) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "the source gave no labels");
    if (t->options.loss == GRAFT_LOSS_CROSS_ENTROPY) {
        if (y->dtype != GRAFT_DTYPE_I64 || y->ndim != 1 || y->dims[0] != m)
            return err_set(e, GRAFT_E_SHAPE,
                           "cross-entropy labels must be int64 (%lld), got %s of rank %d",
                           (long long)m, graft_dtype_name(y->dtype), y->ndim);
        return GRAFT_OK;
    }
    if (y->dtype != GRAFT_DTYPE_F32 || y->ndim != 2 || y->dims[0] != m ||
        y->dims[1] != t->head_options.n_outputs)
        return err_set(e, GRAFT_E_SHAPE, "labels must be float32 (%lld, %d)", (long long)m,
                       t->head_options.n_outputs);
    return GRAFT_OK;
}

/* What the source's features depend on: the cut model, its output and the data. */
static graft_status cache_key(const graft_trainer *t, const graft_batch_source *src,
                              feature_cache_key *key, graft_err *e) {
    if (!src->identity)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the data source has no identity, so its features cannot be cached");
    const ir_graph *g = &t->backbone->g;
    uint64_t h = feature_cache_model_hash(g);
    /* bf16 on the CPU computes from the same float32 graph: its features are another set */
    if (!t->backbone->have_device && t->backbone->precision == GRAFT_DTYPE_BF16)
        h ^= 0x62663136637075ull; /* "bf16cpu" */
    *key = (feature_cache_key){h, g->values[g->outputs[0]].name, src->identity};
    return GRAFT_OK;
}

graft_status trainer_cache_file(const graft_trainer *t, const graft_batch_source *src,
                                const char *dir, char *path, size_t size, graft_err *e) {
    feature_cache_key key;
    TRY(cache_key(t, src, &key, e));
    char name[64];
    feature_cache_file_name(name, sizeof name, &key, t->options.cache_dtype);
    if ((size_t)snprintf(path, size, "%s/%s", dir, name) >= size)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "the cache folder's path is too long: %s", dir);
    return GRAFT_OK;
}

static graft_status open_cache(graft_trainer *t, const char *path, const graft_batch_source *src,
                               feature_cache **fc, graft_err *e) {
    feature_cache_key key;
    TRY(cache_key(t, src, &key, e));
    feature_cache_reason why;
    TRY(feature_cache_open(fc, &why, path, &key, src->n_samples, t->dim, t->options.cache_dtype,
                           e));
    t->cache_reason = why;
    t->cache_note[0] = 0;
    if (why != FEATURE_CACHE_NEW && why != FEATURE_CACHE_REUSED) {
        const char *detail = feature_cache_reason_detail(*fc);
        snprintf(t->cache_note, sizeof t->cache_note, "%s%s%s%s: %s", feature_cache_reason_str(why),
                 detail[0] ? " (" : "", detail, detail[0] ? ")" : "", path);
    }
    return GRAFT_OK;
}

/* Rows [from, from + m) of every input, as views (host or device memory: only pointers move). */
static void slice_inputs(const graft_named_tensor *in, int n_in, int64_t from, int64_t m,
                         graft_named_tensor *out) {
    for (int k = 0; k < n_in; k++) {
        out[k] = in[k];
        out[k].tensor = rows_of(&in[k].tensor, from, m);
    }
}

/* The backbone on m samples into *feats rows [row, row + m): *feats (n, dim) is allocated once
 * the feature size is known. Runs of at most t->backbone_max_batch samples (else the batch
 * size), a shorter one padded to that on a GPU (backbone_pad.c); a run out of memory (a GPU's,
 * typically) halves that and tries again, down to one sample, after which the error stands (it
 * names what was asked for and what was free). */
static graft_status backbone_rows(graft_trainer *t, const graft_named_tensor *in, int n_in,
                                  int64_t m, int64_t row, int64_t n, float **feats, graft_err *e) {
    graft_named_tensor part[32], padded[32];
    for (int64_t done = 0; done < m;) {
        int64_t full = t->backbone_max_batch > 0 ? t->backbone_max_batch : t->options.batch_size;
        int64_t b = full < m - done ? full : m - done, rows = b;
        slice_inputs(in, n_in, done, b, part);
        const graft_named_tensor *run_in = part;
        if (b < full && backbone_pads(t)) {
            TRY(backbone_pad(t, part, n_in, b, full, padded, e));
            run_in = padded, rows = full;
        }
        double r0 = clock_seconds();
        graft_status st = graft_model_run(t->backbone, run_in, n_in);
        if (st == GRAFT_E_OUT_OF_MEMORY && rows > 1) {
            t->backbone_max_batch = rows / 2;
            ctx_log(t->backbone->ctx, GRAFT_LOG_WARN,
                    "out of memory running the backbone on %lld samples (%s); running it on "
                    "%lld at a time",
                    (long long)rows, e->msg, (long long)(rows / 2));
            err_clear(e);
            continue;
        }
        TRY(st);
        const graft_tensor *f = NULL;
        TRY(graft_model_output(t->backbone, 0, &f));
        if (f->ndim != 2 || f->dims[0] != rows || f->dtype != GRAFT_DTYPE_F32)
            return err_set(e, GRAFT_E_SHAPE, "the features must be float32 (batch, features)");
        ctx_log(t->backbone->ctx, GRAFT_LOG_DEBUG, "backbone: %lld samples%s in %.2f ms",
                (long long)b, rows > b ? " (padded)" : "", (clock_seconds() - r0) * 1e3);
        TRY(trainer_setup(t, f->dims[1], e));
        if (!*feats) {
            *feats = host_alloc_large(sizeof(float) * (size_t)(n * t->dim));
            if (!*feats) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for features");
        }
        memcpy(*feats + (row + done) * t->dim, f->data, sizeof(float) * (size_t)(b * t->dim));
        done += b;
    }
    return GRAFT_OK;
}

/* Features of the m delivered samples (source indices idx) into *feats at row `row`: from the
 * cache when all are there (unless read already: `prefilled`), else from the backbone. */
static graft_status batch_features(graft_trainer *t, feature_cache *fc, graft_named_tensor *in,
                                   int n_in, const int64_t *idx, int64_t m, int64_t row, int64_t n,
                                   bool prefilled, float **feats, graft_err *e) {
    bool all = fc != NULL;
    for (int64_t i = 0; all && i < m; i++) all = feature_cache_has(fc, idx[i]);
    if (all) {
        int64_t found;
        double c0 = clock_seconds();
        if (!prefilled) TRY(feature_cache_get_rows(fc, *feats + row * t->dim, idx, m, &found, e));
        t->cache_seconds += clock_seconds() - c0;
        return GRAFT_OK;
    }
    double t0 = clock_seconds();
    TRY(backbone_rows(t, in, n_in, m, row, n, feats, e));
    float *dst = *feats + row * t->dim;
    t->backbone_samples += m;
    double t1 = clock_seconds();
    t->backbone_seconds += t1 - t0;
    if (fc) TRY(feature_cache_put_rows(fc, idx, m, dst, e));
    t->cache_seconds += clock_seconds() - t1;
    return GRAFT_OK;
}

/* The trainer's backbone-phase counters when a source's reading began. */
typedef struct phase_start {
    int64_t backbone_samples;
    double at, backbone_s, read_s, cache_s;
} phase_start;

static phase_start phase_now(const graft_trainer *t) {
    return (phase_start){t->backbone_samples, clock_seconds(), t->backbone_seconds, t->read_seconds,
                         t->cache_seconds};
}

/* The extract callback's report of one source's progress (validation < 0: none); true when it
 * asks to stop. */
static bool report_progress(graft_trainer *t, int validation, int64_t done, int64_t total,
                            const phase_start *p0) {
    if (validation < 0 || !t->options.extract_callback) return false;
    graft_extract_report r = {validation,
                              done,
                              total,
                              t->backbone_samples - p0->backbone_samples,
                              clock_seconds() - p0->at,
                              t->cache_note[0] ? t->cache_note : NULL,
                              t->backbone_seconds - p0->backbone_s,
                              t->read_seconds - p0->read_s,
                              t->cache_seconds - p0->cache_s};
    return t->options.extract_callback(&r, t->options.callback_user) != 0;
}

/* Before a source's first batch: when some batch will read inputs, the source's begin (its
 * threads and decoders start) and, meanwhile, the backbone's warm-up on a GPU. */
static graft_status begin_reading(graft_trainer *t, const graft_batch_source *src,
                                  const feature_cache *fc, int64_t b) {
    int64_t n = src->n_samples, first = -1;
    for (int64_t at = 0; at < n && first < 0; at += b)
        if (!all_cached(fc, src, at, n - at < b ? n - at : b)) first = at;
    if (first < 0) return GRAFT_OK;
    if (src->begin) TRY(src->begin(src->user, first, n - first < b ? n - first : b));
    backbone_warm_up(t, t->backbone_max_batch > 0 ? t->backbone_max_batch : b);
    return GRAFT_OK;
}

typedef struct run_counts {
    int64_t runs, replays, plan_hits, plans_learned;
} run_counts;

/* How the backbone's runs went since `before` (the executor's counters then), for speed
 * questions: recordings replayed, plans found cached, plans learned (GRAFT_LOG=debug). */
static void log_runs(const graft_trainer *t, const run_counts *before) {
    const executor *x = &t->backbone->exec;
    ctx_log(t->backbone->ctx, GRAFT_LOG_DEBUG,
            "backbone runs: %lld, of which %lld replayed a recording (recording %s%s), %lld "
            "found their shapes' plan cached, %lld learned a plan",
            (long long)(x->runs - before->runs), (long long)(x->replays - before->replays),
            !x->device       ? "needs a GPU"
            : !x->graph_safe ? "off: "
            : x->graph_off   ? "off: it failed or was turned off"
                             : "on",
            x->device && !x->graph_safe ? x->unsafe_why : "",
            (long long)(x->plan_hits - before->plan_hits),
            (long long)(x->plans_learned - before->plans_learned));
}

/* Every batch of the source: labels copied out, features from the cache or the backbone;
 * skipped samples leave no row. *rows receives the samples delivered. Progress goes to the
 * extract callback (validation >= 0), which may stop the reading (t->extract_stopped). */
static graft_status read_all(graft_trainer *t, const graft_batch_source *src, feature_cache *fc,
                             int validation, bool prefilled, float **feats, char *labels,
                             int64_t *rows, graft_err *e) {
    graft_named_tensor in[32];
    size_t ls = trainer_label_size(t);
    int64_t n = src->n_samples, b = t->options.batch_size, row = 0;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)b);
    unsigned char *kept = malloc((size_t)b);
    graft_status st = idx && kept ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    phase_start p0 = phase_now(t);
    const executor *x = &t->backbone->exec;
    run_counts runs0 = {x->runs, x->replays, x->plan_hits, x->plans_learned};
    t->extract_stopped = report_progress(t, validation, 0, n, &p0);
    if (st == GRAFT_OK && !t->extract_stopped) st = begin_reading(t, src, fc, b);
    for (int64_t at = 0; at < n && st == GRAFT_OK && !t->extract_stopped; at += b) {
        int64_t m = n - at < b ? n - at : b, got = 0;
        graft_tensor y = {0};
        memset(in, 0, sizeof in);
        memset(kept, 0, (size_t)m);
        bool warm = all_cached(fc, src, at, m);
        double r0 = clock_seconds();
        if (warm) {
            /* Every feature is in the cache: the labels alone, no input read or decoded. */
            st = src->read_labels(src->user, at, m, &y);
            memset(kept, 1, (size_t)m);
        } else {
            st = src->read(src->user, at, m, in, &y, kept);
        }
        t->read_seconds += clock_seconds() - r0;
        for (int64_t i = 0; i < m; i++)
            if (kept[i]) idx[got++] = at + i;
        if (st == GRAFT_OK && got > 0) st = check_labels(t, &y, got, e);
        if (st == GRAFT_OK && got > 0 && !warm) st = check_batch(src, in, got, e);
        if (st != GRAFT_OK) break;
        if (got > 0) {
            memcpy(labels + (size_t)row * ls, y.data, ls * (size_t)got);
            for (int64_t i = 0; validation != 1 && t->row_source && i < got; i++)
                t->row_source[row + i] = idx[i];
            st = batch_features(t, fc, in, src->n_inputs, idx, got, row, n, prefilled, feats, e);
            row += got;
        }
        if (st == GRAFT_OK) t->extract_stopped = report_progress(t, validation, at + m, n, &p0);
    }
    free(idx), free(kept);
    *rows = row;
    log_runs(t, &runs0);
    return st;
}

/* Every row of a complete cache into feats (n, dim). */
static graft_status read_cached(graft_trainer *t, feature_cache *fc, float *feats, int64_t n,
                                graft_err *e) {
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n), found = 0;
    if (!idx) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    double c0 = clock_seconds();
    graft_status st = feature_cache_get_rows(fc, feats, idx, n, &found, e);
    t->cache_seconds += clock_seconds() - c0;
    free(idx);
    if (st == GRAFT_OK && found != n)
        st = err_set(e, GRAFT_E_INTERNAL, "feature cache: %lld of %lld rows read", (long long)found,
                     (long long)n);
    return st;
}

graft_status trainer_extract(graft_trainer *t, const graft_batch_source *src,
                             const char *cache_path, float **features, void **labels,
                             int64_t *n_rows, graft_err *e) {
    return trainer_extract_reported(t, src, cache_path, -1, features, labels, n_rows, e);
}

/* Fine-tuned blocks whose rows' sizes depend on the inputs' (a text model's sequence length):
 * one run of the frozen part on the source's first batch fixes the layout before a cache opens
 * (every later batch must have the same sizes: texts padded to one length). */
static graft_status resolve_rows(graft_trainer *t, const graft_batch_source *src, graft_err *e) {
    int64_t m = src->n_samples < t->options.batch_size ? src->n_samples : t->options.batch_size;
    graft_named_tensor in[32];
    graft_tensor y = {0};
    memset(in, 0, sizeof in);
    unsigned char *kept = malloc((size_t)m);
    if (!kept) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    double r0 = clock_seconds();
    graft_status st = src->read(src->user, 0, m, in, &y, kept);
    t->read_seconds += clock_seconds() - r0;
    free(kept);
    if (st == GRAFT_OK) st = check_batch(src, in, m, e);
    if (st == GRAFT_OK) st = graft_model_run(t->backbone, in, src->n_inputs);
    if (st == GRAFT_OK) st = frozen_part_resolve(&t->blocks->frozen, e);
    if (st == GRAFT_OK) st = trainer_setup(t, t->blocks->frozen.row, e);
    if (st == GRAFT_OK)
        ctx_log(t->backbone->ctx, GRAFT_LOG_INFO,
                "fine-tuning from '%s': %lld values per sample for the blocks (from the first "
                "batch's sizes)",
                t->options.train_from, (long long)t->blocks->frozen.row);
    return st;
}

graft_status trainer_extract_reported(graft_trainer *t, const graft_batch_source *src,
                                      const char *cache_path, int validation, float **features,
                                      void **labels, int64_t *n_rows, graft_err *e) {
    t->extract_stopped = false;
    if (!src->read || src->n_samples < 1 || src->n_inputs < 1 || src->n_inputs > 32)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "a data source needs a read function, samples and 1 to 32 inputs");
    if (t->blocks && !t->head_ready) TRY(resolve_rows(t, src, e));
    if (cache_path && !t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "a feature cache needs the feature size known when the model loads");
    feature_cache *fc = NULL;
    t->cache_note[0] = 0;
    double c0 = clock_seconds();
    if (cache_path) TRY(open_cache(t, cache_path, src, &fc, e));
    t->cache_seconds += clock_seconds() - c0;
    int64_t n = src->n_samples;
    /* every row is written: huge pages faulted in on all threads, not a fault per 4 KiB (a
     * million ResNet-50 rows from a warm cache spent ~3.5 s in faults on the trainer's thread) */
    float *feats = t->head_ready ? host_alloc_large(sizeof(float) * (size_t)(n * t->dim)) : NULL;
    char *y = malloc(trainer_label_size(t) * (size_t)n);
    graft_status st = GRAFT_OK;
    if (!y || (t->head_ready && !feats))
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for %lld samples' features",
                     (long long)n);
    int64_t rows = 0;
    if (st == GRAFT_OK && validation != 1) { /* training rows -> samples, for error messages */
        free(t->row_source);
        t->n_row_source = 0;
        t->row_source = malloc(sizeof(int64_t) * (size_t)n);
        if (!t->row_source) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    /* A complete cache, read batch by batch as labels alone (every sample kept, so row i is
     * sample i): every row read in one pass on all threads first. */
    bool prefilled =
        st == GRAFT_OK && feats && fc && src->read_labels && feature_cache_complete(fc);
    if (prefilled) st = read_cached(t, fc, feats, n, e);
    if (st == GRAFT_OK) st = read_all(t, src, fc, validation, prefilled, &feats, y, &rows, e);
    if (st == GRAFT_OK && validation != 1) t->n_row_source = rows;
    if (st == GRAFT_OK && rows == 0 && !t->extract_stopped)
        st = err_set(e, GRAFT_E_INVALID_ARGUMENT, "the data source delivered no samples");
    c0 = clock_seconds();
    graft_status st2 = fc ? feature_cache_close(fc, st == GRAFT_OK ? e : NULL) : GRAFT_OK;
    t->cache_seconds += clock_seconds() - c0;
    if (st == GRAFT_OK) st = st2;
    if (st != GRAFT_OK || t->extract_stopped) {
        free(feats), free(y);
        *features = NULL, *labels = NULL, *n_rows = 0;
        return st;
    }
    *features = feats;
    *labels = y;
    *n_rows = rows;
    return GRAFT_OK;
}

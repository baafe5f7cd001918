/* dist_extract.c: the sharded backbone phase: each rank runs the frozen model on its contiguous
 * share of the samples, then every rank gathers every row (the one-process order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_train.h"

/* A contiguous range of another source's samples, with its own identity (and so its own
 * feature cache key). */
typedef struct shard_source {
    graft_batch_source source;
    const graft_batch_source *inner;
    int64_t start;
    char identity[600];
} shard_source;

static graft_status shard_read(void *user, int64_t start, int64_t count, graft_named_tensor *in,
                               graft_tensor *labels, unsigned char *kept) {
    shard_source *s = user;
    return s->inner->read(s->inner->user, s->start + start, count, in, labels, kept);
}

static graft_status shard_read_labels(void *user, int64_t start, int64_t count,
                                      graft_tensor *labels) {
    shard_source *s = user;
    return s->inner->read_labels(s->inner->user, s->start + start, count, labels);
}

static graft_status shard_begin(void *user, int64_t start, int64_t count) {
    shard_source *s = user;
    return s->inner->begin(s->inner->user, s->start + start, count);
}

static void shard_init(shard_source *s, const graft_batch_source *src, int64_t lo, int64_t hi) {
    s->source = *src;
    s->inner = src;
    s->start = lo;
    s->source.n_samples = hi - lo;
    s->source.user = s;
    s->source.read = shard_read;
    s->source.read_labels = src->read_labels ? shard_read_labels : NULL;
    s->source.begin = src->begin ? shard_begin : NULL;
    snprintf(s->identity, sizeof s->identity, "%s|samples %lld-%lld of %lld",
             src->identity ? src->identity : "", (long long)lo, (long long)hi,
             (long long)src->n_samples);
    s->source.identity = s->identity;
}

/* This rank's feature cache file: an explicit path gets the shard in its name; a folder of
 * caches names it from the shard's key. NULL: no cache. */
static graft_status shard_cache(graft_trainer *t, const shard_source *s, int validation, char *path,
                                size_t size, const char **out, graft_err *e) {
    dist *d = trainer_dist(t);
    *out = NULL;
    if (t->options.cache_path) {
        snprintf(path, size, "%s%s.rank%dof%d", t->options.cache_path,
                 validation == 1 ? ".val" : "", dist_rank(d), dist_world_size(d));
        *out = path;
    } else if (t->options.cache_dir) {
        TRY(trainer_cache_file(t, &s->source, t->options.cache_dir, path, size, e));
        *out = path;
    }
    return GRAFT_OK;
}

/* Every rank's rows (counts[r] each, elem bytes per row) from mine into a new *all. */
static graft_status gather_rows(dist *d, const void *mine, const int64_t *counts, size_t elem,
                                void **all, graft_err *e) {
    int w = dist_world_size(d);
    size_t *bytes = malloc(sizeof *bytes * (size_t)w), total = 0;
    if (!bytes) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < w; i++) total += bytes[i] = (size_t)counts[i] * elem;
    *all = malloc(total ? total : 1);
    graft_status st = *all ? dist_allgatherv(d, mine, *all, bytes, e)
                           : err_set(e, GRAFT_E_OUT_OF_MEMORY,
                                     "out of memory for all ranks' features (%zu bytes)", total);
    free(bytes);
    return st;
}

/* Training rows -> the source's sample indices, for every rank's rows (shifted by their
 * shard's start). */
static graft_status gather_row_source(graft_trainer *t, dist *d, int64_t lo, const int64_t *counts,
                                      graft_err *e) {
    for (int64_t i = 0; i < t->n_row_source; i++) t->row_source[i] += lo;
    void *all;
    TRY(gather_rows(d, t->row_source, counts, sizeof(int64_t), &all, e));
    free(t->row_source);
    t->row_source = all;
    t->n_row_source = 0;
    for (int i = 0; i < dist_world_size(d); i++) t->n_row_source += counts[i];
    return GRAFT_OK;
}

/* After every rank's own phase: an error or stop anywhere is one everywhere. */
static graft_status agree(graft_trainer *t, dist *d, graft_status mine, graft_err *e) {
    double v[2] = {mine != GRAFT_OK, t->extract_stopped};
    graft_err quiet;
    graft_status st = dist_allreduce_f64(d, v, 2, mine != GRAFT_OK ? &quiet : e);
    if (mine != GRAFT_OK) return mine;
    TRY(st);
    if (v[0] > 0.0)
        return err_set(e, GRAFT_E_INTERNAL,
                       "rank %d of %d: another rank failed in the backbone phase (its error is "
                       "in the output above); stopping",
                       dist_rank(d), dist_world_size(d));
    t->extract_stopped = v[1] > 0.0;
    return GRAFT_OK;
}

graft_status dist_extract(graft_trainer *t, const graft_batch_source *src, int validation,
                          float **features, void **labels, int64_t *n_rows, graft_err *e) {
    dist *d = trainer_dist(t);
    *features = NULL, *labels = NULL, *n_rows = 0;
    int w = dist_world_size(d), r = dist_rank(d);
    if (src->n_samples < w)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "%lld %s samples for %d ranks: each rank needs at least one",
                       (long long)src->n_samples, validation == 1 ? "validation" : "training", w);
    int64_t lo = src->n_samples * r / w, hi = src->n_samples * (r + 1) / w, rows = 0;
    shard_source shard;
    shard_init(&shard, src, lo, hi);
    char path[4096];
    const char *cache;
    float *x = NULL;
    void *y = NULL;
    graft_status st = shard_cache(t, &shard, validation, path, sizeof path, &cache, e);
    if (st == GRAFT_OK)
        st = trainer_extract_reported(t, &shard.source, cache, validation, &x, &y, &rows, e);
    st = agree(t, d, st, e);
    int64_t *counts = calloc((size_t)w, sizeof *counts);
    if (st == GRAFT_OK && !t->extract_stopped && !counts)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st == GRAFT_OK && !t->extract_stopped) st = dist_allgather_i64(d, rows, counts, e);
    if (st == GRAFT_OK && !t->extract_stopped)
        st = gather_rows(d, x, counts, sizeof(float) * (size_t)t->dim, (void **)features, e);
    if (st == GRAFT_OK && !t->extract_stopped)
        st = gather_rows(d, y, counts, trainer_label_size(t), labels, e);
    if (st == GRAFT_OK && !t->extract_stopped && validation != 1)
        st = gather_row_source(t, d, lo, counts, e);
    for (int i = 0; st == GRAFT_OK && i < w; i++) *n_rows += counts[i];
    if (st != GRAFT_OK) {
        free(*features), free(*labels);
        *features = NULL, *labels = NULL, *n_rows = 0;
    }
    free(x), free(y), free(counts);
    return st;
}

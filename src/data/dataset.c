/* dataset.c: the graft_dataset handle: views over shared samples, labels and classes, skipped
 * files, stratified splits, and batch sources for the trainer. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/hash.h"
#include "../core/rng.h"

size_t dataset_label_size(const dataset_shared *sh) {
    return graft_dtype_size(sh->label_dtype) * (size_t)sh->label_width;
}

size_t dataset_row_bytes(const dataset_shared *sh, int k) {
    int64_t n = 1;
    for (int d = 0; d < sh->input_ndim[k]; d++) n *= sh->input_dims[k][d];
    return (size_t)n * graft_dtype_size(sh->input_dtype[k]);
}

/* The decoder's message without its own mention of the file, which the listing already names:
 * "image 'PATH': REASON" becomes "REASON", "cannot open image 'PATH': REASON" "cannot open:
 * REASON". Writes into buf (size n); returns reason itself when it does not name the file. */
static const char *without_path(const char *reason, const char *path, char *buf, size_t n) {
    if (!reason || !path) return reason;
    char needle[4200];
    snprintf(needle, sizeof needle, "image '%s': ", path);
    const char *at = strstr(reason, needle);
    if (!at) return reason;
    if (at == reason) return reason + strlen(needle);
    if (at[-1] != ' ') return reason;
    snprintf(buf, n, "%.*s: %s", (int)(at - 1 - reason), reason, at + strlen(needle));
    return buf;
}

#define SKIP_WARNINGS 100 /* skipped files warned of one by one */

void dataset_skip(dataset_shared *sh, const char *path, const char *reason) {
    char buf[1024];
    reason = without_path(reason, path, buf, sizeof buf);
    pthread_mutex_lock(&sh->skip_lock);
    /* A file is reported once, however many passes read it (a hash set: a folder of a million
     * hard links lists 900,000 repeats). */
    if (path && str_map_get(&sh->skipped_paths, path, strlen(path)) >= 0) {
        pthread_mutex_unlock(&sh->skip_lock);
        return;
    }
    if (sh->n_skipped == sh->cap_skipped) {
        int64_t cap = sh->cap_skipped ? sh->cap_skipped * 2 : 16;
        skipped_entry *n = realloc(sh->skipped, sizeof *n * (size_t)cap);
        if (n) sh->skipped = n, sh->cap_skipped = cap;
    }
    /* the first SKIP_WARNINGS one by one, then one line; graft_dataset_skipped lists them all */
    if (sh->ctx && sh->n_skipped < SKIP_WARNINGS)
        ctx_log(sh->ctx, GRAFT_LOG_WARN, "skipping %s: %s", path ? path : "?", reason);
    else if (sh->ctx && sh->n_skipped == SKIP_WARNINGS)
        ctx_log(sh->ctx, GRAFT_LOG_WARN,
                "skipping more files (the data set's list of skipped files has them all)");
    if (sh->n_skipped < sh->cap_skipped) {
        sh->skipped[sh->n_skipped].path = strdup(path ? path : "?");
        sh->skipped[sh->n_skipped].reason = strdup(reason ? reason : "?");
        if (path) (void)str_map_put(&sh->skipped_paths, path, strlen(path), sh->n_skipped);
        sh->n_skipped++;
    }
    pthread_mutex_unlock(&sh->skip_lock);
}

/* The view's identity: the shared one plus which samples it holds. */
static void view_identity(graft_dataset *ds) {
    uint64_t h = hash64(ds->items, sizeof(int64_t) * (size_t)ds->n, 0x76696577ull);
    snprintf(ds->identity, sizeof ds->identity, "%s;view=%016llx", ds->sh->identity,
             (unsigned long long)h);
}

graft_status dataset_create(graft_ctx *ctx, const dataset_kind *kind, void *impl,
                            char **class_names, int n_classes, int64_t n, int64_t *items,
                            void *labels, graft_dataset **out, graft_err *e) {
    graft_dataset *ds = calloc(1, sizeof *ds);
    dataset_shared *sh = calloc(1, sizeof *sh);
    if (!ds || !sh) {
        free(ds), free(sh);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    sh->refs = 1;
    sh->ctx = ctx;
    sh->kind = kind;
    sh->impl = impl;
    sh->class_names = class_names;
    sh->n_classes = n_classes;
    pthread_mutex_init(&sh->skip_lock, NULL);
    ds->ctx = ctx;
    ds->sh = sh;
    ds->n = n;
    ds->items = items;
    ds->labels = labels;
    *out = ds;
    return GRAFT_OK;
}

static void shared_release(dataset_shared *sh) {
    if (--sh->refs > 0) return;
    if (sh->kind && sh->kind->free) sh->kind->free(sh->impl);
    for (int i = 0; i < sh->n_classes; i++) free(sh->class_names[i]);
    free(sh->class_names);
    for (int64_t i = 0; i < sh->n_skipped; i++)
        free(sh->skipped[i].path), free(sh->skipped[i].reason);
    free(sh->skipped);
    str_map_free(&sh->skipped_paths);
    pthread_mutex_destroy(&sh->skip_lock);
    free(sh);
}

void graft_dataset_free(graft_dataset *ds) {
    if (!ds) return;
    pipeline_free(ds->pl);
    shared_release(ds->sh);
    free(ds->items);
    free(ds->labels);
    free(ds);
}

int64_t graft_dataset_size(const graft_dataset *ds) {
    return ds ? ds->n : 0;
}
int graft_dataset_class_count(const graft_dataset *ds) {
    return ds ? ds->sh->n_classes : 0;
}

const char *graft_dataset_class_name(const graft_dataset *ds, int index) {
    return ds && index >= 0 && index < ds->sh->n_classes ? ds->sh->class_names[index] : NULL;
}

int64_t graft_dataset_skipped_count(const graft_dataset *ds) {
    if (!ds) return 0;
    pthread_mutex_lock(&ds->sh->skip_lock);
    int64_t n = ds->sh->n_skipped;
    pthread_mutex_unlock(&ds->sh->skip_lock);
    return n;
}

graft_status graft_dataset_skipped(const graft_dataset *ds, int64_t index, const char **path,
                                   const char **reason) {
    if (!ds || index < 0 || index >= graft_dataset_skipped_count(ds))
        return GRAFT_E_INVALID_ARGUMENT;
    if (path) *path = ds->sh->skipped[index].path;
    if (reason) *reason = ds->sh->skipped[index].reason;
    return GRAFT_OK;
}

/* A view holding the samples picked[0..n) of ds. */
static graft_status make_view(graft_dataset *ds, const int64_t *picked, int64_t n,
                              graft_dataset **out, graft_err *e) {
    size_t ls = dataset_label_size(ds->sh);
    graft_dataset *v = calloc(1, sizeof *v);
    int64_t *items = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    char *labels = malloc(ls * (size_t)(n ? n : 1));
    if (!v || !items || !labels) {
        free(v), free(items), free(labels);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory splitting the data set");
    }
    for (int64_t i = 0; i < n; i++) {
        items[i] = ds->items[picked[i]];
        memcpy(labels + (size_t)i * ls, (char *)ds->labels + (size_t)picked[i] * ls, ls);
    }
    v->ctx = ds->ctx;
    v->sh = ds->sh;
    v->sh->refs++;
    v->n = n;
    v->items = items;
    v->labels = labels;
    view_identity(v);
    *out = v;
    return GRAFT_OK;
}

/* The stratum of sample i: its class for class labels, else one stratum. */
static int64_t stratum(const graft_dataset *ds, int64_t i) {
    if (ds->sh->label_dtype != GRAFT_DTYPE_I64) return 0;
    return ((const int64_t *)ds->labels)[i];
}

graft_status graft_dataset_split(graft_dataset *ds, double val_fraction, uint64_t seed,
                                 graft_dataset **train, graft_dataset **val) {
    if (!ds || !train || !val) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ds->ctx->err;
    err_clear(e);
    if (!(val_fraction > 0.0 && val_fraction < 1.0))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the validation fraction must be in (0, 1), "
                       "got %g",
                       val_fraction);
    int64_t n = ds->n, n_strata = ds->sh->label_dtype == GRAFT_DTYPE_I64 ? ds->sh->n_classes : 1;
    int64_t *order = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *tr = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *va = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!order || !tr || !va) {
        free(order), free(tr), free(va);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory splitting the data set");
    }
    /* Per stratum: its samples in a seeded order; the first round(fraction * size) go to val. */
    int64_t nt = 0, nv = 0;
    uint64_t rng = seed ^ 0x73706c6974ull;
    for (int64_t c = 0; c < n_strata; c++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (stratum(ds, i) == c) order[m++] = i;
        rng_shuffle(&rng, order, m);
        int64_t k = (int64_t)(val_fraction * (double)m + 0.5);
        if (k == m && m > 1) k = m - 1;
        for (int64_t i = 0; i < m; i++) {
            if (i < k)
                va[nv++] = order[i];
            else
                tr[nt++] = order[i];
        }
    }
    graft_status st = make_view(ds, tr, nt, train, e);
    if (st == GRAFT_OK) {
        st = make_view(ds, va, nv, val, e);
        if (st != GRAFT_OK) graft_dataset_free(*train);
    }
    free(order), free(tr), free(va);
    return st;
}

graft_status graft_dataset_open_like(const graft_dataset *like, const char *path,
                                     graft_dataset **out) {
    if (!like || !path || !out) return GRAFT_E_INVALID_ARGUMENT;
    err_clear(&like->ctx->err);
    TRY(like->sh->kind->open_like(like, path, out));
    dataset_shared *to = (*out)->sh;
    memcpy(to->input_names, like->sh->input_names, sizeof to->input_names);
    memcpy(to->input_left_out, like->sh->input_left_out, sizeof to->input_left_out);
    return GRAFT_OK;
}

graft_status graft_dataset_set_input_names(graft_dataset *ds, const char *const *names, int n) {
    if (!ds || (n > 0 && !names)) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ds->ctx->err;
    err_clear(e);
    dataset_shared *sh = ds->sh;
    if (n != sh->n_inputs)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "the data set makes %d input%s, %d names given",
                       sh->n_inputs, sh->n_inputs == 1 ? "" : "s", n);
    int fed = 0;
    for (int k = 0; k < n; k++) {
        if (names[k] && (!names[k][0] || strlen(names[k]) >= sizeof sh->input_names[k]))
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "input name %d is empty or too long", k);
        for (int j = 0; j < k; j++)
            if (names[k] && names[j] && strcmp(names[k], names[j]) == 0)
                return err_set(e, GRAFT_E_INVALID_ARGUMENT, "input name '%s' given twice",
                               names[k]);
        fed += names[k] != NULL;
    }
    if (!fed) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "every input left out");
    for (int k = 0; k < n; k++) {
        sh->input_left_out[k] = names[k] == NULL;
        if (names[k]) snprintf(sh->input_names[k], sizeof sh->input_names[k], "%s", names[k]);
    }
    return GRAFT_OK;
}

graft_status graft_dataset_source(graft_dataset *ds, int threads, int prefetch, uint64_t seed,
                                  graft_batch_source *out) {
    if (!ds || !out) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ds->ctx->err;
    err_clear(e);
    if (ds->n < 1) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "the data set is empty");
    pipeline_free(ds->pl);
    ds->pl = NULL;
    TRY(pipeline_create(&ds->pl, ds, threads, prefetch, seed, e));
    if (!ds->identity[0]) view_identity(ds);
    int fed = 0;
    for (int k = 0; k < ds->sh->n_inputs; k++) fed += !ds->sh->input_left_out[k];
    *out = (graft_batch_source){
        ds->n, fed, pipeline_read, ds->pl, ds->identity, pipeline_read_labels, NULL};
    return GRAFT_OK;
}

graft_status graft_dataset_set_allocator(graft_dataset *ds, void *(*alloc)(void *, size_t),
                                         void (*release)(void *, void *), void *user) {
    if (!ds) return GRAFT_E_INVALID_ARGUMENT;
    err_clear(&ds->ctx->err);
    if (!alloc != !release)
        return err_set(&ds->ctx->err, GRAFT_E_INVALID_ARGUMENT,
                       "give both an allocation and a release function, or neither");
    ds->alloc = alloc;
    ds->release = release;
    ds->alloc_user = user;
    return GRAFT_OK;
}

const char *graft_dataset_sample_path(const graft_dataset *ds, int64_t index) {
    if (!ds || index < 0 || index >= ds->n) return NULL;
    return ds->sh->kind->item_path(ds->sh->impl, ds->items[index]);
}

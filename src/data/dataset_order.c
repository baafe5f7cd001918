/* dataset_order.c: a text data set's samples ordered by their token count, so that batches padded
 * to their longest text hold texts of like length. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"

typedef struct length_rank {
    int64_t length, index;
} length_rank;

static int by_length(const void *a, const void *b) {
    const length_rank *x = a, *y = b;
    if (x->length != y->length) return x->length < y->length ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index; /* ties keep their order */
}

/* Tokens of sample i: the ones in its attention-mask row; 0 when it cannot be read (the
 * pipeline skips and reports it when it is read for real). */
static int64_t sample_length(const graft_dataset *ds, int64_t i) {
    const dataset_shared *sh = ds->sh;
    void *rows[DATASET_MAX_INPUTS] = {0};
    int64_t length = 0;
    bool ok = true;
    for (int k = 0; k < sh->n_inputs && ok; k++) ok = (rows[k] = malloc(dataset_row_bytes(sh, k)));
    graft_err e = {0};
    if (ok && sh->kind->load(sh->impl, ds->items[i], rows, 0, &e) == GRAFT_OK) {
        int64_t n = sh->input_dims[sh->mask_input][0];
        bool wide = sh->input_dtype[sh->mask_input] == GRAFT_DTYPE_I64;
        for (int64_t j = 0; j < n; j++)
            length += wide ? ((const int64_t *)rows[sh->mask_input])[j] != 0
                           : ((const int32_t *)rows[sh->mask_input])[j] != 0;
    }
    for (int k = 0; k < sh->n_inputs; k++) free(rows[k]);
    return length;
}

/* Put items and labels in the order of `rank`. */
static graft_status permute(graft_dataset *ds, const length_rank *rank, graft_err *e) {
    size_t ls = dataset_label_size(ds->sh);
    int64_t n = ds->n;
    int64_t *items = malloc(sizeof(int64_t) * (size_t)n);
    char *labels = malloc(ls * (size_t)n);
    if (!items || !labels) {
        free(items), free(labels);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory ordering the data set");
    }
    for (int64_t i = 0; i < n; i++) {
        items[i] = ds->items[rank[i].index];
        memcpy(labels + (size_t)i * ls, (const char *)ds->labels + (size_t)rank[i].index * ls, ls);
    }
    memcpy(ds->items, items, sizeof(int64_t) * (size_t)n);
    memcpy(ds->labels, labels, ls * (size_t)n);
    free(items), free(labels);
    return GRAFT_OK;
}

graft_status graft_dataset_sort_by_length(graft_dataset *ds, int threads) {
    if (!ds) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ds->ctx->err;
    err_clear(e);
    if (!ds->sh->pad_to_longest)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_dataset_sort_by_length: the data set is not text padded to each "
                       "batch's longest (graft_text_options.pad_to_longest)");
    if (ds->pl)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_dataset_sort_by_length: the data set already has a batch source");
    int64_t n = ds->n;
    length_rank *rank = malloc(sizeof *rank * (size_t)(n ? n : 1));
    if (!rank) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory ordering the data set");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = threads > 0 ? threads : (cpus > 0 ? (int)cpus : 1); /* 0: all cores, as sources */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 64)
    for (int64_t i = 0; i < n; i++) rank[i] = (length_rank){sample_length(ds, i), i};
    qsort(rank, (size_t)n, sizeof *rank, by_length);
    graft_status st = permute(ds, rank, e);
    free(rank);
    ds->identity[0] = 0; /* the order is part of what the feature cache keys on */
    return st;
}

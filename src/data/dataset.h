/* dataset.h: the graft_dataset handle: samples (items of a kind: image files, text rows) with
 * labels, shared by the views a split makes, the list of skipped files, and the batch pipeline
 * that decodes ahead on worker threads. */
#ifndef GRAFT_DATA_DATASET_H
#define GRAFT_DATA_DATASET_H

#include <pthread.h>
#include <stdbool.h>

#include "../core/context.h"
#include "graft.h"
#include "str_map.h"

#define DATASET_MAX_INPUTS 4

/* What a kind of data set does. `load` writes sample `item` into dst[k], one row of input k;
 * an error means the sample is skipped (its message becomes the reason). `seed` seeds the
 * sample's own random stream (augmentation), so results do not depend on threads. */
typedef struct dataset_kind {
    const char *name;
    graft_status (*load)(void *impl, int64_t item, void *const *dst, uint64_t seed, graft_err *e);
    const char *(*item_path)(void *impl, int64_t item);
    /* The same kind and classes over another path (graft_dataset_open_like). */
    graft_status (*open_like)(const graft_dataset *like, const char *path, graft_dataset **out);
    void (*free)(void *impl);
} dataset_kind;

typedef struct skipped_entry {
    char *path;
    char *reason;
} skipped_entry;

/* What the views of one data set share (reference-counted). */
typedef struct dataset_shared {
    int refs;
    graft_ctx *ctx; /* for warnings about skipped files */
    const dataset_kind *kind;
    void *impl;
    int n_classes;
    char **class_names;
    int n_inputs;
    char input_names[DATASET_MAX_INPUTS][1024];
    bool input_left_out[DATASET_MAX_INPUTS]; /* made but not delivered
                                                (graft_dataset_set_input_names) */
    graft_dtype input_dtype[DATASET_MAX_INPUTS];
    int input_ndim[DATASET_MAX_INPUTS]; /* per sample, without the batch dim */
    int64_t input_dims[DATASET_MAX_INPUTS][GRAFT_MAX_DIMS];
    graft_dtype label_dtype; /* I64 (class index) or F32 (multi-label / regression) */
    int label_width;         /* 1 for a class index, else floats per sample */
    char identity[512];      /* the data and its preprocessing, for the feature cache */
    /* Text: cut each batch's 1-D inputs to the longest sample in it, measured by the count of
     * ones in input `mask_input` (the attention mask). */
    bool pad_to_longest;
    int mask_input;
    pthread_mutex_t skip_lock;
    skipped_entry *skipped;
    int64_t n_skipped, cap_skipped;
    str_map skipped_paths; /* path -> index in skipped: each reported once, in O(1) */
} dataset_shared;

typedef struct pipeline pipeline;

struct graft_dataset {
    graft_ctx *ctx;
    dataset_shared *sh;
    int64_t n;
    int64_t *items; /* per sample: the kind's item index */
    void *labels;   /* per sample: label_width values of label_dtype */
    char identity[600];
    pipeline *pl;
    void *(*alloc)(void *user, size_t bytes); /* batch buffers; NULL: malloc */
    void (*release)(void *user, void *ptr);
    void *alloc_user;
};

/* A new data set over the kind's items; takes ownership of impl, class names, items, labels. */
graft_status dataset_create(graft_ctx *ctx, const dataset_kind *kind, void *impl,
                            char **class_names, int n_classes, int64_t n, int64_t *items,
                            void *labels, graft_dataset **out, graft_err *e);
/* Record a skipped file (thread-safe). */
void dataset_skip(dataset_shared *sh, const char *path, const char *reason);
size_t dataset_label_size(const dataset_shared *sh);
/* Bytes of one sample's row of input k. */
size_t dataset_row_bytes(const dataset_shared *sh, int k);

/* The pipeline behind graft_dataset_source (pipeline.c). */
graft_status pipeline_create(pipeline **out, graft_dataset *ds, int threads, int prefetch,
                             uint64_t seed, graft_err *e);
void pipeline_free(pipeline *p);
graft_status pipeline_read(void *user, int64_t start, int64_t count, graft_named_tensor *inputs,
                           graft_tensor *labels, unsigned char *kept);
/* The labels of samples [start, start + count) alone (graft_batch_source.read_labels). */
graft_status pipeline_read_labels(void *user, int64_t start, int64_t count, graft_tensor *labels);

#endif

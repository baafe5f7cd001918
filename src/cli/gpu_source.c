/* gpu_source.c: a batch source that decodes an image data set's JPEGs on the model's GPU (the
 * gpu_decode worker, a batch ahead) into device memory, for `graft finetune --decode gpu`: labels
 * from the data set's source, the images nvJPEG leaves (PNG, CMYK, rotated, damaged) decoded by
 * the data set's own source one at a time (which also lists the skipped). */
#include "gpu_source.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY_STATUS(x)                                                                              \
    do {                                                                                           \
        graft_status s_ = (x);                                                                     \
        if (s_ != GRAFT_OK) return s_;                                                             \
    } while (0)

struct gpu_source {
    graft_batch_source base; /* the data set's own source: labels, CPU fallbacks */
    graft_dataset *ds;
    graft_model *model;
    gpu_decode *worker; /* shared with the run's other sources */
    graft_image_options o;
    int max_batch;
    size_t slot;    /* bytes of one image */
    void *dev_kept; /* (max_batch) slots: the kept ones packed when some were left out */
    void *labels;   /* packed labels, labels_cap bytes */
    size_t labels_cap;
    char identity[700];
    int64_t gpu_images, beside_images, cpu_images; /* nvJPEG, CPU threads beside it, CPU path */
};

/* One sample through the data set's own (CPU) source into device slot `at`; *kept 0 when the
 * data set skips it (it lists why). */
static graft_status cpu_one(gpu_source *g, int64_t sample, void *slot, unsigned char *kept) {
    graft_named_tensor in[4];
    graft_tensor y;
    TRY_STATUS(g->base.read(g->base.user, sample, 1, in, &y, kept));
    if (!*kept) return GRAFT_OK;
    g->cpu_images++;
    return graft_model_copy(g->model, slot, in[0].tensor.data, g->slot, GRAFT_COPY_HOST_TO_DEVICE);
}

/* The labels of [start, start + count) with room for them packed. */
static graft_status labels_of(gpu_source *g, int64_t start, int64_t count, graft_tensor *all,
                              size_t *ls) {
    TRY_STATUS(g->base.read_labels(g->base.user, start, count, all));
    *ls = graft_dtype_size(all->dtype) * (size_t)(all->ndim > 1 ? all->dims[1] : 1);
    if (*ls * (size_t)count > g->labels_cap) {
        void *nl = realloc(g->labels, *ls * (size_t)count);
        if (!nl) return GRAFT_E_OUT_OF_MEMORY;
        g->labels = nl, g->labels_cap = *ls * (size_t)count;
    }
    return GRAFT_OK;
}

/* The images nvJPEG left decoded on the CPU into their slots of dev, the kept ones packed into
 * dev_kept from the first gap on; *out the buffer that holds them, *got how many. */
static graft_status complete_batch(gpu_source *g, int64_t start, int64_t count, void *dev,
                                   const unsigned char *decoded, const graft_tensor *all_labels,
                                   size_t ls, unsigned char *kept, void **out, int64_t *got) {
    *got = 0;
    for (int64_t i = 0; i < count; i++) {
        char *slot = (char *)dev + (size_t)i * g->slot;
        kept[i] = 1;
        if (decoded[i] == 2)
            g->beside_images++;
        else if (decoded[i])
            g->gpu_images++;
        else
            TRY_STATUS(cpu_one(g, start + i, slot, &kept[i]));
        if (!kept[i]) continue;
        if (*got != i)
            TRY_STATUS(graft_model_copy(g->model, (char *)g->dev_kept + (size_t)*got * g->slot,
                                        slot, g->slot, GRAFT_COPY_DEVICE_TO_DEVICE));
        memcpy((char *)g->labels + (size_t)*got * ls, (char *)all_labels->data + (size_t)i * ls,
               ls);
        (*got)++;
    }
    *out = dev;
    if (*got == count) return GRAFT_OK;
    int64_t first_gap = 0;
    while (first_gap < count && kept[first_gap]) first_gap++;
    if (first_gap > 0)
        TRY_STATUS(graft_model_copy(g->model, g->dev_kept, dev, (size_t)first_gap * g->slot,
                                    GRAFT_COPY_DEVICE_TO_DEVICE));
    *out = g->dev_kept;
    return GRAFT_OK;
}

static graft_status gpu_read(void *user, int64_t start, int64_t count, graft_named_tensor *inputs,
                             graft_tensor *labels, unsigned char *kept) {
    gpu_source *g = user;
    if (count > g->max_batch) return GRAFT_E_INVALID_ARGUMENT;
    /* The trainer reads in order, batch after batch: the next ones decode while this runs. */
    void *dev = NULL;
    const unsigned char *decoded = NULL;
    TRY_STATUS(gpu_decode_get(g->worker, g->ds, g->base.n_samples, start, count, &dev, &decoded));
    if (!g->dev_kept)
        TRY_STATUS(
            graft_model_device_alloc(g->model, g->slot * (size_t)g->max_batch, &g->dev_kept));
    graft_tensor all_labels;
    size_t ls;
    TRY_STATUS(labels_of(g, start, count, &all_labels, &ls));
    int64_t got = 0;
    TRY_STATUS(complete_batch(g, start, count, dev, decoded, &all_labels, ls, kept, &dev, &got));
    graft_named_tensor *in = &inputs[0];
    in->name = g->o.input_name;
    in->tensor.dtype = g->o.dtype;
    in->tensor.ndim = 4;
    int64_t c = 3, s = g->o.crop;
    int64_t nchw[4] = {got, c, s, s}, nhwc[4] = {got, s, s, c};
    memcpy(in->tensor.dims, g->o.nhwc ? nhwc : nchw, sizeof nchw);
    in->tensor.data = dev;
    *labels = all_labels;
    labels->dims[0] = got;
    labels->data = g->labels;
    return GRAFT_OK;
}

static graft_status gpu_begin(void *user, int64_t start, int64_t count) {
    gpu_source *g = user;
    if (count > g->max_batch) return GRAFT_E_INVALID_ARGUMENT;
    return gpu_decode_begin(g->worker, g->ds, g->base.n_samples, start, count);
}

static graft_status gpu_read_labels(void *user, int64_t start, int64_t count,
                                    graft_tensor *labels) {
    gpu_source *g = user;
    return g->base.read_labels(g->base.user, start, count, labels);
}

void gpu_source_free(gpu_source *g) {
    if (!g) return;
    graft_model_device_free(g->model, g->dev_kept);
    free(g->labels);
    free(g);
}

graft_status gpu_source_create(graft_dataset *ds, const graft_batch_source *base,
                               gpu_decode *worker, graft_model *model, const graft_image_options *o,
                               int max_batch, bool cpu_beside, gpu_source **out,
                               graft_batch_source *src) {
    *out = NULL;
    if (!base->read_labels || base->n_inputs != 1 || max_batch < 1 || max_batch > 4096 ||
        o->crop < 1)
        return GRAFT_E_UNSUPPORTED;
    gpu_source *g = calloc(1, sizeof *g);
    if (!g) return GRAFT_E_OUT_OF_MEMORY;
    g->base = *base, g->ds = ds, g->worker = worker, g->model = model, g->o = *o;
    g->max_batch = max_batch;
    g->slot = (size_t)3 * (size_t)o->crop * (size_t)o->crop * graft_dtype_size(o->dtype);
    /* The features differ from the CPU decoder's by nvJPEG's rounding: a cache of their own. */
    snprintf(g->identity, sizeof g->identity, "%s;decode=nvjpeg%s",
             base->identity ? base->identity : "", cpu_beside ? "+cpu" : "");
    *src = (graft_batch_source){base->n_samples, 1,        gpu_read, g, g->identity,
                                gpu_read_labels, gpu_begin};
    *out = g;
    return GRAFT_OK;
}

void gpu_source_counts(const gpu_source *g, int64_t *on_gpu, int64_t *beside, int64_t *on_cpu) {
    *on_gpu = g ? g->gpu_images : 0;
    *beside = g ? g->beside_images : 0;
    *on_cpu = g ? g->cpu_images : 0;
}

/* gpu_source.c: a batch source that decodes an image data set's JPEGs on the model's GPU
 * (graft_jpeg_decode_batch) into device memory, for `graft finetune --decode gpu`: labels from
 * the data set's source, files read on the host, the images nvJPEG leaves (PNG, CMYK, rotated,
 * damaged) decoded by the data set's own source one at a time (which also lists the skipped). */
#include "gpu_source.h"

#include "../core/files.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JPEG_FILE_MAX_BYTES ((size_t)1 << 30) /* a larger file is left to the CPU path */
#define TRY_STATUS(x)                                                                              \
    do {                                                                                           \
        graft_status s_ = (x);                                                                     \
        if (s_ != GRAFT_OK) return s_;                                                             \
    } while (0)

struct gpu_source {
    graft_batch_source base; /* the data set's own source: labels, CPU fallbacks */
    graft_dataset *ds;
    graft_model *model;
    graft_jpeg_decoder *dec;
    graft_image_options o;
    int max_batch;
    size_t slot;              /* bytes of one image */
    void *dev_all, *dev_kept; /* (max_batch) slots: decoded, then the kept ones packed */
    unsigned char **bytes;    /* (max_batch) file contents */
    size_t *lengths;          /* (max_batch) */
    unsigned char *decoded;   /* (max_batch) */
    void *labels;             /* packed labels, labels_cap bytes */
    size_t labels_cap;
    char identity[700];
    int64_t gpu_images, cpu_images; /* decoded on each */
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

static graft_status gpu_read(void *user, int64_t start, int64_t count, graft_named_tensor *inputs,
                             graft_tensor *labels, unsigned char *kept) {
    gpu_source *g = user;
    if (count > g->max_batch) return GRAFT_E_INVALID_ARGUMENT;
    size_t bytes = g->slot * (size_t)g->max_batch;
    if (!g->dec) TRY_STATUS(graft_jpeg_decoder_create(g->model, &g->o, g->max_batch, &g->dec));
    if (!g->dev_all) TRY_STATUS(graft_model_device_alloc(g->model, bytes, &g->dev_all));
    if (!g->dev_kept) TRY_STATUS(graft_model_device_alloc(g->model, bytes, &g->dev_kept));
    const unsigned char *data[4096];
    for (int64_t i = 0; i < count; i++) {
        const char *path = graft_dataset_sample_path(g->ds, start + i);
        const char *why;
        free(g->bytes[i]);
        g->bytes[i] = NULL, g->lengths[i] = 0; /* unreadable: the CPU path reports it */
        if (path)
            (void)file_read_all(path, JPEG_FILE_MAX_BYTES, (char **)&g->bytes[i], &g->lengths[i],
                                &why, NULL);
        data[i] = g->bytes[i];
    }
    TRY_STATUS(
        graft_jpeg_decode_batch(g->dec, data, g->lengths, (int)count, g->dev_all, g->decoded));
    graft_tensor all_labels;
    TRY_STATUS(g->base.read_labels(g->base.user, start, count, &all_labels));
    size_t ls =
        graft_dtype_size(all_labels.dtype) * (size_t)(all_labels.ndim > 1 ? all_labels.dims[1] : 1);
    if (ls * (size_t)count > g->labels_cap) {
        void *nl = realloc(g->labels, ls * (size_t)count);
        if (!nl) return GRAFT_E_OUT_OF_MEMORY;
        g->labels = nl, g->labels_cap = ls * (size_t)count;
    }
    int64_t got = 0;
    for (int64_t i = 0; i < count; i++) {
        char *slot = (char *)g->dev_all + (size_t)i * g->slot;
        kept[i] = 1;
        if (g->decoded[i])
            g->gpu_images++;
        else
            TRY_STATUS(cpu_one(g, start + i, slot, &kept[i]));
        if (!kept[i]) continue;
        if (got != i)
            TRY_STATUS(graft_model_copy(g->model, (char *)g->dev_kept + (size_t)got * g->slot, slot,
                                        g->slot, GRAFT_COPY_DEVICE_TO_DEVICE));
        memcpy((char *)g->labels + (size_t)got * ls, (char *)all_labels.data + (size_t)i * ls, ls);
        got++;
    }
    /* When one was left out, the kept ones were packed from their first gap on. */
    void *dev = g->dev_all;
    if (got < count) {
        int64_t first_gap = 0;
        while (first_gap < count && kept[first_gap]) first_gap++;
        if (first_gap > 0)
            TRY_STATUS(graft_model_copy(g->model, g->dev_kept, g->dev_all,
                                        (size_t)first_gap * g->slot, GRAFT_COPY_DEVICE_TO_DEVICE));
        dev = g->dev_kept;
    }
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

static graft_status gpu_read_labels(void *user, int64_t start, int64_t count,
                                    graft_tensor *labels) {
    gpu_source *g = user;
    return g->base.read_labels(g->base.user, start, count, labels);
}

void gpu_source_free(gpu_source *g) {
    if (!g) return;
    graft_jpeg_decoder_free(g->dec);
    graft_model_device_free(g->model, g->dev_all);
    graft_model_device_free(g->model, g->dev_kept);
    for (int i = 0; g->bytes && i < g->max_batch; i++) free(g->bytes[i]);
    free(g->bytes), free(g->lengths), free(g->decoded), free(g->labels);
    free(g);
}

graft_status gpu_source_create(graft_dataset *ds, const graft_batch_source *base,
                               graft_model *model, const graft_image_options *o, int max_batch,
                               gpu_source **out, graft_batch_source *src) {
    *out = NULL;
    if (!base->read_labels || base->n_inputs != 1 || max_batch < 1 || max_batch > 4096 ||
        o->crop < 1)
        return GRAFT_E_UNSUPPORTED;
    gpu_source *g = calloc(1, sizeof *g);
    if (!g) return GRAFT_E_OUT_OF_MEMORY;
    g->base = *base, g->ds = ds, g->model = model, g->o = *o, g->max_batch = max_batch;
    g->slot = (size_t)3 * (size_t)o->crop * (size_t)o->crop * graft_dtype_size(o->dtype);
    size_t nb = (size_t)max_batch;
    g->bytes = calloc(nb, sizeof *g->bytes);
    g->lengths = calloc(nb, sizeof *g->lengths);
    g->decoded = calloc(nb, 1);
    graft_status st = g->bytes && g->lengths && g->decoded ? GRAFT_OK : GRAFT_E_OUT_OF_MEMORY;
    /* The decoder and its buffers are made when first needed: a run whose features are all
     * cached never starts nvJPEG (1.5 s on an H200) nor takes its memory. */
    if (st != GRAFT_OK) {
        gpu_source_free(g);
        return st;
    }
    /* The features differ from the CPU decoder's by nvJPEG's rounding: a cache of their own. */
    snprintf(g->identity, sizeof g->identity, "%s;decode=nvjpeg",
             base->identity ? base->identity : "");
    *src = (graft_batch_source){base->n_samples, 1, gpu_read, g, g->identity, gpu_read_labels};
    *out = g;
    return GRAFT_OK;
}

const char *gpu_source_backend(const gpu_source *g) {
    return g && g->dec ? graft_jpeg_decoder_backend(g->dec) : "not started";
}

void gpu_source_counts(const gpu_source *g, int64_t *on_gpu, int64_t *on_cpu) {
    *on_gpu = g ? g->gpu_images : 0;
    *on_cpu = g ? g->cpu_images : 0;
}

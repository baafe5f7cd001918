/* pipeline.c: the batch pipeline behind graft_dataset_source: a producer thread fills a ring of
 * reusable batch buffers ahead of the reader, decoding each batch's samples on `threads` OpenMP
 * threads; batches come out in order, each sample's augmentation seeded by its index alone. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/rng.h"
#include "dataset.h"
#include "text_pad.h"

typedef struct batch_slot {
    int64_t start, count, got;
    int64_t length; /* per-sample length of 1-D inputs after pad_to_longest, else 0 */
    int state;      /* 0 free, 1 being filled, 2 ready, 3 held by the reader */
    void *inputs[DATASET_MAX_INPUTS];
    void *labels;
    unsigned char *kept;
    graft_status status;
    char message[GRAFT_ERR_MSG_MAX];
} batch_slot;

struct pipeline {
    graft_dataset *ds;
    int threads, depth;
    uint64_t seed;
    int64_t batch;                  /* samples per batch: fixed by the first read */
    batch_slot *slots;              /* depth of them, reused in a ring */
    int64_t fill_start;             /* the next batch the producer fills */
    int fill_slot, read_slot, held; /* held: the slot the last read returned, or -1 */
    bool running, stop;
    pthread_t producer;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    void *(*alloc)(void *user, size_t bytes);
    void (*release)(void *user, void *ptr);
    void *alloc_user;
};

static void *buffer_alloc(pipeline *p, size_t bytes) {
    return p->alloc ? p->alloc(p->alloc_user, bytes) : malloc(bytes);
}

static void buffer_free(pipeline *p, void *ptr) {
    if (!ptr) return;
    if (p->release)
        p->release(p->alloc_user, ptr);
    else
        free(ptr);
}

static uint64_t sample_seed(uint64_t seed, int64_t item) {
    uint64_t s = seed ^ ((uint64_t)item * 0x9e3779b97f4a7c15ull);
    return rng_next(&s);
}

/* Cut every 1-D input of the batch to the longest sample's length rounded up to a multiple of 8
 * (text_pad.h; the padding after it is masked out): rows move down in place. */
static void shorten(const dataset_shared *sh, batch_slot *b) {
    int64_t full = sh->input_dims[sh->mask_input][0], longest = 1;
    const int64_t *mask = b->inputs[sh->mask_input];
    for (int64_t r = 0; r < b->got; r++) {
        int64_t n = 0;
        for (int64_t j = 0; j < full; j++) n += mask[r * full + j] != 0;
        if (n > longest) longest = n;
    }
    longest = text_padded_width(longest, full);
    for (int k = 0; k < sh->n_inputs; k++) {
        size_t es = graft_dtype_size(sh->input_dtype[k]);
        char *base = b->inputs[k];
        for (int64_t r = 1; r < b->got; r++)
            memmove(base + (size_t)(r * longest) * es, base + (size_t)(r * full) * es,
                    (size_t)longest * es);
    }
    b->length = longest;
}

/* Decode samples [start, start+count) into the slot, then pack the delivered rows. */
static void fill(pipeline *p, batch_slot *b) {
    graft_dataset *ds = p->ds;
    dataset_shared *sh = ds->sh;
    int n_in = sh->n_inputs;
    memset(b->kept, 0, (size_t)b->count);
#pragma omp parallel for num_threads(p->threads) schedule(dynamic, 1)
    for (int64_t i = 0; i < b->count; i++) {
        int64_t s = b->start + i, item = ds->items[s];
        void *dst[DATASET_MAX_INPUTS];
        for (int k = 0; k < n_in; k++)
            dst[k] = (char *)b->inputs[k] + (size_t)i * dataset_row_bytes(sh, k);
        graft_err e = {0};
        if (sh->kind->load(sh->impl, item, dst, sample_seed(p->seed, s), &e) == GRAFT_OK)
            b->kept[i] = 1;
        else
            dataset_skip(sh, sh->kind->item_path(sh->impl, item), e.msg);
    }
    size_t ls = dataset_label_size(sh);
    int64_t got = 0;
    for (int64_t i = 0; i < b->count; i++) {
        if (!b->kept[i]) continue;
        for (int k = 0; got != i && k < n_in; k++) {
            size_t rb = dataset_row_bytes(sh, k);
            memmove((char *)b->inputs[k] + (size_t)got * rb, (char *)b->inputs[k] + (size_t)i * rb,
                    rb);
        }
        memcpy((char *)b->labels + (size_t)got * ls,
               (char *)ds->labels + (size_t)(b->start + i) * ls, ls);
        got++;
    }
    b->got = got;
    b->length = 0;
    if (sh->pad_to_longest) shorten(sh, b);
    b->status = GRAFT_OK;
}

static void *produce(void *arg) {
    pipeline *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        batch_slot *b = &p->slots[p->fill_slot];
        if (b->state != 0 || p->fill_start >= p->ds->n) {
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        b->start = p->fill_start;
        b->count = p->ds->n - b->start < p->batch ? p->ds->n - b->start : p->batch;
        b->state = 1;
        p->fill_start += b->count;
        pthread_mutex_unlock(&p->lock);
        fill(p, b);
        pthread_mutex_lock(&p->lock);
        b->state = 2;
        p->fill_slot = (p->fill_slot + 1) % p->depth;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void stop_producer(pipeline *p) {
    if (!p->running) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->producer, NULL);
    p->running = false;
    p->stop = false;
}

static void free_slots(pipeline *p) {
    for (int s = 0; p->slots && s < p->depth; s++) {
        for (int k = 0; k < DATASET_MAX_INPUTS; k++) buffer_free(p, p->slots[s].inputs[k]);
        buffer_free(p, p->slots[s].labels);
        free(p->slots[s].kept);
    }
    free(p->slots);
    p->slots = NULL;
}

/* (Re)start the producer at `start` with batches of `count`. */
static graft_status restart(pipeline *p, int64_t start, int64_t count, graft_err *e) {
    stop_producer(p);
    if (count != p->batch) {
        free_slots(p);
        p->batch = count;
        p->slots = calloc((size_t)p->depth, sizeof *p->slots);
        if (!p->slots) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for batches");
        dataset_shared *sh = p->ds->sh;
        for (int s = 0; s < p->depth; s++) {
            batch_slot *b = &p->slots[s];
            bool ok = true;
            for (int k = 0; k < sh->n_inputs; k++)
                ok &= (b->inputs[k] = buffer_alloc(p, dataset_row_bytes(sh, k) * (size_t)count)) !=
                      NULL;
            b->labels = buffer_alloc(p, dataset_label_size(sh) * (size_t)count);
            b->kept = malloc((size_t)count);
            if (!ok || !b->labels || !b->kept)
                return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for batch buffers");
        }
    }
    for (int s = 0; s < p->depth; s++) p->slots[s].state = 0;
    p->fill_start = start;
    p->fill_slot = p->read_slot = 0;
    p->held = -1;
    if (pthread_create(&p->producer, NULL, produce, p) != 0)
        return err_set(e, GRAFT_E_INTERNAL, "could not start the data pipeline's thread");
    p->running = true;
    return GRAFT_OK;
}

graft_status pipeline_create(pipeline **out, graft_dataset *ds, int threads, int prefetch,
                             uint64_t seed, graft_err *e) {
    pipeline *p = calloc(1, sizeof *p);
    if (!p) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    p->ds = ds;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->threads = threads > 0 ? threads : (cpus > 0 ? (int)cpus : 1);
    p->depth = (prefetch > 0 ? prefetch : 2) + 1; /* the batch being read plus those ahead */
    p->seed = seed;
    p->alloc = ds->alloc;
    p->release = ds->release;
    p->alloc_user = ds->alloc_user;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    *out = p;
    return GRAFT_OK;
}

void pipeline_free(pipeline *p) {
    if (!p) return;
    stop_producer(p);
    free_slots(p);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->changed);
    free(p);
}

/* [start, start + count) within the data set's samples. */
static graft_status check_range(const graft_dataset *ds, int64_t start, int64_t count,
                                graft_err *e) {
    if (start < 0 || count < 1 || start + count > ds->n)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "samples %lld..%lld are outside the %lld",
                       (long long)start, (long long)(start + count), (long long)ds->n);
    return GRAFT_OK;
}

/* n rows of labels at data, shaped as the loss takes them: (n) int64 class indices, else
 * (n, width). */
static graft_tensor labels_tensor(const dataset_shared *sh, int64_t n, void *data) {
    return (graft_tensor){sh->label_dtype,
                          sh->label_width == 1 && sh->label_dtype == GRAFT_DTYPE_I64 ? 1 : 2,
                          {n, sh->label_width},
                          data};
}

graft_status pipeline_read(void *user, int64_t start, int64_t count, graft_named_tensor *inputs,
                           graft_tensor *labels, unsigned char *kept) {
    pipeline *p = user;
    graft_dataset *ds = p->ds;
    graft_err *e = &ds->ctx->err;
    TRY(check_range(ds, start, count, e));
    /* Give the last batch back, then take the next one of the stream if it is the one asked
     * for; any other read (first, out of order, another size) restarts the stream there. */
    pthread_mutex_lock(&p->lock);
    if (p->running && p->held >= 0) p->slots[p->held].state = 0;
    p->held = -1;
    pthread_cond_broadcast(&p->changed);
    batch_slot *b = NULL;
    if (p->running && (count == p->batch || start + count == ds->n)) {
        b = &p->slots[p->read_slot];
        while (b->state != 2 && (b->state == 1 || p->fill_start < ds->n))
            pthread_cond_wait(&p->changed, &p->lock);
        if (b->state != 2 || b->start != start || b->count != count) b = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    if (!b) {
        TRY(restart(p, start, count, e));
        pthread_mutex_lock(&p->lock);
        b = &p->slots[p->read_slot];
        while (b->state != 2) pthread_cond_wait(&p->changed, &p->lock);
        pthread_mutex_unlock(&p->lock);
    }
    dataset_shared *sh = ds->sh;
    for (int k = 0, out = 0; k < sh->n_inputs; k++) {
        if (sh->input_left_out[k]) continue;
        graft_named_tensor *in = &inputs[out++];
        in->name = sh->input_names[k];
        in->tensor.dtype = sh->input_dtype[k];
        in->tensor.ndim = sh->input_ndim[k] + 1;
        in->tensor.dims[0] = b->got;
        for (int d = 0; d < sh->input_ndim[k]; d++) in->tensor.dims[d + 1] = sh->input_dims[k][d];
        if (b->length) in->tensor.dims[1] = b->length;
        in->tensor.data = b->inputs[k];
    }
    *labels = labels_tensor(sh, b->got, b->labels);
    memcpy(kept, b->kept, (size_t)count);
    /* This batch stays valid until the next read, which frees its slot for the producer. */
    pthread_mutex_lock(&p->lock);
    b->state = 3;
    p->held = p->read_slot;
    p->read_slot = (p->read_slot + 1) % p->depth;
    pthread_mutex_unlock(&p->lock);
    return GRAFT_OK;
}

graft_status pipeline_read_labels(void *user, int64_t start, int64_t count, graft_tensor *labels) {
    pipeline *p = user;
    graft_dataset *ds = p->ds;
    TRY(check_range(ds, start, count, &ds->ctx->err));
    /* The data set keeps every sample's label in order: a view, nothing decoded or copied. */
    size_t ls = dataset_label_size(ds->sh);
    *labels = labels_tensor(ds->sh, count, (char *)ds->labels + (size_t)start * ls);
    return GRAFT_OK;
}

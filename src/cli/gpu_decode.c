/* gpu_decode.c: the decoding worker of `finetune --decode gpu`: a reader thread reads batches'
 * files and a decoder thread decodes them (graft_jpeg_decode_batch, on the decoder's own stream)
 * into device buffers, batches ahead of the caller, whose model runs on the last one meanwhile.
 * The caller asks for batches in order; the ones after it are queued as it asks. */
#include "gpu_decode.h"

#include "../core/files.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../core/clock.h"

#define JPEG_FILE_MAX_BYTES ((size_t)1 << 30) /* a larger file is left to the CPU path */
#define MAX_DECODERS 4                        /* decoding threads, each with its own nvJPEG */
#define MAX_JOBS (MAX_DECODERS + 2)           /* the caller's, the reader's, one a decoder */

/* A job's way: queued, its files read, decoded; a job running a stage finishes it even when
 * it is no longer wanted (dropped: then freed). */
typedef enum { JOB_FREE, JOB_QUEUED, JOB_READING, JOB_READ, JOB_DECODING, JOB_DONE } job_state;

/* One batch: what to decode, where to, and how it went. */
typedef struct decode_job {
    job_state state;
    bool dropped;
    const graft_dataset *ds;
    int64_t start, count;
    uint64_t order;         /* queue order: each thread takes the oldest job for its stage */
    void *dev;              /* (max_batch) slots, device */
    unsigned char **bytes;  /* (max_batch) file contents */
    size_t *lengths;        /* (max_batch) */
    unsigned char *decoded; /* (max_batch) */
    graft_status status;
    char error[512];
} decode_job;

struct gpu_decode {
    graft_ctx *ctx;
    graft_model *model;
    graft_image_options o;
    int max_batch, cpu_threads;
    size_t slot_bytes;
    int n_decoders, n_jobs;
    graft_jpeg_decoder *dec[MAX_DECODERS];
    struct decoder_arg {
        struct gpu_decode *w;
        int k;
    } dec_arg[MAX_DECODERS];
    graft_status dec_status; /* the first decoder start that failed; GRAFT_OK: none did */
    char dec_error[600];
    pthread_t reader, decoder[MAX_DECODERS];
    int decoders_started; /* threads running decoder_main */
    int extra_failed;     /* decoders after the first that could not open (and ended) */
    bool running, stop;
    graft_status start_failed; /* a failed start, given again to later calls */
    char start_error[512];
    pthread_mutex_t mu;
    pthread_cond_t changed;
    decode_job job[MAX_JOBS];
    int in_use; /* the job whose buffer the caller holds, -1: none */
    uint64_t queued;
    gpu_decode_stats stats;
};

/* The oldest job in `state`, NULL when none. */
static decode_job *oldest(gpu_decode *w, job_state state) {
    decode_job *best = NULL;
    for (int k = 0; k < w->n_jobs; k++)
        if (w->job[k].state == state && (!best || w->job[k].order < best->order)) best = &w->job[k];
    return best;
}

/* Waits (with the lock) for the oldest job in `from` and moves it to `to`; NULL at stop. */
static decode_job *take_job(gpu_decode *w, job_state from, job_state to) {
    decode_job *j = NULL;
    while (!w->stop && !(j = oldest(w, from))) pthread_cond_wait(&w->changed, &w->mu);
    if (w->stop) return NULL;
    j->state = to;
    return j;
}

/* The end of a stage: the next state, or free when the job was dropped meanwhile. */
static void stage_done(gpu_decode *w, decode_job *j, job_state next) {
    j->state = j->dropped ? JOB_FREE : next;
    j->dropped = false;
    pthread_cond_broadcast(&w->changed);
}

/* The job's files into its byte buffers (an unreadable one stays empty: the CPU path reports
 * it). Without the lock. */
static void read_files(decode_job *j) {
    for (int64_t i = 0; i < j->count; i++) {
        const char *path = graft_dataset_sample_path(j->ds, j->start + i);
        const char *why;
        free(j->bytes[i]);
        j->bytes[i] = NULL, j->lengths[i] = 0;
        if (path)
            (void)file_read_all(path, JPEG_FILE_MAX_BYTES, (char **)&j->bytes[i], &j->lengths[i],
                                &why, NULL);
    }
}

static void *reader_main(void *arg) {
    gpu_decode *w = arg;
    pthread_mutex_lock(&w->mu);
    for (decode_job *j; (j = take_job(w, JOB_QUEUED, JOB_READING));) {
        pthread_mutex_unlock(&w->mu);
        double t0 = clock_seconds();
        read_files(j);
        pthread_mutex_lock(&w->mu);
        w->stats.read_s += clock_seconds() - t0;
        stage_done(w, j, JOB_READ);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* One batch through nvJPEG. Without the lock. */
static void decode_files(graft_jpeg_decoder *dec, decode_job *j) {
    j->status = graft_jpeg_decode_batch(dec, (const unsigned char *const *)j->bytes, j->lengths,
                                        (int)j->count, j->dev, j->decoded);
    j->error[0] = 0;
    if (j->status != GRAFT_OK)
        snprintf(j->error, sizeof j->error, "%s", graft_jpeg_decoder_error(dec));
}

/* Starts its nvJPEG decoder (most of a second) off the caller's thread, then decodes what is
 * read; the decoders take the read batches in turn. The first decoder opens alone: the others
 * wait for it (two opening together each took ~1.0 s on an H100, one alone ~0.63 s), so a
 * second decoder never delays the first batch. */
static void *decoder_main(void *arg) {
    gpu_decode *w = ((struct decoder_arg *)arg)->w;
    int k = ((struct decoder_arg *)arg)->k;
    if (k > 0) {
        pthread_mutex_lock(&w->mu);
        while (!w->stop && !w->dec[0] && w->dec_status == GRAFT_OK)
            pthread_cond_wait(&w->changed, &w->mu);
        bool go = !w->stop && w->dec_status == GRAFT_OK;
        pthread_mutex_unlock(&w->mu);
        if (!go) return NULL;
    }
    double t0 = clock_seconds();
    char error[512];
    graft_jpeg_decoder *dec = NULL;
    graft_status st =
        graft_jpeg_decoder_open(w->model, &w->o, w->max_batch, error, sizeof error, &dec);
    if (st == GRAFT_OK && w->cpu_threads > 0 &&
        (st = graft_jpeg_decoder_set_cpu_threads(dec, w->cpu_threads)) != GRAFT_OK)
        snprintf(error, sizeof error, "%s", graft_jpeg_decoder_error(dec));
    if (st != GRAFT_OK && k > 0) { /* the first decoder goes on alone (GPU memory short, ...) */
        graft_jpeg_decoder_free(dec);
        pthread_mutex_lock(&w->mu);
        w->extra_failed++;
        pthread_mutex_unlock(&w->mu);
        return NULL;
    }
    pthread_mutex_lock(&w->mu);
    w->dec[k] = dec;
    if (st != GRAFT_OK && w->dec_status == GRAFT_OK) {
        w->dec_status = st;
        snprintf(w->dec_error, sizeof w->dec_error, "--decode gpu: %s", error);
    }
    if (k == 0) w->stats.start_s = clock_seconds() - t0; /* the first batch's wait */
    pthread_cond_broadcast(&w->changed);
    for (decode_job *j; w->dec_status == GRAFT_OK && (j = take_job(w, JOB_READ, JOB_DECODING));) {
        pthread_mutex_unlock(&w->mu);
        double t1 = clock_seconds();
        decode_files(dec, j);
        pthread_mutex_lock(&w->mu);
        w->stats.decode_s += clock_seconds() - t1;
        w->stats.batches++;
        for (int64_t i = 0; j->status == GRAFT_OK && i < j->count; i++)
            w->stats.images += j->decoded[i] != 0;
        stage_done(w, j, JOB_DONE);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static graft_status fail(gpu_decode *w, graft_status st, const char *msg) {
    return graft_set_error(w->ctx, st, msg);
}

/* Stops and joins the decoding threads started, and the reader when it runs. */
static void stop_threads(gpu_decode *w, bool reader) {
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->mu);
    if (reader) pthread_join(w->reader, NULL);
    for (int k = 0; k < w->decoders_started; k++) pthread_join(w->decoder[k], NULL);
    w->decoders_started = 0;
}

/* The jobs' buffers (on the caller's thread: the model's context) and the threads. */
static graft_status start_threads(gpu_decode *w) {
    size_t n = (size_t)w->max_batch;
    for (int k = 0; k < w->n_jobs; k++) {
        decode_job *j = &w->job[k];
        j->bytes = calloc(n, sizeof *j->bytes);
        j->lengths = calloc(n, sizeof *j->lengths);
        j->decoded = calloc(n, 1);
        if (!j->bytes || !j->lengths || !j->decoded)
            return fail(w, GRAFT_E_OUT_OF_MEMORY, "--decode gpu: out of memory");
        graft_status st = graft_model_device_alloc(w->model, w->slot_bytes * n, &j->dev);
        if (st != GRAFT_OK) return st;
    }
    for (int k = 0; k < w->n_decoders; k++) {
        w->dec_arg[k].w = w, w->dec_arg[k].k = k;
        if (pthread_create(&w->decoder[k], NULL, decoder_main, &w->dec_arg[k]) != 0) {
            stop_threads(w, false);
            return fail(w, GRAFT_E_INTERNAL, "--decode gpu: could not start a decoding thread");
        }
        w->decoders_started++;
    }
    if (pthread_create(&w->reader, NULL, reader_main, w) != 0) {
        stop_threads(w, false);
        return fail(w, GRAFT_E_INTERNAL, "--decode gpu: could not start the reading thread");
    }
    w->running = true;
    return GRAFT_OK;
}

/* Started once; a failed start is given again to every later call. */
static graft_status ensure_started(gpu_decode *w) {
    if (w->start_failed) return fail(w, w->start_failed, w->start_error);
    if (w->running) return GRAFT_OK;
    graft_status st = start_threads(w);
    if (st != GRAFT_OK) {
        w->start_failed = st;
        snprintf(w->start_error, sizeof w->start_error, "%s", graft_last_error(w->ctx));
    }
    return st;
}

/* A free job queued for [start, start + count) of ds; NULL when none is free. */
static decode_job *enqueue(gpu_decode *w, const graft_dataset *ds, int64_t start, int64_t count) {
    for (int k = 0; k < w->n_jobs; k++) {
        decode_job *j = &w->job[k];
        if (j->state != JOB_FREE || k == w->in_use) continue;
        j->ds = ds, j->start = start, j->count = count, j->order = ++w->queued;
        j->state = JOB_QUEUED, j->dropped = false;
        pthread_cond_broadcast(&w->changed);
        return j;
    }
    return NULL;
}

static decode_job *find(gpu_decode *w, const graft_dataset *ds, int64_t start, int64_t count) {
    for (int k = 0; k < w->n_jobs; k++) {
        decode_job *j = &w->job[k];
        if (j->state != JOB_FREE && !j->dropped && j->ds == ds && j->start == start &&
            j->count == count)
            return j;
    }
    return NULL;
}

/* The batches after [start, start + count) of ds's n samples, as many as there are free jobs,
 * unless already queued. */
static void queue_ahead(gpu_decode *w, const graft_dataset *ds, int64_t n, int64_t start,
                        int64_t count) {
    for (int64_t at = start + count; at < n; at += count) {
        int64_t c = n - at < count ? n - at : count;
        if (!find(w, ds, at, c) && !enqueue(w, ds, at, c)) return;
    }
}

/* Drops every job that is not one of the batches from [start, ...) in steps of count. */
static void drop_others(gpu_decode *w, const graft_dataset *ds, int64_t start, int64_t count) {
    for (int k = 0; k < w->n_jobs; k++) {
        decode_job *j = &w->job[k];
        bool ahead = j->ds == ds && j->start >= start && (j->start - start) % count == 0;
        if (j->state == JOB_FREE || ahead) continue;
        if (j->state == JOB_QUEUED || j->state == JOB_READ || j->state == JOB_DONE)
            j->state = JOB_FREE;
        else
            j->dropped = true; /* reading or decoding: freed when its stage ends */
    }
}

graft_status gpu_decode_begin(gpu_decode *w, const graft_dataset *ds, int64_t n, int64_t start,
                              int64_t count) {
    if (count < 1 || count > w->max_batch)
        return fail(w, GRAFT_E_INVALID_ARGUMENT, "--decode gpu: a batch larger than the decoder's");
    graft_status st = ensure_started(w);
    if (st != GRAFT_OK) return st;
    pthread_mutex_lock(&w->mu);
    drop_others(w, ds, start, count);
    if (!find(w, ds, start, count)) (void)enqueue(w, ds, start, count);
    queue_ahead(w, ds, n, start, count);
    pthread_mutex_unlock(&w->mu);
    return GRAFT_OK;
}

graft_status gpu_decode_get(gpu_decode *w, const graft_dataset *ds, int64_t n, int64_t start,
                            int64_t count, void **dev, const unsigned char **decoded) {
    if (count < 1 || count > w->max_batch)
        return fail(w, GRAFT_E_INVALID_ARGUMENT, "--decode gpu: a batch larger than the decoder's");
    double t0 = clock_seconds();
    graft_status st = ensure_started(w);
    if (st != GRAFT_OK) return st;
    pthread_mutex_lock(&w->mu);
    if (w->in_use >= 0) w->job[w->in_use].state = JOB_FREE; /* the caller is done with it */
    w->in_use = -1;
    drop_others(w, ds, start, count);
    decode_job *j = find(w, ds, start, count);
    if (j) w->stats.prefetched++;
    /* At most n_decoders + 1 jobs are still busy with dropped batches, so one is free. */
    if (!j) j = enqueue(w, ds, start, count);
    if (j) {
        w->in_use = (int)(j - w->job);
        queue_ahead(w, ds, n, start, count);
    }
    while (j && j->state != JOB_DONE && w->dec_status == GRAFT_OK)
        pthread_cond_wait(&w->changed, &w->mu);
    w->stats.wait_s += clock_seconds() - t0;
    bool dec_failed = w->dec_status != GRAFT_OK;
    pthread_mutex_unlock(&w->mu);
    if (dec_failed) return fail(w, w->dec_status, w->dec_error);
    if (!j) return fail(w, GRAFT_E_INTERNAL, "--decode gpu: no decoding slot free");
    if (j->status != GRAFT_OK) return fail(w, j->status, j->error);
    *dev = j->dev;
    *decoded = j->decoded;
    return GRAFT_OK;
}

graft_status gpu_decode_create(graft_ctx *ctx, graft_model *model, const graft_image_options *o,
                               int max_batch, int cpu_threads, int decoders, gpu_decode **out) {
    *out = NULL;
    if (max_batch < 1 || max_batch > 4096 || o->crop < 1) return GRAFT_E_UNSUPPORTED;
    if (decoders < 1 || decoders > MAX_DECODERS) {
        char msg[96];
        snprintf(msg, sizeof msg, "--decode gpu: %d decoding threads is not in 1..%d", decoders,
                 MAX_DECODERS);
        return graft_set_error(ctx, GRAFT_E_INVALID_ARGUMENT, msg);
    }
    gpu_decode *w = calloc(1, sizeof *w);
    if (!w) return graft_set_error(ctx, GRAFT_E_OUT_OF_MEMORY, "--decode gpu: out of memory");
    w->ctx = ctx, w->model = model, w->o = *o, w->max_batch = max_batch, w->in_use = -1;
    w->cpu_threads = cpu_threads < 0 ? 0 : cpu_threads;
    w->n_decoders = decoders, w->n_jobs = decoders + 2;
    w->slot_bytes = (size_t)3 * (size_t)o->crop * (size_t)o->crop * graft_dtype_size(o->dtype);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->changed, NULL);
    *out = w;
    return GRAFT_OK;
}

void gpu_decode_free(gpu_decode *w) {
    if (!w) return;
    if (w->running) stop_threads(w, true);
    for (int k = 0; k < w->n_jobs; k++) {
        decode_job *j = &w->job[k];
        graft_model_device_free(w->model, j->dev);
        for (int i = 0; j->bytes && i < w->max_batch; i++) free(j->bytes[i]);
        free(j->bytes), free(j->lengths), free(j->decoded);
    }
    for (int k = 0; k < w->n_decoders; k++) graft_jpeg_decoder_free(w->dec[k]);
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

const char *gpu_decode_backend(gpu_decode *w) {
    if (!w) return "not started";
    pthread_mutex_lock(&w->mu);
    const char *b = w->dec[0] ? graft_jpeg_decoder_backend(w->dec[0]) : "not started";
    pthread_mutex_unlock(&w->mu);
    return b;
}

void gpu_decode_get_stats(gpu_decode *w, gpu_decode_stats *s) {
    memset(s, 0, sizeof *s);
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    *s = w->stats;
    s->decoders = w->n_decoders - w->extra_failed;
    pthread_mutex_unlock(&w->mu);
}

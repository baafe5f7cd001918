/* gpu_decode.h: a thread that reads an image data set's JPEG files and decodes them with nvJPEG
 * into one of two device buffers while the model runs on the other (`finetune --decode gpu`). */
#ifndef GRAFT_CLI_GPU_DECODE_H
#define GRAFT_CLI_GPU_DECODE_H

#include "graft.h"

typedef struct gpu_decode gpu_decode;

/* Where the time went, summed over the batches so far. */
typedef struct gpu_decode_stats {
    int64_t batches, images; /* decoded by the worker (images: those nvJPEG wrote) */
    double read_s;           /* the worker reading files */
    double decode_s;         /* the decoding threads in graft_jpeg_decode_batch, summed */
    int decoders;            /* decoding threads (those after the first that failed to open
                                not counted: the others decode without them) */
    double wait_s;           /* callers waiting for a batch */
    double start_s;     /* the first decoder's start on its thread (nvJPEG's handles, engines) */
    int64_t prefetched; /* batches that were queued ahead when asked for */
} gpu_decode_stats;

/* A worker for model's GPU decoding as o says (dtype, layout, sizes), batches of at most
 * max_batch, on `decoders` threads (1..4) with an nvJPEG decoder each taking the read batches in
 * turn (the second and later open after the first; one that cannot open leaves the others to it),
 * cpu_threads CPU threads decoding a share of each batch beside each of them
 * (graft_jpeg_decoder_set_cpu_threads; 0: none). Nothing starts (no thread, no nvJPEG) until
 * gpu_decode_begin or the first gpu_decode_get. ctx receives the errors (graft_last_error). */
graft_status gpu_decode_create(graft_ctx *ctx, graft_model *model, const graft_image_options *o,
                               int max_batch, int cpu_threads, int decoders, gpu_decode **out);
/* The reading of ds (n samples, read in batches of count from start on) about to begin: the
 * threads start (nvJPEG on its own, most of a second) and the first batches are queued. */
graft_status gpu_decode_begin(gpu_decode *w, const graft_dataset *ds, int64_t n, int64_t start,
                              int64_t count);
/* Samples [start, start + count) of ds (n samples) decoded into device memory: *dev holds count
 * slots of 3 * crop * crop elements of o's dtype, decoded[i] is 1 for each slot nvJPEG wrote, 2
 * for one the CPU threads beside it wrote (0: not a JPEG nvJPEG takes, or a file that could not
 * be read: the caller's CPU path decodes or reports it). Waits for the batch (queued ahead by an
 * earlier call, else now) and queues the batches after it (of count) into the free buffers. *dev
 * and *decoded stay valid until the next call. */
graft_status gpu_decode_get(gpu_decode *w, const graft_dataset *ds, int64_t n, int64_t start,
                            int64_t count, void **dev, const unsigned char **decoded);
const char *gpu_decode_backend(gpu_decode *w); /* "not started" before the decoder is made */
void gpu_decode_get_stats(gpu_decode *w, gpu_decode_stats *s);
void gpu_decode_free(gpu_decode *w); /* waits for the batches under way */

#endif

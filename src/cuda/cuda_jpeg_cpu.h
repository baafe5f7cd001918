/* cuda_jpeg_cpu.h: CPU threads (libjpeg-turbo) decoding a share of each graft_jpeg_decode_batch
 * beside nvJPEG, the share following both sides' measured rates. */
#ifndef GRAFT_CUDA_JPEG_CPU_H
#define GRAFT_CUDA_JPEG_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"

typedef struct jpeg_cpu_part {
    int threads;               /* CPU decoding threads beside the caller's; 0: none */
    double gpu_rate, cpu_rate; /* images/s of each side, smoothed over batches */
    void *staging;             /* pinned host: (max_batch) slots the CPU writes */
    size_t staging_bytes;
    int64_t batches;     /* split between both sides */
    int last_n, last_g;  /* the last split */
    int64_t images;      /* decoded by the CPU threads (not the caller), all batches */
    double busy_seconds; /* the CPU threads' decoding time, summed over threads */
} jpeg_cpu_part;

/* Sets the thread count (0..1024) and resets the rates. */
void jpeg_cpu_set_threads(jpeg_cpu_part *c, int threads);

/* How many of n images nvJPEG takes, [0, g); the CPU the rest, at least one (n when there are
 * no CPU threads). A multiple of 8 from n = 64 on unless it is n - 1 (a new batched size costs
 * nvJPEG a new initialisation), and kept for a batch of the last one's size unless the rates
 * move it by 16 or more. */
int jpeg_cpu_split(jpeg_cpu_part *c, int n);

/* The GPU's share: decodes images [0, g); run on the calling thread. */
typedef graft_status (*jpeg_gpu_share)(void *arg, int g);

/* Runs gpu(arg, g) on the calling thread while the CPU threads decode images [g, n) into
 * staging's slots (slot_bytes each, as graft_image_load makes them with o); ok[i] 1 for each
 * image decoded on the CPU, 0 for one it could not decode (left to the caller). The caller
 * joins the CPU's work when its own share is done. Updates the rates. gpu's status is returned;
 * an error here is only running out of memory for staging. */
graft_status jpeg_cpu_run(jpeg_cpu_part *c, const graft_image_options *o, size_t slot_bytes,
                          const unsigned char *const *data, const size_t *lengths, int g, int n,
                          unsigned char *ok, jpeg_gpu_share gpu, void *arg, graft_err *e);

void jpeg_cpu_free(jpeg_cpu_part *c);

#endif

/* cuda_jpeg_cpu.c: CPU threads decoding a share of each batch of graft_jpeg_decode_batch with
 * libjpeg-turbo (graft_image_load's pixels) into pinned slots while nvJPEG decodes the rest; the
 * share follows the two sides' measured images/s. */
#include "cuda_jpeg_cpu.h"

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../data/transforms.h"
#include "../core/clock.h"

#define INITIAL_GPU_RATE 8000.0 /* images/s: guesses until a batch has been measured */
#define INITIAL_CPU_RATE 200.0  /* images/s a thread (500x375 photos, resize and crop) */
#define SMOOTHING 0.3           /* weight of the last batch in the rates */

void jpeg_cpu_set_threads(jpeg_cpu_part *c, int threads) {
    c->threads = threads;
    c->gpu_rate = INITIAL_GPU_RATE;
    c->cpu_rate = INITIAL_CPU_RATE * threads;
    c->last_n = c->last_g = 0;
}

int jpeg_cpu_split(jpeg_cpu_part *c, int n) {
    if (c->threads <= 0 || n < 2) return n;
    double exact = n * c->gpu_rate / (c->gpu_rate + c->cpu_rate);
    int g = n >= 64 ? (int)(exact / 8.0 + 0.5) * 8 : (int)(exact + 0.5);
    /* the CPU keeps at least one image, so that its rate stays measured */
    g = g > n - 1 ? n - 1 : g < 0 ? 0 : g;
    /* a batch of the last one's size keeps its split unless the rates moved it by 16 or more */
    if (n == c->last_n && abs(g - c->last_g) < 16) g = c->last_g;
    c->last_n = n, c->last_g = g;
    return g;
}

static graft_status ensure_staging(jpeg_cpu_part *c, size_t bytes, graft_err *e) {
    if (bytes <= c->staging_bytes) return GRAFT_OK;
    if (c->staging) cudaFreeHost(c->staging);
    c->staging = NULL, c->staging_bytes = 0;
    if (cudaHostAlloc(&c->staging, bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        c->staging = NULL;
        return err_set(e, GRAFT_E_OUT_OF_MEMORY,
                       "JPEG decoding on the CPU beside nvJPEG: %.1f MiB of pinned host memory "
                       "could not be allocated",
                       (double)bytes / 1048576.0);
    }
    c->staging_bytes = bytes;
    return GRAFT_OK;
}

/* Image i of the batch into its staging slot; ok[i] whether it could be. */
static void decode_one(const graft_image_options *o, size_t slot_bytes, const unsigned char *p,
                       size_t length, int i, char *staging, unsigned char *ok) {
    graft_err e;
    err_clear(&e);
    char what[48];
    snprintf(what, sizeof what, "image %d of the batch", i);
    ok[i] =
        p && length &&
        image_prepare_memory(p, length, what, o, staging + (size_t)i * slot_bytes, &e) == GRAFT_OK;
}

static void smooth(double *rate, double images, double seconds) {
    if (images > 0 && seconds > 0) *rate = (1 - SMOOTHING) * *rate + SMOOTHING * images / seconds;
}

graft_status jpeg_cpu_run(jpeg_cpu_part *c, const graft_image_options *o, size_t slot_bytes,
                          const unsigned char *const *data, const size_t *lengths, int g, int n,
                          unsigned char *ok, jpeg_gpu_share gpu, void *arg, graft_err *e) {
    if (g >= n) return gpu(arg, g);
    TRY(ensure_staging(c, (size_t)n * slot_bytes, e));
    memset(ok, 0, (size_t)n);
    char *staging = c->staging;
    int next = g;
    graft_status gpu_status = GRAFT_OK;
    double gpu_seconds = 0, busy = 0, cpu_images = 0;
#pragma omp parallel num_threads(c->threads + 1) reduction(+ : busy, cpu_images)
    {
#ifdef _OPENMP
        bool caller = omp_get_thread_num() == 0;
#else
        bool caller = true;
#endif
        if (caller) {
            double t0 = clock_seconds();
            gpu_status = gpu(arg, g);
            gpu_seconds = clock_seconds() - t0;
        }
        for (;;) { /* the caller joins in once its share is done */
            int i;
#pragma omp atomic capture
            i = next++;
            if (i >= n) break;
            double t0 = clock_seconds();
            decode_one(o, slot_bytes, data[i], lengths[i], i, staging, ok);
            if (!caller) busy += clock_seconds() - t0, cpu_images += 1;
        }
    }
    /* the rates: nvJPEG's share over its time, the threads' images over their busy time times
     * their number (the caller's images are left out of both) */
    if (c->batches++ > 0) /* the first includes nvJPEG's first-call set-up */
        smooth(&c->gpu_rate, g, gpu_seconds);
    smooth(&c->cpu_rate, cpu_images * c->threads, busy);
    c->images += (int64_t)cpu_images;
    c->busy_seconds += busy;
    return gpu_status;
}

void jpeg_cpu_free(jpeg_cpu_part *c) {
    if (c->staging) cudaFreeHost(c->staging);
    memset(c, 0, sizeof *c);
}

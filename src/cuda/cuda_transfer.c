/* cuda_transfer.c: copies between the caller's (pageable) host memory and the GPU through two
 * pinned staging buffers, so that the host's memcpy of one chunk (on several threads for a large
 * copy) overlaps the DMA of the other and an upload returns before the GPU has read it; large
 * copies from or to pinned host memory go directly; uploads from pinned memory on a copy stream
 * beside the model's work. */
#include <string.h>

#include "cuda_internal.h"
#include "graft_config.h"
#if GRAFT_HAVE_OPENMP
#include <omp.h>
#endif

#define STAGE_BYTES ((size_t)4 << 20)
#define COPY_THREADS_MAX 8 /* host memcpy bandwidth stops growing about here */
#define COPY_PARALLEL_MIN ((size_t)1 << 20)

/* Threads for the host side of a staged copy of `bytes`: one for a small copy or a single-
 * threaded context (the context's num_threads; 0: OpenMP's), at most COPY_THREADS_MAX. */
static int copy_threads(const cuda_backend *be, size_t bytes) {
#if GRAFT_HAVE_OPENMP
    if (bytes < 2 * STAGE_BYTES) return 1;
    int t = be->num_threads > 0 ? be->num_threads : omp_get_max_threads();
    return t < 1 ? 1 : t > COPY_THREADS_MAX ? COPY_THREADS_MAX : t;
#else
    (void)be, (void)bytes;
    return 1;
#endif
}

/* memcpy on `threads` threads, each a contiguous share (one chunk of a staged copy: one
 * thread's copy into pinned memory runs at ~7 GB/s, far below the bus). */
static void copy_host(void *dst, const void *src, size_t n, int threads) {
    if (threads <= 1 || n < COPY_PARALLEL_MIN) {
        memcpy(dst, src, n);
        return;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int p = 0; p < threads; p++) {
        size_t lo = n / (size_t)threads * (size_t)p;
        size_t hi = p == threads - 1 ? n : n / (size_t)threads * (size_t)(p + 1);
        memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
    }
}

static graft_status stage_init(cuda_backend *be, graft_err *e) {
    if (be->stage[0]) return GRAFT_OK;
    for (int i = 0; i < 2; i++) {
        CUDA_TRY(e, cudaMallocHost(&be->stage[i], STAGE_BYTES), "allocating pinned host memory");
        CUDA_TRY(e, cudaEventCreateWithFlags(&be->stage_done[i], cudaEventDisableTiming),
                 "creating an event");
    }
    return GRAFT_OK;
}

#define N_UPLOADS                                                                                  \
    ((int)(sizeof((cuda_backend *)0)->uploads / sizeof((cuda_backend *)0)->uploads[0]))

static void uploads_fini(cuda_backend *be) {
    if (be->copy_stream) cudaStreamSynchronize(be->copy_stream);
    for (int i = 0; i < N_UPLOADS; i++) {
        if (be->uploads[i].done) cudaEventDestroy(be->uploads[i].done);
        be->uploads[i] = (struct cuda_pending_upload){0};
    }
    if (be->copy_after) cudaEventDestroy(be->copy_after);
    if (be->copy_stream) cudaStreamDestroy(be->copy_stream);
    be->copy_after = NULL;
    be->copy_stream = NULL;
}

void cuda_transfer_fini(cuda_backend *be) {
    uploads_fini(be);
    for (int i = 0; i < 2; i++) {
        if (be->stage_done[i]) cudaEventSynchronize(be->stage_done[i]);
        if (be->stage[i]) cudaFreeHost(be->stage[i]);
        if (be->stage_done[i]) cudaEventDestroy(be->stage_done[i]);
        be->stage[i] = NULL;
        be->stage_done[i] = NULL;
    }
}

/* Whether p is page-locked host memory (cudaMallocHost's, or registered): copied directly. */
static bool is_pinned(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

/* One direct copy from or to pinned memory, waited for (the caller may change or read the host
 * side as soon as this returns, as with the staged copies). */
static graft_status direct_copy(cuda_backend *be, void *dst, const void *src, size_t bytes,
                                enum cudaMemcpyKind kind, graft_err *e) {
    const char *what =
        kind == cudaMemcpyHostToDevice ? "copying to the GPU" : "copying from the GPU";
    CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, kind, be->stream), what);
    CUDA_TRY(e, cudaStreamSynchronize(be->stream), what);
    return GRAFT_OK;
}

graft_status cuda_upload(cuda_backend *be, void *dst, const void *src, size_t bytes, graft_err *e) {
    if (bytes >= STAGE_BYTES && is_pinned(src))
        return direct_copy(be, dst, src, bytes, cudaMemcpyHostToDevice, e);
    TRY(stage_init(be, e));
    int i = 0, threads = copy_threads(be, bytes);
    for (size_t off = 0; off < bytes; off += STAGE_BYTES, i ^= 1) {
        size_t n = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        /* The buffer's previous copy must be done before it is overwritten. */
        CUDA_TRY(e, cudaEventSynchronize(be->stage_done[i]), "copying to the GPU");
        copy_host(be->stage[i], (const char *)src + off, n, threads);
        CUDA_TRY(
            e,
            cudaMemcpyAsync((char *)dst + off, be->stage[i], n, cudaMemcpyHostToDevice, be->stream),
            "copying to the GPU");
        CUDA_TRY(e, cudaEventRecord(be->stage_done[i], be->stream), "copying to the GPU");
    }
    return GRAFT_OK; /* the source is free to change: the data is in the staging buffers */
}

graft_status cuda_download(cuda_backend *be, void *dst, const void *src, size_t bytes,
                           graft_err *e) {
    if (bytes >= STAGE_BYTES && is_pinned(dst))
        return direct_copy(be, dst, src, bytes, cudaMemcpyDeviceToHost, e);
    TRY(stage_init(be, e));
    size_t pending_off = 0, pending_n = 0;
    int pending = -1, i = 0, threads = copy_threads(be, bytes);
    for (size_t off = 0; off < bytes; off += STAGE_BYTES, i ^= 1) {
        size_t n = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        CUDA_TRY(e, cudaEventSynchronize(be->stage_done[i]), "copying from the GPU");
        CUDA_TRY(e,
                 cudaMemcpyAsync(be->stage[i], (const char *)src + off, n, cudaMemcpyDeviceToHost,
                                 be->stream),
                 "copying from the GPU");
        CUDA_TRY(e, cudaEventRecord(be->stage_done[i], be->stream), "copying from the GPU");
        if (pending >= 0) { /* the other buffer's chunk has landed (or is about to) */
            CUDA_TRY(e, cudaEventSynchronize(be->stage_done[pending]), "copying from the GPU");
            copy_host((char *)dst + pending_off, be->stage[pending], pending_n, threads);
        }
        pending = i, pending_off = off, pending_n = n;
    }
    if (pending >= 0) {
        CUDA_TRY(e, cudaEventSynchronize(be->stage_done[pending]), "copying from the GPU");
        copy_host((char *)dst + pending_off, be->stage[pending], pending_n, threads);
    }
    return GRAFT_OK;
}

/* The copy stream (on the model's GPU, whichever is current) and its events; the stream last,
 * so that a half-made set is made again on the next call. */
static graft_status uploads_init(cuda_backend *be, graft_err *e) {
    if (be->copy_stream) return GRAFT_OK;
    CUDA_TRY(e, cudaSetDevice(be->device), "selecting the model's GPU");
    if (!be->copy_after)
        CUDA_TRY(e, cudaEventCreateWithFlags(&be->copy_after, cudaEventDisableTiming),
                 "creating an event");
    for (int i = 0; i < N_UPLOADS; i++)
        if (!be->uploads[i].done)
            CUDA_TRY(e, cudaEventCreateWithFlags(&be->uploads[i].done, cudaEventDisableTiming),
                     "creating an event");
    CUDA_TRY(e, cudaStreamCreateWithFlags(&be->copy_stream, cudaStreamNonBlocking),
             "creating a copy stream");
    return GRAFT_OK;
}

graft_status cuda_upload_async(cuda_backend *be, void *dst, const void *src, size_t bytes,
                               graft_err *e) {
    if (!bytes) return GRAFT_OK;
    if (!is_pinned(src))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "an asynchronous copy to the GPU needs page-locked host memory as its "
                       "source (from graft_model_host_alloc), and this source is pageable");
    TRY(uploads_init(be, e));
    struct cuda_pending_upload *u = &be->uploads[be->next_upload];
    be->next_upload = (be->next_upload + 1) % N_UPLOADS;
    /* A slot still in use (more uploads under way than slots): its upload ends first. */
    if (u->live) CUDA_TRY(e, cudaEventSynchronize(u->done), "waiting for a copy to the GPU");
    u->live = false;
    /* Work queued before the upload (a run still reading dst) finishes before it writes. */
    CUDA_TRY(e, cudaEventRecord(be->copy_after, be->stream), "copying to the GPU");
    CUDA_TRY(e, cudaStreamWaitEvent(be->copy_stream, be->copy_after, 0), "copying to the GPU");
    CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->copy_stream),
             "copying to the GPU");
    CUDA_TRY(e, cudaEventRecord(u->done, be->copy_stream), "copying to the GPU");
    *u = (struct cuda_pending_upload){dst, bytes, u->done, true};
    return GRAFT_OK;
}

graft_status cuda_wait_uploads(cuda_backend *be, const void *ptr, size_t bytes, graft_err *e) {
    const char *lo = ptr, *hi = lo + bytes;
    for (int i = 0; be->copy_stream && i < N_UPLOADS; i++) {
        struct cuda_pending_upload *u = &be->uploads[i];
        if (!u->live || u->dst >= hi || u->dst + u->bytes <= lo) continue;
        CUDA_TRY(e, cudaStreamWaitEvent(be->stream, u->done, 0), "waiting for a copy to the GPU");
    }
    return GRAFT_OK;
}

graft_status cuda_sync_uploads(cuda_backend *be, graft_err *e) {
    if (!be->copy_stream) return GRAFT_OK;
    CUDA_TRY(e, cudaStreamSynchronize(be->copy_stream), "waiting for the copies to the GPU");
    for (int i = 0; i < N_UPLOADS; i++) be->uploads[i].live = false;
    return GRAFT_OK;
}

/* cuda_transfer.c: copies between the caller's (pageable) host memory and the GPU through two
 * pinned staging buffers, so that the host's memcpy of one chunk overlaps the DMA of the other
 * and an upload returns before the GPU has read it; large copies from or to pinned host memory
 * go directly. */
#include <string.h>

#include "cuda_internal.h"

#define STAGE_BYTES ((size_t)4 << 20)

static graft_status stage_init(cuda_backend *be, graft_err *e) {
    if (be->stage[0]) return GRAFT_OK;
    for (int i = 0; i < 2; i++) {
        CUDA_TRY(e, cudaMallocHost(&be->stage[i], STAGE_BYTES), "allocating pinned host memory");
        CUDA_TRY(e, cudaEventCreateWithFlags(&be->stage_done[i], cudaEventDisableTiming),
                 "creating an event");
    }
    return GRAFT_OK;
}

void cuda_transfer_fini(cuda_backend *be) {
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
    int i = 0;
    for (size_t off = 0; off < bytes; off += STAGE_BYTES, i ^= 1) {
        size_t n = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
        /* The buffer's previous copy must be done before it is overwritten. */
        CUDA_TRY(e, cudaEventSynchronize(be->stage_done[i]), "copying to the GPU");
        memcpy(be->stage[i], (const char *)src + off, n);
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
    int pending = -1, i = 0;
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
            memcpy((char *)dst + pending_off, be->stage[pending], pending_n);
        }
        pending = i, pending_off = off, pending_n = n;
    }
    if (pending >= 0) {
        CUDA_TRY(e, cudaEventSynchronize(be->stage_done[pending]), "copying from the GPU");
        memcpy((char *)dst + pending_off, be->stage[pending], pending_n);
    }
    return GRAFT_OK;
}

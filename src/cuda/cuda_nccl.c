/* cuda_nccl.c: the CUDA kind's collectives (device_kind.h) over NCCL, loaded when a group first
 * needs it (dlopen: libgraft loads and runs on a machine without NCCL, its own package): a
 * non-blocking communicator whose every operation is polled under a timeout (aborted when it
 * passes), host buffers staged through one device buffer in pieces. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/device_kind.h"
#include "../core/clock.h"

#define STAGE_BYTES ((size_t)64 << 20) /* the device buffer host data crosses in */

/* The NCCL calls used, from the library loaded. */
static struct nccl_api {
    ncclResult_t (*GetVersion)(int *);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    const char *(*GetErrorString)(ncclResult_t);
    const char *(*GetLastError)(ncclComm_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    ncclResult_t (*CommFinalize)(ncclComm_t);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
} nccl;
static char nccl_missing[256]; /* why loading failed; empty when it worked */
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void load_nccl(void) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nccl_missing, sizeof nccl_missing, "%s", dlerror());
        return;
    }
    struct {
        void **slot;
        const char *name;
    } want[] = {{(void **)&nccl.GetVersion, "ncclGetVersion"},
                {(void **)&nccl.GetUniqueId, "ncclGetUniqueId"},
                {(void **)&nccl.CommInitRankConfig, "ncclCommInitRankConfig"},
                {(void **)&nccl.CommGetAsyncError, "ncclCommGetAsyncError"},
                {(void **)&nccl.GetErrorString, "ncclGetErrorString"},
                {(void **)&nccl.GetLastError, "ncclGetLastError"},
                {(void **)&nccl.AllReduce, "ncclAllReduce"},
                {(void **)&nccl.Broadcast, "ncclBroadcast"},
                {(void **)&nccl.GroupStart, "ncclGroupStart"},
                {(void **)&nccl.GroupEnd, "ncclGroupEnd"},
                {(void **)&nccl.CommFinalize, "ncclCommFinalize"},
                {(void **)&nccl.CommDestroy, "ncclCommDestroy"},
                {(void **)&nccl.CommAbort, "ncclCommAbort"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        *want[i].slot = dlsym(h, want[i].name);
        if (!*want[i].slot) {
            snprintf(nccl_missing, sizeof nccl_missing,
                     "libnccl.so.2 has no %s (NCCL 2.14 or later is needed)", want[i].name);
            return;
        }
    }
}

/* NCCL loaded, or an error saying why not. */
static graft_status need_nccl(graft_err *e) {
    pthread_once(&nccl_once, load_nccl);
    if (!nccl_missing[0]) return GRAFT_OK;
    return err_set(e, GRAFT_E_UNSUPPORTED,
                   "NCCL cannot be loaded (%s): install it (libnccl2, or NVIDIA's nccl package) "
                   "for data-parallel runs over GPUs, or use GRAFT_DIST_BACKEND=mpi under mpirun",
                   nccl_missing);
}

struct device_comm {
    ncclComm_t comm;
    cudaStream_t stream;
    int device, rank, world;
    double timeout_s;
    void *stage; /* STAGE_BYTES on the device */
    bool broken; /* an operation failed or timed out: the communicator was aborted */
};

static void pause_us(long us) {
    struct timespec p = {0, us * 1000};
    nanosleep(&p, NULL);
}

static graft_status nccl_fail(device_comm *c, ncclResult_t r, const char *what, graft_err *e) {
    const char *last = c && c->comm ? nccl.GetLastError(c->comm) : NULL;
    if (c) c->broken = true;
    return err_set(e, GRAFT_E_BACKEND, "NCCL: rank %d of %d: %s: %s%s%s", c ? c->rank : -1,
                   c ? c->world : 0, what, nccl.GetErrorString(r), last && *last ? ": " : "",
                   last ? last : "");
}

static graft_status cuda_fail(device_comm *c, cudaError_t r, const char *what, graft_err *e) {
    if (c) c->broken = true;
    return err_set(e, GRAFT_E_BACKEND, "NCCL: rank %d of %d: %s: %s", c ? c->rank : -1,
                   c ? c->world : 0, what, cudaGetErrorString(r));
}

/* The communicator's pending work (its initialization, or the operations on the stream when
 * stream_too) done, under the timeout; a failure or the timeout aborts it. */
static graft_status wait_done(device_comm *c, bool stream_too, const char *what, graft_err *e) {
    double start = clock_seconds();
    for (long polls = 0;; polls++) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = nccl.CommGetAsyncError(c->comm, &async);
        if (r != ncclSuccess) return nccl_fail(c, r, what, e);
        if (async != ncclSuccess && async != ncclInProgress) return nccl_fail(c, async, what, e);
        if (async == ncclSuccess) {
            cudaError_t q = stream_too ? cudaStreamQuery(c->stream) : cudaSuccess;
            if (q == cudaSuccess) return GRAFT_OK;
            if (q != cudaErrorNotReady) return cuda_fail(c, q, what, e);
        }
        if (clock_seconds() - start > c->timeout_s) {
            c->broken = true;
            return err_set(e, GRAFT_E_INTERNAL,
                           "rank %d of %d: %s: the other ranks did not arrive within %.0f s "
                           "(GRAFT_DIST_TIMEOUT): a rank died, hangs or is far slower; stopping",
                           c->rank, c->world, what, c->timeout_s);
        }
        pause_us(polls < 1000 ? 20 : 1000);
    }
}

/* "NCCL 2.28.3", from the library loaded (not the header), once a group is made. */
static char library_name[32] = "NCCL";

/* Also NCCL's defaults graft keeps: NVLink multicast (NVLS) off unless the user set
 * NCCL_NVLS_ENABLE (read when NCCL first starts, so before any NCCL call). */
static void name_library(void) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    int v = 0;
    if (nccl.GetVersion(&v) == ncclSuccess && v > 0)
        snprintf(library_name, sizeof library_name, "NCCL %d.%d.%d", v / 10000, v / 100 % 100,
                 v % 100);
}

static graft_status make_id(void *id, graft_err *e) {
    TRY(need_nccl(e));
    name_library();
    ncclUniqueId u;
    ncclResult_t r = nccl.GetUniqueId(&u);
    if (r != ncclSuccess) return nccl_fail(NULL, r, "ncclGetUniqueId", e);
    memcpy(id, &u, sizeof u);
    return GRAFT_OK;
}

static void close_comm(device_comm *c, bool abort) {
    if (!c) return;
    if (c->comm) {
        if (!abort && !c->broken && nccl.CommFinalize(c->comm) == ncclSuccess &&
            wait_done(c, false, "ncclCommFinalize", &(graft_err){0}) == GRAFT_OK)
            nccl.CommDestroy(c->comm);
        else
            nccl.CommAbort(c->comm);
    }
    if (c->stage) cudaFree(c->stage);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

static graft_status open_comm(int device, const void *id, int rank, int world, double timeout_s,
                              device_comm **out, graft_err *e) {
    *out = NULL;
    TRY(need_nccl(e));
    name_library();
    device_comm *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    c->device = device, c->rank = rank, c->world = world, c->timeout_s = timeout_s;
    cudaError_t cr = cudaSetDevice(device);
    if (cr == cudaSuccess) cr = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (cr == cudaSuccess) cr = cudaMalloc(&c->stage, STAGE_BYTES);
    if (cr != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "preparing cuda:%d", device);
        graft_status st = cuda_fail(c, cr, what, e);
        close_comm(c, true);
        return st;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* every wait is ours, under the timeout */
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = nccl.CommInitRankConfig(&c->comm, world, u, rank, &config);
    graft_status st = r == ncclSuccess || r == ncclInProgress
                          ? wait_done(c, false, "ncclCommInitRankConfig", e)
                          : nccl_fail(c, r, "ncclCommInitRankConfig", e);
    if (st != GRAFT_OK) {
        close_comm(c, true);
        return st;
    }
    *out = c;
    return GRAFT_OK;
}

static graft_status usable(device_comm *c, graft_err *e) {
    if (c->broken)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "NCCL: rank %d of %d: the communicator was aborted by an earlier failure",
                       c->rank, c->world);
    cudaError_t r = cudaSetDevice(c->device);
    return r == cudaSuccess ? GRAFT_OK : cuda_fail(c, r, "cudaSetDevice", e);
}

/* Enqueue: host piece to the stage, the collective, the stage back. */
static graft_status staged(device_comm *c, void *host, size_t bytes, size_t count,
                           ncclDataType_t type, int root, const char *what, graft_err *e) {
    cudaError_t cr = cudaMemcpyAsync(c->stage, host, bytes, cudaMemcpyHostToDevice, c->stream);
    if (cr != cudaSuccess) return cuda_fail(c, cr, "copying to the device", e);
    ncclResult_t r =
        root < 0 ? nccl.AllReduce(c->stage, c->stage, count, type, ncclSum, c->comm, c->stream)
                 : nccl.Broadcast(c->stage, c->stage, count, type, root, c->comm, c->stream);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail(c, r, what, e);
    cr = cudaMemcpyAsync(host, c->stage, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (cr != cudaSuccess) return cuda_fail(c, cr, "copying from the device", e);
    return wait_done(c, true, what, e);
}

static graft_status allreduce(device_comm *c, void *host, int64_t n, bool f64, graft_err *e) {
    TRY(usable(c, e));
    size_t elem = f64 ? sizeof(double) : sizeof(float), per = STAGE_BYTES / elem;
    for (int64_t at = 0; at < n; at += (int64_t)per) {
        size_t m = (size_t)(n - at) < per ? (size_t)(n - at) : per;
        TRY(staged(c, (char *)host + (size_t)at * elem, m * elem, m,
                   f64 ? ncclFloat64 : ncclFloat32, -1, "all-reduce", e));
    }
    return GRAFT_OK;
}

static graft_status allreduce_device(device_comm *c, void *const *bufs, const int64_t *numels,
                                     int n, graft_err *e) {
    TRY(usable(c, e));
    /* the buffers were written on the backend's streams: their work done first */
    cudaError_t cr = cudaDeviceSynchronize();
    if (cr != cudaSuccess) return cuda_fail(c, cr, "waiting for the gradients", e);
    ncclResult_t r = nccl.GroupStart();
    for (int i = 0; r == ncclSuccess && i < n; i++) {
        if (numels[i] <= 0) continue;
        r = nccl.AllReduce(bufs[i], bufs[i], (size_t)numels[i], ncclFloat32, ncclSum, c->comm,
                           c->stream);
        if (r == ncclInProgress) r = ncclSuccess;
    }
    ncclResult_t end = nccl.GroupEnd();
    if (r != ncclSuccess) return nccl_fail(c, r, "all-reduce of the gradients", e);
    if (end != ncclSuccess && end != ncclInProgress)
        return nccl_fail(c, end, "all-reduce of the gradients", e);
    return wait_done(c, true, "all-reduce of the gradients", e);
}

static graft_status broadcast(device_comm *c, void *host, size_t bytes, int root, graft_err *e) {
    TRY(usable(c, e));
    for (size_t at = 0; at < bytes; at += STAGE_BYTES) {
        size_t m = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
        TRY(staged(c, (char *)host + at, m, m, ncclUint8, root, "broadcast", e));
    }
    return GRAFT_OK;
}

const device_collectives cuda_nccl_collectives = {.library = library_name,
                                                  .id_bytes = sizeof(ncclUniqueId),
                                                  .make_id = make_id,
                                                  .open = open_comm,
                                                  .allreduce = allreduce,
                                                  .allreduce_device = allreduce_device,
                                                  .broadcast = broadcast,
                                                  .close = close_comm};

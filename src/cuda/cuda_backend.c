/* cuda_backend.c: the CUDA backend: device, stream, memory pool, library handles, dispatch of
 * each node to its device kernel (or to the CPU reference on copies when none covers it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fallback.h"
#include "cuda_groups.h"
#include "cuda_internal.h"
#include "cuda_matmul.h"
#include "tensor_launch.h"

static const cuda_kernel *const kernel_tables[] = {
    cuda_elementwise_kernels, cuda_reduce_kernels,    cuda_tensor_kernels,
    cuda_norm_kernels,        cuda_conv_kernels,      cuda_matmul_kernels,
    cuda_backward_kernels,    cuda_optimizer_kernels, cuda_train_loss_kernels,
};

const cuda_kernel *cuda_find_kernel(const char *op) {
    for (size_t t = 0; t < sizeof kernel_tables / sizeof *kernel_tables; t++)
        for (const cuda_kernel *k = kernel_tables[t]; k->op; k++)
            if (strcmp(k->op, op) == 0) return k;
    return NULL;
}

static graft_status out_of_memory(cuda_backend *be, size_t bytes, graft_err *e) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    return err_set(e, GRAFT_E_OUT_OF_MEMORY,
                   "out of GPU memory on cuda:%d (%s): %.1f MiB needed, %.1f MiB free of %.1f MiB",
                   be->device, be->prop.name, (double)bytes / 1048576.0, (double)free_b / 1048576.0,
                   (double)total_b / 1048576.0);
}

graft_status cuda_malloc(cuda_backend *be, size_t bytes, void **out, graft_err *e) {
    *out = NULL;
    if (bytes == 0) bytes = 1;
    cudaError_t err = cudaMallocFromPoolAsync(out, bytes, be->pool, be->stream);
    if (err == cudaErrorMemoryAllocation) {
        /* Memory the pool caches for reuse may be what is missing: give it back and retry. */
        cudaGetLastError();
        cudaStreamSynchronize(be->stream);
        cudaMemPoolTrimTo(be->pool, 0);
        err = cudaMallocFromPoolAsync(out, bytes, be->pool, be->stream);
    }
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        *out = NULL;
        return out_of_memory(be, bytes, e);
    }
    if (err != cudaSuccess) return cuda_fail(e, err, "allocating device memory");
    return GRAFT_OK;
}

void cuda_free(cuda_backend *be, void *ptr) {
    if (ptr) cudaFreeAsync(ptr, be->stream);
}

/* Keep an outgrown workspace: the executor keeps recordings of several input shapes, and the
 * older ones hold its address. */
static graft_status retire_workspace(cuda_backend *be, graft_err *e) {
    if (!be->workspace) return GRAFT_OK;
    void **more = realloc(be->retired, sizeof *more * (size_t)(be->n_retired + 1));
    if (!more) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory growing the workspace");
    be->retired = more;
    be->retired[be->n_retired++] = be->workspace;
    return GRAFT_OK;
}

static void free_retired(cuda_backend *be) {
    for (int i = 0; i < be->n_retired; i++) cuda_free(be, be->retired[i]);
    free(be->retired);
    be->retired = NULL;
    be->n_retired = 0;
}

graft_status cuda_workspace(cuda_backend *be, size_t bytes, void **out, graft_err *e) {
    if (bytes > be->workspace_bytes) {
        TRY(retire_workspace(be, e));
        be->workspace = NULL;
        be->workspace_bytes = 0;
        size_t grown = bytes < ((size_t)32 << 20) ? ((size_t)32 << 20) : bytes;
        TRY(cuda_malloc(be, grown, &be->workspace, e));
        be->workspace_bytes = grown;
    }
    *out = be->workspace;
    return GRAFT_OK;
}

static graft_status be_alloc(void *impl, size_t bytes, void **out, graft_err *e) {
    return cuda_malloc(impl, bytes, out, e);
}

static void be_free(void *impl, void *ptr) {
    cuda_free(impl, ptr);
}

static bool be_supports(void *impl, const ir_node *node) {
    (void)impl;
    return cuda_find_kernel(node->op_type) != NULL;
}

static graft_status grow_state(cuda_backend *be, int node_index, graft_err *e) {
    if (node_index < be->n_node_state) return GRAFT_OK;
    int n = node_index + 64;
    void **s = realloc(be->node_state, sizeof(void *) * (size_t)n);
    if (!s) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for kernel state");
    be->node_state = s;
    const cuda_kernel **o = realloc(be->node_state_owner, sizeof(*o) * (size_t)n);
    if (!o) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for kernel state");
    be->node_state_owner = o;
    bool *w = realloc(be->warned, sizeof(bool) * (size_t)n);
    if (!w) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for kernel state");
    be->warned = w;
    for (int i = be->n_node_state; i < n; i++) {
        be->node_state[i] = NULL;
        be->node_state_owner[i] = NULL;
        be->warned[i] = false;
    }
    be->n_node_state = n;
    return GRAFT_OK;
}

static void warn_fallback(cuda_backend *be, int node_index, const ir_node *node) {
    if (be->warned[node_index] || !be->log) return;
    be->warned[node_index] = true;
    char msg[512], op[96];
    snprintf(op, sizeof op, "%s", node->op_type);
    if (!strcmp(node->op_type, "Backward")) /* the training graph's: name the forward op */
        snprintf(op, sizeof op, "Backward of %s", attr_s(node, "op", "?"));
    snprintf(msg, sizeof msg,
             "node '%s' (%s): no CUDA kernel covers this case; it runs on the CPU (slow: its "
             "tensors are copied to the host and back)",
             node->name ? node->name : "", op);
    be->log(be->log_user, GRAFT_LOG_WARN, msg);
}

graft_status cuda_try_kernel(cuda_backend *be, int node_index, const op_call *call, bool *handled) {
    const cuda_kernel *k = cuda_find_kernel(call->node->op_type);
    *handled = false;
    if (!k) return GRAFT_OK;
    graft_status st = k->run(be, call, &be->node_state[node_index], handled);
    if (be->node_state[node_index]) be->node_state_owner[node_index] = k;
    return st;
}

graft_status cuda_run_plain(cuda_backend *be, int node_index, const op_call *call) {
    const ir_node *node = call->node;
    bool handled = false;
    graft_status st = cuda_try_kernel(be, node_index, call, &handled);
    if (st != GRAFT_OK || handled) return st;
    warn_fallback(be, node_index, node);
    be->fallbacks++;
    if (be->capturing)
        return op_error(node, call->err, GRAFT_E_UNSUPPORTED,
                        "runs on the CPU, which a CUDA graph cannot record");
    return cuda_run_on_cpu(be, call);
}

graft_status cuda_run_node(cuda_backend *be, int node_index, const op_call *call) {
    return cuda_run_layout(be, node_index, call);
}

static graft_status be_run(void *impl, int node_index, const op_call *call) {
    cuda_backend *be = impl;
    TRY(grow_state(be, node_index, call->err));
    if (cuda_in_group(be, node_index)) return cuda_group_step(be, node_index, call);
    return cuda_run_node(be, node_index, call);
}

static void be_release_state(void *impl) {
    cuda_backend *be = impl;
    cudaStreamSynchronize(be->stream);
    for (int i = 0; i < be->n_node_state; i++) {
        if (be->node_state[i] && be->node_state_owner[i] && be->node_state_owner[i]->free_state)
            be->node_state_owner[i]->free_state(be->node_state[i]);
        be->node_state[i] = NULL;
        be->node_state_owner[i] = NULL;
        be->warned[i] = false;
    }
    /* the fused groups' kernel state too: it may hold copies of weights (KRSC filters) */
    fusion_groups_release_state(be->groups);
    free_retired(be);
}

static graft_status be_synchronize(void *impl, graft_err *e) {
    cuda_backend *be = impl;
    /* the flags come back in stream order with the work: one wait, not a wait and a copy */
    CUDA_TRY(e,
             cudaMemcpyAsync(be->bad_seen, be->bad_index, sizeof *be->bad_seen,
                             cudaMemcpyDeviceToHost, be->stream),
             "reading the GPU's error flags");
    CUDA_TRY(e, cudaStreamSynchronize(be->stream), "running the queued GPU work");
    TRY(cuda_check_launch(e, "running the queued GPU work"));
    cuda_gather_fault bad = *be->bad_seen;
    if (bad.raised) {
        CUDA_TRY(e, cudaMemset(be->bad_index, 0, sizeof bad), "clearing the GPU's error flags");
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "a Gather, GatherElements, GatherND or ScatterND index, %lld, is out of "
                       "range for an axis of %lld (found on the GPU; the CPU also names the "
                       "node: run with the device cpu to see it)",
                       (long long)bad.index, (long long)bad.axis_dim);
    }
    return GRAFT_OK;
}

static graft_status be_to_device(void *impl, void *dst, const void *src, size_t bytes,
                                 graft_err *e) {
    return bytes ? cuda_upload(impl, dst, src, bytes, e) : GRAFT_OK;
}

static graft_status be_to_host(void *impl, void *dst, const void *src, size_t bytes, graft_err *e) {
    return bytes ? cuda_download(impl, dst, src, bytes, e) : GRAFT_OK;
}

static graft_status be_on_device(void *impl, void *dst, const void *src, size_t bytes,
                                 graft_err *e) {
    cuda_backend *be = impl;
    if (!bytes) return GRAFT_OK;
    CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, be->stream),
             "copying on the GPU");
    return GRAFT_OK;
}

static graft_status be_host_alloc(void *impl, size_t bytes, void **out, graft_err *e) {
    (void)impl;
    *out = NULL;
    cudaError_t err = cudaMallocHost(out, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of pinned host memory (%.1f MiB): %s",
                       (double)bytes / 1048576.0, cudaGetErrorString(err));
    }
    return GRAFT_OK;
}

static void be_host_free(void *ptr) {
    if (ptr) cudaFreeHost(ptr);
}

static graft_status be_upload_async(void *impl, void *dst, const void *src, size_t bytes,
                                    graft_err *e) {
    return cuda_upload_async(impl, dst, src, bytes, e);
}

static graft_status be_wait_uploads(void *impl, const void *ptr, size_t bytes, graft_err *e) {
    return cuda_wait_uploads(impl, ptr, bytes, e);
}

static graft_status be_sync_uploads(void *impl, graft_err *e) {
    return cuda_sync_uploads(impl, e);
}

static graft_status be_mark(void *impl, int k, graft_err *e) {
    cuda_backend *be = impl;
    if (k < 0) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "profiling mark %d is negative", k);
    if (k >= be->n_marks) {
        int n = k + 1 > 2 * be->n_marks ? k + 1 : 2 * be->n_marks;
        cudaEvent_t *m = realloc(be->marks, sizeof *m * (size_t)n);
        if (!m) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for %d profiling marks", n);
        be->marks = m;
        for (; be->n_marks < n; be->n_marks++)
            CUDA_TRY(e, cudaEventCreate(&be->marks[be->n_marks]), "creating a profiling event");
    }
    CUDA_TRY(e, cudaEventRecord(be->marks[k], be->stream), "recording a profiling event");
    return GRAFT_OK;
}

static graft_status be_mark_seconds(void *impl, int a, int b, double *seconds, graft_err *e) {
    cuda_backend *be = impl;
    if (a < 0 || b < 0 || a >= be->n_marks || b >= be->n_marks)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "profiling marks %d, %d were not made", a, b);
    float ms = 0;
    CUDA_TRY(e, cudaEventSynchronize(be->marks[b]), "waiting for a profiling event");
    CUDA_TRY(e, cudaEventElapsedTime(&ms, be->marks[a], be->marks[b]),
             "reading a profiling event's time");
    *seconds = 1e-3 * (double)ms;
    return GRAFT_OK;
}

static graft_status be_capture_begin(void *impl, graft_err *e) {
    cuda_backend *be = impl;
    CUDA_TRY(e, cudaStreamBeginCapture(be->stream, cudaStreamCaptureModeThreadLocal),
             "starting a CUDA graph capture");
    be->capturing = true;
    return GRAFT_OK;
}

static graft_status be_capture_end(void *impl, void **out, graft_err *e) {
    cuda_backend *be = impl;
    *out = NULL;
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(be->stream, &graph);
    be->capturing = false;
    if (err != cudaSuccess) {
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        return cuda_fail(e, err, "recording a CUDA graph");
    }
    cudaGraphExec_t exec = NULL;
    err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return cuda_fail(e, err, "instantiating a CUDA graph");
    }
    *out = exec;
    return GRAFT_OK;
}

static graft_status be_replay(void *impl, void *graph, graft_err *e) {
    cuda_backend *be = impl;
    CUDA_TRY(e, cudaGraphLaunch((cudaGraphExec_t)graph, be->stream), "replaying a CUDA graph");
    return GRAFT_OK;
}

static void be_graph_free(void *impl, void *graph) {
    (void)impl;
    if (graph) cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

static int64_t be_fallback_count(void *impl) {
    return ((cuda_backend *)impl)->fallbacks;
}

static void be_destroy(void *impl) {
    cuda_backend *be = impl;
    if (!be) return;
    cudaSetDevice(be->device);
    if (be->n_node_state) be_release_state(be);
    free_retired(be);
    cuda_free(be, be->workspace);
    if (be->stream) cudaStreamSynchronize(be->stream);
    cuda_transfer_fini(be);
    cuda_groups_free(be->groups);
    layout_state_free(&be->layout);
    if (be->bad_index) cudaFree(be->bad_index);
    if (be->bad_seen) cudaFreeHost(be->bad_seen);
    for (int k = 0; k < be->n_marks; k++) cudaEventDestroy(be->marks[k]);
    cuda_gemm_cache_free(be->gemm_cache);
    free(be->marks);
    free(be->node_state);
    free(be->node_state_owner);
    free(be->warned);
    if (be->lt) cublasLtDestroy(be->lt);
    if (be->dnn) cudnnDestroy(be->dnn);
    if (be->pool) cudaMemPoolDestroy(be->pool);
    if (be->stream) cudaStreamDestroy(be->stream);
    cudaGetLastError();
    free(be);
}

static graft_status init_device(cuda_backend *be, graft_err *e) {
    CUDA_TRY(e, cudaSetDevice(be->device), "selecting the GPU");
    CUDA_TRY(e, cudaGetDeviceProperties(&be->prop, be->device), "reading the GPU's properties");
    CUDA_TRY(e, cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking), "creating a stream");
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = be->device;
    CUDA_TRY(e, cudaMemPoolCreate(&be->pool, &props), "creating a device memory pool");
    uint64_t keep = UINT64_MAX; /* freed blocks stay in the pool for the next batch */
    CUDA_TRY(e, cudaMemPoolSetAttribute(be->pool, cudaMemPoolAttrReleaseThreshold, &keep),
             "configuring the memory pool");
    CUBLAS_TRY(e, cublasLtCreate(&be->lt), "creating a cuBLASLt handle");
    CUDNN_TRY(e, cudnnCreate(&be->dnn), "creating a cuDNN handle");
    CUDNN_TRY(e, cudnnSetStream(be->dnn, be->stream), "binding cuDNN to the stream");
    CUDA_TRY(e, cudaMalloc((void **)&be->bad_index, sizeof(cuda_gather_fault)),
             "allocating an error flag");
    CUDA_TRY(e, cudaMemset(be->bad_index, 0, sizeof(cuda_gather_fault)), "clearing an error flag");
    CUDA_TRY(e, cudaMallocHost((void **)&be->bad_seen, sizeof(cuda_gather_fault)),
             "allocating an error flag's host copy");
    memset(be->bad_seen, 0, sizeof(cuda_gather_fault));
    return GRAFT_OK;
}

graft_status cuda_backend_create(const cuda_backend_options *o, graft_backend *out, graft_err *e) {
    char why[256] = "";
    int n = cuda_device_count(why, sizeof why);
    if (n == 0) return err_set(e, GRAFT_E_BACKEND, "no usable GPU: %s", why);
    if (o->device < 0 || o->device >= n)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "cuda:%d does not exist (%d GPU%s found)",
                       o->device, n, n == 1 ? "" : "s");
    cuda_backend *be = calloc(1, sizeof *be);
    if (!be) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory creating the CUDA backend");
    be->device = o->device;
    be->allow_tf32 = o->allow_tf32;
    be->log = o->log;
    be->log_user = o->log_user;
    be->num_threads = o->num_threads;
    const char *layout = getenv("GRAFT_CUDA_LAYOUT"); /* "nchw": a diagnostic switch */
    be->nchw_only = layout && strcmp(layout, "nchw") == 0;
    graft_status st = init_device(be, e);
    if (st != GRAFT_OK) {
        be_destroy(be);
        return st;
    }
    *out = (graft_backend){.name = "cuda",
                           .impl = be,
                           .is_device = true,
                           .alloc = be_alloc,
                           .free = be_free,
                           .supports = be_supports,
                           .run = be_run,
                           .release_state = be_release_state,
                           .synchronize = be_synchronize,
                           .copy_to_device = be_to_device,
                           .copy_to_host = be_to_host,
                           .copy_on_device = be_on_device,
                           .host_alloc = be_host_alloc,
                           .host_free = be_host_free,
                           .upload_async = be_upload_async,
                           .wait_uploads = be_wait_uploads,
                           .sync_uploads = be_sync_uploads,
                           .capture_begin = be_capture_begin,
                           .capture_end = be_capture_end,
                           .replay = be_replay,
                           .graph_free = be_graph_free,
                           .mark = be_mark,
                           .mark_seconds = be_mark_seconds,
                           .fallback_count = be_fallback_count,
                           .plan_groups = cuda_plan_groups,
                           .group_name = cuda_group_name,
                           .destroy = be_destroy};
    return GRAFT_OK;
}

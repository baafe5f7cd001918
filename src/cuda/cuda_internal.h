/* cuda_internal.h: the CUDA backend's state and the helpers its kernel files share. */
#ifndef GRAFT_CUDA_INTERNAL_H
#define GRAFT_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "../graph/fusion_groups.h"
#include "../graph/layout_plan.h"
#include "cuda_backend.h"

typedef struct cuda_kernel cuda_kernel;
typedef struct fusion_groups cuda_groups; /* src/graph/fusion_groups.c */

typedef struct cuda_gemm_cache cuda_gemm_cache;

typedef struct cuda_backend {
    int device;
    bool allow_tf32;
    cudaStream_t stream;
    cudaMemPool_t pool;
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;
    void *workspace; /* shared scratch for cuBLASLt and cuDNN, grown on demand */
    size_t workspace_bytes;
    void **retired; /* workspaces outgrown while recorded CUDA graphs may still use them: freed */
    int n_retired;  /* when the kernel state is released (the recordings are gone by then) */
    void **node_state; /* per node index, owned by the kernel that made it */
    const cuda_kernel **node_state_owner;
    bool *warned;      /* per node index: the CPU fallback was reported */
    int64_t fallbacks; /* node runs that went to the CPU reference */
    bool capturing;
    struct cuda_gather_fault *bad_index; /* a Gather's out-of-range index (device memory) */
    struct cuda_gather_fault *bad_seen;  /* its copy read at each synchronisation (pinned) */
    cuda_groups *groups;                 /* fused groups of the current placement (cuda_groups.c) */
    void *stage[2]; /* pinned host staging buffers for copies (cuda_transfer.c) */
    cudaEvent_t stage_done[2];
    cudaStream_t copy_stream; /* uploads beside the work (cuda_upload_async), made on first use */
    cudaEvent_t copy_after;   /* the work before an upload, which the upload waits for */
    struct cuda_pending_upload {
        const char *dst;
        size_t bytes;
        cudaEvent_t done;
        bool live;
    } uploads[8];
    int next_upload;
    struct cuda_gemm_cache *gemm_cache; /* cuBLASLt algorithms chosen by timing, per shape */
    cudaEvent_t *marks;                 /* profiling marks (be_mark), created on first use */
    int n_marks;
    int n_node_state;
    layout_state layout; /* channels-last values of the placement (cuda_layout.c) */
    bool nchw_only;      /* GRAFT_CUDA_LAYOUT=nchw: no channels-last activations */
    cuda_log_fn log;
    void *log_user;
    int num_threads;
    struct cudaDeviceProp prop;
} cuda_backend;

/* A device kernel for one op. Inputs and outputs have dtype and shape set; their data is device
 * memory, except inputs at positions node_input_on_host() names, which are host memory. Outputs
 * are NOT zero-filled: write every element. Enqueue work on be->stream only and do not
 * synchronize. Set *handled = false (return GRAFT_OK) for a case it does not cover (a dtype, an
 * attribute); the backend then runs the CPU reference on copies. Per-node state (descriptors,
 * plans) goes in *state, freed with free_state. */
typedef graft_status (*cuda_kernel_fn)(cuda_backend *be, const op_call *call, void **state,
                                       bool *handled);
struct cuda_kernel {
    const char *op;
    cuda_kernel_fn run;
    void (*free_state)(void *state);
};

/* A fused group kind of the GPU (src/graph/fusion_groups.h: match, run, free_state; on_backend
 * there marks the nodes on the device). */
typedef fusion_rule cuda_fusion; /* run's `backend` is the cuda_backend */

/* Fusion tables, each ending with {NULL, NULL, NULL, NULL}; tried in this order. */
extern const cuda_fusion cuda_attention_fusions[]; /* cuda_fuse_attention.c */
extern const cuda_fusion cuda_bert_fusions[];      /* cuda_fuse_bert.c */
extern const cuda_fusion cuda_conv_fusions[];      /* cuda_fuse_conv.c */

/* Kernel tables, one per op family file, each ending with {NULL, NULL, NULL}. */
extern const cuda_kernel cuda_elementwise_kernels[]; /* cuda_elementwise.c */
extern const cuda_kernel cuda_reduce_kernels[];      /* cuda_reduce.c */
extern const cuda_kernel cuda_tensor_kernels[];      /* cuda_tensor.c */
extern const cuda_kernel cuda_norm_kernels[];        /* cuda_norm.c: Instance/GroupNorm, Resize */
extern const cuda_kernel cuda_conv_kernels[];        /* cuda_conv.c: Conv, pools (cuDNN) */
extern const cuda_kernel cuda_matmul_kernels[];      /* cuda_matmul.c: MatMul, Gemm (cuBLASLt) */
extern const cuda_kernel cuda_backward_kernels[];    /* cuda_backward.c: Backward (training) */
extern const cuda_kernel cuda_optimizer_kernels[];   /* cuda_optimizer.c: OptimizerStep */
extern const cuda_kernel cuda_train_loss_kernels[];  /* cuda_train_loss.c: TrainLoss */

/* Error helpers: set e with what failed and the library's own message; return the status. */
graft_status cuda_fail(graft_err *e, cudaError_t err, const char *what);
graft_status cudnn_fail(graft_err *e, cudnnStatus_t st, const char *what);
graft_status cublas_fail(graft_err *e, cublasStatus_t st, const char *what);
/* cuda_fail when err is not cudaSuccess, else GRAFT_OK. */
static inline graft_status cuda_fail_if(graft_err *e, cudaError_t err, const char *what) {
    return err == cudaSuccess ? GRAFT_OK : cuda_fail(e, err, what);
}
#define CUDA_TRY(e, expr, what)                                                                    \
    do {                                                                                           \
        cudaError_t cuda_try_ = (expr);                                                            \
        if (cuda_try_ != cudaSuccess) return cuda_fail((e), cuda_try_, (what));                    \
    } while (0)
#define CUDNN_TRY(e, expr, what)                                                                   \
    do {                                                                                           \
        cudnnStatus_t cudnn_try_ = (expr);                                                         \
        if (cudnn_try_ != CUDNN_STATUS_SUCCESS) return cudnn_fail((e), cudnn_try_, (what));        \
    } while (0)
#define CUBLAS_TRY(e, expr, what)                                                                  \
    do {                                                                                           \
        cublasStatus_t cublas_try_ = (expr);                                                       \
        if (cublas_try_ != CUBLAS_STATUS_SUCCESS) return cublas_fail((e), cublas_try_, (what));    \
    } while (0)

/* Device memory from the backend's stream-ordered pool; an out-of-memory error names the bytes
 * asked for and the bytes free. Temporaries: allocate, use on be->stream, free on be->stream. */
graft_status cuda_malloc(cuda_backend *be, size_t bytes, void **out, graft_err *e);
void cuda_free(cuda_backend *be, void *ptr);
/* The shared workspace, at least `bytes` large (valid until the next call). */
graft_status cuda_workspace(cuda_backend *be, size_t bytes, void **out, graft_err *e);

/* Host <-> device copies through pinned staging buffers (cuda_transfer.c). An upload returns
 * once the source has been read (the device copy completes in stream order); a download
 * returns with the data in dst. */
graft_status cuda_upload(cuda_backend *be, void *dst, const void *src, size_t bytes, graft_err *e);
graft_status cuda_download(cuda_backend *be, void *dst, const void *src, size_t bytes,
                           graft_err *e);
/* An upload from pinned host memory on the copy stream, beside the work queued after it (it
 * waits for the work queued before it); cuda_wait_uploads makes be->stream wait for the uploads
 * into [ptr, ptr + bytes) (on the device); cuda_sync_uploads waits for all of them on the host. */
graft_status cuda_upload_async(cuda_backend *be, void *dst, const void *src, size_t bytes,
                               graft_err *e);
graft_status cuda_wait_uploads(cuda_backend *be, const void *ptr, size_t bytes, graft_err *e);
graft_status cuda_sync_uploads(cuda_backend *be, graft_err *e);
void cuda_transfer_fini(cuda_backend *be);

/* Channels-last activations (cuda_layout.c). The plan for a placement (src/graph/layout_plan.c);
 * whether input k / output k of a call is channels-last: its logical dims stay (N, C, H, W),
 * its data is laid out (N, H, W, C). */
void cuda_plan_layouts(cuda_backend *be, const ir_graph *g, const unsigned char *on_dev);
bool cuda_in_nhwc(const cuda_backend *be, const op_call *c, int k);
bool cuda_out_nhwc(const cuda_backend *be, const op_call *c, int k);
/* dst = src (logical dims N, C, H, W; elements of elem bytes) from NCHW to NHWC (to_nhwc) or
 * back, on the stream. */
graft_status cuda_nhwc_copy(cuda_backend *be, void *dst, const void *src, const int64_t *dims,
                            size_t elem, bool to_nhwc, graft_err *e);
/* One node: its kernel when it takes its tensors' layouts, else on NCHW copies of them. */
graft_status cuda_run_layout(cuda_backend *be, int node_index, const op_call *call);
/* The kernel of an op type, or NULL (cuda_backend.c). */
const cuda_kernel *cuda_find_kernel(const char *op);
/* One node's own kernel; *handled = false when it does not cover the call (cuda_backend.c). */
graft_status cuda_try_kernel(cuda_backend *be, int node_index, const op_call *call, bool *handled);
/* One node through its kernel or else the CPU reference, all tensors taken as they are. */
graft_status cuda_run_plain(cuda_backend *be, int node_index, const op_call *call);

/* Launch checks: after a kernel launch, report a launch error (bad configuration) at once. */
graft_status cuda_check_launch(graft_err *e, const char *what);

#endif

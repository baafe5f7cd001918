/* cuda_backward.h: the Backward node (src/ops/backward.h) on the GPU: the dispatcher
 * (cuda_backward.c) and the rules per forward op family, f32 (other dtypes go to the CPU). */
#ifndef GRAFT_CUDA_BACKWARD_H
#define GRAFT_CUDA_BACKWARD_H

#include "cuda_internal.h"

/* A rule's per-node state (descriptors, plans): the rule sets p and free_fn (NULL: nothing to
 * free) on first use; the dispatcher frees it with the node's kernel state. */
typedef struct cuda_bwd_state {
    const char *op; /* the forward op the state was made for */
    void *p;
    void (*free_fn)(void *p);
} cuda_bwd_state;

/* One Backward call seen as its forward op's gradient. Every present tensor is f32 device
 * memory in NCHW (plain row-major) layout; dout[i] NULL: no gradient flows into forward output
 * i (zero); din[i] NULL: the gradient of forward input i is not wanted. A rule overwrites each
 * din[i] it is given (every element; the buffers are not zero-filled) and enqueues its work on
 * be->stream without synchronizing. The node (call->node) carries the forward's attributes. */
typedef struct cuda_bwd {
    cuda_backend *be;
    const op_call *call;
    const char *op; /* the forward op type */
    int fwd_opset;
    const tensor *const *in; /* forward inputs (n_in; NULL where omitted) */
    int n_in;
    const tensor *const *out; /* forward outputs (n_out) */
    int n_out;
    const tensor *const *dout; /* n_out */
    tensor *const *din;        /* n_in */
    cuda_bwd_state *state;
} cuda_bwd;

/* A rule: *handled = false (returning GRAFT_OK) for a case it leaves to the CPU reference. */
typedef graft_status (*cuda_bwd_rule)(const cuda_bwd *b, bool *handled);

/* cuda_backward_conv.c: Conv (incl. grouped, strided, dilated, padded; dX, dW, dB via cuDNN),
 * MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, BatchNormalization (inference mode). */
graft_status cuda_bwd_conv(const cuda_bwd *b, bool *handled);
graft_status cuda_bwd_pool(const cuda_bwd *b, bool *handled);
graft_status cuda_bwd_batchnorm(const cuda_bwd *b, bool *handled);
/* cuda_backward_linalg.c: Gemm and MatMul (cuBLASLt, batched and broadcast). */
graft_status cuda_bwd_gemm(const cuda_bwd *b, bool *handled);
graft_status cuda_bwd_matmul(const cuda_bwd *b, bool *handled);
/* cuda_backward_eltwise.c: element-wise ops and activations (broadcast gradients summed back to
 * an input's shape), LayerNormalization, Softmax, and the shape ops that only move data. */
graft_status cuda_bwd_eltwise(const cuda_bwd *b, bool *handled);
/* cuda_backward_index.c: Gather (any axis, int32/int64 indices, negative and duplicate ones
 * summed deterministically), Slice (steps of either sign), Pad in constant mode (negative pads
 * too); Pad's other modes go to the CPU. */
graft_status cuda_bwd_index(const cuda_bwd *b, bool *handled);

/* Whether t is present and float32. */
static inline bool cuda_bwd_f32(const tensor *t) {
    return t && t->dtype == GRAFT_DTYPE_F32;
}
/* Whether any input gradient past the first is asked for (the shape and index ops' other inputs:
 * shapes, axes, indices, starts, pads have none; Pad's constant_value has one, left to the
 * CPU reference). */
static inline bool cuda_bwd_wants_extra(const cuda_bwd *b) {
    for (int i = 1; i < b->n_in; i++)
        if (b->din[i]) return true;
    return false;
}

/* An error naming the node. */
graft_status cuda_bwd_fail(const cuda_bwd *b, graft_status st, const char *what);

#endif

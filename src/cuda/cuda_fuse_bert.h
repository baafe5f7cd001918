/* cuda_fuse_bert.h: what the CUDA backend's BERT groups (cuda_fuse_bert.c) and its attention group
 * (cuda_fuse_attention.c) share: checks on the members' tensors, the scale-mask-softmax group. */
#ifndef GRAFT_CUDA_FUSE_BERT_H
#define GRAFT_CUDA_FUSE_BERT_H

#include "cuda_internal.h"

static inline bool is_float_dt(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F16 || dt == GRAFT_DTYPE_BF16;
}

static inline bool same_shape(const tensor *a, const tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* t is a device tensor of dtype dt with `numel` elements. */
static inline bool is_dt_numel(const tensor *t, graft_dtype dt, int64_t numel) {
    return t && t->dtype == dt && tensor_numel(t) == numel && (numel == 0 || t->data);
}

/* Input k of a member call that is not the value `v` (by value index), for a two-input node. */
static inline const tensor *other_call_input(const op_call *c, int v) {
    if (c->n_in != 2) return NULL;
    if (c->node->inputs[0] == v && c->node->inputs[1] != v) return c->in[1];
    if (c->node->inputs[1] == v && c->node->inputs[0] != v) return c->in[0];
    return NULL;
}

static inline graft_status launched(const op_call *c, cudaError_t err, const char *what) {
    if (err == cudaSuccess) return GRAFT_OK;
    return op_error(c->node, c->err, GRAFT_E_BACKEND, "%s: %s (%s)", what, cudaGetErrorString(err),
                    cudaGetErrorName(err));
}

/* Div(s, c) or Mul(s, c) / Mul(c, s) with c a constant scalar, read only by Add(., mask), read
 * only by a Softmax (3 members), and its fused kernel. */
int cuda_match_scaled_masked_softmax(const ir_graph *g, int first, const unsigned char *on_dev,
                                     const int *readers, int *members, int max);
graft_status cuda_run_scaled_masked_softmax(void *impl, const op_call *calls, int n, void **state,
                                            bool *handled);
/* The mask's element strides along the scores' dims (padded to 4 on the left), 0 where the
 * mask broadcasts; false when the mask does not broadcast to the scores. */
bool cuda_mask_strides(const tensor *mask, const int64_t dims4[4], int rank, int64_t ms[4]);

#endif

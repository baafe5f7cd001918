/* cuda_layout.c: channels-last (NHWC) activations on the GPU: the plan (src/graph/layout_plan.c)
 * per placement, the layout of a call's tensors, NCHW <-> NHWC copies, and running a node whose
 * kernel cannot take its tensors' layouts on NCHW copies of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/layout_plan.h"
#include "cuda_groups.h"
#include "cuda_internal.h"
#include "tensor_launch.h"

void cuda_plan_layouts(cuda_backend *be, const ir_graph *g, const unsigned char *on_dev) {
    int marked = layout_state_plan(&be->layout, g, on_dev, false, be->nchw_only);
    if (!marked || !be->log) return;
    char msg[128];
    snprintf(msg, sizeof msg, "channels-last (NHWC) activations: %d", marked);
    be->log(be->log_user, GRAFT_LOG_DEBUG, msg);
}

bool cuda_in_nhwc(const cuda_backend *be, const op_call *c, int k) {
    return layout_in_nhwc(&be->layout, c, k);
}

bool cuda_out_nhwc(const cuda_backend *be, const op_call *c, int k) {
    return layout_out_nhwc(&be->layout, c, k);
}

graft_status cuda_nhwc_copy(cuda_backend *be, void *dst, const void *src, const int64_t *dims,
                            size_t elem, bool to_nhwc, graft_err *e) {
    int64_t n = dims[0], c = dims[1], hw = dims[2] * dims[3];
    if (n * c * hw == 0) return GRAFT_OK;
    if (c == 1 || hw == 1) {
        CUDA_TRY(e,
                 cudaMemcpyAsync(dst, src, (size_t)(n * c * hw) * elem, cudaMemcpyDeviceToDevice,
                                 be->stream),
                 "copying between NCHW and NHWC");
        return GRAFT_OK;
    }
    /* dst is dense over d; s gives each of d's axes' stride in src */
    int64_t d[3] = {n, to_nhwc ? hw : c, to_nhwc ? c : hw};
    int64_t s[3] = {c * hw, 1, to_nhwc ? hw : c};
    CUDA_TRY(e, cuda_tensor_copy_tiled(dst, src, (int)elem, 3, d, s, 1, be->stream),
             to_nhwc ? "copying NCHW to NHWC" : "copying NHWC to NCHW");
    return GRAFT_OK;
}

#define LAYOUT_IO 16

/* The node on NCHW copies of its channels-last inputs and outputs. */
static graft_status run_on_nchw_copies(cuda_backend *be, int node_index, const op_call *c) {
    if (c->n_in > LAYOUT_IO || c->n_out > LAYOUT_IO)
        return op_error(c->node, c->err, GRAFT_E_UNSUPPORTED, "too many tensors for NHWC");
    tensor in[LAYOUT_IO], out[LAYOUT_IO];
    const tensor *in_p[LAYOUT_IO];
    tensor *out_p[LAYOUT_IO];
    void *tmp[2 * LAYOUT_IO] = {0};
    bool in_conv[LAYOUT_IO] = {0}, out_conv[LAYOUT_IO] = {0};
    graft_status st = GRAFT_OK;
    for (int k = 0; k < c->n_in; k++) {
        in_p[k] = c->in[k];
        in_conv[k] = cuda_in_nhwc(be, c, k) && c->in[k]->ndim == 4;
        if (!in_conv[k] || st != GRAFT_OK) continue;
        in[k] = *c->in[k];
        st = cuda_malloc(be, (size_t)tensor_nbytes(&in[k]), &tmp[k], c->err);
        if (st == GRAFT_OK)
            st = cuda_nhwc_copy(be, tmp[k], c->in[k]->data, in[k].dims,
                                graft_dtype_size(in[k].dtype), false, c->err);
        in[k].data = tmp[k];
        in_p[k] = &in[k];
    }
    for (int k = 0; k < c->n_out; k++) {
        out_p[k] = c->out[k];
        out_conv[k] = cuda_out_nhwc(be, c, k) && c->out[k]->ndim == 4;
        if (!out_conv[k] || st != GRAFT_OK) continue;
        out[k] = *c->out[k];
        st = cuda_malloc(be, (size_t)tensor_nbytes(&out[k]), &tmp[LAYOUT_IO + k], c->err);
        out[k].data = tmp[LAYOUT_IO + k];
        out_p[k] = &out[k];
    }
    if (st == GRAFT_OK) {
        op_call plain = *c;
        plain.in = in_p;
        plain.out = out_p;
        be->layout.plain = true;
        st = cuda_run_plain(be, node_index, &plain);
        be->layout.plain = false;
    }
    for (int k = 0; k < c->n_out && st == GRAFT_OK; k++)
        if (out_conv[k])
            st = cuda_nhwc_copy(be, c->out[k]->data, out[k].data, out[k].dims,
                                graft_dtype_size(out[k].dtype), true, c->err);
    for (int k = 0; k < 2 * LAYOUT_IO; k++) cuda_free(be, tmp[k]);
    return st;
}

graft_status cuda_run_layout(cuda_backend *be, int node_index, const op_call *c) {
    if (!layout_call_has_nhwc(&be->layout, c)) return cuda_run_plain(be, node_index, c);
    layout_kind kind = layout_op_kind(c->node);
    if ((kind == LAYOUT_UNARY || kind == LAYOUT_BINARY) && layout_free_call(&be->layout, c, kind)) {
        be->layout.plain = true; /* the kernel sees plain same-shaped arrays */
        graft_status st = cuda_run_plain(be, node_index, c);
        be->layout.plain = false;
        return st;
    }
    if (kind == LAYOUT_CONV || kind == LAYOUT_POOL || kind == LAYOUT_GLOBAL) {
        bool handled = false;
        TRY(cuda_try_kernel(be, node_index, c, &handled));
        if (handled) return GRAFT_OK;
    }
    return run_on_nchw_copies(be, node_index, c);
}

/* cpu_layout.c: channels-last (NHWC) f32 activations on the CPU, for oneDNN's convolutions
 * (src/graph/layout_plan.c plans them, as for the GPU's half precision): the layout of a call's
 * tensors, NCHW <-> NHWC copies, and running a node whose kernel cannot take its tensors'
 * layouts on NCHW copies of them. */
#include <stdlib.h>
#include <string.h>

#include "../graph/layout_plan.h"
#include "cpu_backend.h"

void cpu_plan_layouts(cpu_backend *be, const ir_graph *g, const unsigned char *on_host) {
    layout_state_plan(&be->layout, g, on_host, true,
                      be->nchw_only || be->reference_only || !be->dnnl_engine);
}

bool cpu_in_nhwc(const cpu_backend *be, const op_call *c, int k) {
    return layout_in_nhwc(&be->layout, c, k);
}

bool cpu_out_nhwc(const cpu_backend *be, const op_call *c, int k) {
    return layout_out_nhwc(&be->layout, c, k);
}

/* dst = src (f32, logical dims N, C, H, W) from NCHW to NHWC (to_nhwc) or back. */
static void nhwc_copy(float *dst, const float *src, const int64_t *dims, bool to_nhwc) {
    int64_t n = dims[0], c = dims[1], hw = dims[2] * dims[3];
#pragma omp parallel for collapse(2) if (n * c * hw >= 65536) schedule(static)
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < hw; p++)
            for (int64_t ch = 0; ch < c; ch++) {
                int64_t nchw = (b * c + ch) * hw + p, nhwc = (b * hw + p) * c + ch;
                if (to_nhwc)
                    dst[nhwc] = src[nchw];
                else
                    dst[nchw] = src[nhwc];
            }
}

#define LAYOUT_IO 16

/* The node on NCHW copies of its channels-last inputs and outputs. */
static graft_status run_on_nchw_copies(cpu_backend *be, int node_index, const op_call *c) {
    if (c->n_in > LAYOUT_IO || c->n_out > LAYOUT_IO)
        return op_error(c->node, c->err, GRAFT_E_UNSUPPORTED, "too many tensors for NHWC");
    tensor in[LAYOUT_IO], out[LAYOUT_IO];
    const tensor *in_p[LAYOUT_IO];
    tensor *out_p[LAYOUT_IO];
    void *tmp[2 * LAYOUT_IO] = {0};
    graft_status st = GRAFT_OK;
    for (int k = 0; k < c->n_in; k++) {
        in_p[k] = c->in[k];
        if (!cpu_in_nhwc(be, c, k) || c->in[k]->ndim != 4 || c->in[k]->dtype != GRAFT_DTYPE_F32)
            continue;
        in[k] = *c->in[k];
        tmp[k] = malloc((size_t)tensor_nbytes(&in[k]) + 1);
        if (!tmp[k]) {
            st = op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "an NCHW copy");
            break;
        }
        nhwc_copy(tmp[k], c->in[k]->data, in[k].dims, false);
        in[k].data = tmp[k];
        in_p[k] = &in[k];
    }
    bool conv[LAYOUT_IO] = {0};
    for (int k = 0; k < c->n_out && st == GRAFT_OK; k++) {
        out_p[k] = c->out[k];
        conv[k] =
            cpu_out_nhwc(be, c, k) && c->out[k]->ndim == 4 && c->out[k]->dtype == GRAFT_DTYPE_F32;
        if (!conv[k]) continue;
        out[k] = *c->out[k];
        tmp[LAYOUT_IO + k] = calloc(1, (size_t)tensor_nbytes(&out[k]) + 1);
        if (!tmp[LAYOUT_IO + k]) {
            st = op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "an NCHW copy");
            break;
        }
        out[k].data = tmp[LAYOUT_IO + k];
        out_p[k] = &out[k];
    }
    if (st == GRAFT_OK) {
        op_call plain = *c;
        plain.in = in_p;
        plain.out = out_p;
        be->layout.plain = true;
        st = cpu_run_plain(be, node_index, &plain);
        be->layout.plain = false;
    }
    for (int k = 0; k < c->n_out && st == GRAFT_OK; k++)
        if (conv[k]) nhwc_copy(c->out[k]->data, out[k].data, out[k].dims, true);
    for (int k = 0; k < 2 * LAYOUT_IO; k++) free(tmp[k]);
    return st;
}

/* GlobalAveragePool of a channels-last f32 X: the mean over (H, W) of each (n, c), summed in
 * double as the reference kernel does. False when it does not apply. */
static bool global_average_nhwc(const cpu_backend *be, const op_call *c) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    if (!cpu_in_nhwc(be, c, 0) || cpu_out_nhwc(be, c, 0) || x->ndim != 4 ||
        x->dtype != GRAFT_DTYPE_F32 || y->dtype != GRAFT_DTYPE_F32 ||
        tensor_numel(y) != x->dims[0] * x->dims[1])
        return false;
    int64_t n = x->dims[0], ch = x->dims[1], hw = x->dims[2] * x->dims[3];
    const float *xd = x->data;
    float *yd = y->data;
    double *sums = calloc((size_t)(n * ch) + 1, sizeof(double));
    if (!sums) return false; /* the NCHW path then runs it */
        /* channels are contiguous: add whole rows of C, one (n) image per thread */
#pragma omp parallel for if (n > 1 && n * ch * hw >= 65536) schedule(static)
    for (int64_t b = 0; b < n; b++) {
        double *sb = sums + b * ch;
        for (int64_t p = 0; p < hw; p++) {
            const float *row = xd + (b * hw + p) * ch;
            for (int64_t k = 0; k < ch; k++) sb[k] += row[k];
        }
        for (int64_t k = 0; k < ch; k++) yd[b * ch + k] = hw ? (float)(sb[k] / (double)hw) : 0.0f;
    }
    free(sums);
    return true;
}

graft_status cpu_run_layout(cpu_backend *be, int node_index, const op_call *c) {
    if (!layout_call_has_nhwc(&be->layout, c)) return cpu_run_plain(be, node_index, c);
    layout_kind kind = layout_op_kind(c->node);
    if ((kind == LAYOUT_UNARY || kind == LAYOUT_BINARY) && layout_free_call(&be->layout, c, kind)) {
        be->layout.plain = true; /* the kernel sees plain same-shaped arrays */
        graft_status st = cpu_run_plain(be, node_index, c);
        be->layout.plain = false;
        return st;
    }
    if (kind == LAYOUT_GLOBAL && global_average_nhwc(be, c)) return GRAFT_OK;
    if (kind == LAYOUT_CONV || kind == LAYOUT_POOL) {
        bool handled = false;
        TRY(cpu_try_fast(be, node_index, c, &handled));
        if (handled) return GRAFT_OK;
    }
    return run_on_nchw_copies(be, node_index, c);
}

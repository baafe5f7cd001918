/* dnnl_fuse.c: the CPU's fused Conv groups: Conv -> Relu, Conv -> Add -> Relu and Conv -> Add
 * (a residual) as one oneDNN convolution with post-ops (binary add, eltwise ReLU), so that the
 * convolution's output is not written and read back again. Planned and run through
 * src/graph/fusion_groups.c; cases the fused primitive does not take run member by member. */
#include "graft_config.h"

#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"

/* ---- matching ------------------------------------------------------------------------------- */

static int match_add_relu(const ir_graph *g, int first, const unsigned char *on_be,
                          const int *readers, int *members, int max_members) {
    int add = fusion_after_conv(g, first, on_be, readers, "Add");
    if (add < 0 || max_members < 3) return 0;
    int relu = fusion_sole_reader(g, g->nodes[add].outputs[0], add, on_be, readers, "Relu");
    if (relu < 0 || g->nodes[relu].n_out != 1 || g->nodes[relu].outputs[0] < 0) return 0;
    members[0] = first;
    members[1] = add;
    members[2] = relu;
    return 3;
}

static int match_pair(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                      int *members, int max_members, const char *op) {
    int r = fusion_after_conv(g, first, on_be, readers, op);
    if (r < 0 || max_members < 2) return 0;
    members[0] = first;
    members[1] = r;
    return 2;
}

static int match_relu(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                      int *members, int max_members) {
    return match_pair(g, first, on_be, readers, members, max_members, "Relu");
}

static int match_add(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                     int *members, int max_members) {
    return match_pair(g, first, on_be, readers, members, max_members, "Add");
}

/* ---- running -------------------------------------------------------------------------------- */

static bool same_shape(const tensor *a, const tensor *b) {
    return a && b && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* Conv (calls[0]) [-> Add (a residual of Y's shape, no broadcasting)] [-> Relu], in f32 with
 * Y written to the last member's output; anything else declines (members run one by one). */
static graft_status run_group(void *impl, const op_call *calls, int n, void **state, bool *handled,
                              bool add, bool relu) {
    cpu_backend *be = impl;
    *handled = false;
    if (n != 1 + (add ? 1 : 0) + (relu ? 1 : 0)) return GRAFT_OK;
    const op_call *c = &calls[0], *last = &calls[n - 1];
    if (!dnnl_conv_covers(be, c)) return GRAFT_OK;
    const tensor *y0 = c->out[0];
    if (y0->dtype != GRAFT_DTYPE_F32 || last->n_out < 1 || !same_shape(last->out[0], y0) ||
        !last->out[0]->data)
        return GRAFT_OK;
    const tensor *residual = NULL;
    if (add) {
        const op_call *a = &calls[1];
        if (a->n_in != 2 || a->n_out < 1) return GRAFT_OK;
        int conv_out = c->node->outputs[0];
        int k = a->node->inputs[0] == conv_out ? 0 : a->node->inputs[1] == conv_out ? 1 : -1;
        if (k < 0) return GRAFT_OK;
        residual = a->in[1 - k];
        if (!same_shape(a->in[k], y0) || !same_shape(residual, y0) || !same_shape(a->out[0], y0) ||
            !residual->data || cpu_in_nhwc(be, a, 1 - k) != cpu_out_nhwc(be, c, 0))
            return GRAFT_OK;
    }
    /* the group's output in the layout the convolution writes (the plan keeps them alike) */
    if (cpu_out_nhwc(be, last, 0) != cpu_out_nhwc(be, c, 0)) return GRAFT_OK;
    if (relu && (last->n_in < 1 || !same_shape(last->in[0], y0))) return GRAFT_OK;
    /* the convolution's call, writing the group's output */
    tensor *out[1] = {last->out[0]};
    op_call conv = *c;
    conv.out = out;
    conv.n_out = 1;
    dnnl_conv_post post = {add, relu};
    return dnnl_conv_run(be, &conv, &post, residual, state, handled);
}

static graft_status run_add_relu(void *impl, const op_call *calls, int n, void **state,
                                 bool *handled) {
    return run_group(impl, calls, n, state, handled, true, true);
}

static graft_status run_relu(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    return run_group(impl, calls, n, state, handled, false, true);
}

static graft_status run_add(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    return run_group(impl, calls, n, state, handled, true, false);
}

/* Longer groups first: Conv -> Add -> Relu before Conv -> Add. */
const fusion_rule dnnl_conv_fusions[] = {
    {"conv_add_relu", match_add_relu, run_add_relu, dnnl_free_state},
    {"conv_relu", match_relu, run_relu, dnnl_free_state},
    {"conv_add", match_add, run_add, dnnl_free_state},
    {NULL, NULL, NULL, NULL},
};

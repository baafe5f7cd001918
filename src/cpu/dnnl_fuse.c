/* dnnl_fuse.c: the CPU's fused Conv groups: Conv -> activation (Relu, Clip as ReLU6, HardSwish,
 * Sigmoid, ...), Conv -> Sigmoid -> Mul (SiLU, as exporters write it), Conv -> Add -> activation
 * and Conv -> Add (a residual) as one oneDNN convolution with post-ops (sum, eltwise), so that
 * the convolution's output is not written and read back again. Planned and run through
 * src/graph/fusion_groups.c; cases the fused primitive does not take run member by member. */
#include "graft_config.h"

#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"

/* ---- matching ------------------------------------------------------------------------------- */

/* Ops a post-op may stand for; whether this call's form has a oneDNN algorithm is decided when
 * the group runs (dnnl_eltwise_alg; else the members run one by one). */
static const char *const ACTIVATIONS[] = {"Relu", "Clip", "HardSwish", "LeakyRelu", "Sigmoid",
                                          "Tanh", "Elu",  "Mish",      "Gelu"};

static int activation_reader(const ir_graph *g, int v, int producer, const unsigned char *on_be,
                             const int *readers) {
    for (size_t k = 0; k < sizeof ACTIVATIONS / sizeof *ACTIVATIONS; k++) {
        int r = fusion_sole_reader(g, v, producer, on_be, readers, ACTIVATIONS[k]);
        if (r >= 0) return g->nodes[r].n_out == 1 && g->nodes[r].outputs[0] >= 0 ? r : -1;
    }
    return -1;
}

static int match_add_act(const ir_graph *g, int first, const unsigned char *on_be,
                         const int *readers, int *members, int max_members) {
    int add = fusion_after_conv(g, first, on_be, readers, "Add");
    if (add < 0 || max_members < 3) return 0;
    int act = activation_reader(g, g->nodes[add].outputs[0], add, on_be, readers);
    if (act < 0) return 0;
    members[0] = first;
    members[1] = add;
    members[2] = act;
    return 3;
}

static int match_act(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                     int *members, int max_members) {
    const ir_node *c = &g->nodes[first];
    if (!fusion_is_op(c, "Conv") || !on_be[first] || c->n_in < 2 || c->n_out != 1 ||
        max_members < 2)
        return 0;
    int act = activation_reader(g, c->outputs[0], first, on_be, readers);
    if (act < 0) return 0;
    members[0] = first;
    members[1] = act;
    return 2;
}

/* The first node after `after` reading v of type op; -1 when none. */
static int reader_of(const ir_graph *g, int v, int after, const char *op) {
    for (int i = after + 1; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].inputs[k] == v) return fusion_is_op(&g->nodes[i], op) ? i : -1;
    return -1;
}

/* Conv -> Sigmoid -> Mul(conv, sigmoid): SiLU, read by nothing else. */
static int match_silu(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                      int *members, int max_members) {
    const ir_node *c = &g->nodes[first];
    if (!fusion_is_op(c, "Conv") || !on_be[first] || c->n_in < 2 || c->n_out != 1 ||
        max_members < 3)
        return 0;
    int y = c->outputs[0];
    if (y < 0 || readers[y] != 2) return 0;
    int sig = reader_of(g, y, first, "Sigmoid");
    if (sig < 0 || !on_be[sig] || g->nodes[sig].n_out != 1) return 0;
    int s = g->nodes[sig].outputs[0];
    int mul = fusion_sole_reader(g, s, sig, on_be, readers, "Mul");
    if (mul < 0 || g->nodes[mul].n_in != 2 || g->nodes[mul].n_out != 1) return 0;
    const ir_node *m = &g->nodes[mul];
    bool pair =
        (m->inputs[0] == y && m->inputs[1] == s) || (m->inputs[0] == s && m->inputs[1] == y);
    if (!pair || m->outputs[0] < 0) return 0;
    members[0] = first;
    members[1] = sig;
    members[2] = mul;
    return 3;
}

static int match_add(const ir_graph *g, int first, const unsigned char *on_be, const int *readers,
                     int *members, int max_members) {
    int r = fusion_after_conv(g, first, on_be, readers, "Add");
    if (r < 0 || max_members < 2) return 0;
    members[0] = first;
    members[1] = r;
    return 2;
}

/* ---- running -------------------------------------------------------------------------------- */

static bool same_shape(const tensor *a, const tensor *b) {
    return a && b && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* Conv (calls[0]) [-> Add (a residual of Y's shape, no broadcasting)] [-> the activation post
 * describes], in f32 with Y written to the last member's output; anything else declines
 * (members run one by one). n_act: how many members make the activation (SiLU's two). */
static graft_status run_group(void *impl, const op_call *calls, int n, void **state, bool *handled,
                              bool add, int n_act, dnnl_conv_post post) {
    cpu_backend *be = impl;
    *handled = false;
    if (n != 1 + (add ? 1 : 0) + n_act) return GRAFT_OK;
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
    for (int k = n - n_act; k < n; k++)
        if (calls[k].n_in < 1 || !same_shape(calls[k].in[0], y0) ||
            !same_shape(calls[k].out[0], y0))
            return GRAFT_OK;
    /* the convolution's call, writing the group's output */
    tensor *out[1] = {last->out[0]};
    op_call conv = *c;
    conv.out = out;
    conv.n_out = 1;
    post.add = add;
    return dnnl_conv_run(be, &conv, &post, residual, state, handled);
}

/* The activation of the group's last member as a post-op; false: oneDNN has none for it. */
static bool last_activation(const op_call *calls, int n, dnnl_conv_post *post) {
    memset(post, 0, sizeof *post);
    return dnnl_eltwise_alg(&calls[n - 1], &post->act, &post->alpha, &post->beta);
}

static graft_status run_add_act(void *impl, const op_call *calls, int n, void **state,
                                bool *handled) {
    dnnl_conv_post post;
    *handled = false;
    if (!last_activation(calls, n, &post)) return GRAFT_OK;
    return run_group(impl, calls, n, state, handled, true, 1, post);
}

static graft_status run_act(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    dnnl_conv_post post;
    *handled = false;
    if (!last_activation(calls, n, &post)) return GRAFT_OK;
    return run_group(impl, calls, n, state, handled, false, 1, post);
}

static graft_status run_silu(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    dnnl_conv_post post = {false, (int)dnnl_eltwise_swish, 1.0f, 0.0f};
    return run_group(impl, calls, n, state, handled, false, 2, post);
}

static graft_status run_add(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    dnnl_conv_post post = {true, 0, 0.0f, 0.0f};
    return run_group(impl, calls, n, state, handled, true, 0, post);
}

/* Longer groups first: Conv -> Add -> Relu before Conv -> Add. */
const fusion_rule dnnl_conv_fusions[] = {
    {"conv_add_act", match_add_act, run_add_act, dnnl_free_state},
    {"conv_silu", match_silu, run_silu, dnnl_free_state},
    {"conv_act", match_act, run_act, dnnl_free_state},
    {"conv_add", match_add, run_add, dnnl_free_state},
    {NULL, NULL, NULL, NULL},
};

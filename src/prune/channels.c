/* channels.c: structured channel pruning: removes the chosen Conv output channels (see
 * channel_groups.c) and shrinks every weight that reads them, giving a smaller dense graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/build.h"
#include "channel_groups.h"

/* dst = src without the entries of `axis` whose keep flag is false. */
static graft_status slice_axis(const tensor *src, int axis, const bool *keep, int64_t kept,
                               tensor *dst, graft_err *e) {
    int64_t dims[GRAFT_MAX_DIMS], outer = 1, inner = 1, n = src->dims[axis];
    memcpy(dims, src->dims, sizeof(int64_t) * (size_t)src->ndim);
    dims[axis] = kept;
    for (int d = 0; d < axis; d++) outer *= src->dims[d];
    for (int d = axis + 1; d < src->ndim; d++) inner *= src->dims[d];
    memset(dst, 0, sizeof *dst);
    TRY(tensor_make(dst, src->dtype, src->ndim, dims, e));
    const float *s = src->data;
    float *d = dst->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < n; c++) {
            if (!keep[c]) continue;
            memcpy(d, s + (o * n + c) * inner, sizeof(float) * (size_t)inner);
            d += inner;
        }
    return GRAFT_OK;
}

/* Replace input k of node i by a copy of it sliced along axis (keep NULL: unchanged). */
static graft_status shrink_input(ir_graph *g, int i, int k, int axis, const bool *keep,
                                 int64_t kept, graft_err *e) {
    int v = g->nodes[i].inputs[k];
    if (!keep || v < 0) return GRAFT_OK;
    const tensor *src = &g->values[v].data;
    if (axis >= src->ndim || src->dtype != GRAFT_DTYPE_F32)
        return err_set(e, GRAFT_E_INTERNAL,
                       "prune channels: node '%s': cannot slice '%s' on axis %d", g->nodes[i].name,
                       g->values[v].name, axis);
    tensor t;
    TRY(slice_axis(src, axis, keep, kept, &t, e));
    char name[300];
    snprintf(name, sizeof name, "%.280s.pruned", g->values[v].name);
    int nv;
    graft_status st = graph_add_const(g, name, &t, &nv, e);
    tensor_release(&t);
    if (st == GRAFT_OK) g->nodes[i].inputs[k] = nv;
    return st;
}

static void set_group(ir_node *n, int64_t group) {
    for (int a = 0; a < n->n_attrs; a++)
        if (!strcmp(n->attrs[a].name, "group")) n->attrs[a].i = group;
}

/* The folded BN's gamma follows the output channels it belongs to. */
static void shrink_gamma(ir_node *n, const bool *keep, int64_t len) {
    if (!n->bn_gamma) return;
    int64_t k = 0;
    for (int64_t c = 0; c < len; c++)
        if (keep[c]) n->bn_gamma[k++] = n->bn_gamma[c];
}

static graft_status rewrite_conv(ir_graph *g, const chan_plan *p, int i, graft_err *e) {
    int roles = p->roles[i].roles;
    bool *out = NULL, *in = NULL;
    int64_t len, out_len = 0, out_kept = 0, in_kept = 0;
    graft_status st = GRAFT_OK;
    if (roles & (CHAN_SOURCE | CHAN_DEPTHWISE))
        st = chan_value_keep(p, g->nodes[i].outputs[0], &out, &out_len, &out_kept, e);
    if (st == GRAFT_OK && (roles & CHAN_CONV_IN))
        st = chan_value_keep(p, g->nodes[i].inputs[0], &in, &len, &in_kept, e);
    if (st == GRAFT_OK) st = shrink_input(g, i, 1, 0, out, out_kept, e);
    if (st == GRAFT_OK) st = shrink_input(g, i, 1, 1, in, in_kept, e);
    if (st == GRAFT_OK && g->nodes[i].n_in > 2) st = shrink_input(g, i, 2, 0, out, out_kept, e);
    if (st == GRAFT_OK && out && (roles & CHAN_DEPTHWISE)) set_group(&g->nodes[i], out_kept);
    if (st == GRAFT_OK && out) {
        ir_node *n = &g->nodes[i];
        if ((roles & CHAN_SOURCE) && n->loaded_channels < out_len) n->loaded_channels = out_len;
        shrink_gamma(n, out, out_len);
    }
    free(out);
    free(in);
    return st;
}

static graft_status rewrite_bn(ir_graph *g, const chan_plan *p, int i, graft_err *e) {
    bool *keep;
    int64_t len, kept;
    TRY(chan_value_keep(p, g->nodes[i].inputs[0], &keep, &len, &kept, e));
    graft_status st = GRAFT_OK;
    for (int k = 1; k < 5 && st == GRAFT_OK; k++) st = shrink_input(g, i, k, 0, keep, kept, e);
    free(keep);
    return st;
}

/* The per-channel constant of an element-wise op, broadcast against the tracked operand. */
static graft_status rewrite_eltwise(ir_graph *g, const chan_plan *p, int i, graft_err *e) {
    const ir_node *n = &g->nodes[i];
    int k = p->roles[i].const_input, t = n->inputs[1 - k];
    int axis = 1 - (g->values[n->outputs[0]].ndim - g->values[n->inputs[k]].data.ndim);
    bool *keep;
    int64_t len, kept;
    TRY(chan_value_keep(p, t, &keep, &len, &kept, e));
    graft_status st = GRAFT_OK;
    if (keep && axis >= 0 && g->values[n->inputs[k]].data.dims[axis] == len)
        st = shrink_input(g, i, k, axis, keep, kept, e);
    free(keep);
    return st;
}

/* Gemm/MatMul after a Flatten: channel c owns input features [c * spatial, (c + 1) * spatial). */
static graft_status rewrite_fc(ir_graph *g, const chan_plan *p, int i, graft_err *e) {
    const chan_role *r = &p->roles[i];
    bool *keep;
    int64_t len, kept;
    TRY(chan_value_keep(p, r->fc_value, &keep, &len, &kept, e));
    if (!keep) return GRAFT_OK;
    bool *features = malloc(sizeof(bool) * (size_t)(len * r->fc_spatial));
    graft_status st = GRAFT_OK;
    if (!features) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory slicing features");
    for (int64_t c = 0; c < len && features; c++)
        for (int64_t s = 0; s < r->fc_spatial; s++) features[c * r->fc_spatial + s] = keep[c];
    const ir_node *n = &g->nodes[i];
    int axis = !strcmp(n->op_type, "Gemm") && attr_i(n, "transB", 0) ? 1 : 0;
    if (st == GRAFT_OK) st = shrink_input(g, i, 1, axis, features, kept * r->fc_spatial, e);
    free(features);
    free(keep);
    return st;
}

graft_status prune_channels(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                            graft_err *e) {
    chan_plan p;
    TRY(chan_plan_build(g, o, &p, e));
    graft_status st = GRAFT_OK;
    for (int i = 0; i < p.n_nodes && st == GRAFT_OK; i++) {
        int roles = p.roles[i].roles;
        if (roles & (CHAN_SOURCE | CHAN_DEPTHWISE | CHAN_CONV_IN)) st = rewrite_conv(g, &p, i, e);
        if (st == GRAFT_OK && (roles & CHAN_BN)) st = rewrite_bn(g, &p, i, e);
        if (st == GRAFT_OK && (roles & CHAN_ELTWISE)) st = rewrite_eltwise(g, &p, i, e);
        if (st == GRAFT_OK && (roles & CHAN_FC)) st = rewrite_fc(g, &p, i, e);
    }
    if (st == GRAFT_OK && r) {
        r->units_removed += p.channels_removed;
        r->sparsity = p.channels_loaded ? (double)p.channels_gone / (double)p.channels_loaded : 0;
    }
    chan_plan_free(&p);
    return st;
}

/* heads.c: structured pruning of BERT-style encoders: whole attention heads (Q/K/V columns, the
 * output projection's rows, the head count in the Reshape targets) and feed-forward neurons. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/build.h"
#include "heads.h"

/* Keep the units of a 1-D or 2-D f32 constant along its columns (rows false) or rows; element
 * c belongs to unit c / group. The constant is replaced by the smaller tensor. */
static graft_status shrink(ir_value *v, const bool *keep, int group, bool rows, graft_err *e) {
    tensor *t = &v->data;
    int64_t n_rows = t->ndim == 2 ? t->dims[0] : 1, n_cols = t->dims[t->ndim - 1];
    int64_t along = rows ? n_rows : n_cols, kept = 0;
    for (int64_t i = 0; i < along; i++) kept += keep[i / group];
    int64_t dims[2] = {rows ? kept : n_rows, rows ? n_cols : kept};
    tensor n;
    if (t->ndim == 2)
        TRY(tensor_make(&n, GRAFT_DTYPE_F32, 2, dims, e));
    else
        TRY(tensor_make(&n, GRAFT_DTYPE_F32, 1, &kept, e));
    const float *src = t->data;
    float *dst = n.data;
    for (int64_t r = 0; r < n_rows; r++) {
        if (rows && !keep[r / group]) continue;
        for (int64_t c = 0; c < n_cols; c++)
            if (rows || keep[c / group]) *dst++ = src[r * n_cols + c];
    }
    tensor_release(t);
    *t = n;
    v->ndim = n.ndim;
    memcpy(v->dims, n.dims, sizeof v->dims);
    return GRAFT_OK;
}

static graft_status shrink_weight(ir_graph *g, int node, const bool *keep, int group, bool rows,
                                  graft_err *e) {
    return shrink(&g->values[g->nodes[node].inputs[1]], keep, group, rows, e);
}

/* Rebuild a Concat like `concat` with input `piece` replaced by value c; returns its output. */
static graft_status concat_with(ir_graph *g, int concat, int piece, int c, int *out, graft_err *e) {
    int n_in = g->nodes[concat].n_in;
    int *ins = malloc(sizeof(int) * (size_t)n_in);
    if (!ins) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "prune heads: out of memory");
    memcpy(ins, g->nodes[concat].inputs, sizeof(int) * (size_t)n_in);
    ins[piece] = c;
    char name[256];
    snprintf(name, sizeof name, "%s_pruned", g->values[g->nodes[concat].outputs[0]].name);
    graft_status st = graph_add_node(g, "Concat", g->nodes[concat].opset, ins, n_in, name, "axis",
                                     attr_i(&g->nodes[concat], "axis", 0), out, e);
    free(ins);
    return st;
}

/* Element pos of Reshape node `reshape`'s target becomes `value`: a new constant (and a new
 * Concat when the shape is built at run time), so shared constants stay as they were. */
static graft_status set_shape_elem(ir_graph *g, int reshape, int pos, int64_t value, graft_err *e) {
    heads_shape_ref r;
    if (!heads_shape_elem(g, reshape, pos, &r))
        return err_set(e, GRAFT_E_INTERNAL,
                       "prune heads: Reshape '%s': target element %d is not "
                       "a constant",
                       g->nodes[reshape].name, pos);
    if (r.element == value) return GRAFT_OK;
    tensor t;
    TRY(tensor_clone(&t, &g->values[r.value].data, e));
    tensor_set_f64(&t, r.index, (double)value);
    char name[256];
    snprintf(name, sizeof name, "%s_pruned", g->values[r.value].name);
    int c;
    graft_status st = graph_add_const(g, name, &t, &c, e);
    tensor_release(&t);
    if (st != GRAFT_OK) return st;
    int shape = c;
    if (r.concat >= 0) TRY(concat_with(g, r.concat, r.piece, c, &shape, e));
    g->nodes[reshape].inputs[1] = shape;
    return GRAFT_OK;
}

static graft_status apply_attn(ir_graph *g, const heads_attn *a, graft_err *e) {
    if (a->n_kept == a->n_heads) return GRAFT_OK;
    for (int k = 0; k < 3; k++) {
        TRY(shrink_weight(g, a->proj[k], a->keep, a->head_dim, false, e));
        if (a->bias[k] >= 0) TRY(shrink(&g->values[a->bias[k]], a->keep, a->head_dim, false, e));
        heads_shape_ref r;
        if (heads_shape_elem(g, a->reshape[k], 2, &r) && r.element == a->n_heads)
            TRY(set_shape_elem(g, a->reshape[k], 2, a->n_kept, e));
    }
    TRY(shrink_weight(g, a->out, a->keep, a->head_dim, true, e));
    heads_shape_ref r;
    int64_t hidden = (int64_t)a->n_heads * a->head_dim;
    if (heads_shape_elem(g, a->ctx_reshape, 2, &r) && r.element == hidden)
        TRY(set_shape_elem(g, a->ctx_reshape, 2, (int64_t)a->n_kept * a->head_dim, e));
    return GRAFT_OK;
}

static graft_status apply_ffn(ir_graph *g, const heads_ffn *f, graft_err *e) {
    if (f->n_kept == f->n) return GRAFT_OK;
    TRY(shrink_weight(g, f->up, f->keep, 1, false, e));
    if (f->bias >= 0) TRY(shrink(&g->values[f->bias], f->keep, 1, false, e));
    return shrink_weight(g, f->down, f->keep, 1, true, e);
}

graft_status prune_heads(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                         graft_err *e) {
    if (o->importance == GRAFT_IMPORTANCE_BN)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "prune heads: importance bn ranks convolution channels; heads and "
                       "neurons are ranked by l1 or l2");
    heads_plan p;
    TRY(heads_plan_build(g, o, &p, e));
    graft_status st = GRAFT_OK;
    int64_t units = 0, removed = 0;
    for (int i = 0; i < p.n_attn && st == GRAFT_OK; i++) {
        st = apply_attn(g, &p.attn[i], e);
        units += p.attn[i].n_heads;
        removed += p.attn[i].n_heads - p.attn[i].n_kept;
    }
    for (int i = 0; i < p.n_ffn && st == GRAFT_OK; i++) {
        st = apply_ffn(g, &p.ffn[i], e);
        units += p.ffn[i].n;
        removed += p.ffn[i].n - p.ffn[i].n_kept;
    }
    r->units_removed += removed;
    r->sparsity = units ? (double)removed / (double)units : 0;
    heads_plan_free(&p);
    return st;
}

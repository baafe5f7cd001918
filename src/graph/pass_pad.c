/* pass_pad.c: a zero Pad of the spatial dimensions that only a Conv reads becomes the Conv's own
 * padding (as TensorFlow-style "same" padding and ZeroPad2d export), so the padded copy of the
 * activation is never made. */
#include <stdlib.h>
#include <string.h>

#include "../core/scalar.h"
#include "graph.h"

/* Live readers of value v (a graph output counts as one). */
static int count_readers(const ir_graph *g, int v) {
    int r = g->values[v].is_graph_output ? 1 : 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++) r += g->nodes[i].inputs[k] == v;
    }
    return r;
}

/* The only live node reading v, or -1. */
static int sole_reader(const ir_graph *g, int v) {
    if (count_readers(g, v) != 1) return -1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].inputs[k] == v) return i;
    }
    return -1;
}

static bool onnx_domain(const ir_node *n) {
    return !n->domain || !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0;
}

static bool const_is_zero(const ir_graph *g, int v) {
    if (v < 0) return true; /* omitted: 0 */
    const ir_value *val = &g->values[v];
    if (!val->is_const || !val->data.data || tensor_numel(&val->data) > 1) return false;
    return tensor_numel(&val->data) == 0 ||
           scalar_load_f64(val->data.data, val->data.dtype, 0) == 0;
}

/* Pad's amounts (begin for every axis, then end) when it is a constant zero pad of known
 * amounts over all `rank` axes; false otherwise. */
static bool zero_pad_amounts(const ir_graph *g, const ir_node *pad, int rank, int64_t *amounts) {
    if (strcmp(attr_s(pad, "mode", "constant"), "constant") != 0) return false;
    if (pad->opset < 11) {
        const int64_t *p;
        if (attr_ints(pad, "pads", &p) != 2 * rank || attr_f(pad, "value", 0.0f) != 0.0f)
            return false;
        memcpy(amounts, p, sizeof(int64_t) * (size_t)(2 * rank));
        return true;
    }
    if (pad->n_in < 2 || pad->inputs[1] < 0) return false;
    if (pad->n_in > 3 && pad->inputs[3] >= 0) return false; /* axes (opset 18): left as it is */
    const ir_value *p = &g->values[pad->inputs[1]];
    if (!p->is_const || p->data.dtype != GRAFT_DTYPE_I64 || tensor_numel(&p->data) != 2 * rank)
        return false;
    if (!const_is_zero(g, pad->n_in > 2 ? pad->inputs[2] : -1)) return false;
    memcpy(amounts, p->data.data, sizeof(int64_t) * (size_t)(2 * rank));
    return true;
}

/* Replace (or add) node n's INTS attribute `name`. */
static graft_status set_ints(ir_node *n, const char *name, const int64_t *v, int count,
                             graft_err *e) {
    int64_t *copy = malloc(sizeof(int64_t) * (size_t)count);
    if (!copy) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory folding a Pad");
    memcpy(copy, v, sizeof(int64_t) * (size_t)count);
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            ir_attr_free(&n->attrs[i]);
            memset(&n->attrs[i], 0, sizeof n->attrs[i]);
            n->attrs[i].name = strdup(name);
            n->attrs[i].type = IR_ATTR_INTS;
            n->attrs[i].ints = copy, n->attrs[i].n = count;
            return n->attrs[i].name ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
        }
    ir_attr *a = realloc(n->attrs, sizeof *a * (size_t)(n->n_attrs + 1));
    if (!a) {
        free(copy);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory folding a Pad");
    }
    n->attrs = a;
    memset(&a[n->n_attrs], 0, sizeof *a);
    a[n->n_attrs].name = strdup(name);
    a[n->n_attrs].type = IR_ATTR_INTS;
    a[n->n_attrs].ints = copy, a[n->n_attrs].n = count;
    n->n_attrs++;
    return a[n->n_attrs - 1].name ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
}

/* Fold Pad node p into the Conv reading it, when that is all it takes; *done says whether. */
static graft_status fold_one(ir_graph *g, int p, bool *done, graft_err *e) {
    *done = false;
    ir_node *pad = &g->nodes[p];
    if (pad->n_in < 1 || pad->n_out != 1 || pad->inputs[0] < 0 || pad->outputs[0] < 0)
        return GRAFT_OK;
    int rank = g->values[pad->inputs[0]].ndim;
    if (rank < 3 || rank > GRAFT_MAX_DIMS) return GRAFT_OK;
    int64_t amounts[2 * GRAFT_MAX_DIMS];
    if (!zero_pad_amounts(g, pad, rank, amounts)) return GRAFT_OK;
    if (amounts[0] || amounts[1] || amounts[rank] || amounts[rank + 1]) return GRAFT_OK; /* N, C */
    for (int i = 0; i < 2 * rank; i++)
        if (amounts[i] < 0) return GRAFT_OK; /* a crop */
    int c = sole_reader(g, pad->outputs[0]);
    if (c < 0) return GRAFT_OK;
    ir_node *conv = &g->nodes[c];
    if (strcmp(conv->op_type, "Conv") != 0 || !onnx_domain(conv) || conv->n_in < 2 ||
        conv->inputs[0] != pad->outputs[0])
        return GRAFT_OK;
    const char *auto_pad = attr_s(conv, "auto_pad", "NOTSET");
    if (strcmp(auto_pad, "NOTSET") != 0 && auto_pad[0]) return GRAFT_OK;
    int nsp = rank - 2;
    int64_t pads[2 * GRAFT_MAX_DIMS] = {0};
    const int64_t *old;
    int64_t n_old = attr_ints(conv, "pads", &old);
    if (n_old >= 0 && n_old != 2 * nsp) return GRAFT_OK;
    for (int i = 0; i < nsp; i++) {
        pads[i] = (n_old > 0 ? old[i] : 0) + amounts[2 + i];
        pads[nsp + i] = (n_old > 0 ? old[nsp + i] : 0) + amounts[rank + 2 + i];
    }
    TRY(set_ints(conv, "pads", pads, 2 * nsp, e));
    conv->inputs[0] = pad->inputs[0];
    pad->dead = true;
    *done = true;
    return GRAFT_OK;
}

graft_status pass_fold_pad(ir_graph *g, int *changed, graft_err *e) {
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->dead || strcmp(n->op_type, "Pad") != 0 || !onnx_domain(n)) continue;
        bool done;
        TRY(fold_one(g, i, &done, e));
        count += done;
    }
    if (count) ir_link_producers(g);
    if (changed) *changed = count;
    return GRAFT_OK;
}

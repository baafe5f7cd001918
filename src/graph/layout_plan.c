/* layout_plan.c: choosing the channels-last (NHWC) activations of a placed graph: candidates
 * are written by NHWC-capable ops, and a candidate some reader cannot take natively goes back
 * to NCHW, until nothing changes; and the per-call queries both backends make of the plan. */
#include "layout_plan.h"

#include <stdlib.h>
#include <string.h>

#include "../ops/op.h"

static bool is_onnx(const ir_node *n) {
    return !n->dead && (!n->domain || !n->domain[0] || strcmp(n->domain, "ai.onnx") == 0);
}

static bool op_in(const char *op, const char *const *list) {
    for (; *list; list++)
        if (strcmp(op, *list) == 0) return true;
    return false;
}

layout_kind layout_op_kind(const ir_node *n) {
    static const char *const unary[] = {"Relu", "Clip",     "LeakyRelu",   "Sigmoid",   "Tanh",
                                        "Elu",  "Selu",     "Softplus",    "Abs",       "Neg",
                                        "Erf",  "Identity", "HardSigmoid", "HardSwish", NULL};
    static const char *const binary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", NULL};
    if (!is_onnx(n)) return LAYOUT_NONE;
    const char *op = n->op_type;
    if (strcmp(op, "Conv") == 0) return LAYOUT_CONV;
    if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0) return LAYOUT_POOL;
    if (strcmp(op, "GlobalAveragePool") == 0) return LAYOUT_GLOBAL;
    if (op_in(op, unary)) return LAYOUT_UNARY;
    if (op_in(op, binary)) return LAYOUT_BINARY;
    return LAYOUT_NONE;
}

/* A 4-D activation of the planned dtypes: fp16/bf16, or f32. */
static bool is_half_4d(const ir_value *v, bool f32) {
    if (v->ndim != 4) return false;
    if (f32) return v->dtype == GRAFT_DTYPE_F32;
    return v->dtype == GRAFT_DTYPE_F16 || v->dtype == GRAFT_DTYPE_BF16;
}

/* A window cuDNN takes as it is: 2 spatial axes, explicit symmetric pads (or none). */
static bool plain_window(const ir_node *n, bool pool) {
    const char *ap = attr_s(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0) return false;
    const int64_t *v = NULL;
    int64_t np = attr_ints(n, "pads", &v);
    if (np > 0 && (np != 4 || v[0] != v[2] || v[1] != v[3])) return false;
    if (!pool) return true;
    int64_t nd = attr_ints(n, "dilations", &v);
    for (int64_t i = 0; i < nd; i++)
        if (v[i] != 1) return false;
    return attr_i(n, "ceil_mode", 0) == 0 && attr_i(n, "storage_order", 0) == 0 &&
           (n->n_out < 2 || n->outputs[1] < 0);
}

static bool is_scalar_const(const ir_graph *g, int v) {
    if (v < 0 || !g->values[v].is_const) return false;
    return tensor_numel(&g->values[v].data) == 1;
}

/* Same dims where both are known. */
static bool same_known_dims(const ir_value *a, const ir_value *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] >= 0 && b->dims[i] >= 0 && a->dims[i] != b->dims[i]) return false;
    return true;
}

/* Can node n (on the device) write its output 0 channels-last, given the candidates so far? */
static bool writes_nhwc(const ir_graph *g, const ir_node *n, const unsigned char *cand, bool f32) {
    int y = n->n_out > 0 ? n->outputs[0] : -1;
    if (y < 0 || !is_half_4d(&g->values[y], f32)) return false;
    switch (layout_op_kind(n)) {
    case LAYOUT_CONV: {
        int w = n->n_in > 1 ? n->inputs[1] : -1;
        return n->n_in >= 2 && n->inputs[0] >= 0 && w >= 0 && g->values[w].is_const &&
               g->values[w].ndim == 4 && is_half_4d(&g->values[n->inputs[0]], f32) &&
               plain_window(n, false);
    }
    case LAYOUT_POOL:
        return n->inputs[0] >= 0 && cand[n->inputs[0]] && plain_window(n, true);
    case LAYOUT_UNARY:
        if (n->n_in < 1 || n->inputs[0] < 0 || !cand[n->inputs[0]]) return false;
        for (int k = 1; k < n->n_in; k++)
            if (n->inputs[k] >= 0 && !is_scalar_const(g, n->inputs[k]) &&
                !op_input_on_host(n->op_type, k))
                return false;
        return true;
    case LAYOUT_BINARY: {
        bool any = false;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->inputs[k];
            if (v >= 0 && cand[v] && same_known_dims(&g->values[v], &g->values[y]))
                any = true;
            else if (!is_scalar_const(g, v))
                return false;
        }
        return any;
    }
    default:
        return false;
    }
}

/* Does node r read value v (its input k) natively, given the candidates so far? */
static bool reads_nhwc(const ir_node *r, int k, const unsigned char *on_dev, int r_index,
                       const unsigned char *cand) {
    if (op_input_data_unused(r->op_type, k)) return true;
    if (!on_dev[r_index]) return false;
    switch (layout_op_kind(r)) {
    case LAYOUT_CONV:
    case LAYOUT_GLOBAL:
        return k == 0;
    case LAYOUT_POOL:
    case LAYOUT_UNARY:
        return k == 0 && r->n_out > 0 && r->outputs[0] >= 0 && cand[r->outputs[0]];
    case LAYOUT_BINARY:
        return r->n_out > 0 && r->outputs[0] >= 0 && cand[r->outputs[0]];
    default:
        return false;
    }
}

static bool value_keeps(const ir_graph *g, int v, const unsigned char *on_dev,
                        const unsigned char *cand, bool f32) {
    const ir_node *p = &g->nodes[g->values[v].producer];
    if (!writes_nhwc(g, p, cand, f32)) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *r = &g->nodes[i];
        if (r->dead) continue;
        for (int k = 0; k < r->n_in; k++)
            if (r->inputs[k] == v && !reads_nhwc(r, k, on_dev, i, cand)) return false;
    }
    return true;
}

void layout_plan_nhwc(const ir_graph *g, const unsigned char *on_dev, bool f32,
                      unsigned char *nhwc) {
    memset(nhwc, 0, (size_t)g->n_values);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        int y = n->n_out > 0 ? n->outputs[0] : -1;
        if (y >= 0 && on_dev[i] && !n->dead && layout_op_kind(n) != LAYOUT_NONE &&
            layout_op_kind(n) != LAYOUT_GLOBAL && is_half_4d(&g->values[y], f32))
            nhwc[y] = 1;
    }
    for (int i = 0; i < g->n_outputs; i++) nhwc[g->outputs[i]] = 0;
    /* Each pass only clears marks, so this ends; a cleared value can clear the values around
     * it (its producer's inputs, its readers' outputs), hence the repetition. */
    for (bool changed = true; changed;) {
        changed = false;
        for (int v = 0; v < g->n_values; v++)
            if (nhwc[v] && (g->values[v].producer < 0 || !value_keeps(g, v, on_dev, nhwc, f32))) {
                nhwc[v] = 0;
                changed = true;
            }
    }
}

/* ---- a backend's plan, queried per call ---------------------------------------------------- */

int layout_state_plan(layout_state *ls, const ir_graph *g, const unsigned char *on_dev, bool f32,
                      bool off) {
    layout_state_free(ls);
    if (off || g->n_values == 0) return 0;
    ls->nhwc = malloc((size_t)g->n_values);
    if (!ls->nhwc) return 0; /* out of memory: everything NCHW */
    layout_plan_nhwc(g, on_dev, f32, ls->nhwc);
    ls->n = g->n_values;
    int marked = 0;
    for (int v = 0; v < g->n_values; v++) marked += ls->nhwc[v];
    return marked;
}

void layout_state_free(layout_state *ls) {
    free(ls->nhwc);
    ls->nhwc = NULL;
    ls->n = 0;
}

static bool value_nhwc(const layout_state *ls, int v) {
    return !ls->plain && v >= 0 && v < ls->n && ls->nhwc[v];
}

bool layout_in_nhwc(const layout_state *ls, const op_call *c, int k) {
    return k < c->n_in && c->in[k] && k < c->node->n_in && value_nhwc(ls, c->node->inputs[k]);
}

bool layout_out_nhwc(const layout_state *ls, const op_call *c, int k) {
    return k < c->n_out && c->out[k] && k < c->node->n_out && value_nhwc(ls, c->node->outputs[k]);
}

bool layout_call_has_nhwc(const layout_state *ls, const op_call *c) {
    if (!ls->n || ls->plain) return false;
    for (int k = 0; k < c->n_in; k++)
        if (layout_in_nhwc(ls, c, k)) return true;
    for (int k = 0; k < c->n_out; k++)
        if (layout_out_nhwc(ls, c, k)) return true;
    return false;
}

static bool same_dims(const tensor *a, const tensor *b) {
    return a->ndim == b->ndim && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

bool layout_free_call(const layout_state *ls, const op_call *c, layout_kind kind) {
    if (c->n_out != 1 || !c->out[0] || !layout_out_nhwc(ls, c, 0)) return false;
    for (int k = 0; k < c->n_in; k++) {
        const tensor *t = c->in[k];
        if (!t) continue;
        bool data = kind == LAYOUT_BINARY || k == 0;
        if (data && layout_in_nhwc(ls, c, k) && same_dims(t, c->out[0])) continue;
        if (!layout_in_nhwc(ls, c, k) && tensor_numel(t) == 1) continue;
        if (!data && op_input_on_host(c->node->op_type, k)) continue;
        return false;
    }
    return true;
}

/* heads_match.c: finding BERT-style attention and feed-forward blocks, unit importance and the
 * choice of heads and neurons to remove. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "heads.h"

static bool op_is(const ir_graph *g, int node, const char *op) {
    return node >= 0 && strcmp(g->nodes[node].op_type, op) == 0;
}

static int producer_of(const ir_graph *g, int v) {
    if (v < 0 || v >= g->n_values) return -1;
    int p = g->values[v].producer;
    return p >= 0 && !g->nodes[p].dead ? p : -1;
}

/* The one live node reading v, or -1 when v has several readers or is a graph output. */
static int sole_reader(const ir_graph *g, int v) {
    if (v < 0 || g->values[v].is_graph_output) return -1;
    int found = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            if (n->inputs[k] != v) continue;
            if (found >= 0) return -1;
            found = i;
        }
    }
    return found;
}

/* A Shape node whose output only feeds Gathers (axis 0) of constant indices below `below`: it
 * reads dimensions that pruning leaves as they are (batch and sequence). */
static bool leading_dims_shape(const ir_graph *g, int node, int64_t below) {
    if (!op_is(g, node, "Shape") || attr_i(&g->nodes[node], "start", 0) != 0) return false;
    int s = g->nodes[node].outputs[0];
    if (g->values[s].is_graph_output) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in && !n->dead; k++) {
            if (n->inputs[k] != s) continue;
            if (k != 0 || !op_is(g, i, "Gather") || attr_i(n, "axis", 0) != 0) return false;
            const ir_value *idx = &g->values[n->inputs[1]];
            if (!idx->is_const || tensor_numel(&idx->data) != 1) return false;
            int64_t at = tensor_get_i64(&idx->data, 0);
            if (at < 0 || at >= below) return false;
        }
    }
    return true;
}

/* The one live node reading v apart from Shapes of its batch and sequence dimensions; -1 when
 * there are others or v is a graph output. */
static int main_reader(const ir_graph *g, int v) {
    if (v < 0 || g->values[v].is_graph_output) return -1;
    int found = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool reads = false;
        for (int k = 0; k < n->n_in; k++) reads |= n->inputs[k] == v;
        if (n->dead || !reads || leading_dims_shape(g, i, 2)) continue;
        if (found >= 0) return -1;
        found = i;
    }
    return found;
}

static int out0(const ir_graph *g, int node) {
    return g->nodes[node].outputs[0];
}

static bool is_const_f32(const ir_graph *g, int v) {
    return v >= 0 && g->values[v].is_const && g->values[v].data.data &&
           g->values[v].data.dtype == GRAFT_DTYPE_F32;
}

/* A MatMul reading a private 2-D f32 constant weight of shape (rows, cols); rows/cols -1: any. */
static bool weighted_matmul(const ir_graph *g, int node, int64_t rows, int64_t cols) {
    if (!op_is(g, node, "MatMul") || !prune_is_weight(g, node, 1)) return false;
    const tensor *w = &g->values[g->nodes[node].inputs[1]].data;
    if (w->ndim != 2 || sole_reader(g, g->nodes[node].inputs[1]) != node) return false;
    return (rows < 0 || w->dims[0] == rows) && (cols < 0 || w->dims[1] == cols);
}

/* y = MatMul output: when its sole reader adds a private 1-D constant of n elements, that Add's
 * output and the bias; otherwise y itself and bias -1. */
static int after_bias(const ir_graph *g, int y, int64_t n, int *bias) {
    *bias = -1;
    int add = sole_reader(g, y);
    if (!op_is(g, add, "Add")) return y;
    const ir_node *a = &g->nodes[add];
    if (a->n_in != 2) return y;
    int b = a->inputs[0] == y ? a->inputs[1] : a->inputs[0];
    if (!is_const_f32(g, b) || g->values[b].data.ndim != 1 || g->values[b].data.dims[0] != n ||
        sole_reader(g, b) != add)
        return y;
    *bias = b;
    return out0(g, add);
}

/* The value v (output of bias Add or of the MatMul) back to its projection MatMul. */
static int proj_of(const ir_graph *g, int v, int64_t cols, int *bias) {
    int p = producer_of(g, v);
    *bias = -1;
    if (op_is(g, p, "Add")) {
        const ir_node *a = &g->nodes[p];
        for (int k = 0; k < a->n_in && a->n_in == 2; k++) {
            int m = producer_of(g, a->inputs[k]);
            if (!weighted_matmul(g, m, -1, cols)) continue;
            int b;
            int64_t n = g->values[g->nodes[m].inputs[1]].data.dims[1];
            if (after_bias(g, out0(g, m), n, &b) == v && b >= 0) {
                *bias = b;
                return m;
            }
        }
        return -1;
    }
    return weighted_matmul(g, p, -1, cols) ? p : -1;
}

static bool transpose_perm(const ir_graph *g, int node, const int64_t want[4]) {
    if (!op_is(g, node, "Transpose")) return false;
    const int64_t *perm;
    if (attr_ints(&g->nodes[node], "perm", &perm) != 4) return false;
    return memcmp(perm, want, sizeof(int64_t) * 4) == 0;
}

bool heads_shape_elem(const ir_graph *g, int reshape, int pos, heads_shape_ref *r) {
    memset(r, 0, sizeof *r);
    if (!op_is(g, reshape, "Reshape") || g->nodes[reshape].n_in < 2) return false;
    int s = g->nodes[reshape].inputs[1];
    r->shape = s;
    r->concat = -1;
    const ir_value *sv = &g->values[s];
    if (sv->is_const && sv->data.data) {
        if (sv->data.ndim != 1 || sv->data.dims[0] <= pos) return false;
        r->value = s;
        r->index = pos;
        r->element = tensor_get_i64(&sv->data, pos);
        return true;
    }
    int c = producer_of(g, s);
    if (!op_is(g, c, "Concat") || sole_reader(g, s) != reshape) return false;
    int64_t at = 0;
    for (int k = 0; k < g->nodes[c].n_in; k++) {
        const ir_value *in = &g->values[g->nodes[c].inputs[k]];
        if (in->ndim != 1 || in->dims[0] < 0) return false;
        if (pos < at + in->dims[0]) {
            if (!in->is_const || !in->data.data) return false;
            r->concat = c;
            r->piece = k;
            r->value = g->nodes[c].inputs[k];
            r->index = pos - at;
            r->element = tensor_get_i64(&in->data, r->index);
            return true;
        }
        at += in->dims[0];
    }
    return false;
}

/* Q/K/V path: Transpose <- Reshape (b, s, heads, dim) <- [Add bias] <- MatMul. Fills slot i. */
static bool match_qkv(const ir_graph *g, int value, const int64_t perm[4], heads_attn *a, int i) {
    int t = producer_of(g, value);
    if (!transpose_perm(g, t, perm) || sole_reader(g, value) < 0) return false;
    int rs = producer_of(g, g->nodes[t].inputs[0]);
    if (!op_is(g, rs, "Reshape") || sole_reader(g, out0(g, rs)) != t) return false;
    int x = g->nodes[rs].inputs[0];
    if (main_reader(g, x) != rs) return false;
    int m = proj_of(g, x, -1, &a->bias[i]);
    if (m < 0) return false;
    int64_t hidden = g->values[g->nodes[m].inputs[1]].data.dims[1];
    heads_shape_ref h, d;
    if (!heads_shape_elem(g, rs, 2, &h) || !heads_shape_elem(g, rs, 3, &d)) return false;
    if (h.element <= 0 && d.element <= 0) return false;
    if (h.element == 0 || d.element == 0) return false;
    int64_t nh = h.element > 0 ? h.element : hidden / d.element;
    int64_t hd = d.element > 0 ? d.element : hidden / h.element;
    if (nh * hd != hidden || nh > 1 << 20) return false;
    if (i > 0 && (nh != a->n_heads || hd != a->head_dim)) return false;
    a->n_heads = (int)nh;
    a->head_dim = (int)hd;
    a->proj[i] = m;
    a->reshape[i] = rs;
    return true;
}

/* From the scores (Softmax input) back through the scale and mask to the Q K^T MatMul. The
 * other operands must not vary per head (rank < 3 or a head dimension of 1). */
static int scores_matmul(const ir_graph *g, int v, int depth) {
    int p = producer_of(g, v);
    if (p < 0 || depth > 4 || sole_reader(g, v) < 0) return -1;
    const ir_node *n = &g->nodes[p];
    if (op_is(g, p, "MatMul"))
        return !g->values[n->inputs[0]].is_const && !g->values[n->inputs[1]].is_const ? p : -1;
    if (!op_is(g, p, "Add") && !op_is(g, p, "Sub") && !op_is(g, p, "Mul") && !op_is(g, p, "Div"))
        return -1;
    for (int k = 0; k < n->n_in; k++) {
        int found = scores_matmul(g, n->inputs[k], depth + 1);
        if (found < 0) continue;
        const ir_value *other = &g->values[n->inputs[1 - k]];
        if (other->ndim < 0 || (other->ndim >= 3 && other->dims[other->ndim - 3] != 1)) return -1;
        return found;
    }
    return -1;
}

static const int64_t PERM_SPLIT[4] = {0, 2, 1, 3}, PERM_KEY[4] = {0, 2, 3, 1};

/* The block around Softmax node s, or false. */
static bool match_attention(const ir_graph *g, int s, heads_attn *a) {
    memset(a, 0, sizeof *a);
    int64_t axis = attr_i(&g->nodes[s], "axis", -1);
    if (g->values[out0(g, s)].ndim != 4 || (axis != -1 && axis != 3)) return false;
    int qk = scores_matmul(g, g->nodes[s].inputs[0], 0);
    if (qk < 0) return false;
    if (!match_qkv(g, g->nodes[qk].inputs[0], PERM_SPLIT, a, 0) ||
        !match_qkv(g, g->nodes[qk].inputs[1], PERM_KEY, a, 1))
        return false;
    int pv = sole_reader(g, out0(g, s));
    if (!op_is(g, pv, "MatMul") || g->nodes[pv].inputs[0] != out0(g, s) ||
        !match_qkv(g, g->nodes[pv].inputs[1], PERM_SPLIT, a, 2))
        return false;
    int t = sole_reader(g, out0(g, pv));
    if (!transpose_perm(g, t, PERM_SPLIT)) return false;
    int rs = main_reader(g, out0(g, t));
    if (!op_is(g, rs, "Reshape") || g->nodes[rs].inputs[0] != out0(g, t)) return false;
    int o = sole_reader(g, out0(g, rs));
    int64_t hidden = (int64_t)a->n_heads * a->head_dim;
    if (!weighted_matmul(g, o, hidden, -1) || g->nodes[o].inputs[0] != out0(g, rs)) return false;
    heads_shape_ref m;
    if (!heads_shape_elem(g, rs, 2, &m) || (m.element != hidden && m.element != -1)) return false;
    /* A merge shape of more than 3 dims is not the (b, s, hidden) this rewrite knows. */
    if (g->values[out0(g, rs)].ndim != 3) return false;
    a->ctx_reshape = rs;
    a->out = o;
    return true;
}

static bool elementwise(const ir_graph *g, int node) {
    static const char *const ops[] = {
        "Add",       "Sub",         "Mul",  "Div",       "Pow",     "Max",  "Min",
        "Erf",       "Tanh",        "Relu", "Gelu",      "Sigmoid", "Exp",  "Abs",
        "Neg",       "Sqrt",        "Clip", "Identity",  "Elu",     "Selu", "Softplus",
        "LeakyRelu", "HardSigmoid", "Celu", "HardSwish", "Mish"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (op_is(g, node, ops[i])) return true;
    return false;
}

static bool in_list(const int *list, int n, int v) {
    for (int i = 0; i < n; i++)
        if (list[i] == v) return true;
    return false;
}

static bool reads_value(const ir_node *n, int v) {
    for (int k = 0; k < n->n_in; k++)
        if (n->inputs[k] == v) return true;
    return false;
}

/* Up projection node up: the region of per-element ops from its (biased) output to one down
 * MatMul: every reader of a region value is the down MatMul or an element-wise op whose other
 * inputs are region values or scalar constants. Returns the down MatMul or -1. */
static int match_ffn(const ir_graph *g, int up, int *bias) {
    int64_t n = g->values[g->nodes[up].inputs[1]].data.dims[1];
    int h = after_bias(g, out0(g, up), n, bias);
    int region[64], n_region = 0, ops[64], n_ops = 0, down = -1;
    region[n_region++] = h;
    for (int r = 0; r < n_region; r++) {
        int v = region[r];
        if (g->values[v].is_graph_output) return -1;
        for (int i = 0; i < g->n_nodes; i++) {
            const ir_node *nd = &g->nodes[i];
            if (nd->dead || !reads_value(nd, v) || in_list(ops, n_ops, i)) continue;
            if (op_is(g, i, "MatMul") && nd->inputs[0] == v && nd->inputs[1] != v &&
                weighted_matmul(g, i, n, -1)) {
                if (down >= 0 && down != i) return -1;
                down = i;
                continue;
            }
            if (!elementwise(g, i) || nd->n_out != 1 || n_ops == 64) return -1;
            ops[n_ops++] = i;
            region[n_region++] = nd->outputs[0];
        }
    }
    for (int j = 0; j < n_ops; j++) {
        const ir_node *nd = &g->nodes[ops[j]];
        for (int k = 0; k < nd->n_in; k++) {
            int in = nd->inputs[k];
            if (in >= 0 && !in_list(region, n_region, in) &&
                !(g->values[in].is_const && tensor_numel(&g->values[in].data) == 1))
                return -1;
        }
    }
    return down;
}

int heads_select(const double *imp, int n, double sparsity, bool *keep) {
    int drop = (int)lround(sparsity * n);
    if (drop > n - 1) drop = n - 1;
    if (drop < 0) drop = 0;
    for (int i = 0; i < n; i++) keep[i] = true;
    for (int d = 0; d < drop; d++) {
        int worst = -1;
        for (int i = 0; i < n; i++)
            if (keep[i] && (worst < 0 || imp[i] < imp[worst])) worst = i;
        keep[worst] = false;
    }
    return n - drop;
}

static double acc(double s, float w, graft_importance how) {
    return how == GRAFT_IMPORTANCE_L2 ? s + (double)w * w : s + fabs((double)w);
}

/* Columns [c0, c0+nc) plus rows [r0, r0+nr) of two 2-D weights, as the norm asked for. */
static double unit_norm(const tensor *const *cols, int n_cols, int64_t c0, int64_t nc,
                        const tensor *rows, int64_t r0, int64_t nr, graft_importance how) {
    double s = 0;
    for (int t = 0; t < n_cols; t++) {
        const float *w = cols[t]->data;
        for (int64_t r = 0; r < cols[t]->dims[0]; r++)
            for (int64_t c = c0; c < c0 + nc; c++) s = acc(s, w[r * cols[t]->dims[1] + c], how);
    }
    const float *w = rows->data;
    for (int64_t i = r0 * rows->dims[1]; i < (r0 + nr) * rows->dims[1]; i++) s = acc(s, w[i], how);
    return how == GRAFT_IMPORTANCE_L2 ? sqrt(s) : s;
}

static const tensor *weight_of(const ir_graph *g, int node) {
    return &g->values[g->nodes[node].inputs[1]].data;
}

void heads_attn_importance(const ir_graph *g, const heads_attn *a, graft_importance how,
                           double *imp) {
    const tensor *qkv[3] = {weight_of(g, a->proj[0]), weight_of(g, a->proj[1]),
                            weight_of(g, a->proj[2])};
    for (int h = 0; h < a->n_heads; h++)
        imp[h] = unit_norm(qkv, 3, (int64_t)h * a->head_dim, a->head_dim, weight_of(g, a->out),
                           (int64_t)h * a->head_dim, a->head_dim, how);
}

void heads_ffn_importance(const ir_graph *g, const heads_ffn *f, graft_importance how,
                          double *imp) {
    const tensor *up = weight_of(g, f->up);
    for (int j = 0; j < f->n; j++)
        imp[j] = unit_norm(&up, 1, j, 1, weight_of(g, f->down), j, 1, how);
}

void heads_plan_free(heads_plan *p) {
    for (int i = 0; i < p->n_attn; i++) free(p->attn[i].keep);
    for (int i = 0; i < p->n_ffn; i++) free(p->ffn[i].keep);
    free(p->attn);
    free(p->ffn);
    memset(p, 0, sizeof *p);
}

/* keep flags and the kept count for n units of importance imp. */
static graft_status choose(int n, const double *imp, double sparsity, bool **keep, int *kept,
                           graft_err *e) {
    *keep = malloc(sizeof(bool) * (size_t)n);
    if (!*keep) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "prune heads: out of memory");
    *kept = heads_select(imp, n, sparsity, *keep);
    return GRAFT_OK;
}

static graft_status add_attn(const ir_graph *g, const graft_prune_options *o, heads_plan *p,
                             heads_attn *a, graft_err *e) {
    heads_attn *grown = realloc(p->attn, sizeof *grown * (size_t)(p->n_attn + 1));
    double *imp = malloc(sizeof(double) * (size_t)a->n_heads);
    if (grown) p->attn = grown;
    if (!grown || !imp) {
        free(imp);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "prune heads: out of memory");
    }
    heads_attn_importance(g, a, o->importance, imp);
    graft_status st = choose(a->n_heads, imp, o->sparsity, &a->keep, &a->n_kept, e);
    free(imp);
    if (st == GRAFT_OK) p->attn[p->n_attn++] = *a;
    return st;
}

static graft_status add_ffn(const ir_graph *g, const graft_prune_options *o, heads_plan *p,
                            heads_ffn *f, graft_err *e) {
    heads_ffn *grown = realloc(p->ffn, sizeof *grown * (size_t)(p->n_ffn + 1));
    double *imp = malloc(sizeof(double) * (size_t)f->n);
    if (grown) p->ffn = grown;
    if (!grown || !imp) {
        free(imp);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "prune heads: out of memory");
    }
    heads_ffn_importance(g, f, o->importance, imp);
    graft_status st = choose(f->n, imp, o->sparsity, &f->keep, &f->n_kept, e);
    free(imp);
    if (st == GRAFT_OK) p->ffn[p->n_ffn++] = *f;
    return st;
}

graft_status heads_plan_build(const ir_graph *g, const graft_prune_options *o, heads_plan *p,
                              graft_err *e) {
    memset(p, 0, sizeof *p);
    graft_status st = GRAFT_OK;
    for (int s = 0; s < g->n_nodes && st == GRAFT_OK; s++) {
        if (g->nodes[s].dead || !op_is(g, s, "Softmax")) continue;
        heads_attn a;
        bool ok = match_attention(g, s, &a);
        for (int k = 0; k < 3 && ok; k++) ok = !prune_excluded(g, a.proj[k], o);
        if (!ok || prune_excluded(g, a.out, o)) {
            p->skipped_attn++;
            continue;
        }
        st = add_attn(g, o, p, &a, e);
    }
    for (int up = 0; up < g->n_nodes && st == GRAFT_OK; up++) {
        if (g->nodes[up].dead || !weighted_matmul(g, up, -1, -1)) continue;
        heads_ffn f = {up, -1, -1, 0, NULL, 0};
        f.down = match_ffn(g, up, &f.bias);
        if (f.down < 0) continue;
        if (prune_excluded(g, up, o) || prune_excluded(g, f.down, o)) {
            p->skipped_ffn++;
            continue;
        }
        f.n = (int)g->values[g->nodes[up].inputs[1]].data.dims[1];
        st = add_ffn(g, o, p, &f, e);
    }
    if (st != GRAFT_OK) heads_plan_free(p);
    return st;
}

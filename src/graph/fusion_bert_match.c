/* fusion_bert_match.c: matching BERT's fused groups in a graph, for any backend: the helpers the
 * matchers share and the MatMul -> Add(bias) [-> GELU] patterns (the CUDA backend's and the CPU's
 * fusion tables use them). */
#include "fusion_bert_match.h"

#include <string.h>

bool fb_is_op(const ir_node *n, const char *op, int n_in) {
    return !n->dead && strcmp(n->op_type, op) == 0 && n->n_in == n_in && n->n_out >= 1;
}

/* The first live node after `after` that reads value v, or -1. */
int fb_next_reader(const ir_graph *g, int v, int after) {
    for (int i = after + 1; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] == v) return i;
    }
    return -1;
}

/* Node i's only output (other outputs absent), or -1. */
int fb_sole_output(const ir_graph *g, int i) {
    const ir_node *n = &g->nodes[i];
    for (int k = 1; k < n->n_out; k++)
        if (n->outputs[k] >= 0) return -1;
    return n->outputs[0];
}

/* The sole reader of v (v read once, not a graph output) when it is a live `op` node with
 * n_in inputs, or -1. */
int fb_sole_reader(const ir_graph *g, const int *readers, int v, int after, const char *op,
                   int n_in) {
    if (v < 0 || readers[v] != 1) return -1;
    int r = fb_next_reader(g, v, after);
    return r >= 0 && fb_is_op(&g->nodes[r], op, n_in) && fb_sole_output(g, r) >= 0 ? r : -1;
}

bool fb_is_const_value(const ir_graph *g, int v) {
    return v >= 0 && g->values[v].is_const;
}

bool fb_is_const_scalar(const ir_graph *g, int v) {
    return fb_is_const_value(g, v) && tensor_numel(&g->values[v].data) == 1;
}

/* The input of a two-input node that is not v, or -1 (also when both are v). */
int fb_other_input(const ir_node *n, int v) {
    if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
    if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
    return -1;
}

/* Whether Add(a, b) may broadcast, judging by the shapes known at load time: a rank that differs,
 * or a dim of 1 against one that is not (BERT's position embeddings, (1, S, H) against (B, S, H)).
 * Such an Add is left out of a group rather than declined at every run. */
bool fb_may_broadcast(const ir_graph *g, int a, int b) {
    const ir_value *va = &g->values[a], *vb = &g->values[b];
    if (va->ndim < 0 || vb->ndim < 0 || va->ndim != vb->ndim) return true;
    for (int i = 0; i < va->ndim; i++)
        if ((va->dims[i] == 1) != (vb->dims[i] == 1)) return true;
    return false;
}

bool fb_all_on_dev(const unsigned char *on_dev, const int *members, int n) {
    for (int k = 0; k < n; k++)
        if (!on_dev[members[k]]) return false;
    return true;
}

/* ---- MatMul -> Add(bias) [-> GELU] ----------------------------------------------------------- */

/* MatMul(A, W) with W a constant 2-D weight, read only by Add(., bias) with bias a constant 1-D
 * vector of W's columns: the bias Add's index, or -1. */
static int biased_product(const ir_graph *g, int first, const int *readers) {
    const ir_node *mm = &g->nodes[first];
    if (!fb_is_op(mm, "MatMul", 2) || mm->inputs[0] < 0) return -1;
    int w = mm->inputs[1];
    if (!fb_is_const_value(g, w) || fb_is_const_value(g, mm->inputs[0])) return -1;
    const tensor *wt = &g->values[w].data;
    if (wt->ndim != 2) return -1;
    int add = fb_sole_reader(g, readers, fb_sole_output(g, first), first, "Add", 2);
    if (add < 0) return -1;
    int bias = fb_other_input(&g->nodes[add], mm->outputs[0]);
    if (!fb_is_const_value(g, bias)) return -1;
    const tensor *bt = &g->values[bias].data;
    return bt->ndim == 1 && bt->dims[0] == wt->dims[1] ? add : -1;
}

int fusion_match_matmul_bias(const ir_graph *g, int first, const unsigned char *on_dev,
                             const int *readers, int *members, int max) {
    int add = biased_product(g, first, readers);
    if (add < 0 || max < 2) return 0;
    members[0] = first;
    members[1] = add;
    return fb_all_on_dev(on_dev, members, 2) ? 2 : 0;
}

/* PyTorch's erf GELU as exported: Div(v, c0), Erf, Add(., c1), Mul(v, .), Mul(., c2), with v
 * read by the Div and the first Mul only. Fills members[0..5) (Div .. last Mul) or returns
 * false. */
bool fusion_match_erf_chain(const ir_graph *g, const int *readers, int add, int v, int *m) {
    if (readers[v] != 2) return false;
    int div = fb_next_reader(g, v, add);
    if (div < 0 || !fb_is_op(&g->nodes[div], "Div", 2) || g->nodes[div].inputs[0] != v ||
        !fb_is_const_scalar(g, g->nodes[div].inputs[1]))
        return false;
    int erf = fb_sole_reader(g, readers, fb_sole_output(g, div), div, "Erf", 1);
    if (erf < 0) return false;
    int e = fb_sole_output(g, erf);
    int add1 = fb_sole_reader(g, readers, e, erf, "Add", 2);
    if (add1 < 0 || !fb_is_const_scalar(g, fb_other_input(&g->nodes[add1], e))) return false;
    int a = fb_sole_output(g, add1);
    int mul0 = fb_sole_reader(g, readers, a, add1, "Mul", 2);
    if (mul0 < 0 || fb_other_input(&g->nodes[mul0], a) != v) return false;
    int p = fb_sole_output(g, mul0);
    int mul1 = fb_sole_reader(g, readers, p, mul0, "Mul", 2);
    if (mul1 < 0 || !fb_is_const_scalar(g, fb_other_input(&g->nodes[mul1], p))) return false;
    m[0] = div;
    m[1] = erf;
    m[2] = add1;
    m[3] = mul0;
    m[4] = mul1;
    return true;
}

int fusion_match_matmul_bias_gelu(const ir_graph *g, int first, const unsigned char *on_dev,
                                  const int *readers, int *members, int max) {
    int add = biased_product(g, first, readers);
    if (add < 0 || max < 7) return 0;
    int v = fb_sole_output(g, add), n = 0;
    members[0] = first;
    members[1] = add;
    int gelu = fb_sole_reader(g, readers, v, add, "Gelu", 1);
    if (gelu >= 0) {
        const char *form = attr_s(&g->nodes[gelu], "approximate", "none");
        if (strcmp(form, "none") != 0 && strcmp(form, "tanh") != 0) return 0;
        members[2] = gelu;
        n = 3;
    } else if (fusion_match_erf_chain(g, readers, add, v, members + 2)) {
        n = 7;
    }
    return n && fb_all_on_dev(on_dev, members, n) ? n : 0;
}

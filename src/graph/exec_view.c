/* exec_view.c: reshapes as views in the memory plan: the output of a Reshape, Flatten, Squeeze
 * or Unsqueeze shares its input's planned bytes (one buffer living as long as either), so its
 * kernel sees the same pointer and copies nothing; so does a fused group's output written over
 * an input nothing reads afterwards (a convolution's residual). */
#include "exec_internal.h"
#include "fusion_groups.h"

bool exec_plans_value(const executor *x, int v, bool dev) {
    const ir_value *val = &x->g->values[v];
    /* Device outputs stay in the arena too: a recorded graph writes them at fixed places. */
    return !val->is_const && !val->is_graph_input && !(val->is_graph_output && !dev) &&
           val->producer >= 0 && x->seen_bytes[v] >= 0 &&
           (bool)x->node_on_dev[val->producer] == dev;
}

static bool is_view_op(const ir_node *n) {
    return fusion_is_op(n, "Reshape") || fusion_is_op(n, "Flatten") || fusion_is_op(n, "Squeeze") ||
           fusion_is_op(n, "Unsqueeze");
}

int exec_view_source(const executor *x, int w, bool dev) {
    if (!x->plan_views) return -1;
    int p = x->g->values[w].producer;
    if (p < 0) return -1;
    const ir_node *n = &x->g->nodes[p];
    if (x->inplace_src && x->inplace_src[w] >= 0) return x->inplace_src[w];
    /* Not inside a fused group: a group may write its members' outputs its own way. */
    if (!is_view_op(n) || n->n_in < 1 || n->n_out < 1 || n->outputs[0] != w ||
        x->group_end[p] != p || x->group_first[p] != p)
        return -1;
    int v = n->inputs[0];
    if (v < 0 || !exec_plans_value(x, v, dev) || x->seen_bytes[v] != x->seen_bytes[w]) return -1;
    return v;
}

void exec_plan_views(const executor *x, bool dev, int *slot, int *last) {
    const ir_graph *g = x->g;
    for (int w = 0; w < g->n_values; w++) {
        if (!exec_plans_value(x, w, dev)) continue;
        int root = exec_view_source(x, w, dev);
        if (root < 0) continue;
        /* Each step goes to an earlier producer, so the chain ends at a value with its own slot. */
        for (int up = exec_view_source(x, root, dev); up >= 0; up = exec_view_source(x, up, dev))
            root = up;
        slot[w] = slot[root];
        int end = x->last_use[w] > g->values[w].producer ? x->last_use[w] : g->values[w].producer;
        if (last[slot[w]] < end) last[slot[w]] = end;
    }
}

/* The value v shares its buffer with (a reshape's input or an in-place source), or -1. */
static int alias_parent(const executor *x, bool dev, const int *src, int v) {
    return src[v] >= 0 ? src[v] : exec_view_source(x, v, dev);
}

static int alias_root(const executor *x, bool dev, const int *src, int v) {
    for (int up = alias_parent(x, dev, src, v); up >= 0; up = alias_parent(x, dev, src, up)) v = up;
    return v;
}

/* Whether a value other than r sharing r's buffer is read at or after node i. */
static bool buffer_read_from(const executor *x, bool dev, const int *src, int r, int i) {
    int root = alias_root(x, dev, src, r);
    for (int v = 0; v < x->g->n_values; v++)
        if (v != r && exec_plans_value(x, v, dev) && x->last_use[v] >= i &&
            alias_root(x, dev, src, v) == root)
            return true;
    return false;
}

void exec_plan_inplace(const executor *x, bool dev, int *src) {
    const ir_graph *g = x->g;
    for (int v = 0; v < g->n_values; v++) src[v] = -1;
    const graft_backend *be = dev ? x->device : x->be;
    if (!x->plan_views || !be || !be->group_inplace_input) return;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (x->group_end[i] != i || x->group_first[i] == i || (bool)x->node_on_dev[i] != dev ||
            n->n_out < 1)
            continue;
        int w = n->outputs[0], r = be->group_inplace_input(be->impl, g, i);
        if (w < 0 || r < 0 || r == w || !exec_plans_value(x, w, dev) ||
            !exec_plans_value(x, r, dev) || x->seen_bytes[r] != x->seen_bytes[w] ||
            x->last_use[r] != i || g->values[w].is_graph_output)
            continue;
        /* r: its own buffer or an earlier group's in-place output (no reshape of another) */
        const ir_node *rp = &g->nodes[g->values[r].producer];
        if (src[r] < 0 && is_view_op(rp)) continue;
        if (buffer_read_from(x, dev, src, r, i)) continue;
        src[w] = r;
    }
}

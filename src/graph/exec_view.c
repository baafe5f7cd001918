/* exec_view.c: reshapes as views in the memory plan: the output of a Reshape, Flatten, Squeeze
 * or Unsqueeze shares its input's planned bytes (one buffer living as long as either), so its
 * kernel sees the same pointer and copies nothing. */
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

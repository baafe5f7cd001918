/* channel_groups.c: channel dependency groups for structured pruning: follows each Conv's output
 * channels through channel-preserving ops to the readers that shrink with them, ties channels
 * joined by residual Adds, Concats and depthwise Convs, and picks the least important channels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "channel_groups.h"

typedef struct walk {
    const ir_graph *g;
    const graft_prune_options *o;
    chan_plan *p;
    int *readers; /* per value: reading nodes, +1 when a graph output */
    graft_err *e;
} walk;

static bool is_op(const ir_node *n, const char *op) {
    return strcmp(n->op_type, op) == 0;
}

static bool op_in(const ir_node *n, const char *const *ops) {
    for (int i = 0; ops[i]; i++)
        if (is_op(n, ops[i])) return true;
    return false;
}

static const char *const preserving_ops[] = {
    "Relu",          "Clip",      "LeakyRelu", "Sigmoid",     "Tanh",
    "HardSigmoid",   "HardSwish", "Elu",       "Selu",        "Softplus",
    "Identity",      "Dropout",   "MaxPool",   "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "LpPool",    NULL};
static const char *const eltwise_ops[] = {"Add", "Sub", "Mul", "Div", NULL};

int chan_group_root(const chan_plan *p, int group) {
    while (p->parent[group] != group) group = p->parent[group];
    return group;
}

static bool tracked(const chan_plan *p, int v) {
    return v >= 0 && p->segs[v].n > 0;
}

static int64_t seg_total(const chan_segs *s) {
    int64_t t = 0;
    for (int i = 0; i < s->n; i++) t += s->s[i].len;
    return t;
}

/* Every group with channels in value v becomes unprunable. */
static void mark_bad(chan_plan *p, int v) {
    if (!tracked(p, v)) return;
    for (int i = 0; i < p->segs[v].n; i++)
        if (p->segs[v].s[i].group >= 0) p->bad[p->segs[v].s[i].group] = true;
}

static void mark_inputs_bad(walk *w, const ir_node *n, int from) {
    for (int k = from; k < n->n_in; k++) mark_bad(w->p, n->inputs[k]);
}

static void unite(chan_plan *p, int a, int b) {
    if (a < 0 || b < 0) {
        if (a >= 0) p->bad[a] = true;
        if (b >= 0) p->bad[b] = true;
        return;
    }
    a = chan_group_root(p, a), b = chan_group_root(p, b);
    if (a == b) return;
    if (p->size[a] != p->size[b]) p->bad[a] = p->bad[b] = true;
    p->joined[a] = p->joined[b] = true;
    if (b < a) {
        int t = a;
        a = b, b = t;
    }
    p->parent[b] = a;
}

/* Set value v's segments to a copy of s[0..n) (left untracked when no group owns a channel). */
static graft_status set_segs(walk *w, int v, const chan_seg *s, int n) {
    bool any = false;
    for (int i = 0; i < n; i++) any |= s[i].group >= 0;
    if (v < 0 || !any) return GRAFT_OK;
    chan_segs *d = &w->p->segs[v];
    free(d->s);
    d->s = malloc(sizeof(chan_seg) * (size_t)n);
    if (!d->s) return err_set(w->e, GRAFT_E_OUT_OF_MEMORY, "out of memory tracing channels");
    memcpy(d->s, s, sizeof(chan_seg) * (size_t)n);
    d->n = n;
    return GRAFT_OK;
}

static graft_status copy_segs(walk *w, int dst, int src) {
    return set_segs(w, dst, w->p->segs[src].s, w->p->segs[src].n);
}

static bool const_f32(const ir_graph *g, int v) {
    return v >= 0 && g->values[v].is_const && g->values[v].data.dtype == GRAFT_DTYPE_F32 &&
           g->values[v].data.data;
}

/* Outputs after the first must not be read (MaxPool's indices, Dropout's mask). */
static bool extra_outputs_unread(const walk *w, const ir_node *n) {
    for (int k = 1; k < n->n_out; k++)
        if (n->outputs[k] >= 0 && w->readers[n->outputs[k]] > 0) return false;
    return n->n_out >= 1 && n->outputs[0] >= 0;
}

static graft_status visit_conv(walk *w, int i) {
    const ir_graph *g = w->g;
    const ir_node *n = &g->nodes[i];
    int x = n->inputs[0], wv = n->n_in > 1 ? n->inputs[1] : -1;
    mark_inputs_bad(w, n, 1);
    const tensor *W = const_f32(g, wv) ? &g->values[wv].data : NULL;
    if (W && W->ndim < 3) W = NULL;
    int64_t group = attr_i(n, "group", 1);
    bool bias_ok = n->n_in < 3 || n->inputs[2] < 0 ||
                   (W && const_f32(g, n->inputs[2]) &&
                    tensor_numel(&g->values[n->inputs[2]].data) == W->dims[0]);
    bool single_out = n->n_out == 1 && n->outputs[0] >= 0;
    int64_t in_ch = tracked(w->p, x) ? seg_total(&w->p->segs[x]) : -1;
    if (W && bias_ok && single_out && group > 1 && W->dims[0] == group && W->dims[1] == 1 &&
        in_ch == group) {
        w->p->roles[i].roles |= CHAN_DEPTHWISE;
        if (prune_excluded(g, i, w->o)) {
            for (int s = 0; s < w->p->segs[x].n; s++)
                if (w->p->segs[x].s[s].group >= 0) w->p->excluded[w->p->segs[x].s[s].group] = true;
            mark_bad(w->p, x);
        }
        return copy_segs(w, n->outputs[0], x);
    }
    if (in_ch >= 0) {
        if (W && group == 1 && W->dims[1] == in_ch)
            w->p->roles[i].roles |= CHAN_CONV_IN;
        else
            mark_bad(w->p, x);
    }
    if (!W || group != 1 || !bias_ok || !single_out) return GRAFT_OK;
    int id = w->p->n_groups++;
    w->p->parent[id] = id;
    w->p->size[id] = W->dims[0];
    w->p->loaded[id] = n->loaded_channels > W->dims[0] ? n->loaded_channels : W->dims[0];
    w->p->roles[i].roles |= CHAN_SOURCE;
    if (prune_excluded(g, i, w->o)) w->p->bad[id] = w->p->excluded[id] = true;
    chan_seg s = {id, W->dims[0]};
    return set_segs(w, n->outputs[0], &s, 1);
}

static graft_status visit_bn(walk *w, int i) {
    const ir_node *n = &w->g->nodes[i];
    int x = n->inputs[0];
    if (!tracked(w->p, x)) return GRAFT_OK;
    int64_t c = seg_total(&w->p->segs[x]);
    bool ok = n->n_in == 5 && extra_outputs_unread(w, n) && attr_i(n, "training_mode", 0) == 0;
    for (int k = 1; k < 5 && ok; k++)
        ok = const_f32(w->g, n->inputs[k]) && tensor_numel(&w->g->values[n->inputs[k]].data) == c;
    if (!ok) {
        mark_bad(w->p, x);
        return GRAFT_OK;
    }
    w->p->roles[i].roles |= CHAN_BN;
    return copy_segs(w, n->outputs[0], x);
}

/* Both operands tracked: their channels must line up segment by segment; the groups unite. */
static void tie_operands(chan_plan *p, int a, int b) {
    const chan_segs *sa = &p->segs[a], *sb = &p->segs[b];
    bool same = sa->n == sb->n;
    for (int k = 0; k < sa->n && same; k++) same = sa->s[k].len == sb->s[k].len;
    if (!same) {
        mark_bad(p, a);
        mark_bad(p, b);
        return;
    }
    for (int k = 0; k < sa->n; k++) unite(p, sa->s[k].group, sb->s[k].group);
}

static graft_status visit_eltwise(walk *w, int i) {
    const ir_graph *g = w->g;
    const ir_node *n = &g->nodes[i];
    if (n->n_in != 2 || n->n_out != 1 || n->outputs[0] < 0) {
        mark_inputs_bad(w, n, 0);
        return GRAFT_OK;
    }
    int a = n->inputs[0], b = n->inputs[1], out = n->outputs[0];
    bool ta = tracked(w->p, a), tb = tracked(w->p, b);
    if (!ta && !tb) return GRAFT_OK;
    int r = g->values[out].ndim;
    if ((ta && g->values[a].ndim != r) || (tb && g->values[b].ndim != r)) {
        mark_inputs_bad(w, n, 0);
        return GRAFT_OK;
    }
    if (ta && tb) {
        tie_operands(w->p, a, b);
        return copy_segs(w, out, a);
    }
    int t = ta ? a : b, other = ta ? b : a;
    int ro = g->values[other].ndim, axis = 1 - (r - ro);
    int64_t cdim = ro < 0 ? -1 : axis < 0 ? 1 : g->values[other].dims[axis];
    if (cdim == 1) return copy_segs(w, out, t);
    if (cdim == seg_total(&w->p->segs[t]) && const_f32(g, other)) {
        w->p->roles[i].roles |= CHAN_ELTWISE;
        w->p->roles[i].const_input = ta ? 1 : 0;
        return copy_segs(w, out, t);
    }
    mark_bad(w->p, t);
    return GRAFT_OK;
}

static graft_status visit_concat(walk *w, int i) {
    const ir_graph *g = w->g;
    const ir_node *n = &g->nodes[i];
    bool any = false;
    for (int k = 0; k < n->n_in; k++) any |= tracked(w->p, n->inputs[k]);
    if (!any) return GRAFT_OK;
    int out = n->outputs[0], r = g->values[out].ndim;
    int64_t axis = attr_i(n, "axis", 0);
    if (axis < 0) axis += r;
    int count = 0;
    for (int k = 0; k < n->n_in; k++)
        count += tracked(w->p, n->inputs[k]) ? w->p->segs[n->inputs[k]].n : 1;
    chan_seg *s = malloc(sizeof(chan_seg) * (size_t)count);
    if (!s) return err_set(w->e, GRAFT_E_OUT_OF_MEMORY, "out of memory tracing channels");
    bool ok = axis == 1;
    int m = 0;
    for (int k = 0; k < n->n_in && ok; k++) {
        int v = n->inputs[k];
        if (tracked(w->p, v)) {
            memcpy(s + m, w->p->segs[v].s, sizeof(chan_seg) * (size_t)w->p->segs[v].n);
            m += w->p->segs[v].n;
        } else {
            ok = v >= 0 && g->values[v].ndim == r && g->values[v].dims[1] >= 0;
            if (ok) s[m++] = (chan_seg){-1, g->values[v].dims[1]};
        }
    }
    graft_status st = GRAFT_OK;
    if (ok)
        st = set_segs(w, out, s, m);
    else
        mark_inputs_bad(w, n, 0);
    free(s);
    return st;
}

/* Flatten(axis 1) of tracked channels read only by Gemm/MatMul with constant weights: those
 * lose the flattened channels' input features. */
static graft_status visit_flatten(walk *w, int i) {
    const ir_graph *g = w->g;
    const ir_node *n = &g->nodes[i];
    int x = n->inputs[0], out = n->outputs[0];
    if (!tracked(w->p, x)) return GRAFT_OK;
    const ir_value *xv = &g->values[x];
    int64_t spatial = 1, c = seg_total(&w->p->segs[x]);
    bool ok =
        attr_i(n, "axis", 1) == 1 && xv->ndim >= 2 && out >= 0 && !g->values[out].is_graph_output;
    for (int d = 2; d < xv->ndim && ok; d++) {
        ok = xv->dims[d] >= 0;
        spatial *= xv->dims[d];
    }
    for (int j = 0; j < g->n_nodes && ok; j++) {
        const ir_node *r = &g->nodes[j];
        bool reads = false;
        for (int k = 0; k < r->n_in; k++) reads |= r->inputs[k] == out;
        if (!reads) continue;
        int b = r->n_in > 1 ? r->inputs[1] : -1;
        ok = r->inputs[0] == out && b != out && const_f32(g, b) && g->values[b].data.ndim == 2;
        if (ok && is_op(r, "Gemm")) {
            int axis = attr_i(r, "transB", 0) ? 1 : 0;
            ok = attr_i(r, "transA", 0) == 0 && g->values[b].data.dims[axis] == c * spatial;
        } else if (ok) {
            ok = is_op(r, "MatMul") && g->values[b].data.dims[0] == c * spatial;
        }
        if (ok) {
            w->p->roles[j].roles |= CHAN_FC;
            w->p->roles[j].fc_value = x;
            w->p->roles[j].fc_spatial = spatial;
        }
    }
    if (!ok) mark_bad(w->p, x);
    return GRAFT_OK;
}

static graft_status visit(walk *w, int i) {
    const ir_node *n = &w->g->nodes[i];
    if (n->dead || n->n_in < 1) return GRAFT_OK;
    if (is_op(n, "Conv")) return visit_conv(w, i);
    if (is_op(n, "BatchNormalization")) return visit_bn(w, i);
    if (op_in(n, eltwise_ops)) return visit_eltwise(w, i);
    if (is_op(n, "Concat")) return visit_concat(w, i);
    if (is_op(n, "Flatten")) return visit_flatten(w, i);
    if (op_in(n, preserving_ops)) {
        mark_inputs_bad(w, n, 1);
        int x = n->inputs[0];
        if (!tracked(w->p, x)) return GRAFT_OK;
        if (!extra_outputs_unread(w, n)) {
            mark_bad(w->p, x);
            return GRAFT_OK;
        }
        return copy_segs(w, n->outputs[0], x);
    }
    if (is_op(n, "Pad")) {
        int x = n->inputs[0];
        if (!tracked(w->p, x)) return GRAFT_OK;
        const int64_t *pads = NULL;
        int64_t np = attr_ints(n, "pads", &pads);
        int pv = n->n_in > 1 ? n->inputs[1] : -1;
        const ir_value *xv = &w->g->values[x];
        bool ok = n->n_in <= 3 && extra_outputs_unread(w, n) && xv->ndim >= 2;
        if (ok && pv >= 0) {
            ok = w->g->values[pv].is_const && tensor_numel(&w->g->values[pv].data) == 2 * xv->ndim;
            ok = ok && tensor_get_i64(&w->g->values[pv].data, 1) == 0 &&
                 tensor_get_i64(&w->g->values[pv].data, 1 + xv->ndim) == 0;
        } else if (ok) {
            ok = np == 2 * xv->ndim && pads[1] == 0 && pads[1 + xv->ndim] == 0;
        }
        mark_inputs_bad(w, n, 1);
        if (!ok) {
            mark_bad(w->p, x);
            return GRAFT_OK;
        }
        return copy_segs(w, n->outputs[0], x);
    }
    mark_inputs_bad(w, n, 0);
    return GRAFT_OK;
}

/* One output channel's importance in member conv n: its filter's norm, or |gamma| of the
 * BatchNormalization folded into n. */
static double channel_importance(const ir_node *n, const tensor *W, int64_t ch,
                                 graft_importance kind) {
    if (kind == GRAFT_IMPORTANCE_BN) return fabs((double)n->bn_gamma[ch]);
    int64_t per = tensor_numel(W) / W->dims[0];
    const float *row = (const float *)W->data + ch * per;
    double sum = 0;
    for (int64_t j = 0; j < per; j++)
        sum += kind == GRAFT_IMPORTANCE_L2 ? (double)row[j] * row[j] : fabs(row[j]);
    return kind == GRAFT_IMPORTANCE_L2 ? sqrt(sum) : sum;
}

/* Add member i's per-channel importance to its groups' (the groups imp has room for). */
static graft_status add_importance(const ir_graph *g, const chan_plan *p, int i,
                                   graft_importance kind, double **imp, graft_err *e) {
    const ir_node *n = &g->nodes[i];
    const tensor *W = &g->values[n->inputs[1]].data;
    const chan_segs *s = &p->segs[n->outputs[0]];
    int64_t off = 0;
    for (int k = 0; k < s->n; off += s->s[k].len, k++) {
        if (s->s[k].group < 0) continue;
        int r = chan_group_root(p, s->s[k].group);
        if (!imp[r]) continue;
        if (kind == GRAFT_IMPORTANCE_BN && !n->bn_gamma)
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "prune channels: importance bn: Conv '%s' has no BatchNormalization "
                           "folded into it, so no gamma ranks its channels (use l1 or l2)",
                           n->name);
        for (int64_t c = 0; c < s->s[k].len; c++)
            imp[r][c] += channel_importance(n, W, off + c, kind);
    }
    return GRAFT_OK;
}

typedef struct ranked {
    double importance;
    int64_t channel;
} ranked;

static int by_importance(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->importance != y->importance) return x->importance < y->importance ? -1 : 1;
    return x->channel < y->channel ? -1 : x->channel > y->channel;
}

/* Whether root r is one the options let the plan shrink. */
static bool in_scope(const chan_plan *p, const graft_prune_options *o, int r) {
    return !p->bad[r] && !(o->scope == GRAFT_PRUNE_SCOPE_INNER && p->joined[r]);
}

/* Keep masks for every root in scope: of the L channels it had when loaded, round(sparsity * L)
 * are gone afterwards (at most L - 1); those still there go least important first (ties: the
 * lower index first). */
static graft_status choose(chan_plan *p, const graft_prune_options *o, double **imp, graft_err *e) {
    for (int r = 0; r < p->n_groups; r++) {
        if (chan_group_root(p, r) != r) continue;
        p->groups_total++;
        if (p->bad[r]) {
            p->groups_excluded += p->excluded[r];
            p->groups_unprunable += !p->excluded[r];
            continue;
        }
        if (!in_scope(p, o, r)) {
            p->groups_out_of_scope++;
            continue;
        }
        int64_t c = p->size[r], loaded = p->loaded[r] > c ? p->loaded[r] : c;
        int64_t gone = llround(o->sparsity * (double)loaded);
        if (gone > loaded - 1) gone = loaded - 1;
        int64_t drop = gone - (loaded - c) > 0 ? gone - (loaded - c) : 0;
        p->channels_loaded += loaded;
        p->channels_gone += loaded - c + drop;
        if (drop <= 0) continue;
        ranked *order = malloc(sizeof(ranked) * (size_t)c);
        p->keep[r] = malloc(sizeof(bool) * (size_t)c);
        if (!order || !p->keep[r]) {
            free(order);
            return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory choosing channels");
        }
        for (int64_t k = 0; k < c; k++) {
            order[k] = (ranked){imp[r][k], k};
            p->keep[r][k] = true;
        }
        qsort(order, (size_t)c, sizeof(ranked), by_importance);
        for (int64_t k = 0; k < drop; k++) p->keep[r][order[k].channel] = false;
        free(order);
        p->groups_pruned++;
        p->channels_removed += drop;
    }
    return GRAFT_OK;
}

void chan_plan_free(chan_plan *p) {
    if (p->segs)
        for (int v = 0; v < p->n_values; v++) free(p->segs[v].s);
    if (p->keep)
        for (int r = 0; r < p->n_groups; r++) free(p->keep[r]);
    free(p->segs), free(p->roles), free(p->parent), free(p->size), free(p->bad);
    free(p->excluded), free(p->keep), free(p->loaded), free(p->joined);
    memset(p, 0, sizeof *p);
}

static graft_status plan_alloc(const ir_graph *g, chan_plan *p, graft_err *e) {
    memset(p, 0, sizeof *p);
    p->n_values = g->n_values;
    p->n_nodes = g->n_nodes;
    size_t groups = (size_t)g->n_nodes + 1;
    p->segs = calloc((size_t)g->n_values + 1, sizeof(chan_segs));
    p->roles = calloc(groups, sizeof(chan_role));
    p->parent = calloc(groups, sizeof(int));
    p->size = calloc(groups, sizeof(int64_t));
    p->bad = calloc(groups, sizeof(bool));
    p->excluded = calloc(groups, sizeof(bool));
    p->keep = calloc(groups, sizeof(bool *));
    p->loaded = calloc(groups, sizeof(int64_t));
    p->joined = calloc(groups, sizeof(bool));
    if (!p->segs || !p->roles || !p->parent || !p->size || !p->bad || !p->excluded || !p->keep ||
        !p->loaded || !p->joined)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory planning channel pruning");
    return GRAFT_OK;
}

static graft_status trace(const ir_graph *g, const graft_prune_options *o, chan_plan *p,
                          graft_err *e) {
    walk w = {g, o, p, calloc((size_t)g->n_values + 1, sizeof(int)), e};
    if (!w.readers) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory tracing channels");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (!g->nodes[i].dead && g->nodes[i].inputs[k] >= 0) w.readers[g->nodes[i].inputs[k]]++;
    for (int i = 0; i < g->n_outputs; i++) w.readers[g->outputs[i]]++;
    graft_status st = GRAFT_OK;
    for (int i = 0; i < g->n_nodes && st == GRAFT_OK; i++) st = visit(&w, i);
    free(w.readers);
    /* A graph output keeps its channels. */
    for (int i = 0; i < g->n_outputs; i++) mark_bad(p, g->outputs[i]);
    for (int r = 0; r < p->n_groups; r++) {
        int root = chan_group_root(p, r);
        p->bad[root] |= p->bad[r];
        p->excluded[root] |= p->excluded[r];
        p->joined[root] |= p->joined[r];
        if (p->loaded[r] > p->loaded[root]) p->loaded[root] = p->loaded[r];
    }
    return st;
}

graft_status chan_plan_build(const ir_graph *g, const graft_prune_options *o, chan_plan *p,
                             graft_err *e) {
    graft_status st = plan_alloc(g, p, e);
    if (st == GRAFT_OK) st = trace(g, o, p, e);
    double **imp = st == GRAFT_OK ? calloc((size_t)p->n_groups + 1, sizeof(double *)) : NULL;
    if (st == GRAFT_OK && !imp) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int r = 0; r < p->n_groups && st == GRAFT_OK; r++) {
        if (chan_group_root(p, r) != r || !in_scope(p, o, r)) continue;
        imp[r] = calloc((size_t)p->size[r], sizeof(double));
        if (!imp[r]) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory ranking channels");
    }
    for (int i = 0; i < g->n_nodes && st == GRAFT_OK; i++)
        if (p->roles[i].roles & (CHAN_SOURCE | CHAN_DEPTHWISE))
            st = add_importance(g, p, i, o->importance, imp, e);
    if (st == GRAFT_OK) st = choose(p, o, imp, e);
    if (imp)
        for (int r = 0; r < p->n_groups; r++) free(imp[r]);
    free(imp);
    if (st != GRAFT_OK) chan_plan_free(p);
    return st;
}

graft_status chan_value_keep(const chan_plan *p, int v, bool **keep, int64_t *len, int64_t *kept,
                             graft_err *e) {
    *keep = NULL;
    *len = *kept = 0;
    if (v < 0 || v >= p->n_values || !tracked(p, v)) return GRAFT_OK;
    const chan_segs *s = &p->segs[v];
    bool any = false;
    for (int k = 0; k < s->n; k++)
        any |= s->s[k].group >= 0 && p->keep[chan_group_root(p, s->s[k].group)];
    if (!any) return GRAFT_OK;
    int64_t total = seg_total(s), off = 0;
    bool *m = malloc(sizeof(bool) * (size_t)total);
    if (!m) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory slicing channels");
    for (int k = 0; k < s->n; off += s->s[k].len, k++) {
        const bool *gk = s->s[k].group >= 0 ? p->keep[chan_group_root(p, s->s[k].group)] : NULL;
        for (int64_t c = 0; c < s->s[k].len; c++) m[off + c] = gk ? gk[c] : true;
    }
    for (int64_t c = 0; c < total; c++) *kept += m[c];
    *keep = m;
    *len = total;
    return GRAFT_OK;
}

/* freeze_points.c: the candidate freeze points before a cut (the tensors every path from the data
 * inputs to the cut passes through), and their grouping into CNN stages or encoder layers that
 * `--unfreeze N` counts. docs/training.md ("Freeze points") states the rules for users. */
#include <stdlib.h>
#include <string.h>

#include "auto_cut.h"
#include "freeze_points.h"
#include "text_inputs.h"

#define ROOT (-2) /* the virtual source feeding every data input */

/* One step of the candidate chain: the region of nodes from a candidate to the next one. */
typedef struct region {
    int from, to;      /* values: a candidate and the next candidate (or the cut) */
    bool attention;    /* a MatMul/Einsum of two computed values (scores, context) */
    bool merge_add;    /* an Add/Sum of two computed values: a residual connection */
    bool merge_concat; /* a Concat of two computed values: a dense connection */
    int nodes;         /* nodes on the way */
    bool has_params;
} region;

typedef struct work {
    const ir_graph *g;
    bool *data;     /* per value: computed from a data input (not only from shapes or a mask) */
    bool *upstream; /* per node: needed for the cut */
    int *ord;       /* per value: topological position; -1 for values outside the data flow */
    int *idom;      /* per value: immediate dominator (ROOT for data inputs) */
    int *kept;      /* candidates, input side first */
    int n_kept;
    region *reg; /* reg[i]: from kept[i] to kept[i+1] (the last one to the cut) */
} work;

static bool is_op(const ir_node *n, const char *op) {
    return strcmp(n->op_type, op) == 0;
}

/* Ops that only change how a tensor is viewed: one candidate stands for a run of them. */
static bool is_view_op(const ir_node *n) {
    static const char *const ops[] = {"Reshape",  "Flatten", "Squeeze",   "Unsqueeze",
                                      "Identity", "Dropout", "Transpose", NULL};
    for (const char *const *op = ops; *op; op++)
        if (is_op(n, *op)) return true;
    return false;
}

static bool is_param(const ir_graph *g, int v) {
    return v >= 0 && g->values[v].is_const && dtype_is_float(g->values[v].dtype) &&
           tensor_numel(&g->values[v].data) > 1;
}

/* Input k of n is a trained parameter (as the training graph takes them): not BatchNorm's
 * running statistics, not Resize's roi or scales. */
static bool is_param_input(const ir_graph *g, const ir_node *n, int k) {
    if (is_op(n, "BatchNormalization") && k >= 3) return false;
    if (is_op(n, "Resize") && (k == 1 || k == 2)) return false;
    return is_param(g, n->inputs[k]);
}

static int data_input_count(const work *w, const ir_node *n, int *first) {
    int count = 0;
    for (int k = 0; k < n->n_in; k++)
        if (n->inputs[k] >= 0 && w->data[n->inputs[k]]) {
            if (count++ == 0 && first) *first = n->inputs[k];
        }
    return count;
}

/* Data values: computed from an input other than the attention mask, not through Shape/Size
 * (a shape does not carry the values). Nodes needed for the cut: walked back from it. */
static graft_status mark_data_and_upstream(work *w, int cut, graft_err *e) {
    const ir_graph *g = w->g;
    int roles[GRAFT_TEXT_INPUT_COUNT];
    int mask = graph_text_inputs(g, roles, NULL) == GRAFT_OK ? roles[GRAFT_TEXT_INPUT_MASK] : -1;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] != mask) w->data[g->inputs[i]] = true;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || is_op(n, "Shape") || is_op(n, "Size") || data_input_count(w, n, NULL) == 0)
            continue;
        for (int k = 0; k < n->n_out; k++)
            if (n->outputs[k] >= 0) w->data[n->outputs[k]] = true;
    }
    bool *needed = calloc((size_t)g->n_values, sizeof *needed);
    if (!needed) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    needed[cut] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ir_node *n = &g->nodes[i];
        bool need = false;
        for (int k = 0; !n->dead && k < n->n_out; k++)
            need |= n->outputs[k] >= 0 && needed[n->outputs[k]];
        if (!need) continue;
        w->upstream[i] = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] >= 0) needed[n->inputs[k]] = true;
    }
    free(needed);
    return GRAFT_OK;
}

static int intersect(const work *w, int a, int b) {
    while (a != b) {
        while (a != ROOT && (b == ROOT || w->ord[a] > w->ord[b])) a = w->idom[a];
        while (b != ROOT && (a == ROOT || w->ord[b] > w->ord[a])) b = w->idom[b];
    }
    return a;
}

/* Immediate dominators of the data values (Cooper, Harvey and Kennedy's intersection; one pass
 * in topological order suffices on a DAG). */
static graft_status dominators(work *w, graft_err *e) {
    const ir_graph *g = w->g;
    int next = 0;
    for (int i = 0; i < g->n_inputs; i++)
        if (w->data[g->inputs[i]]) w->ord[g->inputs[i]] = next++, w->idom[g->inputs[i]] = ROOT;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool computed = false;
        for (int k = 0; !n->dead && k < n->n_out; k++)
            computed |= n->outputs[k] >= 0 && w->data[n->outputs[k]];
        if (!computed) continue;
        int dom = -1;
        for (int k = 0; k < n->n_in; k++) {
            int v = n->inputs[k];
            if (v < 0 || !w->data[v]) continue;
            if (w->ord[v] < 0)
                return err_set(e, GRAFT_E_INTERNAL,
                               "freeze points: node '%s' (%s) comes before the producer of its "
                               "input '%s'",
                               n->name, n->op_type, g->values[v].name);
            dom = dom == -1 ? v : intersect(w, dom, v);
        }
        for (int k = 0; k < n->n_out; k++)
            if (n->outputs[k] >= 0) w->ord[n->outputs[k]] = next++, w->idom[n->outputs[k]] = dom;
    }
    return GRAFT_OK;
}

/* Whether v is in the run of view ops that ends at `end` (v == end included). */
static bool in_view_run(const work *w, int end, int v) {
    for (int depth = 0; end >= 0 && depth < 32; depth++) {
        if (end == v) return true;
        int p = w->g->values[end].producer, first = -1;
        if (p < 0 || !is_view_op(&w->g->nodes[p]) ||
            data_input_count(w, &w->g->nodes[p], &first) != 1)
            return false;
        end = first;
    }
    return false;
}

/* The dominators of the cut, input side first, without graph inputs, one per run of view ops
 * (the run's first value), and none in the cut's own run. */
static graft_status collect_candidates(work *w, int cut, graft_err *e) {
    int n = 0;
    for (int v = w->idom[cut]; v != ROOT && v >= 0; v = w->idom[v]) n++;
    int *chain = malloc(sizeof *chain * (size_t)(n + 1));
    w->kept = malloc(sizeof *w->kept * (size_t)(n + 1));
    if (!chain || !w->kept) return free(chain), err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    int k = n;
    for (int v = w->idom[cut]; v != ROOT && v >= 0; v = w->idom[v]) chain[--k] = v;
    for (int i = 0; i < n; i++) {
        int v = chain[i];
        if (w->g->values[v].producer < 0 || in_view_run(w, cut, v)) continue;
        if (w->n_kept > 0 && in_view_run(w, v, w->kept[w->n_kept - 1]))
            continue; /* a view of the candidate before it */
        w->kept[w->n_kept++] = v;
    }
    free(chain);
    return GRAFT_OK;
}

/* What the nodes from one candidate to the next do (nodes between their producers that the cut
 * needs all lie on paths between the two, since both dominate the cut). */
static void classify(const work *w, region *r) {
    const ir_graph *g = w->g;
    int lo = g->values[r->from].producer, hi = g->values[r->to].producer;
    for (int i = lo + 1; i <= hi; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || !w->upstream[i] || data_input_count(w, n, NULL) == 0) continue;
        r->nodes++;
        for (int k = 0; k < n->n_in; k++) r->has_params |= is_param_input(g, n, k);
        bool two = data_input_count(w, n, NULL) >= 2;
        r->attention |= strstr(n->op_type, "Attention") != NULL ||
                        (two && (is_op(n, "MatMul") || is_op(n, "Einsum")));
        r->merge_add |= two && (is_op(n, "Add") || is_op(n, "Sum"));
        r->merge_concat |= two && is_op(n, "Concat");
    }
}

static bool is_block(const region *r) {
    return r->merge_add || r->merge_concat || r->attention;
}

/* From candidate index i, through steps of one parameter-free node (an activation after a
 * residual Add) that do not start a block. */
static int past_activations(const work *w, int i) {
    while (i + 1 < w->n_kept && w->reg[i].nodes == 1 && !w->reg[i].has_params &&
           !is_block(&w->reg[i]))
        i++;
    return i;
}

/* Whether a block ending at `out` continues the stage of the block ending at `prev`: the same
 * spatial size, and for residual (Add) blocks the same channels (concatenation grows them). */
static bool same_stage(const ir_value *prev, const ir_value *out, bool add) {
    if (prev->ndim != out->ndim) return false;
    for (int d = out->ndim == 4 ? 2 - add : 1; d < out->ndim; d++)
        if (prev->dims[d] != out->dims[d]) return false;
    return true;
}

static void set_unit(freeze_points *fp, int kept_index, int unit, const char *kind) {
    fp->point[kept_index].unit = unit;
    fp->point[kept_index].kind = kind;
}

/* Encoder layers: each starts at the input of a region with attention. */
static void group_layers(const work *w, freeze_points *fp) {
    for (int i = 0; i < w->n_kept; i++) fp->units += w->reg[i].attention;
    int unit = fp->units;
    for (int i = 0; i < w->n_kept; i++)
        if (w->reg[i].attention) set_unit(fp, i, unit--, "layer");
    fp->unit_kind = fp->units ? "layer" : NULL;
}

/* CNN stages: runs of blocks whose outputs keep the spatial size (and channels); the first
 * stage starts at its first block's input, a later one where the stage before it ends (its
 * last block's output, past the activations after it). */
static graft_status group_stages(const work *w, freeze_points *fp, graft_err *e) {
    int *start = malloc(sizeof *start * (size_t)(w->n_kept + 1)), n = 0, prev = -1;
    if (!start) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < w->n_kept; i++) {
        const region *r = &w->reg[i];
        if (!is_block(r)) continue;
        const ir_value *out = &w->g->values[r->to];
        if (prev < 0)
            start[n++] = i;
        else if (!same_stage(&w->g->values[w->reg[prev].to], out, r->merge_add))
            start[n++] = past_activations(w, prev + 1);
        prev = i;
    }
    fp->units = n;
    fp->unit_kind = n ? "stage" : NULL;
    for (int s = 0; s < n; s++) set_unit(fp, start[s], n - s, "stage");
    free(start);
    return GRAFT_OK;
}

/* The trainable part's parameter elements after each candidate, and its first node. */
static graft_status count_parameters(const work *w, freeze_points *fp, graft_err *e) {
    const ir_graph *g = w->g;
    bool *reach = malloc(sizeof *reach * (size_t)g->n_values);
    bool *counted = malloc(sizeof *counted * (size_t)g->n_values);
    if (!reach || !counted) {
        free(reach), free(counted);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    for (int p = 0; p < fp->n; p++) {
        freeze_point *pt = &fp->point[p];
        memset(reach, 0, sizeof *reach * (size_t)g->n_values);
        memset(counted, 0, sizeof *counted * (size_t)g->n_values);
        reach[pt->value] = true;
        pt->first_node = -1;
        for (int i = g->values[pt->value].producer + 1; i < g->n_nodes; i++) {
            const ir_node *n = &g->nodes[i];
            bool reads = false;
            for (int k = 0; k < n->n_in; k++) reads |= n->inputs[k] >= 0 && reach[n->inputs[k]];
            if (n->dead || !w->upstream[i] || !reads) continue;
            if (is_op(n, "Shape") || is_op(n, "Size")) continue; /* no data after it */
            if (pt->first_node < 0) pt->first_node = i;
            for (int k = 0; k < n->n_out; k++)
                if (n->outputs[k] >= 0) reach[n->outputs[k]] = true;
            for (int k = 0; k < n->n_in; k++) {
                int v = n->inputs[k];
                if (!is_param_input(g, n, k) || counted[v]) continue;
                counted[v] = true;
                pt->trainable_parameters += tensor_numel(&g->values[v].data);
            }
        }
    }
    free(reach), free(counted);
    return GRAFT_OK;
}

static graft_status find_points(work *w, int cut, freeze_points *fp, graft_err *e) {
    const ir_value *c = &w->g->values[cut];
    TRY(mark_data_and_upstream(w, cut, e));
    if (!w->data[cut] || c->producer < 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "freeze points: the cut '%s' is %s, not computed from the model's data "
                       "inputs",
                       c->name,
                       c->producer < 0 ? "a graph input or constant"
                                       : "computed only from constants, shapes or the mask");
    TRY(dominators(w, e));
    TRY(collect_candidates(w, cut, e));
    w->reg = calloc((size_t)w->n_kept + 1, sizeof *w->reg);
    fp->point = calloc((size_t)w->n_kept + 1, sizeof *fp->point);
    if (!w->reg || !fp->point) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    bool attention = false, blocks = false;
    for (int i = 0; i < w->n_kept; i++) {
        w->reg[i].from = w->kept[i];
        w->reg[i].to = i + 1 < w->n_kept ? w->kept[i + 1] : cut;
        classify(w, &w->reg[i]);
        attention |= w->reg[i].attention;
        blocks |= is_block(&w->reg[i]);
    }
    /* Listed nearest the cut first; kinds and units are set on the input-side order first. */
    fp->n = w->n_kept;
    for (int i = 0; i < w->n_kept; i++) {
        fp->point[i].value = w->kept[i];
        fp->point[i].kind = "tensor";
    }
    int last_block = -1;
    for (int i = 0; i < w->n_kept; i++)
        if (is_block(&w->reg[i])) fp->point[i].kind = "block", last_block = i;
    if (last_block >= 0 && last_block + 1 < w->n_kept) /* the last block's output */
        fp->point[past_activations(w, last_block + 1)].kind = "block";
    if (attention)
        group_layers(w, fp);
    else if (blocks)
        TRY(group_stages(w, fp, e));
    TRY(count_parameters(w, fp, e));
    for (int i = 0, j = fp->n - 1; i < j; i++, j--) {
        freeze_point t = fp->point[i];
        fp->point[i] = fp->point[j];
        fp->point[j] = t;
    }
    return GRAFT_OK;
}

graft_status model_freeze_points(const graft_model *m, int cut, freeze_points *fp, graft_err *e) {
    const ir_graph *g = &m->g;
    memset(fp, 0, sizeof *fp);
    fp->cut = cut;
    if (cut < 0 || cut >= g->n_values)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "freeze points: no such cut tensor");
    work w = {.g = g};
    size_t nv = (size_t)g->n_values, nn = (size_t)g->n_nodes + 1;
    w.data = calloc(nv, sizeof *w.data);
    w.upstream = calloc(nn, sizeof *w.upstream);
    w.ord = malloc(nv * sizeof *w.ord);
    w.idom = malloc(nv * sizeof *w.idom);
    graft_status st = GRAFT_OK;
    if (!w.data || !w.upstream || !w.ord || !w.idom) {
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    } else {
        for (size_t i = 0; i < nv; i++) w.ord[i] = -1, w.idom[i] = -1;
        st = find_points(&w, cut, fp, e);
    }
    free(w.data), free(w.upstream), free(w.ord), free(w.idom), free(w.kept), free(w.reg);
    if (st != GRAFT_OK) freeze_points_free(fp);
    return st;
}

void freeze_points_free(freeze_points *fp) {
    if (!fp) return;
    free(fp->point);
    fp->point = NULL;
    fp->n = fp->units = 0;
}

/* The auto cut's freeze points, found once per graph (a cut drops them). */
static graft_status model_points(const graft_model *cm, const freeze_points **out) {
    graft_model *m = (graft_model *)cm; /* keeps the result */
    if (!m->freeze) {
        auto_cut c;
        TRY(model_auto_cut(m, &c, &m->ctx->err));
        freeze_points *fp = calloc(1, sizeof *fp);
        if (!fp) return err_set(&m->ctx->err, GRAFT_E_OUT_OF_MEMORY, "out of memory");
        graft_status st = model_freeze_points(m, c.value, fp, &m->ctx->err);
        if (st != GRAFT_OK) return free(fp), st;
        m->freeze = fp;
    }
    *out = m->freeze;
    return GRAFT_OK;
}

void model_drop_freeze_points(graft_model *m) {
    if (!m->freeze) return;
    freeze_points_free(m->freeze);
    free(m->freeze);
    m->freeze = NULL;
}

int graft_model_freeze_point_count(const graft_model *m) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    const freeze_points *fp;
    graft_status st = model_points(m, &fp);
    return st != GRAFT_OK ? (int)st : fp->n;
}

graft_status graft_model_freeze_point(const graft_model *m, int index,
                                      graft_freeze_point_info *out) {
    if (!m || !out) return GRAFT_E_INVALID_ARGUMENT;
    const freeze_points *fp;
    TRY(model_points(m, &fp));
    if (index < 0 || index >= fp->n)
        return err_set(&m->ctx->err, GRAFT_E_INVALID_ARGUMENT,
                       "graft_model_freeze_point: index %d out of range (%d candidates)", index,
                       fp->n);
    const freeze_point *p = &fp->point[index];
    out->tensor = m->g.values[p->value].name;
    out->kind = p->kind;
    out->unit = p->unit;
    out->first_node = p->first_node >= 0 ? m->g.nodes[p->first_node].name : "";
    out->trainable_parameters = p->trainable_parameters;
    return GRAFT_OK;
}

graft_status graft_model_unfreeze_point(const graft_model *m, int n, const char **tensor_name,
                                        int *units, const char **unit_kind) {
    if (!m || !tensor_name) return GRAFT_E_INVALID_ARGUMENT;
    const freeze_points *fp;
    TRY(model_points(m, &fp));
    if (units) *units = fp->units;
    if (unit_kind) *unit_kind = fp->unit_kind;
    if (fp->units == 0)
        return err_set(&m->ctx->err, GRAFT_E_NOT_FOUND,
                       "--unfreeze %d: no stages or layers recognised in this model (%d candidate "
                       "freeze points before the cut '%s'; name one with --train-from)",
                       n, fp->n, m->g.values[fp->cut].name);
    for (int i = 0; i < fp->n; i++)
        if (fp->point[i].unit == n && n > 0) {
            *tensor_name = m->g.values[fp->point[i].value].name;
            return GRAFT_OK;
        }
    return err_set(&m->ctx->err, GRAFT_E_INVALID_ARGUMENT,
                   "--unfreeze %d: out of range, the model has %d %ss before the cut '%s' "
                   "(--unfreeze 1..%d)",
                   n, fp->units, fp->unit_kind, m->g.values[fp->cut].name, fp->units);
}

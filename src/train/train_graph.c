/* train_graph.c: building the training graph: a model's trainable part copied, its parameters
 * made graph inputs, and one Backward node per node the gradient passes (train_graph.h). */
#include "train_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/build.h"
#include "../graph/graph.h"
#include "../ops/backward.h"
#include "../ops/grad.h"

/* Scratch while building: per model value / model node, then per training-graph value. */
typedef struct tg_build {
    const ir_graph *m;
    train_graph *tg;
    ir_graph *g;
    const char *from_name, *to_name;
    unsigned char *dep;       /* per model value: computed from `from` */
    unsigned char *need;      /* per model value: `to` is computed from it */
    unsigned char *trainable; /* per model node */
    unsigned char *param;     /* per model value: becomes a parameter */
    int *map;                 /* per model value: its index in g, -1 before it is copied */
    int n_fwd_values;         /* g's values before the backward pass adds any */
    unsigned char *requires;  /* per g value: a gradient is wanted (a parameter's or its child's) */
    int *count;               /* per g value: the partial gradients the backward pass makes */
    int *start, *fill;        /* per g value: where its partials sit in `partial` */
    int *partial;             /* the partial gradients' values, grouped by value */
    int *final;               /* per g value: its summed gradient (-1 none, -2 not yet summed) */
    unsigned char *backward;  /* per g node: gets a Backward node */
    bool want_from;           /* options.grad_from */
    bool scalar_params;       /* options.scalar_params */
    const char *const *param_names; /* options.param_names (n_param_names) */
    int n_param_names;
    graft_dtype round_to; /* options.round_to (0: none) */
} tg_build;

static graft_status find_tensor(const ir_graph *m, const char *name, const char *what, int *v,
                                graft_err *e) {
    *v = name ? ir_find_value(m, name) : -1;
    if (*v < 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "training graph: the model has no tensor named '%s' (the %s)",
                       name ? name : "(null)", what);
    return GRAFT_OK;
}

/* The trainable nodes: computed from `from` (dep) and needed for `to` (need). */
static graft_status mark_trainable(tg_build *b, int from, int to, graft_err *e) {
    const ir_graph *m = b->m;
    if (m->values[from].is_const)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "training graph: '%s' (the tensor to train from) is a constant",
                       b->from_name);
    b->dep[from] = 1;
    for (int i = 0; i < m->n_nodes; i++) {
        const ir_node *n = &m->nodes[i];
        bool d = false;
        for (int k = 0; k < n->n_in; k++) d = d || (n->inputs[k] >= 0 && b->dep[n->inputs[k]]);
        for (int k = 0; d && k < n->n_out; k++)
            if (n->outputs[k] >= 0) b->dep[n->outputs[k]] = 1;
    }
    if (from == to || !b->dep[to])
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "training graph: '%s' is not computed from '%s' (the tensor to train from "
                       "must be upstream of the output)",
                       b->to_name, b->from_name);
    b->need[to] = 1;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        const ir_node *n = &m->nodes[i];
        bool needed = false;
        for (int k = 0; k < n->n_out; k++)
            needed = needed || (n->outputs[k] >= 0 && b->need[n->outputs[k]]);
        bool d = false;
        for (int k = 0; k < n->n_in; k++) d = d || (n->inputs[k] >= 0 && b->dep[n->inputs[k]]);
        if (!needed || !d) continue;
        b->trainable[i] = 1;
        b->tg->n_forward_nodes++;
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] >= 0) b->need[n->inputs[k]] = 1;
    }
    return GRAFT_OK;
}

/* Inputs that take no gradient whatever their dtype: shapes, axes, bounds, BatchNormalization's
 * running statistics, Dropout's ratio and mode, Resize's roi and scales. */
static bool takes_no_grad(const char *op, int k) {
    if (op_input_on_host(op, k)) return true;
    if (!strcmp(op, "BatchNormalization")) return k >= 3;
    if (!strcmp(op, "Dropout") || !strcmp(op, "Resize")) return k >= 1;
    return false;
}

static graft_status append(int **list, int *n, int v, graft_err *e) {
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == v) return GRAFT_OK;
    int *l = realloc(*list, sizeof(int) * (size_t)(*n + 1));
    if (!l) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory building the training graph");
    *list = l;
    l[(*n)++] = v;
    return GRAFT_OK;
}

/* Whether val is one of options.param_names (a parameter whatever its size). */
static bool named(const tg_build *b, const ir_value *val) {
    for (int i = 0; i < b->n_param_names; i++)
        if (val->name && !strcmp(val->name, b->param_names[i])) return true;
    return false;
}

/* Parameters and side inputs (model indices), in the order trainable nodes first read them. */
static graft_status classify_inputs(tg_build *b, int from, graft_err *e) {
    const ir_graph *m = b->m;
    train_graph *tg = b->tg;
    for (int i = 0; i < m->n_nodes; i++) {
        if (!b->trainable[i]) continue;
        const ir_node *n = &m->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            int v = n->inputs[k];
            if (v < 0 || v == from) continue;
            int p = m->values[v].producer;
            if (p >= 0 && b->trainable[p]) continue;
            const ir_value *val = &m->values[v];
            if (!val->is_const) {
                TRY(append(&tg->model_side, &tg->n_side, v, e));
            } else if (dtype_is_float(val->dtype) &&
                       tensor_numel(&val->data) > (b->scalar_params || named(b, val) ? 0 : 1) &&
                       !takes_no_grad(n->op_type, k)) {
                b->param[v] = 1;
                TRY(append(&tg->model_params, &tg->n_params, v, e));
            }
        }
    }
    return GRAFT_OK;
}

/* Model value mv in g (copied on first use: shape, dtype, and data unless a parameter). */
static graft_status map_value(tg_build *b, int mv, int *gv, graft_err *e) {
    if (mv < 0) {
        *gv = -1;
        return GRAFT_OK;
    }
    if (b->map[mv] >= 0) {
        *gv = b->map[mv];
        return GRAFT_OK;
    }
    const ir_value *src = &b->m->values[mv];
    TRY(graph_add_value(b->g, src->name, gv, e));
    ir_value *v = &b->g->values[*gv];
    v->dtype = src->dtype;
    v->ndim = src->ndim;
    memcpy(v->dims, src->dims, sizeof v->dims);
    b->map[mv] = *gv;
    if (!src->is_const || b->param[mv]) return GRAFT_OK;
    v->is_const = true;
    return tensor_clone(&v->data, &src->data, e);
}

static graft_status add_input(tg_build *b, int mv, int *gv, graft_err *e) {
    TRY(map_value(b, mv, gv, e));
    b->g->values[*gv].is_graph_input = true;
    return append(&b->g->inputs, &b->g->n_inputs, *gv, e);
}

static graft_status copy_attrs(ir_node *n, const ir_attr *attrs, int n_attrs, int extra,
                               graft_err *e) {
    n->attrs = calloc((size_t)(n_attrs + extra > 0 ? n_attrs + extra : 1), sizeof(ir_attr));
    if (!n->attrs) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory copying attributes");
    for (int i = 0; i < n_attrs; i++) {
        TRY(ir_attr_copy(&n->attrs[n->n_attrs], &attrs[i], e));
        n->n_attrs++;
    }
    return GRAFT_OK;
}

/* Whether model value mv is rounded (options.round_to): an f32 value. */
static bool rounds(const tg_build *b, int mv) {
    return b->round_to != GRAFT_DTYPE_UNDEFINED && mv >= 0 &&
           b->m->values[mv].dtype == GRAFT_DTYPE_F32;
}

/* g value v through a Cast to round_to and back; the result named `name` becomes model value
 * mv's (consumers read the rounded value). */
static graft_status round_trip(tg_build *b, int mv, int v, const char *name, graft_err *e) {
    char half_name[1100];
    snprintf(half_name, sizeof half_name, "%.1000s/half", name);
    int h, out;
    TRY(graph_add_node(b->g, "Cast", 13, &v, 1, half_name, "to", b->round_to, &h, e));
    TRY(graph_add_node(b->g, "Cast", 13, &h, 1, name, "to", GRAFT_DTYPE_F32, &out, e));
    const ir_value *src = &b->m->values[mv];
    ir_value *hv = &b->g->values[h], *ov = &b->g->values[out];
    hv->dtype = b->round_to, ov->dtype = GRAFT_DTYPE_F32;
    hv->ndim = ov->ndim = src->ndim;
    memcpy(hv->dims, src->dims, sizeof hv->dims);
    memcpy(ov->dims, src->dims, sizeof ov->dims);
    b->map[mv] = out;
    return GRAFT_OK;
}

/* A copy of model node src reading and writing g's values; with round_to, its f32 outputs are
 * written to <name>/raw values and rounded into the model's names. */
static graft_status copy_node(tg_build *b, const ir_node *src, graft_err *e) {
    int gv;
    for (int k = 0; k < src->n_in; k++) TRY(map_value(b, src->inputs[k], &gv, e));
    for (int k = 0; k < src->n_out; k++) {
        int mv = src->outputs[k];
        if (!rounds(b, mv)) {
            TRY(map_value(b, mv, &gv, e));
            continue;
        }
        char raw[1100];
        snprintf(raw, sizeof raw, "%.1000s/raw", b->m->values[mv].name);
        TRY(graph_add_value(b->g, raw, &b->map[mv], e));
        b->g->values[b->map[mv]].dtype = GRAFT_DTYPE_F32;
    }
    ir_node n;
    TRY(ir_node_clone(&n, src, b->map, e));
    graft_status st = ir_add_node(b->g, &n, NULL, e);
    if (st != GRAFT_OK) {
        ir_node_free(&n);
        return st;
    }
    for (int k = 0; k < src->n_out; k++) {
        int mv = src->outputs[k];
        if (rounds(b, mv)) TRY(round_trip(b, mv, b->map[mv], b->m->values[mv].name, e));
    }
    return GRAFT_OK;
}

/* With round_to: `from` and each parameter (already inputs of g) rounded for their readers. */
static graft_status round_inputs(tg_build *b, graft_err *e) {
    train_graph *tg = b->tg;
    int mf = -1;
    for (int v = 0; v < b->m->n_values && mf < 0; v++)
        if (b->map[v] == tg->from) mf = v;
    char name[1100];
    if (mf >= 0 && rounds(b, mf)) {
        snprintf(name, sizeof name, "%.1000s/rounded", b->m->values[mf].name);
        TRY(round_trip(b, mf, tg->from, name, e));
    }
    for (int i = 0; i < tg->n_params; i++) {
        int mv = tg->model_params[i];
        if (!rounds(b, mv)) continue;
        snprintf(name, sizeof name, "%.1000s/rounded", b->m->values[mv].name);
        TRY(round_trip(b, mv, tg->params[i], name, e));
    }
    return GRAFT_OK;
}

/* The graph inputs (from, side inputs, parameters) and the trainable nodes. */
static graft_status copy_forward(tg_build *b, int from, graft_err *e) {
    train_graph *tg = b->tg;
    tg->side = calloc((size_t)tg->n_side + 1, sizeof(int));
    tg->params = calloc((size_t)tg->n_params + 1, sizeof(int));
    tg->grads = calloc((size_t)tg->n_params + 1, sizeof(int));
    if (!tg->side || !tg->params || !tg->grads)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory building the training graph");
    TRY(add_input(b, from, &tg->from, e));
    for (int i = 0; i < tg->n_side; i++) TRY(add_input(b, tg->model_side[i], &tg->side[i], e));
    for (int i = 0; i < tg->n_params; i++)
        TRY(add_input(b, tg->model_params[i], &tg->params[i], e));
    if (b->round_to != GRAFT_DTYPE_UNDEFINED) TRY(round_inputs(b, e));
    for (int i = 0; i < b->m->n_nodes; i++)
        if (b->trainable[i]) TRY(copy_node(b, &b->m->nodes[i], e));
    tg->n_forward_nodes = b->g->n_nodes; /* the trainable nodes and any rounding Casts */
    return GRAFT_OK;
}

/* ---- the backward pass ------------------------------------------------------------------- */

static bool wants_grad(const tg_build *b, const ir_node *n, int k) {
    int v = n->inputs[k];
    return v >= 0 && v < b->n_fwd_values && b->requires[v] &&
           dtype_is_float(b->g->values[v].dtype) && !takes_no_grad(n->op_type, k);
}

/* Which values want a gradient: the parameters, and float outputs of nodes reading one. */
static void mark_requires(tg_build *b) {
    const ir_graph *g = b->g;
    for (int i = 0; i < b->tg->n_params; i++) b->requires[b->tg->params[i]] = 1;
    if (b->want_from) b->requires[b->tg->from] = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_in; k++) any = any || wants_grad(b, n, k);
        for (int k = 0; any && k < n->n_out; k++) {
            int v = n->outputs[k];
            if (v >= 0 && dtype_is_float(g->values[v].dtype)) b->requires[v] = 1;
        }
    }
}

/* Reverse order: a node gets a Backward node when a gradient reaches an output and an input
 * wants one; count each value's partial gradients. */
static graft_status plan_backward(tg_build *b, graft_err *e) {
    const ir_graph *g = b->g;
    b->count[b->tg->to] = 1; /* d_to */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ir_node *n = &g->nodes[i];
        bool reached = false, wanted = false;
        for (int k = 0; k < n->n_out; k++)
            reached = reached || (n->outputs[k] >= 0 && b->count[n->outputs[k]] > 0);
        for (int k = 0; k < n->n_in; k++) wanted = wanted || wants_grad(b, n, k);
        if (!reached || !wanted) continue;
        if (!grad_find(n->op_type))
            return op_error(n, e, GRAFT_E_UNSUPPORTED,
                            "is on the gradient's path from '%s' to '%s', but graft has no "
                            "backward rule for %s",
                            b->to_name, b->from_name, n->op_type);
        b->backward[i] = 1;
        b->tg->n_backward_nodes++;
        for (int k = 0; k < n->n_in; k++)
            if (wants_grad(b, n, k)) b->count[n->inputs[k]]++;
    }
    int at = 0;
    for (int v = 0; v < b->n_fwd_values; v++) {
        b->start[v] = at;
        at += b->count[v];
    }
    b->partial = malloc(sizeof(int) * (size_t)(at > 0 ? at : 1));
    if (!b->partial) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory planning gradients");
    return GRAFT_OK;
}

/* A new value for a partial gradient of v: grad/<v> when it is v's only one. */
static graft_status partial_value(tg_build *b, int v, int *out, graft_err *e) {
    char name[1100];
    const char *vn = b->g->values[v].name;
    if (b->count[v] == 1)
        snprintf(name, sizeof name, "grad/%.1000s", vn);
    else
        snprintf(name, sizeof name, "grad/%.1000s/%d", vn, b->fill[v]);
    TRY(graph_add_value(b->g, name, out, e));
    b->partial[b->start[v] + b->fill[v]++] = *out;
    return GRAFT_OK;
}

/* v's gradient: its partials summed (Add nodes), -1 when none reached it. */
static graft_status summed(tg_build *b, int v, int *out, graft_err *e) {
    if (b->final[v] != -2) {
        *out = b->final[v];
        return GRAFT_OK;
    }
    int n = b->fill[v], acc = n > 0 ? b->partial[b->start[v]] : -1;
    char name[1100];
    const char *vn = b->g->values[v].name;
    for (int i = 1; i < n; i++) {
        int ins[2] = {acc, b->partial[b->start[v] + i]};
        if (i == n - 1)
            snprintf(name, sizeof name, "grad/%.1000s", vn);
        else
            snprintf(name, sizeof name, "grad/%.1000s/sum%d", vn, i);
        TRY(graph_add_node(b->g, "Add", 14, ins, 2, name, NULL, 0, &acc, e));
    }
    b->final[v] = acc;
    *out = acc;
    return GRAFT_OK;
}

static graft_status set_int_attr(ir_attr *a, const char *name, int64_t v, graft_err *e) {
    a->name = ir_strdup(name);
    a->type = IR_ATTR_INT;
    a->i = v;
    return a->name ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
}

/* Backward's attributes: op, fwd_opset, n_fwd_in, n_fwd_out, then the forward's own. */
static graft_status backward_attrs(ir_node *bn, const ir_node *fwd, graft_err *e) {
    TRY(copy_attrs(bn, fwd->attrs, fwd->n_attrs, 4, e));
    memmove(bn->attrs + 4, bn->attrs, sizeof(ir_attr) * (size_t)bn->n_attrs);
    memset(bn->attrs, 0, sizeof(ir_attr) * 4);
    bn->n_attrs += 4;
    bn->attrs[0].name = ir_strdup("op");
    bn->attrs[0].type = IR_ATTR_STRING;
    bn->attrs[0].s = ir_strdup(fwd->op_type);
    if (!bn->attrs[0].name || !bn->attrs[0].s)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    TRY(set_int_attr(&bn->attrs[1], "fwd_opset", fwd->opset, e));
    TRY(set_int_attr(&bn->attrs[2], "n_fwd_in", fwd->n_in, e));
    return set_int_attr(&bn->attrs[3], "n_fwd_out", fwd->n_out, e);
}

/* The Backward node of g's node i (a copy of the node: g->nodes moves as nodes are added). */
static graft_status add_backward(tg_build *b, int i, graft_err *e) {
    ir_node fwd = b->g->nodes[i], bn;
    memset(&bn, 0, sizeof bn);
    char name[1100];
    snprintf(name, sizeof name, "grad/%.1000s", fwd.name);
    bn.name = ir_strdup(name);
    bn.op_type = ir_strdup("Backward");
    bn.domain = ir_strdup(BACKWARD_DOMAIN);
    bn.opset = 1;
    bn.op = op_find("Backward");
    bn.inputs = malloc(sizeof(int) * (size_t)(fwd.n_in + 2 * fwd.n_out));
    bn.outputs = malloc(sizeof(int) * (size_t)(fwd.n_in > 0 ? fwd.n_in : 1));
    graft_status st = GRAFT_OK;
    if (!bn.name || !bn.op_type || !bn.domain || !bn.op || !bn.inputs || !bn.outputs)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory adding '%s'", name);
    if (st == GRAFT_OK) st = backward_attrs(&bn, &fwd, e);
    for (int k = 0; st == GRAFT_OK && k < fwd.n_in; k++) bn.inputs[k] = fwd.inputs[k];
    for (int k = 0; st == GRAFT_OK && k < fwd.n_out; k++) {
        bn.inputs[fwd.n_in + k] = fwd.outputs[k];
        int d = -1;
        if (fwd.outputs[k] >= 0) st = summed(b, fwd.outputs[k], &d, e);
        bn.inputs[fwd.n_in + fwd.n_out + k] = d;
    }
    bn.n_in = fwd.n_in + 2 * fwd.n_out;
    for (int k = 0; st == GRAFT_OK && k < fwd.n_in; k++) {
        bn.outputs[k] = -1;
        if (wants_grad(b, &fwd, k)) st = partial_value(b, fwd.inputs[k], &bn.outputs[k], e);
    }
    bn.n_out = fwd.n_in;
    if (st == GRAFT_OK) st = ir_add_node(b->g, &bn, NULL, e);
    if (st != GRAFT_OK) ir_node_free(&bn);
    return st;
}

/* A parameter no gradient reaches gets zeros. */
static graft_status zero_grad(tg_build *b, int p, int *out, graft_err *e) {
    const ir_value *v = &b->g->values[p];
    tensor z;
    memset(&z, 0, sizeof z);
    TRY(tensor_make(&z, v->dtype, v->ndim, v->dims, e));
    char name[1100];
    snprintf(name, sizeof name, "grad/%.1000s", v->name);
    graft_status st = graph_add_const(b->g, name, &z, out, e);
    tensor_release(&z);
    return st;
}

/* d_<to>, the Backward nodes in reverse order, and the parameters' summed gradients. */
static graft_status emit_backward(tg_build *b, graft_err *e) {
    train_graph *tg = b->tg;
    ir_graph *g = b->g;
    if (!dtype_is_float(g->values[tg->to].dtype))
        return err_set(e, GRAFT_E_DTYPE, "training graph: '%s' is %s; gradients need floats",
                       b->to_name, graft_dtype_name(g->values[tg->to].dtype));
    char name[1100];
    snprintf(name, sizeof name, "d_%.1000s", b->to_name);
    TRY(graph_add_value(g, name, &tg->d_to, e));
    ir_value *d = &g->values[tg->d_to], *t = &g->values[tg->to];
    d->dtype = t->dtype;
    d->ndim = t->ndim;
    memcpy(d->dims, t->dims, sizeof d->dims);
    d->is_graph_input = true;
    TRY(append(&g->inputs, &g->n_inputs, tg->d_to, e));
    mark_requires(b);
    TRY(plan_backward(b, e));
    b->partial[b->start[tg->to]] = tg->d_to;
    b->fill[tg->to] = 1;
    for (int i = tg->n_forward_nodes - 1; i >= 0; i--)
        if (b->backward[i]) TRY(add_backward(b, i, e));
    for (int i = 0; i < tg->n_params; i++) {
        TRY(summed(b, tg->params[i], &tg->grads[i], e));
        if (tg->grads[i] < 0) TRY(zero_grad(b, tg->params[i], &tg->grads[i], e));
    }
    if (b->want_from) {
        TRY(summed(b, tg->from, &tg->grad_from, e));
        if (tg->grad_from < 0)
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "training graph: no gradient reaches '%s' from '%s'", b->from_name,
                           b->to_name);
    }
    return GRAFT_OK;
}

static graft_status scratch_alloc(tg_build *b, graft_err *e) {
    size_t nv = (size_t)b->m->n_values + 1, nn = (size_t)b->m->n_nodes + 1;
    b->dep = calloc(nv, 1);
    b->need = calloc(nv, 1);
    b->param = calloc(nv, 1);
    b->trainable = calloc(nn, 1);
    b->map = malloc(sizeof(int) * nv);
    if (!b->dep || !b->need || !b->param || !b->trainable || !b->map)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory building the training graph");
    for (size_t v = 0; v < nv; v++) b->map[v] = -1;
    return GRAFT_OK;
}

static graft_status scratch_alloc_backward(tg_build *b, graft_err *e) {
    size_t nv = (size_t)b->g->n_values + 2, nn = (size_t)b->g->n_nodes + 1;
    b->n_fwd_values = b->g->n_values + 1; /* and d_to */
    b->requires = calloc(nv, 1);
    b->count = calloc(nv, sizeof(int));
    b->start = calloc(nv, sizeof(int));
    b->fill = calloc(nv, sizeof(int));
    b->final = malloc(sizeof(int) * nv);
    b->backward = calloc(nn, 1);
    if (!b->requires || !b->count || !b->start || !b->fill || !b->final || !b->backward)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory building the training graph");
    for (size_t v = 0; v < nv; v++) b->final[v] = -2;
    return GRAFT_OK;
}

static void scratch_free(tg_build *b) {
    free(b->dep), free(b->need), free(b->param), free(b->trainable), free(b->map);
    free(b->requires), free(b->count), free(b->start), free(b->fill), free(b->partial);
    free(b->final), free(b->backward);
}

/* Outputs: to, then the parameters' gradients; then every value's shape from the ops' rules. */
static graft_status finish(tg_build *b, graft_err *e) {
    train_graph *tg = b->tg;
    ir_graph *g = b->g;
    int n_out = tg->d_to >= 0 ? 2 + tg->n_params : 1;
    g->outputs = malloc(sizeof(int) * (size_t)n_out);
    if (!g->outputs) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    g->outputs[g->n_outputs++] = tg->to;
    for (int i = 0; i < tg->n_params && tg->d_to >= 0; i++)
        g->outputs[g->n_outputs++] = tg->grads[i];
    if (tg->grad_from >= 0) g->outputs[g->n_outputs++] = tg->grad_from;
    for (int i = 0; i < g->n_outputs; i++) g->values[g->outputs[i]].is_graph_output = true;
    ir_link_producers(g);
    return graph_infer_shapes(g, e);
}

static graft_status build(tg_build *b, const train_graph_options *o, graft_err *e) {
    int from, to;
    b->scalar_params = o && o->scalar_params;
    b->param_names = o ? o->param_names : NULL;
    b->n_param_names = o && o->param_names ? o->n_param_names : 0;
    b->round_to = o ? o->round_to : GRAFT_DTYPE_UNDEFINED;
    TRY(find_tensor(b->m, b->from_name, "tensor to train from", &from, e));
    TRY(find_tensor(b->m, b->to_name, "output", &to, e));
    TRY(scratch_alloc(b, e));
    TRY(mark_trainable(b, from, to, e));
    TRY(classify_inputs(b, from, e));
    TRY(copy_forward(b, from, e));
    b->tg->to = b->map[to];
    b->want_from = o && o->grad_from && !o->forward_only;
    if (!(o && o->forward_only)) {
        TRY(scratch_alloc_backward(b, e));
        TRY(emit_backward(b, e));
    }
    return finish(b, e);
}

graft_status train_graph_build(const ir_graph *model, const char *from, const char *to,
                               const train_graph_options *o, train_graph *tg, graft_err *e) {
    memset(tg, 0, sizeof *tg);
    ir_graph_init(&tg->g);
    tg->d_to = -1, tg->grad_from = -1;
    tg_build b;
    memset(&b, 0, sizeof b);
    b.m = model;
    b.tg = tg;
    b.g = &tg->g;
    b.from_name = from;
    b.to_name = to;
    graft_status st = build(&b, o, e);
    scratch_free(&b);
    if (st != GRAFT_OK) train_graph_free(tg);
    return st;
}

void train_graph_free(train_graph *tg) {
    if (!tg) return;
    ir_graph_free(&tg->g);
    free(tg->side), free(tg->params), free(tg->grads);
    free(tg->model_side), free(tg->model_params);
    memset(tg, 0, sizeof *tg);
    tg->d_to = -1, tg->grad_from = -1;
}

graft_status train_graph_accumulate_grads(train_graph *tg, graft_err *e) {
    ir_graph *g = &tg->g;
    if (tg->d_to < 0 || g->n_outputs < 1 + tg->n_params)
        return err_set(e, GRAFT_E_INTERNAL, "training graph: no gradients to accumulate");
    for (int i = 0; i < tg->n_params; i++) {
        const ir_value *p = &g->values[tg->params[i]];
        char name[1100];
        snprintf(name, sizeof name, "acc/%.1000s", p->name);
        int acc, sum;
        TRY(graph_add_value(g, name, &acc, e));
        ir_value *a = &g->values[acc];
        p = &g->values[tg->params[i]]; /* the value array may have moved */
        a->dtype = p->dtype;
        a->ndim = p->ndim;
        memcpy(a->dims, p->dims, sizeof a->dims);
        a->is_graph_input = true;
        TRY(append(&g->inputs, &g->n_inputs, acc, e));
        int ins[2] = {tg->grads[i], acc};
        snprintf(name, sizeof name, "grad_acc/%.1000s", p->name);
        TRY(graph_add_node(g, "Add", 14, ins, 2, name, NULL, 0, &sum, e));
        g->values[tg->grads[i]].is_graph_output = false;
        g->values[sum].is_graph_output = true;
        g->outputs[1 + i] = sum;
        tg->grads[i] = sum;
    }
    ir_link_producers(g);
    return graph_infer_shapes(g, e);
}

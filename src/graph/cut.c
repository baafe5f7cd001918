/* cut.c: graft_model_cut: keep the subgraph that computes the cut tensor, pool it (CLS, pooler
 * or masked mean for encoders, spatial mean for CNN maps) and make it the model's only output,
 * "features". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auto_cut.h"
#include "build.h"
#include "text_inputs.h"

#define CUT_OPSET 13 /* opset of the nodes the cut adds (axes as inputs) */

static graft_status add_const_i64(ir_graph *g, const char *name, int ndim, int64_t value, int *out,
                                  graft_err *e) {
    tensor t;
    int64_t dims[1] = {1};
    TRY(tensor_make(&t, GRAFT_DTYPE_I64, ndim, dims, e));
    ((int64_t *)t.data)[0] = value;
    return graph_add_const(g, name, &t, out, e);
}

static graft_status add_const_f32(ir_graph *g, const char *name, float value, int *out,
                                  graft_err *e) {
    tensor t;
    TRY(tensor_make(&t, GRAFT_DTYPE_F32, 0, NULL, e));
    ((float *)t.data)[0] = value;
    return graph_add_const(g, name, &t, out, e);
}

static graft_status add_node(ir_graph *g, const char *op, const int *ins, int n_in,
                             const char *name, const char *attr, int64_t attr_value, int *out,
                             graft_err *e) {
    return graph_add_node(g, op, CUT_OPSET, ins, n_in, name, attr, attr_value, out, e);
}

/* The attention-mask input (the one the graph uses as a mask, whatever its name), or -1. */
static int find_mask_input(const ir_graph *g, graft_err *e) {
    int roles[GRAFT_TEXT_INPUT_COUNT];
    if (graph_text_inputs(g, roles, e) != GRAFT_OK) return -1;
    int mask = roles[GRAFT_TEXT_INPUT_MASK];
    if (mask >= 0 && g->values[mask].ndim != 2) mask = -1;
    if (mask < 0)
        err_set(e, GRAFT_E_NOT_FOUND,
                "mean pooling needs an attention-mask input (2-D: batch, sequence); the model "
                "takes only token ids ('%s')%s",
                g->values[roles[GRAFT_TEXT_INPUT_IDS]].name,
                roles[GRAFT_TEXT_INPUT_TYPE_IDS] >= 0 ? " and type ids" : "");
    return mask;
}

/* features = sum_s(h * m) / max(sum_s(m), 1e-9), m the attention mask as float (B, S, 1). */
static graft_status add_mean_pooling(ir_graph *g, int hidden, int *out, graft_err *e) {
    int mask = find_mask_input(g, e);
    if (mask < 0) return e ? e->status : GRAFT_E_NOT_FOUND;
    int mf, axes2, m3, hm, axes1, sum, count, eps, denom;
    TRY(add_node(g, "Cast", &mask, 1, "features/mask_f32", "to", GRAFT_DTYPE_F32, &mf, e));
    TRY(add_const_i64(g, "features/axes_2", 1, 2, &axes2, e));
    TRY(add_node(g, "Unsqueeze", (int[]){mf, axes2}, 2, "features/mask_3d", NULL, 0, &m3, e));
    TRY(add_node(g, "Mul", (int[]){hidden, m3}, 2, "features/masked", NULL, 0, &hm, e));
    TRY(add_const_i64(g, "features/axes_1", 1, 1, &axes1, e));
    TRY(add_node(g, "ReduceSum", (int[]){hm, axes1}, 2, "features/sum", "keepdims", 0, &sum, e));
    TRY(add_node(g, "ReduceSum", (int[]){m3, axes1}, 2, "features/count", "keepdims", 0, &count,
                 e));
    TRY(add_const_f32(g, "features/eps", 1e-9f, &eps, e));
    TRY(add_node(g, "Max", (int[]){count, eps}, 2, "features/count_safe", NULL, 0, &denom, e));
    return add_node(g, "Div", (int[]){sum, denom}, 2, "features/mean", NULL, 0, out, e);
}

/* The pooler output: a rank-2 float graph output computed by Tanh (BERT's pooler). */
static int find_pooler(const ir_graph *g) {
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        if (v->ndim == 2 && v->producer >= 0 && strcmp(g->nodes[v->producer].op_type, "Tanh") == 0)
            return g->outputs[i];
    }
    return -1;
}

static graft_status pool(ir_graph *g, int cut, graft_pooling pooling, int *out, graft_err *e) {
    const ir_value *v = &g->values[cut];
    if (pooling == GRAFT_POOLING_NONE) {
        *out = cut;
        return GRAFT_OK;
    }
    if (pooling == GRAFT_POOLING_POOLER) {
        *out = find_pooler(g);
        if (*out < 0)
            return err_set(e, GRAFT_E_NOT_FOUND,
                           "pooler pooling: the model has no pooler output "
                           "(a rank-2 output computed by Tanh)");
        return GRAFT_OK;
    }
    if (pooling == GRAFT_POOLING_SPATIAL) {
        if (v->ndim != 4)
            return err_set(e, GRAFT_E_SHAPE,
                           "spatial pooling needs a (batch, channels, height, width) tensor; '%s' "
                           "has rank %d",
                           v->name, v->ndim);
        int avg;
        TRY(add_node(g, "GlobalAveragePool", &cut, 1, "features/spatial_mean", NULL, 0, &avg, e));
        return add_node(g, "Flatten", &avg, 1, "features/flat", "axis", 1, out, e);
    }
    if (v->ndim != 3)
        return err_set(e, GRAFT_E_SHAPE,
                       "%s pooling needs a (batch, sequence, hidden) tensor; "
                       "'%s' has rank %d",
                       pooling == GRAFT_POOLING_CLS ? "CLS" : "mean", v->name, v->ndim);
    if (pooling == GRAFT_POOLING_MEAN) return add_mean_pooling(g, cut, out, e);
    int zero;
    TRY(add_const_i64(g, "features/cls_index", 0, 0, &zero, e));
    return add_node(g, "Gather", (int[]){cut, zero}, 2, "features/cls", "axis", 1, out, e);
}

static graft_status cut_graph(graft_model *m, const char *cut, graft_pooling pooling,
                              graft_err *e) {
    ir_graph *g = &m->g;
    const char *name = cut;
    auto_cut ac = {.value = -1};
    if (strcmp(cut, "auto") == 0) {
        TRY(model_auto_cut(m, &ac, e));
        name = g->values[ac.value].name;
    }
    int v = ir_find_value(g, name);
    if (v < 0)
        return err_set(e, GRAFT_E_NOT_FOUND, "cut point '%s' is not a tensor of the model", name);
    if (g->values[v].is_const || g->values[v].is_graph_input)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "cut point '%s' is a model %s; cut at a tensor the backbone computes", name,
                       g->values[v].is_const ? "constant" : "input");
    if (pooling == GRAFT_POOLING_AUTO && ac.value >= 0)
        pooling = ac.pooling;
    else if (pooling == GRAFT_POOLING_AUTO)
        pooling = g->values[v].ndim == 3 && find_mask_input(g, NULL) >= 0 ? GRAFT_POOLING_CLS
                                                                          : GRAFT_POOLING_NONE;
    int pooled, features;
    TRY(pool(g, v, pooling, &pooled, e));
    features = pooled;
    if (strcmp(g->values[pooled].name, "features") != 0)
        TRY(add_node(g, "Identity", &pooled, 1, "features", NULL, 0, &features, e));
    return model_set_output(m, features, e);
}

graft_status graft_model_cut(graft_model *m, const char *cut, graft_pooling pooling) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (!cut || pooling < 0 || pooling >= GRAFT_POOLING_COUNT)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "graft_model_cut: bad cut or pooling");
    int n_values = m->g.n_values, n_nodes = m->g.n_nodes;
    graft_status st = cut_graph(m, cut, pooling, e);
    if (st != GRAFT_OK) err_prefix(e, "cutting at '%s'", cut);
    if (st != GRAFT_OK && (m->g.n_values != n_values || m->g.n_nodes != n_nodes)) {
        /* A failure after nodes were added: the executor must see the graph as it now is. */
        exec_free(&m->exec);
        model_release_state(m);
        exec_init(&m->exec, &m->g, &m->backend, model_device(m), NULL);
    }
    return st;
}

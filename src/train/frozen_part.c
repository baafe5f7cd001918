/* frozen_part.c: the frozen part of a model whose last blocks are fine-tuned (frozen_part.h): the
 * nodes that compute the freeze tensor and the side inputs, copied into a model of their own
 * whose one output is those tensors flattened and concatenated per sample. */
#include "frozen_part.h"

#include <stdlib.h>
#include <string.h>

#include "../graph/build.h"
#include "../graph/graph.h"

#define FROZEN_OPSET 13

/* The pieces: `from` and the side inputs, with their per-sample sizes from m's shapes. */
static graft_status plan_pieces(const ir_graph *m, const train_graph *tg, frozen_part *fp,
                                int *values, graft_err *e) {
    int n = 1 + tg->n_side;
    if (n > FROZEN_MAX_PIECES)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "the trainable part reads %d tensors from the frozen part; at most %d", n,
                       FROZEN_MAX_PIECES);
    values[0] = ir_find_value(m, tg->g.values[tg->from].name);
    for (int i = 0; i < tg->n_side; i++) values[1 + i] = tg->model_side[i];
    int64_t at = 0;
    fp->resolved = true;
    for (int k = 0; k < n; k++) {
        const ir_value *v = &m->values[values[k]];
        frozen_piece *p = &fp->pieces[k];
        p->name = v->name;
        p->dtype = v->dtype;
        p->ndim = v->ndim;
        memcpy(p->dims, v->dims, sizeof p->dims);
        char shape[256];
        if (v->ndim < 1)
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "fine-tuning from '%s': the trainable part reads the scalar '%s'",
                           fp->pieces[0].name, v->name);
        p->numel = 1;
        for (int d = 1; d < v->ndim; d++) p->numel = v->dims[d] > 0 ? p->numel * v->dims[d] : -1;
        if (p->numel < 0) fp->resolved = false;
        if (k > 0 && v->dims[0] != fp->pieces[0].dims[0])
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "fine-tuning from '%s': the trainable part also reads '%s' %s, which "
                           "has no batch dimension",
                           fp->pieces[0].name, v->name,
                           shape_str(shape, sizeof shape, v->ndim, v->dims));
        if (p->dtype != GRAFT_DTYPE_F32 && p->dtype != GRAFT_DTYPE_I64 &&
            p->dtype != GRAFT_DTYPE_I32 && p->dtype != GRAFT_DTYPE_BOOL)
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "fine-tuning from '%s': the trainable part reads '%s' as %s (float32, "
                           "int64, int32 or bool supported)",
                           fp->pieces[0].name, v->name, graft_dtype_name(p->dtype));
        p->offset = at;
        at += p->numel;
    }
    fp->n_pieces = n;
    fp->row = fp->resolved ? at : 0;
    return GRAFT_OK;
}

/* needed[v] for every value the pieces are computed from; the nodes computing them in order. */
static void mark_needed(const ir_graph *m, const int *values, int n, unsigned char *needed,
                        unsigned char *node_needed) {
    for (int k = 0; k < n; k++) needed[values[k]] = 1;
    for (int i = m->n_nodes - 1; i >= 0; i--) {
        const ir_node *nd = &m->nodes[i];
        bool any = false;
        for (int k = 0; k < nd->n_out; k++)
            any = any || (nd->outputs[k] >= 0 && needed[nd->outputs[k]]);
        if (!any) continue;
        node_needed[i] = 1;
        for (int k = 0; k < nd->n_in; k++)
            if (nd->inputs[k] >= 0) needed[nd->inputs[k]] = 1;
    }
    for (int i = 0; i < m->n_inputs; i++) needed[m->inputs[i]] = 1; /* the model's inputs, all */
}

static graft_status copy_opsets(ir_graph *g, const ir_graph *m, graft_err *e) {
    g->opsets = calloc((size_t)m->n_opsets + 1, sizeof *g->opsets);
    if (!g->opsets) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < m->n_opsets; i++, g->n_opsets++) {
        g->opsets[i].version = m->opsets[i].version;
        g->opsets[i].domain = ir_strdup(m->opsets[i].domain ? m->opsets[i].domain : "");
        if (!g->opsets[i].domain) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    }
    g->ir_version = m->ir_version;
    return GRAFT_OK;
}

/* g: the needed values and nodes of m (map: m's value -> g's). */
static graft_status copy_needed(ir_graph *g, const ir_graph *m, const unsigned char *needed,
                                const unsigned char *node_needed, int *map, graft_err *e) {
    for (int v = 0; v < m->n_values; v++) {
        map[v] = -1;
        if (needed[v]) TRY(ir_value_clone(g, &m->values[v], &map[v], e));
    }
    g->inputs = malloc(sizeof(int) * ((size_t)m->n_inputs + 1));
    if (!g->inputs) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < m->n_inputs; i++) {
        g->inputs[g->n_inputs++] = map[m->inputs[i]];
        g->values[map[m->inputs[i]]].is_graph_input = true;
    }
    for (int i = 0; i < m->n_nodes; i++) {
        if (!node_needed[i]) continue;
        ir_node n;
        TRY(ir_node_clone(&n, &m->nodes[i], map, e));
        graft_status st = ir_add_node(g, &n, NULL, e);
        if (st != GRAFT_OK) {
            ir_node_free(&n);
            return st;
        }
    }
    return GRAFT_OK;
}

/* Each piece cast to float and flattened per sample, all concatenated: g's one output. */
static graft_status add_row(ir_graph *g, const frozen_part *fp, const int *gv, graft_err *e) {
    int flat[FROZEN_MAX_PIECES], row;
    for (int k = 0; k < fp->n_pieces; k++) {
        int v = gv[k], cast;
        if (fp->pieces[k].dtype != GRAFT_DTYPE_F32) { /* separate: the output is set first */
            TRY(graph_add_node(g, "Cast", FROZEN_OPSET, &v, 1, "frozen/cast", "to", GRAFT_DTYPE_F32,
                               &cast, e));
            v = cast;
        }
        TRY(graph_add_node(g, "Flatten", FROZEN_OPSET, &v, 1, "frozen/flat", "axis", 1, &flat[k],
                           e));
    }
    if (fp->n_pieces > 1)
        TRY(graph_add_node(g, "Concat", FROZEN_OPSET, flat, fp->n_pieces, "frozen/row", "axis", 1,
                           &row, e));
    else
        TRY(graph_add_node(g, "Identity", FROZEN_OPSET, flat, 1, "frozen/row", NULL, 0, &row, e));
    g->outputs = malloc(sizeof(int) * (size_t)(1 + fp->n_pieces));
    if (!g->outputs) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    g->outputs[g->n_outputs++] = row;
    for (int k = 0; !fp->resolved && k < fp->n_pieces; k++) { /* sizes known at run time */
        int shape;
        TRY(graph_add_node(g, "Shape", FROZEN_OPSET, &gv[k], 1, "frozen/shape", NULL, 0, &shape,
                           e));
        g->outputs[g->n_outputs++] = shape;
    }
    for (int i = 0; i < g->n_outputs; i++) g->values[g->outputs[i]].is_graph_output = true;
    return GRAFT_OK;
}

static graft_status build_graph(const ir_graph *m, const frozen_part *fp, const int *values,
                                ir_graph *g, graft_err *e) {
    unsigned char *needed = calloc((size_t)m->n_values + 1, 1);
    unsigned char *node_needed = calloc((size_t)m->n_nodes + 1, 1);
    int *map = malloc(sizeof(int) * ((size_t)m->n_values + 1));
    graft_status st = GRAFT_OK;
    if (!needed || !node_needed || !map)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory building the frozen part");
    if (st == GRAFT_OK) {
        mark_needed(m, values, fp->n_pieces, needed, node_needed);
        st = copy_opsets(g, m, e);
    }
    if (st == GRAFT_OK) st = copy_needed(g, m, needed, node_needed, map, e);
    int gv[FROZEN_MAX_PIECES];
    for (int k = 0; st == GRAFT_OK && k < fp->n_pieces; k++) gv[k] = map[values[k]];
    if (st == GRAFT_OK) st = add_row(g, fp, gv, e);
    free(needed), free(node_needed), free(map);
    return st;
}

graft_status frozen_part_create(graft_model *m, const train_graph *tg, frozen_part *fp,
                                graft_err *e) {
    memset(fp, 0, sizeof *fp);
    int values[FROZEN_MAX_PIECES];
    TRY(plan_pieces(&m->g, tg, fp, values, e));
    ir_graph g;
    ir_graph_init(&g);
    graft_status st = build_graph(&m->g, fp, values, &g, e);
    if (st != GRAFT_OK) {
        ir_graph_free(&g);
        return st;
    }
    return model_from_graph(m->ctx, &g, "the frozen part", &fp->model, e);
}

graft_status frozen_part_resolve(frozen_part *fp, graft_err *e) {
    if (fp->resolved) return GRAFT_OK;
    int64_t at = 0;
    for (int k = 0; k < fp->n_pieces; k++) {
        const graft_tensor *s;
        TRY(graft_model_output(fp->model, 1 + k, &s));
        frozen_piece *p = &fp->pieces[k];
        if (s->dtype != GRAFT_DTYPE_I64 || s->ndim != 1 || s->dims[0] != p->ndim)
            return err_set(e, GRAFT_E_INTERNAL, "frozen part: no shape for '%s'", p->name);
        p->numel = 1;
        for (int d = 1; d < p->ndim; d++) {
            p->dims[d] = ((const int64_t *)s->data)[d];
            p->numel *= p->dims[d];
        }
        p->offset = at;
        at += p->numel;
    }
    fp->row = at;
    fp->resolved = true;
    return GRAFT_OK;
}

void frozen_part_free(frozen_part *fp) {
    if (!fp) return;
    graft_model_free(fp->model);
    memset(fp, 0, sizeof *fp);
}

graft_status frozen_part_unpack(const frozen_part *fp, int k, const float *rows, int64_t n,
                                tensor *out, graft_err *e) {
    const frozen_piece *p = &fp->pieces[k];
    if (out->dtype != p->dtype || tensor_numel(out) != n * p->numel)
        return err_set(e, GRAFT_E_INTERNAL, "frozen part: piece '%s' has the wrong buffer",
                       p->name);
    for (int64_t i = 0; i < n; i++) {
        const float *src = rows + i * fp->row + p->offset;
        int64_t at = i * p->numel;
        switch (p->dtype) {
        case GRAFT_DTYPE_F32:
            memcpy((float *)out->data + at, src, sizeof(float) * (size_t)p->numel);
            break;
        case GRAFT_DTYPE_I64:
            for (int64_t j = 0; j < p->numel; j++) ((int64_t *)out->data)[at + j] = (int64_t)src[j];
            break;
        case GRAFT_DTYPE_I32:
            for (int64_t j = 0; j < p->numel; j++) ((int32_t *)out->data)[at + j] = (int32_t)src[j];
            break;
        default: /* bool */
            for (int64_t j = 0; j < p->numel; j++) ((uint8_t *)out->data)[at + j] = src[j] != 0.0f;
            break;
        }
    }
    return GRAFT_OK;
}

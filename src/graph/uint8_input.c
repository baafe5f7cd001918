/* uint8_input.c: graft_model_set_uint8_input: a float image input becomes a uint8 input of the
 * same name followed by a prologue (Cast, Transpose from NHWC, Mul and Add per channel) that
 * gives the former consumers the normalised float tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "graph.h"
#include "model.h"

#define U8_OPSET 13 /* opset of the prologue's nodes */

/* The named input, or the only float rank-4 input when name is NULL; -1 after an error. */
static int find_image_input(const ir_graph *g, const char *name, graft_err *e) {
    if (name) {
        for (int i = 0; i < g->n_inputs; i++)
            if (!strcmp(g->values[g->inputs[i]].name, name)) return g->inputs[i];
        err_set(e, GRAFT_E_NOT_FOUND, "the model has no input named '%s'", name);
        return -1;
    }
    int found = -1, n = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        if (v->ndim == 4 && (v->dtype == GRAFT_DTYPE_F32 || v->dtype == GRAFT_DTYPE_U8))
            found = g->inputs[i], n++;
    }
    if (n == 1) return found;
    err_set(e, GRAFT_E_NOT_FOUND,
            n ? "the model has %d rank-4 inputs; name the image input"
              : "the model has no rank-4 float input (an image batch) among its %d inputs",
            n ? n : g->n_inputs);
    return -1;
}

static graft_status check_input(const ir_value *v, int channels, graft_err *e) {
    if (v->dtype == GRAFT_DTYPE_U8)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "input '%s' already takes uint8 (graft_model_set_uint8_input was applied "
                       "once)",
                       v->name);
    if (v->dtype != GRAFT_DTYPE_F32 || v->ndim != 4)
        return err_set(e, GRAFT_E_DTYPE,
                       "input '%s' is %s of rank %d; a uint8 image input replaces a float32 "
                       "(N, C, H, W) input",
                       v->name, graft_dtype_name(v->dtype), v->ndim);
    if (v->dims[1] != channels)
        return err_set(e, GRAFT_E_SHAPE,
                       "input '%s' has %lld channels (dim 1 of (N, C, H, W)); %d were asked for",
                       v->name, (long long)v->dims[1], channels);
    return GRAFT_OK;
}

/* A (1, C, 1, 1) float constant. */
static graft_status add_channel_const(ir_graph *g, const char *name, const float *values, int c,
                                      int *out, graft_err *e) {
    tensor t;
    int64_t dims[4] = {1, c, 1, 1};
    TRY(tensor_make(&t, GRAFT_DTYPE_F32, 4, dims, e));
    memcpy(t.data, values, sizeof(float) * (size_t)c);
    return graph_add_const(g, name, &t, out, e);
}

/* The Transpose (0, 3, 1, 2) from NHWC: graph_add_node's one int attribute made a list. */
static graft_status add_transpose(ir_graph *g, int in, const char *name, int *out, graft_err *e) {
    TRY(graph_add_node(g, "Transpose", U8_OPSET, &in, 1, name, "perm", 0, out, e));
    ir_attr *a = &g->nodes[g->n_nodes - 1].attrs[0];
    a->ints = malloc(sizeof(int64_t) * 4);
    if (!a->ints) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory adding '%s'", name);
    memcpy(a->ints, (int64_t[]){0, 3, 1, 2}, sizeof(int64_t) * 4);
    a->type = IR_ATTR_INTS;
    a->n = 4;
    return GRAFT_OK;
}

/* Declare v as the uint8 input (N, H, W, C) or (N, C, H, W): dims and their names move. */
static void make_u8_input(ir_value *v, int nhwc) {
    v->dtype = GRAFT_DTYPE_U8;
    if (!nhwc) return;
    int64_t d[4] = {v->dims[0], v->dims[2], v->dims[3], v->dims[1]};
    char *n[4] = {v->dim_names[0], v->dim_names[2], v->dim_names[3], v->dim_names[1]};
    memcpy(v->dims, d, sizeof d);
    memcpy(v->dim_names, n, sizeof n);
}

/* x_u8 -> Cast -> [Transpose] -> Mul(1 / (255 std)) -> Add(-mean / std) -> every old reader. */
static graft_status add_prologue(ir_graph *g, int v, int nhwc, const float *mean, const float *std,
                                 int c, graft_err *e) {
    char name[600];
    const char *base = g->values[v].name;
    float scale[3], shift[3];
    for (int k = 0; k < c; k++) scale[k] = 1.0f / (255.0f * std[k]), shift[k] = -mean[k] / std[k];
    int cast, cur, sc, sh, mul, add, first_node = g->n_nodes;
    snprintf(name, sizeof name, "%s/u8_to_float", base);
    TRY(graph_add_node(g, "Cast", U8_OPSET, &v, 1, name, "to", GRAFT_DTYPE_F32, &cast, e));
    cur = cast;
    if (nhwc) {
        snprintf(name, sizeof name, "%s/nhwc_to_nchw", base);
        TRY(add_transpose(g, cast, name, &cur, e));
    }
    snprintf(name, sizeof name, "%s/u8_scale", base);
    TRY(add_channel_const(g, name, scale, c, &sc, e));
    snprintf(name, sizeof name, "%s/u8_shift", base);
    TRY(add_channel_const(g, name, shift, c, &sh, e));
    snprintf(name, sizeof name, "%s/scaled", g->values[v].name);
    TRY(graph_add_node(g, "Mul", U8_OPSET, (int[]){cur, sc}, 2, name, NULL, 0, &mul, e));
    snprintf(name, sizeof name, "%s/normalized", g->values[v].name);
    TRY(graph_add_node(g, "Add", U8_OPSET, (int[]){mul, sh}, 2, name, NULL, 0, &add, e));
    for (int i = 0; i < first_node; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].inputs[k] == v) g->nodes[i].inputs[k] = add;
    make_u8_input(&g->values[v], nhwc);
    TRY(ir_toposort(g, e));
    return graph_infer_shapes(g, e);
}

graft_status graft_model_set_uint8_input(graft_model *m, const char *input, int nhwc,
                                         const float mean[3], const float std[3], int channels) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (!mean || !std || (channels != 1 && channels != 3) || (nhwc != 0 && nhwc != 1))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_model_set_uint8_input: mean and std must be given, channels 1 or "
                       "3 and nhwc 0 or 1 (got channels %d, nhwc %d)",
                       channels, nhwc);
    for (int c = 0; c < channels; c++)
        if (!(std[c] != 0.0f) || !isfinite(std[c]) || !isfinite(mean[c]) ||
            !isfinite(1.0f / (255.0f * std[c])) || !isfinite(mean[c] / std[c]))
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "graft_model_set_uint8_input: channel %d's mean %g / std %g do not "
                           "give a finite normalisation",
                           c, (double)mean[c], (double)std[c]);
    int v = find_image_input(&m->g, input, e);
    if (v < 0) return e->status;
    TRY(check_input(&m->g.values[v], channels, e));
    exec_free(&m->exec);
    model_release_state(m);
    m->summary_ready = false;
    graft_status st = add_prologue(&m->g, v, nhwc, mean, std, channels, e);
    if (st == GRAFT_OK) st = model_optimize(m, e);
    if (st != GRAFT_OK) err_prefix(e, "making input '%s' uint8", m->g.values[v].name);
    graft_status st2 =
        exec_init(&m->exec, &m->g, &m->backend, model_device(m), st == GRAFT_OK ? e : NULL);
    if (st == GRAFT_OK) model_note_fallbacks(m);
    return st != GRAFT_OK ? st : st2;
}

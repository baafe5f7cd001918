/* precision.c: running a model's float tensors in fp16 or bf16 on a GPU: float weights are
 * converted once, a Cast after each float graph input and before each float graph output keeps
 * the caller's tensors fp32, and the kernels accumulate in fp32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "../cpu/cpu_backend.h"
#include "build.h"
#include "model.h"

/* Finite values saturate instead of overflowing: exporters write masks as -3.4e38 (float's
 * lowest, which rounds to -inf even in bf16), and (1 - mask) * -inf would be NaN where the mask
 * is 1. */
static uint16_t to_half(float f, graft_dtype dt) {
    float top = dt == GRAFT_DTYPE_BF16 ? 3.38953139e38f : 65504.0f; /* the largest finite */
    if (isfinite(f)) f = f > top ? top : f < -top ? -top : f;
    return dt == GRAFT_DTYPE_BF16 ? f32_to_bf16(f) : f32_to_f16(f);
}

static graft_status convert_tensor(tensor *t, graft_dtype dt, graft_err *e) {
    int64_t n = tensor_numel(t);
    if (!t->data) { /* a constant the passes emptied (folded away) */
        t->dtype = dt;
        return GRAFT_OK;
    }
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(n > 0 ? n : 1));
    if (!h) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory converting weights");
    const float *f = t->data;
    for (int64_t i = 0; i < n; i++) h[i] = to_half(f[i], dt);
    free(t->data);
    t->data = h;
    t->dtype = dt;
    return GRAFT_OK;
}

static void replace_uses(ir_graph *g, int from, int to, int except_node) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (i == except_node) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].inputs[k] == from) g->nodes[i].inputs[k] = to;
    }
}

/* Cast `in` into the existing value `out`. */
static graft_status add_cast(ir_graph *g, int in, int out, graft_dtype to, graft_err *e) {
    int tmp = -1;
    int opset = (int)ir_opset_version(g, "");
    char name[512];
    snprintf(name, sizeof name, "%s/cast", g->values[out].name);
    TRY(graph_add_node(g, "Cast", opset < 13 ? 13 : opset, &in, 1, name, "to", to, &tmp, e));
    ir_node *n = &g->nodes[g->n_nodes - 1];
    n->outputs[0] = out; /* the placeholder value `tmp` stays unused */
    (void)tmp;
    return GRAFT_OK;
}

/* A float graph input stays fp32 for the caller; its readers get a half copy. */
static graft_status wrap_input(ir_graph *g, int v, graft_dtype dt, graft_err *e) {
    char name[512];
    snprintf(name, sizeof name, "%s/half", g->values[v].name);
    int h = -1;
    TRY(graph_add_value(g, name, &h, e));
    g->values[h].dtype = dt;
    g->values[h].ndim = -1;
    replace_uses(g, v, h, -1);
    return add_cast(g, v, h, dt, e);
}

/* A float graph output keeps its name and fp32; the producer writes a half value. */
static graft_status wrap_output(ir_graph *g, int v, graft_dtype dt, graft_err *e) {
    char name[512];
    snprintf(name, sizeof name, "%s/half", g->values[v].name);
    int h = -1, p = g->values[v].producer;
    TRY(graph_add_value(g, name, &h, e));
    g->values[h].dtype = dt;
    g->values[h].ndim = -1;
    replace_uses(g, v, h, -1);
    if (p >= 0)
        for (int k = 0; k < g->nodes[p].n_out; k++)
            if (g->nodes[p].outputs[k] == v) g->nodes[p].outputs[k] = h;
    return add_cast(g, h, v, GRAFT_DTYPE_F32, e);
}

static graft_status convert_attrs(ir_node *n, graft_dtype dt, graft_err *e) {
    for (int a = 0; a < n->n_attrs; a++) {
        ir_attr *at = &n->attrs[a];
        if (!strcmp(n->op_type, "Cast") && !strcmp(at->name, "to") && at->i == GRAFT_DTYPE_F32)
            at->i = dt;
        if (at->type == IR_ATTR_TENSOR && at->t.dtype == GRAFT_DTYPE_F32)
            TRY(convert_tensor(&at->t, dt, e));
    }
    return GRAFT_OK;
}

static graft_status convert_graph(ir_graph *g, graft_dtype dt, graft_err *e) {
    int n_values = g->n_values, n_nodes = g->n_nodes;
    for (int i = 0; i < n_nodes; i++) TRY(convert_attrs(&g->nodes[i], dt, e));
    for (int v = 0; v < n_values; v++) {
        ir_value *val = &g->values[v];
        if (val->is_const && val->data.dtype == GRAFT_DTYPE_F32) {
            TRY(convert_tensor(&val->data, dt, e));
            val->dtype = dt;
        } else if (val->dtype == GRAFT_DTYPE_F32 && !val->is_const && !val->is_graph_input &&
                   !val->is_graph_output) {
            val->dtype = dt;
        }
    }
    for (int v = 0; v < n_values; v++) {
        if (g->values[v].dtype != GRAFT_DTYPE_F32 || g->values[v].is_const) continue;
        if (g->values[v].is_graph_input) TRY(wrap_input(g, v, dt, e));
        if (g->values[v].is_graph_output) TRY(wrap_output(g, v, dt, e));
    }
    TRY(ir_toposort(g, e));
    return graph_infer_shapes(g, e);
}

graft_status graft_model_set_precision(graft_model *m, graft_dtype dt) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (dt != GRAFT_DTYPE_F32 && dt != GRAFT_DTYPE_F16 && dt != GRAFT_DTYPE_BF16)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "graft_model_set_precision: %s is not fp32, fp16 or bf16",
                       graft_dtype_name(dt));
    if (dt == m->precision) return GRAFT_OK;
    if (m->precision != GRAFT_DTYPE_F32 && m->precision != GRAFT_DTYPE_UNDEFINED)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the model already runs in %s; reload it to change precision",
                       graft_dtype_name(m->precision));
    if (dt == GRAFT_DTYPE_F32) return GRAFT_OK;
    /* On the CPU, bf16: the graph stays float32 and the products (Conv) run with bf16 inputs
     * and weights where the CPU has AVX512_BF16 or AMX. The reference kernels compute half types
     * too (slowly): tests use them to check the conversion where there is no GPU. */
    if (!m->have_device && dt == GRAFT_DTYPE_BF16 && !m->ctx->options.use_reference_kernels) {
        TRY(cpu_backend_set_bf16(&m->backend, true, e));
        model_release_state(m);
        m->summary_ready = false;
        m->precision = dt;
        return GRAFT_OK;
    }
    if (!m->have_device && !m->ctx->options.use_reference_kernels)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "%s inference runs on a GPU; this model runs on the CPU (fp32, or bf16 "
                       "on a CPU with AVX512_BF16 or AMX)",
                       graft_dtype_name(dt));
    exec_free(&m->exec);
    model_release_state(m);
    m->summary_ready = false;
    graft_status st = convert_graph(&m->g, dt, e);
    if (st == GRAFT_OK) m->precision = dt;
    graft_status st2 =
        exec_init(&m->exec, &m->g, &m->backend, model_device(m), st == GRAFT_OK ? e : NULL);
    if (st == GRAFT_OK) model_note_fallbacks(m);
    if (st != GRAFT_OK) err_prefix(e, "converting the model to %s", graft_dtype_name(dt));
    return st != GRAFT_OK ? st : st2;
}

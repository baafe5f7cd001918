/* passes.c: load-time graph passes: constant folding, BatchNormalization folded into Conv, and
 * dead-node removal. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "graph.h"

/* Evaluate a node whose inputs are all constant with its reference kernel; the outputs become
 * constant values. A non-constant input is passed as a data-less stand-in of its (fully known)
 * shape, which is all Shape reads. An output over FOLD_MAX_ELEMENTS or FOLD_MAX_BYTES is not
 * folded (*skipped set, nothing allocated): the node then runs at run time. */
static graft_status fold_node(ir_graph *g, ir_node *n, bool *skipped, graft_err *e) {
    value_info in[64], out[64];
    const tensor *in_t[64];
    tensor stand_in[64];
    tensor outs[64];
    tensor *out_t[64];
    memset(outs, 0, sizeof outs);
    for (int k = 0; k < n->n_in; k++) {
        graph_value_info(g, n->inputs[k], &in[k]);
        in_t[k] = NULL;
        if (n->inputs[k] < 0) continue;
        const ir_value *v = &g->values[n->inputs[k]];
        if (v->is_const) {
            in_t[k] = &v->data;
            continue;
        }
        memset(&stand_in[k], 0, sizeof stand_in[k]);
        stand_in[k].dtype = v->dtype;
        stand_in[k].ndim = v->ndim;
        memcpy(stand_in[k].dims, v->dims, sizeof v->dims);
        in_t[k] = &stand_in[k];
    }
    memset(out, 0, sizeof(value_info) * (size_t)n->n_out);
    TRY(n->op->infer(n, in, n->n_in, out, n->n_out, e));
    *skipped = false;
    for (int k = 0; k < n->n_out; k++) {
        if (!out[k].present || out[k].ndim < 0 || out[k].ndim > GRAFT_MAX_DIMS) continue;
        int64_t numel = dims_numel(out[k].ndim, out[k].dims);
        int64_t bytes = dtype_bytes(out[k].dtype, numel);
        if (numel < 0 || numel > FOLD_MAX_ELEMENTS || bytes < 0 || bytes > FOLD_MAX_BYTES)
            *skipped = true;
    }
    if (*skipped) return GRAFT_OK;
    graft_status st = GRAFT_OK;
    for (int k = 0; k < n->n_out && st == GRAFT_OK; k++) {
        out_t[k] = &outs[k];
        if (!out[k].present || out[k].ndim < 0) {
            st = op_error(n, e, GRAFT_E_INTERNAL, "inference left output %d unknown", k);
            break;
        }
        st = tensor_make(&outs[k], out[k].dtype, out[k].ndim, out[k].dims, e);
    }
    if (st == GRAFT_OK) {
        op_call call = {n, in_t, n->n_in, out_t, n->n_out, e};
        st = n->op->reference(&call);
    }
    if (st != GRAFT_OK) {
        for (int k = 0; k < n->n_out; k++) tensor_release(&outs[k]);
        return st;
    }
    for (int k = 0; k < n->n_out; k++) {
        if (n->outputs[k] < 0) {
            tensor_release(&outs[k]);
            continue;
        }
        ir_value *v = &g->values[n->outputs[k]];
        v->data = outs[k];
        v->is_const = true;
        v->producer = -1;
        v->dtype = outs[k].dtype;
        v->ndim = outs[k].ndim;
        memcpy(v->dims, outs[k].dims, sizeof v->dims);
    }
    n->dead = true;
    return GRAFT_OK;
}

static bool all_inputs_const(const ir_graph *g, const ir_node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->inputs[k] >= 0 && !g->values[n->inputs[k]].is_const) return false;
    return true;
}

/* Shape of a value whose shape is fully known is a constant even if the value is not. */
static bool shape_is_static(const ir_graph *g, const ir_node *n) {
    if (strcmp(n->op_type, "Shape") != 0 || n->n_in != 1 || n->inputs[0] < 0) return false;
    const ir_value *v = &g->values[n->inputs[0]];
    if (v->ndim < 0) return false;
    for (int i = 0; i < v->ndim; i++)
        if (v->dims[i] < 0) return false;
    return true;
}

graft_status pass_fold_constants(ir_graph *g, int *changed, graft_err *e) {
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        bool outputs_are_model_outputs = false;
        for (int k = 0; k < n->n_out; k++)
            if (n->outputs[k] >= 0 && g->values[n->outputs[k]].is_graph_output)
                outputs_are_model_outputs = true;
        if (outputs_are_model_outputs) continue;
        if (!all_inputs_const(g, n) && !shape_is_static(g, n)) continue;
        bool skipped;
        TRY(fold_node(g, n, &skipped, e));
        count += !skipped;
    }
    if (changed) *changed = count;
    return GRAFT_OK;
}

/* Number of live nodes reading value v (graph outputs count as readers). */
static int readers(const ir_graph *g, int v) {
    int r = g->values[v].is_graph_output ? 1 : 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int k = 0; k < g->nodes[i].n_in; k++) r += g->nodes[i].inputs[k] == v;
    }
    return r;
}

static bool is_const_f32(const ir_graph *g, int v, int64_t numel) {
    return v >= 0 && g->values[v].is_const && g->values[v].data.dtype == GRAFT_DTYPE_F32 &&
           tensor_numel(&g->values[v].data) == numel;
}

/* Keep the folded BN's gamma on the Conv: channel pruning ranks channels by it (network
 * slimming); a second BN folded into the same Conv multiplies in. */
static graft_status record_gamma(ir_node *conv, const float *gamma, int64_t oc, graft_err *e) {
    if (!conv->bn_gamma) {
        conv->bn_gamma = malloc(sizeof(float) * (size_t)(oc ? oc : 1));
        if (!conv->bn_gamma) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory folding BN");
        for (int64_t c = 0; c < oc; c++) conv->bn_gamma[c] = 1.0f;
    }
    for (int64_t c = 0; c < oc; c++) conv->bn_gamma[c] *= gamma[c];
    return GRAFT_OK;
}

/* Conv(x, W, b) -> BN(scale, bias, mean, var) becomes Conv(x, W*s, (b-mean)*s+bias) with
 * s = scale / sqrt(var + eps). New constants replace the old ones (which DCE may then drop). */
static graft_status fold_one_bn(ir_graph *g, ir_node *conv, ir_node *bn, graft_err *e) {
    const tensor *w = &g->values[conv->inputs[1]].data;
    int64_t oc = w->dims[0], per = tensor_numel(w) / (oc ? oc : 1);
    const float *scale = g->values[bn->inputs[1]].data.data;
    const float *beta = g->values[bn->inputs[2]].data.data;
    const float *mean = g->values[bn->inputs[3]].data.data;
    const float *var = g->values[bn->inputs[4]].data.data;
    const float *bias =
        conv->n_in > 2 && conv->inputs[2] >= 0 ? g->values[conv->inputs[2]].data.data : NULL;
    float eps = attr_f(bn, "epsilon", 1e-5f);
    char name[512];
    int wv, bv;
    snprintf(name, sizeof name, "%s.bn_folded_weight", conv->name);
    TRY(graph_add_value(g, name, &wv, e));
    snprintf(name, sizeof name, "%s.bn_folded_bias", conv->name);
    TRY(graph_add_value(g, name, &bv, e));
    ir_value *nw = &g->values[wv], *nb = &g->values[bv];
    w = &g->values[conv->inputs[1]].data; /* values may have moved */
    TRY(tensor_clone(&nw->data, w, e));
    int64_t bdims[1] = {oc};
    TRY(tensor_make(&nb->data, GRAFT_DTYPE_F32, 1, bdims, e));
    float *wd = nw->data.data, *bd = nb->data.data;
    for (int64_t c = 0; c < oc; c++) {
        double s = (double)scale[c] / sqrt((double)var[c] + (double)eps);
        for (int64_t k = 0; k < per; k++) wd[c * per + k] = (float)(wd[c * per + k] * s);
        bd[c] = (float)(((bias ? bias[c] : 0.0) - mean[c]) * s + beta[c]);
    }
    ir_value *vals[2] = {nw, nb};
    for (int i = 0; i < 2; i++) {
        vals[i]->is_const = true;
        vals[i]->dtype = GRAFT_DTYPE_F32;
        vals[i]->ndim = vals[i]->data.ndim;
        memcpy(vals[i]->dims, vals[i]->data.dims, sizeof vals[i]->dims);
    }
    TRY(record_gamma(conv, scale, oc, e));
    if (conv->n_in < 3) {
        int *ni = realloc(conv->inputs, sizeof(int) * 3);
        if (!ni) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory folding BN");
        conv->inputs = ni;
        conv->n_in = 3;
    }
    conv->inputs[1] = wv;
    conv->inputs[2] = bv;
    conv->outputs[0] = bn->outputs[0];
    bn->dead = true;
    return GRAFT_OK;
}

graft_status pass_fold_batchnorm(ir_graph *g, int *changed, graft_err *e) {
    int count = 0;
    ir_link_producers(g);
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *bn = &g->nodes[i];
        if (bn->dead || strcmp(bn->op_type, "BatchNormalization") != 0 || bn->n_in != 5) continue;
        if (attr_i(bn, "training_mode", 0) != 0 || bn->n_out != 1) continue;
        int x = bn->inputs[0];
        if (x < 0 || g->values[x].producer < 0) continue;
        ir_node *conv = &g->nodes[g->values[x].producer];
        if (conv->dead || strcmp(conv->op_type, "Conv") != 0 || conv->n_out != 1) continue;
        if (conv->n_in < 2 || !g->values[conv->inputs[1]].is_const) continue;
        const tensor *w = &g->values[conv->inputs[1]].data;
        if (w->dtype != GRAFT_DTYPE_F32 || w->ndim < 3) continue;
        int64_t oc = w->dims[0];
        bool ok = readers(g, x) == 1;
        for (int k = 1; k < 5 && ok; k++) ok = is_const_f32(g, bn->inputs[k], oc);
        if (ok && conv->n_in > 2 && conv->inputs[2] >= 0) ok = is_const_f32(g, conv->inputs[2], oc);
        if (!ok) continue;
        TRY(fold_one_bn(g, conv, bn, e));
        count++;
    }
    ir_link_producers(g);
    if (changed) *changed = count;
    return GRAFT_OK;
}

graft_status pass_remove_dead(ir_graph *g, int *changed, graft_err *e) {
    char *live = calloc((size_t)g->n_values + 1, 1);
    if (!live) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory in dead-node removal");
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i]] = 1;
    int count = 0;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        bool needed = false;
        for (int k = 0; k < n->n_out; k++) needed |= n->outputs[k] >= 0 && live[n->outputs[k]];
        if (!needed) {
            n->dead = true;
            count++;
            continue;
        }
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] >= 0) live[n->inputs[k]] = 1;
    }
    /* Constants nothing reads any more give their memory back. */
    for (int v = 0; v < g->n_values; v++)
        if (!live[v] && g->values[v].is_const) tensor_release(&g->values[v].data);
    free(live);
    if (changed) *changed = count;
    return GRAFT_OK;
}

graft_status graph_optimize(ir_graph *g, graft_err *e) {
    return graph_optimize_ex(g, NULL, e);
}

graft_status graph_optimize_ex(ir_graph *g, const graph_opt_options *o, graft_err *e) {
    bool fold_bn = !o || !o->keep_batchnorm;
    for (int round = 0; round < 8; round++) {
        int folded = 0, bn = 0, pad = 0, dead = 0;
        TRY(pass_fold_constants(g, &folded, e));
        if (fold_bn) TRY(pass_fold_batchnorm(g, &bn, e));
        TRY(pass_fold_pad(g, &pad, e));
        TRY(pass_remove_dead(g, &dead, e));
        ir_compact(g);
        TRY(graph_infer_shapes(g, e));
        if (!folded && !bn && !pad && !dead) break;
    }
    return GRAFT_OK;
}

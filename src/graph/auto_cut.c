/* auto_cut.c: the rules `--cut auto` follows to find a model's features: the input of the final
 * classifier (walked back to from an output), a Gemm fed by global pooling, an encoder's hidden
 * state. docs/training.md ("The auto cut") states them for users. */
#include <stdio.h>
#include <string.h>

#include "auto_cut.h"

#define TAIL_DEPTH 24 /* nodes walked back from an output before giving up */

static bool is_op(const ir_node *n, const char *op) {
    return strcmp(n->op_type, op) == 0;
}

static bool is_one_of(const ir_node *n, const char *const *ops) {
    for (; *ops; ops++)
        if (is_op(n, *ops)) return true;
    return false;
}

/* Ops between a classifier and the output that change neither the per-sample vector's meaning
 * nor the batch: shape-only ops, casts, normalisation of the logits, inference-only dropout. */
static const char *const tail_ops[] = {"Identity", "Dropout", "Flatten",    "Reshape", "Squeeze",
                                       "Cast",     "Softmax", "LogSoftmax", "Sigmoid", NULL};

/* Element-wise activations a classifier convolution may have before the pooling after it
 * (SqueezeNet: Conv, ReLU, global pooling, Flatten). */
static const char *const activation_ops[] = {
    "Relu", "LeakyRelu", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "Gelu",
    "Elu",  "Selu",      "Tanh", "Softplus",  "Mish",        "PRelu",   NULL};

static const ir_node *producer(const ir_graph *g, int v) {
    if (v < 0 || g->values[v].producer < 0) return NULL;
    const ir_node *n = &g->nodes[g->values[v].producer];
    return n->dead || n->n_in < 1 ? NULL : n;
}

static bool is_const(const ir_graph *g, int v) {
    return v >= 0 && g->values[v].is_const;
}

/* The non-constant input of a bias Add (x + b or b + x with b constant), else -1. */
static int bias_add_input(const ir_graph *g, const ir_node *n) {
    if (!is_op(n, "Add") || n->n_in != 2) return -1;
    bool c0 = is_const(g, n->inputs[0]), c1 = is_const(g, n->inputs[1]);
    return c0 == c1 ? -1 : n->inputs[c0 ? 1 : 0];
}

/* The reduction axes of a ReduceMean (attribute before opset 18, constant input after), sorted
 * into *mask as bits after normalising against rank; false when they cannot be told. */
static bool reduce_axes(const ir_graph *g, const ir_node *n, int rank, unsigned *mask) {
    const int64_t *axes = NULL;
    int64_t count = attr_ints(n, "axes", &axes);
    if (count < 0 && n->n_in >= 2 && is_const(g, n->inputs[1])) {
        const tensor *t = &g->values[n->inputs[1]].data;
        if (t->dtype != GRAFT_DTYPE_I64) return false;
        axes = t->data;
        count = tensor_numel(t);
    }
    if (count <= 0 || !axes) return false;
    *mask = 0;
    for (int64_t k = 0; k < count; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
        if (a < 0 || a >= rank) return false;
        *mask |= 1u << a;
    }
    return true;
}

/* Whether n averages a (N, C, H, W) tensor over H and W (GlobalAveragePool, ReduceMean over
 * axes 2 and 3, an AveragePool whose window is the whole map). */
static bool is_spatial_mean(const ir_graph *g, const ir_node *n) {
    const ir_value *x = &g->values[n->inputs[0]];
    if (x->ndim != 4) return false;
    if (is_op(n, "GlobalAveragePool")) return true;
    unsigned mask;
    if (is_op(n, "ReduceMean")) return reduce_axes(g, n, 4, &mask) && mask == 0xCu;
    if (!is_op(n, "AveragePool") || n->n_out < 1 || n->outputs[0] < 0) return false;
    const ir_value *y = &g->values[n->outputs[0]];
    const int64_t *k = NULL;
    return y->ndim == 4 && y->dims[2] == 1 && y->dims[3] == 1 &&
           attr_ints(n, "kernel_shape", &k) == 2 && k[0] == x->dims[2] && k[1] == x->dims[3];
}

/* A linear classifier over per-sample vectors: Gemm (not transposing A) or MatMul with a
 * constant 2-D weight whose input is a computed (N, F) tensor. *features gets F (-1 unknown). */
static bool is_linear_classifier(const ir_graph *g, const ir_node *n, int64_t *features) {
    if (!(is_op(n, "Gemm") || is_op(n, "MatMul")) || n->n_in < 2) return false;
    if (!is_const(g, n->inputs[1]) || g->values[n->inputs[1]].ndim != 2) return false;
    if (is_op(n, "Gemm") && attr_i(n, "transA", 0) != 0) return false;
    const ir_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
    if (x->ndim != 2 || x->is_const || x->producer < 0) return false;
    bool trans_b = is_op(n, "Gemm") && attr_i(n, "transB", 0) != 0;
    *features = x->dims[1] >= 0 ? x->dims[1] : w->dims[trans_b ? 1 : 0];
    return true;
}

/* A 1x1 convolution classifier (constant (K, C, 1, 1) weight, one group) over a computed
 * (N, C, H, W) tensor: the features once that tensor is globally pooled. */
static bool is_conv_classifier(const ir_graph *g, const ir_node *n, int64_t *features) {
    if (!is_op(n, "Conv") || n->n_in < 2 || !is_const(g, n->inputs[1])) return false;
    const ir_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
    if (w->ndim != 4 || w->dims[2] != 1 || w->dims[3] != 1 || attr_i(n, "group", 1) != 1)
        return false;
    if (x->ndim != 4 || x->is_const || x->producer < 0) return false;
    *features = w->dims[1];
    return true;
}

static bool spatially_one(const ir_value *x) {
    return x->ndim == 4 && x->dims[2] == 1 && x->dims[3] == 1;
}

/* Walk back from graph output `out` through the classifier's tail to the classifier. */
static bool classifier_of_output(const ir_graph *g, int out, auto_cut *c) {
    const ir_value *o = &g->values[out];
    if (o->ndim != 2) return false; /* (N, classes): a per-sample output */
    bool pooled = false;            /* a global average pooling after the classifier */
    int v = out;
    for (int depth = 0; depth < TAIL_DEPTH; depth++) {
        const ir_node *n = producer(g, v);
        if (!n) return false;
        int64_t f;
        int through = bias_add_input(g, n);
        if (through >= 0) {
            v = through;
        } else if (is_one_of(n, tail_ops) || (pooled && is_one_of(n, activation_ops))) {
            v = n->inputs[0];
        } else if (!pooled && is_spatial_mean(g, n)) {
            pooled = true;
            v = n->inputs[0];
        } else if (!pooled && is_linear_classifier(g, n, &f)) {
            c->value = n->inputs[0];
            c->pooling = GRAFT_POOLING_NONE;
            c->features = f;
            snprintf(c->why, sizeof c->why,
                     "the input of the final classifier: %s node '%s' (constant weight) computes "
                     "output '%s' from it; taken as it is (no pooling added)",
                     n->op_type, n->name, o->name);
            return true;
        } else if (is_conv_classifier(g, n, &f) &&
                   (pooled || spatially_one(&g->values[n->inputs[0]]))) {
            c->value = n->inputs[0];
            c->pooling = GRAFT_POOLING_SPATIAL;
            c->features = f;
            snprintf(c->why, sizeof c->why,
                     "the input of the final classifier: a 1x1 Conv node '%s' (constant weight) "
                     "computes output '%s' from it%s; the cut adds global average pooling over "
                     "height and width, then Flatten",
                     n->name, o->name, pooled ? ", pooled after the convolution" : "");
            return true;
        } else {
            return false;
        }
    }
    return false;
}

/* Walk back from v through shape-only ops; true when it comes from global pooling. */
static bool comes_from_pooling(const ir_graph *g, int v) {
    for (int depth = 0; depth < 8 && v >= 0; depth++) {
        const ir_node *n = producer(g, v);
        if (!n) return false;
        if (is_op(n, "GlobalAveragePool") || is_op(n, "ReduceMean") || is_op(n, "AveragePool"))
            return true;
        if (!is_op(n, "Flatten") && !is_op(n, "Reshape") && !is_op(n, "Squeeze")) return false;
        v = n->inputs[0];
    }
    return false;
}

/* A Gemm/MatMul anywhere with a constant weight, fed by global pooling (the last such node). */
static bool pooled_linear(const ir_graph *g, auto_cut *c) {
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || !(is_op(n, "Gemm") || is_op(n, "MatMul")) || n->n_in < 2) continue;
        if (!is_const(g, n->inputs[1]) || !comes_from_pooling(g, n->inputs[0])) continue;
        const ir_value *x = &g->values[n->inputs[0]];
        c->value = n->inputs[0];
        c->pooling = GRAFT_POOLING_NONE;
        c->features = x->ndim >= 2 ? x->dims[x->ndim - 1] : -1;
        snprintf(c->why, sizeof c->why,
                 "pooled CNN features: the input of %s node '%s' (constant weight), fed by global "
                 "pooling; no pooling added",
                 n->op_type, n->name);
        return true;
    }
    return false;
}

/* An encoder: integer (batch, sequence) inputs and a (batch, sequence, hidden) float output. */
static bool encoder_hidden_state(const ir_graph *g, auto_cut *c) {
    bool token_input = false;
    for (int i = 0; i < g->n_inputs; i++) {
        const ir_value *v = &g->values[g->inputs[i]];
        token_input |= (v->dtype == GRAFT_DTYPE_I64 || v->dtype == GRAFT_DTYPE_I32) && v->ndim == 2;
    }
    for (int i = 0; token_input && i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        if (v->ndim == 3 && dtype_is_float(v->dtype)) {
            c->value = g->outputs[i];
            c->pooling = GRAFT_POOLING_CLS;
            c->features = v->dims[2];
            snprintf(c->why, sizeof c->why,
                     "encoder: the model has no classifier over a per-sample vector; its hidden "
                     "state output '%s', pooled to its [CLS] (first) token",
                     v->name);
            return true;
        }
    }
    return false;
}

graft_status model_auto_cut(const graft_model *m, auto_cut *c, graft_err *e) {
    const ir_graph *g = &m->g;
    memset(c, 0, sizeof *c);
    c->value = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (classifier_of_output(g, g->outputs[i], c)) return GRAFT_OK;
    if (pooled_linear(g, c) || encoder_hidden_state(g, c)) return GRAFT_OK;
    return err_set(e, GRAFT_E_NOT_FOUND,
                   "no cut point found: no output is computed by a classifier (a Gemm/MatMul with "
                   "a constant weight over (N, F), or a 1x1 Conv followed by global pooling), no "
                   "Gemm is fed by global pooling, and no encoder hidden state is an output; name "
                   "the features' tensor with --cut");
}

graft_status graft_model_auto_cut_info(const graft_model *cm, graft_auto_cut_info *out) {
    if (!cm || !out) return GRAFT_E_INVALID_ARGUMENT;
    graft_model *m = (graft_model *)cm; /* keeps the why text */
    auto_cut c;
    TRY(model_auto_cut(m, &c, &m->ctx->err));
    snprintf(m->auto_cut_why, sizeof m->auto_cut_why, "%s", c.why);
    out->tensor = m->g.values[c.value].name;
    out->why = m->auto_cut_why;
    out->pooling = c.pooling;
    out->features = c.features;
    return GRAFT_OK;
}

graft_status graft_model_auto_cut(const graft_model *m, const char **tensor_name,
                                  const char **why) {
    if (!m || !tensor_name) return GRAFT_E_INVALID_ARGUMENT;
    graft_auto_cut_info info;
    TRY(graft_model_auto_cut_info(m, &info));
    *tensor_name = info.tensor;
    if (why) *why = info.why;
    return GRAFT_OK;
}

/* prune_common.c: what every pruning method shares: which tensors are weights, which nodes stay
 * dense, counting weights; graft_model_prune, which runs a method and rebuilds the model; and the
 * gradual schedule's sparsities. */
#include <string.h>

#include "../graph/graph.h"
#include "../graph/model.h"
#include "prune.h"

static bool is_op(const ir_node *n, const char *op) {
    return strcmp(n->op_type, op) == 0;
}

bool prune_is_weight(const ir_graph *g, int node, int input) {
    const ir_node *n = &g->nodes[node];
    if (input != 1 || n->n_in < 2 || n->inputs[1] < 0) return false;
    if (!is_op(n, "Conv") && !is_op(n, "Gemm") && !is_op(n, "MatMul")) return false;
    const ir_value *v = &g->values[n->inputs[1]];
    return v->is_const && v->data.data && v->data.dtype == GRAFT_DTYPE_F32 &&
           (v->data.ndim >= 2 || !is_op(n, "MatMul"));
}

/* A weighted node whose constant weights are fp16/bf16 (a half-precision model), or -1. */
static int half_weights(const ir_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || n->n_in < 2 || n->inputs[1] < 0) continue;
        if (!is_op(n, "Conv") && !is_op(n, "Gemm") && !is_op(n, "MatMul")) continue;
        const ir_value *v = &g->values[n->inputs[1]];
        if (v->is_const && (v->data.dtype == GRAFT_DTYPE_F16 || v->data.dtype == GRAFT_DTYPE_BF16))
            return i;
    }
    return -1;
}

static int first_of(const ir_graph *g, const char *op, bool last) {
    for (int k = 0; k < g->n_nodes; k++) {
        int i = last ? g->n_nodes - 1 - k : k;
        if (is_op(&g->nodes[i], op) && prune_is_weight(g, i, 1)) return i;
    }
    return -1;
}

bool prune_excluded(const ir_graph *g, int node, const graft_prune_options *o) {
    const ir_node *n = &g->nodes[node];
    for (int i = 0; i < o->n_exclude; i++)
        if (o->exclude[i] &&
            (!strcmp(o->exclude[i], n->name) || !strcmp(o->exclude[i], n->op_type)))
            return true;
    if (!o->keep_ends) return false;
    if (node == first_of(g, "Conv", false)) return true;
    int gemm = first_of(g, "Gemm", true), matmul = first_of(g, "MatMul", true);
    int last = gemm > matmul ? gemm : matmul;
    /* The classifier: the last weighted Gemm/MatMul, unless the graph ends in an encoder's
     * hidden state (then there is no classifier to keep). */
    return node == last && g->n_outputs == 1 && g->values[g->outputs[0]].ndim == 2;
}

void prune_count(const ir_graph *g, int64_t *params, int64_t *nonzero) {
    *params = *nonzero = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!prune_is_weight(g, i, 1)) continue;
        const tensor *w = &g->values[g->nodes[i].inputs[1]].data;
        int64_t n = tensor_numel(w);
        const float *p = w->data;
        *params += n;
        for (int64_t k = 0; k < n; k++) *nonzero += p[k] != 0.0f;
    }
}

graft_status graft_model_prune(graft_model *m, const graft_prune_options *options,
                               graft_prune_report *report) {
    if (!m) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    graft_prune_options o = GRAFT_PRUNE_OPTIONS_INIT;
    if (options) o = *options;
    if (o.method < 0 || o.method >= GRAFT_PRUNE_METHOD_COUNT || o.importance < 0 ||
        o.importance >= GRAFT_IMPORTANCE_COUNT || o.scope < 0 || o.scope >= GRAFT_PRUNE_SCOPE_COUNT)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "prune: unknown method, importance or scope");
    if (!(o.sparsity >= 0.0 && o.sparsity < 1.0) && o.method != GRAFT_PRUNE_2_4)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "prune: sparsity must be in [0, 1), got %g",
                       o.sparsity);
    int half = half_weights(&m->g);
    if (half >= 0) /* nothing would be pruned: say so rather than report 0 of 0 */
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "prune: node '%s' (%s) has %s weights; pruning works on fp32 weights: prune "
                       "the fp32 model, then set the precision (graft_model_set_precision)",
                       m->g.nodes[half].name ? m->g.nodes[half].name : "", m->g.nodes[half].op_type,
                       graft_dtype_name(m->g.values[m->g.nodes[half].inputs[1]].data.dtype));
    graft_prune_report r;
    memset(&r, 0, sizeof r);
    graft_model_summary s;
    graft_model_summarize(m, &s);
    r.flops_before = s.flops_per_sample;
    prune_count(&m->g, &r.params_before, &r.nonzero_before);
    /* Weights change in place or the graph is rewritten: kernel state (reordered weights) and
     * the executor's plan are rebuilt. */
    exec_free(&m->exec);
    model_release_state(m);
    graft_status st;
    switch (o.method) {
    case GRAFT_PRUNE_MAGNITUDE:
        st = prune_magnitude(&m->g, &o, &r, e);
        break;
    case GRAFT_PRUNE_2_4:
        st = prune_2_4(&m->g, &o, &r, e);
        break;
    case GRAFT_PRUNE_CHANNELS:
        st = prune_channels(&m->g, &o, &r, e);
        break;
    default:
        st = prune_heads(&m->g, &o, &r, e);
        break;
    }
    if (st == GRAFT_OK) {
        ir_compact(&m->g);
        st = ir_toposort(&m->g, e);
    }
    if (st == GRAFT_OK) st = graph_infer_shapes(&m->g, e);
    if (st == GRAFT_OK) st = model_optimize(m, e);
    graft_status st2 =
        exec_init(&m->exec, &m->g, &m->backend, model_device(m), st == GRAFT_OK ? e : NULL);
    if (st == GRAFT_OK) st = st2;
    if (st != GRAFT_OK) return st;
    m->summary_ready = false;
    graft_model_summarize(m, &s);
    r.flops_after = s.flops_per_sample;
    prune_count(&m->g, &r.params_after, &r.nonzero_after);
    if (report) *report = r;
    return GRAFT_OK;
}

double graft_prune_schedule(double final_sparsity, int round, int rounds) {
    if (!(final_sparsity >= 0.0 && final_sparsity < 1.0) || rounds < 1 || round < 0 ||
        round > rounds)
        return -1;
    if (round == rounds) return final_sparsity;
    double left = 1.0 - (double)round / (double)rounds;
    return final_sparsity * (1.0 - left * left * left);
}

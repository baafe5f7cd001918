/* head_graph.c: head-only training through the training graph (head_graph.h): the head's layers
 * as Gemm and activation nodes, their Backward nodes on the CPU backend's fast kernels, the loss
 * in the executor's pause between the two. */
#include "head_graph.h"

#include <stdlib.h>
#include <string.h>

#include "../graph/build.h"
#include "../graph/graph.h"

static graft_status oom(graft_err *e) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory setting up the head's graph");
}

bool head_graph_applies(const head *h) {
    return h->precision == GRAFT_PRECISION_FP32 && h->dropout == 0.0f && h->n_layers > 0;
}

/* g's one input, "features" (batch, in) float32. */
static graft_status add_features(ir_graph *g, int64_t in, int *out, graft_err *e) {
    TRY(graph_add_value(g, "features", out, e));
    ir_value *v = &g->values[*out];
    v->dtype = GRAFT_DTYPE_F32;
    v->ndim = 2;
    v->dims[0] = -1, v->dims[1] = in;
    v->is_graph_input = true;
    g->inputs = malloc(sizeof(int));
    if (!g->inputs) return oom(e);
    g->inputs[g->n_inputs++] = *out;
    return GRAFT_OK;
}

/* The head as graft_trainer_attach writes it: Gemm (transB) and activation per layer. */
static graft_status build_ir(ir_graph *g, const head *h, graft_err *e) {
    g->opsets = calloc(1, sizeof *g->opsets);
    if (!g->opsets || !(g->opsets[0].domain = ir_strdup(""))) return oom(e);
    g->opsets[0].version = 20; /* Gelu */
    g->n_opsets = 1;
    g->ir_version = 8;
    int cur;
    TRY(add_features(g, h->layers[0].in, &cur, e));
    TRY(head_append(h, g, cur, "logits", &cur, e));
    g->outputs = malloc(sizeof(int));
    if (!g->outputs) return oom(e);
    g->outputs[g->n_outputs++] = cur;
    g->values[cur].is_graph_output = true;
    ir_link_producers(g);
    return graph_infer_shapes(g, e);
}

/* Each training-graph parameter's layer tensor (bound as the input: the master weights). */
static graft_status bind_params(head_graph *hg, head *h, graft_err *e) {
    const ir_graph *g = &hg->tg.g;
    int n = hg->tg.n_params;
    hg->inputs = calloc((size_t)g->n_inputs + 1, sizeof *hg->inputs);
    hg->eval_inputs = calloc((size_t)hg->fwd.g.n_inputs + 1, sizeof *hg->eval_inputs);
    hg->param_of = calloc((size_t)n + 1, sizeof *hg->param_of);
    hg->param_is_bias = calloc((size_t)n + 1, sizeof *hg->param_is_bias);
    if (!hg->inputs || !hg->eval_inputs || !hg->param_of || !hg->param_is_bias) return oom(e);
    if (hg->tg.n_side != 0 || hg->fwd.n_params != n || g->n_inputs != n + 2)
        return err_set(e, GRAFT_E_INTERNAL,
                       "the head's graph has unexpected inputs (%d side, %d and %d parameters, %d "
                       "inputs)",
                       hg->tg.n_side, n, hg->fwd.n_params, g->n_inputs);
    for (int i = 0; i < n; i++) {
        const char *name = g->values[hg->tg.params[i]].name;
        for (int j = 0; j < h->n_layers && !hg->param_of[i]; j++) {
            head_layer *l = &h->layers[j];
            if (!strcmp(name, l->w_name) || !strcmp(name, l->b_name)) {
                hg->param_of[i] = l;
                hg->param_is_bias[i] = !strcmp(name, l->b_name);
            }
        }
        if (!hg->param_of[i] || strcmp(name, hg->fwd.g.values[hg->fwd.params[i]].name))
            return err_set(e, GRAFT_E_INTERNAL, "the head's graph lost parameter '%s'", name);
        head_layer *l = hg->param_of[i];
        hg->inputs[1 + i] = hg->param_is_bias[i] ? l->b : l->w;
        hg->eval_inputs[1 + i] = hg->inputs[1 + i];
    }
    return GRAFT_OK;
}

graft_status head_graph_init(head_graph *hg, head *h, int threads, graft_err *e) {
    memset(hg, 0, sizeof *hg);
    ir_graph_init(&hg->g);
    hg->outputs = h->layers[h->n_layers - 1].out;
    graft_status st = build_ir(&hg->g, h, e);
    const char *to = st == GRAFT_OK ? hg->g.values[hg->g.outputs[0]].name : NULL;
    train_graph_options fo = {true};
    if (st == GRAFT_OK) st = train_graph_build(&hg->g, "features", to, NULL, &hg->tg, e);
    if (st == GRAFT_OK) st = train_graph_build(&hg->g, "features", to, &fo, &hg->fwd, e);
    if (st == GRAFT_OK) st = bind_params(hg, h, e);
    if (st == GRAFT_OK) st = train_exec_init(&hg->run, &hg->tg, false, threads, e);
    if (st == GRAFT_OK) st = train_exec_init(&hg->eval, &hg->fwd, false, threads, e);
    if (st == GRAFT_OK) { /* the weights are read afresh: keep the primitives */
        train_exec_keep_kernel_state(&hg->run);
        train_exec_keep_kernel_state(&hg->eval);
    }
    hg->ready = st == GRAFT_OK;
    return st;
}

void head_graph_free(head_graph *hg) {
    if (!hg) return;
    train_exec_free(&hg->run);
    train_exec_free(&hg->eval);
    train_graph_free(&hg->tg);
    train_graph_free(&hg->fwd);
    ir_graph_free(&hg->g);
    free(hg->inputs), free(hg->eval_inputs), free(hg->param_of), free(hg->param_is_bias);
    free(hg->dlogits);
    memset(hg, 0, sizeof *hg);
}

static void bind_features(tensor *t, const float *x, int64_t n, int64_t in) {
    *t = (tensor){GRAFT_DTYPE_F32, 2, {n, in}, (void *)x}; /* read only */
}

typedef struct pause_call {
    head_graph *hg;
    int64_t n;
    head_graph_loss_fn loss;
    void *user;
} pause_call;

static graft_status at_pause(void *user, executor *x, graft_err *e) {
    pause_call *pc = user;
    const tensor *logits = &x->vals[pc->hg->tg.to];
    if (logits->dtype != GRAFT_DTYPE_F32 || tensor_numel(logits) != pc->n * pc->hg->outputs)
        return err_set(e, GRAFT_E_INTERNAL, "the head's graph gave logits of another shape");
    return pc->loss(pc->user, logits->data, pc->n, pc->hg->dlogits, e);
}

graft_status head_graph_step(head_graph *hg, const float *x, int64_t n, head_graph_loss_fn loss,
                             void *user, graft_err *e) {
    if (n != hg->batch) {
        free(hg->dlogits);
        hg->dlogits = malloc(sizeof(float) * (size_t)(n * hg->outputs));
        hg->batch = hg->dlogits ? n : 0;
        if (!hg->dlogits) return oom(e);
    }
    int last = hg->tg.g.n_inputs - 1;
    bind_features(&hg->inputs[0], x, n, hg->g.values[hg->g.inputs[0]].dims[1]);
    hg->inputs[last] = (tensor){GRAFT_DTYPE_F32, 2, {n, hg->outputs}, hg->dlogits};
    pause_call pc = {hg, n, loss, user};
    executor *ex = &hg->run.x;
    ex->pause_after = hg->tg.n_forward_nodes - 1;
    ex->pause_fn = at_pause;
    ex->pause_user = &pc;
    graft_status st = train_exec_run(&hg->run, hg->inputs, e);
    ex->pause_fn = NULL;
    TRY(st);
    for (int i = 0; i < hg->tg.n_params; i++) {
        const tensor *g = train_exec_output(&hg->run, 1 + i);
        head_layer *l = hg->param_of[i];
        tensor *acc = hg->param_is_bias[i] ? &l->db : &l->dw;
        if (g->dtype != GRAFT_DTYPE_F32 || tensor_numel(g) != tensor_numel(acc))
            return err_set(e, GRAFT_E_INTERNAL, "the head's gradient %d has the wrong size", i);
        const float *src = g->data;
        float *dst = acc->data;
        for (int64_t k = 0; k < tensor_numel(acc); k++) dst[k] += src[k];
    }
    return GRAFT_OK;
}

graft_status head_graph_logits(head_graph *hg, const float *x, int64_t n, const float **logits,
                               graft_err *e) {
    bind_features(&hg->eval_inputs[0], x, n, hg->g.values[hg->g.inputs[0]].dims[1]);
    TRY(train_exec_run(&hg->eval, hg->eval_inputs, e));
    const tensor *out = train_exec_output(&hg->eval, 0);
    if (out->dtype != GRAFT_DTYPE_F32 || tensor_numel(out) != n * hg->outputs)
        return err_set(e, GRAFT_E_INTERNAL, "the head's graph gave logits of another shape");
    *logits = out->data;
    return GRAFT_OK;
}

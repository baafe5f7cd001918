/* head_graph.c: a head's training through the training graph (head_graph.h): the head's layers
 * as Gemm, activation, rounding Casts and dropout products, their Backward nodes on the CPU
 * backend's fast kernels, the loss in the executor's pause between the two. */
#include "head_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/rng.h"
#include "../graph/build.h"
#include "../graph/graph.h"

static graft_status oom(graft_err *e) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory setting up the head's graph");
}

/* g's first input, "features" (batch, in) float32. */
static graft_status add_features(ir_graph *g, int64_t in, int *out, graft_err *e) {
    int64_t dims[2] = {-1, in};
    return graph_add_input(g, "features", GRAFT_DTYPE_F32, 2, dims, out, e);
}

/* The head (with dropout masks or not: head_append_masked) from "features" to "logits". */
static graft_status build_ir(ir_graph *g, const head *h, bool masks, graft_err *e) {
    ir_graph_init(g);
    g->opsets = calloc(1, sizeof *g->opsets);
    if (!g->opsets || !(g->opsets[0].domain = ir_strdup(""))) return oom(e);
    g->opsets[0].version = 20; /* Gelu */
    g->n_opsets = 1;
    g->ir_version = 8;
    int cur;
    TRY(add_features(g, h->layers[0].in, &cur, e));
    TRY(head_append_masked(h, g, cur, "logits", masks, &cur, e));
    g->outputs = malloc(sizeof(int));
    if (!g->outputs) return oom(e);
    g->outputs[g->n_outputs++] = cur;
    g->values[cur].is_graph_output = true;
    ir_link_producers(g);
    return graph_infer_shapes(g, e);
}

/* The layer tensor parameter value v of graph tg binds (the master weights themselves). */
static graft_status param_tensor(head *h, const train_graph *tg, int v, head_layer **layer,
                                 bool *is_bias, graft_err *e) {
    const char *name = tg->g.values[v].name;
    for (int j = 0; j < h->n_layers; j++) {
        head_layer *l = &h->layers[j];
        if (!strcmp(name, l->w_name) || !strcmp(name, l->b_name)) {
            *layer = l;
            *is_bias = !strcmp(name, l->b_name);
            return GRAFT_OK;
        }
    }
    return err_set(e, GRAFT_E_INTERNAL, "the head's graph has an unknown parameter '%s'", name);
}

/* Each side input of the training graph: a layer's dropout mask. */
static graft_status bind_masks(head_graph *hg, graft_err *e) {
    int n = hg->tg.n_side;
    hg->mask_layer = calloc((size_t)n + 1, sizeof *hg->mask_layer);
    hg->masks = calloc((size_t)n + 1, sizeof *hg->masks);
    if (!hg->mask_layer || !hg->masks) return oom(e);
    for (int i = 0; i < n; i++) {
        const char *name = hg->tg.g.values[hg->tg.side[i]].name;
        int layer = -1;
        for (int j = 0; j < hg->h->n_layers && layer < 0; j++) {
            char want[64];
            snprintf(want, sizeof want, "head/%d/dropout_mask", j);
            if (!strcmp(name, want)) layer = j;
        }
        if (layer < 0)
            return err_set(e, GRAFT_E_INTERNAL, "the head's graph reads an unknown '%s'", name);
        hg->mask_layer[i] = layer;
    }
    return GRAFT_OK;
}

/* The parameters of both graphs: every layer's weight and bias, the masters bound. */
static graft_status bind_params(head_graph *hg, graft_err *e) {
    const train_graph *tg = &hg->tg, *fwd = &hg->fwd;
    int n = tg->n_params, side = tg->n_side;
    hg->inputs = calloc((size_t)tg->g.n_inputs + 1, sizeof *hg->inputs);
    hg->eval_inputs = calloc((size_t)fwd->g.n_inputs + 1, sizeof *hg->eval_inputs);
    hg->param_of = calloc((size_t)n + 1, sizeof *hg->param_of);
    hg->param_is_bias = calloc((size_t)n + 1, sizeof *hg->param_is_bias);
    if (!hg->inputs || !hg->eval_inputs || !hg->param_of || !hg->param_is_bias) return oom(e);
    if (n != 2 * hg->h->n_layers || fwd->n_params != n || fwd->n_side != 0 ||
        tg->g.n_inputs != n + side + 2)
        return err_set(e, GRAFT_E_INTERNAL,
                       "the head's graph has unexpected inputs (%d side, %d and %d parameters "
                       "for %d layers, %d inputs)",
                       side, n, fwd->n_params, hg->h->n_layers, tg->g.n_inputs);
    for (int i = 0; i < n; i++) {
        TRY(param_tensor(hg->h, tg, tg->params[i], &hg->param_of[i], &hg->param_is_bias[i], e));
        head_layer *l = hg->param_of[i];
        hg->inputs[1 + side + i] = hg->param_is_bias[i] ? l->b : l->w;
        head_layer *fl = NULL;
        bool fb = false;
        TRY(param_tensor(hg->h, fwd, fwd->params[i], &fl, &fb, e));
        hg->eval_inputs[1 + i] = fb ? fl->b : fl->w;
    }
    return bind_masks(hg, e);
}

graft_status head_graph_init(head_graph *hg, head *h, bool grad_features, int threads,
                             graft_err *e) {
    memset(hg, 0, sizeof *hg);
    hg->h = h;
    if (h->n_layers < 1) return err_set(e, GRAFT_E_INTERNAL, "a head without layers");
    hg->outputs = h->layers[h->n_layers - 1].out;
    graft_status st = build_ir(&hg->g, h, h->dropout > 0.0f, e);
    if (st == GRAFT_OK) st = build_ir(&hg->g_eval, h, false, e);
    /* bf16/fp16: every tensor the head computes with rounded (train_graph_options.round_to) */
    graft_dtype round_to = h->precision == GRAFT_PRECISION_BF16   ? GRAFT_DTYPE_BF16
                           : h->precision == GRAFT_PRECISION_FP16 ? GRAFT_DTYPE_F16
                                                                  : GRAFT_DTYPE_UNDEFINED;
    train_graph_options to = {
        .grad_from = grad_features, .scalar_params = true, .round_to = round_to};
    train_graph_options fo = {.forward_only = true, .scalar_params = true, .round_to = round_to};
    if (st == GRAFT_OK) st = train_graph_build(&hg->g, "features", "logits", &to, &hg->tg, e);
    if (st == GRAFT_OK) st = train_graph_build(&hg->g_eval, "features", "logits", &fo, &hg->fwd, e);
    if (st == GRAFT_OK) st = bind_params(hg, e);
    if (st == GRAFT_OK) st = train_exec_init(&hg->run, &hg->tg.g, false, threads, e);
    if (st == GRAFT_OK) st = train_exec_init(&hg->eval, &hg->fwd.g, false, threads, e);
    if (st == GRAFT_OK) { /* the weights are read afresh: keep the primitives */
        train_exec_keep_kernel_state(&hg->run);
        train_exec_keep_kernel_state(&hg->eval);
    }
    hg->ready = st == GRAFT_OK;
    return st;
}

static void free_batch(head_graph *hg) {
    for (int i = 0; hg->masks && i < hg->tg.n_side; i++) free(hg->masks[i]), hg->masks[i] = NULL;
    free(hg->dlogits);
    hg->dlogits = NULL;
    hg->batch = 0;
}

void head_graph_free(head_graph *hg) {
    if (!hg) return;
    free_batch(hg);
    train_exec_free(&hg->run);
    train_exec_free(&hg->eval);
    train_graph_free(&hg->tg);
    train_graph_free(&hg->fwd);
    ir_graph_free(&hg->g);
    ir_graph_free(&hg->g_eval);
    free(hg->inputs), free(hg->eval_inputs), free(hg->param_of), free(hg->param_is_bias);
    free(hg->mask_layer), free(hg->masks);
    memset(hg, 0, sizeof *hg);
}

/* The per-batch buffers for n rows. */
static graft_status ensure_batch(head_graph *hg, int64_t n, graft_err *e) {
    if (n == hg->batch) return GRAFT_OK;
    free_batch(hg);
    hg->dlogits = malloc(sizeof(float) * (size_t)(n * hg->outputs));
    if (!hg->dlogits) return oom(e);
    for (int i = 0; i < hg->tg.n_side; i++) {
        hg->masks[i] = malloc(sizeof(float) * (size_t)(n * hg->h->layers[hg->mask_layer[i]].out));
        if (!hg->masks[i]) return oom(e);
    }
    hg->batch = n;
    return GRAFT_OK;
}

/* The masks of one training step, drawn layer by layer as head.c's dropout_forward draws them
 * (the same RNG stream: the same masks; a data-parallel rank skips the other ranks' rows). */
static void draw_masks(head_graph *hg, int64_t n) {
    head *h = hg->h;
    float scale = 1.0f / (1.0f - h->dropout);
    for (int j = 0; j < h->n_layers; j++)
        for (int i = 0; i < hg->tg.n_side; i++) {
            if (hg->mask_layer[i] != j) continue;
            float *m = hg->masks[i];
            int64_t out = h->layers[j].out;
            rng_skip(&h->rng, (uint64_t)(h->rows_before * out));
            for (int64_t k = 0; k < n * out; k++)
                m[k] = rng_uniform(&h->rng) >= (double)h->dropout ? scale : 0.0f;
            rng_skip(&h->rng, (uint64_t)(h->rows_after * out));
        }
}

graft_status head_graph_draw_masks(head_graph *hg, int64_t n, graft_err *e) {
    TRY(ensure_batch(hg, n, e));
    draw_masks(hg, n);
    return GRAFT_OK;
}

static void bind_rows(tensor *t, const float *x, int64_t n, int64_t width) {
    *t = (tensor){GRAFT_DTYPE_F32, 2, {n, width}, (void *)x}; /* read only */
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

/* The step's gradients added to the layers' dw / db; d(features) into dx when asked. */
static graft_status collect(head_graph *hg, int64_t n, float *dx, graft_err *e) {
    for (int i = 0; i < hg->tg.n_params; i++) {
        const tensor *g = train_exec_output(&hg->run, 1 + i);
        head_layer *l = hg->param_of[i];
        tensor *acc = hg->param_is_bias[i] ? &l->db : &l->dw;
        if (g->dtype != GRAFT_DTYPE_F32 || tensor_numel(g) != tensor_numel(acc))
            return err_set(e, GRAFT_E_INTERNAL, "the head's gradient %d has the wrong size", i);
        const float *src = g->data;
        float *dst = acc->data;
        int64_t count = tensor_numel(acc);
        for (int64_t k = 0; k < count; k++) dst[k] += src[k];
    }
    if (!dx) return GRAFT_OK;
    const tensor *g = train_exec_output(&hg->run, 1 + hg->tg.n_params);
    int64_t in = hg->h->layers[0].in;
    if (hg->tg.grad_from < 0 || g->dtype != GRAFT_DTYPE_F32 || tensor_numel(g) != n * in)
        return err_set(e, GRAFT_E_INTERNAL, "the head's graph gave no gradient of its features");
    memcpy(dx, g->data, sizeof(float) * (size_t)(n * in));
    return GRAFT_OK;
}

graft_status head_graph_step(head_graph *hg, const float *x, int64_t n, head_graph_loss_fn loss,
                             void *user, float *dx, graft_err *e) {
    TRY(ensure_batch(hg, n, e));
    draw_masks(hg, n);
    int side = hg->tg.n_side, last = hg->tg.g.n_inputs - 1;
    bind_rows(&hg->inputs[0], x, n, hg->h->layers[0].in);
    for (int i = 0; i < side; i++)
        bind_rows(&hg->inputs[1 + i], hg->masks[i], n, hg->h->layers[hg->mask_layer[i]].out);
    bind_rows(&hg->inputs[last], hg->dlogits, n, hg->outputs);
    pause_call pc = {hg, n, loss, user};
    executor *ex = &hg->run.x;
    ex->pause_after = hg->tg.n_forward_nodes - 1;
    ex->pause_fn = at_pause;
    ex->pause_user = &pc;
    graft_status st = train_exec_run(&hg->run, hg->inputs, e);
    ex->pause_fn = NULL;
    TRY(st);
    return collect(hg, n, dx, e);
}

graft_status head_graph_logits(head_graph *hg, const float *x, int64_t n, const float **logits,
                               graft_err *e) {
    bind_rows(&hg->eval_inputs[0], x, n, hg->h->layers[0].in);
    TRY(train_exec_run(&hg->eval, hg->eval_inputs, e));
    const tensor *out = train_exec_output(&hg->eval, 0);
    if (out->dtype != GRAFT_DTYPE_F32 || tensor_numel(out) != n * hg->outputs)
        return err_set(e, GRAFT_E_INTERNAL, "the head's graph gave logits of another shape");
    *logits = out->data;
    return GRAFT_OK;
}

/* head_step.c: a head's whole training step as one graph (head_step.h): Gather, the head,
 * TrainLoss, the Backward nodes and the gradient sums, on the trainer's device or the CPU. */
#include "head_step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../graph/build.h"
#include "../graph/graph.h"

static graft_status oom(graft_err *e) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory setting up the head's step");
}

static graft_dtype round_to(const head *h) {
    return h->precision == GRAFT_PRECISION_BF16   ? GRAFT_DTYPE_BF16
           : h->precision == GRAFT_PRECISION_FP16 ? GRAFT_DTYPE_F16
                                                  : GRAFT_DTYPE_UNDEFINED;
}

/* Value v, a graph input, becomes the output of the node last added (which wrote a new value
 * of its own, left unread). */
static graft_status input_to_output(ir_graph *g, int v, graft_err *e) {
    int k = 0;
    while (k < g->n_inputs && g->inputs[k] != v) k++;
    if (k == g->n_inputs)
        return err_set(e, GRAFT_E_INTERNAL, "head step: '%s' is not an input", g->values[v].name);
    memmove(g->inputs + k, g->inputs + k + 1, sizeof(int) * (size_t)(g->n_inputs - k - 1));
    g->n_inputs--;
    g->values[v].is_graph_input = false;
    g->nodes[g->n_nodes - 1].outputs[0] = v;
    return GRAFT_OK;
}

static graft_status set_attr(ir_attr *a, const char *name, ir_attr_type type, double v,
                             graft_err *e) {
    a->name = ir_strdup(name);
    a->type = type;
    if (type == IR_ATTR_INT) a->i = (int64_t)v;
    if (type == IR_ATTR_FLOAT) a->f = (float)v;
    return a->name ? GRAFT_OK : oom(e);
}

/* The last node's attributes: TrainLoss's (train_loss.h). */
static graft_status loss_attrs(ir_graph *g, const loss_spec *l, int64_t accumulate, bool fp16,
                               graft_err *e) {
    ir_node *n = &g->nodes[g->n_nodes - 1];
    ir_attr *a = calloc(5, sizeof *a);
    if (!a) return oom(e);
    for (int i = 0; i < n->n_attrs; i++) ir_attr_free(&n->attrs[i]);
    free(n->attrs);
    n->attrs = a, n->n_attrs = 5;
    TRY(set_attr(&a[0], "kind", IR_ATTR_INT, l->kind, e));
    TRY(set_attr(&a[1], "label_smoothing", IR_ATTR_FLOAT, l->label_smoothing, e));
    TRY(set_attr(&a[2], "grad_scale", IR_ATTR_FLOAT, l->grad_scale, e));
    TRY(set_attr(&a[3], "accumulate", IR_ATTR_INT, (double)accumulate, e));
    return set_attr(&a[4], "fp16", IR_ATTR_INT, fp16, e);
}

/* The rows gathered from "rows/all" by "rows/index" instead of the input `from`. */
static graft_status add_gather(head_step *hs, graft_err *e) {
    ir_graph *g = &hs->tg.g;
    int in[2], out;
    int64_t all[2] = {-1, hs->in_width}, idx = -1;
    TRY(graph_add_input(g, "rows/all", GRAFT_DTYPE_F32, 2, all, &in[0], e));
    TRY(graph_add_input(g, "rows/index", GRAFT_DTYPE_I64, 1, &idx, &in[1], e));
    TRY(graph_add_node(g, "Gather", 13, in, 2, "rows/gathered", NULL, 0, &out, e));
    return input_to_output(g, hs->tg.from, e);
}

/* TrainLoss(logits, targets, weights, state) writing d_<logits>, which stops being an input. */
static graft_status add_loss(head_step *hs, const loss_spec *l, int64_t accumulate, bool fp16,
                             graft_err *e) {
    ir_graph *g = &hs->tg.g;
    int in[5] = {hs->tg.to, -1, -1, -1, -1}, out;
    int64_t dims[2] = {-1, hs->outputs}, c = hs->outputs, st = (int64_t)sizeof(train_state);
    if (hs->ce)
        TRY(graph_add_input(g, "loss/targets", GRAFT_DTYPE_I64, 1, dims, &in[1], e));
    else
        TRY(graph_add_input(g, "loss/targets", GRAFT_DTYPE_F32, 2, dims, &in[1], e));
    if (l->class_weight || l->pos_weight)
        TRY(graph_add_input(g, "loss/weights", GRAFT_DTYPE_F32, 1, &c, &in[2], e));
    TRY(graph_add_input(g, "loss/state", GRAFT_DTYPE_U8, 1, &st, &in[3], e));
    int64_t one = 1;
    if (l->grad_scale_input)
        TRY(graph_add_input(g, "loss/grad_scale", GRAFT_DTYPE_F32, 1, &one, &in[4], e));
    TRY(graph_add_node(g, "TrainLoss", 1, in, l->grad_scale_input ? 5 : 4, "loss/dlogits", NULL, 0,
                       &out, e));
    TRY(loss_attrs(g, l, accumulate, fp16, e));
    TRY(input_to_output(g, hs->tg.d_to, e));
    TRY(ir_toposort(g, e));
    return graph_infer_shapes(g, e);
}

static int input_pos(const ir_graph *g, int v) {
    for (int k = 0; v >= 0 && k < g->n_inputs; k++)
        if (g->inputs[k] == v) return k;
    return -1;
}

static int input_named(const ir_graph *g, const char *name) {
    return input_pos(g, ir_find_value(g, name));
}

/* The fp32 masters of the source graph's parameter `name`: a head layer's, or a block's. */
static float *master_of(const head_step *hs, const char *name) {
    const head *h = hs->hg->h;
    for (int j = 0; j < h->n_layers; j++) {
        if (!strcmp(name, h->layers[j].w_name)) return h->layers[j].w.data;
        if (!strcmp(name, h->layers[j].b_name)) return h->layers[j].b.data;
    }
    for (int j = 0; hs->b && j < hs->b->n_params; j++) /* names[j]: "blocks/<model name>" */
        if (!strcmp(name, hs->b->names[j] + strlen("blocks/"))) return hs->b->data[j];
    return NULL;
}

/* opt's parameter whose masters are data (-1: none). */
static int opt_index(const optim *opt, const float *data) {
    for (int k = 0; data && k < optim_param_count(opt); k++)
        if (optim_get_param(opt, k)->data == data) return k;
    return -1;
}

/* The head's weights are parameters whatever their size (a one-output bias above blocks). */
static void set_names(head_step *hs, train_graph_options *o) {
    const head *h = hs->hg->h;
    int n = 0;
    for (int j = 0; j < h->n_layers; j++) {
        hs->head_names[n++] = h->layers[j].w_name;
        hs->head_names[n++] = h->layers[j].b_name;
    }
    o->param_names = hs->head_names;
    o->n_param_names = n;
}

/* Side input i of tg: a dropout mask of hg's (its index), or -1. */
static int mask_index(const head_step *hs, const char *name) {
    for (int j = 0; j < hs->hg->tg.n_side; j++)
        if (!strcmp(name, hs->hg->tg.g.values[hs->hg->tg.side[j]].name)) return j;
    return -1;
}

/* Blocks: the frozen piece a side input of tg (source name `name`) is, or -1. */
static int piece_index(const head_step *hs, const char *name) {
    for (int k = 1; k < hs->n_pieces; k++)
        if (!strcmp(name, hs->piece_name[k])) return k;
    return -1;
}

/* The side inputs: dropout masks, and for blocks the frozen pieces (`from` is piece 0). */
static graft_status find_sides(head_step *hs, graft_err *e) {
    const ir_graph *g = &hs->tg.g;
    int n = hs->tg.n_side;
    hs->i_mask = calloc((size_t)n + 1, sizeof(int));
    hs->mask_of = calloc((size_t)n + 1, sizeof(int));
    hs->i_piece = calloc((size_t)hs->n_pieces + 1, sizeof(int));
    if (!hs->i_mask || !hs->mask_of || !hs->i_piece) return oom(e);
    if (hs->b) hs->i_piece[0] = input_pos(g, hs->tg.from);
    for (int i = 0; i < n; i++) {
        const char *name = hs->src->values[hs->tg.model_side[i]].name;
        int j = mask_index(hs, name), k = j < 0 && hs->b ? piece_index(hs, name) : -1;
        if (j >= 0) {
            hs->i_mask[hs->n_masks] = input_pos(g, hs->tg.side[i]);
            hs->mask_of[hs->n_masks++] = j;
        } else if (k >= 0) {
            hs->i_piece[k] = input_pos(g, hs->tg.side[i]);
        } else {
            return err_set(e, GRAFT_E_INTERNAL, "step graph: an unknown input '%s'", name);
        }
    }
    return GRAFT_OK;
}

static graft_status find_inputs(head_step *hs, graft_err *e) {
    const ir_graph *g = &hs->tg.g;
    hs->i_all = input_named(g, "rows/all");
    hs->i_index = input_named(g, "rows/index");
    hs->i_targets = input_named(g, "loss/targets");
    hs->i_weights = input_named(g, "loss/weights");
    hs->i_grad_scale = input_named(g, "loss/grad_scale");
    hs->i_state = input_named(g, "loss/state");
    bool rows = hs->b || (hs->i_all >= 0 && hs->i_index >= 0);
    if (!rows || hs->i_targets < 0 || hs->i_state < 0)
        return err_set(e, GRAFT_E_INTERNAL, "step graph: an input went missing");
    return find_sides(hs, e);
}

/* A tensor over data with value v's dtype and shape. */
static tensor value_tensor(const ir_graph *g, int v, void *data) {
    const ir_value *x = &g->values[v];
    tensor t = {x->dtype, x->ndim, {0}, data};
    memcpy(t.dims, x->dims, sizeof t.dims);
    return t;
}

/* Parameter i of graph tg (source src) bound in inputs: og's weights buffer (device) or the
 * masters; *k its index in opt. */
static graft_status bind_weights(head_step *hs, const train_graph *tg, const ir_graph *src, int i,
                                 const optim *opt, train_exec *x, tensor *inputs, int *k,
                                 graft_err *e) {
    const char *name = src->values[tg->model_params[i]].name;
    int at = input_pos(&tg->g, tg->params[i]);
    *k = opt_index(opt, master_of(hs, name));
    if (*k < 0 || at < 0)
        return err_set(e, GRAFT_E_INTERNAL, "step graph: parameter '%s' is not the optimizer's",
                       name);
    void *w = optim_get_param(opt, *k)->data;
    if (hs->on_device) {
        w = optim_graph_device_buffer(hs->og, *k, OG_W);
        TRY(train_exec_input_on_device(x, at, true, e));
    }
    inputs[at] = value_tensor(&tg->g, tg->params[i], w);
    return GRAFT_OK;
}

/* The parameters, their sums and the state bound: og's buffers (device) or the masters, the
 * gradients and host_state (CPU). */
static graft_status bind_params(head_step *hs, const optim *opt, graft_err *e) {
    const ir_graph *g = &hs->tg.g;
    int n = hs->n_params = hs->tg.n_params;
    hs->i_param = calloc((size_t)n + 1, sizeof(int));
    hs->i_acc = calloc((size_t)n + 1, sizeof(int));
    if (!hs->i_param || !hs->i_acc) return oom(e);
    hs->host_grad = calloc((size_t)n + 1, sizeof(float *));
    if (!hs->host_grad) return oom(e);
    for (int i = 0; i < n; i++) {
        int v = hs->tg.params[i], k;
        TRY(bind_weights(hs, &hs->tg, hs->src, i, opt, &hs->run, hs->in, &k, e));
        hs->host_grad[i] = (float *)optim_get_param(opt, k)->grad;
        hs->i_param[i] = input_pos(g, v);
        if (!hs->on_device) continue; /* the run's gradients are added on the host */
        char acc[1100];
        snprintf(acc, sizeof acc, "acc/%.1000s", g->values[v].name);
        hs->i_acc[i] = input_named(g, acc);
        if (hs->i_acc[i] < 0) return err_set(e, GRAFT_E_INTERNAL, "step graph: no sum %d", i);
        void *gd = optim_graph_device_buffer(hs->og, k, OG_G);
        TRY(train_exec_input_on_device(&hs->run, hs->i_acc[i], true, e));
        TRY(train_exec_output_on_device(&hs->run, 1 + i, true, e));
        hs->in[hs->i_acc[i]] = value_tensor(g, v, gd);
    }
    int sv = g->inputs[hs->i_state];
    hs->in[hs->i_state] = value_tensor(g, sv, hs->on_device ? hs->og->dev[0] : &hs->host_state);
    if (hs->on_device) {
        TRY(train_exec_input_on_device(&hs->run, hs->i_state, true, e));
        TRY(train_exec_output_on_device(&hs->run, 0, true, e)); /* the logits: not needed */
    }
    return GRAFT_OK;
}

/* Evaluation: the forward reading the same weights (og's on a device). */
static graft_status init_eval(head_step *hs, const optim *opt, graft_model *m, int threads,
                              graft_err *e) {
    train_graph_options fo = {
        .forward_only = true, .scalar_params = hs->b == NULL, .round_to = round_to(hs->hg->h)};
    const char *from = hs->b ? hs->piece_name[0] : "features";
    const char *to = hs->src_eval->values[hs->src_eval->outputs[0]].name;
    set_names(hs, &fo);
    TRY(train_graph_build(hs->src_eval, from, to, &fo, &hs->fwd, e));
    if (hs->on_device)
        TRY(train_exec_init_device(&hs->eval, &hs->fwd.g, threads, m, e));
    else
        TRY(train_exec_init(&hs->eval, &hs->fwd.g, false, threads, e));
    hs->have_eval = true;
    const ir_graph *g = &hs->fwd.g;
    hs->eval_in = calloc((size_t)g->n_inputs + 1, sizeof *hs->eval_in);
    hs->eval_piece = calloc((size_t)hs->n_pieces + 1, sizeof(int));
    if (!hs->eval_in || !hs->eval_piece) return oom(e);
    for (int i = 0; i < hs->fwd.n_params; i++) {
        int k;
        TRY(bind_weights(hs, &hs->fwd, hs->src_eval, i, opt, &hs->eval, hs->eval_in, &k, e));
    }
    if (hs->b) {
        hs->eval_piece[0] = input_pos(g, hs->fwd.from);
        for (int i = 0; i < hs->fwd.n_side; i++) {
            int k = piece_index(hs, hs->src_eval->values[hs->fwd.model_side[i]].name);
            if (k < 0) return err_set(e, GRAFT_E_INTERNAL, "step graph: an unknown input");
            hs->eval_piece[k] = input_pos(g, hs->fwd.side[i]);
        }
    }
    /* a head's products read their weights afresh; blocks' Conv keeps reordered weights, which
     * an update of a few elements could leave stale: dropped before each run */
    if (!hs->b) train_exec_keep_kernel_state(&hs->eval);
    return GRAFT_OK;
}

/* A head alone on a device replays its step as one CUDA-graph recording per batch size
 * (exec_graph.c): the features, weights, sums and state it reads stay where they are, read in
 * place; the rows' index, targets and masks are copied in before each replay. Blocks run node
 * by node; GRAFT_STEP_RECORD=0 makes a head do so too (for comparisons). */
static bool step_recorded(const head_step *hs) {
    const char *env = getenv("GRAFT_STEP_RECORD");
    return hs->on_device && !hs->b && !(env && !strcmp(env, "0"));
}

/* The step graph from the source graph: gradient sums, a head alone's Gather, the loss; its
 * executor and bindings; the evaluation graph. */
static graft_status init(head_step *hs, const optim *opt, const loss_spec *l, int64_t accumulate,
                         bool fp16, graft_model *m, int threads, graft_err *e) {
    train_graph_options o = {.scalar_params = hs->b == NULL, .round_to = round_to(hs->hg->h)};
    const char *from = hs->b ? hs->piece_name[0] : "features";
    set_names(hs, &o);
    TRY(train_graph_build(hs->src, from, hs->src->values[hs->src->outputs[0]].name, &o, &hs->tg,
                          e));
    /* a device adds the gradients where the optimizer keeps them; the host adds them itself */
    if (hs->on_device) TRY(train_graph_accumulate_grads(&hs->tg, e));
    if (!hs->b) TRY(add_gather(hs, e));
    TRY(add_loss(hs, l, accumulate, fp16, e));
    if (hs->on_device)
        TRY(train_exec_init_device(&hs->run, &hs->tg.g, threads, m, e));
    else
        TRY(train_exec_init(&hs->run, &hs->tg.g, false, threads, e));
    if (train_exec_on_device(&hs->run) != hs->on_device)
        return err_set(e, GRAFT_E_INTERNAL, "step graph: not where the optimizer is");
    /* a head's products read their weights afresh; blocks' Conv keeps reordered weights */
    if (!hs->b) train_exec_keep_kernel_state(&hs->run);
    if (step_recorded(hs)) exec_enable_graphs(&hs->run.x);
    hs->in = calloc((size_t)hs->tg.g.n_inputs + 1, sizeof *hs->in);
    if (!hs->in) return oom(e);
    TRY(find_inputs(hs, e));
    TRY(bind_params(hs, opt, e));
    return hs->b || hs->on_device ? init_eval(hs, opt, m, threads, e) : GRAFT_OK;
}

static void start(head_step *hs, head_graph *hg, optim_graph *og, const loss_spec *l) {
    memset(hs, 0, sizeof *hs);
    hs->hg = hg, hs->og = og;
    hs->on_device = og->on_device;
    hs->ce = l->kind == LOSS_SOFTMAX_CE;
    hs->in_width = hg->h->layers[0].in;
    hs->outputs = hg->outputs;
    hs->host_state.scale = 1.0f;
}

graft_status head_step_init(head_step *hs, head_graph *hg, optim_graph *og, const optim *opt,
                            const loss_spec *l, int64_t accumulate, bool fp16, graft_model *m,
                            int threads, graft_err *e) {
    start(hs, hg, og, l);
    hs->src = &hg->g, hs->src_eval = &hg->g_eval;
    graft_status st = init(hs, opt, l, accumulate, fp16, m, threads, e);
    if (st != GRAFT_OK) head_step_free(hs);
    hs->ready = st == GRAFT_OK;
    return st;
}

/* Blocks: each frozen piece's name in the model (`from`, then the blocks' side inputs). */
static graft_status piece_names(head_step *hs, graft_model *m, const char *from, graft_err *e) {
    const blocks *b = hs->b;
    hs->n_pieces = b->frozen.n_pieces;
    if (hs->n_pieces != 1 + b->tg.n_side)
        return err_set(e, GRAFT_E_INTERNAL, "step graph: %d frozen pieces for %d side inputs",
                       hs->n_pieces, b->tg.n_side);
    hs->piece_name = calloc((size_t)hs->n_pieces + 1, sizeof(char *));
    if (!hs->piece_name) return oom(e);
    for (int k = 0; k < hs->n_pieces; k++) {
        const char *name = k ? m->g.values[b->tg.model_side[k - 1]].name : from;
        if (!(hs->piece_name[k] = ir_strdup(name))) return oom(e);
    }
    return GRAFT_OK;
}

graft_status head_step_init_blocks(head_step *hs, head_graph *hg, blocks *b, const char *from,
                                   optim_graph *og, const optim *opt, const loss_spec *l,
                                   int64_t accumulate, bool fp16, graft_model *m, int threads,
                                   graft_err *e) {
    start(hs, hg, og, l);
    hs->b = b;
    int logits;
    graft_status st = piece_names(hs, m, from, e);
    if (st == GRAFT_OK)
        st = head_step_blocks_graph(hs, m, from, hg->h->dropout > 0.0f, &hs->base, &logits, e);
    if (st == GRAFT_OK) st = head_step_blocks_graph(hs, m, from, false, &hs->base_eval, &logits, e);
    hs->src = &hs->base, hs->src_eval = &hs->base_eval;
    if (st == GRAFT_OK) st = init(hs, opt, l, accumulate, fp16, m, threads, e);
    if (st != GRAFT_OK) head_step_free(hs);
    hs->ready = st == GRAFT_OK;
    return st;
}

static void drop_data(head_step *hs) {
    if (hs->dev_features) train_exec_device_free(&hs->run, hs->dev_features);
    if (hs->staged) train_exec_host_free(&hs->run, hs->staged);
    free(hs->index);
    hs->dev_features = NULL, hs->staged = NULL, hs->index = NULL;
    hs->rows = 0;
}

void head_step_free(head_step *hs) {
    if (!hs) return;
    drop_data(hs);
    train_exec_free(&hs->run);
    train_exec_free(&hs->eval);
    train_graph_free(&hs->tg);
    train_graph_free(&hs->fwd);
    free(hs->in), free(hs->eval_in), free(hs->i_param), free(hs->i_acc), free(hs->i_mask);
    free(hs->host_grad);
    free(hs->mask_of), free(hs->i_piece), free(hs->eval_piece);
    for (int k = 0; hs->piece_name && k < hs->n_pieces; k++) free(hs->piece_name[k]);
    free(hs->piece_name);
    ir_graph_free(&hs->base);
    ir_graph_free(&hs->base_eval);
    memset(hs, 0, sizeof *hs);
}

graft_status head_step_set_data(head_step *hs, const float *x, int64_t n, bool force_host,
                                graft_err *e) {
    if (hs->b) return err_set(e, GRAFT_E_INTERNAL, "step graph: blocks take rows per step");
    drop_data(hs);
    hs->features = x;
    hs->n_all = n;
    hs->place = HEAD_STEP_FEATURES_HOST;
    if (!hs->on_device) return train_exec_input_on_device(&hs->run, hs->i_all, false, e);
    size_t bytes = sizeof(float) * (size_t)n * (size_t)hs->in_width;
    graft_status st = force_host ? GRAFT_E_OUT_OF_MEMORY
                                 : train_exec_device_alloc(&hs->run, bytes, &hs->dev_features, e);
    if (st == GRAFT_OK) st = train_exec_upload(&hs->run, hs->dev_features, x, bytes, e);
    if (st == GRAFT_OK) {
        hs->feature_h2d_bytes += (int64_t)bytes;
        hs->place = HEAD_STEP_FEATURES_DEVICE;
        return train_exec_input_on_device(&hs->run, hs->i_all, true, e);
    }
    if (st != GRAFT_E_OUT_OF_MEMORY) return st;
    err_clear(e); /* no room: each batch's rows are gathered on the host and copied */
    if (hs->dev_features) train_exec_device_free(&hs->run, hs->dev_features);
    hs->dev_features = NULL;
    hs->place = HEAD_STEP_FEATURES_STAGED;
    return train_exec_input_on_device(&hs->run, hs->i_all, false, e);
}

/* hs->index holding 0..m-1 (and, staged, room for m rows). */
static graft_status ensure_rows(head_step *hs, int64_t m, bool staged, graft_err *e) {
    if (m > hs->rows) {
        free(hs->index);
        hs->index = malloc(sizeof(int64_t) * (size_t)m);
        if (!hs->index) return oom(e);
        for (int64_t i = 0; i < m; i++) hs->index[i] = i;
        if (hs->staged) train_exec_host_free(&hs->run, hs->staged);
        hs->staged = NULL;
        hs->rows = m;
    }
    if (staged && !hs->staged) {
        hs->staged =
            train_exec_host_alloc(&hs->run, sizeof(float) * (size_t)(hs->rows * hs->in_width));
        if (!hs->staged) return oom(e);
    }
    return GRAFT_OK;
}

/* The batch's index (and, staged, its rows) for m rows. */
static graft_status bind_rows(head_step *hs, const int64_t *rows, int64_t m, graft_err *e) {
    const ir_graph *g = &hs->tg.g;
    int64_t w = hs->in_width;
    tensor *all = &hs->in[hs->i_all], *index = &hs->in[hs->i_index];
    *index = (tensor){GRAFT_DTYPE_I64, 1, {m}, (void *)rows};
    if (hs->place != HEAD_STEP_FEATURES_STAGED) {
        if (!hs->features) return err_set(e, GRAFT_E_INTERNAL, "head step: no training set");
        *all = value_tensor(g, g->inputs[hs->i_all],
                            hs->dev_features ? hs->dev_features : (void *)hs->features);
        all->dims[0] = hs->n_all;
        return GRAFT_OK;
    }
    TRY(ensure_rows(hs, m, true, e));
    for (int64_t i = 0; i < m; i++)
        memcpy(hs->staged + i * w, hs->features + rows[i] * w, sizeof(float) * (size_t)w);
    hs->feature_h2d_bytes += (int64_t)sizeof(float) * m * w;
    *all = (tensor){GRAFT_DTYPE_F32, 2, {m, w}, hs->staged};
    index->data = hs->index;
    return GRAFT_OK;
}

/* The dropout masks of this micro-batch, drawn as head_graph draws them. */
static graft_status bind_masks(head_step *hs, int64_t m, graft_err *e) {
    if (hs->n_masks == 0) return GRAFT_OK;
    TRY(head_graph_draw_masks(hs->hg, m, e));
    for (int i = 0; i < hs->n_masks; i++) {
        int j = hs->mask_of[i];
        int64_t width = hs->hg->h->layers[hs->hg->mask_layer[j]].out;
        hs->in[hs->i_mask[i]] = (tensor){GRAFT_DTYPE_F32, 2, {m, width}, hs->hg->masks[j]};
    }
    return GRAFT_OK;
}

/* The run's gradients added to the optimizer's (host), or its sums copied over them (device). */
static graft_status sums_back(head_step *hs, graft_err *e) {
    graft_backend *d = &hs->run.device;
    for (int i = 0; i < hs->n_params; i++) {
        const tensor *sum = train_exec_output(&hs->run, 1 + i);
        const tensor *w = &hs->in[hs->i_param[i]];
        int64_t count = tensor_numel(w);
        if (sum->dtype != GRAFT_DTYPE_F32 || tensor_numel(sum) != count)
            return err_set(e, GRAFT_E_INTERNAL, "step graph: gradient %d has the wrong size", i);
        if (!hs->on_device) {
            const float *src = sum->data;
            float *dst = hs->host_grad[i];
#pragma omp parallel for if (count >= ((int64_t)1 << 16)) schedule(static)
            for (int64_t k = 0; k < count; k++) dst[k] += src[k];
            continue;
        }
        tensor *acc = &hs->in[hs->i_acc[i]];
        size_t bytes = (size_t)tensor_nbytes(acc);
        if (train_exec_output_is_on_device(&hs->run, 1 + i))
            TRY(d->copy_on_device(d->impl, acc->data, sum->data, bytes, e));
        else
            TRY(d->copy_to_device(d->impl, acc->data, sum->data, bytes, e));
    }
    return hs->on_device ? d->synchronize(d->impl, e) : GRAFT_OK;
}

/* The run over the rows bound: masks, targets y (m), weights, then the sums back. */
static graft_status run_batch(head_step *hs, const void *y, int64_t m, const loss_spec *l,
                              float loss_scale, graft_err *e) {
    TRY(bind_masks(hs, m, e));
    hs->in[hs->i_targets] = hs->ce ? (tensor){GRAFT_DTYPE_I64, 1, {m}, (void *)y}
                                   : (tensor){GRAFT_DTYPE_F32, 2, {m, hs->outputs}, (void *)y};
    if (hs->i_weights >= 0) {
        const float *w = hs->ce ? l->class_weight : l->pos_weight;
        if (!w) return err_set(e, GRAFT_E_INTERNAL, "head step: the loss's weights went missing");
        hs->in[hs->i_weights] = (tensor){GRAFT_DTYPE_F32, 1, {hs->outputs}, (void *)w};
    }
    if (hs->i_grad_scale >= 0) {
        hs->grad_scale = l->grad_scale != 0.0 ? (float)l->grad_scale : 1.0f;
        hs->in[hs->i_grad_scale] = (tensor){GRAFT_DTYPE_F32, 1, {1}, &hs->grad_scale};
    }
    hs->host_state.scale = loss_scale;
    double t0 = clock_seconds();
    TRY(train_exec_run(&hs->run, hs->in, e));
    double t1 = clock_seconds();
    graft_status st = sums_back(hs, e);
    hs->runs++, hs->run_seconds += t1 - t0, hs->sums_seconds += clock_seconds() - t1;
    return st;
}

graft_status head_step_run(head_step *hs, const int64_t *rows, const void *y, int64_t m,
                           const loss_spec *l, float loss_scale, graft_err *e) {
    if (!hs->ready || m < 1) return err_set(e, GRAFT_E_INTERNAL, "head step: not set up");
    TRY(bind_rows(hs, rows, m, e));
    return run_batch(hs, y, m, l, loss_scale, e);
}

/* Blocks: the batch's frozen pieces out of rows (m, frozen row) into the inputs at[k]. */
static graft_status bind_pieces(head_step *hs, const float *rows, int64_t m, const int *at,
                                tensor *inputs, graft_err *e) {
    TRY(blocks_unpack_rows(hs->b, rows, m, e));
    for (int k = 0; k < hs->n_pieces; k++) {
        if (at[k] < 0) return err_set(e, GRAFT_E_INTERNAL, "step graph: piece %d is not read", k);
        inputs[at[k]] = hs->b->inputs[k];
    }
    return GRAFT_OK;
}

graft_status head_step_run_rows(head_step *hs, const float *x, const void *y, int64_t m,
                                const loss_spec *l, float loss_scale, graft_err *e) {
    if (!hs->ready || m < 1) return err_set(e, GRAFT_E_INTERNAL, "head step: not set up");
    if (hs->b) {
        TRY(bind_pieces(hs, x, m, hs->i_piece, hs->in, e));
        TRY(run_batch(hs, y, m, l, loss_scale, e));
        hs->b->steps++; /* the blocks' counters (tests) */
        return GRAFT_OK;
    }
    TRY(ensure_rows(hs, m, false, e));
    hs->in[hs->i_all] = (tensor){GRAFT_DTYPE_F32, 2, {m, hs->in_width}, (void *)x};
    hs->in[hs->i_index] = (tensor){GRAFT_DTYPE_I64, 1, {m}, hs->index};
    bool resident = hs->place == HEAD_STEP_FEATURES_DEVICE;
    if (resident) TRY(train_exec_input_on_device(&hs->run, hs->i_all, false, e));
    graft_status st = run_batch(hs, y, m, l, loss_scale, e);
    if (resident) TRY(train_exec_input_on_device(&hs->run, hs->i_all, true, e));
    return st;
}

graft_status head_step_state(head_step *hs, train_state *out, graft_err *e) {
    if (!hs->on_device) {
        *out = hs->host_state;
        return GRAFT_OK;
    }
    return train_exec_download(&hs->run, out, hs->og->dev[0], sizeof *out, e);
}

graft_status head_step_reset_sums(head_step *hs, graft_err *e) {
    train_state s;
    TRY(head_step_state(hs, &s, e));
    s.epoch_loss = 0.0, s.epoch_correct = 0;
    if (!hs->on_device) {
        hs->host_state = s;
        return GRAFT_OK;
    }
    return train_exec_upload(&hs->run, hs->og->dev[0], &s, sizeof s, e);
}

graft_status head_step_logits(head_step *hs, const float *x, int64_t n, const float **logits,
                              graft_err *e) {
    if (!hs->have_eval) return head_graph_logits(hs->hg, x, n, logits, e);
    const ir_graph *g = &hs->fwd.g;
    if (hs->b) {
        TRY(bind_pieces(hs, x, n, hs->eval_piece, hs->eval_in, e));
        hs->b->evals++;
    } else {
        int at = input_pos(g, hs->fwd.from);
        hs->eval_in[at] = (tensor){GRAFT_DTYPE_F32, 2, {n, hs->in_width}, (void *)x};
    }
    TRY(train_exec_run(&hs->eval, hs->eval_in, e));
    const tensor *out = train_exec_output(&hs->eval, 0);
    if (out->dtype != GRAFT_DTYPE_F32 || tensor_numel(out) != n * hs->outputs)
        return err_set(e, GRAFT_E_INTERNAL, "the head's graph gave logits of another shape");
    *logits = out->data;
    return GRAFT_OK;
}

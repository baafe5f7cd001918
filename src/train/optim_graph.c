/* optim_graph.c: the optimizer step as one OptimizerStep node run by graph/exec (optim_graph.h). */
#include "optim_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/build.h"
#include "../ops/optimizer_step.h"

static graft_status oom(graft_err *e) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory setting up the optimizer's graph");
}

/* A graph input `name` of dtype and 1-D size n. */
static graft_status add_input(ir_graph *g, const char *name, graft_dtype dtype, int64_t n, int *out,
                              graft_err *e) {
    return graph_add_input(g, name, dtype, 1, &n, out, e);
}

/* The node's inputs: state, hyper, then w, g and the used slots of each parameter. */
static graft_status add_inputs(ir_graph *g, const optim *opt, int *ins, graft_err *e) {
    bool used[OPTIM_SLOTS];
    optim_state_slots(optim_get_config(opt), used);
    TRY(add_input(g, "state", GRAFT_DTYPE_U8, (int64_t)sizeof(train_state), &ins[0], e));
    TRY(add_input(g, "hyper", GRAFT_DTYPE_F32, 2, &ins[1], e));
    for (int i = 0; i < optim_param_count(opt); i++) {
        int64_t n = optim_get_param(opt, i)->numel;
        int *p = ins + OPTIMIZER_STEP_FIRST + i * OPTIMIZER_STEP_SLOTS;
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        TRY(add_input(g, name, GRAFT_DTYPE_F32, n, &p[0], e));
        snprintf(name, sizeof name, "g%d", i);
        TRY(add_input(g, name, GRAFT_DTYPE_F32, n, &p[1], e));
        for (int k = 0; k < OPTIM_SLOTS; k++) {
            p[2 + k] = -1;
            if (!used[k]) continue;
            snprintf(name, sizeof name, "s%d_%d", i, k);
            TRY(add_input(g, name, GRAFT_DTYPE_F32, n, &p[2 + k], e));
        }
    }
    return GRAFT_OK;
}

/* Attribute slot a: an int, a float, or a list. */
static graft_status set_attr(ir_attr *a, const char *name, ir_attr_type type, double v,
                             graft_err *e) {
    memset(a, 0, sizeof *a);
    a->name = ir_strdup(name);
    a->type = type;
    if (type == IR_ATTR_INT) a->i = (int64_t)v;
    if (type == IR_ATTR_FLOAT) a->f = (float)v;
    return a->name ? GRAFT_OK : oom(e);
}

static graft_status set_attrs(ir_node *n, const optim *opt, bool fp16, float max_norm,
                              graft_err *e) {
    const optim_config *c = optim_get_config(opt);
    int np = optim_param_count(opt);
    ir_attr *a = calloc(11, sizeof *a);
    if (!a) return oom(e);
    for (int i = 0; i < n->n_attrs; i++) ir_attr_free(&n->attrs[i]);
    free(n->attrs);
    n->attrs = a;
    n->n_attrs = 11;
    TRY(set_attr(&a[0], "kind", IR_ATTR_INT, c->kind, e));
    TRY(set_attr(&a[1], "weight_decay", IR_ATTR_FLOAT, c->weight_decay, e));
    TRY(set_attr(&a[2], "dampening", IR_ATTR_FLOAT, c->dampening, e));
    TRY(set_attr(&a[3], "nesterov", IR_ATTR_INT, c->nesterov, e));
    TRY(set_attr(&a[4], "beta2", IR_ATTR_FLOAT, c->beta2, e));
    TRY(set_attr(&a[5], "eps", IR_ATTR_FLOAT, c->eps, e));
    TRY(set_attr(&a[6], "amsgrad", IR_ATTR_INT, c->amsgrad, e));
    TRY(set_attr(&a[7], "fp16", IR_ATTR_INT, fp16, e));
    TRY(set_attr(&a[8], "max_norm", IR_ATTR_FLOAT, max_norm, e));
    TRY(set_attr(&a[9], "decay", IR_ATTR_INTS, 0, e));
    a[9].ints = malloc(sizeof(int64_t) * (size_t)(np + 1));
    if (!a[9].ints) return oom(e);
    a[9].n = np;
    TRY(set_attr(&a[10], "lr_scale", IR_ATTR_TENSOR, 0, e));
    a[10].t = (tensor){GRAFT_DTYPE_F64, 1, {np}, NULL};
    TRY(tensor_alloc(&a[10].t, e));
    double *scales = a[10].t.data;
    for (int i = 0; i < np; i++) {
        const optim_param *p = optim_get_param(opt, i);
        a[9].ints[i] = p->decay;
        scales[i] = p->lr_scale;
    }
    return GRAFT_OK;
}

static graft_status build(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                          graft_err *e) {
    ir_graph *g = &og->g;
    ir_graph_init(g);
    g->opsets = calloc(1, sizeof *g->opsets);
    if (!g->opsets || !(g->opsets[0].domain = ir_strdup(""))) return oom(e);
    g->opsets[0].version = 17;
    g->n_opsets = 1;
    g->ir_version = 8;
    int n_in = OPTIMIZER_STEP_FIRST + og->n_params * OPTIMIZER_STEP_SLOTS, out;
    int *ins = malloc(sizeof(int) * (size_t)n_in);
    if (!ins) return oom(e);
    graft_status st = add_inputs(g, opt, ins, e);
    if (st == GRAFT_OK)
        st = graph_add_node(g, "OptimizerStep", 1, ins, n_in, "step_result", NULL, 0, &out, e);
    free(ins);
    TRY(st);
    TRY(set_attrs(&g->nodes[g->n_nodes - 1], opt, fp16, max_norm, e));
    g->outputs = malloc(sizeof(int));
    if (!g->outputs) return oom(e);
    g->outputs[g->n_outputs++] = out;
    g->values[out].is_graph_output = true;
    ir_link_producers(g);
    return graph_infer_shapes(g, e);
}

/* The inputs bound: the state and hyper here, the parameters' buffers of opt. */
static graft_status bind(optim_graph *og, const optim *opt, graft_err *e) {
    og->inputs = calloc((size_t)og->g.n_inputs + 1, sizeof *og->inputs);
    if (!og->inputs) return oom(e);
    tensor *in = og->inputs;
    int k = 0;
    in[k++] = (tensor){GRAFT_DTYPE_U8, 1, {(int64_t)sizeof og->state}, &og->state};
    in[k++] = (tensor){GRAFT_DTYPE_F32, 1, {2}, og->hyper};
    og->first_input = malloc(sizeof(int) * ((size_t)og->n_params + 1));
    if (!og->first_input) return oom(e);
    for (int i = 0; i < og->n_params; i++) {
        optim_tensor p;
        optim_param_tensor(opt, i, &p);
        og->first_input[i] = k;
        in[k++] = (tensor){GRAFT_DTYPE_F32, 1, {p.numel}, p.w};
        in[k++] = (tensor){GRAFT_DTYPE_F32, 1, {p.numel}, (void *)p.g};
        for (int s = 0; s < OPTIM_SLOTS; s++)
            if (p.s[s]) in[k++] = (tensor){GRAFT_DTYPE_F32, 1, {p.numel}, p.s[s]};
    }
    if (k != og->g.n_inputs)
        return err_set(e, GRAFT_E_INTERNAL, "the optimizer's graph has %d inputs, %d bound",
                       og->g.n_inputs, k);
    return GRAFT_OK;
}

/* Device buffers for every input but hyper, bound in place of the host ones. */
static graft_status bind_device(optim_graph *og, graft_err *e) {
    og->dev = calloc((size_t)og->g.n_inputs + 1, sizeof *og->dev);
    if (!og->dev) return oom(e);
    for (int i = 0; i < og->g.n_inputs; i++) {
        if (i == 1) continue; /* hyper: read on the host */
        tensor *t = &og->inputs[i];
        TRY(train_exec_device_alloc(&og->run, (size_t)tensor_nbytes(t), &og->dev[i], e));
        t->data = og->dev[i];
        TRY(train_exec_input_on_device(&og->run, i, true, e));
    }
    return GRAFT_OK;
}

static graft_status init(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                         const char *device, graft_model *m, int threads, graft_err *e) {
    memset(og, 0, sizeof *og);
    og->n_params = optim_param_count(opt);
    graft_status st = build(og, opt, fp16, max_norm, e);
    if (st == GRAFT_OK) st = bind(og, opt, e);
    if (st == GRAFT_OK)
        st = m ? train_exec_init_device(&og->run, &og->g, threads, m, e)
               : train_exec_init_named(&og->run, &og->g, device, threads, e);
    if (st == GRAFT_OK) train_exec_keep_kernel_state(&og->run);
    og->on_device = st == GRAFT_OK && train_exec_on_device(&og->run);
    if (st == GRAFT_OK && og->on_device) st = bind_device(og, e);
    if (st != GRAFT_OK) optim_graph_free(og);
    og->ready = st == GRAFT_OK;
    return st;
}

graft_status optim_graph_init_on(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                                 const char *device, int threads, graft_err *e) {
    return init(og, opt, fp16, max_norm, device, NULL, threads, e);
}

graft_status optim_graph_init_model(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                                    graft_model *m, int threads, graft_err *e) {
    return init(og, opt, fp16, max_norm, NULL, m, threads, e);
}

graft_status optim_graph_init(optim_graph *og, const optim *opt, bool fp16, float max_norm,
                              int threads, graft_err *e) {
    return init(og, opt, fp16, max_norm, NULL, NULL, threads, e);
}

void optim_graph_free(optim_graph *og) {
    if (!og) return;
    for (int i = 0; og->dev && i < og->g.n_inputs; i++)
        train_exec_device_free(&og->run, og->dev[i]);
    free(og->dev);
    free(og->first_input);
    train_exec_free(&og->run);
    ir_graph_free(&og->g);
    free(og->inputs);
    memset(og, 0, sizeof *og);
}

/* og->state from opt's step count and the scaler. */
static void state_from(optim_graph *og, const optim *opt, const loss_scaler *scaler) {
    train_state *s = &og->state;
    memset(s, 0, sizeof *s);
    s->opt_steps = optim_step_count(opt);
    loss_scaler d = loss_scaler_default();
    if (!scaler) scaler = &d;
    s->scale = scaler->scale;
    s->growth_factor = scaler->growth_factor;
    s->backoff_factor = scaler->backoff_factor;
    s->growth_interval = scaler->growth_interval;
    s->growth_tracker = scaler->growth_tracker;
}

/* Host buffer and device buffer of input i (copied in the direction asked). */
static graft_status copy_input(optim_graph *og, int i, void *host, bool up, graft_err *e) {
    size_t bytes = (size_t)tensor_nbytes(&og->inputs[i]);
    return up ? train_exec_upload(&og->run, og->dev[i], host, bytes, e)
              : train_exec_download(&og->run, host, og->dev[i], bytes, e);
}

/* Parameters [lo, hi)'s inputs moved: their weights, gradients and state slots as `what` says
 * (OG_W | OG_G | OG_S). */
static graft_status copy_params(optim_graph *og, const optim *opt, bool up, int what, int lo,
                                int hi, graft_err *e) {
    if (!og->on_device) return err_set(e, GRAFT_E_INTERNAL, "the optimizer runs on the host");
    int k = OPTIMIZER_STEP_FIRST;
    for (int i = 0; i < hi; i++) {
        optim_tensor p;
        optim_param_tensor(opt, i, &p);
        bool in = i >= lo;
        if (in && (what & OG_W)) TRY(copy_input(og, k, p.w, up, e));
        if (in && (what & OG_G)) TRY(copy_input(og, k + 1, (void *)p.g, up, e));
        k += 2;
        for (int s = 0; s < OPTIM_SLOTS; s++) {
            if (!p.s[s]) continue;
            if (in && (what & OG_S)) TRY(copy_input(og, k, p.s[s], up, e));
            k++;
        }
    }
    return GRAFT_OK;
}

graft_status optim_graph_upload(optim_graph *og, const optim *opt, const loss_scaler *scaler,
                                graft_err *e) {
    state_from(og, opt, scaler);
    TRY(copy_params(og, opt, true, OG_W | OG_G | OG_S, 0, og->n_params, e));
    return copy_input(og, 0, &og->state, true, e);
}

graft_status optim_graph_move(optim_graph *og, const optim *opt, bool up, int what, int lo, int hi,
                              graft_err *e) {
    TRY(copy_params(og, opt, up, what, lo, hi, e));
    return (what & OG_STATE) ? copy_input(og, 0, &og->state, up, e) : GRAFT_OK;
}

void *optim_graph_device_buffer(const optim_graph *og, int param, int what) {
    if (!og->on_device || param < 0 || param >= og->n_params) return NULL;
    int k = og->first_input[param] + (what == OG_G ? 1 : 0);
    return what == OG_W || what == OG_G ? og->dev[k] : NULL;
}

graft_status optim_graph_upload_grads(optim_graph *og, const optim *opt, graft_err *e) {
    return copy_params(og, opt, true, OG_G, 0, og->n_params, e);
}

void optim_graph_state_to(const optim_graph *og, optim *opt, loss_scaler *scaler) {
    optim_set_step_count(opt, og->state.opt_steps);
    if (scaler) {
        scaler->scale = og->state.scale;
        scaler->growth_tracker = og->state.growth_tracker;
    }
}

graft_status optim_graph_download(optim_graph *og, optim *opt, loss_scaler *scaler,
                                  int64_t *skipped, graft_err *e) {
    TRY(optim_graph_move(og, opt, false, OG_W | OG_S | OG_STATE, 0, og->n_params, e));
    optim_graph_state_to(og, opt, scaler);
    if (skipped) *skipped = og->state.skipped;
    return GRAFT_OK;
}

graft_status optim_graph_step(optim_graph *og, optim *opt, float lr, loss_scaler *scaler,
                              bool *skipped, float *total_norm, graft_err *e) {
    const optim_config *c = optim_get_config(opt);
    if (!og->on_device) state_from(og, opt, scaler);
    og->hyper[0] = lr;
    og->hyper[1] = c->kind == OPTIM_SGD ? c->momentum : c->beta1;
    TRY(train_exec_run(&og->run, og->inputs, e));
    const tensor *r = train_exec_output(&og->run, 0);
    const float *res = r->data;
    *skipped = res[0] != 0.0f;
    *total_norm = res[1];
    if (!og->on_device) optim_graph_state_to(og, opt, scaler); /* else it stays on the device */
    return GRAFT_OK;
}

/* blocks.c: fine-tuning the last blocks with the head (blocks.h): the training graph run with the
 * head's step in the pause between its forward and backward nodes, parameters as fp32 masters
 * the optimizer updates, and the trained weights written back into the model. */
#include "blocks.h"

#include "optim_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../core/clock.h"

static graft_status oom(graft_err *e) {
    return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory setting up the trainable blocks");
}

/* Every parameter's master copy (from the model's constant) and gradient buffer. */
static graft_status alloc_params(blocks *b, const graft_model *m, graft_err *e) {
    int n = b->tg.n_params;
    b->data = calloc((size_t)n + 1, sizeof *b->data);
    b->grad = calloc((size_t)n + 1, sizeof *b->grad);
    b->numel = calloc((size_t)n + 1, sizeof *b->numel);
    b->names = calloc((size_t)n + 1, sizeof *b->names);
    if (!b->data || !b->grad || !b->numel || !b->names) return oom(e);
    b->n_params = n;
    for (int i = 0; i < n; i++) {
        const ir_value *v = &m->g.values[b->tg.model_params[i]];
        if (v->data.dtype != GRAFT_DTYPE_F32)
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "the trainable blocks hold '%s' as %s; fine-tuning needs float32 "
                           "weights (load the model in fp32)",
                           v->name, graft_dtype_name(v->data.dtype));
        int64_t k = tensor_numel(&v->data);
        b->numel[i] = k;
        b->data[i] = train_exec_host_alloc(&b->run, sizeof(float) * (size_t)k); /* uploaded */
        b->grad[i] = calloc((size_t)k, sizeof(float));
        size_t len = strlen(v->name) + 8;
        b->names[i] = malloc(len);
        if (!b->data[i] || !b->grad[i] || !b->names[i]) return oom(e);
        memcpy(b->data[i], v->data.data, sizeof(float) * (size_t)k);
        snprintf(b->names[i], len, "blocks/%s", v->name);
    }
    return GRAFT_OK;
}

/* The graph inputs that do not change from batch to batch: the parameters. */
static graft_status bind_params(blocks *b, graft_err *e) {
    const ir_graph *g = &b->tg.g;
    b->inputs = calloc((size_t)g->n_inputs + 1, sizeof *b->inputs);
    b->pieces = calloc((size_t)b->frozen.n_pieces + 1, sizeof *b->pieces);
    if (!b->inputs || !b->pieces) return oom(e);
    for (int i = 0; i < b->n_params; i++) {
        const ir_value *v = &g->values[b->tg.params[i]];
        tensor *t = &b->inputs[1 + b->tg.n_side + i];
        t->dtype = GRAFT_DTYPE_F32;
        t->ndim = v->ndim;
        memcpy(t->dims, v->dims, sizeof(int64_t) * (size_t)v->ndim);
        t->data = b->data[i];
        if (tensor_numel(t) != b->numel[i])
            return err_set(e, GRAFT_E_INTERNAL, "blocks: parameter '%s' changed size", v->name);
    }
    return GRAFT_OK;
}

static graft_status check_features(blocks *b, const graft_model *m, graft_err *e) {
    const ir_value *to = &m->g.values[m->g.outputs[0]];
    if (to->ndim != 2 || to->dims[1] <= 0 || to->dtype != GRAFT_DTYPE_F32)
        return err_set(e, GRAFT_E_SHAPE,
                       "fine-tuning blocks: the features '%s' must be float32 (batch, features) "
                       "with a known size",
                       to->name);
    b->feat = to->dims[1];
    return GRAFT_OK;
}

/* The precision the blocks emulate (train_graph_options.round_to): the trainer's bf16/fp16 on
 * the CPU; on a device they run fp32 until its kernels run the half types. */
static graft_dtype emulated(const graft_model *m, graft_precision p) {
    if (m->have_device || p == GRAFT_PRECISION_FP32) return GRAFT_DTYPE_UNDEFINED;
    return p == GRAFT_PRECISION_BF16 ? GRAFT_DTYPE_BF16 : GRAFT_DTYPE_F16;
}

static graft_status init_parts(blocks *b, graft_model *m, const char *from, graft_precision p,
                               int threads, graft_err *e) {
    const ir_graph *g = &m->g;
    if (g->n_outputs != 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "fine-tuning blocks needs a cut model");
    TRY(check_features(b, m, e));
    b->fixed = m->batch.fixed; /* the training graph then runs in chunks (blocks_chunked.c) */
    const char *to = g->values[g->outputs[0]].name;
    train_graph_options to_opts = {.round_to = emulated(m, p)};
    train_graph_options fo = {.forward_only = true, .round_to = to_opts.round_to};
    TRY(train_graph_build(g, from, to, &to_opts, &b->tg, e));
    TRY(train_graph_build(g, from, to, &fo, &b->fwd, e));
    if (b->tg.n_params == 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "fine-tuning from '%s': the part after it has no weights to train", from);
    TRY(train_exec_init_device(&b->run, &b->tg.g, threads, m, e));
    TRY(train_exec_init_device(&b->eval, &b->fwd.g, threads, m, e));
    TRY(alloc_params(b, m, e));
    TRY(frozen_part_create(m, &b->tg, &b->frozen, e));
    return bind_params(b, e);
}

graft_status blocks_init(blocks *b, graft_model *m, const char *from, graft_precision precision,
                         int threads, graft_err *e) {
    memset(b, 0, sizeof *b);
    graft_status st = init_parts(b, m, from, precision, threads, e);
    if (st != GRAFT_OK) blocks_free(b);
    return st;
}

static void free_pieces(blocks *b) {
    for (int k = 0; b->pieces && k < b->frozen.n_pieces; k++) tensor_release(&b->pieces[k]);
    free(b->d_to);
    free(b->to_host);
    b->d_to = b->to_host = NULL;
    b->batch = 0;
}

void blocks_free(blocks *b) {
    if (!b) return;
    free_pieces(b);
    blocks_chunks_free(b);
    for (int i = 0; i < b->n_params; i++) {
        train_exec_host_free(&b->run, b->data[i]);
        free(b->grad[i]), free(b->names[i]);
    }
    train_exec_free(&b->run);
    train_exec_free(&b->eval);
    free(b->data), free(b->grad), free(b->numel), free(b->names);
    free(b->inputs), free(b->pieces);
    frozen_part_free(&b->frozen);
    train_graph_free(&b->tg);
    train_graph_free(&b->fwd);
    memset(b, 0, sizeof *b);
}

int blocks_params(blocks *b, optim_param *params) {
    for (int i = 0; i < b->n_params; i++) {
        const ir_value *v = &b->tg.g.values[b->tg.params[i]];
        params[i] = (optim_param){b->data[i],  b->grad[i],  b->numel[i],
                                  v->ndim > 1, b->names[i], b->lr_scale};
    }
    return b->n_params;
}

void blocks_zero_grad(blocks *b) {
    for (int i = 0; i < b->n_params; i++)
        memset(b->grad[i], 0, sizeof(float) * (size_t)b->numel[i]);
}

/* The batch's pieces (from, side inputs) out of rows (n, row), and d_to's buffer. */
/* The row is piece k as it is (one float piece, nothing beside it): the graph reads the rows. */
static bool row_is_piece(const blocks *b, int k) {
    const frozen_piece *p = &b->frozen.pieces[k];
    return b->frozen.n_pieces == 1 && p->dtype == GRAFT_DTYPE_F32 && p->offset == 0 &&
           p->numel == b->frozen.row;
}

/* The batch's pieces (from, side inputs) out of rows (n, row), and d_to's buffer. */
graft_status blocks_unpack_rows(blocks *b, const float *rows, int64_t n, graft_err *e) {
    if (n != b->batch) {
        free_pieces(b);
        for (int k = 0; k < b->frozen.n_pieces; k++) {
            const frozen_piece *p = &b->frozen.pieces[k];
            tensor *t = &b->pieces[k];
            memset(t, 0, sizeof *t);
            t->dtype = p->dtype;
            t->ndim = p->ndim;
            memcpy(t->dims, p->dims, sizeof t->dims);
            t->dims[0] = n;
            if (!row_is_piece(b, k)) TRY(tensor_alloc(t, e));
        }
        b->d_to = malloc(sizeof(float) * (size_t)(n * b->feat));
        b->to_host = malloc(sizeof(float) * (size_t)(n * b->feat));
        if (!b->d_to || !b->to_host) return oom(e);
        b->batch = n;
    }
    for (int k = 0; k < b->frozen.n_pieces; k++) {
        b->inputs[k] = b->pieces[k];
        if (row_is_piece(b, k))
            b->inputs[k].data = (void *)rows; /* read only */
        else
            TRY(frozen_part_unpack(&b->frozen, k, rows, n, &b->pieces[k], e));
    }
    return GRAFT_OK;
}

/* A resident run's gradients, summed with those of the step's earlier micro-batches, copied over
 * the optimizer's gradient buffers on the device (or up from the host where the sum ran there),
 * then the stream drained: the optimizer's step runs on a stream of its own. */
static graft_status grads_to_resident(blocks *b, graft_err *e) {
    graft_backend *d = &b->run.device;
    for (int i = 0; i < b->n_params; i++) {
        const tensor *g = train_exec_output(&b->run, 1 + i);
        void *dst = optim_graph_device_buffer(b->og, b->og_first + i, OG_G);
        if (!dst || g->dtype != GRAFT_DTYPE_F32 || tensor_numel(g) != b->numel[i])
            return err_set(e, GRAFT_E_INTERNAL, "blocks: gradient %d has the wrong size", i);
        size_t bytes = sizeof(float) * (size_t)b->numel[i];
        if (train_exec_output_is_on_device(&b->run, 1 + i))
            TRY(d->copy_on_device(d->impl, dst, g->data, bytes, e));
        else
            TRY(d->copy_to_device(d->impl, dst, g->data, bytes, e));
    }
    return d->synchronize(d->impl, e);
}

/* The training run again with gradients that add up on the device: the executor rebuilt for
 * the graph with acc/ inputs (train_graph_accumulate_grads), which read og's gradient buffers. */
static graft_status accumulate_on_device(blocks *b, graft_model *m, int threads, graft_err *e) {
    train_exec_free(&b->run);
    TRY(train_graph_accumulate_grads(&b->tg, e));
    TRY(train_exec_init_device(&b->run, &b->tg.g, threads, m, e));
    if (!train_exec_on_device(&b->run))
        return err_set(e, GRAFT_E_INTERNAL, "blocks: the training run left the device");
    tensor *grown = realloc(b->inputs, sizeof *grown * ((size_t)b->tg.g.n_inputs + 1));
    if (!grown) return oom(e);
    b->inputs = grown;
    int first_acc = b->tg.g.n_inputs - b->n_params;
    for (int i = 0; i < b->n_params; i++) {
        tensor *t = &b->inputs[first_acc + i];
        *t = b->inputs[1 + b->tg.n_side + i]; /* the parameter's dtype and shape */
        t->data = optim_graph_device_buffer(b->og, b->og_first + i, OG_G);
        if (!t->data) return err_set(e, GRAFT_E_INTERNAL, "blocks: no gradient buffer %d", i);
        TRY(train_exec_input_on_device(&b->run, first_acc + i, true, e));
    }
    return GRAFT_OK;
}

graft_status blocks_make_resident(blocks *b, const optim_graph *og, int og_first, graft_model *m,
                                  int threads, graft_err *e) {
    if (!train_exec_on_device(&b->run) || b->fixed > 0)
        return err_set(e, GRAFT_E_INTERNAL,
                       "blocks: resident parameters need unchunked device runs");
    b->og = og;
    b->og_first = og_first;
    TRY(accumulate_on_device(b, m, threads, e));
    int side = b->tg.n_side;
    for (int i = 0; i < b->n_params; i++) {
        void *w = optim_graph_device_buffer(og, og_first + i, OG_W);
        if (!w) return err_set(e, GRAFT_E_INTERNAL, "blocks: no device buffer for parameter %d", i);
        b->inputs[1 + side + i].data = w;
        TRY(train_exec_input_on_device(&b->run, 1 + side + i, true, e));
        TRY(train_exec_input_on_device(&b->eval, 1 + side + i, true, e));
        TRY(train_exec_output_on_device(&b->run, 1 + i, true, e));
    }
    return GRAFT_OK;
}

typedef struct pause_state {
    blocks *b;
    int64_t n;
    blocks_head_fn head;
    void *user;
    double t_pause, t_resume; /* when the pause began and ended */
} pause_state;

static graft_status head_in_pause(pause_state *ps, executor *x, graft_err *e) {
    const tensor *to = &x->vals[ps->b->tg.to];
    if (to->dtype != GRAFT_DTYPE_F32 || to->ndim != 2 || to->dims[0] != ps->n ||
        to->dims[1] != ps->b->feat)
        return err_set(e, GRAFT_E_INTERNAL, "blocks: the features came out with another shape");
    const float *feats = to->data;
    if (x->on_dev[ps->b->tg.to]) { /* the blocks ran on the GPU: the head reads a host copy */
        TRY(x->device->copy_to_host(x->device->impl, ps->b->to_host, to->data,
                                    (size_t)tensor_nbytes(to), e));
        feats = ps->b->to_host;
    }
    return ps->head(ps->user, feats, ps->n, ps->b->d_to, e);
}

static graft_status at_pause(void *user, executor *x, graft_err *e) {
    pause_state *ps = user;
    ps->t_pause = clock_seconds();
    graft_status st = head_in_pause(ps, x, e);
    ps->t_resume = clock_seconds();
    return st;
}
graft_status blocks_step(blocks *b, const float *rows, int64_t n, blocks_head_fn head, void *user,
                         graft_err *e) {
    if (b->fixed > 0) return blocks_step_chunked(b, rows, n, head, user, e);
    return blocks_run_training(b, rows, n, head, user, NULL, e);
}

graft_status blocks_run_training(blocks *b, const float *rows, int64_t n, blocks_head_fn head,
                                 void *user, const float *dto, graft_err *e) {
    double t0 = clock_seconds();
    TRY(blocks_unpack_rows(b, rows, n, e));
    tensor *dt = &b->inputs[1 + b->tg.n_side + b->n_params]; /* d_to (acc/ inputs follow) */
    dt->dtype = GRAFT_DTYPE_F32;
    dt->ndim = 2;
    dt->dims[0] = n, dt->dims[1] = b->feat;
    dt->data = b->d_to;
    pause_state ps = {b, n, head, user, 0, 0};
    executor *x = &b->run.x;
    x->pause_after = b->tg.n_forward_nodes - 1;
    x->pause_fn = dto ? NULL : at_pause;
    x->pause_user = &ps;
    if (dto) memcpy(b->d_to, dto, sizeof(float) * (size_t)(n * b->feat));
    double t1 = clock_seconds();
    ps.t_pause = ps.t_resume = t1;
    graft_status st = train_exec_run(&b->run, b->inputs, e);
    x->pause_fn = NULL;
    TRY(st);
    double t2 = clock_seconds();
    if (b->og) {
        TRY(grads_to_resident(b, e));
        b->sec_grads += clock_seconds() - t2;
        b->sec_rows += t1 - t0;
        b->sec_forward += ps.t_pause - t1;
        b->sec_head += ps.t_resume - ps.t_pause;
        b->sec_backward += t2 - ps.t_resume;
        b->steps++;
        return GRAFT_OK;
    }
    for (int i = 0; i < b->n_params; i++) {
        const tensor *g = train_exec_output(&b->run, 1 + i);
        if (g->dtype != GRAFT_DTYPE_F32 || tensor_numel(g) != b->numel[i])
            return err_set(e, GRAFT_E_INTERNAL, "blocks: gradient %d has the wrong size", i);
        const float *src = g->data;
        float *acc = b->grad[i];
#pragma omp parallel for if (b->numel[i] >= ((int64_t)1 << 16)) schedule(static)
        for (int64_t k = 0; k < b->numel[i]; k++) acc[k] += src[k];
    }
    double t3 = clock_seconds();
    b->sec_rows += t1 - t0;
    b->sec_forward += ps.t_pause - t1;
    b->sec_head += ps.t_resume - ps.t_pause;
    b->sec_backward += t2 - ps.t_resume;
    b->sec_grads += t3 - t2;
    b->steps++;
    return GRAFT_OK;
}

graft_status blocks_features(blocks *b, const float *rows, int64_t n, const float **out,
                             graft_err *e) {
    if (b->fixed > 0) return blocks_features_chunked(b, rows, n, out, e);
    return blocks_run_features(b, rows, n, out, e);
}

graft_status blocks_run_features(blocks *b, const float *rows, int64_t n, const float **out,
                                 graft_err *e) {
    double t0 = clock_seconds();
    TRY(blocks_unpack_rows(b, rows, n, e));
    TRY(train_exec_run(&b->eval, b->inputs, e));
    b->sec_eval += clock_seconds() - t0;
    const tensor *to = train_exec_output(&b->eval, 0);
    if (to->dtype != GRAFT_DTYPE_F32 || to->ndim != 2 || to->dims[0] != n || to->dims[1] != b->feat)
        return err_set(e, GRAFT_E_INTERNAL, "blocks: the features came out with another shape");
    *out = to->data;
    b->evals++;
    return GRAFT_OK;
}

float *blocks_rows_alloc(blocks *b, int64_t count) {
    return train_exec_host_alloc(&b->run, sizeof(float) * (size_t)count);
}

void blocks_rows_free(blocks *b, float *rows) {
    train_exec_host_free(&b->run, rows);
}

graft_status blocks_write_back(blocks *b, graft_model *m, graft_err *e) {
    int *at = malloc(sizeof(int) * ((size_t)b->n_params + 1));
    if (!at) return oom(e);
    for (int i = 0; i < b->n_params; i++) {
        const char *name = b->tg.g.values[b->tg.params[i]].name;
        at[i] = ir_find_value(&m->g, name);
        const ir_value *v = at[i] >= 0 ? &m->g.values[at[i]] : NULL;
        if (!v || !v->is_const || tensor_numel(&v->data) != b->numel[i] ||
            v->data.dtype != GRAFT_DTYPE_F32) {
            free(at);
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "the model's '%s' is no longer the weight the blocks trained (was the "
                           "model changed after the trainer was made?)",
                           name);
        }
    }
    for (int i = 0; i < b->n_params; i++)
        memcpy(m->g.values[at[i]].data.data, b->data[i], sizeof(float) * (size_t)b->numel[i]);
    free(at);
    model_release_state(m);
    exec_drop_device_copies(&m->exec);
    return GRAFT_OK;
}

/* trainer.c: the training loop over features: micro-batch steps with gradient accumulation,
 * clipping, fp16 loss scaling, schedules, validation, plateau and early stopping. */
#include "trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/rng.h"
#include "../dist/dist_train.h"
#include "graft_config.h"
#include "../core/clock.h"

size_t trainer_label_size(const graft_trainer *t) {
    return t->options.loss == GRAFT_LOSS_CROSS_ENTROPY
               ? sizeof(int64_t)
               : sizeof(float) * (size_t)t->head_options.n_outputs;
}

static optim_config optimizer_config(const graft_train_options *o) {
    static const optim_kind kinds[] = {OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW, OPTIM_LAMB};
    optim_config c = optim_config_default(kinds[o->optimizer]);
    c.weight_decay = (float)o->weight_decay;
    c.momentum = (float)o->momentum;
    c.nesterov = o->nesterov != 0;
    c.beta1 = (float)o->beta1;
    c.beta2 = (float)o->beta2;
    c.eps = (float)o->eps;
    if (o->optimizer == GRAFT_OPTIMIZER_SGD) c.dampening = 0.0f;
    return c;
}

graft_status trainer_setup(graft_trainer *t, int64_t dim, graft_err *e) {
    if (t->head_ready && t->blocks && dim != t->dim)
        return err_set(e, GRAFT_E_SHAPE,
                       "fine-tuning from '%s': a batch's frozen part has %lld values per sample, "
                       "the first had %lld: the blocks need every sample's inputs the same size "
                       "(texts: pad them all to one length, --pad max)",
                       t->options.train_from, (long long)dim, (long long)t->dim);
    if (t->head_ready) {
        if (dim != t->dim)
            return err_set(e, GRAFT_E_SHAPE, "the features have %lld values, the head takes %lld",
                           (long long)dim, (long long)t->dim);
        return GRAFT_OK;
    }
    TRY(head_init(&t->h, t->blocks ? t->blocks->feat : dim, &t->head_options, t->options.precision,
                  e));
    graft_ctx *ctx = t->model ? t->model->ctx : NULL; /* none in some tests */
    graft_status st =
        head_graph_init(&t->hg, &t->h, t->blocks != NULL, ctx ? ctx->options.num_threads : 0, e);
    int most = 2 * HEAD_MAX_LAYERS + (t->blocks ? t->blocks->n_params : 0);
    free(t->params);
    t->params = st == GRAFT_OK ? malloc(sizeof *t->params * (size_t)most) : NULL;
    if (st == GRAFT_OK && !t->params) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st == GRAFT_OK) {
        t->n_params = head_params(&t->h, t->params);
        if (t->blocks) t->n_params += blocks_params(t->blocks, t->params + t->n_params);
        optim_config oc = optimizer_config(&t->options);
        st = optim_create(&t->opt, &oc, t->params, t->n_params, e);
    }
    /* data-parallel: the step graph reads each batch's share of the mean per run */
    t->loss.grad_scale_input = trainer_dist(t) != NULL;
    if (st == GRAFT_OK) st = trainer_resident_setup(t, ctx ? ctx->options.num_threads : 0, e);
    if (st == GRAFT_OK) st = trainer_head_setup(t, ctx ? ctx->options.num_threads : 0, e);
    if (st != GRAFT_OK) {
        head_step_free(&t->hs);
        head_graph_free(&t->hg);
        head_free(&t->h);
        return st;
    }
    t->dim = dim;
    t->head_ready = true;
    return GRAFT_OK;
}

static graft_status apply_grads(graft_trainer *t, double lr, float **grads, const int64_t *numels,
                                graft_err *e);

/* Unscale (fp16), clip and apply the accumulated gradients; then clear them. */
graft_status trainer_apply_step(graft_trainer *t, double lr, graft_err *e) {
    float **grads = malloc(sizeof *grads * (size_t)t->n_params);
    int64_t *numels = malloc(sizeof *numels * (size_t)t->n_params);
    graft_status st =
        grads && numels ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; st == GRAFT_OK && i < t->n_params; i++) {
        grads[i] = (float *)t->params[i].grad;
        numels[i] = t->params[i].numel;
    }
    if (st == GRAFT_OK) st = apply_grads(t, lr, grads, numels, e);
    free(grads), free(numels);
    if (!t->hs.on_device) head_zero_grad(&t->h); /* else the device's, zeroed there */
    if (t->blocks && !t->resident) blocks_zero_grad(t->blocks);
    t->step++;
    return st;
}

static graft_status apply_grads(graft_trainer *t, double lr, float **grads, const int64_t *numels,
                                graft_err *e) {
    /* Data-parallel: every rank's gradients summed (each was scaled by its share of the batch),
     * before unscale/clip/step, so every rank applies the same update; resident ones on their
     * device (trainer_resident_step). */
    if (!t->resident) TRY(dist_allreduce_grads(trainer_dist(t), grads, numels, t->n_params, e));
    if (t->options.scheduler == GRAFT_SCHEDULER_ONECYCLE)
        optim_set_momentum(t->opt, (float)sched_momentum(&t->sched, t->step));
    float lr_f = (float)lr;
    if (!isfinite(lr_f) || lr_f < 0.0f)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "optim_step: learning rate %g", lr_f);
    /* fp16's unscale, check and scaler update, clipping and the update: one OptimizerStep */
    bool fp16 = t->options.precision == GRAFT_PRECISION_FP16, skip = false;
    float total_norm;
    if (t->resident)
        TRY(trainer_resident_step(t, lr_f, &skip, e));
    else
        TRY(optim_graph_step(&t->og, t->opt, lr_f, fp16 ? &t->scaler : NULL, &skip, &total_norm,
                             e));
    if (skip) t->skipped_steps++;
    return GRAFT_OK;
}

static int64_t count_correct(const graft_trainer *t, const float *logits, const void *y,
                             int64_t n) {
    if (t->options.loss != GRAFT_LOSS_CROSS_ENTROPY) return 0;
    return loss_count_correct(logits, y, n, t->head_options.n_outputs);
}

/* A NaN or infinite loss stops before its gradients reach the weights (fp16 leaves an overflow
 * to the loss scaler, which skips the step). */
static graft_status loss_must_be_finite(double loss, bool fp16, graft_err *e) {
    if (isfinite(loss) || fp16) return GRAFT_OK;
    return err_set(e, GRAFT_E_INVALID_ARGUMENT, "the training loss is %s",
                   isnan(loss) ? "NaN" : "infinite");
}

/* The loss of logits (n, outputs) against y and d(loss)/d(logits) into dlogits, scaled for
 * accumulation and fp16's loss scale; *correct the right answers. */
static graft_status loss_and_grad(graft_trainer *t, const float *logits, const void *y, int64_t n,
                                  double *loss, int64_t *correct, float *dlogits, graft_err *e) {
    int64_t c = t->head_options.n_outputs;
    TRY(loss_compute(loss, dlogits, &t->loss, logits, y, n, c, e));
    TRY(loss_must_be_finite(*loss, t->options.precision == GRAFT_PRECISION_FP16, e));
    *correct = count_correct(t, logits, y, n);
    /* Accumulated micro-batches each contribute 1/k of the step's gradient (PyTorch's loss / k);
     * fp16 scales the loss so small gradients survive the half backward. */
    double scale = 1.0 / (double)t->options.accumulate;
    if (t->options.precision == GRAFT_PRECISION_FP16) scale *= t->scaler.scale;
    for (int64_t i = 0; i < n * c; i++) dlogits[i] = (float)(dlogits[i] * scale);
    return GRAFT_OK;
}

typedef struct graph_loss_call {
    graft_trainer *t;
    const void *y;
    double *loss;
    int64_t *correct;
} graph_loss_call;

static graft_status graph_loss(void *user, const float *logits, int64_t n, float *dlogits,
                               graft_err *e) {
    graph_loss_call *c = user;
    return loss_and_grad(c->t, logits, c->y, n, c->loss, c->correct, dlogits, e);
}

/* The head's forward, loss and backward on features (n, head input): *loss, *correct, the head's
 * gradients added, and d(loss)/d(features) into dx (n, head input) unless NULL. */
static graft_status head_pause_step(graft_trainer *t, const float *x, const void *y, int64_t n,
                                    double *loss, int64_t *correct, float *dx, graft_err *e) {
    graph_loss_call c = {t, y, loss, correct};
    return head_graph_step(&t->hg, x, n, graph_loss, &c, dx, e);
}

typedef struct block_head_call {
    graft_trainer *t;
    const void *y;
    double *loss;
    int64_t *correct;
} block_head_call;

/* blocks_step's pause: the head's step on the features the blocks computed. */
static graft_status block_head(void *user, const float *to, int64_t n, float *dto, graft_err *e) {
    block_head_call *c = user;
    return head_pause_step(c->t, to, c->y, n, c->loss, c->correct, dto, e);
}

/* The step graph (head_step.h: a head alone, or blocks with it) on rows x (n, dim); *loss and
 * *correct from the
 * training state (a device's: a wait). */
static graft_status graph_step(graft_trainer *t, const float *x, const void *y, int64_t n,
                               double *loss, int64_t *correct, graft_err *e) {
    bool fp16 = t->options.precision == GRAFT_PRECISION_FP16;
    TRY(head_step_run_rows(&t->hs, x, y, n, &t->loss, fp16 ? t->scaler.scale : 1.0f, e));
    train_state s;
    TRY(head_step_state(&t->hs, &s, e));
    *loss = s.step_loss;
    *correct = s.step_correct;
    return loss_must_be_finite(*loss, fp16, e);
}

graft_status trainer_step(graft_trainer *t, const float *x, const void *y, int64_t n, double lr,
                          double *loss, int64_t *correct, graft_err *e) {
    double t0 = clock_seconds();
    TRY(trainer_device_current(t, e));
    if (t->hs.ready) {
        TRY(graph_step(t, x, y, n, loss, correct, e));
    } else if (t->blocks) {
        block_head_call c = {t, y, loss, correct};
        TRY(blocks_step(t->blocks, x, n, block_head, &c, e));
    } else {
        TRY(head_pause_step(t, x, y, n, loss, correct, NULL, e));
    }
    return trainer_micro_done(t, lr, t0, e);
}

graft_status trainer_micro_done(graft_trainer *t, double lr, double t0, graft_err *e) {
    double t1 = clock_seconds();
    if (++t->micro % t->options.accumulate == 0) TRY(trainer_apply_step(t, lr, e));
    double t2 = clock_seconds();
    t->step_seconds += t2 - t1;
    t->head_seconds += t2 - t0;
    return GRAFT_OK;
}

/* logits (m, outputs) of rows (m, dim) in eval mode: through the blocks when they train. */
graft_status trainer_logits(graft_trainer *t, const float *x, int64_t m, const float **logits,
                            graft_err *e) {
    TRY(trainer_device_current(t, e));
    if (t->hs.ready) return head_step_logits(&t->hs, x, m, logits, e);
    if (t->blocks) TRY(blocks_features(t->blocks, x, m, &x, e));
    return head_graph_logits(&t->hg, x, m, logits, e);
}

graft_status trainer_eval_features(graft_trainer *t, const float *x, const void *y, int64_t n,
                                   double *loss, double *accuracy, graft_err *e) {
    int64_t c = t->head_options.n_outputs, b = t->options.batch_size, correct = 0;
    double total = 0.0;
    size_t ls = trainer_label_size(t);
    for (int64_t at = 0; at < n; at += b) {
        int64_t m = n - at < b ? n - at : b;
        const float *logits;
        double l;
        TRY(trainer_logits(t, x + at * t->dim, m, &logits, e));
        TRY(loss_compute(&l, NULL, &t->loss, logits, (const char *)y + (size_t)at * ls, m, c, e));
        total += l * (double)m;
        correct += count_correct(t, logits, (const char *)y + (size_t)at * ls, m);
    }
    *loss = n ? total / (double)n : 0.0;
    *accuracy =
        t->options.loss == GRAFT_LOSS_CROSS_ENTROPY && n ? (double)correct / (double)n : -1.0;
    return GRAFT_OK;
}

double trainer_current_lr(const graft_trainer *t) {
    if (t->options.scheduler == GRAFT_SCHEDULER_PLATEAU) return t->plat.lr;
    return sched_lr(&t->sched, t->step);
}

static graft_status setup_schedule(graft_trainer *t, int64_t n, graft_err *e) {
    const graft_train_options *o = &t->options;
    int64_t per_epoch = (n + o->batch_size - 1) / o->batch_size;
    int64_t total = (int64_t)o->epochs * per_epoch / o->accumulate;
    if (total < 1) total = 1;
    static const sched_kind kinds[] = {SCHED_CONSTANT, SCHED_STEP, SCHED_COSINE_WARMUP,
                                       SCHED_ONE_CYCLE, SCHED_CONSTANT};
    t->sched = sched_config_default(kinds[o->scheduler], o->lr);
    t->sched.step_size = o->step_size;
    t->sched.gamma = o->gamma;
    t->sched.warmup_steps = o->warmup_steps < total ? o->warmup_steps : total - 1;
    t->sched.eta_min = o->min_lr;
    t->sched.total_steps = total;
    TRY(sched_check(&t->sched, e));
    if (o->scheduler == GRAFT_SCHEDULER_PLATEAU && t->epoch == 0) { /* else resumed: keep */
        TRY(plateau_init(&t->plat, o->lr, e));
        t->plat.factor = o->gamma;
        t->plat.min_lr = o->min_lr;
    }
    return GRAFT_OK;
}

/* Copy of the head's master weights, for keeping the best epoch under early stopping. */
static float *save_weights(graft_trainer *t, float *buf) {
    int64_t total = 0;
    for (int i = 0; i < t->n_params; i++) total += t->params[i].numel;
    if (!buf) buf = malloc(sizeof(float) * (size_t)total);
    if (!buf) return NULL;
    int64_t at = 0;
    for (int i = 0; i < t->n_params; i++) {
        memcpy(buf + at, t->params[i].data, sizeof(float) * (size_t)t->params[i].numel);
        at += t->params[i].numel;
    }
    return buf;
}

static void restore_weights(graft_trainer *t, const float *buf) {
    int64_t at = 0;
    for (int i = 0; i < t->n_params; i++) {
        memcpy(t->params[i].data, buf + at, sizeof(float) * (size_t)t->params[i].numel);
        at += t->params[i].numel;
    }
}

typedef struct epoch_state {
    int64_t *order;
    float *xb;
    char *yb;
} epoch_state;

int trainer_report(graft_trainer *t, int epoch_end, double loss, double acc, double vloss,
                   double vacc) {
    if (!t->options.callback) return 0;
    graft_train_report r = {epoch_end,
                            t->epoch,
                            t->step,
                            loss,
                            acc,
                            vloss,
                            vacc,
                            trainer_current_lr(t),
                            t->options.precision == GRAFT_PRECISION_FP16 ? t->scaler.scale : 1.0,
                            t->backbone_seconds,
                            t->head_seconds,
                            t->backbone_samples,
                            t->epoch_at,
                            t->read_seconds,
                            t->cache_seconds};
    return t->options.callback(&r, t->options.callback_user);
}

bool trainer_should_stop(graft_trainer *t, int callback_result) {
    if (callback_result) t->stop_requested = true;
    return t->stop_requested && t->micro % t->options.accumulate == 0;
}

/* The epoch's data order: a fresh epoch draws it from the RNG (remembering the state before,
 * for checkpoints); a resumed mid-epoch one redraws it from that remembered state, which also
 * leaves the RNG where the uninterrupted epoch left it. */
void trainer_epoch_order(graft_trainer *t, int64_t *order, int64_t n) {
    if (t->epoch_at == 0)
        t->epoch_rng = t->rng, t->epoch_loss = 0.0, t->epoch_correct = 0;
    else
        t->rng = t->epoch_rng;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    rng_shuffle(&t->rng, order, n);
}

/* A NaN or infinite training loss stops the run: the step, and the samples of its batch (their
 * indices in the data, which the caller maps to files), named. */
graft_status trainer_non_finite_loss(graft_trainer *t, double loss, const int64_t *rows, int64_t m,
                                     graft_err *e) {
    char list[160] = "";
    size_t at = 0;
    t->n_failed_samples = 0;
    for (int64_t i = 0; i < m && i < 8; i++) {
        int64_t r = rows[i], sample = r >= 0 && r < t->n_row_source ? t->row_source[r] : r;
        t->failed_samples[t->n_failed_samples++] = sample;
        if (at < sizeof list)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%lld", i ? ", " : "",
                                   (long long)sample);
    }
    return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                   "the training loss is %s at epoch %lld, step %lld (the batch of samples %s%s): "
                   "the features, targets or weights hold NaN/Inf, or the learning rate makes "
                   "training diverge; stopped before this step changed the weights",
                   isnan(loss) ? "NaN" : "infinite", (long long)t->epoch + 1,
                   (long long)t->step + 1, list, m > 8 ? ", ..." : "");
}

/* A data-parallel rank with no rows in a (short) batch: no forward or backward, but its part in
 * the optimizer step (zero gradients into the all-reduce). */
static graft_status step_without_rows(graft_trainer *t, double lr, graft_err *e) {
    if (++t->micro % t->options.accumulate == 0) TRY(trainer_apply_step(t, lr, e));
    return GRAFT_OK;
}

/* One epoch; *stop set when the callback asks. Data-parallel (dist_train.h), every rank draws
 * the same order and steps on its slice [lo, hi) of each global batch, its gradient scaled by its
 * share of the batch; the step's loss and correct count are then summed across ranks. */
static graft_status run_epoch(graft_trainer *t, epoch_state *s, const float *x, const void *y,
                              int64_t n, double *mean_loss, double *acc, bool *stop, graft_err *e) {
    size_t ls = trainer_label_size(t);
    int64_t b = t->options.batch_size;
    dist *d = trainer_dist(t);
    /* Each epoch's order depends on the RNG state alone, so a resumed run draws the same. */
    trainer_epoch_order(t, s->order, n);
    for (int64_t at = t->epoch_at; at < n && !*stop; at += b) {
        int64_t m = n - at < b ? n - at : b, lo, hi;
        dist_batch_slice(d, m, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            int64_t k = s->order[at + i];
            memcpy(s->xb + (i - lo) * t->dim, x + k * t->dim, sizeof(float) * (size_t)t->dim);
            memcpy(s->yb + (size_t)(i - lo) * ls, (const char *)y + (size_t)k * ls, ls);
        }
        double share = d ? dist_grad_share(&t->loss, y, ls, s->order + at, m, lo, hi) : 1.0;
        if (d) t->loss.grad_scale = share;
        double loss = 0.0, lr = trainer_current_lr(t);
        int64_t correct = 0;
        uint64_t masks;
        if (d) dist_dropout_before(t, lo, hi, m, &masks);
        graft_status st = hi > lo ? trainer_step(t, s->xb, s->yb, hi - lo, lr, &loss, &correct, e)
                                  : step_without_rows(t, lr, e);
        if (d) dist_dropout_after(t, m, masks);
        if (st != GRAFT_OK && !isfinite(loss))
            return trainer_non_finite_loss(t, loss, s->order + at + lo, hi - lo, e);
        TRY(st);
        if (d) TRY(dist_reduce_step(d, &loss, share, &correct, e));
        t->epoch_loss += loss * (double)m;
        t->epoch_correct += correct;
        t->epoch_at = at + m;
        bool asked = trainer_report(t, 0, loss, (double)correct / (double)m, -1.0, -1.0) != 0;
        if (d) TRY(dist_any(d, &asked, e)); /* a stop on any rank stops them all, together */
        *stop = trainer_should_stop(t, asked);
    }
    *mean_loss = t->epoch_loss / (double)n;
    *acc =
        t->options.loss == GRAFT_LOSS_CROSS_ENTROPY ? (double)t->epoch_correct / (double)n : -1.0;
    return GRAFT_OK;
}

/* After an epoch: validation, plateau, early stopping; *stop when training should end. */
graft_status trainer_end_epoch(graft_trainer *t, double loss, double acc, const float *vx,
                               const void *vy, int64_t vn, bool *stop, graft_err *e) {
    double vloss = -1.0, vacc = -1.0;
    /* data-parallel: each rank evaluates its slice, the sums reduced */
    if (vn > 0) TRY(dist_eval_features(t, vx, vy, vn, &vloss, &vacc, e));
    double metric = vn > 0 ? vloss : loss;
    if (t->options.scheduler == GRAFT_SCHEDULER_PLATEAU) plateau_step(&t->plat, metric);
    if (t->options.early_stop > 0 && vn > 0) {
        if (metric < t->best_metric) {
            t->best_metric = metric;
            t->bad_epochs = 0;
            TRY(trainer_sync_host(t, e));
            t->best = save_weights(t, t->best);
            if (!t->best) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
        } else if (++t->bad_epochs >= t->options.early_stop) {
            TRY(trainer_sync_host(t, e)); /* the optimizer state, then the best weights */
            restore_weights(t, t->best);
            t->device_current = false;
            *stop = true;
        }
    }
    t->epoch++;
    t->epoch_at = 0, t->epoch_loss = 0.0, t->epoch_correct = 0;
    if (trainer_report(t, 1, loss, acc, vloss, vacc) || t->stop_requested) *stop = true;
    return dist_any(trainer_dist(t), stop, e);
}

/* Where the blocks' training time went (GRAFT_LOG=info shows it). */
static void log_block_times(const graft_trainer *t) {
    const blocks *b = t->blocks;
    ctx_log(t->model->ctx, GRAFT_LOG_INFO,
            "blocks: %lld training runs: rows %.2fs, forward %.2fs, head in the pause %.2fs, "
            "backward and gradients out %.2fs, gradient sums %.2fs; optimizer steps %.2fs; "
            "%lld evaluation runs %.2fs",
            (long long)b->steps, b->sec_rows, b->sec_forward, b->sec_head, b->sec_backward,
            b->sec_grads, t->step_seconds, (long long)b->evals, b->sec_eval);
}

graft_status trainer_run(graft_trainer *t, const float *x, const void *y, int64_t n,
                         const float *vx, const void *vy, int64_t vn, graft_err *e) {
    TRY(setup_schedule(t, n, e));
    t->gpu.used = false;
    t->stop_requested = false;
    if (t->epoch_at > n)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the checkpoint stopped at sample %lld of an epoch of %lld: other data?",
                       (long long)t->epoch_at, (long long)n);
    /* a head alone: its own loop (the features resident on a device); data-parallel, the
     * loop below (each rank's slice, gathered on the host, through the same step graph) */
    if (t->hs.ready && !t->blocks && !trainer_dist(t))
        return trainer_run_head(t, x, y, n, vx, vy, vn, e);
    if (t->blocks && train_exec_on_device(&t->blocks->run) && t->epoch == 0 && t->epoch_at == 0)
        ctx_log(t->model->ctx, GRAFT_LOG_INFO, "the blocks after '%s' train on %s%s",
                t->options.train_from, t->backbone->device_name,
                t->hs.on_device ? " with the head, as one graph" : " (fp32), the head on the CPU");
    epoch_state s = {0};
    s.order = malloc(sizeof(int64_t) * (size_t)n);
    int64_t xb_count = t->options.batch_size * t->dim;
    s.xb = t->blocks ? blocks_rows_alloc(t->blocks, xb_count)
                     : malloc(sizeof(float) * (size_t)xb_count);
    s.yb = malloc(trainer_label_size(t) * (size_t)t->options.batch_size);
    graft_status st = GRAFT_OK;
    if (!s.order || !s.xb || !s.yb)
        st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory starting training");
    bool stop = false;
    while (st == GRAFT_OK && !stop && t->epoch < t->options.epochs) {
        double loss = 0.0, acc = 0.0;
        st = run_epoch(t, &s, x, y, n, &loss, &acc, &stop, e);
        if (st == GRAFT_OK && !stop) st = trainer_end_epoch(t, loss, acc, vx, vy, vn, &stop, e);
    }
    free(s.order), free(s.yb);
    if (st == GRAFT_OK) st = trainer_sync_host(t, e); /* export and checkpoints read the host's */
    if (t->blocks) {
        blocks_rows_free(t->blocks, s.xb);
        if (!t->hs.ready) log_block_times(t);
    } else {
        free(s.xb);
    }
    return st;
}

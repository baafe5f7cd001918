/* trainer_head.c: the epochs of a head alone through its step graph (head_step.h), on the
 * model's device or the CPU: the same data order, schedules, accumulation, callbacks,
 * validation and early stopping as trainer.c's loop; each micro-batch one run of the step graph
 * (gather, forward, loss, backward, gradient sums), each optimizer step one of OptimizerStep. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../dist/dist_train.h"
#include "trainer.h"
#include "../core/clock.h"

bool trainer_step_graph_wanted(const graft_trainer *t) {
    /* data-parallel too: each rank runs its slice with its share as TrainLoss's grad_scale
     * input (loss_spec.grad_scale_input), its masks skipping the other ranks' rows */
    if (!t->blocks) return true;
    const char *env = getenv("GRAFT_STEP_GRAPH"), *res = getenv("GRAFT_RESIDENT");
    /* Blocks take it on the CPU and, resident, on a device (checked on an H200:
     * tools/gpu_step_run.sh, docs/gpu-status.md); device blocks that are not resident (out of
     * device memory, data-parallel over MPI) and GRAFT_STEP_GRAPH=0 or GRAFT_RESIDENT=0 keep the
     * pause's path. */
    bool off = (env && !strcmp(env, "0")) || (res && !strcmp(res, "0"));
    bool device_blocks = train_exec_on_device(&t->blocks->run);
    return t->blocks->fixed == 0 && !off && (!device_blocks || t->resident);
}

graft_status trainer_head_setup(graft_trainer *t, int threads, graft_err *e) {
    if (!trainer_step_graph_wanted(t)) return GRAFT_OK;
    bool fp16 = t->options.precision == GRAFT_PRECISION_FP16;
    graft_model *m = t->model; /* the device's executors run where og does */
    int64_t k = t->options.accumulate;
    if (t->blocks)
        return head_step_init_blocks(&t->hs, &t->hg, t->blocks, t->options.train_from, &t->og,
                                     t->opt, &t->loss, k, fp16, m, threads, e);
    return head_step_init(&t->hs, &t->hg, &t->og, t->opt, &t->loss, k, fp16, m, threads, e);
}

/* The state's loss sums for the host: a NaN or infinite loss (not fp16's, which the scaler
 * skips) is an error; a batch whose class weights summed to zero (counted on a device) too. */
static graft_status check_state(graft_trainer *t, const train_state *s, const int64_t *rows,
                                int64_t m, graft_err *e) {
    if (s->bad_batches > 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "cross-entropy: the targets' class weights sum to zero");
    bool fp16 = t->options.precision == GRAFT_PRECISION_FP16;
    if (!fp16 && !isfinite(s->step_loss))
        return trainer_non_finite_loss(t, s->step_loss, rows, m, e);
    return GRAFT_OK;
}

/* A step's report to the callback (on a device: a wait for the state); a loss scale the callback
 * changes goes to the state the loss reads. *stop as trainer_should_stop says. */
static graft_status report_step(graft_trainer *t, const train_state *s, int64_t m, bool *stop,
                                graft_err *e) {
    if (t->hs.on_device) { /* the device's scaler, as the step left it */
        t->scaler.scale = s->scale;
        t->scaler.growth_tracker = s->growth_tracker;
    }
    loss_scaler before = t->scaler;
    int asked = trainer_report(t, 0, s->step_loss, (double)s->step_correct / (double)m, -1.0, -1.0);
    *stop = trainer_should_stop(t, asked);
    if (!t->hs.on_device) return GRAFT_OK; /* the host's scaler is the one read */
    if (t->scaler.scale == before.scale && t->scaler.growth_tracker == before.growth_tracker)
        return GRAFT_OK;
    /* the device's state holds this epoch's sums: keep them */
    train_state now;
    TRY(head_step_state(&t->hs, &now, e));
    now.scale = t->scaler.scale, now.growth_tracker = t->scaler.growth_tracker;
    return train_exec_upload(&t->hs.run, t->og.dev[0], &now, sizeof now, e);
}

/* One micro-batch of rows rows (m) and its targets, and the optimizer step it completes. */
static graft_status micro_batch(graft_trainer *t, const int64_t *rows, const void *yb, int64_t m,
                                train_state *s, bool *look, graft_err *e) {
    double lr = trainer_current_lr(t), t0 = clock_seconds();
    TRY(trainer_device_current(t, e));
    float scale = t->options.precision == GRAFT_PRECISION_FP16 ? t->scaler.scale : 1.0f;
    TRY(head_step_run(&t->hs, rows, yb, m, &t->loss, scale, e));
    *look = !t->hs.on_device || t->options.callback;
    double t1 = clock_seconds();
    if (*look) TRY(head_step_state(&t->hs, s, e));
    t->state_seconds += clock_seconds() - t1;
    if (*look) TRY(check_state(t, s, rows, m, e)); /* before the step changes the weights */
    return trainer_micro_done(t, lr, t0, e);
}

/* One epoch; *stop set when the callback asks. */
static graft_status head_epoch(graft_trainer *t, int64_t *order, char *yb, const void *y, int64_t n,
                               double *mean_loss, double *acc, bool *stop, graft_err *e) {
    size_t ls = trainer_label_size(t);
    int64_t b = t->options.batch_size;
    trainer_epoch_order(t, order, n);
    /* a resumed epoch's first part, trained before the checkpoint (0 for a fresh epoch) */
    double loss_before = t->epoch_loss;
    int64_t correct_before = t->epoch_correct;
    bool fp16 = t->options.precision == GRAFT_PRECISION_FP16;
    TRY(trainer_device_current(t, e));
    TRY(head_step_reset_sums(&t->hs, e));
    for (int64_t at = t->epoch_at; at < n && !*stop; at += b) {
        int64_t m = n - at < b ? n - at : b;
        for (int64_t i = 0; i < m; i++)
            memcpy(yb + (size_t)i * ls, (const char *)y + (size_t)order[at + i] * ls, ls);
        train_state s;
        bool look;
        TRY(micro_batch(t, order + at, yb, m, &s, &look, e));
        t->epoch_at = at + m;
        if (!look) continue;
        t->epoch_loss = loss_before + s.epoch_loss; /* where a checkpoint now would resume */
        t->epoch_correct = correct_before + s.epoch_correct;
        TRY(report_step(t, &s, m, stop, e));
    }
    train_state s;
    TRY(head_step_state(&t->hs, &s, e));
    if (s.bad_batches > 0 || (!fp16 && !isfinite(s.epoch_loss)))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the training loss became %s in epoch %lld (a device checks it once an "
                       "epoch: the features, targets or weights hold NaN/Inf, or the learning "
                       "rate makes training diverge)",
                       s.bad_batches > 0 ? "undefined (class weights summing to zero)" : "NaN/Inf",
                       (long long)t->epoch + 1);
    t->epoch_loss = loss_before + s.epoch_loss;
    t->epoch_correct = correct_before + s.epoch_correct;
    *mean_loss = t->epoch_loss / (double)n;
    *acc =
        t->options.loss == GRAFT_LOSS_CROSS_ENTROPY ? (double)t->epoch_correct / (double)n : -1.0;
    return GRAFT_OK;
}

/* The loss scaler and step count back from a device (the host's are read between epochs). */
static graft_status settle(graft_trainer *t, graft_err *e) {
    if (!t->hs.on_device) return GRAFT_OK;
    return trainer_sync_host(t, e);
}

/* Where the head's steps went (GRAFT_LOG=debug): the per-step costs that decide an epoch over
 * many cached rows. */
static void log_step_times(const graft_trainer *t, double seconds) {
    const head_step *hs = &t->hs;
    if (hs->runs == 0 || !t->model) return; /* a trainer without a model has no log */
    ctx_log(t->model->ctx, GRAFT_LOG_DEBUG,
            "head: %lld training runs in %.3fs (%.1f us each; %lld replayed a recording): step "
            "graph %.3fs, gradients to the optimizer %.3fs, optimizer steps %.3fs, states read "
            "%.3fs, the rest (labels, callbacks, validation) %.3fs",
            (long long)hs->runs, seconds, 1e6 * seconds / (double)hs->runs,
            (long long)hs->run.x.replays, hs->run_seconds, hs->sums_seconds, t->step_seconds,
            t->state_seconds,
            seconds - hs->run_seconds - hs->sums_seconds - t->step_seconds - t->state_seconds);
}

static void log_start(graft_trainer *t) {
    if (!t->hs.on_device || t->epoch != 0 || t->epoch_at != 0) return;
    ctx_log(t->model->ctx, GRAFT_LOG_INFO, "training the head on %s (features %s)",
            t->model->device_name,
            t->hs.place == HEAD_STEP_FEATURES_DEVICE ? "in device memory" : "copied per batch");
}

graft_status trainer_run_head(graft_trainer *t, const float *x, const void *y, int64_t n,
                              const float *vx, const void *vy, int64_t vn, graft_err *e) {
    size_t ls = trainer_label_size(t);
    t->hs.feature_h2d_bytes = 0;
    TRY(head_step_set_data(&t->hs, x, n, t->gpu.force_host_features, e));
    TRY(loss_check_targets(t->loss.kind, y, n, t->head_options.n_outputs, e));
    log_start(t);
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n);
    char *yb = malloc(ls * (size_t)t->options.batch_size);
    graft_status st = GRAFT_OK;
    if (!order || !yb) st = err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory starting training");
    bool stop = false;
    double t0 = clock_seconds();
    while (st == GRAFT_OK && !stop && t->epoch < t->options.epochs) {
        double loss = 0.0, acc = -1.0;
        st = head_epoch(t, order, yb, y, n, &loss, &acc, &stop, e);
        if (st == GRAFT_OK) st = settle(t, e);
        if (st == GRAFT_OK && !stop) st = trainer_end_epoch(t, loss, acc, vx, vy, vn, &stop, e);
    }
    free(order), free(yb);
    if (st == GRAFT_OK) st = settle(t, e); /* export and checkpoints read the host's */
    log_step_times(t, clock_seconds() - t0);
    t->gpu.used = t->hs.on_device;
    t->gpu.place = t->hs.place;
    t->gpu.feature_h2d_bytes = t->hs.feature_h2d_bytes;
    return st;
}

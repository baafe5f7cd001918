/* trainer_gpu.c: the trainer's epochs on the model's GPU: the same data order, schedules,
 * callbacks, validation and early stopping as trainer.c's loop, with each micro-batch's forward,
 * loss, backward and optimizer step enqueued on the GPU (src/cuda/cuda_head.c); the host waits
 * only at an epoch's end, or after each step when a callback wants that step's loss. */
#include "graft_config.h"

#if GRAFT_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "../core/rng.h"
#include "../cuda/cuda_head.h"
#include "trainer.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The device head with the host's weights and state and the training set. */
static graft_status gpu_start(graft_trainer *t, const float *x, const void *y, int64_t n,
                              cuda_head **out, graft_err *e) {
    int64_t b = t->options.batch_size;
    cuda_head_options o = {.max_batch = b < n ? b : n,
                           .accumulate = t->options.accumulate,
                           .clip_norm = t->options.clip_norm,
                           .force_host_features = t->gpu.force_host_features};
    TRY(cuda_head_create(out, &t->model->device, &t->h, optim_get_config(t->opt), &t->loss, &o, e));
    graft_status st = cuda_head_upload_state(*out, &t->h, t->opt, &t->scaler, t->skipped_steps, e);
    if (st == GRAFT_OK) st = cuda_head_set_data(*out, x, y, n, e);
    if (st != GRAFT_OK) {
        cuda_head_free(*out);
        *out = NULL;
    }
    return st;
}

/* What the host keeps of the device's state after a read: the loss scaler, the skipped steps,
 * and an error for a batch the CPU would have refused. */
static graft_status absorb(graft_trainer *t, const cuda_head_stats *s, graft_err *e) {
    t->scaler = s->scaler;
    t->skipped_steps = s->skipped;
    if (s->bad_batches > 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "cross-entropy: the targets' class weights sum to zero");
    return GRAFT_OK;
}

/* The scheduler's side of an optimizer step (as trainer.c's apply_step). */
static graft_status prepare_update(graft_trainer *t, double lr, cuda_head_update *u, graft_err *e) {
    float lr_f = (float)lr;
    if (!isfinite(lr_f) || lr_f < 0.0f)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "optim_step: learning rate %g", lr_f);
    if (t->options.scheduler == GRAFT_SCHEDULER_ONECYCLE)
        optim_set_momentum(t->opt, (float)sched_momentum(&t->sched, t->step));
    const optim_config *c = optim_get_config(t->opt);
    *u = (cuda_head_update){lr, c->momentum, c->beta1};
    return GRAFT_OK;
}

/* A step's report: its loss comes from the GPU (a wait); a loss scale the callback changes goes
 * back to the GPU. */
static graft_status report_step(graft_trainer *t, cuda_head *ch, int64_t m, bool *stop,
                                graft_err *e) {
    cuda_head_stats s;
    TRY(cuda_head_read(ch, &s, e));
    TRY(absorb(t, &s, e));
    loss_scaler before = t->scaler;
    *stop = trainer_should_stop(
        t, trainer_report(t, 0, s.step_loss, (double)s.step_correct / (double)m, -1.0, -1.0));
    if (t->scaler.scale != before.scale || t->scaler.growth_tracker != before.growth_tracker)
        TRY(cuda_head_set_scaler(ch, &t->scaler, e));
    return GRAFT_OK;
}

/* One epoch (as trainer.c's run_epoch); *stop set when the callback asks. */
static graft_status gpu_epoch(graft_trainer *t, cuda_head *ch, int64_t *order, int64_t n,
                              double *mean_loss, double *acc, bool *stop, graft_err *e) {
    int64_t b = t->options.batch_size;
    trainer_epoch_order(t, order, n);
    /* a resumed epoch's first part, trained before the checkpoint (0 for a fresh epoch) */
    double loss_before = t->epoch_loss;
    int64_t correct_before = t->epoch_correct;
    double t0 = now_seconds();
    TRY(cuda_head_epoch_begin(ch, order, e));
    for (int64_t at = t->epoch_at; at < n && !*stop; at += b) {
        int64_t m = n - at < b ? n - at : b;
        /* one draw per micro-batch seeds the GPU's masks (the CPU draws one per element) */
        uint64_t seed = t->h.dropout > 0.0f ? rng_next(&t->h.rng) : 0;
        double lr = trainer_current_lr(t);
        cuda_head_update u, *up = NULL;
        if (++t->micro % t->options.accumulate == 0) {
            TRY(prepare_update(t, lr, &u, e));
            up = &u;
        }
        TRY(cuda_head_step(ch, at, m, seed, up, e));
        if (up) t->step++;
        t->epoch_at = at + m;
        if (t->options.callback) TRY(report_step(t, ch, m, stop, e));
    }
    cuda_head_stats s;
    TRY(cuda_head_read(ch, &s, e));
    TRY(absorb(t, &s, e));
    t->head_seconds += now_seconds() - t0;
    t->epoch_loss = loss_before + s.epoch_loss;
    t->epoch_correct = correct_before + s.epoch_correct;
    *mean_loss = t->epoch_loss / (double)n;
    *acc =
        t->options.loss == GRAFT_LOSS_CROSS_ENTROPY ? (double)t->epoch_correct / (double)n : -1.0;
    return GRAFT_OK;
}

static const char *place_name(int place) {
    switch (place) {
    case CUDA_HEAD_FEATURES_DEVICE:
        return "in GPU memory";
    case CUDA_HEAD_FEATURES_MAPPED:
        return "in pinned host memory";
    default:
        return "copied per batch";
    }
}

/* The epochs; the host's head, optimizer and scaler are brought up to date after each (also
 * after an error, as far as the GPU still answers). */
static graft_status gpu_epochs(graft_trainer *t, cuda_head *ch, int64_t n, const float *vx,
                               const void *vy, int64_t vn, graft_err *e) {
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n);
    if (!order) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory starting training");
    graft_status st = GRAFT_OK;
    bool stop = false;
    while (st == GRAFT_OK && !stop && t->epoch < t->options.epochs) {
        double loss = 0.0, acc = -1.0;
        st = gpu_epoch(t, ch, order, n, &loss, &acc, &stop, e);
        graft_err later;
        err_clear(&later);
        graft_status down = cuda_head_download_state(
            ch, &t->h, t->opt, &t->scaler, &t->skipped_steps, st == GRAFT_OK ? e : &later);
        if (st == GRAFT_OK) st = down;
        if (st == GRAFT_OK && !stop) st = trainer_end_epoch(t, loss, acc, vx, vy, vn, &stop, e);
    }
    free(order);
    return st;
}

graft_status trainer_run_gpu(graft_trainer *t, const float *x, const void *y, int64_t n,
                             const float *vx, const void *vy, int64_t vn, bool *ran, graft_err *e) {
    *ran = false;
    if (!t->model || !t->model->have_device || t->gpu.disable || !t->head_ready || n < 1)
        return GRAFT_OK;
    cuda_head *ch = NULL;
    graft_status st = gpu_start(t, x, y, n, &ch, e);
    if (st == GRAFT_E_INVALID_ARGUMENT) { /* bad labels: the CPU would refuse them too */
        *ran = true;
        return st;
    }
    if (st != GRAFT_OK) {
        ctx_log(t->model->ctx, GRAFT_LOG_WARN, "training the head on the CPU: the GPU failed: %s",
                e->msg);
        err_clear(e);
        return GRAFT_OK;
    }
    *ran = true;
    cuda_head_counters c = cuda_head_get_counters(ch);
    ctx_log(t->model->ctx, GRAFT_LOG_INFO, "training the head on %s (features %s)",
            t->model->device_name, place_name(c.place));
    st = gpu_epochs(t, ch, n, vx, vy, vn, e);
    c = cuda_head_get_counters(ch);
    t->gpu.used = true;
    t->gpu.place = (int)c.place;
    t->gpu.feature_h2d_bytes = c.feature_h2d_bytes;
    t->gpu.feature_bus_bytes = c.feature_bus_bytes;
    cuda_head_free(ch);
    return st;
}

#else
typedef int trainer_gpu_not_built; /* a translation unit may not be empty */
#endif

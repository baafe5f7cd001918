/* schedule.h: learning-rate schedules as functions of the step, and ReduceLROnPlateau. */
#ifndef GRAFT_TRAIN_SCHEDULE_H
#define GRAFT_TRAIN_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/*
 * lr(t) for step t = 0, 1, 2, ... (t = number of optimizer steps already taken, i.e. the lr of
 * the step about to run; PyTorch's scheduler.last_epoch). Computed in double.
 *
 * CONSTANT:      lr(t) = base_lr
 * STEP:          lr(t) = base_lr * gamma^floor(t / step_size)                (torch StepLR)
 * COSINE_WARMUP: W = warmup_steps, T = total_steps, sf = start_factor
 *                t < W:      lr = base_lr * (sf + (1 - sf) * t / W)          (torch LinearLR)
 *                W <= t < T: lr = eta_min + (base_lr - eta_min) * (1 + cos(pi*(t-W)/(T-W))) / 2
 *                t >= T:     lr = eta_min
 *                (= SequentialLR([LinearLR(sf, 1, W), CosineAnnealingLR(T-W, eta_min)], [W]))
 * ONE_CYCLE:     torch OneCycleLR(max_lr = base_lr, total_steps, pct_start, anneal 'cos',
 *                div_factor, final_div_factor, three_phase false):
 *                initial = max_lr/div_factor, min = initial/final_div_factor,
 *                e1 = pct_start*T - 1, e2 = T - 1, cos(a, b, p) = b + (a-b)/2*(1 + cos(pi*p))
 *                t <= e1:    lr = cos(initial, max_lr, t / e1)
 *                otherwise:  lr = cos(max_lr, min, (t - e1) / (e2 - e1))
 *                momentum (cycle_momentum, see sched_momentum) runs the other way between
 *                max_momentum and base_momentum. Steps past T are clamped to T.
 */

typedef enum sched_kind {
    SCHED_CONSTANT,
    SCHED_STEP,
    SCHED_COSINE_WARMUP,
    SCHED_ONE_CYCLE
} sched_kind;

typedef struct sched_config {
    sched_kind kind;
    double base_lr; /* the optimizer's lr; max_lr for ONE_CYCLE */
    /* STEP */
    int64_t step_size;
    double gamma;
    /* COSINE_WARMUP */
    int64_t warmup_steps;
    double start_factor;
    double eta_min;
    /* COSINE_WARMUP and ONE_CYCLE */
    int64_t total_steps;
    /* ONE_CYCLE */
    double pct_start;
    double div_factor;
    double final_div_factor;
    double base_momentum;
    double max_momentum;
} sched_config;

/* Defaults: STEP gamma 0.1; COSINE_WARMUP start_factor 1/3, eta_min 0; ONE_CYCLE pct_start
 * 0.3, div_factor 25, final_div_factor 1e4, momentum 0.85..0.95. Steps/sizes are left 0 and
 * must be set. */
sched_config sched_config_default(sched_kind kind, double base_lr);
graft_status sched_check(const sched_config *c, graft_err *err);
/* The learning rate for step t (t >= 0); assumes sched_check passed. */
double sched_lr(const sched_config *c, int64_t t);
/* ONE_CYCLE's momentum (SGD momentum or Adam beta1) for step t; other kinds: -1 (no change). */
double sched_momentum(const sched_config *c, int64_t t);

/*
 * ReduceLROnPlateau (torch.optim.lr_scheduler.ReduceLROnPlateau), fed one metric per epoch:
 *   better = min mode: metric < best*(1-threshold) (rel) or best - threshold (abs);
 *            max mode: metric > best*(1+threshold) (rel) or best + threshold (abs)
 *   better: best = metric, bad = 0; else bad += 1
 *   in cooldown (cooldown_counter > 0): cooldown_counter -= 1, bad = 0
 *   bad > patience: new = max(lr*factor, min_lr); lr = new if lr - new > eps;
 *                   cooldown_counter = cooldown; bad = 0
 * All fields are plain state, to be saved in checkpoints as they are.
 */
typedef struct plateau {
    /* settings */
    bool mode_max;
    bool threshold_abs;
    double factor;
    int64_t patience;
    double threshold;
    int64_t cooldown;
    double min_lr;
    double eps;
    /* state */
    double lr;
    double best;
    int64_t num_bad_epochs;
    int64_t cooldown_counter;
    int64_t last_epoch;
} plateau;

/* PyTorch's defaults: mode min, factor 0.1, patience 10, threshold 1e-4 rel, cooldown 0,
 * min_lr 0, eps 1e-8; starting learning rate lr. */
graft_status plateau_init(plateau *p, double lr, graft_err *err);
/* Checks the settings after the caller changed them and resets best for the mode. */
graft_status plateau_reset(plateau *p, graft_err *err);
/* Feed one metric; returns the learning rate to use from now on (also in p->lr). A NaN metric
 * counts as not better (as in PyTorch). */
double plateau_step(plateau *p, double metric);

#endif

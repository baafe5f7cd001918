/* schedule.c: closed-form learning-rate schedules and the ReduceLROnPlateau state machine. */
#include "train/schedule.h"

#include <math.h>

static const double pi = 3.14159265358979323846;

sched_config sched_config_default(sched_kind kind, double base_lr) {
    sched_config c = {0};
    c.kind = kind;
    c.base_lr = base_lr;
    c.gamma = 0.1;
    c.start_factor = 1.0 / 3.0;
    c.pct_start = 0.3;
    c.div_factor = 25.0;
    c.final_div_factor = 1e4;
    c.base_momentum = 0.85;
    c.max_momentum = 0.95;
    return c;
}

graft_status sched_check(const sched_config *c, graft_err *err) {
    if (!(c->base_lr >= 0.0) || !isfinite(c->base_lr))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "scheduler: base lr %g", c->base_lr);
    switch (c->kind) {
    case SCHED_CONSTANT:
        return GRAFT_OK;
    case SCHED_STEP:
        if (c->step_size <= 0)
            return err_set(err, GRAFT_E_INVALID_ARGUMENT, "step scheduler: step_size %lld <= 0",
                           (long long)c->step_size);
        return GRAFT_OK;
    case SCHED_COSINE_WARMUP:
        if (c->warmup_steps < 0 || c->total_steps <= c->warmup_steps)
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "cosine scheduler: need 0 <= warmup_steps (%lld) < total_steps (%lld)",
                           (long long)c->warmup_steps, (long long)c->total_steps);
        if (!(c->start_factor > 0.0 && c->start_factor <= 1.0))
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "cosine scheduler: start_factor %g not in (0, 1]", c->start_factor);
        return GRAFT_OK;
    case SCHED_ONE_CYCLE:
        if (c->total_steps <= 0)
            return err_set(err, GRAFT_E_INVALID_ARGUMENT, "one-cycle: total_steps <= 0");
        if (!(c->pct_start >= 0.0 && c->pct_start <= 1.0))
            return err_set(err, GRAFT_E_INVALID_ARGUMENT, "one-cycle: pct_start %g", c->pct_start);
        /* PyTorch divides by e1 and by e2 - e1: both must be non-zero */
        double e1 = c->pct_start * (double)c->total_steps - 1.0;
        double e2 = (double)c->total_steps - 1.0;
        if (e1 == 0.0 || e2 == e1)
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "one-cycle: total_steps %lld and pct_start %g give an empty phase",
                           (long long)c->total_steps, c->pct_start);
        if (!(c->div_factor > 0.0 && c->final_div_factor > 0.0))
            return err_set(err, GRAFT_E_INVALID_ARGUMENT, "one-cycle: div factors must be > 0");
        return GRAFT_OK;
    }
    return err_set(err, GRAFT_E_INVALID_ARGUMENT, "scheduler: unknown kind %d", (int)c->kind);
}

static double anneal_cos(double start, double end, double pct) {
    return end + (start - end) / 2.0 * (cos(pi * pct) + 1.0);
}

/* The value of a two-phase one-cycle curve a -> b -> c at step t. */
static double one_cycle_value(const sched_config *c, int64_t t, double a, double b, double end) {
    if (t > c->total_steps) t = c->total_steps;
    double e1 = c->pct_start * (double)c->total_steps - 1.0;
    double e2 = (double)c->total_steps - 1.0;
    double s = (double)t;
    if (s <= e1) return anneal_cos(a, b, s / e1);
    return anneal_cos(b, end, (s - e1) / (e2 - e1));
}

double sched_lr(const sched_config *c, int64_t t) {
    if (t < 0) t = 0;
    switch (c->kind) {
    case SCHED_CONSTANT:
        return c->base_lr;
    case SCHED_STEP:
        return c->base_lr * pow(c->gamma, (double)(t / c->step_size));
    case SCHED_COSINE_WARMUP: {
        int64_t w = c->warmup_steps;
        if (t < w)
            return c->base_lr * (c->start_factor + (1.0 - c->start_factor) * (double)t / (double)w);
        if (t >= c->total_steps) return c->eta_min;
        double p = (double)(t - w) / (double)(c->total_steps - w);
        return c->eta_min + (c->base_lr - c->eta_min) * (1.0 + cos(pi * p)) / 2.0;
    }
    case SCHED_ONE_CYCLE: {
        double initial = c->base_lr / c->div_factor;
        return one_cycle_value(c, t, initial, c->base_lr, initial / c->final_div_factor);
    }
    }
    return c->base_lr;
}

double sched_momentum(const sched_config *c, int64_t t) {
    if (c->kind != SCHED_ONE_CYCLE) return -1.0;
    if (t < 0) t = 0;
    return one_cycle_value(c, t, c->max_momentum, c->base_momentum, c->max_momentum);
}

graft_status plateau_init(plateau *p, double lr, graft_err *err) {
    *p = (plateau){0};
    p->factor = 0.1;
    p->patience = 10;
    p->threshold = 1e-4;
    p->eps = 1e-8;
    p->lr = lr;
    return plateau_reset(p, err);
}

graft_status plateau_reset(plateau *p, graft_err *err) {
    if (!(p->factor < 1.0) || !(p->factor >= 0.0))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "plateau: factor %g not in [0, 1)",
                       p->factor);
    if (p->patience < 0 || p->cooldown < 0 || !(p->threshold >= 0.0) || !(p->min_lr >= 0.0))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                       "plateau: patience, cooldown, threshold and min_lr must be >= 0");
    if (!(p->lr >= 0.0)) return err_set(err, GRAFT_E_INVALID_ARGUMENT, "plateau: lr %g", p->lr);
    p->best = p->mode_max ? -INFINITY : INFINITY;
    p->num_bad_epochs = 0;
    p->cooldown_counter = 0;
    p->last_epoch = 0;
    return GRAFT_OK;
}

static bool plateau_better(const plateau *p, double a) {
    double b = p->best;
    if (p->mode_max) return p->threshold_abs ? a > b + p->threshold : a > b * (1.0 + p->threshold);
    return p->threshold_abs ? a < b - p->threshold : a < b * (1.0 - p->threshold);
}

double plateau_step(plateau *p, double metric) {
    p->last_epoch++;
    if (plateau_better(p, metric)) {
        p->best = metric;
        p->num_bad_epochs = 0;
    } else {
        p->num_bad_epochs++;
    }
    if (p->cooldown_counter > 0) {
        p->cooldown_counter--;
        p->num_bad_epochs = 0;
    }
    if (p->num_bad_epochs > p->patience) {
        double reduced = fmax(p->lr * p->factor, p->min_lr);
        if (p->lr - reduced > p->eps) p->lr = reduced;
        p->cooldown_counter = p->cooldown;
        p->num_bad_epochs = 0;
    }
    return p->lr;
}

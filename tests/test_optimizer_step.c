/* test_optimizer_step.c: the OptimizerStep op (src/ops/optimizer_step.h) run through graph/exec
 * (optim_graph.c) against the trainer's former sequence of calls (loss_scale_unscale and
 * loss_scale_update, clip_grad_norm, optim_step): bit for bit, for every optimizer and option,
 * over several steps; and its errors. With --device cuda:0 (the GPU checks): the op's CUDA kernel
 * with everything resident on the device, against the same CPU sequence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "test_util.h"
#include "train/loss_scale.h"
#include "train/optim.h"
#include "train/optim_graph.h"

#define N_PARAMS 3
#define STEPS 12
/* the last is over optim.c's threaded size */
static const int64_t numel[N_PARAMS] = {7, 300, 70000};

typedef struct side {
    float *w[N_PARAMS], *g[N_PARAMS];
    optim_param params[N_PARAMS];
    optim *opt;
    loss_scaler scaler;
    int64_t skipped;
} side;

typedef struct variant {
    const char *name;
    optim_config cfg;
    float max_norm; /* > 0: clip */
    bool fp16;
    int inf_step; /* fp16: the step whose gradient has an inf (-1: none) */
} variant;

static bool side_init(side *s, const optim_config *cfg) {
    memset(s, 0, sizeof *s);
    uint64_t r = 7;
    for (int i = 0; i < N_PARAMS; i++) {
        s->w[i] = malloc(sizeof(float) * (size_t)numel[i]);
        s->g[i] = calloc((size_t)numel[i], sizeof(float));
        if (!s->w[i] || !s->g[i]) return false;
        for (int64_t j = 0; j < numel[i]; j++) s->w[i][j] = (float)(rng_uniform(&r) - 0.5);
        s->params[i] = (optim_param){.data = s->w[i],
                                     .grad = s->g[i],
                                     .numel = numel[i],
                                     .decay = i != 1,
                                     .lr_scale = i == 2 ? 0.3 : 0.0};
    }
    s->scaler = loss_scaler_default();
    s->scaler.growth_interval = 3;
    graft_err e;
    return optim_create(&s->opt, cfg, s->params, N_PARAMS, &e) == GRAFT_OK;
}

static void side_free(side *s) {
    for (int i = 0; i < N_PARAMS; i++) free(s->w[i]), free(s->g[i]);
    optim_free(s->opt);
}

/* The step's gradients (the same on both sides), scaled as fp16's loss would be. */
static void fill_grads(side *s, const variant *v, int step, float scale) {
    uint64_t r = 100 + (uint64_t)step;
    float mult = v->fp16 ? scale : 1.0f;
    for (int i = 0; i < N_PARAMS; i++)
        for (int64_t j = 0; j < numel[i]; j++) s->g[i][j] = (float)(rng_uniform(&r) - 0.45) * mult;
    if (step == v->inf_step) s->g[1][5] = INFINITY;
}

/* The trainer's former step (trainer.c's apply_grads before the op). */
static graft_status reference_step(side *s, const variant *v, float lr, graft_err *e) {
    bool skip = false;
    if (v->fp16) {
        TRY(loss_scale_unscale(&skip, s->g, numel, N_PARAMS, &s->scaler, e));
        loss_scale_update(&s->scaler, skip);
    }
    if (skip) s->skipped++;
    if (!skip && v->max_norm > 0.0f) {
        float total;
        TRY(clip_grad_norm(&total, s->g, numel, N_PARAMS, v->max_norm, e));
    }
    if (!skip) TRY(optim_step(s->opt, lr, e));
    for (int i = 0; i < N_PARAMS; i++) memset(s->g[i], 0, sizeof(float) * (size_t)numel[i]);
    return GRAFT_OK;
}

static bool same_state(side *a, side *b, char *why, size_t cap) {
    for (int i = 0; i < N_PARAMS; i++)
        if (memcmp(a->w[i], b->w[i], sizeof(float) * (size_t)numel[i]))
            return snprintf(why, cap, "weights %d differ", i), false;
    for (int k = 0; k < optim_state_count(a->opt); k++) {
        optim_state_buf x, y;
        graft_err e;
        if (optim_state_get(&x, a->opt, k, &e) || optim_state_get(&y, b->opt, k, &e) ||
            memcmp(x.data, y.data, sizeof(float) * (size_t)x.numel))
            return snprintf(why, cap, "state %s differs", x.name), false;
    }
    if (optim_step_count(a->opt) != optim_step_count(b->opt) || a->skipped != b->skipped ||
        a->scaler.scale != b->scaler.scale || a->scaler.growth_tracker != b->scaler.growth_tracker)
        return snprintf(why, cap, "steps %lld/%lld, skipped %lld/%lld, scale %g/%g",
                        (long long)optim_step_count(a->opt), (long long)optim_step_count(b->opt),
                        (long long)a->skipped, (long long)b->skipped, a->scaler.scale,
                        b->scaler.scale),
               false;
    return true;
}

static const char *device; /* --device: side b runs there */

/* The worst relative difference of b's weights and state from a's (device runs). */
static double worst_difference(side *a, side *b) {
    double worst = 0.0;
    for (int k = -N_PARAMS; k < optim_state_count(a->opt); k++) {
        const float *x = NULL, *y = NULL;
        int64_t n = 0;
        if (k < 0) {
            x = a->w[k + N_PARAMS], y = b->w[k + N_PARAMS], n = numel[k + N_PARAMS];
        } else {
            optim_state_buf bx, by;
            graft_err e;
            if (optim_state_get(&bx, a->opt, k, &e) || optim_state_get(&by, b->opt, k, &e))
                return INFINITY;
            x = bx.data, y = by.data, n = bx.numel;
        }
        for (int64_t j = 0; j < n; j++) {
            double d = fabs((double)x[j] - y[j]) / fmax(fabs((double)x[j]), 1e-3);
            if (!(d <= worst)) worst = d;
        }
    }
    return worst;
}

/* Side b's steps: on the host (bit for bit with a, checked every step) or on the device. */
static graft_status steps_b(side *a, side *b, optim_graph *og, const variant *v, char *why,
                            size_t cap, graft_err *e) {
    for (int step = 0; step < STEPS; step++) {
        float lr = 0.05f * (1.0f + 0.1f * (float)step), scale = a->scaler.scale;
        fill_grads(a, v, step, scale);
        fill_grads(b, v, step, scale);
        bool skipped = false;
        float norm = 0.0f;
        TRY(reference_step(a, v, lr, e));
        if (device) TRY(optim_graph_upload_grads(og, b->opt, e));
        TRY(optim_graph_step(og, b->opt, lr, v->fp16 ? &b->scaler : NULL, &skipped, &norm, e));
        b->skipped += skipped;
        if (v->max_norm > 0.0f && !skipped && !(norm > 0.0f)) snprintf(why, cap, "no norm");
        char differs[120];
        if (!device && !same_state(a, b, differs, sizeof differs)) {
            snprintf(why, cap, "step %d: %s", step, differs);
            return GRAFT_OK;
        }
    }
    if (!device) return GRAFT_OK;
    int64_t skipped_dev = 0;
    TRY(optim_graph_download(og, b->opt, &b->scaler, &skipped_dev, e));
    b->skipped = skipped_dev;
    double worst = worst_difference(a, b);
    char differs[120] = "";
    if (!same_state(a, b, differs, sizeof differs) && !(worst <= 1e-5))
        snprintf(why, cap, "after %d steps: %s (worst relative %.3g)", STEPS, differs, worst);
    else
        printf("  %s: worst relative difference %.3g after %d steps\n", v->name, worst, STEPS);
    return GRAFT_OK;
}

static void run_variant(const variant *v) {
    side a, b;
    bool ok = side_init(&a, &v->cfg) && side_init(&b, &v->cfg);
    optim_graph og = {0};
    graft_err e = {0};
    graft_status st = ok ? optim_graph_init_on(&og, b.opt, v->fp16, v->max_norm, device, 0, &e)
                         : GRAFT_E_OUT_OF_MEMORY;
    if (st == GRAFT_OK && device) st = optim_graph_upload(&og, b.opt, &b.scaler, &e);
    char why[200] = "";
    if (st == GRAFT_OK) st = steps_b(&a, &b, &og, v, why, sizeof why, &e);
    bool zeroed = true;
    for (int i = 0; !device && i < N_PARAMS; i++)
        for (int64_t j = 0; j < numel[i]; j++) zeroed = zeroed && b.g[i][j] == 0.0f;
    CHECK(v->name, st == GRAFT_OK && !why[0] && zeroed, "%s%s%s (%s)", e.msg, why,
          zeroed ? "" : " gradients not zeroed", v->fp16 ? "fp16" : "fp32");
    if (st == GRAFT_OK && v->fp16 && v->inf_step >= 0)
        CHECK("optimizer_step_fp16_skips", b.skipped == 1, "skipped %lld", (long long)b.skipped);
    optim_graph_free(&og);
    side_free(&a), side_free(&b);
}

static optim_config cfg(optim_kind kind, float wd, float momentum, bool nesterov, bool amsgrad) {
    optim_config c = optim_config_default(kind);
    c.weight_decay = wd;
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.amsgrad = amsgrad;
    return c;
}

/* A negative rate and a graph bound to the wrong sizes are refused, naming the op. */
static void test_errors(void) {
    side s;
    optim_config c = cfg(OPTIM_SGD, 0, 0.9f, false, false);
    optim_graph og;
    graft_err e = {0};
    bool ok = side_init(&s, &c) && optim_graph_init(&og, s.opt, false, 0, 0, &e) == GRAFT_OK;
    bool skipped;
    float norm;
    graft_status st = ok ? optim_graph_step(&og, s.opt, -1.0f, NULL, &skipped, &norm, &e) : 0;
    CHECK("optimizer_step_negative_lr",
          ok && st != GRAFT_OK && strstr(e.msg, "OptimizerStep") && strstr(e.msg, "learning rate"),
          "%d: %s", st, e.msg);
    if (ok) {
        og.inputs[3].dims[0] = 5; /* parameter 0's gradient bound with another size */
        st = optim_graph_step(&og, s.opt, 0.1f, NULL, &skipped, &norm, &e);
        CHECK("optimizer_step_bad_shape", st != GRAFT_OK && strstr(e.msg, "input 3"), "%d: %s", st,
              e.msg);
        optim_graph_free(&og);
    }
    side_free(&s);
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "--device")) device = argv[2];
    const variant vs[] = {
        {"optimizer_step_sgd", cfg(OPTIM_SGD, 0, 0, false, false), 0, false, -1},
        {"optimizer_step_sgd_momentum_wd", cfg(OPTIM_SGD, 1e-2f, 0.9f, false, false), 0, false, -1},
        {"optimizer_step_sgd_nesterov", cfg(OPTIM_SGD, 1e-3f, 0.8f, true, false), 0, false, -1},
        {"optimizer_step_adam_wd", cfg(OPTIM_ADAM, 1e-2f, 0, false, false), 0, false, -1},
        {"optimizer_step_adam_amsgrad", cfg(OPTIM_ADAM, 0, 0, false, true), 0, false, -1},
        {"optimizer_step_adamw", cfg(OPTIM_ADAMW, 1e-2f, 0, false, false), 0, false, -1},
        {"optimizer_step_adamw_amsgrad", cfg(OPTIM_ADAMW, 5e-2f, 0, false, true), 0, false, -1},
        {"optimizer_step_lamb", cfg(OPTIM_LAMB, 1e-2f, 0, false, false), 0, false, -1},
        {"optimizer_step_sgd_clip", cfg(OPTIM_SGD, 0, 0.9f, false, false), 0.5f, false, -1},
        {"optimizer_step_adamw_clip", cfg(OPTIM_ADAMW, 1e-2f, 0, false, false), 0.5f, false, -1},
        {"optimizer_step_adamw_fp16", cfg(OPTIM_ADAMW, 1e-2f, 0, false, false), 0, true, 4},
        {"optimizer_step_lamb_fp16_clip", cfg(OPTIM_LAMB, 1e-2f, 0, false, false), 1.0f, true, 2},
    };
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++) run_variant(&vs[i]);
    if (!device) test_errors();
    return test_failures ? 1 : 0;
}

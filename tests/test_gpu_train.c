/* test_gpu_train.c: head training on the GPU against the CPU. Each case trains the same head
 * (same seed, so the same initial weights, data order and hyper-parameters) for about 100 steps
 * through trainer_run, once with no device and once on a cuda:0 model, and compares every
 * step's loss and the epoch losses (1e-4 relative in fp32, 1e-2 in bf16/fp16), the final
 * weights (1e-4 of the largest) and the optimizer's step count. Cases: SGD with momentum,
 * Nesterov with accumulation, one-cycle SGD, Adam with label smoothing and class weights, AdamW
 * with cosine warm-up and validation, LAMB, BCE with pos_weight, MSE, clipping, bf16, fp16 with an
 * injected overflow, dropout (the same masks: drawn on the host); the features stay in GPU memory
 * (copied once, not per epoch), or are gathered on the host and copied per batch when told; and
 * the public fit on the digits CNN agrees with the CPU. Both runs go through the head's step
 * graph (head_step.h): on the CPU backend and on the CUDA one, where most steps replay its
 * recording (checked: `<case>_replayed`, unless the loss reads weights on the host).
 * Without a GPU every case prints one SKIP line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/rng.h"
#include "../src/train/trainer.h"
#include "test_util.h"

enum { N = 200, D = 24, C = 5, B = 16, VN = 40, MAX_STEPS = 256, MAX_EPOCHS = 64 };

typedef struct data {
    float x[N * D], vx[VN * D];
    int64_t cls[N], vcls[VN];
    float bce[N * C], mse[N * C];
} data;

/* Features in [-1, 1); labels from a fixed linear map with noise, so that the head can learn. */
static void make_data(data *d) {
    uint64_t s = 0x5eed;
    float w[C * D];
    for (int i = 0; i < C * D; i++) w[i] = (float)(2.0 * rng_uniform(&s) - 1.0);
    for (int i = 0; i < N * D; i++) d->x[i] = (float)(2.0 * rng_uniform(&s) - 1.0);
    for (int i = 0; i < VN * D; i++) d->vx[i] = (float)(2.0 * rng_uniform(&s) - 1.0);
    for (int i = 0; i < N + VN; i++) {
        const float *xi = i < N ? d->x + i * D : d->vx + (i - N) * D;
        int best = 0;
        double z[C];
        for (int k = 0; k < C; k++) {
            z[k] = 0.3 * (2.0 * rng_uniform(&s) - 1.0);
            for (int j = 0; j < D; j++) z[k] += w[k * D + j] * xi[j];
            if (z[k] > z[best]) best = k;
            if (i < N) {
                d->bce[i * C + k] = z[k] > 0.5 ? 1.0f : z[k] < -0.5 ? 0.0f : 0.5f;
                d->mse[i * C + k] = (float)(0.5 * z[k]);
            }
        }
        if (i < N)
            d->cls[i] = best;
        else
            d->vcls[i - N] = best;
    }
}

typedef struct record {
    double steps[MAX_STEPS], epochs[MAX_EPOCHS], val[MAX_EPOCHS];
    int n_steps, n_epochs;
    graft_trainer *t;
    float inject; /* > 0: the loss scale set after step inject_at */
    int64_t inject_at;
    bool injected;
} record;

static int on_report(const graft_train_report *r, void *user) {
    record *rec = user;
    if (r->epoch_end) {
        if (rec->n_epochs < MAX_EPOCHS) {
            rec->val[rec->n_epochs] = r->val_loss;
            rec->epochs[rec->n_epochs++] = r->loss;
        }
    } else if (rec->n_steps < MAX_STEPS) {
        rec->steps[rec->n_steps++] = r->loss;
    }
    if (rec->inject > 0 && !rec->injected && !r->epoch_end && r->step == rec->inject_at) {
        rec->t->scaler.scale = rec->inject;
        rec->injected = true;
    }
    return 0;
}

typedef struct tcase {
    const char *name;
    graft_train_options o;
    graft_head_options h;
    const float *class_weight, *pos_weight;
    float inject;
    bool validate, force_host;
    double tol;
    int64_t min_skipped; /* fp16 overflow: steps that must have been skipped */
} tcase;

/* A trainer on model m (NULL: the CPU), set up as graft_trainer_create would. */
static graft_trainer *make_trainer(graft_model *m, const tcase *c, record *rec, graft_err *e) {
    graft_trainer *t = calloc(1, sizeof *t);
    t->model = m;
    t->head_options = c->h;
    t->options = c->o;
    t->options.callback = on_report;
    t->options.callback_user = rec;
    t->scaler = loss_scaler_default();
    t->best_metric = INFINITY;
    t->rng = c->o.seed ^ 0x646174616f72646eull;
    t->loss.kind = (loss_kind)c->o.loss;
    t->loss.label_smoothing = c->o.label_smoothing;
    if (c->class_weight) {
        t->class_weights = malloc(sizeof(float) * C);
        memcpy(t->class_weights, c->class_weight, sizeof(float) * C);
        t->loss.class_weight = t->class_weights;
    }
    t->loss.pos_weight = c->pos_weight;
    t->gpu.force_host_features = c->force_host;
    rec->t = t;
    rec->inject = c->inject;
    rec->inject_at = 50;
    if (trainer_setup(t, D, e) != GRAFT_OK) {
        graft_trainer_free(t);
        return NULL;
    }
    return t;
}

static graft_status train(graft_model *m, const tcase *c, const data *d, record *rec,
                          graft_trainer **out, graft_err *e) {
    memset(rec, 0, sizeof *rec);
    *out = make_trainer(m, c, rec, e);
    if (!*out) return GRAFT_E_INVALID_ARGUMENT;
    const void *y = c->o.loss == GRAFT_LOSS_CROSS_ENTROPY ? (const void *)d->cls
                    : c->o.loss == GRAFT_LOSS_BCE_LOGITS  ? (const void *)d->bce
                                                          : (const void *)d->mse;
    bool v = c->validate;
    return trainer_run(*out, d->x, y, N, v ? d->vx : NULL, v ? d->vcls : NULL, v ? VN : 0, e);
}

static double rel(double a, double b) {
    return fabs(a - b) / fmax(fabs(b), 1e-12);
}

/* Largest difference of the two heads' master weights, over the largest weight. */
static double weight_error(const graft_trainer *a, const graft_trainer *b) {
    double diff = 0, big = 1e-12;
    for (int i = 0; i < a->n_params; i++)
        for (int64_t j = 0; j < a->params[i].numel; j++) {
            diff = fmax(diff, fabs(a->params[i].data[j] - b->params[i].data[j]));
            big = fmax(big, fabs(b->params[i].data[j]));
        }
    return diff / big;
}

/* Worst relative errors of per-step, per-epoch and validation losses. */
static double loss_error(const record *g, const record *c) {
    double worst = g->n_steps == c->n_steps && g->n_epochs == c->n_epochs ? 0 : INFINITY;
    for (int i = 0; i < g->n_steps && i < c->n_steps; i++)
        worst = fmax(worst, rel(g->steps[i], c->steps[i]));
    for (int i = 0; i < g->n_epochs && i < c->n_epochs; i++) {
        worst = fmax(worst, rel(g->epochs[i], c->epochs[i]));
        if (c->val[i] >= 0) worst = fmax(worst, rel(g->val[i], c->val[i]));
    }
    return worst;
}

static void run_case(graft_model *gpu, const tcase *c, const data *d) {
    graft_err e = {0};
    record rc, rg;
    graft_trainer *tc = NULL, *tg = NULL;
    graft_status sc = train(NULL, c, d, &rc, &tc, &e);
    graft_status sg = sc == GRAFT_OK ? train(gpu, c, d, &rg, &tg, &e) : sc;
    if (sc != GRAFT_OK || sg != GRAFT_OK || !tg->gpu.used) {
        CHECK(c->name, 0, "CPU status %d, GPU status %d, on GPU %d: %s", sc, sg,
              tg ? tg->gpu.used : 0, e.msg);
    } else {
        double le = loss_error(&rg, &rc), we = weight_error(tg, tc);
        bool same = tg->step == tc->step &&
                    optim_step_count(tg->opt) == optim_step_count(tc->opt) &&
                    tg->skipped_steps == tc->skipped_steps && tg->scaler.scale == tc->scaler.scale;
        same = same && tc->skipped_steps >= c->min_skipped;
        CHECK(c->name, le <= c->tol && we <= c->tol && same && rc.n_steps >= 100,
              "loss rel. error %.3g, weights %.3g (tolerance %.1g); steps %lld/%lld, optimizer "
              "steps %lld/%lld, skipped %lld/%lld, scale %g/%g, %d steps recorded",
              le, we, c->tol, (long long)tg->step, (long long)tc->step,
              (long long)optim_step_count(tg->opt), (long long)optim_step_count(tc->opt),
              (long long)tg->skipped_steps, (long long)tc->skipped_steps, (double)tg->scaler.scale,
              (double)tc->scaler.scale, rc.n_steps);
        printf("  %s: %d steps, worst loss error %.2g, weights %.2g, skipped %lld, %lld steps "
               "replayed a recording\n",
               c->name, rc.n_steps, le, we, (long long)tc->skipped_steps,
               (long long)tg->hs.run.x.replays);
        /* weights the loss reads on the host keep the step node by node (exec_place.c) */
        if (!c->class_weight && !c->pos_weight) {
            char name[128];
            snprintf(name, sizeof name, "%s_replayed", c->name);
            CHECK(name, tg->hs.run.x.replays >= rc.n_steps / 2, "%lld of %d steps replayed",
                  (long long)tg->hs.run.x.replays, rc.n_steps);
        }
    }
    graft_trainer_free(tc);
    graft_trainer_free(tg);
}

static tcase base(const char *name, graft_optimizer opt, double lr) {
    tcase c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.o = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    c.o.optimizer = opt, c.o.lr = lr, c.o.weight_decay = 1e-3, c.o.momentum = 0.9;
    c.o.batch_size = B, c.o.epochs = 8, c.o.seed = 7; /* 13 batches an epoch, the last of 8 */
    c.h = (graft_head_options)GRAFT_HEAD_OPTIONS_INIT;
    c.h.n_outputs = C, c.h.n_hidden = 1, c.h.hidden[0] = 16, c.h.seed = 11;
    c.tol = 1e-4;
    return c;
}

static int make_cases(tcase *cs) {
    static const float class_w[C] = {1.0f, 2.0f, 0.5f, 1.5f, 1.0f};
    static const float pos_w[C] = {2.0f, 1.0f, 0.5f, 3.0f, 1.0f};
    int n = 0;
    cs[n++] = base("gpu_train_sgd_momentum", GRAFT_OPTIMIZER_SGD, 0.05);
    cs[n] = base("gpu_train_sgd_nesterov_accumulate", GRAFT_OPTIMIZER_SGD, 0.05);
    cs[n].o.nesterov = 1, cs[n].o.accumulate = 2, cs[n].h.activation = GRAFT_ACTIVATION_TANH;
    n++;
    cs[n] = base("gpu_train_sgd_onecycle", GRAFT_OPTIMIZER_SGD, 0.1);
    cs[n++].o.scheduler = GRAFT_SCHEDULER_ONECYCLE;
    cs[n] = base("gpu_train_adam_smoothing_weights", GRAFT_OPTIMIZER_ADAM, 1e-2);
    cs[n].o.label_smoothing = 0.1f, cs[n].class_weight = class_w;
    cs[n++].h.activation = GRAFT_ACTIVATION_GELU;
    cs[n] = base("gpu_train_adamw_cosine_validation", GRAFT_OPTIMIZER_ADAMW, 1e-2);
    cs[n].o.weight_decay = 0.05, cs[n].o.scheduler = GRAFT_SCHEDULER_COSINE;
    cs[n].o.warmup_steps = 10, cs[n].o.min_lr = 1e-4, cs[n].validate = true;
    cs[n++].h.n_hidden = 0;
    cs[n] = base("gpu_train_lamb", GRAFT_OPTIMIZER_LAMB, 1e-2);
    cs[n++].o.weight_decay = 0.01;
    cs[n] = base("gpu_train_bce_pos_weight", GRAFT_OPTIMIZER_ADAM, 1e-2);
    cs[n].o.loss = GRAFT_LOSS_BCE_LOGITS, cs[n++].pos_weight = pos_w;
    cs[n] = base("gpu_train_mse", GRAFT_OPTIMIZER_SGD, 0.02);
    cs[n].o.loss = GRAFT_LOSS_MSE, cs[n++].h.n_hidden = 0;
    cs[n] = base("gpu_train_clip", GRAFT_OPTIMIZER_SGD, 0.5);
    cs[n++].o.clip_norm = 0.1;
    cs[n] = base("gpu_train_bf16", GRAFT_OPTIMIZER_ADAM, 1e-2);
    cs[n].o.precision = GRAFT_PRECISION_BF16, cs[n++].tol = 1e-2;
    /* 2^40: about twenty steps skip, halving the scale each time, before training resumes */
    cs[n] = base("gpu_train_fp16_overflow", GRAFT_OPTIMIZER_ADAM, 1e-2);
    cs[n].o.precision = GRAFT_PRECISION_FP16, cs[n].inject = 1099511627776.0f;
    cs[n].min_skipped = 1, cs[n++].tol = 1e-2;
    cs[n] = base("gpu_train_features_in_host_memory", GRAFT_OPTIMIZER_ADAM, 1e-2);
    cs[n++].force_host = true;
    /* the masks are drawn on the host from the head's RNG either way: the same units drop */
    cs[n] = base("gpu_train_dropout", GRAFT_OPTIMIZER_ADAM, 1e-2);
    cs[n++].h.dropout = 0.3f;
    return n;
}

/* The features go to GPU memory once: later epochs gather from there, copying nothing. */
static void check_residency(graft_model *gpu, const data *d) {
    tcase c = base("gpu_train_features_copied_once", GRAFT_OPTIMIZER_ADAM, 1e-2);
    graft_err e = {0};
    record rec;
    graft_trainer *t = NULL;
    graft_status st = train(gpu, &c, d, &rec, &t, &e);
    int64_t want = (int64_t)sizeof(float) * N * D;
    CHECK(c.name,
          st == GRAFT_OK && t->gpu.used && t->gpu.place == 1 && t->gpu.feature_h2d_bytes == want,
          "status %d (%s), on GPU %d, place %d, %lld feature bytes copied over %d epochs (want "
          "%lld)",
          st, e.msg, t ? t->gpu.used : 0, t ? t->gpu.place : -1,
          (long long)(t ? t->gpu.feature_h2d_bytes : -1), rec.n_epochs, (long long)want);
    graft_trainer_free(t);
}

/* graft_trainer_fit on the digits CNN, on the CPU and on cuda:0: the epoch losses agree (the
 * backbones' features differ by fp32 rounding only; the last backbone batch, 4 of 16, runs
 * padded to 16 on the GPU: backbone_pad.c). */
static int fit_digits(graft_ctx *ctx, const char *path, record *rec, graft_trainer **out) {
    enum { M = 100 };
    static float images[M * 64];
    static int64_t labels[M];
    uint64_t s = 3;
    for (int i = 0; i < M * 64; i++) images[i] = (float)(16.0 * rng_uniform(&s));
    for (int i = 0; i < M; i++) labels[i] = (int64_t)rng_below(&s, 5);
    graft_model *m = NULL;
    graft_status st = graft_model_load(ctx, path, &m);
    if (st == GRAFT_OK) st = graft_model_cut(m, "auto", GRAFT_POOLING_AUTO);
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 5, ho.n_hidden = 1, ho.hidden[0] = 32, ho.seed = 5;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.optimizer = GRAFT_OPTIMIZER_ADAMW, to.lr = 1e-2, to.batch_size = 16, to.epochs = 17;
    to.callback = on_report, to.callback_user = rec;
    memset(rec, 0, sizeof *rec);
    *out = NULL;
    if (st == GRAFT_OK) st = graft_trainer_create(m, &ho, &to, out);
    graft_named_tensor in = {"input", {GRAFT_DTYPE_F32, 4, {M, 1, 8, 8}, images}};
    graft_tensor y = {GRAFT_DTYPE_I64, 1, {M}, labels};
    if (st == GRAFT_OK) st = graft_trainer_fit(*out, &in, 1, &y, NULL, 0, NULL);
    if (st != GRAFT_OK) printf("  digits: %s\n", graft_last_error(ctx));
    return st;
}

static void check_public_fit(const char *path) {
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    graft_ctx *cpu = NULL, *gpu = NULL;
    graft_ctx_create(&o, &cpu);
    o.device = "cuda:0";
    graft_ctx_create(&o, &gpu);
    record rc, rg;
    graft_trainer *tc = NULL, *tg = NULL;
    int sc = fit_digits(cpu, path, &rc, &tc), sg = fit_digits(gpu, path, &rg, &tg);
    /* The features come from the GPU's backbone here (within ~1e-6 of the CPU's), and 17 epochs
     * of memorising random labels amplify that: the first steps must agree closely, the end
     * only roughly. The trajectory cases above feed both sides identical features. */
    bool ok = sc == GRAFT_OK && sg == GRAFT_OK && rg.n_steps == rc.n_steps && rc.n_steps > 8 &&
              rg.n_epochs == rc.n_epochs && rc.n_epochs > 0;
    double early = 0, last = INFINITY;
    for (int i = 0; ok && i < 6; i++) early = fmax(early, rel(rg.steps[i], rc.steps[i]));
    if (ok) last = rel(rg.epochs[rg.n_epochs - 1], rc.epochs[rc.n_epochs - 1]);
    double le = ok ? loss_error(&rg, &rc) : INFINITY;
    double we = ok ? weight_error(tg, tc) : INFINITY;
    CHECK("gpu_train_public_fit_digits", ok && early <= 1e-4 && last <= 0.1 && tg->gpu.used,
          "CPU status %d, GPU status %d, on GPU %d, first steps %.3g, last epoch %.3g", sc, sg,
          tg ? tg->gpu.used : 0, early, last);
    printf("  digits fit: %d steps, first 6 steps %.2g, last epoch %.2g, worst %.2g, weights "
           "%.2g\n",
           rc.n_steps, early, last, le, we);
    graft_model *mc = tc ? tc->model : NULL, *mg = tg ? tg->model : NULL;
    graft_trainer_free(tc), graft_trainer_free(tg);
    graft_model_free(mc), graft_model_free(mg);
    graft_ctx_free(cpu), graft_ctx_free(gpu);
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "models/digits_cnn.onnx";
    static tcase cases[32];
    int n = make_cases(cases);
    const char *extra[] = {"gpu_train_features_copied_once", "gpu_train_public_fit_digits"};
    char why[256] = "this graft was built without CUDA";
    if (!graft_cuda_built() || graft_gpu_count(why, sizeof why) == 0) {
        for (int i = 0; i < n; i++) SKIP(cases[i].name, why);
        for (int i = 0; i < 2; i++) SKIP(extra[i], why);
        return 0;
    }
    graft_ctx_options o = GRAFT_CTX_OPTIONS_INIT;
    o.device = "cuda:0";
    graft_ctx *ctx = NULL;
    graft_model *gpu = NULL;
    graft_ctx_create(&o, &ctx);
    if (graft_model_load(ctx, model, &gpu) != GRAFT_OK) {
        CHECK("gpu_train_model_loads", 0, "%s: %s", model, graft_last_error(ctx));
        graft_ctx_free(ctx);
        return 1;
    }
    static data d;
    make_data(&d);
    for (int i = 0; i < n; i++) run_case(gpu, &cases[i], &d);
    check_residency(gpu, &d);
    check_public_fit(model);
    graft_model_free(gpu);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}

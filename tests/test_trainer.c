/* test_trainer.c: the trainer's steps against PyTorch (tests/data/trainer_fixtures.txt, recorded
 * by tools/record_trainer_fixtures.py): per-step losses over 100 steps within 1e-5 relative for
 * SGD, Adam, AdamW with warm-up + cosine, SGD with ReduceLROnPlateau, LAMB, label smoothing and
 * clipping; plus mixed precision (bf16/fp16 reach the fp32 loss within 2%, an injected overflow
 * skips the step and halves the scale) and gradient accumulation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/train/trainer.h"
#include "test_fixture.h"
#include "test_util.h"

enum { N = 64, D = 10, C = 3, B = 16, STEPS = 100 };

typedef struct problem {
    float x[N * D];
    int64_t y[N];
    const double *w0, *b0, *order;
} problem;

/* A trainer with no model: the steps only need the head, loss and optimizer. */
static graft_trainer *make_trainer(const problem *p, const graft_train_options *o, graft_err *e) {
    graft_trainer *t = calloc(1, sizeof *t);
    t->head_options = (graft_head_options)GRAFT_HEAD_OPTIONS_INIT;
    t->head_options.n_outputs = C;
    t->options = *o;
    t->scaler = loss_scaler_default();
    t->loss.kind = LOSS_SOFTMAX_CE;
    t->loss.label_smoothing = o->label_smoothing;
    if (trainer_setup(t, D, e) != GRAFT_OK) return t;
    float *w = t->h.layers[0].w.data, *b = t->h.layers[0].b.data;
    for (int i = 0; i < C * D; i++) w[i] = (float)p->w0[i];
    for (int i = 0; i < C; i++) b[i] = (float)p->b0[i];
    return t;
}

static void free_trainer(graft_trainer *t) {
    if (t->head_ready) head_free(&t->h);
    head_step_free(&t->hs);
    head_graph_free(&t->hg);
    optim_graph_free(&t->og);
    optim_free(t->opt);
    free(t->params);
    free(t);
}

/* Step s's batch, in the recorded order. */
static void batch(const problem *p, int s, float *xb, int64_t *yb) {
    for (int i = 0; i < B; i++) {
        int k = (int)p->order[s * B + i];
        memcpy(xb + i * D, p->x + k * D, sizeof(float) * D);
        yb[i] = p->y[k];
    }
}

static void run_case(const fixture *f, const problem *p, const char *name,
                     const graft_train_options *o, int use_plateau) {
    char key[128], test[128];
    snprintf(test, sizeof test, "trainer_pytorch_%s", name);
    snprintf(key, sizeof key, "case.%s.losses", name);
    const double *losses = get(f, key, STEPS);
    snprintf(key, sizeof key, "case.%s.lrs", name);
    const double *lrs = get(f, key, STEPS);
    snprintf(key, sizeof key, "case.%s.w", name);
    const double *wf = get(f, key, C * D);
    if (!losses || !lrs || !wf) {
        CHECK(test, 0, "fixture lacks case %s", name);
        return;
    }
    graft_err e = {0};
    graft_trainer *t = make_trainer(p, o, &e);
    plateau pl;
    plateau_init(&pl, o->lr, &e);
    pl.factor = 0.5, pl.patience = 2;
    double worst = 0, epoch_loss = 0, worst_lr = 0;
    for (int s = 0; s < STEPS && t->head_ready; s++) {
        float xb[B * D];
        int64_t yb[B], correct;
        batch(p, s, xb, yb);
        double lr = use_plateau ? pl.lr : lrs[s], loss;
        if (fabs(lr - lrs[s]) > worst_lr) worst_lr = fabs(lr - lrs[s]);
        if (trainer_step(t, xb, yb, B, lr, &loss, &correct, &e) != GRAFT_OK) break;
        double rel = fabs(loss - losses[s]) / fabs(losses[s]);
        if (rel > worst) worst = rel;
        epoch_loss += loss;
        if (use_plateau && s % 4 == 3) {
            plateau_step(&pl, epoch_loss / 4);
            epoch_loss = 0;
        }
    }
    double wrel = 0, wmax = 1e-12;
    const float *w = t->head_ready ? t->h.layers[0].w.data : NULL;
    for (int i = 0; w && i < C * D; i++) {
        wrel = fmax(wrel, fabs(w[i] - wf[i]));
        wmax = fmax(wmax, fabs(wf[i]));
    }
    CHECK(test, t->step == STEPS && worst <= 1e-5 && worst_lr <= 1e-9 * o->lr && wrel / wmax < 1e-4,
          "%s; steps %lld, worst loss rel. error %.3g, lr error %.3g, weights %.3g", e.msg,
          (long long)t->step, worst, worst_lr, wrel / wmax);
    printf("  %s: worst per-step loss relative error %.2g, final weights %.2g\n", name, worst,
           wrel / wmax);
    free_trainer(t);
}

/* Mean loss of the last epoch (4 steps) after 100 steps of Adam at a precision. With
 * inject_scale, the loss scale is set to it before step 50, and *skipped / *scale_after report
 * that step alone. */
static double final_loss(const problem *p, graft_precision prec, float inject_scale, int *skipped,
                         float *scale_after) {
    graft_train_options o = GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = GRAFT_OPTIMIZER_ADAM, o.lr = 1e-2, o.weight_decay = 0, o.precision = prec;
    graft_err e = {0};
    graft_trainer *t = make_trainer(p, &o, &e);
    double last = 0;
    for (int s = 0; s < STEPS; s++) {
        float xb[B * D];
        int64_t yb[B], correct;
        double loss;
        batch(p, s, xb, yb);
        if (s == 50 && inject_scale > 0) t->scaler.scale = inject_scale;
        trainer_step(t, xb, yb, B, 1e-2, &loss, &correct, &e);
        if (s == 50 && scale_after) {
            /* Just the injected step: later steps skip too until the scale is sane again. */
            *scale_after = t->scaler.scale;
            if (skipped) *skipped = (int)t->skipped_steps;
            skipped = NULL;
        }
        if (s >= STEPS - 4) last += loss / 4;
    }
    if (skipped) *skipped = (int)t->skipped_steps;
    free_trainer(t);
    return last;
}

static void mixed_precision(const problem *p) {
    double f32 = final_loss(p, GRAFT_PRECISION_FP32, 0, NULL, NULL);
    double bf16 = final_loss(p, GRAFT_PRECISION_BF16, 0, NULL, NULL);
    int skipped = -1;
    double f16 = final_loss(p, GRAFT_PRECISION_FP16, 0, &skipped, NULL);
    CHECK("mixed_precision_bf16", fabs(bf16 - f32) <= 0.02 * f32, "fp32 %.5f bf16 %.5f", f32, bf16);
    CHECK("mixed_precision_fp16", fabs(f16 - f32) <= 0.02 * f32 && skipped == 0,
          "fp32 %.5f fp16 %.5f, %d skipped", f32, f16, skipped);
    printf("  final loss fp32 %.5f, bf16 %.5f, fp16 %.5f\n", f32, bf16, f16);
    float after = 0;
    skipped = -1;
    final_loss(p, GRAFT_PRECISION_FP16, 1e38f, &skipped, &after);
    CHECK("fp16_overflow_skips_and_halves", skipped == 1 && after == 0.5e38f,
          "%d steps skipped, scale after %g", skipped, (double)after);
}

/* Two accumulated half-batches make the same step as one full batch. */
static void accumulation(const problem *p) {
    graft_train_options o = GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = GRAFT_OPTIMIZER_SGD, o.lr = 0.1, o.weight_decay = 0, o.momentum = 0;
    graft_err e = {0};
    graft_trainer *full = make_trainer(p, &o, &e);
    o.accumulate = 2;
    graft_trainer *acc = make_trainer(p, &o, &e);
    for (int s = 0; s < 10; s++) {
        float xb[B * D];
        int64_t yb[B], correct;
        double loss;
        batch(p, s, xb, yb);
        trainer_step(full, xb, yb, B, 0.1, &loss, &correct, &e);
        trainer_step(acc, xb, yb, B / 2, 0.1, &loss, &correct, &e);
        trainer_step(acc, xb + B / 2 * D, yb + B / 2, B / 2, 0.1, &loss, &correct, &e);
    }
    double d = 0;
    const float *a = full->h.layers[0].w.data, *b = acc->h.layers[0].w.data;
    for (int i = 0; i < C * D; i++) d = fmax(d, fabs(a[i] - b[i]));
    CHECK("gradient_accumulation", full->step == 10 && acc->step == 10 && d < 1e-6,
          "steps %lld/%lld, max weight difference %.3g", (long long)full->step,
          (long long)acc->step, d);
    free_trainer(full), free_trainer(acc);
}

static int fixed_outputs; /* the head's outputs fixed_dlogits writes */

static graft_status fixed_dlogits(void *user, const float *logits, int64_t n, float *dlogits,
                                  graft_err *e) {
    (void)logits, (void)e;
    memcpy(dlogits, user, sizeof(float) * (size_t)(n * fixed_outputs));
    return GRAFT_OK;
}

/* Worst |a - b| over the largest |b| of n elements. */
static double rel_to_max(const float *a, const float *b, int64_t n) {
    double worst = 0, big = 1e-12;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        big = fmax(big, fabs((double)b[i]));
    }
    return worst / big;
}

typedef struct head_case {
    const char *name;
    graft_precision precision;
    float dropout;
    int outputs;
    double tol; /* of the largest element, logits and gradients */
} head_case;

/* The head's graph (head_graph.c) against head.c's reference forward and backward on an MLP
 * head: two heads from the same seed (the same weights and dropout draws), after weight edits
 * the packed-weights fingerprint does not sample (the products repack their weights every run):
 * the evaluation logits, every weight's and bias's gradient and d(loss)/d(features). */
static void head_graph_case(const head_case *c) {
    enum { HN = 37, HIN = 300 };
    int hout = c->outputs;
    fixed_outputs = hout;
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = hout, ho.n_hidden = 1, ho.hidden[0] = 48, ho.activation = GRAFT_ACTIVATION_GELU;
    ho.dropout = c->dropout;
    head h, ref;
    head_graph hg;
    graft_err e = {0};
    static float x[HN * HIN], dl[HN * 8], dx[HN * HIN], dx_ref[HN * HIN];
    for (int i = 0; i < HN * HIN; i++) x[i] = (float)((i * 7919) % 200) / 100.0f - 1.0f;
    for (int i = 0; i < HN * hout; i++) dl[i] = (float)((i * 31) % 13) / 13.0f - 0.5f;
    bool ok = head_init(&h, HIN, &ho, c->precision, &e) == GRAFT_OK &&
              head_init(&ref, HIN, &ho, c->precision, &e) == GRAFT_OK &&
              head_graph_init(&hg, &h, true, 0, &e) == GRAFT_OK;
    double worst = 0, worst_g = 0;
    for (int round = 0; ok && round < 3; round++) {
        ((float *)h.layers[0].w.data)[1 + 3 * round] += 0.25f; /* the fingerprint samples others */
        ((float *)ref.layers[0].w.data)[1 + 3 * round] += 0.25f;
        const float *got, *want;
        ok = head_graph_logits(&hg, x, HN, &got, &e) == GRAFT_OK;
        float *copy = malloc(sizeof(float) * HN * (size_t)hout);
        if (ok && copy) memcpy(copy, got, sizeof(float) * HN * (size_t)hout);
        ok = ok && copy && head_forward(&ref, x, HN, false, &want, &e) == GRAFT_OK;
        if (ok) worst = fmax(worst, rel_to_max(copy, want, HN * hout));
        free(copy);
    }
    /* two training steps (two draws of the masks), gradients accumulated */
    for (int step = 0; ok && step < 2; step++) {
        const float *lg;
        ok = head_forward(&ref, x, HN, true, &lg, &e) == GRAFT_OK &&
             head_backward_input(&ref, dl, HN, dx_ref, &e) == GRAFT_OK &&
             head_graph_step(&hg, x, HN, fixed_dlogits, dl, dx, &e) == GRAFT_OK;
    }
    if (ok) worst_g = rel_to_max(dx, dx_ref, HN * HIN);
    for (int l = 0; ok && l < h.n_layers; l++) {
        const head_layer *a = &h.layers[l], *b = &ref.layers[l];
        worst_g = fmax(worst_g, rel_to_max(a->dw.data, b->dw.data, tensor_numel(&b->dw)));
        worst_g = fmax(worst_g, rel_to_max(a->db.data, b->db.data, tensor_numel(&b->db)));
    }
    char name[96];
    snprintf(name, sizeof name, "head_graph_matches_reference_%s", c->name);
    CHECK(name, ok && worst <= c->tol && worst_g <= c->tol,
          "%s; logits %.3g, gradients %.3g of the largest (at most %.g)", ok ? "ran" : e.msg, worst,
          worst_g, c->tol);
    head_graph_free(&hg);
    head_free(&h), head_free(&ref);
}

static void head_graph_matches_reference(void) {
    /* bf16/fp16: a product's last bit may round the other way (sgemm's sums against double
     * ones), and the graph rounds the gradient after the dropout product once more. */
    static const head_case cases[] = {
        {"fp32", GRAFT_PRECISION_FP32, 0.0f, 7, 1e-5},
        {"fp32_dropout", GRAFT_PRECISION_FP32, 0.3f, 7, 1e-5},
        {"fp32_one_output", GRAFT_PRECISION_FP32, 0.0f, 1, 1e-5},
        {"bf16_dropout", GRAFT_PRECISION_BF16, 0.3f, 7, 2e-2},
        {"fp16", GRAFT_PRECISION_FP16, 0.0f, 7, 4e-3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) head_graph_case(&cases[i]);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/data/trainer_fixtures.txt";
    fixture f;
    if (load_fixture(&f, path) != 0) {
        CHECK("trainer_fixture", 0, "cannot read %s", path);
        return 1;
    }
    head_graph_matches_reference();
    problem p;
    const double *x = get(&f, "features", N * D), *y = get(&f, "labels", N);
    p.w0 = get(&f, "w0", C * D), p.b0 = get(&f, "b0", C), p.order = get(&f, "order", -1);
    if (!x || !y || !p.w0 || !p.b0 || !p.order) {
        CHECK("trainer_fixture", 0, "%s lacks the problem", path);
        return 1;
    }
    for (int i = 0; i < N * D; i++) p.x[i] = (float)x[i];
    for (int i = 0; i < N; i++) p.y[i] = (int64_t)y[i];
    graft_train_options o = GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = GRAFT_OPTIMIZER_SGD, o.lr = 0.1, o.momentum = 0.9, o.weight_decay = 1e-4;
    run_case(&f, &p, "sgd", &o, 0);
    o = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = GRAFT_OPTIMIZER_ADAM, o.lr = 1e-2, o.weight_decay = 0;
    run_case(&f, &p, "adam", &o, 0);
    o.optimizer = GRAFT_OPTIMIZER_ADAMW, o.weight_decay = 0.01;
    run_case(&f, &p, "adamw_cosine", &o, 0);
    o = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = GRAFT_OPTIMIZER_SGD, o.lr = 5.0, o.momentum = 0, o.weight_decay = 0;
    run_case(&f, &p, "sgd_plateau", &o, 1);
    o = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = GRAFT_OPTIMIZER_LAMB, o.lr = 1e-2, o.eps = 1e-6, o.weight_decay = 0.01;
    run_case(&f, &p, "lamb", &o, 0);
    o = (graft_train_options)GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = GRAFT_OPTIMIZER_SGD, o.lr = 0.1, o.momentum = 0, o.weight_decay = 0;
    o.label_smoothing = 0.1f;
    run_case(&f, &p, "label_smoothing", &o, 0);
    o.label_smoothing = 0, o.lr = 0.5, o.clip_norm = 0.5;
    run_case(&f, &p, "clip", &o, 0);
    mixed_precision(&p);
    accumulation(&p);
    free_fixture(&f);
    return test_failures ? 1 : 0;
}

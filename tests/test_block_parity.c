/* test_block_parity.c: fine-tuning ResNet-18's layer4 + a new head against PyTorch
 * (tests/data/block_parity_fixture.txt, tools/record_block_parity.py), or a 4-layer BERT's last
 * 2 layers and pooler + a new head against transformers' BertModel (the fixture names its model:
 * tests/data/block_parity_bert_fixture.txt, tools/record_block_parity_bert.py): frozen features,
 * first logits and 100 steps' losses for SGD, AdamW and LAMB, within 1e-4 for the steps the
 * recorded chaos leaves stable, looser after. argv: gen folder, fixture, [steps];
 * BLOCK_PARITY_VERBOSE=1 prints every step; BLOCK_PARITY_DEVICE=cuda:0 runs the frozen part and the
 * blocks there (fp32, no TF32: the same bounds hold). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/cli/npy.h"
#include "../src/graph/model.h"
#include "../src/train/trainer.h"
#include "test_fixture.h"
#include "test_util.h"

#define IMAGE_MODEL "block_parity_resnet18"

enum { N = 64, HALF = 32, CLASSES = 10, B = 16, STEPS = 100, TEXT_INPUTS = 3 };

static const char *const text_inputs[TEXT_INPUTS] = {"input_ids", "attention_mask",
                                                     "token_type_ids"};

/* Past the stable steps the training is chaotic (docs/training.md "Fine-tuning blocks"): PyTorch's
 * own losses move by up to 4.9% at a step, and its last epoch's mean loss by up to 2.1e-3, when
 * its frozen features move by graft's difference (4e-6 noise, or BN folded: 1.9e-6); graft is
 * at 4.6% and 4.2e-3. The bounds leave three and five times the largest seen, since another
 * machine's kernels round (and so diverge) differently. */
#define STEP_TOL 0.15
#define FINAL_TOL 0.02

static double get1(const fixture *f, const char *prefix, const char *kind, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s%s%s", prefix, kind, name ? "." : "", name ? name : "");
    const double *v = get(f, key, 1);
    return v ? v[0] : NAN;
}

static const char *get_str(const fixture *f, const char *key) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->keys[i], key)) return f->strs[i];
    return NULL;
}

typedef struct problem {
    const fixture *f;
    const char *from, *model_name;
    bool text;    /* a BERT: three int64 inputs per sample, the cut at pooler_output */
    int64_t feat; /* the head's input */
    graft_model *model;
    graft_tensor images;             /* the model's 32 recorded images; sample i + 32 is image i */
    graft_tensor texts[TEXT_INPUTS]; /* or its 32 texts' token ids, mask and types (32, seq) */
    int64_t labels[N];
    const double *order, *w0, *b0;
    float *rows; /* (N, dim): graft's frozen part's output */
    int64_t dim;
} problem;

static graft_train_options recipe(const fixture *f, const char *kind, const char *from) {
    graft_train_options o = GRAFT_TRAIN_OPTIONS_INIT;
    o.optimizer = !strcmp(kind, "sgd")     ? GRAFT_OPTIMIZER_SGD
                  : !strcmp(kind, "adamw") ? GRAFT_OPTIMIZER_ADAMW
                                           : GRAFT_OPTIMIZER_LAMB;
    o.lr = get1(f, "recipe", kind, "lr");
    o.momentum = get1(f, "recipe", kind, "momentum");
    o.weight_decay = get1(f, "recipe", kind, "weight_decay");
    o.beta1 = get1(f, "recipe", kind, "beta1");
    o.beta2 = get1(f, "recipe", kind, "beta2");
    o.eps = get1(f, "recipe", kind, "eps");
    o.nesterov = 0;
    o.batch_size = B;
    o.train_from = from;
    return o;
}

static graft_status run_frozen(problem *p, graft_trainer *t, const graft_tensor **out);

/* A trainer with the fixture's recipe and head; NULL (and a failure) when it cannot be made. A
 * text model's row size is known once its frozen part has run (the sequence length). */
static graft_trainer *make_trainer(problem *p, const char *kind, graft_precision precision) {
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = CLASSES;
    graft_train_options o = recipe(p->f, kind, p->from);
    o.precision = precision;
    graft_trainer *t = NULL;
    graft_status st = graft_trainer_create(p->model, &ho, &o, &t);
    graft_err e = {0};
    const graft_tensor *rows;
    if (st == GRAFT_OK && t->blocks && !t->blocks->frozen.resolved) {
        st = run_frozen(p, t, &rows);
        if (st == GRAFT_OK) st = frozen_part_resolve(&t->blocks->frozen, &e);
    }
    if (st == GRAFT_OK && !t->head_ready) st = trainer_setup(t, t->blocks->frozen.row, &e);
    bool ok = st == GRAFT_OK && t->blocks && t->h.n_layers == 1 &&
              tensor_numel(&t->h.layers[0].w) == CLASSES * p->feat;
    if (!ok) {
        CHECK("block_parity_trainer", 0, "%s: status %d (%s %s)", kind, st, e.msg,
              graft_last_error(p->model->ctx));
        graft_trainer_free(t);
        return NULL;
    }
    float *w = t->h.layers[0].w.data, *b = t->h.layers[0].b.data;
    for (int64_t i = 0; i < CLASSES * p->feat; i++) w[i] = (float)p->w0[i];
    for (int i = 0; i < CLASSES; i++) b[i] = (float)p->b0[i];
    return t;
}

/* Tensor t (32, ...) twice: the 64 samples. */
static void *doubled(const graft_tensor *t, size_t elem) {
    size_t half = (size_t)graft_tensor_numel(t) * elem;
    char *x = malloc(2 * half);
    if (x) memcpy(x, t->data, half), memcpy(x + half, t->data, half);
    return x;
}

/* The frozen part's inputs for the 64 samples (in[i].tensor.data malloc'd); their count. */
static int frozen_inputs(const problem *p, graft_named_tensor *in) {
    if (!p->text) {
        in[0] = (graft_named_tensor){"x", {GRAFT_DTYPE_F32, 4, {N, 3, 64, 64}, NULL}};
        in[0].tensor.data = doubled(&p->images, sizeof(float));
        return 1;
    }
    for (int k = 0; k < TEXT_INPUTS; k++) {
        in[k] = (graft_named_tensor){text_inputs[k], p->texts[k]};
        in[k].tensor.dims[0] = N;
        in[k].tensor.data = doubled(&p->texts[k], sizeof(int64_t));
    }
    return TEXT_INPUTS;
}

/* The frozen part's output on the 64 samples (*out valid until its next run). */
static graft_status run_frozen(problem *p, graft_trainer *t, const graft_tensor **out) {
    graft_named_tensor in[TEXT_INPUTS];
    int n_in = frozen_inputs(p, in);
    bool have = true;
    for (int k = 0; k < n_in; k++) have = have && in[k].tensor.data;
    graft_status st = have ? graft_model_run(t->backbone, in, n_in) : GRAFT_E_OUT_OF_MEMORY;
    if (st == GRAFT_OK) st = graft_model_output(t->backbone, 0, out);
    for (int k = 0; k < n_in; k++) free(in[k].tensor.data);
    return st;
}

/* graft's frozen part on the 64 samples: rows (N, dim), compared with PyTorch's for sample 0. */
static int frozen_rows(problem *p, graft_trainer *t) {
    const graft_tensor *out = NULL;
    graft_status st = run_frozen(p, t, &out);
    if (st != GRAFT_OK || out->dims[0] != N) {
        CHECK("block_parity_frozen", 0, "frozen part: status %d (%s)", st,
              graft_last_error(t->backbone->ctx));
        return -1;
    }
    p->dim = out->dims[1];
    p->rows = malloc(sizeof(float) * (size_t)(N * p->dim));
    memcpy(p->rows, out->data, sizeof(float) * (size_t)(N * p->dim));
    const double *want = get(p->f, "frozen0", 1024);
    double d = 0, ref = 1e-30;
    for (int i = 0; want && i < 1024 && i < p->dim; i++) {
        d = fmax(d, fabs(p->rows[i] - want[i]));
        ref = fmax(ref, fabs(want[i]));
    }
    char name[128];
    snprintf(name, sizeof name, "block_parity_frozen (max rel %.2g)", d / ref);
    CHECK(name, want && d / ref < 1e-4, "graft's frozen features differ from PyTorch's by %.3g",
          d / ref);
    return 0;
}

/* Step s's batch, in the recorded order. */
static void batch(const problem *p, int s, float *xb, int64_t *yb) {
    for (int i = 0; i < B; i++) {
        int k = (int)p->order[(s / 4) * N + (s % 4) * B + i];
        memcpy(xb + i * p->dim, p->rows + k * p->dim, sizeof(float) * (size_t)p->dim);
        yb[i] = p->labels[k];
    }
}

/* The trainable part's logits of step 0's batch before any update, against PyTorch's. */
static void check_logits0(problem *p, graft_trainer *t, const float *xb) {
    const double *want = get(p->f, "logits0", B * CLASSES);
    const float *lg = NULL;
    graft_err e = {0};
    graft_status st = trainer_logits(t, xb, B, &lg, &e);
    double d = 0, ref = 1e-30;
    for (int i = 0; st == GRAFT_OK && want && i < B * CLASSES; i++) {
        d = fmax(d, fabs(lg[i] - want[i]));
        ref = fmax(ref, fabs(want[i]));
    }
    char name[128];
    snprintf(name, sizeof name, "block_parity_logits0 (max rel %.2g)", d / ref);
    CHECK(name, st == GRAFT_OK && want && d / ref < 1e-4, "status %d (%s), max rel %.3g", st, e.msg,
          d / ref);
}

static int verbose;

static void run_kind(problem *p, const char *kind, int steps) {
    char key[64], name[160];
    snprintf(key, sizeof key, "losses.%s", kind);
    const double *want = get(p->f, key, STEPS);
    int stable = (int)get1(p->f, "stable_steps", kind, NULL);
    double noise_max = get1(p->f, "noise_max_rel", kind, NULL);
    graft_trainer *t = want && stable >= 0 ? make_trainer(p, kind, GRAFT_PRECISION_FP32) : NULL;
    if (!t) {
        if (!want) CHECK("block_parity_fixture", 0, "no %s or stable_steps.%s", key, kind);
        return;
    }
    float *xb = malloc(sizeof(float) * (size_t)(B * p->dim));
    int64_t yb[B], correct;
    double worst = 0, worst_stable = 0, got[STEPS], mean_got = 0, mean_want = 0;
    int first_over = -1, worst_at = -1, done = 0;
    graft_err e = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int s = 0; s < steps; s++, done++) {
        batch(p, s, xb, yb);
        if (s == 0 && !strcmp(kind, "sgd")) check_logits0(p, t, xb);
        if (trainer_step(t, xb, yb, B, get1(p->f, "recipe", kind, "lr"), &got[s], &correct, &e) !=
            GRAFT_OK)
            break;
        double rel = fabs(got[s] - want[s]) / fabs(want[s]);
        if (verbose)
            printf("    %s step %2d: %.7f PyTorch %.7f rel %.2g\n", kind, s, got[s], want[s], rel);
        if (rel > 1e-4 && first_over < 0) first_over = s;
        if (s < stable) worst_stable = fmax(worst_stable, rel);
        if (!(rel <= worst)) worst = rel, worst_at = s;
        if (s >= steps - 4) mean_got += got[s] / 4, mean_want += want[s] / 4;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double final = fabs(mean_got - mean_want) / mean_want;
    printf("  %-5s %d steps in %.1fs: loss %.5f -> %.5f (PyTorch %.5f -> %.5f); max rel error "
           "%.2g (step %d), %.2g over the %d stable steps; first step over 1e-4: %d; last epoch's "
           "mean %.2g (PyTorch under 4e-6 feature noise: max %.2g)\n",
           kind, done, secs, done ? got[0] : NAN, done ? got[done - 1] : NAN, want[0],
           want[done ? done - 1 : 0], worst, worst_at, worst_stable, stable, first_over, final,
           noise_max);
    snprintf(name, sizeof name, "block_parity_%s_stable_steps", kind);
    CHECK(name, done == steps && worst_stable <= 1e-4,
          "%s; %d steps run, max rel error %.3g over the first %d steps (want <= 1e-4)", e.msg,
          done, worst_stable, stable);
    snprintf(name, sizeof name, "block_parity_%s_all_steps", kind);
    CHECK(name, done == steps && worst <= STEP_TOL && final <= FINAL_TOL,
          "max rel error %.3g at step %d (want <= %g), last epoch's mean %.3g (want <= %g)", worst,
          worst_at, STEP_TOL, final, FINAL_TOL);
    free(xb);
    graft_trainer_free(t);
}

/* Mixed precision for the blocks and the head (bf16, or fp16 with loss scaling; emulated on the
 * CPU): the same recipe's last epoch's mean loss within 2% of PyTorch's fp32 one, at most 4 fp16
 * steps skipped (the scaler finding its scale from 2^16, as GradScaler does). */
static void run_half(problem *p, const char *kind, graft_precision precision, int steps) {
    char key[64], name[96];
    snprintf(key, sizeof key, "losses.%s", kind);
    const double *want = get(p->f, key, STEPS);
    graft_trainer *t = want ? make_trainer(p, kind, precision) : NULL;
    if (!t) return;
    float *xb = malloc(sizeof(float) * (size_t)(B * p->dim));
    int64_t yb[B], correct;
    double loss = 0, mean_got = 0, mean_want = 0;
    int done = 0;
    graft_err e = {0};
    for (int s = 0; xb && s < steps; s++, done++) {
        batch(p, s, xb, yb);
        if (trainer_step(t, xb, yb, B, get1(p->f, "recipe", kind, "lr"), &loss, &correct, &e) !=
            GRAFT_OK)
            break;
        if (s >= steps - 4) mean_got += loss / 4, mean_want += want[s] / 4;
    }
    double rel = fabs(mean_got - mean_want) / mean_want;
    const char *pn = precision == GRAFT_PRECISION_BF16 ? "bf16" : "fp16";
    printf("  %s %s: last epoch's mean loss %.5f, PyTorch fp32 %.5f (rel %.2g), %lld skipped\n",
           kind, pn, mean_got, mean_want, rel, (long long)t->skipped_steps);
    snprintf(name, sizeof name, "block_parity_%s_%s_within_2pct", kind, pn);
    CHECK(name, done == steps && rel <= 0.02 && t->skipped_steps <= 4,
          "%s; %d steps, last epoch's mean %.5f against %.5f (rel %.3g), %lld skipped", e.msg, done,
          mean_got, mean_want, rel, (long long)t->skipped_steps);
    free(xb);
    graft_trainer_free(t);
}

/* The model's recorded inputs: 32 images, or 32 texts; 0 when they are there. */
static int read_inputs(problem *p, const char *gen) {
    char path[1024], err[256];
    for (int k = 0; k < (p->text ? TEXT_INPUTS : 1); k++) {
        graft_tensor *t = p->text ? &p->texts[k] : &p->images;
        snprintf(path, sizeof path, "%s/%s.in.%s.npy", gen, p->model_name,
                 p->text ? text_inputs[k] : "x");
        if (access(path, R_OK) != 0 || npy_read(path, t, err, sizeof err) != 0 ||
            t->ndim != (p->text ? 2 : 4) || t->dims[0] != HALF ||
            t->dtype != (p->text ? GRAFT_DTYPE_I64 : GRAFT_DTYPE_F32)) {
            MISSING("block_parity_inputs", path);
            return -1;
        }
    }
    return 0;
}

/* The model, its recorded inputs, the fixture's problem; 0 when all are there. */
static int open_problem(problem *p, const fixture *f, const char *gen, graft_ctx *ctx) {
    memset(p, 0, sizeof *p);
    p->f = f;
    p->from = get_str(f, "from");
    p->model_name = get_str(f, "model") ? get_str(f, "model") : IMAGE_MODEL;
    p->text = strcmp(p->model_name, IMAGE_MODEL) != 0;
    const double *labels = get(f, "labels", N), *b0 = get(f, "head.bias", CLASSES);
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->keys[i], "head.weight")) p->feat = f->counts[i] / CLASSES;
    p->order = get(f, "order", 25 * N), p->w0 = get(f, "head.weight", CLASSES * p->feat);
    p->b0 = b0;
    if (!p->from || !labels || !p->order || !p->w0 || !p->b0 || p->feat < 1) {
        CHECK("block_parity_fixture", 0, "the fixture lacks the problem");
        return -1;
    }
    for (int i = 0; i < N; i++) p->labels[i] = (int64_t)labels[i];
    if (read_inputs(p, gen) != 0) return -1;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", gen, p->model_name);
    if (access(path, R_OK) != 0 || graft_model_load(ctx, path, &p->model) != GRAFT_OK) {
        MISSING("block_parity_model", path);
        return -1;
    }
    graft_status st = p->text ? graft_model_cut(p->model, "auto", GRAFT_POOLING_POOLER)
                              : graft_model_cut(p->model, "auto", GRAFT_POOLING_AUTO);
    CHECK("block_parity_cut", st == GRAFT_OK, "cut: %s", graft_last_error(ctx));
    return st == GRAFT_OK ? 0 : -1;
}

int main(int argc, char **argv) {
    const char *gen = argc > 1 ? argv[1] : "tests/data/gen";
    const char *path = argc > 2 ? argv[2] : "tests/data/block_parity_fixture.txt";
    int steps = argc > 3 ? atoi(argv[3]) : STEPS; /* fewer: a quick run (sanitizers) */
    if (steps < 1 || steps > STEPS) steps = STEPS;
    verbose = getenv("BLOCK_PARITY_VERBOSE") != NULL;
    fixture f;
    if (load_fixture(&f, path) != 0) {
        MISSING("block_parity_fixture", path);
        return 1;
    }
    graft_ctx_options co = GRAFT_CTX_OPTIONS_INIT;
    co.keep_batchnorm = 1;
    co.device = getenv("BLOCK_PARITY_DEVICE");
    co.allow_tf32 = 0;
    graft_ctx *ctx = NULL;
    graft_ctx_create(&co, &ctx);
    problem p;
    if (open_problem(&p, &f, gen, ctx) == 0) {
        graft_trainer *t = make_trainer(&p, "sgd", GRAFT_PRECISION_FP32);
        if (t && frozen_rows(&p, t) == 0) {
            graft_trainer_free(t);
            t = NULL;
            run_kind(&p, "sgd", steps);
            run_kind(&p, "adamw", steps);
            run_kind(&p, "lamb", steps);
            if (steps == STEPS) { /* a quick run (sanitizers) skips them */
                run_half(&p, "adamw", GRAFT_PRECISION_BF16, steps);
                run_half(&p, "adamw", GRAFT_PRECISION_FP16, steps);
            }
        }
        graft_trainer_free(t);
    }
    free(p.rows), free(p.images.data);
    for (int k = 0; k < TEXT_INPUTS; k++) free(p.texts[k].data);
    graft_model_free(p.model);
    graft_ctx_free(ctx);
    free_fixture(&f);
    return test_failures ? 1 : 0;
}

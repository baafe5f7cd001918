/* test_blocks.c: fine-tuning the last blocks with the head (train_from) on the digits CNN: one
 * step's gradients of block and head weights against central differences of the loss, the
 * frozen part run once per sample, the trained blocks written into the model by attach,
 * checkpoints of the blocks' weights, more capacity than the head alone, a fixed-batch model's
 * chunks against whole batches, and bad use. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graft.h"
#include "graph/model.h"
#include "test_util.h"
#include "train/trainer.h"

enum { N = 64, C = 5 };

#define FROM_TWO "/backbone/backbone.2/Relu_output_0"    /* two conv blocks train */
#define FROM_ONE "/backbone/backbone.6/MaxPool_output_0" /* the last conv block */

typedef struct data {
    float x[N * 64];
    int64_t y[N];
    graft_named_tensor in;
    graft_tensor labels;
} data;

static void make_data(data *d, uint64_t seed) {
    for (int i = 0; i < N * 64; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        d->x[i] = (float)((seed >> 40) % 1000) / 500.0f - 1.0f;
    }
    for (int i = 0; i < N; i++) d->y[i] = (i * 7 + 3) % C;
    d->in = (graft_named_tensor){"input", {GRAFT_DTYPE_F32, 4, {N, 1, 8, 8}, d->x}};
    d->labels = (graft_tensor){GRAFT_DTYPE_I64, 1, {N}, d->y};
}

static graft_model *load_cut(graft_ctx *ctx, const char *path) {
    graft_model *m = NULL;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) return NULL;
    if (graft_model_cut(m, "auto", GRAFT_POOLING_AUTO) == GRAFT_OK) return m;
    graft_model_free(m);
    return NULL;
}

static graft_train_options options(const char *from) {
    graft_train_options o = GRAFT_TRAIN_OPTIONS_INIT;
    o.train_from = from;
    o.optimizer = GRAFT_OPTIMIZER_SGD;
    o.momentum = 0.9;
    o.weight_decay = 0.0;
    o.lr = 0.05;
    o.batch_size = 16;
    o.seed = 5;
    return o;
}

static graft_trainer *make_trainer(graft_model *m, const char *from, graft_train_options *o) {
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = C;
    graft_train_options def = options(from);
    graft_trainer *t = NULL;
    graft_trainer_create(m, &ho, o ? o : &def, &t);
    return t;
}

/* The frozen part's rows (n, dim) of the data: what the feature cache would hold. */
static float *frozen_rows(graft_trainer *t, data *d) {
    if (graft_model_run(t->backbone, &d->in, 1) != GRAFT_OK) return NULL;
    const graft_tensor *f;
    graft_model_output(t->backbone, 0, &f);
    float *rows = malloc(sizeof(float) * (size_t)graft_tensor_numel(f));
    if (rows) memcpy(rows, f->data, sizeof(float) * (size_t)graft_tensor_numel(f));
    return rows;
}

static double mean_loss(graft_trainer *t, const float *rows, const int64_t *y) {
    double loss = NAN, acc;
    graft_err e = {0};
    if (trainer_eval_features(t, rows, y, N, &loss, &acc, &e) != GRAFT_OK) return NAN;
    return loss;
}

/* max |analytic - numeric| / (|numeric| + 1e-3) over the k largest entries of one weight. */
static double check_weight(graft_trainer *t, float *w, const float *g, int64_t numel, double scale,
                           const float *rows, const int64_t *y) {
    double worst = 0.0;
    int64_t picked[4] = {-1, -1, -1, -1};
    for (int p = 0; p < 4; p++)
        for (int64_t k = 0; k < numel; k++) {
            bool used = false;
            for (int q = 0; q < p; q++) used = used || picked[q] == k;
            if (!used && (picked[p] < 0 || fabsf(g[k]) > fabsf(g[picked[p]]))) picked[p] = k;
        }
    for (int p = 0; p < 4 && picked[p] >= 0; p++) {
        int64_t k = picked[p];
        float keep = w[k], h = 5e-4f; /* larger steps cross ReLU kinks */
        w[k] = keep + h;
        double up = mean_loss(t, rows, y);
        w[k] = keep - h;
        double down = mean_loss(t, rows, y);
        w[k] = keep;
        double numeric = (up - down) / (2.0 * h), analytic = scale * g[k];
        double err = fabs(analytic - numeric) / (fabs(numeric) + 1e-3);
        if (!(err <= worst)) worst = err;
    }
    return worst;
}

/* One micro-batch of two (no update yet): every block weight's and the head's gradient against
 * central differences of the mean loss over the batch. */
static void gradients(graft_model *m, data *d, const char *name) {
    graft_train_options o = options(FROM_TWO);
    o.accumulate = 2;
    o.batch_size = N;
    graft_trainer *t = make_trainer(m, FROM_TWO, &o);
    float *rows = t ? frozen_rows(t, d) : NULL;
    double loss = 0, worst = 0;
    int64_t correct = 0;
    graft_err e = {0};
    graft_status st = rows ? trainer_step(t, rows, d->y, N, 0.05, &loss, &correct, &e) : -1;
    int checked = 0;
    for (int i = 0; st == GRAFT_OK && i < t->blocks->n_params; i++, checked++) {
        double w = check_weight(t, t->blocks->data[i], t->blocks->grad[i], t->blocks->numel[i], 2.0,
                                rows, d->y);
        if (!(w <= worst)) worst = w;
    }
    double head = st == GRAFT_OK ? check_weight(t, t->h.layers[0].w.data, t->h.layers[0].dw.data,
                                                tensor_numel(&t->h.layers[0].w), 2.0, rows, d->y)
                                 : NAN;
    CHECK(name, st == GRAFT_OK && checked >= 4 && worst < 2e-2 && head < 2e-2,
          "status %d (%s); %d weights, worst relative error %.3g (blocks), %.3g (head)", st, e.msg,
          checked, worst, head);
    free(rows);
    graft_trainer_free(t);
}

typedef struct seen {
    int epochs;
    double first_loss, last_loss;
    int64_t backbone_samples;
} seen;

static int on_report(const graft_train_report *r, void *user) {
    seen *s = user;
    if (!r->epoch_end) return 0;
    if (s->epochs++ == 0) s->first_loss = r->loss;
    s->last_loss = r->loss;
    s->backbone_samples = r->backbone_samples;
    return 0;
}

/* Fit for `epochs`; the trainer (NULL on failure) and what the callback saw. */
static graft_trainer *fit(graft_model *m, data *d, const char *from, int epochs, seen *s) {
    graft_train_options o = options(from);
    o.epochs = epochs;
    o.callback = on_report, o.callback_user = s;
    graft_trainer *t = make_trainer(m, from, &o);
    if (t && graft_trainer_fit(t, &d->in, 1, &d->labels, NULL, 0, NULL) != GRAFT_OK) {
        graft_trainer_free(t);
        return NULL;
    }
    return t;
}

/* The frozen part runs once per sample over 5 epochs; the blocks once per step. */
static void runs_once(graft_model *m, data *d) {
    seen s = {0};
    graft_trainer *t = fit(m, d, FROM_ONE, 5, &s);
    CHECK("blocks_frozen_part_once_per_sample",
          t && s.epochs == 5 && s.backbone_samples == N && t->blocks->steps == 5 * (N / 16),
          "%s; %d epochs, frozen part ran for %lld samples, %lld block steps",
          t ? "fit ran" : graft_last_error(m->ctx), s.epochs, (long long)s.backbone_samples,
          t ? (long long)t->blocks->steps : -1LL);
    graft_trainer_free(t);
}

/* The logits of the attached model equal the trainer's: the blocks' weights went in. */
static void attach_writes_blocks(const char *path, graft_ctx *ctx, data *d, const char *name) {
    graft_model *m = load_cut(ctx, path);
    seen s = {0};
    graft_trainer *t = m ? fit(m, d, FROM_TWO, 4, &s) : NULL;
    float *rows = t ? frozen_rows(t, d) : NULL;
    const float *lg = NULL;
    graft_err e = {0};
    float *want = malloc(sizeof(float) * N * C);
    bool ok = rows && want && trainer_logits(t, rows, N, &lg, &e) == GRAFT_OK;
    if (ok) memcpy(want, lg, sizeof(float) * N * C);
    ok = ok && graft_trainer_attach(t, 0) == GRAFT_OK && graft_model_run(m, &d->in, 1) == GRAFT_OK;
    double worst = INFINITY;
    if (ok) {
        const graft_tensor *out;
        graft_model_output(m, 0, &out);
        worst = 0;
        for (int i = 0; i < N * C; i++)
            worst = fmax(worst, fabs(((const float *)out->data)[i] - want[i]));
    }
    CHECK(name, ok && worst < 1e-4, "%s; max difference %.3g", ok ? "ran" : graft_last_error(ctx),
          worst);
    free(rows), free(want);
    graft_trainer_free(t);
    graft_model_free(m);
}

/* A checkpoint holds the blocks' weights and reloads into a trainer of the same kind only. */
static void checkpoints(graft_model *m, data *d, const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/blocks.safetensors", dir);
    seen s = {0};
    graft_trainer *t = fit(m, d, FROM_ONE, 2, &s);
    graft_status st = t ? graft_trainer_save(t, path) : -1;
    graft_train_options o = options(FROM_ONE);
    o.epochs = 2;
    graft_trainer *u = make_trainer(m, FROM_ONE, &o), *h = make_trainer(m, NULL, NULL);
    graft_status lu = u ? graft_trainer_load(u, path) : -1;
    bool same = lu == GRAFT_OK && u->blocks->n_params == t->blocks->n_params;
    for (int i = 0; same && i < t->blocks->n_params; i++)
        same = !memcmp(u->blocks->data[i], t->blocks->data[i],
                       sizeof(float) * (size_t)t->blocks->numel[i]);
    CHECK("blocks_checkpoint_round_trip", st == GRAFT_OK && same, "save %d, load %d: %s", st, lu,
          graft_last_error(m->ctx));
    graft_status lh = h ? graft_trainer_load(h, path) : -1;
    CHECK("blocks_checkpoint_not_for_head_only",
          lh == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(m->ctx), "does not match"),
          "status %d: %s", lh, graft_last_error(m->ctx));
    graft_trainer_free(t), graft_trainer_free(u), graft_trainer_free(h);
    unlink(path);
}

/* On labels the head alone cannot fit, the blocks' extra weights take the loss lower. */
static void more_capacity(graft_model *m, data *d) {
    seen head = {0}, blocks = {0};
    graft_trainer *a = fit(m, d, NULL, 30, &head), *b = fit(m, d, FROM_TWO, 30, &blocks);
    CHECK("blocks_fit_lower_than_head", a && b && blocks.last_loss < 0.8 * head.last_loss,
          "loss after 30 epochs: head %.4f, blocks %.4f", head.last_loss, blocks.last_loss);
    printf("  loss after 30 epochs: head alone %.4f, two blocks + head %.4f\n", head.last_loss,
           blocks.last_loss);
    graft_trainer_free(a), graft_trainer_free(b);
}

/* blocks_lr: the blocks' own rate; a tiny one leaves them where they started, and without
 * train_from it is refused. */
static void blocks_lr(graft_model *m, data *d) {
    graft_train_options o = options(FROM_ONE);
    o.epochs = 3, o.blocks_lr = 1e-12;
    graft_trainer *t = make_trainer(m, FROM_ONE, &o);
    float *before = t ? malloc(sizeof(float) * (size_t)t->blocks->numel[0]) : NULL;
    if (before) memcpy(before, t->blocks->data[0], sizeof(float) * (size_t)t->blocks->numel[0]);
    graft_status st = before ? graft_trainer_fit(t, &d->in, 1, &d->labels, NULL, 0, NULL) : -1;
    double moved = 0;
    for (int64_t k = 0; st == GRAFT_OK && k < t->blocks->numel[0]; k++)
        moved = fmax(moved, fabs(t->blocks->data[0][k] - before[k]));
    CHECK("blocks_lr_own_rate", st == GRAFT_OK && moved < 1e-9, "status %d, moved %.3g", st, moved);
    free(before);
    graft_trainer_free(t);
    o = options(NULL);
    o.blocks_lr = 1e-3;
    t = make_trainer(m, NULL, &o);
    CHECK("blocks_lr_needs_train_from", !t && strstr(graft_last_error(m->ctx), "blocks_lr"), "%s",
          graft_last_error(m->ctx));
    graft_trainer_free(t);
}

static void bad_use(graft_model *m) {
    graft_trainer *t = make_trainer(m, "no_such_tensor", NULL);
    CHECK("blocks_unknown_tensor", !t && strstr(graft_last_error(m->ctx), "no_such_tensor"), "%s",
          graft_last_error(m->ctx));
    graft_trainer_free(t);
    t = make_trainer(m, "features", NULL);
    CHECK("blocks_from_the_features", !t && strstr(graft_last_error(m->ctx), "not computed from"),
          "%s", graft_last_error(m->ctx));
    graft_trainer_free(t);
    graft_train_options o = options(FROM_ONE);
    o.ridge_warm_start = 1;
    t = make_trainer(m, FROM_ONE, &o);
    CHECK("blocks_no_ridge", !t && strstr(graft_last_error(m->ctx), "ridge"), "%s",
          graft_last_error(m->ctx));
    graft_trainer_free(t);
}

enum { TN = 32, TS = 12 };

/* The tiny BERT's last layer with the head: the frozen part's sizes per sample come from the
 * first batch (the sequence length is symbolic); the blocks learn, the attached model agrees. */
static void text_model(graft_ctx *ctx, const char *gen) {
    char path[1024];
    snprintf(path, sizeof path, "%s/bert_tiny_decomposed.onnx", gen);
    graft_model *m = NULL;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        MISSING("blocks_text", "bert_tiny_decomposed.onnx");
        return;
    }
    const char *from = NULL;
    graft_status st = graft_model_unfreeze_point(m, 1, &from, NULL, NULL);
    char from_name[256] = "";
    if (st == GRAFT_OK) snprintf(from_name, sizeof from_name, "%s", from);
    if (st == GRAFT_OK) st = graft_model_cut(m, "auto", GRAFT_POOLING_CLS);
    static int64_t ids[TN * TS], mask[TN * TS], types[TN * TS], y[TN];
    uint64_t seed = 3;
    for (int i = 0; i < TN * TS; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int64_t)((seed >> 33) % 1000);
        mask[i] = (i % TS) < TS - (i / TS) % 4;
        types[i] = 0;
    }
    for (int i = 0; i < TN; i++) y[i] = ids[i * TS + 1] % 3;
    graft_named_tensor in[3] = {{"input_ids", {GRAFT_DTYPE_I64, 2, {TN, TS}, ids}},
                                {"attention_mask", {GRAFT_DTYPE_I64, 2, {TN, TS}, mask}},
                                {"token_type_ids", {GRAFT_DTYPE_I64, 2, {TN, TS}, types}}};
    graft_tensor labels = {GRAFT_DTYPE_I64, 1, {TN}, y};
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 3;
    graft_train_options o = GRAFT_TRAIN_OPTIONS_INIT;
    o.train_from = from_name;
    o.epochs = 20, o.batch_size = 8, o.lr = 3e-3, o.seed = 2;
    seen s = {0};
    o.callback = on_report, o.callback_user = &s;
    graft_trainer *t = NULL;
    if (st == GRAFT_OK) st = graft_trainer_create(m, &ho, &o, &t);
    if (st == GRAFT_OK) st = graft_trainer_fit(t, in, 3, &labels, NULL, 0, NULL);
    double loss = -1, acc = -1;
    if (st == GRAFT_OK) st = graft_trainer_evaluate(t, in, 3, &labels, &loss, &acc);
    CHECK("blocks_text_learns",
          st == GRAFT_OK && t->blocks->frozen.resolved && s.backbone_samples == TN &&
              s.last_loss < 0.5 * s.first_loss && acc > 0.9,
          "status %d (%s); from '%s', frozen part ran for %lld samples, loss %.4f -> %.4f, "
          "accuracy %.3f",
          st, graft_last_error(ctx), from_name, (long long)s.backbone_samples, s.first_loss,
          s.last_loss, acc);
    int agree = 0;
    if (st == GRAFT_OK && graft_trainer_attach(t, 0) == GRAFT_OK &&
        graft_model_run(m, in, 3) == GRAFT_OK) {
        const graft_tensor *out;
        graft_model_output(m, 0, &out);
        const float *lg = out->data;
        for (int i = 0; i < TN; i++) {
            int best = 0;
            for (int k = 1; k < 3; k++)
                if (lg[i * 3 + k] > lg[i * 3 + best]) best = k;
            agree += best == y[i];
        }
    }
    CHECK("blocks_text_attach", st == GRAFT_OK && fabs(agree / (double)TN - acc) < 1e-9,
          "%d of %d right after attach vs accuracy %.3f: %s", agree, TN, acc,
          graft_last_error(ctx));
    graft_trainer_free(t);
    graft_model_free(m);
}

/* Loaded with BatchNormalization kept (graft_ctx_options.keep_batchnorm): the blocks train conv
 * weights and BN scale/bias apart; their gradients check out, and attach folds BN into the
 * exported model, whose logits are still the trainer's. */
static void keep_batchnorm(const char *path, data *d) {
    graft_ctx *ctx;
    graft_ctx_options co = GRAFT_CTX_OPTIONS_INIT;
    co.log_level = GRAFT_LOG_ERROR;
    co.keep_batchnorm = 1;
    graft_ctx_create(&co, &ctx);
    graft_model *m = load_cut(ctx, path);
    int bn = 0;
    for (int i = 0; m && i < m->g.n_nodes; i++)
        bn += !strcmp(m->g.nodes[i].op_type, "BatchNormalization");
    CHECK("blocks_keep_bn_loaded", m && bn == 3, "%d BatchNormalization nodes", bn);
    if (m) gradients(m, d, "blocks_keep_bn_gradients_match_differences");
    attach_writes_blocks(path, ctx, d, "blocks_keep_bn_attach_folds");
    graft_model_free(m);
    graft_ctx_free(ctx);
}

/* A model that runs one batch size trains in chunks of it (blocks_chunked.c): chunks of 3 (the
 * last one padded) against whole batches of 16, step by step and in the weights after. */
static void chunks_match(graft_model *m, data *d) {
    graft_trainer *whole = make_trainer(m, FROM_TWO, NULL),
                  *chunked = make_trainer(m, FROM_TWO, NULL);
    float *rows = whole && chunked ? frozen_rows(whole, d) : NULL;
    double worst = rows ? 0.0 : INFINITY, worst_w = 0.0;
    graft_err e = {0};
    if (rows) chunked->blocks->fixed = 3;
    for (int s = 0; rows && s < 8; s++) {
        const float *x = rows + (s % 4) * 16 * whole->dim;
        const int64_t *y = d->y + (s % 4) * 16;
        double la = NAN, lb = NAN;
        int64_t ca, cb;
        if (trainer_step(whole, x, y, 16, 0.05, &la, &ca, &e) != GRAFT_OK ||
            trainer_step(chunked, x, y, 16, 0.05, &lb, &cb, &e) != GRAFT_OK)
            break;
        worst = fmax(worst, fabs(la - lb) / fabs(la));
    }
    for (int i = 0; rows && i < whole->blocks->n_params; i++)
        for (int64_t k = 0; k < whole->blocks->numel[i]; k++)
            worst_w = fmax(worst_w, fabs((double)whole->blocks->data[i][k] -
                                         (double)chunked->blocks->data[i][k]));
    CHECK("blocks_fixed_batch_chunks_match", rows && worst < 1e-5 && worst_w < 1e-5,
          "%s; worst loss difference %.3g relative, weights %.3g", e.msg[0] ? e.msg : "ran", worst,
          worst_w);
    free(rows);
    graft_trainer_free(whole);
    graft_trainer_free(chunked);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "models/digits_cnn.onnx";
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    const char *gen = argc > 3 ? argv[3] : "tests/data/gen";
    graft_ctx *ctx;
    graft_ctx_options co = GRAFT_CTX_OPTIONS_INIT;
    co.log_level = GRAFT_LOG_ERROR;
    graft_ctx_create(&co, &ctx);
    graft_model *m = load_cut(ctx, path);
    if (!m) {
        MISSING("blocks", path);
        graft_ctx_free(ctx);
        return 1;
    }
    static data d;
    make_data(&d, 11);
    gradients(m, &d, "blocks_gradients_match_differences");
    runs_once(m, &d);
    chunks_match(m, &d);
    attach_writes_blocks(path, ctx, &d, "blocks_attach_writes_weights");
    keep_batchnorm(path, &d);
    checkpoints(m, &d, dir);
    more_capacity(m, &d);
    blocks_lr(m, &d);
    bad_use(m);
    text_model(ctx, gen);
    graft_model_free(m);
    graft_ctx_free(ctx);
    return test_failures ? 1 : 0;
}

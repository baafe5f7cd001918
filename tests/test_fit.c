/* test_fit.c: the public trainer end to end on the tiny BERT: fit on tensors runs the backbone
 * once per sample whatever the epochs, learns a learnable labelling, reports through the
 * callback, stops early, attaches the head to the model (whose predictions then agree with
 * evaluate), and rejects bad use with clear errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graft.h"
#include "graph/model.h"
#include "test_util.h"

enum { N = 48, S = 12, VOCAB = 1000 };

typedef struct data {
    int64_t ids[N * S], mask[N * S], types[N * S], labels[N];
    graft_named_tensor in[3];
} data;

static void make_data(data *d, uint64_t seed) {
    for (int i = 0; i < N * S; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        d->ids[i] = (int64_t)((seed >> 33) % VOCAB);
        d->mask[i] = (i % S) < S - (i / S) % 3; /* a little padding */
        d->types[i] = (i % S) >= S / 2;
    }
    const char *names[3] = {"input_ids", "attention_mask", "token_type_ids"};
    int64_t *bufs[3] = {d->ids, d->mask, d->types};
    for (int k = 0; k < 3; k++)
        d->in[k] = (graft_named_tensor){names[k], {GRAFT_DTYPE_I64, 2, {N, S}, bufs[k]}};
}

/* Labels a linear head can learn: the sign pattern of two fixed projections of the features. */
static int make_labels(graft_model *m, data *d) {
    if (graft_model_run(m, d->in, 3) != GRAFT_OK) return -1;
    const graft_tensor *f;
    graft_model_output(m, 0, &f);
    int64_t dim = f->dims[1];
    const float *x = f->data;
    for (int i = 0; i < N; i++) {
        double a = 0, b = 0;
        for (int64_t k = 0; k < dim; k++) {
            a += x[i * dim + k] * sin(0.7 * (double)k);
            b += x[i * dim + k] * cos(1.3 * (double)k);
        }
        d->labels[i] = (a > 0) * 2 + (b > 0);
    }
    return 0;
}

/* The tiny BERT, loaded and cut with `pooling`; NULL when it is not there or fails. */
static graft_model *load_cut(graft_ctx *ctx, const char *gen, graft_pooling pooling) {
    char path[1024];
    snprintf(path, sizeof path, "%s/bert_tiny_decomposed.onnx", gen);
    graft_model *m = NULL;
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) return NULL;
    if (graft_model_cut(m, "auto", pooling) == GRAFT_OK) return m;
    graft_model_free(m);
    return NULL;
}

typedef struct seen {
    int steps, epochs;
    double last_loss, first_loss;
    int64_t backbone_samples;
} seen;

static int on_report(const graft_train_report *r, void *user) {
    seen *s = user;
    if (r->epoch_end) {
        if (s->epochs == 0) s->first_loss = r->loss;
        s->epochs++;
        s->last_loss = r->loss;
    } else
        s->steps++;
    s->backbone_samples = r->backbone_samples;
    return 0;
}

/* Load, cut with `pooling`, fit 5 epochs on d with the cache at `cache` (NULL: none). */
static int fit_once(const char *gen, graft_pooling pooling, data *d, const char *cache, seen *s) {
    graft_ctx *ctx;
    graft_model *m;
    graft_trainer *t = NULL;
    graft_ctx_create(NULL, &ctx);
    int rc = -1;
    memset(s, 0, sizeof *s);
    if ((m = load_cut(ctx, gen, pooling)) != NULL) {
        graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
        ho.n_outputs = 4;
        graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
        to.epochs = 5, to.batch_size = 16, to.lr = 3e-2, to.seed = 3, to.cache_path = cache;
        to.callback = on_report, to.callback_user = s;
        graft_tensor labels = {GRAFT_DTYPE_I64, 1, {N}, d->labels};
        if (graft_trainer_create(m, &ho, &to, &t) == GRAFT_OK &&
            graft_trainer_fit(t, d->in, 3, &labels, NULL, 0, NULL) == GRAFT_OK)
            rc = 0;
        else
            printf("  fit failed: %s\n", graft_last_error(ctx));
        graft_trainer_free(t);
        graft_model_free(m);
    }
    graft_ctx_free(ctx);
    return rc;
}

/* The feature cache: reused across runs (the backbone never runs again), same result as no
 * cache, rebuilt when the model's cut, the input data or the file itself changes. */
static void feature_cache(const char *gen, data *d) {
    char dir[] = "/tmp/graft_fit_cacheXXXXXX", path[256];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/features.cache", dir);
    seen plain, first, again, other_cut, other_data, damaged;
    int rc = fit_once(gen, GRAFT_POOLING_CLS, d, NULL, &plain);
    rc |= fit_once(gen, GRAFT_POOLING_CLS, d, path, &first);
    rc |= fit_once(gen, GRAFT_POOLING_CLS, d, path, &again);
    CHECK("cache_first_run_fills", rc == 0 && first.backbone_samples == N, "rc %d, backbone %lld",
          rc, (long long)first.backbone_samples);
    CHECK("cache_reused_backbone_never_runs", again.backbone_samples == 0, "backbone ran %lld",
          (long long)again.backbone_samples);
    CHECK("cache_same_result_as_no_cache",
          plain.last_loss == first.last_loss && first.last_loss == again.last_loss,
          "losses %.9g %.9g %.9g", plain.last_loss, first.last_loss, again.last_loss);
    rc = fit_once(gen, GRAFT_POOLING_MEAN, d, path, &other_cut);
    CHECK("cache_rebuilt_for_another_cut", rc == 0 && other_cut.backbone_samples == N,
          "backbone %lld", (long long)other_cut.backbone_samples);
    d->ids[5] = (d->ids[5] + 1) % VOCAB;
    rc = fit_once(gen, GRAFT_POOLING_MEAN, d, path, &other_data);
    d->ids[5] = (d->ids[5] + VOCAB - 1) % VOCAB;
    CHECK("cache_rebuilt_for_other_data", rc == 0 && other_data.backbone_samples == N,
          "backbone %lld", (long long)other_data.backbone_samples);
    fit_once(gen, GRAFT_POOLING_CLS, d, path, &first); /* refill for the original key */
    if (truncate(path, 5000) != 0) printf("  truncate failed\n");
    rc = fit_once(gen, GRAFT_POOLING_CLS, d, path, &damaged);
    CHECK("cache_truncated_file_rebuilt",
          rc == 0 && damaged.backbone_samples == N && damaged.last_loss == plain.last_loss,
          "backbone %lld, loss %.9g", (long long)damaged.backbone_samples, damaged.last_loss);
    remove(path);
    rmdir(dir);
}

typedef struct trace {
    double loss[16], vloss[16];
    int n, stop_after;
    int64_t stop_at_step; /* stop mid-epoch after this optimizer step (0: never) */
} trace;

static int record(const graft_train_report *r, void *user) {
    trace *tr = user;
    if (!r->epoch_end) return tr->stop_at_step > 0 && r->step == tr->stop_at_step;
    if (r->epoch < 1 || r->epoch > 16) return 0;
    tr->loss[r->epoch - 1] = r->loss; /* at an epoch end, epoch counts the epochs done */
    tr->vloss[r->epoch - 1] = r->val_loss;
    tr->n++;
    return tr->stop_after > 0 && r->epoch == tr->stop_after;
}

/* Fit an MLP head with dropout in fp16 with a plateau schedule and early stopping for 8 epochs
 * (the callback may stop it after `stop_after`); save to `save`, or load `load` first. */
static int fit_mlp(const char *gen, data *d, trace *tr, const char *save, const char *load) {
    graft_ctx *ctx;
    graft_model *m;
    graft_trainer *t = NULL;
    graft_ctx_create(NULL, &ctx);
    int rc = -1;
    if ((m = load_cut(ctx, gen, GRAFT_POOLING_CLS)) != NULL) {
        graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
        ho.n_outputs = 4, ho.n_hidden = 1, ho.hidden[0] = 32, ho.dropout = 0.2f, ho.seed = 5;
        graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
        to.epochs = 8, to.batch_size = 16, to.lr = 1e-2, to.seed = 9;
        to.precision = GRAFT_PRECISION_FP16, to.scheduler = GRAFT_SCHEDULER_PLATEAU;
        to.early_stop = 3, to.callback = record, to.callback_user = tr;
        graft_tensor labels = {GRAFT_DTYPE_I64, 1, {N}, d->labels};
        graft_status st = graft_trainer_create(m, &ho, &to, &t);
        if (st == GRAFT_OK && load) st = graft_trainer_load(t, load);
        if (st == GRAFT_OK) st = graft_trainer_fit(t, d->in, 3, &labels, d->in, 3, &labels);
        if (st == GRAFT_OK && save) st = graft_trainer_save(t, save);
        if (st == GRAFT_OK && !save && !load) { /* an MLP head attaches as Gemm-Relu-Gemm */
            double loss, acc;
            graft_trainer_evaluate(t, d->in, 3, &labels, &loss, &acc);
            st = graft_trainer_attach(t, 0);
            const graft_tensor *out = NULL;
            if (st == GRAFT_OK) st = graft_model_run(m, d->in, 3);
            if (st == GRAFT_OK) graft_model_output(m, 0, &out);
            int right = 0;
            for (int i = 0; out && i < N; i++) {
                const float *lg = (const float *)out->data + i * 4;
                int best = 0;
                for (int k = 1; k < 4; k++) best = lg[k] > lg[best] ? k : best;
                right += best == d->labels[i];
            }
            CHECK("fit_attach_mlp_head", out && fabs(right / (double)N - acc) < 1e-9,
                  "status %d, %d right vs accuracy %.3f", st, right, acc);
        }
        if (st == GRAFT_OK)
            rc = 0;
        else
            printf("  %s\n", graft_last_error(ctx));
        graft_trainer_free(t);
        graft_model_free(m);
    }
    graft_ctx_free(ctx);
    return rc;
}

static int find_epoch_samples(const char *key, const char *value, void *user) {
    if (strcmp(key, "epoch_samples") != 0) return 0;
    *(long long *)user = strtoll(value, NULL, 10);
    return 1;
}

/* Stopped by the callback mid-epoch (after step 10: the first batch of the 4th epoch of 3
 * steps), saved there and resumed: every epoch as in the uninterrupted run `whole`. */
static void resume_mid_epoch(const char *gen, data *d, const trace *whole, const char *path) {
    trace first = {.stop_at_step = 10}, second = {0};
    int rc = fit_mlp(gen, d, &first, path, NULL);
    long long at = -1;
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    graft_status st = graft_checkpoint_metadata(ctx, path, find_epoch_samples, &at);
    graft_ctx_free(ctx);
    rc |= fit_mlp(gen, d, &second, NULL, path);
    int same = rc == 0 && st == GRAFT_OK && at == 16 && first.n == 3 && second.n == 5;
    for (int i = 0; same && i < 8; i++) {
        const trace *part = i < 3 ? &first : &second;
        same = part->loss[i] == whole->loss[i] && part->vloss[i] == whole->vloss[i];
    }
    CHECK("checkpoint_mid_epoch_resume_equals_uninterrupted", same,
          "rc %d, saved at sample %lld, epochs %d/%d, last loss %.9g vs %.9g", rc, at, first.n,
          second.n, whole->loss[7], second.loss[7]);
}

typedef struct extract_seen {
    int calls, stop_after; /* stop after this many reports */
    graft_extract_report last;
    seen steps;
} extract_seen;

static int on_extract(const graft_extract_report *r, void *user) {
    extract_seen *x = user;
    x->calls++;
    x->last = *r;
    return x->calls >= x->stop_after;
}

static int count_steps(const graft_train_report *r, void *user) {
    return on_report(r, &((extract_seen *)user)->steps);
}

static int find_key(const char *key, const char *value, void *user) {
    const char **want = user; /* {key, found value} */
    if (strcmp(key, want[0]) != 0) return 0;
    want[1] = value[0] == 'y' ? "y" : "other";
    return 1;
}

/* The backbone phase reports before its first batch and after each; a callback's stop ends it
 * there: fit returns GRAFT_OK having trained nothing. Application metadata in a checkpoint. */
static void extract_stop_and_metadata(const char *gen, data *d) {
    graft_ctx *ctx;
    graft_model *m;
    graft_trainer *t = NULL;
    graft_ctx_create(NULL, &ctx);
    if ((m = load_cut(ctx, gen, GRAFT_POOLING_CLS)) == NULL) return graft_ctx_free(ctx);
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 4;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.epochs = 2, to.batch_size = 16;
    extract_seen x = {.stop_after = 2};
    to.callback = count_steps, to.extract_callback = on_extract, to.callback_user = &x;
    graft_tensor labels = {GRAFT_DTYPE_I64, 1, {N}, d->labels};
    graft_status st = graft_trainer_create(m, &ho, &to, &t);
    if (st == GRAFT_OK) st = graft_trainer_fit(t, d->in, 3, &labels, NULL, 0, NULL);
    CHECK("fit_extract_callback_stops",
          st == GRAFT_OK && x.calls == 2 && x.last.done == 16 && x.last.total == N &&
              x.last.backbone_samples == 16 && x.steps.steps == 0,
          "status %d, %d reports, last %lld/%lld, %d steps", st, x.calls, (long long)x.last.done,
          (long long)x.last.total, x.steps.steps);
    char dir[] = "/tmp/graft_fit_metaXXXXXX", path[256];
    if (t && mkdtemp(dir)) {
        snprintf(path, sizeof path, "%s/m.safetensors", dir);
        const char *keys[] = {"app.option", "step"}, *values[] = {"y", "1"};
        graft_status own = graft_trainer_save_meta(t, path, keys, values, 2);
        graft_status twice =
            graft_trainer_save_meta(t, path, (const char *[]){"a", "a"}, values, 2);
        st = graft_trainer_save_meta(t, path, keys, values, 1);
        const char *want[2] = {"app.option", NULL};
        if (st == GRAFT_OK) st = graft_checkpoint_metadata(ctx, path, find_key, want);
        CHECK("checkpoint_app_metadata",
              own == GRAFT_E_INVALID_ARGUMENT && twice == GRAFT_E_INVALID_ARGUMENT &&
                  st == GRAFT_OK && want[1] && !strcmp(want[1], "y"),
              "own key %d, repeated %d, status %d: %s", own, twice, st, graft_last_error(ctx));
        remove(path);
        rmdir(dir);
    }
    graft_trainer_free(t);
    graft_model_free(m);
    graft_ctx_free(ctx);
}

/* A run stopped after 4 epochs, saved and resumed equals one that never stopped, bit for bit. */
static void resume(const char *gen, data *d) {
    char dir[] = "/tmp/graft_ckptXXXXXX", path[256];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/trainer.safetensors", dir);
    trace whole = {0}, first = {.stop_after = 4}, second = {0};
    int rc = fit_mlp(gen, d, &whole, NULL, NULL);
    rc |= fit_mlp(gen, d, &first, path, NULL);
    rc |= fit_mlp(gen, d, &second, NULL, path);
    int same = rc == 0 && whole.n == 8 && first.n == 4 && second.n == 4;
    for (int i = 0; same && i < 8; i++) {
        const trace *part = i < 4 ? &first : &second;
        same = part->loss[i] == whole.loss[i] && part->vloss[i] == whole.vloss[i];
    }
    CHECK("checkpoint_resume_equals_uninterrupted", same,
          "rc %d, epochs %d/%d/%d, last loss "
          "%.9g vs %.9g",
          rc, whole.n, first.n, second.n, whole.loss[7], second.loss[7]);
    resume_mid_epoch(gen, d, &whole, path);
    graft_ctx *ctx;
    graft_ctx_create(NULL, &ctx);
    graft_model *m;
    char model[1024];
    snprintf(model, sizeof model, "%s/bert_tiny_decomposed.onnx", gen);
    graft_trainer *t = NULL;
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 3; /* not the saved head */
    if (graft_model_load(ctx, model, &m) == GRAFT_OK) {
        graft_model_cut(m, "auto", GRAFT_POOLING_CLS);
        graft_trainer_create(m, &ho, NULL, &t);
        graft_status st = graft_trainer_load(t, path);
        CHECK("checkpoint_other_head_rejected",
              st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), "does not match"),
              "status %d: %s", st, graft_last_error(ctx));
        if (truncate(path, 100) == 0) st = graft_trainer_load(t, path);
        CHECK("checkpoint_truncated_rejected", st != GRAFT_OK, "status %d", st);
        graft_trainer_free(t);
        graft_model_free(m);
    }
    graft_ctx_free(ctx);
    remove(path);
    rmdir(dir);
}

/* Validation labels the features cannot explain: the validation loss rises as training fits,
 * training stops after `early_stop` epochs without improvement and keeps the best weights. */
static void early_stopping(const char *gen, data *d) {
    graft_ctx *ctx;
    graft_model *m;
    graft_trainer *t = NULL;
    graft_ctx_create(NULL, &ctx);
    static int64_t wrong[N];
    for (int i = 0; i < N; i++) wrong[i] = (d->labels[i] + 1 + i % 3) % 4;
    trace tr = {0};
    double vloss = -1, vacc;
    if ((m = load_cut(ctx, gen, GRAFT_POOLING_CLS)) != NULL) {
        graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
        ho.n_outputs = 4;
        graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
        to.epochs = 16, to.batch_size = 16, to.lr = 3e-2, to.early_stop = 2;
        to.callback = record, to.callback_user = &tr;
        graft_tensor labels = {GRAFT_DTYPE_I64, 1, {N}, d->labels};
        graft_tensor bad = {GRAFT_DTYPE_I64, 1, {N}, wrong};
        if (graft_trainer_create(m, &ho, &to, &t) == GRAFT_OK &&
            graft_trainer_fit(t, d->in, 3, &labels, d->in, 3, &bad) == GRAFT_OK)
            graft_trainer_evaluate(t, d->in, 3, &bad, &vloss, &vacc);
        graft_trainer_free(t);
        graft_model_free(m);
    }
    double best = 1e300;
    for (int i = 0; i < tr.n; i++) best = tr.vloss[i] < best ? tr.vloss[i] : best;
    CHECK("early_stopping_keeps_best", tr.n < 16 && fabs(vloss - best) <= 1e-6 * best,
          "%d epochs, validation loss %.6f after, best %.6f", tr.n, vloss, best);
    graft_ctx_free(ctx);
}

/* An application's own source: serves the samples in batches from its arrays. */
static graft_status my_read(void *user, int64_t start, int64_t count, graft_named_tensor *in,
                            graft_tensor *labels, unsigned char *kept) {
    data *d = user;
    memset(kept, 1, (size_t)count);
    for (int k = 0; k < 3; k++) {
        in[k] = d->in[k];
        in[k].tensor.dims[0] = count;
        in[k].tensor.data = (int64_t *)d->in[k].tensor.data + start * S;
    }
    *labels = (graft_tensor){GRAFT_DTYPE_I64, 1, {count}, d->labels + start};
    return GRAFT_OK;
}

/* A source that cannot read every 5th sample: it skips them and delivers the rest packed. */
static graft_status skipping_read(void *user, int64_t start, int64_t count, graft_named_tensor *in,
                                  graft_tensor *labels, unsigned char *kept) {
    data *d = user;
    static int64_t buf[3][N * S], lab[N];
    int64_t got = 0;
    for (int64_t i = 0; i < count; i++) {
        kept[i] = (start + i) % 5 != 4;
        if (!kept[i]) continue;
        for (int k = 0; k < 3; k++)
            memcpy(buf[k] + got * S, (int64_t *)d->in[k].tensor.data + (start + i) * S,
                   sizeof(int64_t) * S);
        lab[got++] = d->labels[start + i];
    }
    for (int k = 0; k < 3; k++) {
        in[k] = d->in[k];
        in[k].tensor.dims[0] = got;
        in[k].tensor.data = buf[k];
    }
    *labels = (graft_tensor){GRAFT_DTYPE_I64, 1, {got}, lab};
    return GRAFT_OK;
}

/* Counts of a counting source's calls: reads of inputs (with skipped samples when skip), and
 * of labels alone. */
typedef struct counted {
    data *d;
    int skip, reads, label_reads;
} counted;

static graft_status skipping_read(void *user, int64_t start, int64_t count, graft_named_tensor *in,
                                  graft_tensor *labels, unsigned char *kept);

static graft_status counted_read(void *user, int64_t start, int64_t count, graft_named_tensor *in,
                                 graft_tensor *labels, unsigned char *kept) {
    counted *c = user;
    c->reads++;
    return (c->skip ? skipping_read : my_read)(c->d, start, count, in, labels, kept);
}

static graft_status counted_labels(void *user, int64_t start, int64_t count, graft_tensor *y) {
    counted *c = user;
    c->label_reads++;
    *y = (graft_tensor){GRAFT_DTYPE_I64, 1, {count}, c->d->labels + start};
    return GRAFT_OK;
}

/* A source with read_labels over a warm cache: no input is read again, the result is the cold
 * run's; with skipped samples (never cached) only the batches holding one are read again. */
static void warm_cache_reads_no_input(const char *gen, data *d, int skip) {
    graft_ctx *ctx;
    graft_model *m;
    graft_ctx_create(NULL, &ctx);
    char dir[] = "/tmp/graft_fit_warmXXXXXX", path[256];
    if (!mkdtemp(dir) || (m = load_cut(ctx, gen, GRAFT_POOLING_CLS)) == NULL) {
        graft_ctx_free(ctx);
        return;
    }
    snprintf(path, sizeof path, "%s/features.cache", dir);
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 4;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.epochs = 5, to.batch_size = 16, to.lr = 3e-2, to.seed = 3, to.cache_path = path;
    seen s[2] = {{0}, {0}};
    counted c[2] = {{d, skip, 0, 0}, {d, skip, 0, 0}};
    graft_status st = GRAFT_OK;
    for (int run = 0; run < 2 && st == GRAFT_OK; run++) {
        graft_trainer *t = NULL;
        to.callback = on_report, to.callback_user = &s[run];
        graft_batch_source src = {
            N, 3, counted_read, &c[run], skip ? "skip" : "all", counted_labels, NULL};
        st = graft_trainer_create(m, &ho, &to, &t);
        if (st == GRAFT_OK) st = graft_trainer_fit_source(t, &src, NULL);
        graft_trainer_free(t);
    }
    int batches = (N + 15) / 16, with_skips = 0;
    for (int b = 0; b < batches; b++)
        for (int i = b * 16; i < (b + 1) * 16 && i < N; i++)
            if (i % 5 == 4) {
                with_skips++;
                break;
            }
    int want_reads = skip ? with_skips : 0;
    CHECK(skip ? "warm_cache_rereads_only_batches_with_skips" : "warm_cache_reads_no_input",
          st == GRAFT_OK && c[0].reads == batches && c[1].reads == want_reads &&
              c[1].label_reads == batches - want_reads && s[1].last_loss == s[0].last_loss &&
              s[1].backbone_samples == 0,
          "status %d: %s; reads %d then %d (want %d), label reads %d, loss %.9g vs %.9g, "
          "backbone %lld",
          st, graft_last_error(ctx), c[0].reads, c[1].reads, want_reads, c[1].label_reads,
          s[1].last_loss, s[0].last_loss, (long long)s[1].backbone_samples);
    unlink(path);
    rmdir(dir);
    graft_model_free(m);
    graft_ctx_free(ctx);
}

/* A cap on the backbone's buffers under which a run of `big` samples fails for memory and one
 * of a single sample runs: the largest power of two that does it, or 0. */
static size_t cap_between(graft_model *m, data *d, int big) {
    for (size_t cap = (size_t)1 << 26; cap >= 256; cap /= 2) {
        graft_named_tensor in[3];
        m->exec.max_buffer_bytes = cap;
        for (int k = 0; k < 3; k++) in[k] = d->in[k], in[k].tensor.dims[0] = big;
        graft_status st_big = graft_model_run(m, in, 3);
        for (int k = 0; k < 3; k++) in[k].tensor.dims[0] = 1;
        graft_status st_one = graft_model_run(m, in, 3);
        m->exec.max_buffer_bytes = 0;
        if (st_big == GRAFT_E_OUT_OF_MEMORY && st_one == GRAFT_OK) return cap;
    }
    return 0;
}

/* The backbone out of memory on a whole batch: the batch is split and retried, and the head
 * trains to the same loss as without the limit. */
static void backbone_out_of_memory_splits(const char *gen, data *d) {
    graft_ctx *ctx;
    graft_model *m;
    graft_ctx_create(NULL, &ctx);
    if ((m = load_cut(ctx, gen, GRAFT_POOLING_CLS)) == NULL) {
        graft_ctx_free(ctx);
        return;
    }
    size_t cap = cap_between(m, d, 16);
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 4;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.epochs = 3, to.batch_size = 16, to.lr = 3e-2, to.seed = 3;
    seen s[2] = {{0}, {0}};
    graft_status st[2] = {GRAFT_E_INTERNAL, GRAFT_E_INTERNAL};
    for (int run = 0; run < 2 && cap; run++) {
        graft_trainer *t = NULL;
        to.callback = on_report, to.callback_user = &s[run];
        m->exec.max_buffer_bytes = run ? cap : 0;
        st[run] = graft_trainer_create(m, &ho, &to, &t);
        if (st[run] == GRAFT_OK)
            st[run] = graft_trainer_fit(
                t, d->in, 3, &(graft_tensor){GRAFT_DTYPE_I64, 1, {N}, d->labels}, NULL, 0, NULL);
        m->exec.max_buffer_bytes = 0;
        graft_trainer_free(t);
    }
    CHECK("backbone_out_of_memory_splits_the_batch",
          cap && st[0] == GRAFT_OK && st[1] == GRAFT_OK &&
              fabs(s[1].last_loss - s[0].last_loss) <= 1e-5 * fabs(s[0].last_loss) &&
              s[1].backbone_samples == N,
          "cap %zu, status %d/%d (%s), loss %.9g vs %.9g, backbone %lld", cap, st[0], st[1],
          graft_last_error(ctx), s[1].last_loss, s[0].last_loss, (long long)s[1].backbone_samples);
    graft_model_free(m);
    graft_ctx_free(ctx);
}

static void batch_source(const char *gen, data *d) {
    graft_ctx *ctx;
    graft_model *m;
    graft_trainer *t = NULL;
    graft_ctx_create(NULL, &ctx);
    seen s = {0};
    if ((m = load_cut(ctx, gen, GRAFT_POOLING_CLS)) != NULL) {
        graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
        ho.n_outputs = 4;
        graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
        to.epochs = 5, to.batch_size = 16, to.lr = 3e-2, to.seed = 3;
        to.callback = on_report, to.callback_user = &s;
        graft_batch_source src = {N, 3, my_read, d, NULL, NULL, NULL};
        graft_status st = graft_trainer_create(m, &ho, &to, &t);
        if (st == GRAFT_OK) st = graft_trainer_fit_source(t, &src, &src);
        seen plain;
        fit_once(gen, GRAFT_POOLING_CLS, d, NULL, &plain);
        CHECK("fit_batch_source",
              st == GRAFT_OK && s.epochs == 5 && s.last_loss == plain.last_loss &&
                  s.backbone_samples == 2 * N,
              "status %d: %s; loss %.9g vs tensors %.9g", st, graft_last_error(ctx), s.last_loss,
              plain.last_loss);
        graft_trainer_free(t);
        seen k = {0};
        to.callback_user = &k;
        graft_batch_source skipping = {N, 3, skipping_read, d, NULL, NULL, NULL};
        st = graft_trainer_create(m, &ho, &to, &t);
        if (st == GRAFT_OK) st = graft_trainer_fit_source(t, &skipping, NULL);
        CHECK("fit_source_skips_samples",
              st == GRAFT_OK && k.backbone_samples == N - N / 5 && k.steps == 5 * 3,
              "status %d: %s; backbone %lld, steps %d", st, graft_last_error(ctx),
              (long long)k.backbone_samples, k.steps);
        graft_trainer_free(t);
        to.cache_path = "/tmp/graft_never_written.cache";
        st = graft_trainer_create(m, &ho, &to, &t);
        if (st == GRAFT_OK) st = graft_trainer_fit_source(t, &src, NULL);
        CHECK("fit_uncacheable_source_with_cache",
              st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), "identity"),
              "status %d: %s", st, graft_last_error(ctx));
        graft_trainer_free(t);
        graft_model_free(m);
    }
    graft_ctx_free(ctx);
}

/* Multi-label (BCE with logits) and regression (MSE) heads learn float targets. */
static void float_targets(const char *gen, data *d) {
    static float onehot[N * 4];
    for (int i = 0; i < N * 4; i++) onehot[i] = (float)(d->labels[i / 4] == i % 4);
    graft_tensor y = {GRAFT_DTYPE_F32, 2, {N, 4}, onehot};
    const graft_loss losses[2] = {GRAFT_LOSS_BCE_LOGITS, GRAFT_LOSS_MSE};
    const char *names[2] = {"fit_bce_multilabel", "fit_mse_regression"};
    for (int k = 0; k < 2; k++) {
        graft_ctx *ctx;
        graft_model *m;
        graft_trainer *t = NULL;
        graft_ctx_create(NULL, &ctx);
        seen s = {0};
        m = load_cut(ctx, gen, GRAFT_POOLING_CLS);
        graft_status st = m ? GRAFT_OK : GRAFT_E_NOT_FOUND;
        graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
        ho.n_outputs = 4;
        graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
        to.loss = losses[k], to.epochs = 30, to.batch_size = 16, to.lr = 3e-2;
        to.callback = on_report, to.callback_user = &s;
        if (st == GRAFT_OK) st = graft_trainer_create(m, &ho, &to, &t);
        if (st == GRAFT_OK) st = graft_trainer_fit(t, d->in, 3, &y, NULL, 0, NULL);
        double loss = -1, acc = 0;
        if (st == GRAFT_OK) st = graft_trainer_evaluate(t, d->in, 3, &y, &loss, &acc);
        CHECK(names[k], st == GRAFT_OK && acc == -1.0 && loss < 0.5 * s.first_loss,
              "status %d: %s; loss %.4f after, first epoch %.4f", st, graft_last_error(ctx), loss,
              s.first_loss);
        graft_trainer_free(t);
        graft_model_free(m);
        graft_ctx_free(ctx);
    }
}

/* A NaN in the targets stops training at its step with an error naming the step and samples,
 * and the weights are left as they were before it. */
static void nan_loss(const char *gen, data *d) {
    static float target[N * 4];
    for (int i = 0; i < N * 4; i++) target[i] = (float)(d->labels[i / 4] == i % 4);
    target[4 * 5 + 1] = NAN;
    graft_tensor y = {GRAFT_DTYPE_F32, 2, {N, 4}, target};
    graft_ctx *ctx;
    graft_trainer *t = NULL;
    graft_ctx_create(NULL, &ctx);
    graft_model *m = load_cut(ctx, gen, GRAFT_POOLING_CLS);
    graft_status st = m ? GRAFT_OK : GRAFT_E_NOT_FOUND;
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 4;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    to.loss = GRAFT_LOSS_MSE, to.epochs = 3, to.batch_size = 16, to.lr = 3e-2;
    if (st == GRAFT_OK) st = graft_trainer_create(m, &ho, &to, &t);
    if (st == GRAFT_OK) st = graft_trainer_fit(t, d->in, 3, &y, NULL, 0, NULL);
    const char *msg = graft_last_error(ctx);
    CHECK("fit_nan_loss_stops",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(msg, "loss is NaN") &&
              strstr(msg, "epoch 1, step") && strstr(msg, "samples"),
          "status %d: %s", st, msg);
    graft_trainer_free(t);
    graft_model_free(m);
    graft_ctx_free(ctx);
}

int main(int argc, char **argv) {
    const char *gen = argc > 1 ? argv[1] : "tests/data/gen";
    char path[1024];
    snprintf(path, sizeof path, "%s/bert_tiny_decomposed.onnx", gen);
    graft_ctx *ctx;
    graft_model *m;
    graft_ctx_create(NULL, &ctx);
    if (graft_model_load(ctx, path, &m) != GRAFT_OK) {
        MISSING("fit", "bert_tiny_decomposed.onnx not generated");
        graft_ctx_free(ctx);
        return 0;
    }
    graft_head_options ho = GRAFT_HEAD_OPTIONS_INIT;
    ho.n_outputs = 4;
    graft_train_options to = GRAFT_TRAIN_OPTIONS_INIT;
    graft_trainer *t = NULL;
    graft_status st = graft_trainer_create(m, &ho, &to, &t);
    CHECK("fit_needs_cut_model",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(graft_last_error(ctx), "cut"), "status %d: %s",
          st, graft_last_error(ctx));
    graft_model_cut(m, "auto", GRAFT_POOLING_CLS);
    static data d;
    make_data(&d, 7);
    make_labels(m, &d);
    seen s = {0};
    to.epochs = 40, to.batch_size = 16, to.lr = 3e-2, to.seed = 3;
    to.callback = on_report, to.callback_user = &s;
    st = graft_trainer_create(m, &ho, &to, &t);
    CHECK("fit_create", st == GRAFT_OK, "%s", graft_last_error(ctx));
    graft_tensor bad = {GRAFT_DTYPE_F32, 1, {N}, d.labels};
    st = graft_trainer_fit(t, d.in, 3, &bad, NULL, 0, NULL);
    CHECK("fit_rejects_float_class_labels", st == GRAFT_E_SHAPE, "status %d: %s", st,
          graft_last_error(ctx));
    graft_tensor labels = {GRAFT_DTYPE_I64, 1, {N}, d.labels};
    st = graft_trainer_fit(t, d.in, 3, &labels, NULL, 0, NULL);
    CHECK("fit_runs", st == GRAFT_OK && s.epochs == 40 && s.steps == 40 * 3,
          "status %d: %s; "
          "%d epochs, %d steps",
          st, graft_last_error(ctx), s.epochs, s.steps);
    CHECK("fit_backbone_once_per_sample", s.backbone_samples == N, "backbone ran for %lld samples",
          (long long)s.backbone_samples);
    double loss = -1, acc = -1;
    st = graft_trainer_evaluate(t, d.in, 3, &labels, &loss, &acc);
    CHECK("fit_learns", st == GRAFT_OK && acc >= 0.9 && s.last_loss < 0.5 * s.first_loss,
          "accuracy %.3f, loss %.3f -> %.3f", acc, s.first_loss, s.last_loss);
    printf("  training accuracy %.3f, epoch loss %.3f -> %.3f\n", acc, s.first_loss, s.last_loss);
    st = graft_trainer_attach(t, 0);
    graft_value_info info;
    graft_model_output_info(m, 0, &info);
    int agree = 0;
    if (st == GRAFT_OK && graft_model_run(m, d.in, 3) == GRAFT_OK) {
        const graft_tensor *out;
        graft_model_output(m, 0, &out);
        const float *lg = out->data;
        for (int i = 0; i < N; i++) {
            int best = 0;
            for (int k = 1; k < 4; k++)
                if (lg[i * 4 + k] > lg[i * 4 + best]) best = k;
            agree += best == d.labels[i];
        }
    }
    CHECK("fit_attach_predicts",
          st == GRAFT_OK && !strcmp(info.name, "logits") && fabs(agree / (double)N - acc) < 1e-9,
          "status %d: %s; output '%s', %d of %d right vs "
          "accuracy %.3f",
          st, graft_last_error(ctx), info.name, agree, N, acc);
    graft_trainer_free(t);
    graft_model_free(m);
    graft_ctx_free(ctx);
    feature_cache(gen, &d);
    warm_cache_reads_no_input(gen, &d, 0);
    warm_cache_reads_no_input(gen, &d, 1);
    backbone_out_of_memory_splits(gen, &d);
    resume(gen, &d);
    extract_stop_and_metadata(gen, &d);
    early_stopping(gen, &d);
    batch_source(gen, &d);
    float_targets(gen, &d);
    nan_loss(gen, &d);
    return test_failures ? 1 : 0;
}

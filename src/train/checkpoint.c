/* checkpoint.c: graft_trainer_save / graft_trainer_load: the whole training state in one
 * safetensors file (tensors for weights and optimizer state, metadata for the scalars, floats
 * written in hexadecimal so a resumed run is bit-for-bit the same), with the application's own
 * metadata beside it (graft_checkpoint_metadata reads it back); checksums and every field checked
 * on load (checkpoint_check.c). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "core/context.h"
#include "core/temp_files.h"
#include "trainer.h"

#define CHECKPOINT_FORMAT "graft.trainer.v1"

typedef struct meta {
    const char *keys[32];
    const char *values[32];
    char buf[32][64];
    int n;
} meta;

static void put(meta *m, const char *key, const char *fmt, double v, long long i) {
    m->keys[m->n] = key;
    if (fmt[1] == 'a')
        snprintf(m->buf[m->n], sizeof m->buf[m->n], "%a", v);
    else
        snprintf(m->buf[m->n], sizeof m->buf[m->n], "%lld", i);
    m->values[m->n] = m->buf[m->n];
    m->n++;
}

static void put_u64(meta *m, const char *key, uint64_t v) {
    m->keys[m->n] = key;
    snprintf(m->buf[m->n], sizeof m->buf[m->n], "%llu", (unsigned long long)v);
    m->values[m->n] = m->buf[m->n];
    m->n++;
}

/* The head's shape, so a checkpoint is only loaded into a matching trainer. */
static void head_signature(const graft_trainer *t, char *buf, size_t size) {
    int used = snprintf(buf, size, "%lld", (long long)t->dim);
    for (int i = 0; i < t->h.n_layers && used < (int)size; i++)
        used += snprintf(buf + used, size - (size_t)used, "-%lld", (long long)t->h.layers[i].out);
    if (used < (int)size)
        used += snprintf(buf + used, size - (size_t)used, "/opt%d", t->options.optimizer);
    if (t->blocks && used < (int)size) /* fine-tuned blocks: from where, how many weights */
        snprintf(buf + used, size - (size_t)used, "/from:%.120s:%d", t->options.train_from,
                 t->blocks->n_params);
}

/* An application key must not repeat one of the trainer's or another application key: the file
 * would not read back (safetensors rejects duplicate metadata keys). */
static graft_status check_app_keys(const meta *m, const char *const *keys,
                                   const char *const *values, int n, graft_err *e) {
    for (int i = 0; i < n; i++) {
        if (!keys[i] || !values[i])
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "checkpoint metadata entry %d is NULL", i);
        for (int j = 0; j < m->n; j++)
            if (!strcmp(keys[i], m->keys[j]))
                return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                               "checkpoint metadata key '%s' is the trainer's own", keys[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(keys[i], keys[j]))
                return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                               "checkpoint metadata key '%s' is given twice", keys[i]);
    }
    return GRAFT_OK;
}

/* The trainer's metadata followed by the application's, written with the tensors. */
static graft_status write_file(const char *path, const st_tensor_in *ts, int n_tensors,
                               const meta *m, const char *const *keys, const char *const *values,
                               int n, graft_err *e) {
    const char **all_keys = malloc(sizeof(char *) * (size_t)(m->n + n));
    const char **all_values = malloc(sizeof(char *) * (size_t)(m->n + n));
    graft_status st =
        all_keys && all_values ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    if (st == GRAFT_OK) {
        memcpy(all_keys, m->keys, sizeof(char *) * (size_t)m->n);
        memcpy(all_values, m->values, sizeof(char *) * (size_t)m->n);
        if (n > 0) memcpy(all_keys + m->n, keys, sizeof(char *) * (size_t)n);
        if (n > 0) memcpy(all_values + m->n, values, sizeof(char *) * (size_t)n);
        st = checkpoint_write_sealed(path, ts, n_tensors, all_keys, all_values, m->n + n, e);
    }
    free(all_keys), free(all_values);
    return st;
}

graft_status graft_trainer_save(const graft_trainer *ct, const char *path) {
    return graft_trainer_save_meta(ct, path, NULL, NULL, 0);
}

static graft_status save_tensors(graft_trainer *t, st_tensor_in *ts, optim_state_buf *bufs,
                                 int n_state, const char *path, const char *const *keys,
                                 const char *const *values, int n, graft_err *e);

graft_status graft_trainer_save_meta(const graft_trainer *ct, const char *path,
                                     const char *const *keys, const char *const *values, int n) {
    if (!ct || !path || n < 0 || (n > 0 && (!keys || !values))) return GRAFT_E_INVALID_ARGUMENT;
    graft_trainer *t = (graft_trainer *)ct; /* optim_state_get needs a mutable optimizer */
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    if (!t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "nothing to save: the head has no weights yet");
    TRY(trainer_sync_host(t, e)); /* resident blocks: the device's weights and state */
    int n_state = optim_state_count(t->opt);
    st_tensor_in *ts = malloc(sizeof *ts * (size_t)(t->n_params + n_state + 2));
    optim_state_buf *bufs = malloc(sizeof *bufs * (size_t)(n_state + 1));
    if (!ts || !bufs) {
        free(ts), free(bufs);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory saving a checkpoint");
    }
    graft_status st = save_tensors(t, ts, bufs, n_state, path, keys, values, n, e);
    free(ts), free(bufs);
    return st;
}

static graft_status save_tensors(graft_trainer *t, st_tensor_in *ts, optim_state_buf *bufs,
                                 int n_state, const char *path, const char *const *keys,
                                 const char *const *values, int n, graft_err *e) {
    int n_tensors = 0;
    for (int i = 0; i < t->n_params; i++) {
        ts[n_tensors++] = (st_tensor_in){t->params[i].name, GRAFT_DTYPE_F32, 1, &t->params[i].numel,
                                         t->params[i].data};
    }
    for (int i = 0; i < n_state; i++) {
        TRY(optim_state_get(&bufs[i], t->opt, i, e));
        ts[n_tensors++] =
            (st_tensor_in){bufs[i].name, GRAFT_DTYPE_F32, 1, &bufs[i].numel, bufs[i].data};
    }
    int64_t total = 0;
    for (int i = 0; i < t->n_params; i++) total += t->params[i].numel;
    if (t->best)
        ts[n_tensors++] =
            (st_tensor_in){"trainer.best_weights", GRAFT_DTYPE_F32, 1, &total, t->best};
    meta m = {.n = 0};
    char sig[256];
    head_signature(t, sig, sizeof sig);
    m.keys[m.n] = "format", m.values[m.n++] = CHECKPOINT_FORMAT;
    m.keys[m.n] = "head", m.values[m.n++] = sig;
    put(&m, "step", "%d", 0, t->step);
    put(&m, "micro", "%d", 0, t->micro);
    put(&m, "epoch", "%d", 0, t->epoch);
    put(&m, "optimizer_steps", "%d", 0, optim_step_count(t->opt));
    put_u64(&m, "rng_data_order", t->rng);
    put_u64(&m, "rng_dropout", t->h.rng);
    put(&m, "loss_scale", "%a", t->scaler.scale, 0);
    put(&m, "loss_scale_growth_tracker", "%d", 0, t->scaler.growth_tracker);
    put(&m, "skipped_steps", "%d", 0, t->skipped_steps);
    put(&m, "plateau_lr", "%a", t->plat.lr, 0);
    put(&m, "plateau_best", "%a", t->plat.best, 0);
    put(&m, "plateau_bad_epochs", "%d", 0, t->plat.num_bad_epochs);
    put(&m, "plateau_cooldown", "%d", 0, t->plat.cooldown_counter);
    put(&m, "plateau_last_epoch", "%d", 0, t->plat.last_epoch);
    put(&m, "early_stop_best", "%a", t->best_metric, 0);
    put(&m, "early_stop_bad_epochs", "%d", 0, t->bad_epochs);
    put_u64(&m, "epoch_rng_data_order", t->epoch_rng);
    put(&m, "epoch_samples", "%d", 0, t->epoch_at);
    put(&m, "epoch_loss_sum", "%a", t->epoch_loss, 0);
    put(&m, "epoch_correct", "%d", 0, t->epoch_correct);
    TRY(check_app_keys(&m, keys, values, n, e));
    graft_status st = write_file(path, ts, n_tensors, &m, keys, values, n, e);
    if (st != GRAFT_OK) err_prefix(e, "saving the checkpoint");
    return st;
}

/* The scalars of a checkpoint, parsed and checked before any of them reaches the trainer. */
typedef struct saved {
    long long step, micro, epoch, opt_steps, growth, skipped, plat_bad, plat_cooldown, plat_last,
        es_bad, epoch_at, epoch_correct;
    uint64_t rng, rng_dropout, epoch_rng;
    double scale, plat_lr, plat_best, es_best, epoch_loss;
} saved;

#define BIG (LLONG_MAX / 4)

/* The counters: epoch within the run's epochs, and step, micro-batches and the position in the
 * epoch consistent with it and each other. */
static graft_status parse_counters(const graft_trainer *t, const safetensors_file *f, saved *s,
                                   graft_err *e) {
    char why[96];
    snprintf(why, sizeof why, "the epochs of this run: %d", t->options.epochs);
    TRY(checkpoint_get_int(f, "epoch", 0, t->options.epochs, why, &s->epoch, e));
    TRY(checkpoint_get_int(f, "micro", s->epoch, BIG, "at least one micro-batch an epoch",
                           &s->micro, e));
    TRY(checkpoint_get_int(f, "step", 0, s->micro, "at most 'micro', the micro-batches done",
                           &s->step, e));
    TRY(checkpoint_get_int(f, "optimizer_steps", 0, s->step, "at most 'step'", &s->opt_steps, e));
    TRY(checkpoint_get_int(f, "skipped_steps", 0, s->step, "at most 'step'", &s->skipped, e));
    TRY(checkpoint_get_int(f, "loss_scale_growth_tracker", 0, BIG, NULL, &s->growth, e));
    TRY(checkpoint_get_int(f, "plateau_bad_epochs", 0, s->epoch, "at most 'epoch'", &s->plat_bad,
                           e));
    TRY(checkpoint_get_int(f, "plateau_cooldown", 0, BIG, NULL, &s->plat_cooldown, e));
    TRY(checkpoint_get_int(f, "plateau_last_epoch", 0, s->epoch, "at most 'epoch'", &s->plat_last,
                           e));
    TRY(checkpoint_get_int(f, "early_stop_bad_epochs", 0, s->epoch, "at most 'epoch'", &s->es_bad,
                           e));
    s->epoch_at = 0, s->epoch_correct = 0, s->epoch_loss = 0.0;
    /* Where in its epoch the checkpoint was taken; older checkpoints were at an epoch's end. */
    if (!safetensors_meta(f, "epoch_rng_data_order")) return GRAFT_OK;
    TRY(checkpoint_get_u64(f, "epoch_rng_data_order", &s->epoch_rng, e));
    bool done = s->epoch == t->options.epochs || s->micro == 0;
    TRY(checkpoint_get_int(f, "epoch_samples", 0, done ? 0 : BIG,
                           done ? "0 when no epoch is under way" : NULL, &s->epoch_at, e));
    TRY(checkpoint_get_float(f, "epoch_loss_sum", CK_NONNEG, &s->epoch_loss, e));
    TRY(checkpoint_get_int(f, "epoch_correct", 0, s->epoch_at, "at most 'epoch_samples'",
                           &s->epoch_correct, e));
    return GRAFT_OK;
}

static graft_status parse_saved(const graft_trainer *t, const safetensors_file *f, saved *s,
                                graft_err *e) {
    TRY(parse_counters(t, f, s, e));
    TRY(checkpoint_get_u64(f, "rng_data_order", &s->rng, e));
    TRY(checkpoint_get_u64(f, "rng_dropout", &s->rng_dropout, e));
    if (!safetensors_meta(f, "epoch_rng_data_order")) s->epoch_rng = s->rng;
    TRY(checkpoint_get_float(f, "loss_scale", CK_POSITIVE, &s->scale, e));
    if (!(s->scale <= 3.4e38))
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "the field 'loss_scale' is %g: beyond float32's range", s->scale);
    TRY(checkpoint_get_float(f, "plateau_lr", CK_NONNEG, &s->plat_lr, e));
    TRY(checkpoint_get_float(f, "plateau_best", CK_POS_INF, &s->plat_best, e));
    TRY(checkpoint_get_float(f, "early_stop_best", CK_POS_INF, &s->es_best, e));
    return GRAFT_OK;
}

static graft_status apply_saved(graft_trainer *t, const saved *s, graft_err *e) {
    t->step = s->step, t->micro = s->micro, t->epoch = s->epoch;
    optim_set_step_count(t->opt, s->opt_steps);
    t->rng = s->rng, t->h.rng = s->rng_dropout;
    t->scaler.scale = (float)s->scale;
    t->scaler.growth_tracker = s->growth;
    t->skipped_steps = s->skipped;
    if (t->options.scheduler == GRAFT_SCHEDULER_PLATEAU)
        TRY(plateau_init(&t->plat, t->options.lr, e));
    t->plat.factor = t->options.gamma;
    t->plat.min_lr = t->options.min_lr;
    t->plat.lr = s->plat_lr, t->plat.best = s->plat_best;
    t->plat.num_bad_epochs = s->plat_bad;
    t->plat.cooldown_counter = s->plat_cooldown;
    t->plat.last_epoch = s->plat_last;
    t->best_metric = s->es_best;
    t->bad_epochs = (int)s->es_bad;
    t->epoch_rng = s->epoch_rng;
    t->epoch_at = s->epoch_at, t->epoch_loss = s->epoch_loss, t->epoch_correct = s->epoch_correct;
    return GRAFT_OK;
}

/* Every tensor the trainer needs (its weights, the optimizer's state, the early-stopping best
 * weights when saved): present, float32 of the right size, finite; into found[]. */
static graft_status check_tensors(graft_trainer *t, const safetensors_file *f,
                                  const st_tensor **found, float **dst, int *n, graft_err *e) {
    *n = 0;
    for (int i = 0; i < t->n_params; i++, (*n)++) {
        TRY(checkpoint_check_tensor(f, t->params[i].name, t->params[i].numel, &found[*n], e));
        dst[*n] = t->params[i].data;
    }
    for (int i = 0; i < optim_state_count(t->opt); i++, (*n)++) {
        optim_state_buf b;
        TRY(optim_state_get(&b, t->opt, i, e));
        TRY(checkpoint_check_tensor(f, b.name, b.numel, &found[*n], e));
        dst[*n] = b.data;
    }
    if (!safetensors_find(f, "trainer.best_weights")) return GRAFT_OK;
    int64_t total = 0;
    for (int i = 0; i < t->n_params; i++) total += t->params[i].numel;
    TRY(checkpoint_check_tensor(f, "trainer.best_weights", total, &found[*n], e));
    if (!t->best && !(t->best = malloc(sizeof(float) * (size_t)total)))
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    dst[(*n)++] = t->best;
    return GRAFT_OK;
}

static graft_status load_from(graft_trainer *t, const safetensors_file *f, const char *path,
                              graft_err *e) {
    bool sealed = false;
    TRY(checkpoint_verify(f, &sealed, e));
    const char *format = safetensors_meta(f, "format"), *head = safetensors_meta(f, "head");
    char sig[256];
    head_signature(t, sig, sizeof sig);
    if (!format || strcmp(format, CHECKPOINT_FORMAT) != 0)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "not a graft trainer checkpoint");
    if (!head || strcmp(head, sig) != 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the checkpoint's head (%s) does not match this trainer's (%s)",
                       head ? head : "?", sig);
    size_t most = (size_t)(t->n_params + optim_state_count(t->opt) + 2);
    const st_tensor **found = malloc(sizeof *found * most);
    float **dst = malloc(sizeof *dst * most);
    int n = 0;
    saved s;
    graft_status st =
        found && dst ? GRAFT_OK : err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory loading");
    if (st == GRAFT_OK) st = check_tensors(t, f, found, dst, &n, e);
    if (st == GRAFT_OK) st = parse_saved(t, f, &s, e);
    if (st != GRAFT_OK) {
        free(found), free(dst);
        return st;
    }
    if (!sealed)
        ctx_log(t->model->ctx, GRAFT_LOG_WARN,
                "checkpoint '%s' has no checksum (written by an older graft): loaded without a "
                "check for damage; the next checkpoint written has one",
                path);
    st = trainer_sync_host(t, e); /* resident blocks: the host's copies complete first */
    for (int i = 0; st == GRAFT_OK && i < n; i++) memcpy(dst[i], found[i]->data, found[i]->nbytes);
    free(found), free(dst);
    TRY(st);
    t->device_current = false; /* the next run uploads what was loaded */
    return apply_saved(t, &s, e);
}

graft_status graft_trainer_load(graft_trainer *t, const char *path) {
    if (!t || !path) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    if (!t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the trainer's feature size is not known yet; fit once or use a model "
                       "with a static feature size");
    (void)temp_files_remove_stale(path);
    safetensors_file *f;
    graft_status st = safetensors_open(&f, path, e);
    if (st == GRAFT_OK) {
        st = load_from(t, f, path, e);
        safetensors_free(f);
    }
    if (st != GRAFT_OK) err_prefix(e, "loading checkpoint '%s'", path);
    return st;
}

graft_status graft_checkpoint_metadata(graft_ctx *ctx, const char *path,
                                       int (*each)(const char *key, const char *value, void *user),
                                       void *user) {
    if (!ctx) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &ctx->err;
    err_clear(e);
    if (!path || !each) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no path or callback given");
    (void)temp_files_remove_stale(path); /* a resumed run's other checkpoint, too */
    safetensors_file *f;
    bool sealed;
    graft_status st = safetensors_open(&f, path, e);
    if (st == GRAFT_OK && (st = checkpoint_verify(f, &sealed, e)) != GRAFT_OK) safetensors_free(f);
    if (st != GRAFT_OK) {
        err_prefix(e, "reading checkpoint '%s'", path);
        return st;
    }
    for (int i = 0; i < safetensors_meta_count(f); i++) {
        const char *value, *key = safetensors_meta_at(f, i, &value);
        if (each(key, value, user)) break;
    }
    safetensors_free(f);
    return GRAFT_OK;
}

/* checkpoint.c: graft_trainer_save / graft_trainer_load: the whole training state in one
 * safetensors file (tensors for weights and optimizer state, metadata for the scalars, floats
 * written in hexadecimal so a resumed run is bit-for-bit the same), with the application's own
 * metadata beside it (graft_checkpoint_metadata reads it back). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "trainer.h"

#define MAX_TENSORS (4 * HEAD_MAX_LAYERS + 4)
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
    if (used < (int)size) snprintf(buf + used, size - (size_t)used, "/opt%d", t->options.optimizer);
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
        st = safetensors_write(path, ts, n_tensors, all_keys, all_values, m->n + n, e);
    }
    free(all_keys), free(all_values);
    return st;
}

graft_status graft_trainer_save(const graft_trainer *ct, const char *path) {
    return graft_trainer_save_meta(ct, path, NULL, NULL, 0);
}

graft_status graft_trainer_save_meta(const graft_trainer *ct, const char *path,
                                     const char *const *keys, const char *const *values, int n) {
    if (!ct || !path || n < 0 || (n > 0 && (!keys || !values))) return GRAFT_E_INVALID_ARGUMENT;
    graft_trainer *t = (graft_trainer *)ct; /* optim_state_get needs a mutable optimizer */
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    if (!t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "nothing to save: the head has no weights yet");
    st_tensor_in ts[MAX_TENSORS + 2 * HEAD_MAX_LAYERS * 3];
    int n_tensors = 0;
    for (int i = 0; i < t->n_params; i++) {
        ts[n_tensors++] = (st_tensor_in){t->params[i].name, GRAFT_DTYPE_F32, 1, &t->params[i].numel,
                                         t->params[i].data};
    }
    optim_state_buf bufs[2 * HEAD_MAX_LAYERS * 3];
    int n_state = optim_state_count(t->opt);
    for (int i = 0; i < n_state && i < 2 * HEAD_MAX_LAYERS * 3; i++) {
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

/* A metadata value as a double ("%a" or decimal) or integer; missing is an error. */
static graft_status get_num(const safetensors_file *f, const char *key, double *d, long long *i,
                            graft_err *e) {
    const char *v = safetensors_meta(f, key);
    if (!v) return err_set(e, GRAFT_E_MALFORMED_MODEL, "the checkpoint lacks '%s'", key);
    if (d) *d = strtod(v, NULL);
    if (i) *i = strtoll(v, NULL, 10);
    return GRAFT_OK;
}

static graft_status copy_tensor(const safetensors_file *f, const char *name, float *dst,
                                int64_t numel, graft_err *e) {
    const st_tensor *t = safetensors_find(f, name);
    if (!t || t->dtype != GRAFT_DTYPE_F32 || t->numel != numel)
        return err_set(e, GRAFT_E_MALFORMED_MODEL,
                       "the checkpoint's '%s' is missing or not float32 of %lld values", name,
                       (long long)numel);
    memcpy(dst, t->data, sizeof(float) * (size_t)numel);
    return GRAFT_OK;
}

static graft_status load_scalars(graft_trainer *t, const safetensors_file *f, graft_err *e) {
    long long i = 0;
    double d = 0;
    TRY(get_num(f, "step", NULL, &i, e));
    t->step = i;
    TRY(get_num(f, "micro", NULL, &i, e));
    t->micro = i;
    TRY(get_num(f, "epoch", NULL, &i, e));
    t->epoch = i;
    TRY(get_num(f, "optimizer_steps", NULL, &i, e));
    optim_set_step_count(t->opt, i);
    const char *r1 = safetensors_meta(f, "rng_data_order"),
               *r2 = safetensors_meta(f, "rng_dropout");
    if (!r1 || !r2) return err_set(e, GRAFT_E_MALFORMED_MODEL, "the checkpoint lacks RNG states");
    t->rng = strtoull(r1, NULL, 10);
    t->h.rng = strtoull(r2, NULL, 10);
    TRY(get_num(f, "loss_scale", &d, NULL, e));
    t->scaler.scale = (float)d;
    TRY(get_num(f, "loss_scale_growth_tracker", NULL, &i, e));
    t->scaler.growth_tracker = i;
    TRY(get_num(f, "skipped_steps", NULL, &i, e));
    t->skipped_steps = i;
    if (t->options.scheduler == GRAFT_SCHEDULER_PLATEAU)
        TRY(plateau_init(&t->plat, t->options.lr, e));
    t->plat.factor = t->options.gamma;
    t->plat.min_lr = t->options.min_lr;
    TRY(get_num(f, "plateau_lr", &t->plat.lr, NULL, e));
    TRY(get_num(f, "plateau_best", &t->plat.best, NULL, e));
    TRY(get_num(f, "plateau_bad_epochs", NULL, &i, e));
    t->plat.num_bad_epochs = i;
    TRY(get_num(f, "plateau_cooldown", NULL, &i, e));
    t->plat.cooldown_counter = i;
    TRY(get_num(f, "plateau_last_epoch", NULL, &i, e));
    t->plat.last_epoch = i;
    TRY(get_num(f, "early_stop_best", &t->best_metric, NULL, e));
    TRY(get_num(f, "early_stop_bad_epochs", NULL, &i, e));
    t->bad_epochs = (int)i;
    /* Where in its epoch the checkpoint was taken; older checkpoints were at an epoch's end. */
    const char *er = safetensors_meta(f, "epoch_rng_data_order");
    t->epoch_rng = er ? strtoull(er, NULL, 10) : t->rng;
    t->epoch_at = 0, t->epoch_loss = 0.0, t->epoch_correct = 0;
    if (er) {
        TRY(get_num(f, "epoch_samples", NULL, &i, e));
        t->epoch_at = i;
        TRY(get_num(f, "epoch_loss_sum", &t->epoch_loss, NULL, e));
        TRY(get_num(f, "epoch_correct", NULL, &i, e));
        t->epoch_correct = i;
    }
    if (t->epoch_at < 0)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "the checkpoint's epoch_samples is negative");
    return GRAFT_OK;
}

static graft_status load_from(graft_trainer *t, const safetensors_file *f, graft_err *e) {
    const char *format = safetensors_meta(f, "format"), *head = safetensors_meta(f, "head");
    char sig[256];
    head_signature(t, sig, sizeof sig);
    if (!format || strcmp(format, CHECKPOINT_FORMAT) != 0)
        return err_set(e, GRAFT_E_MALFORMED_MODEL, "not a graft trainer checkpoint");
    if (!head || strcmp(head, sig) != 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the checkpoint's head (%s) does not match this trainer's (%s)",
                       head ? head : "?", sig);
    for (int i = 0; i < t->n_params; i++)
        TRY(copy_tensor(f, t->params[i].name, t->params[i].data, t->params[i].numel, e));
    for (int i = 0; i < optim_state_count(t->opt); i++) {
        optim_state_buf b;
        TRY(optim_state_get(&b, t->opt, i, e));
        TRY(copy_tensor(f, b.name, b.data, b.numel, e));
    }
    const st_tensor *best = safetensors_find(f, "trainer.best_weights");
    if (best) {
        int64_t total = 0;
        for (int i = 0; i < t->n_params; i++) total += t->params[i].numel;
        float *buf = t->best ? t->best : malloc(sizeof(float) * (size_t)total);
        if (!buf) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
        t->best = buf;
        TRY(copy_tensor(f, "trainer.best_weights", buf, total, e));
    }
    return load_scalars(t, f, e);
}

graft_status graft_trainer_load(graft_trainer *t, const char *path) {
    if (!t || !path) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    if (!t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the trainer's feature size is not known yet; fit once or use a model "
                       "with a static feature size");
    (void)safetensors_remove_stale_temps(path);
    safetensors_file *f;
    graft_status st = safetensors_open(&f, path, e);
    if (st == GRAFT_OK) {
        st = load_from(t, f, e);
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
    safetensors_file *f;
    graft_status st = safetensors_open(&f, path, e);
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

/* run_record.c: finetune's options and class names as checkpoint metadata, and back: each
 * option is written as the text finetune_option() parses, so applying it again rebuilds the
 * same options without a second parser. */
#include "run_record.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names finetune_option() takes for these enumerations, in enum order. */
static const char *const optimizers[] = {"sgd", "adam", "adamw", "lamb"};
static const char *const schedulers[] = {"constant", "step", "cosine", "onecycle", "plateau"};
static const char *const activations[] = {"relu", "gelu", "tanh"};
static const char *const poolings[] = {"cls", "pooler", "mean",
                                       "spatial"}; /* GRAFT_POOLING_CLS.. */
static const char *const prune_methods[] = {"magnitude", "channels", "heads", "2:4"};
static const char *const importances[] = {"l1", "l2", "bn"};
static const char *const scopes[] = {"all", "inner"};

#define NAME_OF(list, i) ((i) >= 0 && (size_t)(i) < sizeof list / sizeof *list ? list[i] : NULL)

int run_record_set(run_record *r, const char *key, const char *value) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->keys[i], key)) {
            char *v = strdup(value);
            if (!v) return 1;
            free(r->values[i]);
            r->values[i] = v;
            return 0;
        }
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        char **k = realloc(r->keys, sizeof *k * (size_t)cap);
        if (!k) return 1;
        r->keys = k;
        char **v = realloc(r->values, sizeof *v * (size_t)cap);
        if (!v) return 1;
        r->values = v, r->cap = cap;
    }
    r->keys[r->n] = strdup(key);
    r->values[r->n] = strdup(value);
    if (!r->keys[r->n] || !r->values[r->n]) return free(r->keys[r->n]), free(r->values[r->n]), 1;
    r->n++;
    return 0;
}

void run_record_free(run_record *r) {
    for (int i = 0; i < r->n; i++) free(r->keys[i]), free(r->values[i]);
    free(r->keys), free(r->values);
    memset(r, 0, sizeof *r);
}

static int put(run_record *r, const char *option, const char *value) {
    char key[128];
    snprintf(key, sizeof key, RUN_RECORD_PREFIX "%s", option);
    return value ? run_record_set(r, key, value) : 0;
}

/* The shortest decimal that reads back as v (as a float when `single`), e.g. 0.9, not
 * 0.90000000000000002. */
static void shortest(char *buf, size_t size, double v, bool single) {
    for (int digits = single ? 6 : 15; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, v);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)v : back == v) return;
    }
}

static int put_f(run_record *r, const char *option, bool single, double v) {
    char buf[64];
    shortest(buf, sizeof buf, v, single);
    return put(r, option, buf);
}

static int put_i(run_record *r, const char *option, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return put(r, option, buf);
}

/* A path made absolute, so that export works from another folder. */
static int put_path(run_record *r, const char *option, const char *path) {
    if (!path) return 0;
    char *abs = realpath(path, NULL);
    int rc = put(r, option, abs ? abs : path);
    free(abs);
    return rc;
}

static int put_three(run_record *r, const char *option, const float *v) {
    char buf[96], c[3][32];
    for (int i = 0; i < 3; i++) shortest(c[i], sizeof c[i], v[i], true);
    snprintf(buf, sizeof buf, "%s,%s,%s", c[0], c[1], c[2]);
    return put(r, option, buf);
}

static int put_head(run_record *r, const graft_head_options *h) {
    char buf[256] = "linear";
    if (h->n_hidden > 0) {
        int used = snprintf(buf, sizeof buf, "mlp:");
        for (int i = 0; i < h->n_hidden && used < (int)sizeof buf; i++)
            used +=
                snprintf(buf + used, sizeof buf - (size_t)used, "%s%d", i ? "," : "", h->hidden[i]);
    }
    return put(r, "head", buf);
}

/* The data, the cut and the head: what rebuilding the model needs. */
static int record_model(run_record *r, const finetune_opts *o) {
    int rc = put_path(r, "model", o->model) | put_path(r, "data", o->data) |
             put_path(r, "val", o->val) | put(r, "cut", o->cut) | put_head(r, &o->head) |
             put(r, "activation", NAME_OF(activations, (int)o->head.activation)) |
             put_f(r, "dropout", true, o->head.dropout);
    if (!o->val) rc |= put_f(r, "val-split", false, o->val_split);
    if (o->pooling >= GRAFT_POOLING_CLS)
        rc |= put(r, "pooling", NAME_OF(poolings, (int)o->pooling - GRAFT_POOLING_CLS));
    if (o->unfreeze) rc |= put_i(r, "unfreeze", o->unfreeze);
    if (o->train.train_from && !o->unfreeze) rc |= put(r, "train-from", o->train.train_from);
    if (!o->softmax) rc |= put(r, "no-softmax", "1");
    if (o->fp16_weights) rc |= put(r, "fp16-weights", "1");
    if (o->vocab) {
        rc |= put_path(r, "vocab", o->vocab) | put_i(r, "max-len", o->max_len) |
              put(r, "pad", o->pad_max ? "max" : "longest") |
              put(r, "text-column", o->text_column) | put(r, "label-column", o->label_column);
        if (o->cased) rc |= put(r, "cased", "1");
        return rc;
    }
    rc |= put_i(r, "resize", o->image.resize) | put_i(r, "crop", o->image.crop) |
          put_three(r, "mean", o->image.mean) | put_three(r, "std", o->image.std);
    if (o->image.grayscale) rc |= put(r, "grayscale", "1");
    if (o->image.augment) rc |= put(r, "augment", "1");
    if (o->image.fast_decode) rc |= put(r, "fast-decode", "1");
    return rc;
}

/* Training and pruning: what resuming needs, and a record of the run. */
static int record_training(run_record *r, const finetune_opts *o) {
    const graft_train_options *t = &o->train;
    int rc =
        put_i(r, "epochs", t->epochs) | put_i(r, "batch", t->batch_size) |
        put_f(r, "lr", false, t->lr) | put(r, "optimizer", NAME_OF(optimizers, (int)t->optimizer)) |
        put_f(r, "momentum", false, t->momentum) |
        put(r, "scheduler", NAME_OF(schedulers, (int)t->scheduler)) |
        put_i(r, "warmup", t->warmup_steps) | put_f(r, "weight-decay", false, t->weight_decay) |
        put_f(r, "label-smoothing", true, t->label_smoothing) |
        put_f(r, "clip", false, t->clip_norm) | put_i(r, "accumulate", t->accumulate) |
        put_i(r, "early-stop", t->early_stop) | put(r, "precision", o->precision) |
        put_i(r, "seed", (long long)t->seed);
    if (t->ridge_warm_start) rc |= put(r, "ridge", "1");
    if (t->blocks_lr > 0) rc |= put_f(r, "blocks-lr", false, t->blocks_lr);
    if (o->prune)
        rc |= put(r, "prune", NAME_OF(prune_methods, o->prune_method)) |
              put_f(r, "prune-sparsity", false, o->prune_sparsity) |
              put_i(r, "prune-rounds", o->prune_rounds) |
              put(r, "prune-importance", NAME_OF(importances, o->prune_importance)) |
              put(r, "prune-scope", NAME_OF(scopes, o->prune_scope));
    return rc;
}

int run_record_init(run_record *r, const finetune_opts *o, const char *const *class_names,
                    int n_classes) {
    memset(r, 0, sizeof *r);
    int rc = record_model(r, o) | record_training(r, o);
    char key[64], count[16];
    snprintf(count, sizeof count, "%d", n_classes);
    rc |= run_record_set(r, "graft.classes", count);
    for (int i = 0; i < n_classes; i++) {
        snprintf(key, sizeof key, "graft.class.%d", i);
        rc |= run_record_set(r, key, class_names[i]);
    }
    return rc ? 1 : 0;
}

static int collect(const char *key, const char *value, void *user) {
    run_record *r = user;
    return run_record_set(r, key, value); /* out of memory stops the reading */
}

const char *run_saved_get(const run_saved *s, const char *key) {
    for (int i = 0; i < s->all.n; i++)
        if (!strcmp(s->all.keys[i], key)) return s->all.values[i];
    return NULL;
}

static long long get_int(const run_saved *s, const char *key, long long dflt) {
    const char *v = run_saved_get(s, key);
    return v ? strtoll(v, NULL, 10) : dflt;
}

/* The class names "graft.class.0" .. of the count "graft.classes"; 0, or 1 when one is missing
 * or out of memory. */
static int read_classes(run_saved *s) {
    long long n = get_int(s, "graft.classes", 0);
    if (n < 0 || n > INT_MAX / 2) return 1;
    s->n_classes = (int)n;
    s->class_names = calloc((size_t)n + 1, sizeof *s->class_names);
    if (!s->class_names) return 1;
    for (int i = 0; i < s->n_classes; i++) {
        char key[64];
        snprintf(key, sizeof key, "graft.class.%d", i);
        if (!(s->class_names[i] = run_saved_get(s, key))) return 1;
    }
    return 0;
}

int run_saved_read(run_saved *s, graft_ctx *ctx, const char *cmd, const char *path) {
    memset(s, 0, sizeof *s);
    if (graft_checkpoint_metadata(ctx, path, collect, &s->all) != GRAFT_OK) {
        fprintf(stderr, "graft %s: %s\n", cmd, graft_last_error(ctx));
        return 1;
    }
    s->has_options = run_saved_get(s, RUN_RECORD_PREFIX "model") != NULL;
    s->prune_round = (int)get_int(s, RUN_RECORD_PREFIX "prune_round", 1);
    s->epoch = get_int(s, "epoch", 0);
    s->epoch_samples = get_int(s, "epoch_samples", 0);
    if (s->has_options && read_classes(s)) {
        fprintf(stderr, "graft %s: %s: the class names are incomplete\n", cmd, path);
        return 1;
    }
    return 0;
}

void run_saved_free(run_saved *s) {
    free(s->class_names);
    run_record_free(&s->all);
}

int run_saved_apply(const run_saved *s, finetune_opts *o, bool (*given)(const char *, void *),
                    void *user) {
    size_t plen = strlen(RUN_RECORD_PREFIX);
    for (int i = 0; i < s->all.n; i++) {
        const char *key = s->all.keys[i];
        if (strncmp(key, RUN_RECORD_PREFIX, plen) != 0) continue;
        const char *name = key + plen;
        if (finetune_takes_value(name) < 0 || (given && given(name, user)))
            continue; /* not an option (prune_round), or given on the command line */
        /* A flag is recorded as "1" when it was set (and not at all otherwise). */
        const char *value = finetune_takes_value(name) == 0 ? NULL : s->all.values[i];
        int rc = finetune_option(o, name, value);
        if (rc) return rc;
    }
    return 0;
}

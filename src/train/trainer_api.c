/* trainer_api.c: the public trainer: checking options, running the frozen backbone once per
 * sample to get features, fit / evaluate on tensors, and attaching the trained head to the
 * model as Gemm / activation nodes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/hash.h"
#include "../graph/build.h"
#include "feature_cache.h"
#include "ridge.h"
#include "trainer.h"

static graft_status check_options(const graft_head_options *h, const graft_train_options *o,
                                  graft_err *e) {
    if (h->n_outputs < 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "head: n_outputs must be at least 1");
    if (o->loss < 0 || o->loss >= GRAFT_LOSS_COUNT || o->optimizer < 0 ||
        o->optimizer >= GRAFT_OPTIMIZER_COUNT || o->scheduler < 0 ||
        o->scheduler >= GRAFT_SCHEDULER_COUNT || o->precision < 0 ||
        o->precision >= GRAFT_PRECISION_COUNT)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "train options: unknown loss, optimizer, "
                       "scheduler or precision");
    if (o->epochs < 1 || o->batch_size < 1 || o->accumulate < 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "train options: epochs, batch_size and accumulate must be at least 1 "
                       "(got %d, %d, %d)",
                       o->epochs, o->batch_size, o->accumulate);
    if (!(o->lr > 0.0) || !(o->clip_norm >= 0.0) || !(o->weight_decay >= 0.0) ||
        o->early_stop < 0 || !(o->label_smoothing >= 0.0f && o->label_smoothing <= 1.0f))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "train options: lr must be > 0, clip_norm and weight_decay >= 0, "
                       "label_smoothing in [0, 1] (got lr %g, clip %g, wd %g, smoothing %g)",
                       o->lr, o->clip_norm, o->weight_decay, (double)o->label_smoothing);
    if (o->ridge_warm_start && (h->n_hidden != 0 || !(o->ridge_lambda >= 0.0)))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "ridge warm start needs a linear head (n_hidden 0) and ridge_lambda >= 0");
    return GRAFT_OK;
}

graft_status graft_trainer_create(graft_model *model, const graft_head_options *head,
                                  const graft_train_options *options, graft_trainer **out) {
    if (!model || !out) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &model->ctx->err;
    err_clear(e);
    *out = NULL;
    graft_head_options hd = GRAFT_HEAD_OPTIONS_INIT;
    graft_train_options td = GRAFT_TRAIN_OPTIONS_INIT;
    if (!head) head = &hd;
    if (!options) options = &td;
    TRY(check_options(head, options, e));
    if (graft_model_output_count(model) != 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "the model has %d outputs; cut it first (graft_model_cut) so that its one "
                       "output is the features",
                       graft_model_output_count(model));
    graft_value_info info;
    graft_model_output_info(model, 0, &info);
    if (info.ndim >= 0 && info.ndim != 2)
        return err_set(e, GRAFT_E_SHAPE,
                       "the features '%s' have rank %d; a head takes (batch, "
                       "features): cut with pooling",
                       info.name, info.ndim);
    graft_trainer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    t->model = model;
    t->head_options = *head;
    t->options = *options;
    t->options.class_weights = NULL;
    t->scaler = loss_scaler_default();
    t->best_metric = INFINITY;
    t->rng = options->seed ^ 0x646174616f72646eull; /* "dataordn" */
    t->loss.kind = (loss_kind)options->loss;
    t->loss.label_smoothing = options->label_smoothing;
    if (options->class_weights) {
        t->class_weights = malloc(sizeof(float) * (size_t)head->n_outputs);
        if (!t->class_weights) {
            free(t);
            return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(t->class_weights, options->class_weights, sizeof(float) * (size_t)head->n_outputs);
        t->loss.class_weight = t->class_weights;
    }
    graft_status st =
        info.ndim == 2 && info.dims[1] > 0 ? trainer_setup(t, info.dims[1], e) : GRAFT_OK;
    if (st != GRAFT_OK) {
        graft_trainer_free(t);
        return st;
    }
    *out = t;
    return GRAFT_OK;
}

void graft_trainer_free(graft_trainer *t) {
    if (!t) return;
    if (t->head_ready) head_free(&t->h);
    optim_free(t->opt);
    free(t->class_weights);
    free(t->best);
    free(t);
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rows of every input share dim 0; returns it (or an error). */
static graft_status sample_count(const graft_named_tensor *in, int n_in, int64_t *n, graft_err *e) {
    if (n_in < 1 || !in) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no inputs given");
    *n = -1;
    for (int i = 0; i < n_in; i++) {
        const graft_tensor *t = &in[i].tensor;
        if (t->ndim < 1 || t->dims[0] < 1)
            return err_set(e, GRAFT_E_SHAPE, "input '%s' must hold samples along dim 0",
                           in[i].name ? in[i].name : "?");
        if (*n >= 0 && t->dims[0] != *n)
            return err_set(e, GRAFT_E_SHAPE, "input '%s' has %lld samples, the others %lld",
                           in[i].name ? in[i].name : "?", (long long)t->dims[0], (long long)*n);
        *n = t->dims[0];
    }
    return GRAFT_OK;
}

/* The input tensors' identity for the cache key: names, dtypes, shapes and bytes. */
static uint64_t inputs_hash(const graft_named_tensor *in, int n_in) {
    hash64_state h;
    hash64_init(&h, 0x696e70757473ull);
    for (int i = 0; i < n_in; i++) {
        const graft_tensor *t = &in[i].tensor;
        hash64_update_str(&h, in[i].name ? in[i].name : "");
        hash64_update_u64(&h, (uint64_t)t->dtype);
        for (int d = 0; d < t->ndim; d++) hash64_update_u64(&h, (uint64_t)t->dims[d]);
        hash64_update(&h, t->data, (size_t)graft_tensor_numel(t) * graft_dtype_size(t->dtype));
    }
    return hash64_final(&h);
}

/* Open (or rebuild) the feature cache for these inputs at path. */
static graft_status open_cache(graft_trainer *t, const char *path, const graft_named_tensor *in,
                               int n_in, int64_t n, feature_cache **fc, graft_err *e) {
    char prep[64];
    snprintf(prep, sizeof prep, "tensors:%016llx", (unsigned long long)inputs_hash(in, n_in));
    const ir_graph *g = &t->model->g;
    feature_cache_key key = {feature_cache_model_hash(g), g->values[g->outputs[0]].name, prep};
    feature_cache_reason why;
    TRY(feature_cache_open(fc, &why, path, &key, n, t->dim, t->options.cache_dtype, e));
    t->cache_reason = why;
    return GRAFT_OK;
}

/* Features of rows [at, at+m) into *feats (n, dim): from the cache when all are there, else
 * from the backbone. *feats is allocated once the feature size is known. */
static graft_status batch_features(graft_trainer *t, feature_cache *fc, graft_named_tensor *slice,
                                   int n_in, int64_t at, int64_t m, int64_t n, float **feats,
                                   graft_err *e) {
    bool all = fc != NULL;
    for (int64_t i = 0; all && i < m; i++) all = feature_cache_has(fc, at + i);
    float *dst = *feats ? *feats + at * t->dim : NULL;
    if (all) {
        bool found;
        for (int64_t i = 0; i < m; i++)
            TRY(feature_cache_get(fc, dst + i * t->dim, &found, at + i, e));
        return GRAFT_OK;
    }
    double t0 = seconds();
    TRY(graft_model_run(t->model, slice, n_in));
    const graft_tensor *f = NULL;
    TRY(graft_model_output(t->model, 0, &f));
    if (f->ndim != 2 || f->dims[0] != m || f->dtype != GRAFT_DTYPE_F32)
        return err_set(e, GRAFT_E_SHAPE, "the features must be float32 (batch, features)");
    TRY(trainer_setup(t, f->dims[1], e));
    if (!*feats) {
        *feats = malloc(sizeof(float) * (size_t)(n * t->dim));
        if (!*feats) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for features");
        dst = *feats + at * t->dim;
    }
    memcpy(dst, f->data, sizeof(float) * (size_t)(m * t->dim));
    t->backbone_samples += m;
    t->backbone_seconds += seconds() - t0;
    for (int64_t i = 0; fc && i < m; i++) TRY(feature_cache_put(fc, at + i, dst + i * t->dim, e));
    return GRAFT_OK;
}

/* Features (n, dim) of all samples (malloc'ed): the frozen backbone runs once per sample, and
 * with a cache file, not at all for samples a previous run stored. */
static graft_status extract(graft_trainer *t, const graft_named_tensor *in, int n_in, int64_t n,
                            const char *cache_path, float **out, graft_err *e) {
    graft_named_tensor slice[32];
    if (n_in > 32) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "too many inputs (%d)", n_in);
    if (cache_path && !t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "a feature cache needs the feature size known when the model loads");
    feature_cache *fc = NULL;
    if (cache_path) TRY(open_cache(t, cache_path, in, n_in, n, &fc, e));
    int64_t b = t->options.batch_size;
    float *feats = t->head_ready ? malloc(sizeof(float) * (size_t)(n * t->dim)) : NULL;
    if (t->head_ready && !feats) {
        if (fc) feature_cache_close(fc, NULL);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for features");
    }
    graft_status st = GRAFT_OK;
    for (int64_t at = 0; at < n && st == GRAFT_OK; at += b) {
        int64_t m = n - at < b ? n - at : b;
        for (int i = 0; i < n_in; i++) {
            slice[i] = in[i];
            int64_t row = graft_tensor_numel(&in[i].tensor) / in[i].tensor.dims[0];
            slice[i].tensor.dims[0] = m;
            slice[i].tensor.data = (char *)in[i].tensor.data +
                                   (size_t)(at * row) * graft_dtype_size(in[i].tensor.dtype);
        }
        st = batch_features(t, fc, slice, n_in, at, m, n, &feats, e);
    }
    graft_status st2 = fc ? feature_cache_close(fc, st == GRAFT_OK ? e : NULL) : GRAFT_OK;
    if (st == GRAFT_OK) st = st2;
    if (st != GRAFT_OK) {
        free(feats);
        return st;
    }
    *out = feats;
    return GRAFT_OK;
}

static graft_status check_labels(const graft_trainer *t, const graft_tensor *y, int64_t n,
                                 graft_err *e) {
    if (!y || !y->data) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no labels given");
    if (t->options.loss == GRAFT_LOSS_CROSS_ENTROPY) {
        if (y->dtype != GRAFT_DTYPE_I64 || y->ndim != 1 || y->dims[0] != n)
            return err_set(e, GRAFT_E_SHAPE,
                           "cross-entropy labels must be int64 (%lld), got %s "
                           "of rank %d",
                           (long long)n, graft_dtype_name(y->dtype), y->ndim);
        return GRAFT_OK;
    }
    if (y->dtype != GRAFT_DTYPE_F32 || y->ndim != 2 || y->dims[0] != n ||
        y->dims[1] != t->head_options.n_outputs)
        return err_set(e, GRAFT_E_SHAPE, "labels must be float32 (%lld, %d)", (long long)n,
                       t->head_options.n_outputs);
    return GRAFT_OK;
}

/* The closed-form start of a linear head: ridge regression of the targets on the features (one
 * pass), written into the head's weights. */
static graft_status ridge_warm_start(graft_trainer *t, const float *x, const void *y, int64_t n,
                                     graft_err *e) {
    ridge *r;
    head_layer *l = &t->h.layers[0];
    TRY(ridge_create(&r, t->dim, l->out, e));
    graft_status st = t->options.loss == GRAFT_LOSS_CROSS_ENTROPY
                          ? ridge_accumulate_labels(r, x, y, n, e)
                          : ridge_accumulate(r, x, y, n, e);
    if (st == GRAFT_OK) st = ridge_solve(l->w.data, l->b.data, r, t->options.ridge_lambda, e);
    ridge_free(r);
    return st;
}

graft_status graft_trainer_fit(graft_trainer *t, const graft_named_tensor *inputs, int n_inputs,
                               const graft_tensor *labels, const graft_named_tensor *val_inputs,
                               int n_val_inputs, const graft_tensor *val_labels) {
    if (!t) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    int64_t n, vn = 0;
    TRY(sample_count(inputs, n_inputs, &n, e));
    TRY(check_labels(t, labels, n, e));
    if (val_inputs) {
        TRY(sample_count(val_inputs, n_val_inputs, &vn, e));
        TRY(check_labels(t, val_labels, vn, e));
    }
    float *x = NULL, *vx = NULL;
    const char *cache = t->options.cache_path;
    char val_cache[4096];
    snprintf(val_cache, sizeof val_cache, "%s.val", cache ? cache : "");
    graft_status st = extract(t, inputs, n_inputs, n, cache, &x, e);
    if (st == GRAFT_OK && vn > 0)
        st = extract(t, val_inputs, n_val_inputs, vn, cache ? val_cache : NULL, &vx, e);
    if (st == GRAFT_OK && t->options.ridge_warm_start && t->step == 0)
        st = ridge_warm_start(t, x, labels->data, n, e);
    if (st == GRAFT_OK)
        st = trainer_run(t, x, labels->data, n, vx, vn ? val_labels->data : NULL, vn, e);
    free(x), free(vx);
    return st;
}

graft_status graft_trainer_evaluate(graft_trainer *t, const graft_named_tensor *inputs,
                                    int n_inputs, const graft_tensor *labels, double *loss,
                                    double *accuracy) {
    if (!t || !loss || !accuracy) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    int64_t n;
    TRY(sample_count(inputs, n_inputs, &n, e));
    TRY(check_labels(t, labels, n, e));
    float *x = NULL;
    TRY(extract(t, inputs, n_inputs, n, NULL, &x, e));
    graft_status st = trainer_eval_features(t, x, labels->data, n, loss, accuracy, e);
    free(x);
    return st;
}

static const char *act_op(graft_activation a) {
    return a == GRAFT_ACTIVATION_GELU ? "Gelu" : a == GRAFT_ACTIVATION_TANH ? "Tanh" : "Relu";
}

graft_status graft_trainer_attach(graft_trainer *t, int softmax) {
    if (!t) return GRAFT_E_INVALID_ARGUMENT;
    graft_model *m = t->model;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (!t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "the head has not been trained yet");
    ir_graph *g = &m->g;
    int cur = g->outputs[0];
    for (int i = 0; i < t->h.n_layers; i++) {
        head_layer *l = &t->h.layers[i];
        tensor w, b;
        int wv, bv;
        TRY(tensor_clone(&w, &l->w, e));
        TRY(graph_add_const(g, l->w_name, &w, &wv, e));
        TRY(tensor_clone(&b, &l->b, e));
        TRY(graph_add_const(g, l->b_name, &b, &bv, e));
        bool last = i == t->h.n_layers - 1;
        const char *name = last && !softmax ? "logits" : "head/gemm";
        TRY(graph_add_node(g, "Gemm", 13, (int[]){cur, wv, bv}, 3, name, "transB", 1, &cur, e));
        if (!l->has_act) continue;
        const char *op = act_op(t->h.activation);
        int in = cur;
        TRY(graph_add_node(g, op, strcmp(op, "Gelu") == 0 ? 20 : 13, &in, 1, "head/act", NULL, 0,
                           &cur, e));
    }
    int logits = cur;
    if (softmax)
        TRY(graph_add_node(g, "Softmax", 13, &logits, 1, "probabilities", "axis", -1, &cur, e));
    return model_set_output(m, cur, e);
}

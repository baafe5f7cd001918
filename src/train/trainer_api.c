/* trainer_api.c: the public trainer: checking options, running the frozen backbone once per
 * sample to get features, fit / evaluate on tensors, and attaching the trained head to the
 * model as Gemm / activation nodes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../dist/dist_train.h"
#include "../graph/build.h"
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
    if (!(o->blocks_lr >= 0.0) || (o->blocks_lr > 0.0 && !o->train_from))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "train options: blocks_lr (%g) must be >= 0, and is for train_from's blocks",
                       o->blocks_lr);
    if (o->train_from && o->ridge_warm_start)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "ridge warm start solves for a head on fixed features; with train_from "
                       "('%s') the features change as the blocks train",
                       o->train_from);
    if (o->ridge_warm_start && (h->n_hidden != 0 || !(o->ridge_lambda >= 0.0)))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "ridge warm start needs a linear head (n_hidden 0) and ridge_lambda >= 0");
    return GRAFT_OK;
}

static graft_status trainer_blocks_init(graft_trainer *t, const char *from, graft_err *e);

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
    t->backbone = model;
    t->head_options = *head;
    t->options = *options;
    t->options.class_weights = NULL;
    t->options.train_from = NULL;
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
        options->train_from ? trainer_blocks_init(t, options->train_from, e) : GRAFT_OK;
    if (st != GRAFT_OK) {
        graft_trainer_free(t);
        return st;
    }
    int64_t dim = t->blocks ? t->blocks->frozen.row : info.ndim == 2 ? info.dims[1] : -1;
    if (dim < 0) {
        /* not known from shape inference (a Reshape computed from the batch): one probe run;
         * a model that cannot run on zeros leaves it to the first batch, as before */
        int nd = 0;
        int64_t dims[GRAFT_MAX_DIMS];
        if (model_probe_output_dims(model, 0, &nd, dims, e) == GRAFT_OK && nd == 2) dim = dims[1];
        err_clear(e);
    }
    st = dim > 0 ? trainer_setup(t, dim, e) : GRAFT_OK;
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
    head_step_free(&t->hs);
    head_graph_free(&t->hg);
    optim_graph_free(&t->og);
    optim_free(t->opt);
    free(t->class_weights);
    free(t->best);
    free(t->row_source);
    free(t->val_x), free(t->val_y);
    backbone_pad_free(t);
    if (t->blocks) blocks_free(t->blocks);
    free(t->blocks);
    free((char *)t->options.train_from);
    free(t->params);
    free(t);
}

/* The blocks after `from` train too: their training graph, and the frozen part before them as
 * the model the backbone phase runs. */
static graft_status trainer_blocks_init(graft_trainer *t, const char *from, graft_err *e) {
    t->options.train_from = strdup(from);
    t->blocks = calloc(1, sizeof *t->blocks);
    if (!t->options.train_from || !t->blocks)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    graft_status st = blocks_init(t->blocks, t->model, from, t->options.precision,
                                  t->model->ctx->options.num_threads, e);
    if (st != GRAFT_OK) {
        free(t->blocks);
        t->blocks = NULL;
        err_prefix(e, "fine-tuning from '%s'", from);
        return st;
    }
    t->backbone = t->blocks->frozen.model;
    if (t->options.blocks_lr > 0.0) t->blocks->lr_scale = t->options.blocks_lr / t->options.lr;
    ctx_log(t->model->ctx, GRAFT_LOG_INFO,
            "fine-tuning from '%s': %d weight tensors after it train with the head; the frozen "
            "part before it gives %lld values per sample",
            from, t->blocks->n_params, (long long)t->blocks->frozen.row);
    return GRAFT_OK;
}

graft_status graft_trainer_validation_confusion(graft_trainer *t, int n_classes, int64_t *counts) {
    if (!t || !counts || n_classes < 1) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    if (!t->head_ready || t->val_n < 1 || t->options.loss != GRAFT_LOSS_CROSS_ENTROPY ||
        t->head_options.n_outputs != n_classes)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "no validation features of a classification head with %d classes from "
                       "the last fit",
                       n_classes);
    memset(counts, 0, sizeof(int64_t) * (size_t)n_classes * (size_t)n_classes);
    const int64_t *y = t->val_y;
    int64_t b = t->options.batch_size;
    for (int64_t at = 0; at < t->val_n; at += b) {
        int64_t m = t->val_n - at < b ? t->val_n - at : b;
        const float *logits;
        TRY(trainer_logits(t, t->val_x + at * t->dim, m, &logits, e));
        for (int64_t i = 0; i < m; i++) {
            int best = 0;
            for (int c = 1; c < n_classes; c++)
                best = logits[i * n_classes + c] > logits[i * n_classes + best] ? c : best;
            int64_t truth = y[at + i];
            if (truth >= 0 && truth < n_classes) counts[truth * n_classes + best]++;
        }
    }
    return GRAFT_OK;
}

int graft_trainer_failed_samples(const graft_trainer *t, int64_t *out, int max) {
    if (!t) return 0;
    for (int i = 0; out && i < t->n_failed_samples && i < max; i++) out[i] = t->failed_samples[i];
    return t->n_failed_samples;
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

graft_status graft_trainer_fit_source(graft_trainer *t, const graft_batch_source *train,
                                      const graft_batch_source *val) {
    if (!t) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    if (!train) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "no training data given");
    const char *cache = t->options.cache_path, *dir = t->options.cache_dir;
    char train_cache[4096], val_cache[4096];
    snprintf(val_cache, sizeof val_cache, "%s.val", cache ? cache : "");
    if (!cache && dir) { /* each source's set in its own file, named from its key */
        TRY(trainer_cache_file(t, train, dir, train_cache, sizeof train_cache, e));
        if (val) TRY(trainer_cache_file(t, val, dir, val_cache, sizeof val_cache, e));
        cache = train_cache;
    }
    float *x = NULL, *vx = NULL;
    void *y = NULL, *vy = NULL;
    int64_t n = 0, vn = 0;
    /* Data-parallel: each rank extracts its share into its own cache; all then hold all rows. */
    bool shard = trainer_dist(t) != NULL;
    graft_status st = shard ? dist_extract(t, train, 0, &x, &y, &n, e)
                            : trainer_extract_reported(t, train, cache, 0, &x, &y, &n, e);
    if (st == GRAFT_OK && val && !t->extract_stopped)
        st = shard
                 ? dist_extract(t, val, 1, &vx, &vy, &vn, e)
                 : trainer_extract_reported(t, val, cache ? val_cache : NULL, 1, &vx, &vy, &vn, e);
    bool go = st == GRAFT_OK && !t->extract_stopped; /* a stopped backbone phase trains nothing */
    if (go && t->options.ridge_warm_start && t->step == 0) st = ridge_warm_start(t, x, y, n, e);
    if (go && st == GRAFT_OK) st = trainer_run(t, x, y, n, vx, vy, vn, e);
    free(x), free(y), free(t->val_x), free(t->val_y);
    t->val_x = vx, t->val_y = vy, t->val_n = st == GRAFT_OK ? vn : 0;
    return st;
}

graft_status graft_trainer_fit(graft_trainer *t, const graft_named_tensor *inputs, int n_inputs,
                               const graft_tensor *labels, const graft_named_tensor *val_inputs,
                               int n_val_inputs, const graft_tensor *val_labels) {
    if (!t) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    tensor_source train, val;
    TRY(tensor_source_init(&train, inputs, n_inputs, labels, e));
    if (val_inputs) TRY(tensor_source_init(&val, val_inputs, n_val_inputs, val_labels, e));
    return graft_trainer_fit_source(t, &train.source, val_inputs ? &val.source : NULL);
}

graft_status graft_trainer_evaluate(graft_trainer *t, const graft_named_tensor *inputs,
                                    int n_inputs, const graft_tensor *labels, double *loss,
                                    double *accuracy) {
    if (!t || !loss || !accuracy) return GRAFT_E_INVALID_ARGUMENT;
    graft_err *e = &t->model->ctx->err;
    err_clear(e);
    tensor_source src;
    TRY(tensor_source_init(&src, inputs, n_inputs, labels, e));
    float *x = NULL;
    void *y = NULL;
    int64_t n = 0;
    TRY(trainer_extract(t, &src.source, NULL, &x, &y, &n, e));
    graft_status st = trainer_eval_features(t, x, y, n, loss, accuracy, e);
    free(x), free(y);
    return st;
}

graft_status graft_trainer_attach(graft_trainer *t, int softmax) {
    if (!t) return GRAFT_E_INVALID_ARGUMENT;
    graft_model *m = t->model;
    graft_err *e = &m->ctx->err;
    err_clear(e);
    if (!t->head_ready)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "the head has not been trained yet");
    TRY(trainer_sync_host(t, e));
    if (t->blocks) TRY(blocks_write_back(t->blocks, m, e));
    if (m->keep_batchnorm) TRY(model_fold_batchnorm(m, e)); /* exported folded */
    ir_graph *g = &m->g;
    int cur;
    TRY(head_append(&t->h, g, g->outputs[0], softmax ? "head/gemm" : "logits", &cur, e));
    int logits = cur;
    if (softmax)
        TRY(graph_add_node(g, "Softmax", 13, &logits, 1, "probabilities", "axis", -1, &cur, e));
    TRY(model_set_output(m, cur, e));
    return model_name_output_batch(m, e); /* the head's rows are the batch's samples */
}

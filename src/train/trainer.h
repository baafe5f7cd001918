/* trainer.h: the graft_trainer handle and its internal steps (one optimizer step on a batch of
 * features, an epoch loop over features), which tests drive directly. */
#ifndef GRAFT_TRAIN_TRAINER_H
#define GRAFT_TRAIN_TRAINER_H

#include "../graph/model.h"
#include "head.h"
#include "loss.h"
#include "loss_scale.h"
#include "optim.h"
#include "schedule.h"

struct graft_trainer {
    graft_model *model;
    graft_head_options head_options;
    graft_train_options options;
    float *class_weights; /* copy of options.class_weights */
    loss_spec loss;
    int64_t dim; /* feature size; 0 until known */
    head h;
    bool head_ready;
    optim *opt;
    optim_param params[2 * HEAD_MAX_LAYERS];
    int n_params;
    loss_scaler scaler;
    plateau plat;
    sched_config sched;
    int64_t step, micro, epoch;
    uint64_t rng; /* data order */
    int64_t backbone_samples;
    double backbone_seconds, head_seconds;
    int64_t skipped_steps; /* fp16 steps skipped for inf/NaN gradients */
    int cache_reason;      /* feature_cache_reason of the last cache opened */
    /* early stopping: the best validation loss so far, epochs since, the weights then */
    double best_metric;
    int bad_epochs;
    float *best;
};

/* Create the head and optimizer for features of size dim (once). */
graft_status trainer_setup(graft_trainer *t, int64_t dim, graft_err *e);
/* One micro-batch: forward, loss, backward; every `accumulate` micro-batches an optimizer step
 * at learning rate lr. *loss is the batch's mean loss, *correct the correct predictions
 * (classification; else 0). */
graft_status trainer_step(graft_trainer *t, const float *x, const void *y, int64_t n, double lr,
                          double *loss, int64_t *correct, graft_err *e);
/* Mean loss and accuracy of the head (eval mode) on features (n, dim). */
graft_status trainer_eval_features(graft_trainer *t, const float *x, const void *y, int64_t n,
                                   double *loss, double *accuracy, graft_err *e);
/* Epochs over features: seeded order, schedule, callback, validation, plateau, early stopping. */
graft_status trainer_run(graft_trainer *t, const float *x, const void *y, int64_t n,
                         const float *vx, const void *vy, int64_t vn, graft_err *e);
/* Whole tensors as a batch source (slices along dim 0); identity hashes their bytes. */
typedef struct tensor_source {
    graft_batch_source source;
    const graft_named_tensor *in;
    const graft_tensor *labels;
    graft_named_tensor slice[32];
    char identity[64];
} tensor_source;
graft_status tensor_source_init(tensor_source *s, const graft_named_tensor *in, int n_in,
                                const graft_tensor *labels, graft_err *e);

/* Features (rows, dim) and labels of every sample src delivers (*n_rows of them), malloc'ed:
 * the frozen backbone runs once per sample, and with a cache file not at all for samples a
 * previous run stored. */
graft_status trainer_extract(graft_trainer *t, const graft_batch_source *src,
                             const char *cache_path, float **features, void **labels,
                             int64_t *n_rows, graft_err *e);

/* The byte size of one label. */
size_t trainer_label_size(const graft_trainer *t);

#endif

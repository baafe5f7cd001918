/* trainer.h: the graft_trainer handle and its internal steps (one optimizer step on a batch of
 * features, an epoch loop over features), which tests drive directly. */
#ifndef GRAFT_TRAIN_TRAINER_H
#define GRAFT_TRAIN_TRAINER_H

#include "../graph/model.h"
#include "blocks.h"
#include "head.h"
#include "head_graph.h"
#include "loss.h"
#include "loss_scale.h"
#include "optim.h"
#include "head_step.h"
#include "optim_graph.h"
#include "schedule.h"

/* Where a head trained (trainer_head.c) and its switches, for tests and logs. */
typedef struct trainer_gpu_info {
    bool used;                 /* the last trainer_run trained the head on a device */
    int place;                 /* HEAD_STEP_FEATURES_*: where the features lived */
    int64_t feature_h2d_bytes; /* feature bytes copied host -> device in that run */
    bool force_host_features;  /* tests: keep the features out of device memory */
    bool disable;              /* train on the CPU even when the model has a GPU */
} trainer_gpu_info;

#define BACKBONE_PAD_INPUTS 32
typedef struct backbone_pad_buffer {
    void *data;
    size_t bytes;
    bool on_device;
} backbone_pad_buffer;

struct graft_trainer {
    graft_model *model;
    graft_head_options head_options;
    graft_train_options options;
    float *class_weights; /* copy of options.class_weights */
    loss_spec loss;
    int64_t dim; /* feature size; 0 until known */
    head h;
    head_graph hg; /* the head's training graph (the loss in the pause: blocks, data-parallel) */
    /* Not data-parallel (blocks: unchunked): the whole step as one graph (head_step.h) on og's
     * device (hs.ready); trainer_head.c runs a head alone's epochs. */
    head_step hs;
    bool head_ready;
    optim *opt;
    optim_graph og; /* opt's step as the OptimizerStep op, run by graph/exec */
    /* Blocks on a device with everything resident there (trainer_resident.c): og runs on that
     * device and holds every parameter, gradient and state slot; the blocks read their weights
     * there; per step only the head's gradients go up and its weights and the training state
     * come back. device_current: the device has the latest values (else upload before a run);
     * host_current: the host's copies do (else trainer_sync_host brings them back). */
    bool resident, device_current, host_current;
    int n_head_params;
    optim_param *params; /* the head's, then the trainable blocks' */
    int n_params;
    /* options.train_from: the blocks after it train too (blocks.h); the backbone phase then runs
     * the frozen part before it, and dim is the size of its rows, not of the head's input. */
    blocks *blocks;
    graft_model *backbone; /* the model the backbone phase runs: model, or the frozen part */
    loss_scaler scaler;
    plateau plat;
    sched_config sched;
    int64_t step, micro, epoch;
    uint64_t rng; /* data order */
    /* Where the current epoch stands, so a checkpoint taken mid-epoch continues there: the
     * data-order RNG before this epoch's shuffle, the samples done, their summed loss and
     * correct count. epoch_at is 0 between epochs. */
    uint64_t epoch_rng;
    int64_t epoch_at, epoch_correct;
    double epoch_loss;
    bool stop_requested;  /* the callback asked to stop: at the next optimizer step's end */
    bool extract_stopped; /* the extract callback stopped the backbone phase */
    int64_t backbone_samples;
    /* The most samples one backbone run takes: the batch size, lowered when a run ran out of
     * memory (the batch is then split in halves and retried; extract.c). */
    int64_t backbone_max_batch;
    /* Per training row: the source's sample index (rows skip unreadable samples), and the samples
     * of the batch whose loss was NaN/Inf (graft_trainer_failed_samples). */
    int64_t *row_source, n_row_source;
    int64_t failed_samples[8];
    int n_failed_samples;
    /* The last fit's validation features (val_n, dim) and labels, kept for
     * graft_trainer_validation_confusion (the export's check needs no image decoded again). */
    float *val_x;
    void *val_y;
    int64_t val_n;
    double backbone_seconds, head_seconds;
    double step_seconds;                /* in the optimizer's steps (unscale, clip, update) */
    double state_seconds;               /* the step graph's training state read back (head alone) */
    double read_seconds, cache_seconds; /* the backbone phase's source reads and cache work */
    int64_t skipped_steps;              /* fp16 steps skipped for inf/NaN gradients */
    int cache_reason;                   /* feature_cache_reason of the last cache opened */
    char cache_note[600];               /* why that cache was rebuilt ("" when it was not) */
    /* early stopping: the best validation loss so far, epochs since, the weights then */
    double best_metric;
    int bad_epochs;
    float *best;
    trainer_gpu_info gpu;
    /* backbone_pad.c: short batches padded to the full one on a GPU */
    backbone_pad_buffer pad[BACKBONE_PAD_INPUTS];
    void *pad_zeros; /* host zeros for a device buffer's padding rows */
    bool warmed_up;  /* backbone_warm_up ran */
    size_t pad_zeros_bytes;
};

/* backbone_pad.c: whether short backbone batches run padded (the model is on a GPU); in
 * (n_in inputs of m rows) copied into the trainer's buffers as `rows` rows, the rest zero. */
bool backbone_pads(const graft_trainer *t);
graft_status backbone_pad(graft_trainer *t, const graft_named_tensor *in, int n_in, int64_t m,
                          int64_t rows, graft_named_tensor *out, graft_err *e);
/* One run of the backbone on `rows` zero samples before the first batch (a GPU model with one
 * input of known sizes): the memory plan, cuDNN's choices and the CUDA graph are then made
 * while the data source starts (its begin), not after. Once per trainer; errors are ignored. */
void backbone_warm_up(graft_trainer *t, int64_t rows);
void backbone_pad_free_one(graft_trainer *t, int k);
void backbone_pad_free(graft_trainer *t);

/* Create the head and optimizer for features of size dim (once). */
graft_status trainer_setup(graft_trainer *t, int64_t dim, graft_err *e);
/* trainer_resident.c: whether blocks train resident on their device (on a device, unchunked,
 * not data-parallel, GRAFT_RESIDENT not 0), and its optimizer graph there. */
graft_status trainer_resident_setup(graft_trainer *t, int threads, graft_err *e);
/* Before a run reads parameters on the device: upload what the host changed. */
graft_status trainer_device_current(graft_trainer *t, graft_err *e);
/* The resident optimizer step (the head's gradients up, the step, its weights and the state
 * back); *skipped as optim_graph_step gives it. */
graft_status trainer_resident_step(graft_trainer *t, float lr, bool *skipped, graft_err *e);
/* Before the host reads parameters or optimizer state (checkpoints, the best epoch, export):
 * bring the device's back. A no-op unless resident. */
graft_status trainer_sync_host(graft_trainer *t, graft_err *e);
/* One micro-batch: forward, loss, backward; every `accumulate` micro-batches an optimizer step
 * at learning rate lr. *loss is the batch's mean loss, *correct the correct predictions
 * (classification; else 0). */
graft_status trainer_step(graft_trainer *t, const float *x, const void *y, int64_t n, double lr,
                          double *loss, int64_t *correct, graft_err *e);
/* Logits (m, outputs) of rows (m, dim) in eval mode (through the trainable blocks when they
 * train); *logits points into the head, valid until its next forward. */
graft_status trainer_logits(graft_trainer *t, const float *x, int64_t m, const float **logits,
                            graft_err *e);
/* Mean loss and accuracy of the head (eval mode) on features (n, dim). */
graft_status trainer_eval_features(graft_trainer *t, const float *x, const void *y, int64_t n,
                                   double *loss, double *accuracy, graft_err *e);
/* Epochs over features: seeded order, schedule, callback, validation, plateau, early stopping. */
graft_status trainer_run(graft_trainer *t, const float *x, const void *y, int64_t n,
                         const float *vx, const void *vy, int64_t vn, graft_err *e);
/* Pieces of the epoch loop that the GPU loop shares: the learning rate of the next step, a
 * report to the callback (non-zero: stop), and an epoch's end (validation, plateau, early
 * stopping, the epoch report). */
double trainer_current_lr(const graft_trainer *t);
int trainer_report(graft_trainer *t, int epoch_end, double loss, double acc, double vloss,
                   double vacc);
graft_status trainer_end_epoch(graft_trainer *t, double loss, double acc, const float *vx,
                               const void *vy, int64_t vn, bool *stop, graft_err *e);
/* trainer_head.c: the epochs of a head alone through its step graph (t->hs), on the model's
 * device or the CPU; the host waits for a device once per step (the optimizer's result) and
 * reads the loss sums at an epoch's end, or after each step when a callback wants its loss. */
graft_status trainer_run_head(graft_trainer *t, const float *x, const void *y, int64_t n,
                              const float *vx, const void *vy, int64_t vn, graft_err *e);
/* A micro-batch's end (its run began at t0, now_seconds' clock): every `accumulate` of them an
 * optimizer step at rate lr; the times counted. */
graft_status trainer_micro_done(graft_trainer *t, double lr, double t0, graft_err *e);
/* An optimizer step of the accumulated gradients at rate lr, then the step counted. */
graft_status trainer_apply_step(graft_trainer *t, double lr, graft_err *e);
/* The error for a NaN or infinite training loss of the batch of rows (m of them). */
graft_status trainer_non_finite_loss(graft_trainer *t, double loss, const int64_t *rows, int64_t m,
                                     graft_err *e);
/* Whether a step runs as one graph (t->hs): not data-parallel, and blocks unchunked (and neither
 * GRAFT_STEP_GRAPH nor GRAFT_RESIDENT 0, which keep blocks on the pause's path, resident or
 * not, for comparison); on the CPU and on a device alike. */
bool trainer_step_graph_wanted(const graft_trainer *t);
/* The step graph (t->hs) when trainer_step_graph_wanted. */
graft_status trainer_head_setup(graft_trainer *t, int threads, graft_err *e);

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

/* dir/features-<hash>.cache: the file of the source's feature set in a folder of caches (named
 * from its cache key, so other models, cuts and data keep their own files). */
graft_status trainer_cache_file(const graft_trainer *t, const graft_batch_source *src,
                                const char *dir, char *path, size_t size, graft_err *e);
/* Features (rows, dim) and labels of every sample src delivers (*n_rows of them), malloc'ed:
 * the frozen backbone runs once per sample, and with a cache file not at all for samples a
 * previous run stored. */
graft_status trainer_extract(graft_trainer *t, const graft_batch_source *src,
                             const char *cache_path, float **features, void **labels,
                             int64_t *n_rows, graft_err *e);
/* trainer_extract reporting to the options' extract callback (validation: which source); when
 * the callback stops it, t->extract_stopped is set and the result is GRAFT_OK with nothing. */
graft_status trainer_extract_reported(graft_trainer *t, const graft_batch_source *src,
                                      const char *cache_path, int validation, float **features,
                                      void **labels, int64_t *n_rows, graft_err *e);
/* Whether a step's callback result stops training now: a request waits for the accumulated
 * micro-batches to be applied. */
bool trainer_should_stop(graft_trainer *t, int callback_result);
/* The current epoch's data order into order (n): see trainer.c. */
void trainer_epoch_order(graft_trainer *t, int64_t *order, int64_t n);

/* The byte size of one label. */
size_t trainer_label_size(const graft_trainer *t);

#endif

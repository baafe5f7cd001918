/* cuda_head.h: head training on the GPU, for the trainer (plain C: no CUDA types): the head's
 * weights, gradients and optimizer state in device memory, the features of an epoch in device
 * memory when they fit (else in pinned host memory), and one call per micro-batch that runs the
 * gather, forward, loss, backward and (every accumulate micro-batches) the fused optimizer step
 * without waiting for the GPU. */
#ifndef GRAFT_CUDA_HEAD_H
#define GRAFT_CUDA_HEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/backend.h"
#include "../train/head.h"
#include "../train/loss.h"
#include "../train/loss_scale.h"
#include "../train/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_head cuda_head;

/* Where the features of the training set live. */
typedef enum cuda_head_place {
    CUDA_HEAD_FEATURES_NONE = 0,
    CUDA_HEAD_FEATURES_DEVICE = 1, /* GPU memory: copied once, gathered per batch on the GPU */
    CUDA_HEAD_FEATURES_MAPPED = 2, /* the host array page-locked and mapped: the GPU's gather
                                      reads each batch's rows over the bus, no copy */
    CUDA_HEAD_FEATURES_STAGED = 3, /* pageable host memory: each batch's rows gathered on the
                                      host into pinned staging buffers and copied */
} cuda_head_place;

typedef struct cuda_head_options {
    int64_t max_batch;        /* rows of the largest micro-batch */
    int accumulate;           /* micro-batches per optimizer step (gradients divided by it) */
    double clip_norm;         /* 0: no clipping */
    bool force_host_features; /* tests: keep the features out of GPU memory */
} cuda_head_options;

/* The device-side training state, read back with cuda_head_read (which waits for the GPU). */
typedef struct cuda_head_stats {
    double step_loss;     /* mean loss of the last micro-batch */
    int64_t step_correct; /* its correct predictions (cross-entropy) */
    double epoch_loss;    /* sum of loss * rows since cuda_head_epoch_begin */
    int64_t epoch_correct;
    loss_scaler scaler;  /* fp16 */
    int64_t skipped;     /* optimizer steps skipped for inf/NaN gradients */
    int64_t opt_steps;   /* optimizer steps taken */
    int64_t bad_batches; /* cross-entropy batches whose target weights summed to zero */
} cuda_head_stats;

/* Feature traffic, for tests and logs. */
typedef struct cuda_head_counters {
    cuda_head_place place;
    int64_t feature_h2d_bytes; /* feature bytes copied host -> device (upload and staging) */
    int64_t feature_bus_bytes; /* feature bytes the GPU read from mapped host memory */
} cuda_head_counters;

/* Per optimizer step: what the host's schedulers say. */
typedef struct cuda_head_update {
    double lr;
    float momentum; /* SGD (one-cycle changes it) */
    float beta1;    /* Adam, AdamW, LAMB (one-cycle changes it) */
} cuda_head_update;

/* A device copy of head h (its shapes, activation, dropout and precision) on device (the CUDA
 * backend), with the optimizer oc and the loss (class and positive weights of n_outputs copied).
 * The weights and state come with cuda_head_upload_state. */
graft_status cuda_head_create(cuda_head **out, graft_backend *device, const head *h,
                              const optim_config *oc, const loss_spec *loss,
                              const cuda_head_options *o, graft_err *e);
void cuda_head_free(cuda_head *ch);

/* Master weights (from h), optimizer state buffers and step count (from opt), the loss scaler
 * and the count of skipped steps to the device; gradients cleared. */
graft_status cuda_head_upload_state(cuda_head *ch, const head *h, optim *opt,
                                    const loss_scaler *scaler, int64_t skipped, graft_err *e);
/* The same back to the host (waits for the GPU). */
graft_status cuda_head_download_state(cuda_head *ch, head *h, optim *opt, loss_scaler *scaler,
                                      int64_t *skipped, graft_err *e);

/* The training set: features x (n, dim) and labels y (n int64 class indices for cross-entropy,
 * else (n, n_outputs) floats), checked as loss_compute checks them. x must stay valid and
 * unchanged until cuda_head_free (it may be page-locked in place, or read per batch). */
graft_status cuda_head_set_data(cuda_head *ch, const float *x, const void *y, int64_t n,
                                graft_err *e);
/* The epoch's order (n indices; kept by pointer until the next call) and zeroed epoch sums. */
graft_status cuda_head_epoch_begin(cuda_head *ch, const int64_t *order, graft_err *e);
/* One micro-batch: rows order[at .. at+m) (m <= max_batch); dropout masks from dropout_seed;
 * then, when u is not NULL, the optimizer step. Enqueued only: nothing waits for the GPU. */
graft_status cuda_head_step(cuda_head *ch, int64_t at, int64_t m, uint64_t dropout_seed,
                            const cuda_head_update *u, graft_err *e);
/* Wait for the GPU and read its training state. */
graft_status cuda_head_read(cuda_head *ch, cuda_head_stats *out, graft_err *e);
/* Replace the device's loss scale and growth tracker (a callback changed them). */
graft_status cuda_head_set_scaler(cuda_head *ch, const loss_scaler *scaler, graft_err *e);
cuda_head_counters cuda_head_get_counters(const cuda_head *ch);

#ifdef __cplusplus
}
#endif

#endif

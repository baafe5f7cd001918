/* train_state.h: the training state a step keeps beside the parameters (the loss scaler, the
 * optimizer's step count, this step's scalars, the loss sums): a plain struct the host and the
 * device kernels share, held by the OptimizerStep op's state input (src/ops/optimizer_step.h). */
#ifndef GRAFT_TRAIN_TRAIN_STATE_H
#define GRAFT_TRAIN_TRAIN_STATE_H

#include <stdint.h>

/* The training state that lives where the parameters do (on a device between steps, so a step
 * needs no host round trip): the loss scaler (fp16), the optimizer's step count and this step's
 * scalars, and the loss sums. The host reads it (one copy) at an epoch's end or when it reports a
 * step. */
typedef struct train_state {
    /* 8-byte fields first: the layout is the same for gcc and nvcc */
    int64_t growth_interval;
    int64_t growth_tracker;
    int64_t skipped;   /* optimizer steps skipped for inf/NaN gradients */
    int64_t opt_steps; /* optimizer steps taken (PyTorch's state["step"]) */
    double step_loss;  /* mean loss of the last micro-batch */
    double epoch_loss; /* sum over the epoch's micro-batches of loss * rows */
    double wsum;       /* CE: the batch's sum of target weights, the gradient's divisor */
    double bias1;      /* 1 - beta1^t in double (Adam's step size per parameter rate) */
    int64_t step_correct, epoch_correct;
    int64_t bad_batches; /* CE micro-batches whose target weights summed to zero */
    float scale, growth_factor, backoff_factor;
    float inv_scale;   /* 1/scale of this step (fp32, as PyTorch rounds it) */
    float clip_coef;   /* multiplies the gradients when clip_apply */
    float total_norm;  /* of the last clipped step */
    float step_size;   /* Adam: lr / (1 - beta1^t) */
    float bc2_sqrt;    /* Adam: sqrt(1 - beta2^t) */
    float bc1, bc2;    /* LAMB: 1 - beta^t */
    int32_t found_inf; /* set by the gradient check, cleared by the step's finalisation */
    int32_t skip;      /* this step is skipped (fp16 inf/NaN) */
    int32_t clip_apply;
    int32_t first; /* SGD: the first step copies d into the momentum buffer */
} train_state;

/* gcc and nvcc must lay it out alike (the host fills what the device reads): no padding. */
#ifdef __cplusplus
static_assert(sizeof(train_state) == 144, "train_state's layout changed: update the size here");
#else
_Static_assert(sizeof(train_state) == 144, "train_state's layout changed: update the size here");
#endif

#endif

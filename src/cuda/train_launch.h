/* train_launch.h: launchers of the training ops' kernels (src/cuda/train.cu: TrainLoss's losses;
 * train_optim.cu: OptimizerStep's gradient norms and fused optimizers). */
#ifndef GRAFT_CUDA_TRAIN_LAUNCH_H
#define GRAFT_CUDA_TRAIN_LAUNCH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "../train/train_state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the head's compute copies are rounded: the values of graft_precision (FP32, BF16, FP16). */
enum { TRAIN_ROUND_NONE = 0, TRAIN_ROUND_BF16 = 1, TRAIN_ROUND_F16 = 2 };
/* Losses: the values of loss_kind (src/train/loss.h). */
enum { TRAIN_LOSS_CE = 0, TRAIN_LOSS_BCE = 1, TRAIN_LOSS_MSE = 2 };
/* Optimizers: the values of optim_kind (src/train/optim.h). */
enum { TRAIN_OPT_SGD = 0, TRAIN_OPT_ADAM = 1, TRAIN_OPT_ADAMW = 2, TRAIN_OPT_LAMB = 3 };

/* Partial sums per parameter tensor in the deterministic norm reductions (one per block). */
#define TRAIN_PARTIALS 128

/* ---- forward, losses, backward (train.cu) -------------------------------------------------- */

typedef struct train_loss_args {
    int kind; /* TRAIN_LOSS_* */
    int64_t m, c;
    double smoothing;          /* CE */
    double wsum_c;             /* CE: sum of the class weights (c without weights) */
    const float *class_weight; /* CE: (c) device, or NULL */
    const float *pos_weight;   /* BCE: (c) device, or NULL */
    const void *targets;       /* CE: int64 (m); else f32 (m, c); device */
    double grad_mult;          /* 1 / accumulate */
    int scale_grad;            /* fp16: the gradient is also multiplied by the loss scale */
    int round;                 /* of the gradient */
} train_loss_args;

/* The mean loss of logits (m, c) into st->step_loss (added, times m, to st->epoch_loss), the
 * correct predictions (CE) likewise, and dlogits (m, c) = round(d(loss)/d(logits) * grad_mult
 * [* st->scale]). scratch: 4 * m doubles of device memory. */
cudaError_t train_loss(const float *logits, float *dlogits, const train_loss_args *a,
                       double *scratch, train_state *st, cudaStream_t stream);

/* ---- optimizer step (train_optim.cu) ------------------------------------------------------- */

/* Per-block partial sums of (g * inv_scale)^2 (inv_scale = 1 unless fp16) into
 * partials[0..TRAIN_PARTIALS), and st->found_inf when a gradient is inf or NaN (fp16). */
cudaError_t train_grad_check(const float *g, int64_t n, int fp16, double *partials, train_state *st,
                             cudaStream_t stream);

typedef struct train_step_args {
    int kind; /* TRAIN_OPT_* */
    int fp16; /* unscale, check and update the loss scale */
    int clip; /* clip by global norm to max_norm */
    float max_norm;
    float lr, beta1, beta2;
    int n_params;
} train_step_args;

/* The step's scalars from the gradient checks (partials: TRAIN_PARTIALS per parameter, summed in
 * place): skip
 * and the scaler update (fp16), the clipping coefficient, the step count and bias corrections. */
cudaError_t train_step_finalize(train_state *st, double *partials, train_step_args a,
                                cudaStream_t stream);

/* out (2) = (1 when the settled step is skipped else 0, the total norm when clipping else 0):
 * the OptimizerStep node's result. */
cudaError_t train_step_result(float *out, const train_state *st, int clip, cudaStream_t stream);

typedef struct train_optim_args {
    int kind; /* TRAIN_OPT_* */
    float lr;
    float weight_decay; /* 0 for parameters without decay */
    float momentum, dampening;
    int nesterov;
    float beta1, beta2, eps;
    int amsgrad;
    int fp16; /* the gradients are still scaled: multiply by st->inv_scale */
} train_optim_args;

/* One fused update of a parameter tensor w (n) from its gradient g, which it then clears (also
 * when the step is skipped). State buffers: SGD s0 = momentum (or NULL); Adam/AdamW s0 = exp_avg,
 * s1 = exp_avg_sq, s2 = max_exp_avg_sq (or NULL); LAMB s0, s1 and partials (2 * TRAIN_PARTIALS
 * doubles of scratch). */
cudaError_t train_optim_update(float *w, float *g, float *s0, float *s1, float *s2, int64_t n,
                               train_optim_args a, double *partials, const train_state *st,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

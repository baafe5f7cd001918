/* optimizer_step.h: the OptimizerStep node (domain ai.graft.training): one optimizer step over
 * every parameter of a training graph, the parameters and their state updated in place where
 * they live (the host, or a device between steps). Its CPU kernel is src/cpu/ref/
 * optimizer_step.c (src/train/optim.c's formulas), its CUDA kernel src/cuda/cuda_optimizer.c.
 *
 * Inputs: 0 state (uint8, sizeof(train_state) bytes: src/train/train_state.h; the loss scaler,
 * the step count; updated), 1 hyper (float32 (2), read on the host: the step's learning rate
 * and SGD's momentum or the others' beta1), then per parameter OPTIMIZER_STEP_SLOTS inputs:
 * the weights (float32, updated), their gradient (float32, the same shape; consumed: zeroed
 * after the step, skipped or not), and the state slots s0, s1, s2 of optim.h's optim_tensor
 * (float32, the same shape, updated; omitted (-1) where the optimizer uses none).
 * Attributes: kind (0 SGD, 1 Adam, 2 AdamW, 3 LAMB), weight_decay, dampening, nesterov (int),
 * beta2, eps, amsgrad (int), fp16 (int: unscale the gradients by 1/scale, skip the step on an
 * inf or NaN and update the scaler, as loss_scale.h), max_norm (float, > 0: clip by the global
 * norm), decay (ints, per parameter: weight decay applies), lr_scale (a float64 tensor, per
 * parameter: its rate over the step's, 0: the same; double as optim_param.lr_scale is, so the
 * rate rounds as optim_step rounds it).
 * Output: float32 (2): 1 when the step was skipped (else 0), and the gradients' total norm
 * when clipping (else 0). */
#ifndef GRAFT_OPS_OPTIMIZER_STEP_H
#define GRAFT_OPS_OPTIMIZER_STEP_H

#include "op.h"

#define OPTIMIZER_STEP_SLOTS 5 /* w, g, s0, s1, s2 */
#define OPTIMIZER_STEP_FIRST 2 /* inputs before the parameters' */

typedef struct optimizer_step_layout {
    int kind; /* 0 SGD, 1 Adam, 2 AdamW, 3 LAMB (optim_kind's values) */
    float weight_decay, dampening, beta2, eps, max_norm;
    bool nesterov, amsgrad, fp16;
    int n_params;
    const int64_t *decay;   /* (n_params) */
    const double *lr_scale; /* (n_params) */
    bool slot_used[3];      /* which of s0, s1, s2 the kind uses (every parameter alike) */
} optimizer_step_layout;

/* The attributes and arity checked; names the node on error. */
graft_status optimizer_step_read(const ir_node *node, int n_in, int n_out, optimizer_step_layout *l,
                                 graft_err *e);

#endif

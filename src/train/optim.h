/* optim.h: SGD, Adam, AdamW and LAMB over fp32 master weights, and clipping by global norm. */
#ifndef GRAFT_TRAIN_OPTIM_H
#define GRAFT_TRAIN_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/*
 * Update rules (g: gradient, w: weights, t: step count after increment, lr: the step's rate,
 * wd: weight_decay, applied only to parameters whose `decay` flag is set). Elementwise math is
 * fp32 like PyTorch's CPU kernels; scalar factors (bias corrections) are computed in double.
 *
 * SGD (torch.optim.SGD):
 *   d = g + wd*w
 *   if momentum != 0: b = d on the first step, else b = momentum*b + (1-dampening)*d
 *                     d = nesterov ? d + momentum*b : b
 *   w -= lr*d
 * Adam (torch.optim.Adam, L2 decay):
 *   g += wd*w;  m = m + (1-b1)*(g-m);  v = b2*v + (1-b2)*g*g
 *   if amsgrad: vmax = max(vmax, v), use vmax for v below
 *   w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 * AdamW (torch.optim.AdamW, decoupled decay): w *= 1 - lr*wd, then the Adam update without L2.
 * LAMB (You et al., "Large Batch Optimization for Deep Learning", Algorithm 2, phi = identity):
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
 *   u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*w
 *   r = ||w|| / ||u|| (2-norms over the whole parameter tensor, in double, w before the
 *       update); r = 1 when either norm is 0
 *   w -= lr*r*u
 *   amsgrad, momentum, dampening and nesterov are ignored by LAMB.
 */

typedef enum optim_kind { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW, OPTIM_LAMB } optim_kind;

typedef struct optim_config {
    optim_kind kind;
    float weight_decay; /* applies only to params with decay = true */
    /* SGD */
    float momentum;
    float dampening;
    bool nesterov;
    /* Adam, AdamW, LAMB */
    float beta1;
    float beta2;
    float eps;
    bool amsgrad; /* Adam and AdamW */
} optim_config;

/* One parameter tensor: the optimizer updates `data` in place from `grad`; it does not own them. */
typedef struct optim_param {
    float *data;       // (numel) fp32 master weights
    const float *grad; // (numel) gradient of the loss with respect to data
    int64_t numel;
    bool decay;       /* weight decay applies (callers set false for biases and norm params) */
    const char *name; /* optional; names the state buffers ("fc.weight.exp_avg"), else "p3" */
    double lr_scale;  /* > 0: this parameter's rate is the step's lr times it (a parameter group
                         with its own rate, scheduled alike); 0: the step's lr */
} optim_param;

/* One state buffer, for checkpoints: read or overwrite data[0..numel). */
typedef struct optim_state_buf {
    char name[96]; /* "<param name>.<momentum_buffer|exp_avg|exp_avg_sq|max_exp_avg_sq>" */
    float *data;   // (numel)
    int64_t numel;
    int param_index;
} optim_state_buf;

typedef struct optim optim;

/* PyTorch's defaults for kind: SGD momentum 0; Adam/AdamW/LAMB betas (0.9, 0.999), eps 1e-8;
 * weight_decay 0 except AdamW 1e-2 and LAMB 0. */
optim_config optim_config_default(optim_kind kind);

/* Create an optimizer over params[0..n_params) (the array is copied; the buffers are not). */
graft_status optim_create(optim **out, const optim_config *cfg, const optim_param *params,
                          int n_params, graft_err *err);
void optim_free(optim *opt);

/* One update of every parameter from its current grad, with learning rate lr. */
graft_status optim_step(optim *opt, float lr, graft_err *err);

/* Steps taken so far (PyTorch's state["step"]); set it when restoring a checkpoint. */
int64_t optim_step_count(const optim *opt);
void optim_set_step_count(optim *opt, int64_t steps);
/* The state buffers an update reads and writes, per parameter tensor, as the OptimizerStep op
 * (src/ops/optimizer_step.h) and the GPU kernels lay them out: SGD s[0] = momentum_buffer (with
 * momentum); Adam/AdamW s[0] = exp_avg, s[1] = exp_avg_sq, s[2] = max_exp_avg_sq (amsgrad);
 * LAMB s[0], s[1]. NULL where unused. */
#define OPTIM_SLOTS 3
typedef struct optim_tensor {
    float *w;              // (numel) fp32 master weights, updated in place
    const float *g;        // (numel) the gradient
    float *s[OPTIM_SLOTS]; // (numel) each, or NULL
    int64_t numel;
    bool decay;
} optim_tensor;
/* Which slots kind c uses. */
void optim_state_slots(const optim_config *c, bool used[OPTIM_SLOTS]);
/* One tensor's update with rate lr (the parameter's own) at step t (PyTorch's state["step"]
 * after this step: 1 on the first). optim_step applies it to every parameter. */
void optim_update_tensor(const optim_config *c, const optim_tensor *p, float lr, int64_t t);
/* Parameter i's rate for the step's lr (optim_param.lr_scale; the same rounding everywhere). */
float optim_param_lr(float lr, double lr_scale);
/* Parameter i as optim_update_tensor takes it: its data, grad and state buffers. */
void optim_param_tensor(const optim *opt, int i, optim_tensor *out);
const optim_param *optim_get_param(const optim *opt, int i);
int optim_param_count(const optim *opt);
graft_status optim_check_config(const optim_config *c, graft_err *err);
/* For schedulers that cycle momentum (one-cycle): sets SGD momentum, or beta1 for the others. */
void optim_set_momentum(optim *opt, float momentum);
const optim_config *optim_get_config(const optim *opt);

/* State buffers, for checkpoints: index 0..optim_state_count()-1. Zero before the first step;
 * a restored state must come with optim_set_step_count (SGD's first step copies d into b). */
int optim_state_count(const optim *opt);
graft_status optim_state_get(optim_state_buf *out, optim *opt, int index, graft_err *err);

/* torch.nn.utils.clip_grad_norm_ (norm_type 2): total = ||(||g_0||, ..., ||g_n-1||)||; when
 * max_norm/(total+1e-6) < 1 every grad is multiplied by it (a NaN/inf total spreads to the
 * grads, as in PyTorch). Writes the total norm (before clipping) to *total_norm. */
graft_status clip_grad_norm(float *total_norm, float **grads, const int64_t *numels, int n,
                            float max_norm, graft_err *err);

#endif

/* loss_scale.h: dynamic loss scaling for fp16 training, PyTorch GradScaler's policy. */
#ifndef GRAFT_TRAIN_LOSS_SCALE_H
#define GRAFT_TRAIN_LOSS_SCALE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/*
 * Per step: multiply the loss by `scale` before backward; loss_scale_unscale() divides the
 * (fp32) grads by it and reports inf/NaN; skip optim_step when found; then
 * loss_scale_update(found_inf):
 *   found_inf: scale *= backoff_factor, growth_tracker = 0
 *   else:      growth_tracker += 1; when it reaches growth_interval: scale *= growth_factor
 *              (kept only if finite), growth_tracker = 0
 * scale is fp32 as in PyTorch. All fields are plain state for checkpoints.
 */
typedef struct loss_scaler {
    float scale;
    float growth_factor;
    float backoff_factor;
    int64_t growth_interval;
    int64_t growth_tracker;
} loss_scaler;

/* init_scale 65536, growth_factor 2, backoff_factor 0.5, growth_interval 2000. */
loss_scaler loss_scaler_default(void);
graft_status loss_scaler_check(const loss_scaler *s, graft_err *err);

/* Multiply every grads[i][0..numels[i]) by 1/scale (the reciprocal rounded to fp32, as
 * PyTorch does) in place; *found_inf = true when any value was inf or NaN. */
graft_status loss_scale_unscale(bool *found_inf, float **grads, const int64_t *numels, int n,
                                const loss_scaler *s, graft_err *err);

void loss_scale_update(loss_scaler *s, bool found_inf);

#endif

/* loss_scale.c: GradScaler's unscale-and-check and its scale update. */
#include "train/loss_scale.h"

#include <math.h>

loss_scaler loss_scaler_default(void) {
    return (loss_scaler){.scale = 65536.0f,
                         .growth_factor = 2.0f,
                         .backoff_factor = 0.5f,
                         .growth_interval = 2000,
                         .growth_tracker = 0};
}

graft_status loss_scaler_check(const loss_scaler *s, graft_err *err) {
    if (!(s->scale > 0.0f) || !isfinite(s->scale))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "loss scaler: scale %g", s->scale);
    if (!(s->growth_factor > 1.0f))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "loss scaler: growth_factor %g <= 1",
                       s->growth_factor);
    if (!(s->backoff_factor > 0.0f && s->backoff_factor < 1.0f))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "loss scaler: backoff_factor %g",
                       s->backoff_factor);
    if (s->growth_interval <= 0 || s->growth_tracker < 0)
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "loss scaler: growth_interval %lld",
                       (long long)s->growth_interval);
    return GRAFT_OK;
}

graft_status loss_scale_unscale(bool *found_inf, float **grads, const int64_t *numels, int n,
                                const loss_scaler *s, graft_err *err) {
    *found_inf = false;
    if (n < 0 || (n > 0 && (!grads || !numels)))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "loss scaler: bad gradient list");
    TRY(loss_scaler_check(s, err));
    float inv = (float)(1.0 / (double)s->scale);
    bool bad = false;
    for (int i = 0; i < n; i++) {
        float *g = grads[i];
        for (int64_t j = 0; j < numels[i]; j++) {
            if (!isfinite(g[j])) bad = true;
            g[j] *= inv;
        }
    }
    *found_inf = bad;
    return GRAFT_OK;
}

void loss_scale_update(loss_scaler *s, bool found_inf) {
    if (found_inf) {
        s->scale *= s->backoff_factor;
        s->growth_tracker = 0;
        return;
    }
    int64_t good = s->growth_tracker + 1;
    if (good >= s->growth_interval) {
        float grown = s->scale * s->growth_factor;
        if (isfinite(grown)) s->scale = grown;
        s->growth_tracker = 0;
    } else {
        s->growth_tracker = good;
    }
}

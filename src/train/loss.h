/* loss.h: the head's training losses (softmax cross-entropy with label smoothing and class
 * weights, binary cross-entropy with logits, mean squared error), forward and backward, mean
 * reduction as PyTorch defines it. */
#ifndef GRAFT_TRAIN_LOSS_H
#define GRAFT_TRAIN_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/error.h"

typedef enum loss_kind {
    LOSS_SOFTMAX_CE = 0, /* targets: int64 class indices (N) */
    LOSS_BCE_LOGITS = 1, /* targets: f32 (N, C) in [0, 1] (multi-label) */
    LOSS_MSE = 2,        /* targets: f32 (N, C) */
} loss_kind;

typedef struct loss_spec {
    loss_kind kind;
    double label_smoothing;    /* CE: eps in [0, 1]; the target puts eps/C on every class */
    const float *class_weight; /* CE: (C) or NULL; the mean divides by the targets' weights */
    const float *pos_weight;   /* BCE: (C) or NULL; weight of the positive term per class */
    /* dlogits are multiplied by it (0: by 1): a data-parallel rank's share of the global batch's
     * mean (src/dist/dist_train.h), so the ranks' summed gradients are the whole batch's. */
    double grad_scale;
    /* the step graph takes grad_scale per run (an input of TrainLoss) rather than once (its
     * attribute): set for data-parallel training, whose shares change from batch to batch */
    bool grad_scale_input;
} loss_spec;

/* *loss = the mean loss over the batch; dlogits (N, C), when not NULL, = d(loss)/d(logits).
 * Errors: a class index out of range (names the sample), NaN or out-of-range BCE targets, a
 * zero total of target weights, n or c < 1, a bad smoothing value. */
graft_status loss_compute(double *loss, float *dlogits, const loss_spec *spec, const float *logits,
                          const void *targets, int64_t n, int64_t c, graft_err *e);

/* The targets' checks loss_compute makes: class indices in [0, c) for cross-entropy, targets in
 * [0, 1] (not NaN) for BCE; nothing for MSE. The error names the first bad sample. */
graft_status loss_check_targets(loss_kind kind, const void *targets, int64_t n, int64_t c,
                                graft_err *e);

/* Cross-entropy's right answers: rows of logits (n, c) whose first largest value is at the
 * label's index (labels: int64 (n)). */
int64_t loss_count_correct(const float *logits, const int64_t *labels, int64_t n, int64_t c);
/* The same in double (logits and dlogits (N, C) double; targets as above). */
graft_status loss_compute_f64(double *loss, double *dlogits, const loss_spec *spec,
                              const double *logits, const void *targets, int64_t n, int64_t c,
                              graft_err *e);

#endif

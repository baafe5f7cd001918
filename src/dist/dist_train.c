/* dist_train.c: data-parallel training's arithmetic: batch slices, gradient shares, the fused
 * gradient all-reduce and the metrics reduced across ranks. */
#include "dist_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/context.h"
#include "../core/rng.h"

dist *trainer_dist(const graft_trainer *t) {
    return t && t->model && t->model->ctx ? t->model->ctx->dist : NULL;
}

void dist_batch_slice(const dist *d, int64_t m, int64_t *lo, int64_t *hi) {
    int64_t w = dist_world_size(d), r = dist_rank(d);
    *lo = m * r / w;
    *hi = m * (r + 1) / w;
}

static double row_weight(const loss_spec *s, const void *y, size_t label_size, int64_t k) {
    if (s->kind != LOSS_SOFTMAX_CE || !s->class_weight) return 1.0;
    int64_t label;
    memcpy(&label, (const char *)y + (size_t)k * label_size, sizeof label);
    return (double)s->class_weight[label];
}

double dist_grad_share(const loss_spec *s, const void *y, size_t label_size, const int64_t *order,
                       int64_t m, int64_t lo, int64_t hi) {
    double mine = 0.0, all = 0.0;
    for (int64_t i = 0; i < m; i++) {
        double w = row_weight(s, y, label_size, order[i]);
        all += w;
        if (i >= lo && i < hi) mine += w;
    }
    /* A zero total is the loss's own error (named there); the share is then irrelevant. */
    return all != 0.0 ? mine / all : 0.0;
}

void dist_dropout_before(graft_trainer *t, int64_t lo, int64_t hi, int64_t m, uint64_t *start) {
    *start = t->h.rng;
    t->h.rows_before = lo, t->h.rows_after = m - hi;
}

void dist_dropout_after(graft_trainer *t, int64_t m, uint64_t start) {
    t->h.rows_before = 0, t->h.rows_after = 0;
    if (!(t->h.dropout > 0.0f && t->h.n_layers > 1)) return;
    int64_t per_row = 0;
    for (int i = 0; i + 1 < t->h.n_layers; i++) per_row += t->h.layers[i].out;
    t->h.rng = start; /* a rank without rows drew nothing: every rank ends where one process does */
    rng_skip(&t->h.rng, (uint64_t)(m * per_row));
}

graft_status dist_allreduce_grads(dist *d, float **grads, const int64_t *numels, int n,
                                  graft_err *e) {
    if (!d || n == 0) return GRAFT_OK;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += numels[i];
    float *fused = malloc(sizeof(float) * (size_t)(total ? total : 1));
    if (!fused)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for %lld gradients",
                       (long long)total);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(fused + at, grads[i], sizeof(float) * (size_t)numels[i]);
        at += numels[i];
    }
    graft_status st = dist_allreduce_f32(d, fused, total, e);
    at = 0;
    for (int i = 0; st == GRAFT_OK && i < n; i++) {
        memcpy(grads[i], fused + at, sizeof(float) * (size_t)numels[i]);
        at += numels[i];
    }
    free(fused);
    return st;
}

graft_status dist_reduce_step(dist *d, double *loss, double share, int64_t *correct, graft_err *e) {
    double v[2] = {share > 0.0 ? *loss * share : 0.0, (double)*correct};
    TRY(dist_allreduce_f64(d, v, 2, e));
    *loss = v[0];
    *correct = (int64_t)llround(v[1]);
    return GRAFT_OK;
}

graft_status dist_any(dist *d, bool *flag, graft_err *e) {
    if (!d) return GRAFT_OK;
    double v = *flag ? 1.0 : 0.0;
    TRY(dist_allreduce_f64(d, &v, 1, e));
    *flag = v > 0.0;
    return GRAFT_OK;
}

graft_status dist_eval_features(graft_trainer *t, const float *x, const void *y, int64_t n,
                                double *loss, double *accuracy, graft_err *e) {
    dist *d = trainer_dist(t);
    if (!d) return trainer_eval_features(t, x, y, n, loss, accuracy, e);
    int64_t lo, hi;
    dist_batch_slice(d, n, &lo, &hi);
    double l = 0.0, acc = -1.0;
    size_t ls = trainer_label_size(t);
    if (hi > lo)
        TRY(trainer_eval_features(t, x + lo * t->dim, (const char *)y + (size_t)lo * ls, hi - lo,
                                  &l, &acc, e));
    double m = (double)(hi - lo);
    double v[3] = {l * m, acc >= 0.0 ? (double)llround(acc * m) : 0.0, m};
    TRY(dist_allreduce_f64(d, v, 3, e));
    *loss = v[2] > 0.0 ? v[0] / v[2] : 0.0;
    *accuracy = t->options.loss == GRAFT_LOSS_CROSS_ENTROPY && v[2] > 0.0 ? v[1] / v[2] : -1.0;
    return GRAFT_OK;
}

/* loss.c: softmax cross-entropy, BCE with logits and MSE with their gradients, in double. */
#include <math.h>
#include <stdlib.h>

#include "loss.h"

graft_status loss_check_targets(loss_kind kind, const void *targets, int64_t n, int64_t c,
                                graft_err *e) {
    if (kind == LOSS_SOFTMAX_CE) {
        const int64_t *y = targets;
        for (int64_t i = 0; i < n; i++)
            if (y[i] < 0 || y[i] >= c)
                return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                               "cross-entropy: sample %lld has class %lld, outside [0, %lld)",
                               (long long)i, (long long)y[i], (long long)c);
    } else if (kind == LOSS_BCE_LOGITS) {
        const float *t = targets;
        for (int64_t i = 0; i < n * c; i++)
            if (!(t[i] >= 0.0f && t[i] <= 1.0f))
                return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                               "binary cross-entropy: target of sample %lld, class %lld is %g, "
                               "not in [0, 1]",
                               (long long)(i / c), (long long)(i % c), (double)t[i]);
    }
    return GRAFT_OK;
}

/* Softmax cross-entropy, PyTorch's mean with label smoothing eps and class weights w (1 when
 * absent): loss = [(1-eps) sum_i w[y_i] (-logp[i, y_i]) + eps/C sum_i sum_k w[k] (-logp[i, k])]
 * / W, with W = sum_i w[y_i]. */
static graft_status ce_loss(double *loss, double *dl, const loss_spec *s, const double *x,
                            const int64_t *y, int64_t n, int64_t c, graft_err *e) {
    double eps = s->label_smoothing, wsum_t = 0.0, wsum_c = 0.0, total = 0.0;
    const float *w = s->class_weight;
    TRY(loss_check_targets(LOSS_SOFTMAX_CE, y, n, c, e));
    for (int64_t i = 0; i < n; i++) wsum_t += w ? (double)w[y[i]] : 1.0;
    for (int64_t k = 0; k < c; k++) wsum_c += w ? (double)w[k] : 1.0;
    if (!(wsum_t != 0.0))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "cross-entropy: the targets' class weights sum to zero");
    for (int64_t i = 0; i < n; i++) {
        const double *xi = x + i * c;
        double mx = xi[0], se = 0.0, smooth = 0.0;
        for (int64_t k = 1; k < c; k++) mx = xi[k] > mx ? xi[k] : mx;
        for (int64_t k = 0; k < c; k++) se += exp(xi[k] - mx);
        double lse = mx + log(se), wy = w ? (double)w[y[i]] : 1.0;
        for (int64_t k = 0; k < c; k++) smooth += (w ? (double)w[k] : 1.0) * (lse - xi[k]);
        total += (1.0 - eps) * wy * (lse - xi[y[i]]) + eps / (double)c * smooth;
        if (!dl) continue;
        /* d/dx[k] = [(1-eps) w_y (p_k - [k=y]) + eps/C (sum_w p_k - w_k)] / W */
        for (int64_t k = 0; k < c; k++) {
            double p = exp(xi[k] - lse), wk = w ? (double)w[k] : 1.0;
            double g = (1.0 - eps) * wy * (p - (k == y[i] ? 1.0 : 0.0)) +
                       eps / (double)c * (wsum_c * p - wk);
            dl[i * c + k] = g / wsum_t;
        }
    }
    *loss = total / wsum_t;
    return GRAFT_OK;
}

static double softplus(double z) {
    return (z > 0.0 ? z : 0.0) + log1p(exp(-fabs(z)));
}

static double sigmoid(double z) {
    return z >= 0.0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
}

/* BCE with logits: l = pw * t * softplus(-x) + (1 - t) * softplus(x), mean over N*C. */
static graft_status bce_loss(double *loss, double *dl, const loss_spec *s, const double *x,
                             const float *t, int64_t n, int64_t c, graft_err *e) {
    double total = 0.0, inv = 1.0 / ((double)n * (double)c);
    TRY(loss_check_targets(LOSS_BCE_LOGITS, t, n, c, e));
    for (int64_t i = 0; i < n * c; i++) {
        double pw = s->pos_weight ? (double)s->pos_weight[i % c] : 1.0, ti = t[i];
        total += pw * ti * softplus(-x[i]) + (1.0 - ti) * softplus(x[i]);
        if (dl) {
            double sg = sigmoid(x[i]);
            dl[i] = (pw * ti * (sg - 1.0) + (1.0 - ti) * sg) * inv;
        }
    }
    *loss = total * inv;
    return GRAFT_OK;
}

static graft_status mse_loss(double *loss, double *dl, const double *x, const float *t, int64_t n,
                             int64_t c) {
    double total = 0.0, inv = 1.0 / ((double)n * (double)c);
    for (int64_t i = 0; i < n * c; i++) {
        double d = x[i] - (double)t[i];
        total += d * d;
        if (dl) dl[i] = 2.0 * d * inv;
    }
    *loss = total * inv;
    return GRAFT_OK;
}

graft_status loss_compute_f64(double *loss, double *dlogits, const loss_spec *spec,
                              const double *logits, const void *targets, int64_t n, int64_t c,
                              graft_err *e) {
    if (!loss || !spec || !logits || !targets)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "loss: a required pointer is NULL");
    if (n < 1 || c < 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "loss: batch %lld x %lld classes is empty",
                       (long long)n, (long long)c);
    graft_status st;
    switch (spec->kind) {
    case LOSS_SOFTMAX_CE:
        if (!(spec->label_smoothing >= 0.0 && spec->label_smoothing <= 1.0))
            return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                           "cross-entropy: label_smoothing %g is outside [0, 1]",
                           spec->label_smoothing);
        st = ce_loss(loss, dlogits, spec, logits, targets, n, c, e);
        break;
    case LOSS_BCE_LOGITS:
        st = bce_loss(loss, dlogits, spec, logits, targets, n, c, e);
        break;
    case LOSS_MSE:
        st = mse_loss(loss, dlogits, logits, targets, n, c);
        break;
    default:
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "loss: unknown kind %d", (int)spec->kind);
    }
    if (st == GRAFT_OK && dlogits && spec->grad_scale != 0.0 && spec->grad_scale != 1.0)
        for (int64_t i = 0; i < n * c; i++) dlogits[i] *= spec->grad_scale;
    return st;
}

graft_status loss_compute(double *loss, float *dlogits, const loss_spec *spec, const float *logits,
                          const void *targets, int64_t n, int64_t c, graft_err *e) {
    if (!logits) return err_set(e, GRAFT_E_INVALID_ARGUMENT, "loss: logits are NULL");
    if (n < 1 || c < 1 || n > INT64_MAX / c)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "loss: batch %lld x %lld classes is empty",
                       (long long)n, (long long)c);
    size_t count = (size_t)(n * c);
    double *x = calloc(count, sizeof(double));
    double *g = dlogits ? malloc(count * sizeof(double)) : NULL;
    if (!x || (dlogits && !g)) {
        free(x);
        free(g);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "loss: out of memory for %zu logits", count);
    }
    for (size_t i = 0; i < count; i++) x[i] = logits[i];
    graft_status st = loss_compute_f64(loss, g, spec, x, targets, n, c, e);
    if (st == GRAFT_OK && dlogits)
        for (size_t i = 0; i < count; i++) dlogits[i] = (float)g[i];
    free(x);
    free(g);
    return st;
}

int64_t loss_count_correct(const float *logits, const int64_t *labels, int64_t n, int64_t c) {
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t best = 0;
        for (int64_t k = 1; k < c; k++)
            if (logits[i * c + k] > logits[i * c + best]) best = k;
        correct += best == labels[i];
    }
    return correct;
}

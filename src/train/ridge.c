/* ridge.c: ridge regression by one-pass X^T X accumulation in double and a Cholesky solve. */
#include "train/ridge.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RIDGE_BLOCK 16 /* rows buffered before they are added to X^T X */

struct ridge {
    int64_t d, c, n;
    bool have_shift;
    double *shift_x; // (d) the first row: sums are taken of x - shift_x, for accuracy
    double *shift_y; // (c)
    double *sx;      // (d) sum of shifted x
    double *sy;      // (c) sum of shifted y
    double *g;       // (d, d) sum of shifted x x^T, upper triangle (j >= i)
    double *xy;      // (c, d) sum of shifted y x^T
    double *bx;      // (RIDGE_BLOCK, d) buffered shifted rows
    double *by;      // (RIDGE_BLOCK, c)
    int nb;          /* rows in the buffer */
};

void ridge_free(ridge *r) {
    if (!r) return;
    free(r->shift_x), free(r->shift_y), free(r->sx), free(r->sy);
    free(r->g), free(r->xy), free(r->bx), free(r->by);
    free(r);
}

graft_status ridge_create(ridge **out, int64_t d, int64_t c, graft_err *err) {
    *out = NULL;
    if (d <= 0 || c <= 0 || d > (1 << 16) || c > (1 << 20))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                       "ridge: need 0 < features <= 65536 and 0 < outputs <= 2^20, got %lld "
                       "features and %lld outputs",
                       (long long)d, (long long)c);
    ridge *r = calloc(1, sizeof *r);
    if (!r) return err_set(err, GRAFT_E_OUT_OF_MEMORY, "ridge: out of memory");
    r->d = d, r->c = c;
    size_t ud = (size_t)d, uc = (size_t)c;
    r->shift_x = calloc(ud, sizeof(double));
    r->shift_y = calloc(uc, sizeof(double));
    r->sx = calloc(ud, sizeof(double));
    r->sy = calloc(uc, sizeof(double));
    r->g = calloc(ud * ud, sizeof(double));
    r->xy = calloc(uc * ud, sizeof(double));
    r->bx = calloc(RIDGE_BLOCK * ud, sizeof(double));
    r->by = calloc(RIDGE_BLOCK * uc, sizeof(double));
    if (!r->shift_x || !r->shift_y || !r->sx || !r->sy || !r->g || !r->xy || !r->bx || !r->by) {
        ridge_free(r);
        return err_set(err, GRAFT_E_OUT_OF_MEMORY,
                       "ridge: out of memory for %lld features and %lld outputs", (long long)d,
                       (long long)c);
    }
    *out = r;
    return GRAFT_OK;
}

int64_t ridge_rows(const ridge *r) {
    return r ? r->n + r->nb : 0;
}

/* Add the buffered rows to the sums. */
static void flush(ridge *r) {
    const int64_t d = r->d, c = r->c;
    const int nb = r->nb;
    for (int64_t i = 0; i < d; i++) {
        double *gi = r->g + i * d;
        for (int k = 0; k < nb; k++) {
            const double *row = r->bx + k * d;
            const double a = row[i];
            for (int64_t j = i; j < d; j++) gi[j] += a * row[j];
        }
    }
    for (int64_t o = 0; o < c; o++) {
        double *xo = r->xy + o * d;
        for (int k = 0; k < nb; k++) {
            const double *row = r->bx + k * d;
            const double a = r->by[k * c + o];
            if (a == 0.0) continue;
            for (int64_t j = 0; j < d; j++) xo[j] += a * row[j];
        }
    }
    for (int k = 0; k < nb; k++) {
        for (int64_t j = 0; j < d; j++) r->sx[j] += r->bx[k * d + j];
        for (int64_t o = 0; o < c; o++) r->sy[o] += r->by[k * c + o];
    }
    r->n += nb;
    r->nb = 0;
}

/* Buffer one row: x (d), target y (c) or, when y is NULL, the one-hot row of label. */
static void push_row(ridge *r, const float *x, const float *y, int64_t label) {
    const int64_t d = r->d, c = r->c;
    if (!r->have_shift) {
        for (int64_t j = 0; j < d; j++) r->shift_x[j] = x[j];
        for (int64_t o = 0; o < c; o++) r->shift_y[o] = y ? y[o] : (double)(o == label);
        r->have_shift = true;
    }
    double *bx = r->bx + r->nb * d, *by = r->by + r->nb * c;
    for (int64_t j = 0; j < d; j++) bx[j] = (double)x[j] - r->shift_x[j];
    for (int64_t o = 0; o < c; o++)
        by[o] = (y ? (double)y[o] : (double)(o == label)) - r->shift_y[o];
    if (++r->nb == RIDGE_BLOCK) flush(r);
}

graft_status ridge_accumulate(ridge *r, const float *x, const float *y, int64_t n, graft_err *err) {
    if (!r || n < 0 || (n > 0 && (!x || !y)))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "ridge_accumulate: bad arguments");
    for (int64_t i = 0; i < n; i++) push_row(r, x + i * r->d, y + i * r->c, 0);
    return GRAFT_OK;
}

graft_status ridge_accumulate_labels(ridge *r, const float *x, const int64_t *labels, int64_t n,
                                     graft_err *err) {
    if (!r || n < 0 || (n > 0 && (!x || !labels)))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT, "ridge_accumulate_labels: bad arguments");
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= r->c)
            return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                           "ridge: label %lld of row %lld is outside [0, %lld); no rows of this "
                           "chunk were added",
                           (long long)labels[i], (long long)i, (long long)r->c);
    for (int64_t i = 0; i < n; i++) push_row(r, x + i * r->d, NULL, labels[i]);
    return GRAFT_OK;
}

/* In-place lower Cholesky factor of a (d, d) (row-major, lower triangle read and written).
 * A pivot at or below tol means "not positive definite"; *bad = its column. */
static bool cholesky(double *a, int64_t d, double tol, int64_t *bad) {
    for (int64_t j = 0; j < d; j++) {
        double *aj = a + j * d;
        double s = aj[j];
        for (int64_t k = 0; k < j; k++) s -= aj[k] * aj[k];
        if (!(s > tol)) {
            *bad = j;
            return false;
        }
        const double ljj = sqrt(s);
        aj[j] = ljj;
        for (int64_t i = j + 1; i < d; i++) {
            double *ai = a + i * d;
            double t = ai[j];
            for (int64_t k = 0; k < j; k++) t -= ai[k] * aj[k];
            ai[j] = t / ljj;
        }
    }
    return true;
}

/* Solve L L^T v = v in place, L lower (d, d). */
static void cholesky_solve(double *v, const double *l, int64_t d) {
    for (int64_t i = 0; i < d; i++) {
        double t = v[i];
        for (int64_t k = 0; k < i; k++) t -= l[i * d + k] * v[k];
        v[i] = t / l[i * d + i];
    }
    for (int64_t i = d - 1; i >= 0; i--) {
        double t = v[i];
        for (int64_t k = i + 1; k < d; k++) t -= l[k * d + i] * v[k];
        v[i] = t / l[i * d + i];
    }
}

/* The centred, regularised normal matrix (lower triangle) into a; returns its largest diagonal
 * entry, or NaN when the sums are not finite. */
static double normal_matrix(double *a, const ridge *r, const double *mx, double lambda) {
    const int64_t d = r->d;
    const double n = (double)r->n;
    double maxd = 0.0;
    for (int64_t i = 0; i < d; i++) {
        for (int64_t j = i; j < d; j++) {
            double v = r->g[i * d + j] - n * mx[i] * mx[j];
            a[j * d + i] = v;
        }
        a[i * d + i] += lambda;
        if (!isfinite(a[i * d + i])) return NAN;
        if (a[i * d + i] > maxd) maxd = a[i * d + i];
    }
    return maxd;
}

graft_status ridge_solve(float *w, float *b, ridge *r, double lambda, graft_err *err) {
    if (!r || !w || !b || !(lambda >= 0.0) || !isfinite(lambda))
        return err_set(err, GRAFT_E_INVALID_ARGUMENT,
                       "ridge_solve: bad arguments (lambda must be finite and >= 0)");
    flush(r);
    if (r->n == 0) return err_set(err, GRAFT_E_INVALID_ARGUMENT, "ridge_solve: no rows");
    const int64_t d = r->d, c = r->c;
    double *a = malloc(sizeof(double) * (size_t)(d * d));
    double *mx = malloc(sizeof(double) * (size_t)(d + c + d));
    if (!a || !mx) {
        free(a), free(mx);
        return err_set(err, GRAFT_E_OUT_OF_MEMORY, "ridge_solve: out of memory");
    }
    double *my = mx + d, *v = my + c;
    for (int64_t j = 0; j < d; j++) mx[j] = r->sx[j] / (double)r->n;
    for (int64_t o = 0; o < c; o++) my[o] = r->sy[o] / (double)r->n;
    graft_status st = GRAFT_OK;
    double maxd = normal_matrix(a, r, mx, lambda);
    int64_t bad = -1;
    if (isnan(maxd)) {
        st = err_set(err, GRAFT_E_INVALID_ARGUMENT,
                     "ridge_solve: the features contain NaN or "
                     "infinite values");
    } else if (!cholesky(a, d, maxd * 1e-12 * (double)d, &bad)) {
        st = err_set(err, GRAFT_E_INVALID_ARGUMENT,
                     "ridge_solve: X^T X + lambda I is singular or not positive definite "
                     "(pivot %lld of %lld; lambda %g, %lld rows): the features are linearly "
                     "dependent or too few; use a larger lambda",
                     (long long)bad, (long long)d, lambda, (long long)r->n);
    }
    for (int64_t o = 0; st == GRAFT_OK && o < c; o++) {
        for (int64_t j = 0; j < d; j++) v[j] = r->xy[o * d + j] - (double)r->n * my[o] * mx[j];
        cholesky_solve(v, a, d);
        double bias = my[o] + r->shift_y[o];
        for (int64_t j = 0; j < d; j++) {
            w[o * d + j] = (float)v[j];
            bias -= v[j] * (mx[j] + r->shift_x[j]);
        }
        b[o] = (float)bias;
    }
    free(a), free(mx);
    return st;
}

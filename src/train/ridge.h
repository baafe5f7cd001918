/* ridge.h: closed-form ridge regression warm start for linear heads, accumulated in chunks. */
#ifndef GRAFT_TRAIN_RIDGE_H
#define GRAFT_TRAIN_RIDGE_H

#include <stdint.h>

#include "core/error.h"

/*
 * Solves  min_{W,b} ||X W^T + 1 b^T - Y||^2 + lambda ||W||^2  (the bias is not penalised):
 *   with mx = mean(X), my = mean(Y), Xc = X - mx, Yc = Y - my,
 *   (Xc^T Xc + lambda I) W^T = Xc^T Yc    (Cholesky factorisation, double)
 *   b = my - W mx
 * One pass over the rows: X^T X, X^T Y and the sums are accumulated in double around a shift
 * (the first row), so the data can come in chunks (cached features). Rows are buffered in fixed
 * blocks, so the result does not depend on how the rows were split into chunks.
 * Targets are f32 (N, C) or int64 class indices (N) taken as one-hot rows of length C.
 */

typedef struct ridge ridge;

/* An accumulator for d features and c outputs. */
graft_status ridge_create(ridge **out, int64_t d, int64_t c, graft_err *err);
void ridge_free(ridge *r);

/* Add n rows: x (n, d) features with f32 targets y (n, c). */
graft_status ridge_accumulate(ridge *r, const float *x, const float *y, int64_t n, graft_err *err);
/* Add n rows: x (n, d) features with class indices labels (n), each in [0, c). */
graft_status ridge_accumulate_labels(ridge *r, const float *x, const int64_t *labels, int64_t n,
                                     graft_err *err);

/* Rows accumulated so far. */
int64_t ridge_rows(const ridge *r);

/* Solve with lambda >= 0: w (c, d), b (c) in f32. May be called again (another lambda, more
 * rows). A matrix that is not positive definite (lambda 0 on rank-deficient features, or too few
 * rows) is GRAFT_E_INVALID_ARGUMENT with a message suggesting a larger lambda. */
graft_status ridge_solve(float *w, float *b, ridge *r, double lambda, graft_err *err);

#endif

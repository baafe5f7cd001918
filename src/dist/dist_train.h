/* dist_train.h: data-parallel training's pieces for the trainer: each rank's slice of a global
 * batch and its share of the mean's gradient, the fused gradient all-reduce, metrics and
 * validation reduced across ranks, and the sharded backbone phase. */
#ifndef GRAFT_DIST_DIST_TRAIN_H
#define GRAFT_DIST_DIST_TRAIN_H

#include <stdbool.h>

#include "../train/trainer.h"
#include "dist.h"

/* The trainer's process group (its model's context's); NULL when alone. */
dist *trainer_dist(const graft_trainer *t);

/* The rank's contiguous rows [*lo, *hi) of a global batch of m rows (balanced; empty when m is
 * smaller than the world). */
void dist_batch_slice(const dist *d, int64_t m, int64_t *lo, int64_t *hi);
/* The rank's share of the batch's mean loss: rows [lo, hi) of the m rows whose labels are
 * y[order[i]] (label_size bytes each), weighted as the loss's mean weighs them (cross-entropy
 * with class weights: sum of w[y]; else the count). The ranks' shares sum to 1, so the sum of
 * their share-scaled gradients is the one-process gradient of the whole batch. */
double dist_grad_share(const loss_spec *s, const void *y, size_t label_size, const int64_t *order,
                       int64_t m, int64_t lo, int64_t hi);
/* The head's dropout masks as one process draws them: that run draws each hidden layer's masks
 * for the batch's m rows in turn (m * width values per layer). During a step on rows [lo, hi)
 * each layer's draws skip the rows before lo and after hi (head.rows_before / rows_after), so the
 * rank's masks are exactly the one-process run's; after it, every rank's generator is moved to
 * where the one-process run's is (checkpoints then hold the same state on any rank count; a rank
 * without rows drew nothing). *start carries the state from before to after. */
void dist_dropout_before(graft_trainer *t, int64_t lo, int64_t hi, int64_t m, uint64_t *start);
void dist_dropout_after(graft_trainer *t, int64_t m, uint64_t start);
/* Sum the ranks' gradients (n buffers, numels[i] floats each) in one all-reduce. */
graft_status dist_allreduce_grads(dist *d, float **grads, const int64_t *numels, int n,
                                  graft_err *e);
/* A step's global loss (sum of share * the rank's mean) and correct count, in place. */
graft_status dist_reduce_step(dist *d, double *loss, double share, int64_t *correct, graft_err *e);
/* *flag true on every rank when it is true on any. */
graft_status dist_any(dist *d, bool *flag, graft_err *e);
/* trainer_eval_features over all n rows (every rank holds them), each rank evaluating its
 * slice, the sums reduced: the same loss and accuracy on every rank. */
graft_status dist_eval_features(graft_trainer *t, const float *x, const void *y, int64_t n,
                                double *loss, double *accuracy, graft_err *e);
/* trainer_extract_reported, sharded: this rank runs the backbone on its contiguous share of src
 * (its own feature cache file), then the rows are all-gathered in rank order, so every rank
 * holds the features and labels of every sample, in the one-process order. An error on any
 * rank is an error on all; a stop (the callback) on any stops all. */
graft_status dist_extract(graft_trainer *t, const graft_batch_source *src, int validation,
                          float **features, void **labels, int64_t *n_rows, graft_err *e);

#endif

/* train_loss.h: the TrainLoss node (domain ai.graft.training): a training step's loss and its
 * gradient as the trainer computes them (src/train/loss.h: softmax cross-entropy with label
 * smoothing and class weights, binary cross-entropy with logits and positive weights, mean
 * squared error), with the loss sums kept in the training state. Its CPU kernel is
 * src/cpu/ref/train_loss.c (loss_compute), its CUDA kernel src/cuda/cuda_train_loss.c
 * (train.cu's loss kernels).
 *
 * Inputs: 0 logits (float32 (N, C)), 1 targets (int64 (N) class indices for cross-entropy, else
 * float32 (N, C)), 2 weights (float32 (C), optional, read on the host: cross-entropy's class
 * weights or BCE's positive weights), 3 state (uint8, sizeof(train_state) bytes; updated:
 * step_loss the batch's mean loss, epoch_loss += it times N, step_correct / epoch_correct the
 * right answers (cross-entropy), wsum the targets' weight sum; the CUDA kernel counts a batch
 * whose weights sum to zero in bad_batches, where the CPU kernel fails), 4 grad_scale (float32
 * (1), optional, read on the host: the attribute's value per run, as a data-parallel rank's share
 * of the batch changes from batch to batch).
 * Attributes: kind (0 CE, 1 BCE, 2 MSE: loss_kind), label_smoothing (float), grad_scale (float,
 * 0: 1; loss_spec.grad_scale), accumulate (int >= 1: the gradient over it, PyTorch's loss / k),
 * fp16 (int: the gradient times the state's loss scale).
 * Output: d(loss)/d(logits) (float32 (N, C)), scaled as the attributes say. The targets must have
 * been checked (loss_check_targets) where they come from device memory. */
#ifndef GRAFT_OPS_TRAIN_LOSS_H
#define GRAFT_OPS_TRAIN_LOSS_H

#include "op.h"

typedef struct train_loss_layout {
    int kind; /* 0 CE, 1 BCE, 2 MSE */
    double label_smoothing, grad_scale;
    int64_t accumulate;
    bool fp16;
} train_loss_layout;

/* The attributes and arity checked; names the node on error. */
graft_status train_loss_read(const ir_node *node, int n_in, int n_out, train_loss_layout *l,
                             graft_err *e);

/* The gradient's scale of this run: input 4 when bound, else the attribute (0: 1). */
double train_loss_grad_scale(const train_loss_layout *l, const tensor *const *in, int n_in);

#endif

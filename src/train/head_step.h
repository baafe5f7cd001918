/* head_step.h: a head's whole training step as one graph run by graph/exec on the trainer's
 * backend (docs/training.md "The head's step as one graph"): the batch's rows gathered from the
 * training set's features, the head's forward (head_graph.h's layers, rounding and dropout
 * masks), the TrainLoss op, the backward, and each gradient added to the optimizer's. On a
 * device every tensor it keeps lives there (the features, the weights, the gradients, the
 * training state the loss sums go to): a step moves only the row indices, the targets and the
 * dropout masks up. On the CPU the same graph reads the trainer's own buffers. */
#ifndef GRAFT_TRAIN_HEAD_STEP_H
#define GRAFT_TRAIN_HEAD_STEP_H

#include "head_graph.h"
#include "loss.h"
#include "optim_graph.h"

/* Where the training features are: in device memory (copied once), or gathered on the host and
 * copied per batch (a device without room for them; the CPU always reads them in place). */
enum { HEAD_STEP_FEATURES_HOST = 0, HEAD_STEP_FEATURES_DEVICE = 1, HEAD_STEP_FEATURES_STAGED = 3 };

typedef struct head_step {
    head_graph *hg;       /* the head (its masks are drawn there) */
    optim_graph *og;      /* holds the weights, gradients and state (on the device, or host) */
    train_graph tg, fwd;  /* the step graph; the forward for evaluation (device runs) */
    train_exec run, eval; /* on the model's device (eval: device runs only) */
    tensor *in, *eval_in; /* per input of tg.g / fwd.g */
    int i_all, i_index, i_targets, i_weights, i_state; /* input positions in tg.g */
    int *i_param, *i_acc, *i_mask;                     /* per parameter / per mask */
    int *eval_param;                                   /* per parameter: its input in fwd.g */
    int *mask_of; /* per mask input: the index of hg's mask it reads */
    int n_params, n_masks;
    bool on_device, ce; /* ce: targets are class indices */
    int64_t in_width, outputs;
    train_state host_state; /* the loss's state on the CPU (the scale set before each run) */
    const float *features;  /* the training set (n_all, in_width) the last set_data gave */
    int64_t n_all;
    void *dev_features;   /* its device copy (HEAD_STEP_FEATURES_DEVICE) */
    int64_t rows, *index; /* the batch's row indices (staged: 0..m-1) */
    float *staged;        /* staged: the batch's rows, gathered on the host */
    int place;            /* HEAD_STEP_FEATURES_* */
    int64_t feature_h2d_bytes;
    bool ready;
} head_step;

/* The step graph of hg's head with loss l (its class or positive weights read from l each run),
 * accumulate micro-batches per step, fp16's loss scale; on og's device when og is there (m the
 * model it runs; threads: the CPU's). opt: og's parameters, among them the layers' masters. */
graft_status head_step_init(head_step *hs, head_graph *hg, optim_graph *og, const optim *opt,
                            const loss_spec *l, int64_t accumulate, bool fp16, graft_model *m,
                            int threads, graft_err *e);
void head_step_free(head_step *hs);
/* The training set's features x (n, in_width) for the steps that follow: on a device copied
 * there once (or, when they do not fit, gathered per batch; force_host: always); on the CPU read
 * in place. x must stay valid while steps read it. */
graft_status head_step_set_data(head_step *hs, const float *x, int64_t n, bool force_host,
                                graft_err *e);
/* One micro-batch: the rows rows[0..m) of the set's features, their targets y (m labels), the
 * dropout masks drawn from hg's RNG; the loss sums go to the state, the gradients are added to
 * og's. loss_scale: fp16's current scale (host runs; a device reads its own). */
graft_status head_step_run(head_step *hs, const int64_t *rows, const void *y, int64_t m,
                           const loss_spec *l, float loss_scale, graft_err *e);
/* The same on rows x (m, in_width) of host memory (trainer_step's: the caller gathered them). */
graft_status head_step_run_rows(head_step *hs, const float *x, const void *y, int64_t m,
                                const loss_spec *l, float loss_scale, graft_err *e);
/* The training state the loss writes: the host's, or a copy of the device's (a wait). */
graft_status head_step_state(head_step *hs, train_state *out, graft_err *e);
/* The loss sums of the state zeroed (an epoch's start) and, when scale is not NULL, the loss
 * scaler's scale and growth tracker set (a device's copy, too). */
graft_status head_step_reset_sums(head_step *hs, const float *scale, const int64_t *tracker,
                                  graft_err *e);
/* logits (n, outputs) of features x (n, in_width) in evaluation mode with the current weights;
 * *logits valid until the next call. */
graft_status head_step_logits(head_step *hs, const float *x, int64_t n, const float **logits,
                              graft_err *e);

#endif

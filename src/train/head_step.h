/* head_step.h: a training step as one graph run by graph/exec on the trainer's backend
 * (docs/training.md "The step as one graph"): for a head alone, the batch's rows gathered from
 * the training set's features; for blocks, the batch's frozen pieces (`from` and the side
 * inputs) through the trainable blocks; then the head's forward (head_graph.h's layers, rounding
 * and dropout masks), the TrainLoss op, the backward, and each gradient added to the
 * optimizer's. On a device every tensor it keeps lives there (a head's features, the weights,
 * the gradients, the training state the loss sums go to): a step moves only row indices (or the
 * frozen rows), the targets and the dropout masks up. On the CPU the same graph reads the
 * trainer's own buffers. */
#ifndef GRAFT_TRAIN_HEAD_STEP_H
#define GRAFT_TRAIN_HEAD_STEP_H

#include "blocks.h"
#include "head_graph.h"
#include "loss.h"
#include "optim_graph.h"

/* Where a head alone's training features are: read in place (CPU), in device memory (copied
 * once), or gathered on the host and copied per batch (a device without room for them). */
enum { HEAD_STEP_FEATURES_HOST = 0, HEAD_STEP_FEATURES_DEVICE = 1, HEAD_STEP_FEATURES_STAGED = 3 };

typedef struct head_step {
    head_graph *hg;  /* the head (its masks are drawn there) */
    blocks *b;       /* the trainable blocks below it (NULL: a head alone) */
    optim_graph *og; /* holds the weights, gradients and state (on the device, or host) */
    /* blocks: the blocks and the head as one model graph, with dropout masks and without */
    ir_graph base, base_eval;
    const ir_graph *src, *src_eval; /* what tg and fwd were built from */
    train_graph tg, fwd;            /* the step graph; the forward for evaluation */
    train_exec run, eval;           /* on og's backend (eval: unless a head alone on the CPU) */
    bool have_eval;
    tensor *in, *eval_in;                              /* per input of tg.g / fwd.g */
    int i_all, i_index, i_targets, i_weights, i_state; /* input positions in tg.g */
    int i_grad_scale;      /* TrainLoss's grad_scale input (loss_spec.grad_scale_input), or -1 */
    float grad_scale;      /* what it reads (host memory) */
    int *i_param, *i_acc;  /* per parameter (i_acc: device runs, whose sums stay there) */
    float **host_grad;     /* per parameter: the optimizer's gradient on the host */
    int *i_mask, *mask_of; /* per mask input: its position, the index of hg's mask it reads */
    int *i_piece, *eval_piece; /* blocks: per frozen piece, its input in tg.g and fwd.g */
    char **piece_name;         /* blocks: per frozen piece, its name in the model */
    const char *head_names[2 * HEAD_MAX_LAYERS]; /* the layers' weight and bias names */
    int n_params, n_masks, n_pieces;
    bool on_device, ce; /* ce: targets are class indices */
    int64_t in_width, outputs;
    train_state host_state; /* the loss's state on the CPU (the scale set before each run) */
    const float *features;  /* a head alone: the training set (n_all, in_width) */
    int64_t n_all;
    void *dev_features;   /* its device copy (HEAD_STEP_FEATURES_DEVICE) */
    int64_t rows, *index; /* 0..rows-1, for batches of given rows (staged, run_rows) */
    float *staged;        /* staged: the batch's rows, gathered on the host */
    int place;            /* HEAD_STEP_FEATURES_* */
    int64_t feature_h2d_bytes;
    int64_t runs;                     /* training runs (micro-batches) so far */
    double run_seconds, sums_seconds; /* their graph runs, and their gradients to the optimizer */
    bool ready;
} head_step;

/* The step graph of hg's head alone with loss l (its class or positive weights read from l each
 * run), accumulate micro-batches per step, fp16's loss scale; on og's device when og is there (m
 * the model it runs; threads: the CPU's). opt: og's parameters, among them the layers'
 * masters. */
graft_status head_step_init(head_step *hs, head_graph *hg, optim_graph *og, const optim *opt,
                            const loss_spec *l, int64_t accumulate, bool fp16, graft_model *m,
                            int threads, graft_err *e);
/* The same with the blocks b (made by blocks_init from m and `from`) below the head: one graph
 * from the frozen pieces to the loss; opt holds the blocks' masters too. */
graft_status head_step_init_blocks(head_step *hs, head_graph *hg, blocks *b, const char *from,
                                   optim_graph *og, const optim *opt, const loss_spec *l,
                                   int64_t accumulate, bool fp16, graft_model *m, int threads,
                                   graft_err *e);
void head_step_free(head_step *hs);
/* A head alone: the training set's features x (n, in_width) for the steps that follow: on a
 * device copied there once (or, when they do not fit, gathered per batch; force_host: always);
 * on the CPU read in place. x must stay valid while steps read it. */
graft_status head_step_set_data(head_step *hs, const float *x, int64_t n, bool force_host,
                                graft_err *e);
/* One micro-batch of a head alone: the rows rows[0..m) of the set's features, their targets y
 * (m labels), the dropout masks drawn from hg's RNG; the loss sums go to the state, the gradients
 * are added to og's. loss_scale: fp16's current scale (host runs; a device reads its own). */
graft_status head_step_run(head_step *hs, const int64_t *rows, const void *y, int64_t m,
                           const loss_spec *l, float loss_scale, graft_err *e);
/* The same on rows x of host memory the caller gathered: (m, in_width) features for a head
 * alone, (m, frozen row) for blocks. */
graft_status head_step_run_rows(head_step *hs, const float *x, const void *y, int64_t m,
                                const loss_spec *l, float loss_scale, graft_err *e);
/* The training state the loss writes: the host's, or a copy of the device's (a wait). */
graft_status head_step_state(head_step *hs, train_state *out, graft_err *e);
/* The loss sums of the state zeroed (an epoch's start). */
graft_status head_step_reset_sums(head_step *hs, graft_err *e);
/* logits (n, outputs) of rows x (as head_step_run_rows takes them) in evaluation mode with the
 * current weights; *logits valid until the next call. */
graft_status head_step_logits(head_step *hs, const float *x, int64_t n, const float **logits,
                              graft_err *e);

/* head_step_blocks.c: the blocks' trainable part from `from` to m's features with hg's head
 * appended (its masks as graph inputs when masks), as one graph whose parameters are
 * constants again; *logits names its output. */
graft_status head_step_blocks_graph(const head_step *hs, graft_model *m, const char *from,
                                    bool masks, ir_graph *out, int *logits, graft_err *e);

#endif

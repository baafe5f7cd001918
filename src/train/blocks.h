/* blocks.h: fine-tuning the last blocks of a model with its head (graft_train_options.
 * train_from): the trainable part as a training graph (train_graph.h) run by graph/exec, the
 * head (head.h) and loss in the pause between its forward and backward nodes, and the frozen
 * part (frozen_part.h) as the trainer's backbone. docs/training.md "Fine-tuning blocks". */
#ifndef GRAFT_TRAIN_BLOCKS_H
#define GRAFT_TRAIN_BLOCKS_H

#include "frozen_part.h"
#include "optim.h"
#include "train_exec.h"

typedef struct blocks {
    train_graph tg;  /* the trainable part with its backward pass */
    train_graph fwd; /* the same, forward only (evaluation) */
    train_exec run, eval;
    frozen_part frozen;
    int64_t feat; /* the head's input size: `to` per sample */
    int n_params;
    float **data;   /* per parameter: (numel) fp32 master weights, initially the model's */
    float **grad;   /* per parameter: (numel) gradients accumulated over micro-batches */
    int64_t *numel; /* per parameter */
    char **names;   /* per parameter: "blocks/<value>" (checkpoints, optimizer state) */
    tensor *inputs; /* per training-graph input: from, side inputs, parameters, d_to */
    tensor *pieces; /* per row piece (from, side inputs): the current batch's, n_pieces */
    int64_t batch;  /* rows the piece buffers hold */
    /* A model that runs only batches of `fixed` (m->batch.fixed; 0: any) trains in chunks of it
     * (blocks_chunked.c): per-chunk buffers, and the whole batch's features and gradient. */
    int64_t fixed;
    float *chunk;     /* (fixed, row), pinned as the rows are */
    float *all_to;    /* (all_rows, feat) */
    float *all_dto;   /* (all_rows, feat) */
    int64_t all_rows; /* rows all_to and all_dto hold */
    float *d_to;      /* (batch, feat): d(loss)/d(to), written in the pause */
    float *to_host;   /* (batch, feat): `to` copied from the device for the head */
    double lr_scale;  /* the blocks' rate over the head's (0: the same) */
    /* Resident (blocks_make_resident): the parameters are the optimizer's device buffers
     * (og's, from parameter og_first on) and each run's gradients go to og's gradient buffers on
     * the device; data and grad above are then the host's copies, current only when the
     * trainer brings them back (trainer_sync_host). */
    const struct optim_graph *og;
    int og_first;
    /* seconds spent in the training runs, by part (the log's "blocks:" line, trainer.c) */
    double sec_rows, sec_forward, sec_head, sec_backward, sec_grads, sec_eval;
    int64_t evals; /* forward-only runs (tests) */
    int64_t steps; /* forward-backward runs (tests) */
} blocks;

/* The trainable part from tensor `from` to m's one output (the features), and the frozen part
 * before it, as a model of its own. m: a cut model. precision: bf16/fp16 are emulated on the
 * CPU as the head emulates them (train_graph_options.round_to); a device runs fp32. threads:
 * the CPU's (0: default). */
graft_status blocks_init(blocks *b, graft_model *m, const char *from, graft_precision precision,
                         int threads, graft_err *e);
void blocks_free(blocks *b);

/* The parameters for an optimizer (weights of rank > 1 decay, others do not): n_params. */
int blocks_params(blocks *b, optim_param *params);
void blocks_zero_grad(blocks *b);

/* The head's step inside one run: called with `to` (n, feat) between the forward and the
 * backward; it writes d(loss)/d(to) into dto (n, feat). */
typedef graft_status (*blocks_head_fn)(void *user, const float *to, int64_t n, float *dto,
                                       graft_err *e);

/* One forward-backward run on rows (n, frozen.row): the gradients are added to grad. */
graft_status blocks_step(blocks *b, const float *rows, int64_t n, blocks_head_fn head, void *user,
                         graft_err *e);
/* The features `to` (n, feat) of rows (n, frozen.row) with the current weights; *out points into
 * the executor (valid until the next call). */
graft_status blocks_features(blocks *b, const float *rows, int64_t n, const float **out,
                             graft_err *e);
/* A buffer for `count` floats of rows (pinned when the blocks run on a GPU: uploaded at full
 * speed); NULL when out of memory. */
float *blocks_rows_alloc(blocks *b, int64_t count);
void blocks_rows_free(blocks *b, float *rows);
/* The unchunked runs (blocks.c): one training run on n rows, the head's step in the pause, or,
 * with dto (n, feat) given, that gradient and no pause; one forward-only run. */
graft_status blocks_run_training(blocks *b, const float *rows, int64_t n, blocks_head_fn head,
                                 void *user, const float *dto, graft_err *e);
graft_status blocks_run_features(blocks *b, const float *rows, int64_t n, const float **out,
                                 graft_err *e);
/* The same for a model of one batch size (blocks_chunked.c): forward-only runs over chunks of it
 * give the batch's features, the head's step gives their gradient, then one training run per
 * chunk (its forward again) adds up the weights' gradients. The last chunk repeats its last row
 * with a zero gradient, which adds nothing. */
graft_status blocks_step_chunked(blocks *b, const float *rows, int64_t n, blocks_head_fn head,
                                 void *user, graft_err *e);
graft_status blocks_features_chunked(blocks *b, const float *rows, int64_t n, const float **out,
                                     graft_err *e);
void blocks_chunks_free(blocks *b);
/* Keep the parameters on the device in og's buffers (the trainer's optimizer graph on the
 * blocks' device, og_first: the blocks' first parameter in it): the training and evaluation runs
 * read them there, and a training run adds its gradients to og's gradient buffers (any number of
 * micro-batches a step; the step zeroes them). Only for blocks that run on a device, unchunked;
 * m: the model blocks_init read (the training run is rebuilt on its device). */
graft_status blocks_make_resident(blocks *b, const struct optim_graph *og, int og_first,
                                  graft_model *m, int threads, graft_err *e);
/* The batch's pieces (`from`, then the side inputs: frozen.pieces' order) out of rows
 * (n, frozen.row) into inputs[0 .. frozen.n_pieces), valid until the next call. */
graft_status blocks_unpack_rows(blocks *b, const float *rows, int64_t n, graft_err *e);
/* Write the current weights into m's constants (m: the model blocks_init read). */
graft_status blocks_write_back(blocks *b, graft_model *m, graft_err *e);

#endif

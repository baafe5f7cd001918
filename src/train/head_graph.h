/* head_graph.h: training a head through the training graph (train_graph.h) on a CPU backend:
 * the head (head.h) as an IR graph, its forward, the loss in the executor's pause and its
 * backward in one pass, with the products on oneDNN's sgemm. Data-parallel runs and the blocks'
 * pause train a head this way (others through head_step.h, built from this graph): bf16 and fp16
 * round what they compute with by Casts there and back, dropout multiplies by masks drawn as head.c
 * draws them, and a head above trained blocks also gives d(loss)/d(features). head.c's forward and
 * backward stay as the reference the tests compare with. */
#ifndef GRAFT_TRAIN_HEAD_GRAPH_H
#define GRAFT_TRAIN_HEAD_GRAPH_H

#include "head.h"
#include "train_exec.h"

typedef struct head_graph {
    head *h;               /* the layers (weights bound, not copied) and the dropout RNG */
    ir_graph g, g_eval;    /* the head: features -> logits, for training (masks) and evaluation */
    train_graph tg, fwd;   /* g with its backward; g_eval forward only */
    train_exec run, eval;  /* on CPU backends of their own */
    tensor *inputs;        /* per training-graph input: features, masks, parameters, d_logits */
    tensor *eval_inputs;   /* per forward-graph input: features, parameters */
    head_layer **param_of; /* per parameter: its layer */
    bool *param_is_bias;   /* per parameter: the layer's bias (else its weight) */
    int *mask_layer;       /* per side input of tg: the layer whose dropout mask it is */
    float **masks;         /* per side input: (batch, that layer's out) 0 or 1/(1 - dropout) */
    float *dlogits;        /* (batch, outputs), written in the pause */
    int64_t batch, outputs;
    bool ready;
} head_graph;

/* The graph of h (its layers' weights are bound, not copied: the optimizer's updates are seen).
 * grad_features: steps also give d(loss)/d(features) (the blocks below need it). threads: the
 * CPU's (0: default). */
graft_status head_graph_init(head_graph *hg, head *h, bool grad_features, int threads,
                             graft_err *e);
void head_graph_free(head_graph *hg);

/* The loss in the pause: logits (n, outputs) in, d(loss)/d(logits) (n, outputs) out. */
typedef graft_status (*head_graph_loss_fn)(void *user, const float *logits, int64_t n,
                                           float *dlogits, graft_err *e);
/* One training forward-backward pass on features x (n, in), dropout masks drawn: the layers'
 * gradients are added to their dw / db (as head_backward does); dx (n, in), when not NULL,
 * receives d(loss)/d(x) (the graph must have been made with grad_features). */
graft_status head_graph_step(head_graph *hg, const float *x, int64_t n, head_graph_loss_fn loss,
                             void *user, float *dx, graft_err *e);
/* The dropout masks of a training step of n rows into hg->masks (per side input of tg), drawn as
 * head_graph_step draws them. */
graft_status head_graph_draw_masks(head_graph *hg, int64_t n, graft_err *e);
/* logits (n, outputs) of features x (n, in), no dropout; *logits valid until the next call. */
graft_status head_graph_logits(head_graph *hg, const float *x, int64_t n, const float **logits,
                               graft_err *e);

#endif

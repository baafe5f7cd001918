/* head_graph.h: head-only training through the training graph (train_graph.h) on a CPU backend:
 * the head (head.h) as an IR graph, its forward, the loss in the executor's pause and its
 * backward in one pass, with the products on oneDNN's sgemm. For fp32 heads without dropout;
 * head.c's reference path keeps the rest (bf16/fp16 emulation, dropout masks). */
#ifndef GRAFT_TRAIN_HEAD_GRAPH_H
#define GRAFT_TRAIN_HEAD_GRAPH_H

#include "head.h"
#include "train_exec.h"

typedef struct head_graph {
    ir_graph g;            /* the head: features -> logits */
    train_graph tg, fwd;   /* with its backward; forward only */
    train_exec run, eval;  /* on CPU backends of their own */
    tensor *inputs;        /* per training-graph input: features, parameters, d_logits */
    tensor *eval_inputs;   /* per forward-graph input: features, parameters */
    head_layer **param_of; /* per parameter: its layer */
    bool *param_is_bias;   /* per parameter: the layer's bias (else its weight) */
    float *dlogits;        /* (batch, outputs), written in the pause */
    int64_t batch, outputs;
    bool ready;
} head_graph;

/* Whether this head trains through the graph (fp32, no dropout). */
bool head_graph_applies(const head *h);
/* The graph of h (its layers' weights are bound, not copied: the optimizer's updates are seen).
 * threads: the CPU's (0: default). */
graft_status head_graph_init(head_graph *hg, head *h, int threads, graft_err *e);
void head_graph_free(head_graph *hg);

/* The loss in the pause: logits (n, outputs) in, d(loss)/d(logits) (n, outputs) out. */
typedef graft_status (*head_graph_loss_fn)(void *user, const float *logits, int64_t n,
                                           float *dlogits, graft_err *e);
/* One forward-backward pass on features x (n, in): the layers' gradients are added to their
 * dw / db (as head_backward does). */
graft_status head_graph_step(head_graph *hg, const float *x, int64_t n, head_graph_loss_fn loss,
                             void *user, graft_err *e);
/* logits (n, outputs) of features x (n, in); *logits valid until the next call. */
graft_status head_graph_logits(head_graph *hg, const float *x, int64_t n, const float **logits,
                               graft_err *e);

#endif

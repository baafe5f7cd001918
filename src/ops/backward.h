/* backward.h: the Backward node (domain ai.graft.training): one forward node's backward rule as a
 * node of a training graph (src/train/train_graph.c builds them; docs/training.md).
 *
 * Layout. Attributes: `op` (string, the forward op type), `fwd_opset` (int, the forward node's
 * opset), `n_fwd_in`, `n_fwd_out` (ints), then copies of the forward node's own attributes.
 * Inputs (n_fwd_in + 2 n_fwd_out): the forward node's inputs (-1 where omitted), its outputs
 * (-1 where omitted), then one gradient per forward output (-1 where no gradient flows: zero).
 * Outputs (n_fwd_in): d(loss)/d(forward input k), with input k's dtype and shape (-1 where that
 * gradient is not wanted). The kernel applies grad_find(op) to a stand-in forward node carrying
 * op, fwd_opset and the forward's attributes. A loaded model never holds this op: the loader
 * rejects it (graph_resolve_ops), whatever the node's domain. */
#ifndef GRAFT_OPS_BACKWARD_H
#define GRAFT_OPS_BACKWARD_H

#include "op.h"

#define BACKWARD_DOMAIN "ai.graft.training"

/* Whether an attribute is one the Backward node adds (op, fwd_opset, n_fwd_in, n_fwd_out). */
bool backward_own_attr(const char *name);

/* The forward op and arity a Backward node describes, checked against the node's own arity. */
typedef struct backward_layout {
    const char *op;
    int fwd_opset;
    int n_fwd_in, n_fwd_out;
} backward_layout;
graft_status backward_read_layout(const ir_node *node, int n_in, int n_out, backward_layout *l,
                                  graft_err *e);

#endif

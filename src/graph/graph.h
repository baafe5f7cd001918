/* graph.h: load-time work on the IR (op resolution, shape inference, passes) and the memory
 * planner used by the executor. */
#ifndef GRAFT_GRAPH_GRAPH_H
#define GRAFT_GRAPH_GRAPH_H

#include "../ops/op.h"

/* Bind each node to its op_def; unknown ops, domains and opsets are GRAFT_E_UNSUPPORTED errors
 * naming the node. */
graft_status graph_resolve_ops(ir_graph *g, graft_err *e);

/* Limits (docs/engine.md "Limits"). A shape inference computes for any value has at most
 * GRAFT_MAX_DIMS axes and GRAPH_MAX_ELEMENTS elements (an error naming the node otherwise); a
 * constant folded at load has at most FOLD_MAX_ELEMENTS elements and FOLD_MAX_BYTES bytes (a
 * larger one is left for run time, never allocated at load). */
#define GRAPH_MAX_ELEMENTS OP_MAX_ELEMENTS
#define FOLD_MAX_ELEMENTS ((int64_t)64 << 20)
#define FOLD_MAX_BYTES ((int64_t)256 << 20)

/* Fill value_info for node input k from the IR value (with its data when constant). */
void graph_value_info(const ir_graph *g, int value, value_info *vi);
/* Infer every node's outputs in order, merging with the shapes the model declares. */
graft_status graph_infer_shapes(ir_graph *g, graft_err *e);

/* Passes. Each returns the number of nodes it changed in *changed (may be NULL). */
graft_status pass_fold_constants(ir_graph *g, int *changed, graft_err *e);
graft_status pass_fold_batchnorm(ir_graph *g, int *changed, graft_err *e);
/* A constant zero Pad of the spatial axes read only by a Conv becomes the Conv's pads. */
graft_status pass_fold_pad(ir_graph *g, int *changed, graft_err *e);
graft_status pass_remove_dead(ir_graph *g, int *changed, graft_err *e);
/* All of them, in order, to a fixed point; then toposort and re-infer. */
graft_status graph_optimize(ir_graph *g, graft_err *e);
/* What graph_optimize_ex leaves alone. */
typedef struct graph_opt_options {
    bool keep_batchnorm; /* BatchNormalization stays a node (for training its scale and bias) */
} graph_opt_options;
/* graph_optimize with options (NULL: graph_optimize's defaults, every pass). */
graft_status graph_optimize_ex(ir_graph *g, const graph_opt_options *o, graft_err *e);

/* Assign each buffer an offset in one arena so that buffers alive at the same time never
 * overlap. Buffer i lives from step first[i] to step last[i] inclusive. Offsets are aligned to
 * 64 bytes. Returns the arena size in *arena_bytes. */
graft_status plan_memory(int n, const int64_t *bytes, const int *first, const int *last,
                         int64_t *offsets, int64_t *arena_bytes, graft_err *e);

/* Estimated floating-point operations of one node given its concrete inputs and outputs. */
double node_flops(const ir_node *node, const tensor *const *in, int n_in, const tensor *const *out,
                  int n_out);

#endif

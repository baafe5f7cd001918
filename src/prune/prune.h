/* prune.h: the pruning methods over the graph IR (one file each) and what they share. */
#ifndef GRAFT_PRUNE_PRUNE_H
#define GRAFT_PRUNE_PRUNE_H

#include "../graph/ir.h"
#include "graft.h"

/* A weight tensor pruning may touch: a constant read as the weight input of a Conv (input 1),
 * Gemm (input 1) or MatMul (input 1, 2-D constant). */
bool prune_is_weight(const ir_graph *g, int node, int input);
/* Whether the options leave this node dense: excluded by name or op type, or an end layer
 * (the first Conv, the last Gemm/MatMul) when keep_ends is set. */
bool prune_excluded(const ir_graph *g, int node, const graft_prune_options *o);
/* Weight counts (Conv/Gemm/MatMul constants) and their non-zeros. */
void prune_count(const ir_graph *g, int64_t *params, int64_t *nonzero);

/* The methods. Each changes g in place (structured methods rewrite it: the caller compacts,
 * re-infers shapes and rebuilds the executor) and adds to r->units_removed. */
graft_status prune_magnitude(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                             graft_err *e);
graft_status prune_2_4(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                       graft_err *e);
graft_status prune_channels(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                            graft_err *e);
graft_status prune_heads(ir_graph *g, const graft_prune_options *o, graft_prune_report *r,
                         graft_err *e);

#endif

/* build.h: adding constants and nodes to a loaded graph (the cut's pooling, an attached head). */
#ifndef GRAFT_GRAPH_BUILD_H
#define GRAFT_GRAPH_BUILD_H

#include "../ops/op.h"

/* A new value named `name`, or name_1, name_2... when the graph already uses the name. */
graft_status graph_add_value(ir_graph *g, const char *name, int *out, graft_err *e);
/* A new graph input (appended to g->inputs) of dtype and shape (ndim, dims; -1: known at run
 * time), named as graph_add_value names it. */
graft_status graph_add_input(ir_graph *g, const char *name, graft_dtype dtype, int ndim,
                             const int64_t *dims, int *out, graft_err *e);
/* A new constant holding `data` (moved in: the caller's tensor is emptied). */
graft_status graph_add_const(ir_graph *g, const char *name, tensor *data, int *out, graft_err *e);
/* Append node `op` (of `opset`) reading `ins` and writing a new value named `name` (*out), with
 * up to one int attribute (attr NULL: none). The node's shapes are inferred by the caller's next
 * graph_infer_shapes. */
graft_status graph_add_node(ir_graph *g, const char *op, int opset, const int *ins, int n_in,
                            const char *name, const char *attr, int64_t attr_value, int *out,
                            graft_err *e);

#endif

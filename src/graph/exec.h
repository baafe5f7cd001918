/* exec.h: the executor: runs a planned graph on a backend, node by node, with run-time shape
 * inference, liveness-based freeing and a cached static memory plan per input-shape signature. */
#ifndef GRAFT_GRAPH_EXEC_H
#define GRAFT_GRAPH_EXEC_H

#include "../core/backend.h"
#include "graph.h"

typedef struct exec_plan {
    bool valid;
    int64_t *signature; /* per graph input: ndim then dims */
    int signature_len;
    int64_t *offsets; /* per value */
    int64_t *bytes;   /* per value; -1 for values the arena does not hold */
    int64_t arena_bytes;
    void *arena;
} exec_plan;

typedef struct executor {
    ir_graph *g;
    graft_backend *be;
    int n_values;         /* values when the executor was made (the graph may grow later) */
    tensor *vals;         /* per value, the run-time tensor */
    unsigned char *owned; /* per value: 0 borrowed, 1 malloc'ed, 2 in the arena */
    int *last_use; /* per value: index of the last node reading it (n_nodes: a graph output) */
    int64_t *seen_bytes;
    exec_plan plan;
    bool count_flops;
    double flops;
    graft_run_stats stats;
} executor;

graft_status exec_init(executor *x, ir_graph *g, graft_backend *be, graft_err *e);
void exec_free(executor *x);
/* inputs[i] binds g->inputs[i] (borrowed). On success the graph outputs are in
 * x->vals[g->outputs[i]], valid until the next run. */
graft_status exec_run(executor *x, const tensor *inputs, graft_err *e);

#endif

/* model.h: the graft_model handle: the optimized graph, its backend and executor. */
#ifndef GRAFT_GRAPH_MODEL_H
#define GRAFT_GRAPH_MODEL_H

#include "../core/context.h"
#include "exec.h"

typedef struct op_count_entry {
    const char *op;
    int64_t count;
} op_count_entry;

struct graft_model {
    graft_ctx *ctx;
    ir_graph g;
    graft_backend backend;
    bool have_backend;
    executor exec;
    op_count_entry *op_counts; /* histogram of the original model's op types */
    int n_op_counts;
    int64_t original_node_count;
    graft_model_summary summary;
    bool summary_ready;
};

/* Check caller tensors against the declared inputs and order them as g->inputs. */
graft_status model_bind_inputs(const graft_model *m, const graft_named_tensor *inputs, int n_inputs,
                               tensor *bound, graft_err *e);

/* Make value the model's only output: drop what no longer feeds it and inputs nothing reads,
 * re-run the passes and rebuild the executor (node indices change, so kernel state goes). */
graft_status model_set_output(graft_model *m, int value, graft_err *e);

#endif

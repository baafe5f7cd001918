/* batch.h: the batch a model's graph accepts (found at load) and runs of any batch in chunks of
 * it, the outputs concatenated. */
#ifndef GRAFT_GRAPH_BATCH_H
#define GRAFT_GRAPH_BATCH_H

#include "../core/tensor.h"

typedef struct model_batch {
    int64_t fixed;    /* the only batch the graph runs; 0: any */
    int64_t declared; /* the inputs' declared leading dim at load (0: symbolic) */
    char why[400];    /* why it is fixed, or why a declared batch was let go ("" if neither) */
    unsigned char *relaxed; /* per graph output at load: its declared dims[0] was `declared` */
    int n_relaxed;
    /* The last run's outputs when it ran in chunks (chunked), one per graph output. */
    bool chunked;
    int n_out;
    tensor *out;
    size_t *out_cap;
    void **pad; /* per graph input: a chunk's rows copied and padded to `fixed` */
    size_t *pad_cap;
    int n_pad;
} model_batch;

struct graft_model;

/* The load-time passes (graph_optimize), and the batch the graph takes. When every input
 * declares the same leading dim, the passes run with it unknown (so that constant folding does
 * not bake it into Shape results); then shape inference at a probe batch decides. A declared
 * batch that nothing pins stays unknown ("batch"); a pinned one is put back (or, for a symbolic
 * batch that a node pins, set to the pinned value) and recorded in m->batch.fixed with the node
 * that pins it, and the passes run again. */
graft_status model_batch_optimize(struct graft_model *m, graft_err *e);
/* Run bound inputs (ordered as g->inputs): directly when the batch fits, else in chunks of
 * m->batch.fixed (the last padded by repeating its last row) with the outputs concatenated. */
graft_status model_batch_run(struct graft_model *m, const tensor *bound, graft_err *e);
void model_batch_free(model_batch *b);

#endif

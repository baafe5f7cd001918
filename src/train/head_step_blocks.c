/* head_step_blocks.c: the trainable blocks and the head as one model graph, the source of the
 * step graph when blocks train (head_step.h). */
#include <stdlib.h>
#include <string.h>

#include "../graph/graph.h"
#include "head_step.h"

/* Value v of g, a graph input, a constant again holding data (moved in). */
static graft_status input_to_const(ir_graph *g, int v, tensor *data, graft_err *e) {
    int k = 0;
    while (k < g->n_inputs && g->inputs[k] != v) k++;
    if (k == g->n_inputs) {
        tensor_release(data);
        return err_set(e, GRAFT_E_INTERNAL, "blocks graph: '%s' is not an input",
                       g->values[v].name);
    }
    memmove(g->inputs + k, g->inputs + k + 1, sizeof(int) * (size_t)(g->n_inputs - k - 1));
    g->n_inputs--;
    ir_value *x = &g->values[v];
    x->is_graph_input = false;
    x->is_const = true;
    x->data = *data;
    memset(data, 0, sizeof *data);
    return GRAFT_OK;
}

/* The trainable part's forward, its parameters constants holding the model's values. */
static graft_status forward_part(graft_model *m, const char *from, ir_graph *out, int *to,
                                 graft_err *e) {
    const ir_graph *mg = &m->g;
    train_graph part;
    train_graph_options fo = {.forward_only = true};
    TRY(train_graph_build(mg, from, mg->values[mg->outputs[0]].name, &fo, &part, e));
    *out = part.g;
    memset(&part.g, 0, sizeof part.g);
    *to = part.to;
    graft_status st = GRAFT_OK;
    for (int i = 0; i < part.n_params && st == GRAFT_OK; i++) {
        tensor data;
        st = tensor_clone(&data, &mg->values[part.model_params[i]].data, e);
        if (st == GRAFT_OK) st = input_to_const(out, part.params[i], &data, e);
    }
    train_graph_free(&part);
    return st;
}

graft_status head_step_blocks_graph(const head_step *hs, graft_model *m, const char *from,
                                    bool masks, ir_graph *out, int *logits, graft_err *e) {
    int to;
    ir_graph_init(out);
    TRY(forward_part(m, from, out, &to, e));
    TRY(head_append_masked(hs->hg->h, out, to, "logits", masks, logits, e));
    out->values[to].is_graph_output = false;
    out->values[*logits].is_graph_output = true;
    out->outputs[0] = *logits;
    out->n_outputs = 1;
    ir_link_producers(out);
    return graph_infer_shapes(out, e);
}

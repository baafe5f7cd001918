/* exec_graph.c: recording the planned forward on the device once (a CUDA graph) and replaying
 * it for every later run with the same input shapes: one launch instead of one per node. */
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"

void exec_disable_graphs(executor *x) {
    exec_graph_free(x);
    x->graph_off = true;
}

void exec_graph_free(executor *x) {
    if (x->graph && x->device) x->device->graph_free(x->device->impl, x->graph);
    x->graph = NULL;
    free(x->graph_out);
    x->graph_out = NULL;
    if (!x->copy) return;
    for (int i = 0; i < x->g->n_inputs; i++) { /* staged inputs */
        int v = x->g->inputs[i];
        if (v < x->n_values && x->copy_kept[v]) exec_free_copy(x, v, true);
    }
}

bool exec_graph_can_record(const executor *x, bool planned) {
    return x->device && x->device->capture_begin && planned && x->graph_safe && !x->graph_off &&
           x->last_clean && !x->graph && x->plan.valid && !x->count_flops && !x->profile.on;
}

graft_status exec_graph_stage_inputs(executor *x, const tensor *inputs, graft_err *e) {
    const ir_graph *g = x->g;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        x->vals[v] = inputs[i];
        if (x->copy[v] && x->copy_kept[v]) {
            size_t bytes = (size_t)tensor_nbytes(&inputs[i]);
            TRY(x->device->copy_to_device(x->device->impl, x->copy[v], inputs[i].data, bytes, e));
            continue;
        }
        tensor view;
        TRY(exec_value_at(x, v, true, &view, e));
        x->copy_kept[v] = 1; /* the graph reads this buffer on every replay */
    }
    return GRAFT_OK;
}

graft_status exec_graph_keep(executor *x, void *graph, graft_err *e) {
    const ir_graph *g = x->g;
    x->graph_out = calloc((size_t)g->n_outputs + 1, sizeof *x->graph_out);
    if (!x->graph_out) {
        x->device->graph_free(x->device->impl, graph);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory keeping a CUDA graph");
    }
    bool all_on_device = true;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        x->graph_out[i] = x->vals[v];
        all_on_device = all_on_device && x->on_dev[v] && x->owned[v] == 2;
    }
    if (!all_on_device) { /* an output the host computes: replays would not make it */
        x->device->graph_free(x->device->impl, graph);
        exec_graph_free(x);
        x->graph_off = true;
        return GRAFT_OK;
    }
    x->graph = graph;
    return GRAFT_OK;
}

graft_status exec_graph_replay(executor *x, const tensor *inputs, graft_err *e) {
    const ir_graph *g = x->g;
    TRY(exec_graph_stage_inputs(x, inputs, e));
    TRY(x->device->replay(x->device->impl, x->graph, e));
    TRY(x->device->synchronize(x->device->impl, e));
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        x->vals[v] = x->graph_out[i];
        x->on_dev[v] = 1;
        x->owned[v] = 2;
    }
    return exec_outputs_to_host(x, e);
}

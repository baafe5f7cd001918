/* exec_graph.c: recording the planned forward on the device once (a CUDA graph) and replaying
 * it for every later run with the same input shapes: one launch instead of one per node. */
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"

void exec_disable_graphs(executor *x) {
    exec_graphs_free_all(x);
    x->graph_off = true;
}

void exec_enable_graphs(executor *x) {
    x->graph_off = false;
}

void exec_plan_graph_free(executor *x, exec_plan *p) {
    if (p->graph && x->device) x->device->graph_free(x->device->impl, p->graph);
    p->graph = NULL;
    free(p->graph_out);
    p->graph_out = NULL;
    free(p->in_place);
    p->in_place = NULL;
    for (int i = 0; p->staged && i < x->g->n_inputs; i++)
        if (p->staged[i]) exec_buffer_free(x, true, p->staged[i]);
    free(p->staged);
    free(p->staged_bytes);
    p->staged = NULL;
    p->staged_bytes = NULL;
    for (int i = 0; p->input_copy && i < x->g->n_inputs; i++) /* a cached plan's */
        if (p->input_copy[i]) exec_buffer_free(x, true, p->input_copy[i]);
    free(p->input_copy);
    p->input_copy = NULL;
    if (p != &x->plan || !x->copy) return;
    for (int i = 0; i < x->g->n_inputs; i++) { /* the current plan's staged host inputs */
        int v = x->g->inputs[i];
        if (v < x->n_values && x->copy_kept[v]) exec_free_copy(x, v, true);
    }
}

void exec_graph_free(executor *x) {
    exec_plan_graph_free(x, &x->plan);
}

bool exec_graph_can_record(const executor *x, bool planned) {
    return x->device && x->device->capture_begin && planned && x->graph_safe && !x->graph_off &&
           x->last_clean && !x->plan.graph && x->plan.valid && !x->count_flops && !x->profile.on &&
           !x->pause_fn;
}

/* A device input into the buffer the recording reads (the caller's pointer may change from run
 * to run): a copy on the device, in stream order before the replay. */
static graft_status stage_device_input(executor *x, int i, const tensor *in, graft_err *e) {
    const ir_graph *g = x->g;
    exec_plan *p = &x->plan;
    if (!p->staged) {
        p->staged = calloc((size_t)g->n_inputs + 1, sizeof *p->staged);
        p->staged_bytes = calloc((size_t)g->n_inputs + 1, sizeof *p->staged_bytes);
        if (!p->staged || !p->staged_bytes)
            return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory staging inputs");
    }
    size_t bytes = (size_t)tensor_nbytes(in);
    if (!p->staged[i]) {
        TRY(exec_buffer_alloc(x, true, bytes ? bytes : 1, &p->staged[i], e));
        p->staged_bytes[i] = bytes;
    }
    if (p->staged_bytes[i] != bytes)
        return err_set(e, GRAFT_E_INTERNAL, "a recorded input changed size");
    if (bytes) TRY(x->device->copy_on_device(x->device->impl, p->staged[i], in->data, bytes, e));
    int v = g->inputs[i];
    x->vals[v] = *in;
    x->vals[v].data = p->staged[i];
    x->on_dev[v] = 1;
    return GRAFT_OK;
}

graft_status exec_graph_stage_inputs(executor *x, const tensor *inputs, graft_err *e) {
    const ir_graph *g = x->g;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        if (x->inputs_on_device) {
            TRY(stage_device_input(x, i, &inputs[i], e));
            continue;
        }
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

/* Input i is a device input the recording reads where the caller keeps it (not staged). */
static bool read_in_place(const executor *x, int i) {
    return !x->inputs_on_device && x->input_on_device && x->input_on_device[i];
}

bool exec_graph_inputs_in_place(const executor *x, const tensor *inputs) {
    const exec_plan *p = &x->plan;
    if (!p->in_place) return false;
    for (int i = 0; i < x->g->n_inputs; i++) /* the same buffers, and flagged as they were */
        if (p->in_place[i] != (read_in_place(x, i) ? inputs[i].data : NULL)) return false;
    return true;
}

graft_status exec_graph_keep(executor *x, void *graph, graft_err *e) {
    const ir_graph *g = x->g;
    exec_plan *p = &x->plan;
    p->graph_out = calloc((size_t)g->n_outputs + 1, sizeof *p->graph_out);
    p->in_place = calloc((size_t)g->n_inputs + 1, sizeof *p->in_place);
    if (!p->graph_out || !p->in_place) {
        free(p->graph_out), free(p->in_place);
        p->graph_out = NULL, p->in_place = NULL;
        x->device->graph_free(x->device->impl, graph);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory keeping a CUDA graph");
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (read_in_place(x, i)) p->in_place[i] = x->vals[g->inputs[i]].data;
    bool all_on_device = true;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        p->graph_out[i] = x->vals[v];
        all_on_device = all_on_device && x->on_dev[v] && x->owned[v] == 2;
    }
    if (!all_on_device) { /* an output the host computes: replays would not make it */
        x->device->graph_free(x->device->impl, graph);
        exec_graph_free(x);
        x->graph_off = true;
        return GRAFT_OK;
    }
    p->graph = graph;
    return GRAFT_OK;
}

graft_status exec_graph_replay(executor *x, const tensor *inputs, graft_err *e) {
    const ir_graph *g = x->g;
    TRY(exec_graph_stage_inputs(x, inputs, e));
    TRY(x->device->replay(x->device->impl, x->plan.graph, e));
    TRY(x->device->synchronize(x->device->impl, e));
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        x->vals[v] = x->plan.graph_out[i];
        x->on_dev[v] = 1;
        x->owned[v] = 2;
    }
    return exec_outputs_place(x, e);
}

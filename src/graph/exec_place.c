/* exec_place.c: where each node runs when a device backend is present, and moving tensors
 * between host and device memory for the nodes that read them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec_internal.h"

/* Fused groups the device backend wants, or without a device the host backend (every node on
 * its own without one). With a device, the host backend is told it runs no node of a group. */
static graft_status plan_groups(executor *x, graft_err *e) {
    const ir_graph *g = x->g;
    free(x->group_end);
    x->group_end = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    if (!x->group_end) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory placing nodes");
    for (int i = 0; i < g->n_nodes; i++) x->group_end[i] = i;
    graft_backend *be = x->device ? x->device : x->be;
    if (x->device && x->be->plan_groups) {
        unsigned char *none = calloc((size_t)g->n_nodes + 1, 1);
        if (!none) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory placing nodes");
        x->be->plan_groups(x->be->impl, g, none, NULL, x->group_end); /* drops earlier ones */
        free(none);
    }
    if (!be->plan_groups) return GRAFT_OK;
    /* the nodes the planning backend runs: the device's, or every node on the host */
    unsigned char *on_be = x->node_on_dev;
    if (!x->device) {
        on_be = malloc((size_t)g->n_nodes + 1);
        if (!on_be) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory placing nodes");
        memset(on_be, 1, (size_t)g->n_nodes + 1);
    }
    int *readers = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!readers) {
        if (on_be != x->node_on_dev) free(on_be);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory placing nodes");
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (g->nodes[i].inputs[k] >= 0) readers[g->nodes[i].inputs[k]]++;
    for (int i = 0; i < g->n_outputs; i++) readers[g->outputs[i]]++;
    be->plan_groups(be->impl, g, on_be, readers, x->group_end);
    if (on_be != x->node_on_dev) free(on_be);
    free(readers);
    return GRAFT_OK;
}

/* A node runs on the host when the device lacks its op, or when what it computes is read as a
 * shape, axes or bound (op_input_on_host): such chains (Shape -> Gather -> Concat -> Reshape)
 * stay on the host whole, so no small tensor crosses to the device and back. */
graft_status exec_place_nodes(executor *x, graft_err *e) {
    const ir_graph *g = x->g;
    free(x->node_on_dev);
    free(x->node_fallback);
    x->node_on_dev = calloc((size_t)g->n_nodes + 1, 1);
    x->node_fallback = calloc((size_t)g->n_nodes + 1, 1);
    if (!x->node_on_dev || !x->node_fallback)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory placing nodes");
    x->n_fallback_nodes = 0;
    if (!x->device) return plan_groups(x, e);
    unsigned char *host_needed = calloc((size_t)g->n_values + 1, 1);
    if (!host_needed) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory placing nodes");
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] >= 0 && node_input_on_host(n, k)) host_needed[n->inputs[k]] = 1;
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ir_node *n = &g->nodes[i];
        bool supported = x->device->supports(x->device->impl, n);
        /* Shape whose answer feeds only device nodes runs there (a model reading the sequence
         * length as data, e.g. Hugging Face's exports): the host would hand the device a value
         * in the middle of a recording. */
        bool on_host_op =
            op_runs_on_host(n->op_type) && !(supported && !strcmp(n->op_type, "Shape"));
        bool shape_chain = on_host_op;
        for (int k = 0; k < n->n_out; k++)
            if (n->outputs[k] >= 0 && host_needed[n->outputs[k]]) shape_chain = true;
        x->node_on_dev[i] = supported && !shape_chain;
        if (!supported && !shape_chain) {
            x->n_fallback_nodes++;
            x->node_fallback[i] = 1;
        }
        if (!shape_chain) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->inputs[k] >= 0 && !op_input_data_unused(n->op_type, k))
                host_needed[n->inputs[k]] = 1;
    }
    /* A recording can replay the forward when every host node only computes shapes from host
     * data: then no device node reads what the host computed, except at host positions. */
    x->graph_safe = x->n_fallback_nodes == 0;
    for (int i = 0; i < g->n_nodes && !x->graph_safe; i++)
        if (x->node_fallback[i])
            snprintf(x->unsafe_why, sizeof x->unsafe_why, "node '%s' (%s) runs on the CPU",
                     g->nodes[i].name, g->nodes[i].op_type);
    /* A graph input read as a value (a shape, axes) is baked into the recording: its values
     * are not part of the plan's signature, so such a model is not recorded. */
    for (int i = 0; i < g->n_inputs && x->graph_safe; i++)
        if (host_needed[g->inputs[i]]) {
            x->graph_safe = false;
            snprintf(x->unsafe_why, sizeof x->unsafe_why, "input '%s' is read as a value",
                     g->values[g->inputs[i]].name);
        }
    for (int i = 0; i < g->n_nodes && x->graph_safe; i++) {
        const ir_node *n = &g->nodes[i];
        if (!x->node_on_dev[i]) continue;
        for (int k = 0; k < n->n_in && x->graph_safe; k++) {
            int v = n->inputs[k];
            if (v < 0 || node_input_on_host(n, k)) continue;
            int p = g->values[v].producer;
            if (p < 0 || x->node_on_dev[p]) continue;
            x->graph_safe = false;
            snprintf(x->unsafe_why, sizeof x->unsafe_why,
                     "node '%s' (%s) reads '%s', which node '%s' (%s) computes on the CPU", n->name,
                     n->op_type, g->values[v].name, g->nodes[p].name, g->nodes[p].op_type);
        }
    }
    free(host_needed);
    return plan_groups(x, e);
}

graft_status exec_buffer_alloc(executor *x, bool dev, size_t bytes, void **out, graft_err *e) {
    if (x->max_buffer_bytes && bytes > x->max_buffer_bytes)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY,
                       "a buffer of %zu bytes is over this run's limit of %zu bytes", bytes,
                       x->max_buffer_bytes);
    if (dev) return x->device->alloc(x->device->impl, bytes, out, e);
    *out = host_alloc_aligned(bytes);
    if (!*out)
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of host memory allocating %zu bytes", bytes);
    if (x->poison_outputs) memset(*out, 0xFF, bytes);
    return GRAFT_OK;
}

void exec_buffer_free(executor *x, bool dev, void *p) {
    if (!p) return;
    if (dev)
        x->device->free(x->device->impl, p);
    else
        free(p);
}

void exec_free_copy(executor *x, int v, bool kept_too) {
    if (!x->copy[v] || (x->copy_kept[v] && !kept_too)) return;
    exec_buffer_free(x, !x->on_dev[v], x->copy[v]);
    x->copy[v] = NULL;
    x->copy_kept[v] = 0;
}

void exec_drop_device_copies(executor *x) {
    if (!x || !x->copy) return;
    exec_graphs_free_all(x); /* recordings read the copies */
    for (int v = 0; v < x->n_values; v++)
        if (x->copy_kept[v]) exec_free_copy(x, v, true);
}

/* A view of value v with its data in the wanted place, copying it there once per run (once for
 * good for a constant). */
graft_status exec_value_at(executor *x, int v, bool dev, tensor *view, graft_err *e) {
    *view = x->vals[v];
    if ((bool)x->on_dev[v] == dev) return GRAFT_OK;
    if (!x->copy[v]) {
        size_t bytes = (size_t)tensor_nbytes(&x->vals[v]);
        void *p = NULL;
        TRY(exec_buffer_alloc(x, dev, bytes, &p, e));
        graft_status st =
            !bytes ? GRAFT_OK
            : dev  ? x->device->copy_to_device(x->device->impl, p, x->vals[v].data, bytes, e)
                   : x->device->copy_to_host(x->device->impl, p, x->vals[v].data, bytes, e);
        if (st != GRAFT_OK) {
            exec_buffer_free(x, dev, p);
            return st;
        }
        x->copy[v] = p;
        x->copy_kept[v] = x->g->values[v].is_const;
    }
    view->data = x->copy[v];
    return GRAFT_OK;
}

/* Output i's kept host buffer, at least `bytes` large (pinned when the executor asks). */
static graft_status grow_out_host(executor *x, int i, size_t bytes, graft_err *e) {
    bool pin = x->pin_outputs && x->device->host_alloc && x->device->host_free;
    void *grown = NULL;
    if (pin) {
        x->device->host_free(x->out_host[i]);
        x->out_host[i] = NULL;
        x->out_host_bytes[i] = 0;
        TRY(x->device->host_alloc(x->device->impl, bytes, &grown, e));
        x->out_host_pinned = true;
    } else {
        grown = realloc(x->out_host[i], bytes ? bytes : 1);
        if (!grown)
            return err_set(e, GRAFT_E_OUT_OF_MEMORY,
                           "out of host memory for output '%s' (%zu bytes)",
                           x->g->values[x->g->outputs[i]].name, bytes);
    }
    x->out_host[i] = grown;
    x->out_host_bytes[i] = bytes;
    return GRAFT_OK;
}

/* Graph outputs computed on the device come back into host buffers the executor keeps from run
 * to run (outputs are valid until the next run): no allocation, zeroing or page faults per run. */
graft_status exec_outputs_to_host(executor *x, graft_err *e) {
    const ir_graph *g = x->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (!x->on_dev[v] || (x->output_on_device && x->output_on_device[i])) continue;
        if (i >= EXEC_MAX_OUTPUTS) { /* beyond the kept buffers: a fresh one */
            tensor host;
            TRY(exec_value_at(x, v, false, &host, e));
            exec_free_primary(x, v);
            x->vals[v] = host;
            x->on_dev[v] = 0;
            x->owned[v] = 1;
            x->copy[v] = NULL;
            continue;
        }
        size_t bytes = (size_t)tensor_nbytes(&x->vals[v]);
        if (x->out_host_bytes[i] < bytes) TRY(grow_out_host(x, i, bytes, e));
        TRY(x->device->copy_to_host(x->device->impl, x->out_host[i], x->vals[v].data, bytes, e));
        exec_free_copy(x, v, false);
        exec_free_primary(x, v);
        x->vals[v].data = x->out_host[i];
        x->on_dev[v] = 0;
        x->owned[v] = 3;
    }
    return GRAFT_OK;
}

graft_status exec_outputs_to_device(executor *x, graft_err *e) {
    const ir_graph *g = x->g;
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (x->on_dev[v] && x->owned[v] != 0) continue; /* computed there */
        /* On the host (a CPU node's, a constant), or the caller's own device input. */
        size_t bytes = (size_t)tensor_nbytes(&x->vals[v]);
        void *p = NULL;
        TRY(exec_buffer_alloc(x, true, bytes ? bytes : 1, &p, e));
        graft_status st =
            !bytes ? GRAFT_OK
            : x->on_dev[v]
                ? x->device->copy_on_device(x->device->impl, p, x->vals[v].data, bytes, e)
                : x->device->copy_to_device(x->device->impl, p, x->vals[v].data, bytes, e);
        if (st == GRAFT_OK) st = x->device->synchronize(x->device->impl, e);
        if (st != GRAFT_OK) {
            exec_buffer_free(x, true, p);
            return st;
        }
        exec_free_copy(x, v, false);
        exec_free_primary(x, v);
        x->vals[v].data = p;
        x->on_dev[v] = 1;
        x->owned[v] = 1;
    }
    return GRAFT_OK;
}

graft_status exec_outputs_place(executor *x, graft_err *e) {
    if (x->device && x->outputs_on_device) return exec_outputs_to_device(x, e);
    return exec_outputs_to_host(x, e);
}

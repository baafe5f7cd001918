/* build.c: adding constants and nodes to a loaded graph, with names kept unique. */
#include "build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

graft_status graph_add_value(ir_graph *g, const char *name, int *out, graft_err *e) {
    /* Sized for the whole name and any suffix: a truncated name could never become unique. */
    size_t size = strlen(name) + 16;
    char *unique = malloc(size);
    if (!unique) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory naming '%s'", name);
    snprintf(unique, size, "%s", name);
    for (int i = 1; ir_find_value(g, unique) >= 0; i++) snprintf(unique, size, "%s_%d", name, i);
    graft_status st = ir_add_value(g, unique, out, e);
    free(unique);
    return st;
}

graft_status graph_add_input(ir_graph *g, const char *name, graft_dtype dtype, int ndim,
                             const int64_t *dims, int *out, graft_err *e) {
    if (ndim < 0 || ndim > GRAFT_MAX_DIMS)
        return err_set(e, GRAFT_E_INTERNAL, "graph input '%s' of rank %d", name, ndim);
    TRY(graph_add_value(g, name, out, e));
    int *grown = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    if (!grown) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory adding input '%s'", name);
    g->inputs = grown;
    g->inputs[g->n_inputs++] = *out;
    ir_value *v = &g->values[*out];
    v->dtype = dtype;
    v->ndim = ndim;
    memcpy(v->dims, dims, sizeof(int64_t) * (size_t)ndim);
    v->is_graph_input = true;
    return GRAFT_OK;
}

graft_status graph_add_const(ir_graph *g, const char *name, tensor *data, int *out, graft_err *e) {
    TRY(graph_add_value(g, name, out, e));
    ir_value *v = &g->values[*out];
    v->data = *data;
    memset(data, 0, sizeof *data);
    v->is_const = true;
    v->dtype = v->data.dtype;
    v->ndim = v->data.ndim;
    memcpy(v->dims, v->data.dims, sizeof v->dims);
    return GRAFT_OK;
}

graft_status graph_add_node(ir_graph *g, const char *op, int opset, const int *ins, int n_in,
                            const char *name, const char *attr, int64_t attr_value, int *out,
                            graft_err *e) {
    TRY(graph_add_value(g, name, out, e));
    ir_node n;
    memset(&n, 0, sizeof n);
    n.name = ir_strdup(g->values[*out].name);
    n.op_type = ir_strdup(op);
    n.domain = ir_strdup("");
    n.inputs = malloc(sizeof(int) * (size_t)(n_in > 0 ? n_in : 1));
    n.outputs = malloc(sizeof(int));
    n.attrs = calloc(1, sizeof(ir_attr));
    if (!n.name || !n.op_type || !n.domain || !n.inputs || !n.outputs || !n.attrs) {
        ir_node_free(&n);
        return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory adding node '%s'", name);
    }
    memcpy(n.inputs, ins, sizeof(int) * (size_t)n_in);
    n.n_in = n_in;
    n.outputs[0] = *out;
    n.n_out = 1;
    if (attr) {
        n.attrs[0].name = ir_strdup(attr);
        n.attrs[0].type = IR_ATTR_INT;
        n.attrs[0].i = attr_value;
        n.n_attrs = 1;
        if (!n.attrs[0].name) {
            ir_node_free(&n);
            return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory adding node '%s'", name);
        }
    }
    n.opset = opset;
    n.op = op_find(op);
    if (!n.op) {
        ir_node_free(&n);
        return err_set(e, GRAFT_E_UNSUPPORTED, "adding node '%s': graft has no op '%s'", name, op);
    }
    graft_status st = ir_add_node(g, &n, NULL, e);
    if (st != GRAFT_OK) ir_node_free(&n);
    return st;
}

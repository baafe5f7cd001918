/* infer.c: op resolution and the shape-inference driver over the whole graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

graft_status graph_resolve_ops(ir_graph *g, graft_err *e) {
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "node '%s' uses op '%s' of domain '%s'; graft supports only the "
                           "standard ai.onnx domain",
                           n->name, n->op_type, n->domain);
        const op_def *op = op_find(n->op_type);
        if (!op)
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "node '%s' uses op '%s', which graft does not support", n->name,
                           n->op_type);
        if (op_is_internal(op))
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "node '%s' uses op '%s', which is graft's internal training op "
                           "(domain ai.graft.training), not an ONNX op",
                           n->name, n->op_type);
        if (n->opset < op->since || n->opset > op->until)
            return err_set(e, GRAFT_E_UNSUPPORTED,
                           "node '%s' (%s) comes from opset %d; graft supports %s for opsets %d "
                           "to %d",
                           n->name, n->op_type, n->opset, n->op_type, op->since, op->until);
        n->op = op;
    }
    return GRAFT_OK;
}

void graph_value_info(const ir_graph *g, int value, value_info *vi) {
    memset(vi, 0, sizeof *vi);
    if (value < 0) return;
    const ir_value *v = &g->values[value];
    vi->present = true;
    vi->dtype = v->dtype;
    vi->ndim = v->ndim;
    for (int i = 0; i < v->ndim && i < GRAFT_MAX_DIMS; i++) vi->dims[i] = v->dims[i];
    if (v->is_const) vi->value = &v->data;
}

/* Take the op's inferred dtype and shape. A graph output keeps its declared facts where
 * inference cannot tell, and a known declared fact that disagrees is an error. */
static graft_status merge(const ir_node *n, ir_value *v, const value_info *vi, graft_err *e) {
    if (!vi->present) return GRAFT_OK;
    if (!v->is_graph_output) {
        v->dtype = vi->dtype;
        v->ndim = vi->ndim;
        for (int i = 0; i < vi->ndim; i++) v->dims[i] = vi->dims[i];
        return GRAFT_OK;
    }
    if (vi->dtype != GRAFT_DTYPE_UNDEFINED) {
        if (v->dtype != GRAFT_DTYPE_UNDEFINED && v->dtype != vi->dtype)
            return op_error(n, e, GRAFT_E_DTYPE, "output '%s' is declared %s but computes %s",
                            v->name, graft_dtype_name(v->dtype), graft_dtype_name(vi->dtype));
        v->dtype = vi->dtype;
    }
    if (vi->ndim < 0) return GRAFT_OK;
    if (v->ndim >= 0 && v->ndim != vi->ndim)
        return op_error(n, e, GRAFT_E_SHAPE,
                        "output '%s' is declared with rank %d but computes rank %d", v->name,
                        v->ndim, vi->ndim);
    if (v->ndim < 0) {
        v->ndim = vi->ndim;
        for (int i = 0; i < vi->ndim; i++) v->dims[i] = -1;
    }
    for (int i = 0; i < vi->ndim; i++) {
        if (vi->dims[i] < 0) continue;
        if (v->dims[i] >= 0 && v->dims[i] != vi->dims[i]) {
            char a[256], b[256];
            return op_error(n, e, GRAFT_E_SHAPE, "output '%s' is declared %s but computes %s",
                            v->name, shape_str(a, sizeof a, v->ndim, v->dims),
                            shape_str(b, sizeof b, vi->ndim, vi->dims));
        }
        v->dims[i] = vi->dims[i];
    }
    return GRAFT_OK;
}

/* An inferred shape within the limits: rank at most GRAFT_MAX_DIMS, no negative dim other than
 * unknown (-1), and a product of its known non-zero dims (overflow-checked) of at most
 * GRAPH_MAX_ELEMENTS: a zero dim does not excuse the others, whose products (strides, a later
 * Reshape's) would overflow.
 */
static graft_status check_limits(const ir_node *n, int k, const value_info *vi, graft_err *e) {
    if (!vi->present || vi->ndim < 0) return GRAFT_OK;
    if (vi->ndim > GRAFT_MAX_DIMS)
        return op_error(n, e, GRAFT_E_UNSUPPORTED, "output %d has rank %d (at most %d supported)",
                        k, vi->ndim, GRAFT_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < vi->ndim; i++) {
        int64_t d = vi->dims[i];
        if (d < -1)
            return op_error(n, e, GRAFT_E_SHAPE, "output %d has negative dim %lld", k,
                            (long long)d);
        if (d <= 0) continue; /* no elements, or unknown */
        if (numel > GRAPH_MAX_ELEMENTS / d) {
            char s[256];
            return op_error(n, e, GRAFT_E_SHAPE,
                            "output %d has shape %s, over graft's limit of 2^40 elements", k,
                            shape_str(s, sizeof s, vi->ndim, vi->dims));
        }
        numel *= d;
    }
    return GRAFT_OK;
}

/* Node n's inference into its values (in, out: room for its inputs and outputs). */
static graft_status infer_node(ir_graph *g, ir_node *n, value_info *in, value_info *out,
                               graft_err *e) {
    for (int k = 0; k < n->n_in; k++) graph_value_info(g, n->inputs[k], &in[k]);
    memset(out, 0, sizeof(value_info) * (size_t)n->n_out);
    TRY(n->op->infer(n, in, n->n_in, out, n->n_out, e));
    for (int k = 0; k < n->n_out; k++) {
        if (n->outputs[k] < 0) continue;
        TRY(check_limits(n, k, &out[k], e));
        ir_value *v = &g->values[n->outputs[k]];
        if (v->is_const) continue;
        /* Intermediate values take the op's rule; declared value_info was only a hint. */
        TRY(merge(n, v, &out[k], e));
    }
    return GRAFT_OK;
}

graft_status graph_infer_shapes(ir_graph *g, graft_err *e) {
    value_info in[64], out[64];
    for (int i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        if (n->n_in <= 64 && n->n_out <= 64) {
            TRY(infer_node(g, n, in, out, e));
            continue;
        }
        /* a large node (the optimizer's step over every parameter) */
        value_info *hin = malloc(sizeof *hin * ((size_t)n->n_in + 1));
        value_info *hout = malloc(sizeof *hout * ((size_t)n->n_out + 1));
        graft_status st = hin && hout ? infer_node(g, n, hin, hout, e)
                                      : op_error(n, e, GRAFT_E_OUT_OF_MEMORY, "out of memory");
        free(hin), free(hout);
        TRY(st);
    }
    return GRAFT_OK;
}

/* op_util.c: helpers shared by every op family: node-named errors, arity, axes, broadcasting. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "op.h"

graft_status op_error(const ir_node *node, graft_err *e, graft_status status, const char *fmt,
                      ...) {
    char body[GRAFT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    return err_set(e, status, "node '%s' (%s): %s", node && node->name ? node->name : "",
                   node && node->op_type ? node->op_type : "?", body);
}

graft_status op_check_arity(const ir_node *node, int n_in, int min_in, int max_in, int n_out,
                            int min_out, int max_out, graft_err *e) {
    if (n_in < min_in || n_in > max_in)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "has %d inputs, expected %d to %d", n_in,
                        min_in, max_in);
    if (n_out < min_out || n_out > max_out)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "has %d outputs, expected %d to %d",
                        n_out, min_out, max_out);
    return GRAFT_OK;
}

graft_status op_axis(const ir_node *node, int64_t axis, int rank, int *out, graft_err *e) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "axis %lld is out of range for a tensor of rank %d", (long long)axis, rank);
    *out = (int)a;
    return GRAFT_OK;
}

graft_status op_broadcast(const ir_node *node, int na, const int64_t *a, int nb, const int64_t *b,
                          int *nout, int64_t *out, graft_err *e) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        int64_t d;
        if (da == db)
            d = da;
        else if (da == 1)
            d = db;
        else if (db == 1)
            d = da;
        else if (da < 0 || db < 0)
            d = da < 0 ? db : da; /* unknown: the other (or error later) */
        else {
            char sa[256], sb[256];
            return op_error(node, e, GRAFT_E_SHAPE, "shapes %s and %s do not broadcast",
                            shape_str(sa, sizeof sa, na, a), shape_str(sb, sizeof sb, nb, b));
        }
        if (da < 0 && db < 0)
            d = -1;
        else if ((da < 0 && db == 1) || (db < 0 && da == 1))
            d = -1;
        out[i] = d;
    }
    *nout = n;
    return GRAFT_OK;
}

int op_read_ints(const tensor *t, int64_t *vals, int max) {
    if (!t || !t->data) return -1;
    if (t->dtype != GRAFT_DTYPE_I64 && t->dtype != GRAFT_DTYPE_I32) return -1;
    int64_t n = tensor_numel(t);
    if (n < 0 || n > max) return -1;
    for (int64_t i = 0; i < n; i++) vals[i] = tensor_get_i64(t, i);
    return (int)n;
}

void op_unknown(value_info *out, graft_dtype dtype) {
    memset(out, 0, sizeof *out);
    out->present = true;
    out->dtype = dtype;
    out->ndim = -1;
}

void op_same(value_info *out, const value_info *in) {
    memset(out, 0, sizeof *out);
    out->present = true;
    out->dtype = in->dtype;
    out->ndim = in->ndim;
    for (int i = 0; i < in->ndim && i < GRAFT_MAX_DIMS; i++) out->dims[i] = in->dims[i];
}

bool op_shape_known(const value_info *v) {
    if (v->ndim < 0) return false;
    for (int i = 0; i < v->ndim; i++)
        if (v->dims[i] < 0) return false;
    return true;
}

/* Inputs whose values inference or the kernel reads on the host: shapes, axes, pads, bounds and
 * scalars such as Clip's limits. A device backend receives these inputs in host memory. */
bool op_input_on_host(const char *op, int k) {
    static const struct {
        const char *op;
        unsigned mask; /* bit k: input k */
    } table[] = {
        {"Reshape", 1u << 1},
        {"Expand", 1u << 1},
        {"Slice", 0x1eu},
        {"ConstantOfShape", 1u << 0},
        {"Range", 0x7u},
        {"Pad", 0xeu},
        {"Unsqueeze", 1u << 1},
        {"Squeeze", 1u << 1},
        {"Split", 1u << 1},
        {"ReduceMean", 1u << 1},
        {"ReduceSum", 1u << 1},
        {"CumSum", 1u << 1},
        {"Clip", 0x6u},
        {"Dropout", 0x6u},
        {"OptimizerStep", 1u << 1}, /* the step's lr and momentum */
        {"TrainLoss", 0x14u},       /* class or positive weights, grad_scale */
        /* the reductions, TopK's K, Tile's repeats and Trilu's diagonal */
        {"ReduceMax", 1u << 1},
        {"ReduceMin", 1u << 1},
        {"ReduceProd", 1u << 1},
        {"ReduceL1", 1u << 1},
        {"ReduceL2", 1u << 1},
        {"ReduceSumSquare", 1u << 1},
        {"ReduceLogSum", 1u << 1},
        {"ReduceLogSumExp", 1u << 1},
        {"TopK", 1u << 1},
        {"Tile", 1u << 1},
        {"Trilu", 1u << 1},
        /* Resize's roi, scales and sizes */
        {"Resize", 0xeu},
    };
    if (k < 0 || k >= 32) return false;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(table[i].op, op) == 0) return (table[i].mask >> k) & 1u;
    return false;
}

bool node_input_on_host(const ir_node *n, int k) {
    if (!n || !n->op_type) return false;
    if (strcmp(n->op_type, "Backward") != 0) return op_input_on_host(n->op_type, k);
    /* src/ops/backward.h's layout: the forward's inputs come first */
    const char *fwd = attr_s(n, "op", NULL);
    return fwd && k < attr_i(n, "n_fwd_in", 0) && op_input_on_host(fwd, k);
}

bool op_input_data_unused(const char *op, int k) {
    return k == 0 && strcmp(op, "Shape") == 0;
}

bool op_runs_on_host(const char *op) {
    return strcmp(op, "Shape") == 0 || strcmp(op, "Constant") == 0;
}

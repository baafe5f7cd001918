/* tensor_generate.c: shape inference of the ops that make tensors from shapes or values: Shape,
 * Expand, ConstantOfShape, Constant and Range. */
#include <math.h>
#include <string.h>

#include "tensor_plan.h"

static void rank_only(value_info *out, graft_dtype dtype, int ndim) {
    op_unknown(out, dtype);
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->dims[i] = -1;
}

static int64_t clamp_index(int64_t v, int64_t n) {
    if (v < 0) v += n;
    return v < 0 ? 0 : v > n ? n : v;
}

graft_status op_infer_Shape(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    rank_only(&out[0], GRAFT_DTYPE_I64, 1);
    int r = in[0].ndim;
    if (r < 0) return GRAFT_OK;
    int64_t start = 0, end = r;
    if (node->opset >= 15) {
        start = clamp_index(attr_i(node, "start", 0), r);
        if (ir_node_attr(node, "end")) end = clamp_index(attr_i(node, "end", r), r);
    }
    out[0].dims[0] = end > start ? end - start : 0;
    return GRAFT_OK;
}

/* Expand whose target shape's length is known but not its values: a data dim other than 1 must
 * survive; everything else is unknown. */
static void expand_rank_only(const value_info *data, int n, value_info *out) {
    int rank = data->ndim > n ? data->ndim : n;
    rank_only(out, data->dtype, rank);
    for (int i = 0; i < data->ndim; i++) {
        int64_t d = data->dims[i];
        if (d >= 0 && d != 1) out->dims[rank - data->ndim + i] = d;
    }
}

graft_status op_infer_Expand(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    int_list sh;
    TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 1), "shape", GRAFT_MAX_DIMS, &sh, e));
    if (sh.state == INT_LIST_ABSENT)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "needs the shape input");
    if (in[0].ndim < 0 || sh.n < 0) {
        op_unknown(&out[0], in[0].dtype);
        return GRAFT_OK;
    }
    if (sh.state == INT_LIST_UNKNOWN) {
        expand_rank_only(&in[0], sh.n, &out[0]);
        return GRAFT_OK;
    }
    for (int i = 0; i < sh.n; i++)
        if (sh.v[i] < 0)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "shape entry %d is %lld", i,
                            (long long)sh.v[i]);
    op_unknown(&out[0], in[0].dtype);
    return op_broadcast(node, in[0].ndim, in[0].dims, sh.n, sh.v, &out[0].ndim, out[0].dims, e);
}

graft_status op_infer_ConstantOfShape(const ir_node *node, const value_info *in, int n_in,
                                      value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    graft_dtype dtype = GRAFT_DTYPE_F32;
    const tensor *value = attr_t(node, "value");
    if (value) {
        if (!dtype_is_valid(value->dtype))
            return op_error(node, e, GRAFT_E_UNSUPPORTED, "value has an unsupported dtype");
        if (tensor_numel(value) != 1)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "value must hold exactly one element");
        dtype = value->dtype;
    }
    int_list sh;
    TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 0), "shape", GRAFT_MAX_DIMS, &sh, e));
    if (sh.n < 0) {
        op_unknown(&out[0], dtype);
        return GRAFT_OK;
    }
    rank_only(&out[0], dtype, sh.n);
    if (sh.state != INT_LIST_KNOWN) return GRAFT_OK;
    for (int i = 0; i < sh.n; i++) {
        if (sh.v[i] < 0)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "shape entry %d is %lld", i,
                            (long long)sh.v[i]);
        out[0].dims[i] = sh.v[i];
    }
    return GRAFT_OK;
}

/* Which of Constant's value attributes the node has; exactly one is allowed. */
static graft_status constant_attr(const ir_node *node, const ir_attr **found, graft_err *e) {
    static const char *const names[] = {"value",         "value_float", "value_floats",
                                        "value_int",     "value_ints",  "value_string",
                                        "value_strings", "sparse_value"};
    *found = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const ir_attr *a = ir_node_attr(node, names[i]);
        if (!a) continue;
        if (*found)
            return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "has both %s and %s", (*found)->name,
                            a->name);
        *found = a;
    }
    if (!*found) return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "has no value attribute");
    const char *n = (*found)->name;
    if (strcmp(n, "sparse_value") == 0 || strncmp(n, "value_string", 12) == 0)
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "%s is not supported", n);
    return GRAFT_OK;
}

graft_status op_infer_Constant(const ir_node *node, const value_info *in, int n_in, value_info *out,
                               int n_out, graft_err *e) {
    (void)in;
    TRY(op_check_arity(node, n_in, 0, 0, n_out, 1, 1, e));
    const ir_attr *a;
    TRY(constant_attr(node, &a, e));
    if (strcmp(a->name, "value") == 0) {
        if (a->type != IR_ATTR_TENSOR || !dtype_is_valid(a->t.dtype))
            return op_error(node, e, GRAFT_E_UNSUPPORTED,
                            "value is not a tensor of a supported "
                            "dtype");
        rank_only(&out[0], a->t.dtype, a->t.ndim);
        memcpy(out[0].dims, a->t.dims, sizeof(int64_t) * (size_t)a->t.ndim);
        return GRAFT_OK;
    }
    bool is_float = strncmp(a->name, "value_float", 11) == 0;
    bool is_list = a->type == IR_ATTR_FLOATS || a->type == IR_ATTR_INTS;
    rank_only(&out[0], is_float ? GRAFT_DTYPE_F32 : GRAFT_DTYPE_I64, is_list ? 1 : 0);
    if (is_list) out[0].dims[0] = a->n;
    return GRAFT_OK;
}

static bool range_dtype_ok(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F64 || dt == GRAFT_DTYPE_I16 ||
           dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64;
}

/* Number of Range's elements, max(ceil((limit - start) / delta), 0); integers exactly (unsigned
 * differences cannot overflow), floats as ONNX Runtime does (difference in the element type). */
static graft_status range_length(const ir_node *node, const tensor *const *v, int64_t *len,
                                 graft_err *e) {
    graft_dtype dt = v[0]->dtype;
    if (dtype_is_int(dt)) {
        int64_t start = tensor_get_i64(v[0], 0), limit = tensor_get_i64(v[1], 0);
        int64_t delta = tensor_get_i64(v[2], 0);
        if (delta == 0) return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "delta is zero");
        if ((delta > 0 && limit <= start) || (delta < 0 && limit >= start)) {
            *len = 0;
            return GRAFT_OK;
        }
        uint64_t span =
            delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
        uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
        *len = (int64_t)((span - 1) / step + 1);
        return GRAFT_OK;
    }
    double start = tensor_get_f64(v[0], 0), limit = tensor_get_f64(v[1], 0);
    double delta = tensor_get_f64(v[2], 0);
    double diff = dt == GRAFT_DTYPE_F32 ? (double)((float)limit - (float)start) : limit - start;
    double n = ceil(diff / delta);
    if (delta == 0 || isnan(n) || n > 4e18)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "start %g, limit %g and delta %g give no finite length", start, limit,
                        delta);
    *len = n > 0 ? (int64_t)n : 0;
    return GRAFT_OK;
}

graft_status op_infer_Range(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    static const char *const names[3] = {"start", "limit", "delta"};
    TRY(op_check_arity(node, n_in, 3, 3, n_out, 1, 1, e));
    graft_dtype dt = in[0].dtype;
    const tensor *vals[3];
    bool all_known = true;
    for (int i = 0; i < 3; i++) {
        if (!in[i].present)
            return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "%s is omitted", names[i]);
        if (in[i].dtype != GRAFT_DTYPE_UNDEFINED && !range_dtype_ok(in[i].dtype))
            return op_error(node, e, GRAFT_E_DTYPE, "%s has unsupported dtype %s", names[i],
                            graft_dtype_name(in[i].dtype));
        if (dt == GRAFT_DTYPE_UNDEFINED) dt = in[i].dtype;
        if (in[i].dtype != GRAFT_DTYPE_UNDEFINED && in[i].dtype != dt)
            return op_error(node, e, GRAFT_E_DTYPE, "start, limit and delta mix %s and %s",
                            graft_dtype_name(dt), graft_dtype_name(in[i].dtype));
        if (in[i].ndim > 0 && dims_numel(in[i].ndim, in[i].dims) > 1)
            return op_error(node, e, GRAFT_E_SHAPE, "%s must be a scalar", names[i]);
        vals[i] = in[i].value;
        if (!vals[i] || tensor_numel(vals[i]) != 1) all_known = false;
    }
    rank_only(&out[0], dt, 1);
    if (all_known) TRY(range_length(node, vals, &out[0].dims[0], e));
    return GRAFT_OK;
}

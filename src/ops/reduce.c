/* reduce.c: shape inference and attribute checks of Softmax, LogSoftmax, LayerNormalization,
 * the Reduce* ops, ArgMax, CumSum and TopK. */
#include <string.h>

#include "reduce.h"

#define DT(x) (1u << GRAFT_DTYPE_##x)
#define FLOAT_TYPES (DT(F16) | DT(BF16) | DT(F32) | DT(F64))
#define SUM_TYPES (FLOAT_TYPES | DT(I32) | DT(I64) | DT(U32) | DT(U64))
#define ARGMAX_TYPES                                                                               \
    (FLOAT_TYPES | DT(U8) | DT(I8) | DT(U16) | DT(I16) | DT(I32) | DT(I64) | DT(U32) | DT(U64))
#define INDEX_TYPES (DT(I32) | DT(I64))

/* An unknown dtype (load time) passes; a known one must be in the mask. */
static graft_status check_dtype(const ir_node *node, const char *what, graft_dtype dt,
                                unsigned allowed, graft_err *e) {
    if (dt == GRAFT_DTYPE_UNDEFINED) return GRAFT_OK;
    if (dt > 0 && dt < 32 && (allowed & (1u << dt))) return GRAFT_OK;
    return op_error(node, e, GRAFT_E_DTYPE, "%s has dtype %s, which this op does not accept", what,
                    graft_dtype_name(dt));
}

/* A 0/1 attribute. */
static graft_status flag_attr(const ir_node *node, const char *name, int64_t dflt, bool *out,
                              graft_err *e) {
    int64_t v = attr_i(node, name, dflt);
    if (v != 0 && v != 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "attribute %s is %lld, expected 0 or 1",
                        name, (long long)v);
    *out = v != 0;
    return GRAFT_OK;
}

axis_split axis_split_dims(int ndim, const int64_t *dims, int axis, bool single_axis) {
    axis_split s = {1, 1, 1};
    for (int i = 0; i < axis && i < ndim; i++) s.outer *= dims[i];
    if (single_axis) {
        s.n = axis < ndim ? dims[axis] : 1;
        for (int i = axis + 1; i < ndim; i++) s.inner *= dims[i];
    } else {
        for (int i = axis; i < ndim; i++) s.n *= dims[i];
    }
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* Softmax, LogSoftmax                                                                          */

graft_status softmax_axis(const ir_node *node, int rank, int *axis, bool *single_axis,
                          graft_err *e) {
    if (node->opset >= 13) {
        *single_axis = true;
        return op_axis(node, attr_i(node, "axis", -1), rank, axis, e);
    }
    /* Before opset 13 the input is coerced to 2-D at `axis`, so axis == rank is valid (an
     * empty trailing part: every element is its own group). */
    *single_axis = false;
    int64_t a = attr_i(node, "axis", 1);
    int64_t norm = a < 0 ? a + rank : a;
    if (norm < 0 || norm > rank)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "axis %lld is out of range for a tensor of rank %d", (long long)a, rank);
    *axis = (int)norm;
    return GRAFT_OK;
}

static graft_status infer_softmax(const ir_node *node, const value_info *in, int n_in,
                                  value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    TRY(check_dtype(node, "input", in[0].dtype, FLOAT_TYPES, e));
    if (in[0].ndim < 0) {
        op_unknown(&out[0], in[0].dtype);
        return GRAFT_OK;
    }
    int axis;
    bool single;
    TRY(softmax_axis(node, in[0].ndim, &axis, &single, e));
    op_same(&out[0], &in[0]);
    return GRAFT_OK;
}

graft_status op_infer_Softmax(const ir_node *node, const value_info *in, int n_in, value_info *out,
                              int n_out, graft_err *e) {
    return infer_softmax(node, in, n_in, out, n_out, e);
}

graft_status op_infer_LogSoftmax(const ir_node *node, const value_info *in, int n_in,
                                 value_info *out, int n_out, graft_err *e) {
    return infer_softmax(node, in, n_in, out, n_out, e);
}

/* ------------------------------------------------------------------------------------------ */
/* LayerNormalization                                                                           */

/* Scale and B broadcast (one way) to the normalised shape dims[axis..]; extra leading dims of
 * size 1 are allowed. */
static graft_status check_norm_operand(const ir_node *node, const char *what, const value_info *p,
                                       int m, const int64_t *norm_dims, graft_err *e) {
    if (p->ndim < 0) return GRAFT_OK;
    for (int i = 0; i < p->ndim; i++) {
        int t = m - p->ndim + i;
        int64_t d = p->dims[i], want = t >= 0 ? norm_dims[t] : 1;
        if (d < 0 || want < 0 || d == want || d == 1) continue;
        char sp[256], sn[256];
        return op_error(node, e, GRAFT_E_SHAPE,
                        "%s of shape %s does not broadcast to the normalised shape %s", what,
                        shape_str(sp, sizeof sp, p->ndim, p->dims),
                        shape_str(sn, sizeof sn, m, norm_dims));
    }
    return GRAFT_OK;
}

static graft_status check_layernorm_inputs(const ir_node *node, const value_info *in, int n_in,
                                           graft_dtype *stash, graft_err *e) {
    TRY(check_dtype(node, "X", in[0].dtype, FLOAT_TYPES, e));
    for (int i = 1; i < n_in; i++) {
        if (!in[i].present) continue;
        const char *what = i == 1 ? "Scale" : "B";
        TRY(check_dtype(node, what, in[i].dtype, FLOAT_TYPES, e));
        if (in[0].dtype && in[i].dtype && in[i].dtype != in[0].dtype)
            return op_error(node, e, GRAFT_E_DTYPE, "%s has dtype %s but X has %s", what,
                            graft_dtype_name(in[i].dtype), graft_dtype_name(in[0].dtype));
    }
    if (!in[1].present) return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "Scale is missing");
    int64_t st = attr_i(node, "stash_type", GRAFT_DTYPE_F32);
    if (st != GRAFT_DTYPE_F32 && st != GRAFT_DTYPE_BF16)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "stash_type %lld is not float (1) or bfloat16 (16)", (long long)st);
    *stash = (graft_dtype)st;
    return GRAFT_OK;
}

graft_status op_infer_LayerNormalization(const ir_node *node, const value_info *in, int n_in,
                                         value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 3, n_out, 1, 3, e));
    graft_dtype stash = GRAFT_DTYPE_F32;
    TRY(check_layernorm_inputs(node, in, n_in, &stash, e));
    const value_info *x = &in[0];
    if (x->ndim < 0) {
        op_unknown(&out[0], x->dtype);
        for (int i = 1; i < n_out; i++) op_unknown(&out[i], stash);
        return GRAFT_OK;
    }
    int axis;
    TRY(op_axis(node, attr_i(node, "axis", -1), x->ndim, &axis, e));
    int m = x->ndim - axis;
    for (int i = 1; i < n_in; i++)
        if (in[i].present)
            TRY(check_norm_operand(node, i == 1 ? "Scale" : "B", &in[i], m, x->dims + axis, e));
    op_same(&out[0], x);
    for (int i = 1; i < n_out; i++) {
        op_same(&out[i], x);
        out[i].dtype = stash;
        for (int d = axis; d < x->ndim; d++) out[i].dims[d] = 1;
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The Reduce* ops                                                                              */

/* ReduceSum takes its axes as an input from opset 13, the other Reduce* ops from opset 18. */
static bool axes_from_input(const ir_node *node) {
    int since = strcmp(node->op_type, "ReduceSum") == 0 ? 13 : 18;
    return node->opset >= since;
}

/* ReduceMax and ReduceMin also take 8-bit integers (opset 12 on) and bool (opset 20 on); the
 * others the sum types. */
static unsigned reduce_dtypes(const ir_node *node) {
    bool minmax =
        strcmp(node->op_type, "ReduceMax") == 0 || strcmp(node->op_type, "ReduceMin") == 0;
    if (!minmax) return SUM_TYPES;
    return SUM_TYPES | DT(I8) | DT(U8) | (node->opset >= 20 ? DT(BOOL) : 0u);
}

/* Read the axes list from the attribute or the input; *count = -1 when not known yet. */
static graft_status read_axes(const ir_node *node, bool axes_present, const tensor *axes,
                              int64_t *list, int *count, graft_err *e) {
    if (!axes_from_input(node)) {
        const int64_t *vals;
        int64_t n = attr_ints(node, "axes", &vals);
        if (n > GRAFT_MAX_DIMS)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "has %lld axes, more than rank %d",
                            (long long)n, GRAFT_MAX_DIMS);
        *count = n < 0 ? 0 : (int)n;
        for (int i = 0; i < *count; i++) list[i] = vals[i];
        return GRAFT_OK;
    }
    if (ir_node_attr(node, "axes"))
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL,
                        "has an 'axes' attribute, which opset %d replaced by the axes input",
                        node->opset);
    *count = 0;
    if (!axes_present) return GRAFT_OK;
    if (!axes) {
        *count = -1;
        return GRAFT_OK;
    }
    if (axes->ndim > 1)
        return op_error(node, e, GRAFT_E_SHAPE, "axes must be 1-D, got rank %d", axes->ndim);
    int64_t n = tensor_numel(axes);
    if (n > GRAFT_MAX_DIMS)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "has %lld axes, more than rank %d",
                        (long long)n, GRAFT_MAX_DIMS);
    *count = op_read_ints(axes, list, GRAFT_MAX_DIMS);
    if (*count < 0)
        return op_error(node, e, GRAFT_E_DTYPE, "axes must be int64, got %s",
                        graft_dtype_name(axes->dtype));
    return GRAFT_OK;
}

graft_status reduce_resolve_axes(const ir_node *node, int rank, bool axes_present,
                                 const tensor *axes, reduce_axes *out, graft_err *e) {
    memset(out, 0, sizeof *out);
    bool noop_if_empty = false;
    TRY(flag_attr(node, "keepdims", 1, &out->keepdims, e));
    if (axes_from_input(node)) TRY(flag_attr(node, "noop_with_empty_axes", 0, &noop_if_empty, e));
    int64_t list[GRAFT_MAX_DIMS];
    int count = 0;
    TRY(read_axes(node, axes_present, axes, list, &count, e));
    if (count < 0) return GRAFT_OK; /* known stays false */
    out->known = true;
    if (count == 0) {
        out->noop = noop_if_empty;
        for (int i = 0; i < rank; i++) out->reduced[i] = !noop_if_empty;
        return GRAFT_OK;
    }
    for (int i = 0; i < count; i++) {
        int a;
        TRY(op_axis(node, list[i], rank, &a, e));
        if (out->reduced[a])
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "axis %lld is listed twice",
                            (long long)list[i]);
        out->reduced[a] = true;
    }
    return GRAFT_OK;
}

graft_status reduce_call_axes(const op_call *c, reduce_axes *out) {
    bool axes_present = c->n_in > 1 && c->in[1];
    return reduce_resolve_axes(c->node, c->in[0]->ndim, axes_present,
                               axes_present ? c->in[1] : NULL, out, c->err);
}

static graft_status infer_reduce(const ir_node *node, const value_info *in, int n_in,
                                 value_info *out, int n_out, graft_err *e) {
    bool from_input = axes_from_input(node);
    TRY(op_check_arity(node, n_in, 1, from_input ? 2 : 1, n_out, 1, 1, e));
    TRY(check_dtype(node, "input", in[0].dtype, reduce_dtypes(node), e));
    bool axes_present = n_in > 1 && in[1].present;
    if (axes_present) TRY(check_dtype(node, "axes", in[1].dtype, INDEX_TYPES, e));
    if (axes_present && in[1].ndim > 1)
        return op_error(node, e, GRAFT_E_SHAPE, "axes must be 1-D, got rank %d", in[1].ndim);
    bool keepdims = true;
    TRY(flag_attr(node, "keepdims", 1, &keepdims, e));
    const value_info *x = &in[0];
    if (x->ndim < 0) {
        op_unknown(&out[0], x->dtype);
        return GRAFT_OK;
    }
    reduce_axes ax;
    TRY(reduce_resolve_axes(node, x->ndim, axes_present, axes_present ? in[1].value : NULL, &ax,
                            e));
    if (!ax.known) {
        /* Which axes go is not known until run time; with keepdims at least the rank is. */
        op_unknown(&out[0], x->dtype);
        if (keepdims) {
            out[0].ndim = x->ndim;
            for (int i = 0; i < x->ndim; i++) out[0].dims[i] = -1;
        }
        return GRAFT_OK;
    }
    op_same(&out[0], x);
    if (ax.noop) return GRAFT_OK;
    int r = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (!ax.reduced[i])
            out[0].dims[r++] = x->dims[i];
        else if (keepdims)
            out[0].dims[r++] = 1;
    }
    out[0].ndim = r;
    return GRAFT_OK;
}

bool reduce_kind_of(const char *op_type, reduce_kind *kind) {
    static const struct {
        const char *op;
        reduce_kind kind;
    } kinds[] = {
        {"ReduceSum", REDUCE_SUM},        {"ReduceMean", REDUCE_MEAN},
        {"ReduceMax", REDUCE_MAX},        {"ReduceMin", REDUCE_MIN},
        {"ReduceProd", REDUCE_PROD},      {"ReduceL1", REDUCE_L1},
        {"ReduceL2", REDUCE_L2},          {"ReduceSumSquare", REDUCE_SUM_SQUARE},
        {"ReduceLogSum", REDUCE_LOG_SUM}, {"ReduceLogSumExp", REDUCE_LOG_SUM_EXP},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (strcmp(kinds[i].op, op_type) == 0) {
            *kind = kinds[i].kind;
            return true;
        }
    return false;
}

bool reduce_kind_keeps_single(reduce_kind kind) {
    return kind == REDUCE_SUM || kind == REDUCE_MEAN || kind == REDUCE_MAX || kind == REDUCE_MIN ||
           kind == REDUCE_PROD;
}

#define REDUCE_INFER(name)                                                                         \
    graft_status op_infer_##name(const ir_node *node, const value_info *in, int n_in,              \
                                 value_info *out, int n_out, graft_err *e) {                       \
        return infer_reduce(node, in, n_in, out, n_out, e);                                        \
    }
REDUCE_INFER(ReduceMean)
REDUCE_INFER(ReduceSum)
REDUCE_INFER(ReduceMax)
REDUCE_INFER(ReduceMin)
REDUCE_INFER(ReduceProd)
REDUCE_INFER(ReduceL1)
REDUCE_INFER(ReduceL2)
REDUCE_INFER(ReduceSumSquare)
REDUCE_INFER(ReduceLogSum)
REDUCE_INFER(ReduceLogSumExp)
#undef REDUCE_INFER

/* ------------------------------------------------------------------------------------------ */
/* ArgMax, CumSum                                                                               */

graft_status op_infer_ArgMax(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    TRY(check_dtype(node, "input", in[0].dtype, ARGMAX_TYPES, e));
    bool keepdims = true, last = false;
    TRY(flag_attr(node, "keepdims", 1, &keepdims, e));
    TRY(flag_attr(node, "select_last_index", 0, &last, e));
    const value_info *x = &in[0];
    if (x->ndim < 0) {
        op_unknown(&out[0], GRAFT_DTYPE_I64);
        return GRAFT_OK;
    }
    int axis;
    TRY(op_axis(node, attr_i(node, "axis", 0), x->ndim, &axis, e));
    op_same(&out[0], x);
    out[0].dtype = GRAFT_DTYPE_I64;
    if (keepdims) {
        out[0].dims[axis] = 1;
    } else {
        for (int i = axis; i + 1 < x->ndim; i++) out[0].dims[i] = x->dims[i + 1];
        out[0].ndim = x->ndim - 1;
    }
    return GRAFT_OK;
}

graft_status op_infer_CumSum(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    TRY(check_dtype(node, "x", in[0].dtype, SUM_TYPES, e));
    TRY(check_dtype(node, "axis", in[1].dtype, INDEX_TYPES, e));
    bool flag = false;
    TRY(flag_attr(node, "exclusive", 0, &flag, e));
    TRY(flag_attr(node, "reverse", 0, &flag, e));
    const value_info *ax = &in[1];
    bool one_element = ax->ndim == 0 || (ax->ndim == 1 && ax->dims[0] == 1);
    if (ax->ndim > 1 || (ax->ndim == 1 && ax->dims[0] >= 0 && !one_element))
        return op_error(node, e, GRAFT_E_SHAPE, "axis must be a scalar");
    if (ax->value && in[0].ndim >= 0) {
        int64_t v;
        int axis;
        if (op_read_ints(ax->value, &v, 1) != 1)
            return op_error(node, e, GRAFT_E_SHAPE, "axis must be a scalar int32 or int64");
        TRY(op_axis(node, v, in[0].ndim, &axis, e));
    }
    op_same(&out[0], &in[0]);
    return GRAFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* TopK                                                                                         */

graft_status topk_params(const ir_node *node, int rank, const tensor *k_input, int *axis,
                         int64_t *k, graft_err *e) {
    TRY(op_axis(node, attr_i(node, "axis", -1), rank, axis, e));
    if (node->opset < 10) {
        *k = attr_i(node, "k", -1);
    } else {
        *k = -1;
        if (k_input && (tensor_numel(k_input) != 1 || op_read_ints(k_input, k, 1) != 1))
            return op_error(node, e, GRAFT_E_SHAPE, "K must be a single int64");
    }
    if ((node->opset < 10 || k_input) && *k < 0)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "k is %lld, expected >= 0",
                        (long long)*k);
    return GRAFT_OK;
}

graft_status op_infer_TopK(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    bool k_input = node->opset >= 10;
    TRY(op_check_arity(node, n_in, k_input ? 2 : 1, k_input ? 2 : 1, n_out, 2, 2, e));
    TRY(check_dtype(node, "X", in[0].dtype, ARGMAX_TYPES, e));
    if (k_input) TRY(check_dtype(node, "K", in[1].dtype, INDEX_TYPES, e));
    bool flag;
    TRY(flag_attr(node, "largest", 1, &flag, e));
    TRY(flag_attr(node, "sorted", 1, &flag, e));
    const value_info *x = &in[0];
    if (x->ndim < 0) {
        op_unknown(&out[0], x->dtype);
        op_unknown(&out[1], GRAFT_DTYPE_I64);
        return GRAFT_OK;
    }
    int axis;
    int64_t k;
    TRY(topk_params(node, x->ndim, k_input ? in[1].value : NULL, &axis, &k, e));
    if (k >= 0 && x->dims[axis] >= 0 && k > x->dims[axis])
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "k is %lld, more than the %lld elements of axis %d", (long long)k,
                        (long long)x->dims[axis], axis);
    op_same(&out[0], x);
    out[0].dims[axis] = k;
    op_same(&out[1], &out[0]);
    out[1].dtype = GRAFT_DTYPE_I64;
    return GRAFT_OK;
}

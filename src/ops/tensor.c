/* tensor.c: shape inference and attribute checks of the reshaping ops (Flatten, Reshape,
 * Transpose, Squeeze, Unsqueeze) and of Concat, Split and Gather. */
#include <string.h>

#include "tensor_plan.h"

/* Output with a known rank whose dims are all unknown. */
static void rank_only(value_info *out, graft_dtype dtype, int ndim) {
    op_unknown(out, dtype);
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->dims[i] = -1;
}

static graft_status check_rank_limit(const ir_node *node, int ndim, graft_err *e) {
    if (ndim > GRAFT_MAX_DIMS)
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "output rank %d exceeds the limit of %d",
                        ndim, GRAFT_MAX_DIMS);
    return GRAFT_OK;
}

graft_status op_infer_Flatten(const ir_node *node, const value_info *in, int n_in, value_info *out,
                              int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    int64_t axis = attr_i(node, "axis", 1);
    int r = in[0].ndim;
    rank_only(&out[0], in[0].dtype, 2);
    if (r < 0) {
        if (axis == 0) out[0].dims[0] = 1;
        return GRAFT_OK;
    }
    if (axis < -r || axis > r)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "axis %lld is out of range for a tensor of rank %d", (long long)axis, r);
    if (axis < 0) axis += r;
    out[0].dims[0] = dims_numel((int)axis, in[0].dims);
    out[0].dims[1] = dims_numel(r - (int)axis, in[0].dims + axis);
    return GRAFT_OK;
}

/* Reshape to a shape whose values are known: 0 copies the input dim (unless allowzero), one -1
 * takes what is left. Unknown input dims leave the dims that depend on them unknown. */
static graft_status reshape_known(const ir_node *node, const value_info *data, const int_list *sh,
                                  bool allowzero, value_info *out, graft_err *e) {
    char s1[256], s2[256];
    int infer_at = -1;
    bool has_zero = false;
    for (int i = 0; i < sh->n; i++) {
        int64_t v = sh->v[i];
        if (v < -1)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "shape entry %d is %lld", i,
                            (long long)v);
        if (v == -1 && infer_at >= 0)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "shape has more than one -1");
        if (v == -1) infer_at = i;
        if (v == 0 && !allowzero) {
            if (data->ndim >= 0 && i >= data->ndim)
                return op_error(node, e, GRAFT_E_SHAPE,
                                "shape entry %d is 0 (copy) but the input %s has no dim %d", i,
                                shape_str(s1, sizeof s1, data->ndim, data->dims), i);
            v = data->ndim >= 0 ? data->dims[i] : -1;
        } else if (v == 0) {
            has_zero = true;
        }
        out->dims[i] = v;
    }
    if (has_zero && infer_at >= 0)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "shape has both 0 and -1 while allowzero is set");
    int64_t total = data->ndim >= 0 ? dims_numel(data->ndim, data->dims) : -1;
    int64_t others[GRAFT_MAX_DIMS];
    int n_others = 0;
    for (int i = 0; i < sh->n; i++)
        if (i != infer_at) others[n_others++] = out->dims[i];
    int64_t rest = dims_numel(n_others, others);
    if (total < 0 || rest < 0) return GRAFT_OK;
    if (infer_at >= 0 && rest != 0 && total % rest == 0) {
        out->dims[infer_at] = total / rest;
        return GRAFT_OK;
    }
    if (infer_at < 0 && rest == total) return GRAFT_OK;
    return op_error(node, e, GRAFT_E_SHAPE, "cannot reshape %s to %s",
                    shape_str(s1, sizeof s1, data->ndim, data->dims),
                    shape_str(s2, sizeof s2, sh->n, sh->v));
}

graft_status op_infer_Reshape(const ir_node *node, const value_info *in, int n_in, value_info *out,
                              int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    int_list sh;
    TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 1), "shape", GRAFT_MAX_DIMS, &sh, e));
    if (sh.state == INT_LIST_ABSENT)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "needs the shape input");
    bool allowzero = node->opset >= 14 && attr_i(node, "allowzero", 0) != 0;
    if (sh.state == INT_LIST_UNKNOWN) {
        if (sh.n < 0)
            op_unknown(&out[0], in[0].dtype);
        else
            rank_only(&out[0], in[0].dtype, sh.n);
        return GRAFT_OK;
    }
    rank_only(&out[0], in[0].dtype, sh.n);
    return reshape_known(node, &in[0], &sh, allowzero, &out[0], e);
}

graft_status op_infer_Transpose(const ir_node *node, const value_info *in, int n_in,
                                value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    int r = in[0].ndim;
    int perm[GRAFT_MAX_DIMS];
    if (r < 0) {
        const ir_attr *p = ir_node_attr(node, "perm");
        if (!p || p->n > GRAFT_MAX_DIMS) {
            op_unknown(&out[0], in[0].dtype);
            return GRAFT_OK;
        }
        TRY(transpose_perm(node, (int)p->n, perm, e));
        rank_only(&out[0], in[0].dtype, (int)p->n);
        return GRAFT_OK;
    }
    TRY(transpose_perm(node, r, perm, e));
    op_same(&out[0], &in[0]);
    for (int i = 0; i < r; i++) out[0].dims[i] = in[0].dims[perm[i]];
    return GRAFT_OK;
}

/* Axes of Squeeze / Unsqueeze: an attribute before opset 13, an input from 13 on. */
static graft_status squeeze_axes(const ir_node *node, const value_info *in, int n_in,
                                 int_list *axes, graft_err *e) {
    if (node->opset < 13) return int_list_from_attr(node, "axes", GRAFT_MAX_DIMS, axes, e);
    return int_list_from_input(node, tensor_opt_input(in, n_in, 1), "axes", GRAFT_MAX_DIMS, axes,
                               e);
}

/* Normalise axes against rank, rejecting duplicates; marks[axis] = true for each. */
static graft_status mark_axes(const ir_node *node, const int_list *axes, int rank, bool *marks,
                              graft_err *e) {
    memset(marks, 0, sizeof(bool) * GRAFT_MAX_DIMS);
    for (int k = 0; k < axes->n; k++) {
        int a;
        TRY(op_axis(node, axes->v[k], rank, &a, e));
        if (marks[a])
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "axis %lld is given twice",
                            (long long)axes->v[k]);
        marks[a] = true;
    }
    return GRAFT_OK;
}

graft_status op_infer_Squeeze(const ir_node *node, const value_info *in, int n_in, value_info *out,
                              int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, node->opset < 13 ? 1 : 2, n_out, 1, 1, e));
    int_list axes;
    TRY(squeeze_axes(node, in, n_in, &axes, e));
    int r = in[0].ndim;
    if (r < 0 || (axes.state == INT_LIST_UNKNOWN && axes.n < 0)) {
        op_unknown(&out[0], in[0].dtype);
        return GRAFT_OK;
    }
    if (axes.state == INT_LIST_UNKNOWN) {
        if (axes.n > r)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "squeezes %d axes of a tensor of rank %d", axes.n, r);
        rank_only(&out[0], in[0].dtype, r - axes.n);
        return GRAFT_OK;
    }
    bool marks[GRAFT_MAX_DIMS];
    if (axes.state == INT_LIST_KNOWN) {
        TRY(mark_axes(node, &axes, r, marks, e));
    } else {
        for (int i = 0; i < r; i++) {
            if (in[0].dims[i] < 0) { /* whether it is 1 decides the rank */
                op_unknown(&out[0], in[0].dtype);
                return GRAFT_OK;
            }
            marks[i] = in[0].dims[i] == 1;
        }
    }
    op_unknown(&out[0], in[0].dtype);
    out[0].ndim = 0;
    for (int i = 0; i < r; i++) {
        if (!marks[i]) {
            out[0].dims[out[0].ndim++] = in[0].dims[i];
        } else if (in[0].dims[i] >= 0 && in[0].dims[i] != 1) {
            char s[256];
            return op_error(node, e, GRAFT_E_SHAPE, "cannot squeeze axis %d of shape %s", i,
                            shape_str(s, sizeof s, r, in[0].dims));
        }
    }
    return GRAFT_OK;
}

graft_status op_infer_Unsqueeze(const ir_node *node, const value_info *in, int n_in,
                                value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, node->opset < 13 ? 1 : 2, node->opset < 13 ? 1 : 2, n_out, 1, 1,
                       e));
    int_list axes;
    TRY(squeeze_axes(node, in, n_in, &axes, e));
    if (axes.state == INT_LIST_ABSENT)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "needs axes");
    int r = in[0].ndim;
    if (r < 0 || axes.n < 0) {
        op_unknown(&out[0], in[0].dtype);
        return GRAFT_OK;
    }
    int rank = r + axes.n;
    TRY(check_rank_limit(node, rank, e));
    if (axes.state == INT_LIST_UNKNOWN) {
        rank_only(&out[0], in[0].dtype, rank);
        return GRAFT_OK;
    }
    bool marks[GRAFT_MAX_DIMS];
    TRY(mark_axes(node, &axes, rank, marks, e));
    op_unknown(&out[0], in[0].dtype);
    out[0].ndim = rank;
    for (int i = 0, j = 0; i < rank; i++) out[0].dims[i] = marks[i] ? 1 : in[0].dims[j++];
    return GRAFT_OK;
}

/* The common dtype and rank of Concat's inputs (UNDEFINED / -1 where none is known). */
static graft_status concat_common(const ir_node *node, const value_info *in, int n_in,
                                  graft_dtype *dtype, int *rank, graft_err *e) {
    *dtype = GRAFT_DTYPE_UNDEFINED;
    *rank = -1;
    for (int i = 0; i < n_in; i++) {
        if (!in[i].present)
            return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "input %d is omitted", i);
        if (in[i].dtype != GRAFT_DTYPE_UNDEFINED) {
            if (*dtype != GRAFT_DTYPE_UNDEFINED && *dtype != in[i].dtype)
                return op_error(node, e, GRAFT_E_DTYPE, "inputs mix %s and %s",
                                graft_dtype_name(*dtype), graft_dtype_name(in[i].dtype));
            *dtype = in[i].dtype;
        }
        if (in[i].ndim >= 0) {
            if (*rank >= 0 && *rank != in[i].ndim)
                return op_error(node, e, GRAFT_E_SHAPE, "inputs have ranks %d and %d", *rank,
                                in[i].ndim);
            *rank = in[i].ndim;
        }
    }
    if (*rank == 0) return op_error(node, e, GRAFT_E_SHAPE, "cannot concatenate scalars");
    return GRAFT_OK;
}

graft_status op_infer_Concat(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1 << 30, n_out, 1, 1, e));
    if (!ir_node_attr(node, "axis"))
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "needs the axis attribute");
    graft_dtype dtype;
    int rank, axis;
    TRY(concat_common(node, in, n_in, &dtype, &rank, e));
    if (rank < 0) {
        op_unknown(&out[0], dtype);
        return GRAFT_OK;
    }
    TRY(op_axis(node, attr_i(node, "axis", 0), rank, &axis, e));
    rank_only(&out[0], dtype, rank);
    out[0].dims[axis] = 0;
    for (int i = 0; i < n_in; i++) {
        if (in[i].ndim < 0) {
            out[0].dims[axis] = -1;
            continue;
        }
        for (int d = 0; d < rank; d++) {
            int64_t v = in[i].dims[d];
            if (d == axis) {
                out[0].dims[d] = v < 0 || out[0].dims[d] < 0 ? -1 : out[0].dims[d] + v;
            } else if (out[0].dims[d] < 0) {
                out[0].dims[d] = v;
            } else if (v >= 0 && v != out[0].dims[d]) {
                char s[256];
                return op_error(node, e, GRAFT_E_SHAPE,
                                "input %d has shape %s, which differs off axis %d (%lld expected "
                                "on axis %d)",
                                i, shape_str(s, sizeof s, rank, in[i].dims), axis,
                                (long long)out[0].dims[d], d);
            }
        }
    }
    return GRAFT_OK;
}

/* Sizes of Split's outputs along the axis (dim: the input's size there, -1 unknown). */
static graft_status split_sizes(const ir_node *node, const value_info *in, int n_in, int n_out,
                                int64_t dim, int64_t *sizes, graft_err *e) {
    int_list split;
    if (node->opset < 13)
        TRY(int_list_from_attr(node, "split", INT_LIST_MAX, &split, e));
    else
        TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 1), "split", INT_LIST_MAX, &split,
                                e));
    const ir_attr *num = node->opset >= 18 ? ir_node_attr(node, "num_outputs") : NULL;
    if (num && split.state != INT_LIST_ABSENT)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "has both split and num_outputs");
    if (num && num->i != n_out)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "num_outputs is %lld but it has %d "
                        "outputs",
                        (long long)num->i, n_out);
    for (int i = 0; i < n_out; i++) sizes[i] = -1;
    if (split.state == INT_LIST_KNOWN) {
        int64_t sum = 0;
        if (split.n != n_out)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "split has %d sizes for %d outputs",
                            split.n, n_out);
        for (int i = 0; i < n_out; i++) {
            if (split.v[i] < 0)
                return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "split size %d is %lld", i,
                                (long long)split.v[i]);
            sizes[i] = split.v[i];
            sum += split.v[i];
        }
        if (dim >= 0 && sum != dim)
            return op_error(node, e, GRAFT_E_SHAPE, "split sizes add up to %lld, not %lld",
                            (long long)sum, (long long)dim);
        return GRAFT_OK;
    }
    if (split.state == INT_LIST_UNKNOWN || dim < 0) return GRAFT_OK;
    /* Equal parts; from opset 18 the last one may be smaller. */
    int64_t chunk = (dim + n_out - 1) / n_out;
    if ((node->opset < 18 && dim % n_out != 0) || chunk * (n_out - 1) > dim)
        return op_error(node, e, GRAFT_E_SHAPE, "cannot split %lld into %d equal parts",
                        (long long)dim, n_out);
    for (int i = 0; i < n_out; i++) sizes[i] = i < n_out - 1 ? chunk : dim - chunk * (n_out - 1);
    return GRAFT_OK;
}

graft_status op_infer_Split(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, node->opset < 13 ? 1 : 2, n_out, 1, INT_LIST_MAX, e));
    int r = in[0].ndim, axis = 0;
    int64_t sizes[INT_LIST_MAX];
    if (r >= 0) TRY(op_axis(node, attr_i(node, "axis", 0), r, &axis, e));
    TRY(split_sizes(node, in, n_in, n_out, r >= 0 ? in[0].dims[axis] : -1, sizes, e));
    for (int i = 0; i < n_out; i++) {
        op_same(&out[i], &in[0]);
        if (r >= 0) out[i].dims[axis] = sizes[i];
    }
    return GRAFT_OK;
}

/* Reject constant indices outside [-dim, dim) early, before anything runs. */
static graft_status gather_check_indices(const ir_node *node, const tensor *idx, int64_t dim,
                                         graft_err *e) {
    int64_t n = tensor_numel(idx);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = tensor_get_i64(idx, i);
        if (v < -dim || v >= dim)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "index %lld is out of range for an axis of size %lld", (long long)v,
                            (long long)dim);
    }
    return GRAFT_OK;
}

graft_status op_infer_Gather(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    const value_info *data = &in[0], *idx = &in[1];
    if (idx->dtype != GRAFT_DTYPE_UNDEFINED && idx->dtype != GRAFT_DTYPE_I32 &&
        idx->dtype != GRAFT_DTYPE_I64)
        return op_error(node, e, GRAFT_E_DTYPE, "indices must be int32 or int64, not %s",
                        graft_dtype_name(idx->dtype));
    if (data->ndim == 0) return op_error(node, e, GRAFT_E_SHAPE, "cannot gather from a scalar");
    if (data->ndim < 0 || idx->ndim < 0) {
        op_unknown(&out[0], data->dtype);
        return GRAFT_OK;
    }
    int axis, r = data->ndim, q = idx->ndim;
    TRY(op_axis(node, attr_i(node, "axis", 0), r, &axis, e));
    TRY(check_rank_limit(node, r - 1 + q, e));
    if (idx->value && data->dims[axis] >= 0)
        TRY(gather_check_indices(node, idx->value, data->dims[axis], e));
    op_unknown(&out[0], data->dtype);
    out[0].ndim = r - 1 + q;
    int k = 0;
    for (int i = 0; i < axis; i++) out[0].dims[k++] = data->dims[i];
    for (int i = 0; i < q; i++) out[0].dims[k++] = idx->dims[i];
    for (int i = axis + 1; i < r; i++) out[0].dims[k++] = data->dims[i];
    return GRAFT_OK;
}

graft_status op_infer_Slice(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, node->opset < 10 ? 1 : 3, node->opset < 10 ? 1 : 5, n_out, 1, 1,
                       e));
    slice_plan p;
    TRY(slice_plan_make(node, in, n_in, &p, e));
    if (p.ndim < 0) {
        op_unknown(&out[0], in[0].dtype);
        return GRAFT_OK;
    }
    rank_only(&out[0], in[0].dtype, p.ndim);
    for (int i = 0; i < p.ndim; i++) out[0].dims[i] = p.len[i];
    return GRAFT_OK;
}

graft_status op_infer_Pad(const ir_node *node, const value_info *in, int n_in, value_info *out,
                          int n_out, graft_err *e) {
    int max_in = node->opset < 11 ? 1 : node->opset < 18 ? 3 : 4;
    TRY(op_check_arity(node, n_in, node->opset < 11 ? 1 : 2, max_in, n_out, 1, 1, e));
    const value_info *cv = tensor_opt_input(in, n_in, 2);
    if (node->opset >= 11 && cv && cv->dtype != GRAFT_DTYPE_UNDEFINED &&
        in[0].dtype != GRAFT_DTYPE_UNDEFINED && cv->dtype != in[0].dtype)
        return op_error(node, e, GRAFT_E_DTYPE, "constant_value is %s but the data is %s",
                        graft_dtype_name(cv->dtype), graft_dtype_name(in[0].dtype));
    if (cv && cv->ndim > 1)
        return op_error(node, e, GRAFT_E_SHAPE, "constant_value must be a scalar");
    pad_plan p;
    TRY(pad_plan_make(node, in, n_in, &p, e));
    if (p.ndim < 0) {
        op_unknown(&out[0], in[0].dtype);
        return GRAFT_OK;
    }
    rank_only(&out[0], in[0].dtype, p.ndim);
    if (!p.pads_known || in[0].ndim < 0) return GRAFT_OK;
    for (int i = 0; i < p.ndim; i++) {
        int64_t d = in[0].dims[i];
        if (d < 0) continue;
        int64_t o = d + p.begin[i] + p.end[i];
        if (o < 0)
            return op_error(node, e, GRAFT_E_SHAPE, "pads make axis %d of size %lld negative", i,
                            (long long)d);
        if (p.mode != PAD_CONSTANT && d == 0 && o > 0)
            return op_error(node, e, GRAFT_E_SHAPE,
                            "cannot pad the empty axis %d in a mode that copies input values", i);
        out[0].dims[i] = o;
    }
    return GRAFT_OK;
}

/* tensor_index.c: shape inference and attribute checks of the indexing ops (GatherElements,
 * GatherND, ScatterND) and of Tile and Trilu, plus the run-time checks their kernels share. */
#include <string.h>

#include "tensor_index.h"

static bool index_dtype_ok(graft_dtype dt) {
    return dt == GRAFT_DTYPE_UNDEFINED || dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64;
}

static graft_status check_index_dtype(const ir_node *node, const char *what, graft_dtype dt,
                                      graft_err *e) {
    if (index_dtype_ok(dt)) return GRAFT_OK;
    return op_error(node, e, GRAFT_E_DTYPE, "%s must be int32 or int64, not %s", what,
                    graft_dtype_name(dt));
}

graft_status index_check_values(const ir_node *node, const tensor *idx, int64_t stride, int first,
                                const int64_t *dims, graft_err *e) {
    int64_t n = tensor_numel(idx);
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = stride > 1 ? i % stride : 0, dim = dims[pos];
        int64_t v = tensor_get_i64(idx, i);
        if (dim >= 0 && (v < -dim || v >= dim))
            return index_out_of_range(node, e, v, i, first + (int)pos, dim);
    }
    return GRAFT_OK;
}

graft_status index_out_of_range(const ir_node *node, graft_err *e, int64_t value, int64_t at,
                                int axis, int64_t dim) {
    return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                    "index %lld (entry %lld of the indices) is out of range for axis %d of size "
                    "%lld",
                    (long long)value, (long long)at, axis, (long long)dim);
}

/* ---- GatherElements ------------------------------------------------------------------------ */

graft_status op_infer_GatherElements(const ir_node *node, const value_info *in, int n_in,
                                     value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    const value_info *data = &in[0], *idx = &in[1];
    TRY(check_index_dtype(node, "indices", idx->dtype, e));
    op_same(&out[0], idx);
    out[0].dtype = data->dtype;
    if (data->ndim == 0) return op_error(node, e, GRAFT_E_SHAPE, "cannot gather from a scalar");
    if (data->ndim < 0 || idx->ndim < 0) return GRAFT_OK;
    if (data->ndim != idx->ndim)
        return op_error(node, e, GRAFT_E_SHAPE, "indices have rank %d but the data has rank %d",
                        idx->ndim, data->ndim);
    int axis;
    TRY(op_axis(node, attr_i(node, "axis", 0), data->ndim, &axis, e));
    for (int d = 0; d < data->ndim; d++)
        if (d != axis && data->dims[d] >= 0 && idx->dims[d] > data->dims[d])
            return op_error(node, e, GRAFT_E_SHAPE,
                            "indices have %lld entries on axis %d, the data only %lld",
                            (long long)idx->dims[d], d, (long long)data->dims[d]);
    if (idx->value && data->dims[axis] >= 0)
        TRY(index_check_values(node, idx->value, 1, axis, &data->dims[axis], e));
    return GRAFT_OK;
}

/* ---- GatherND, ScatterND ------------------------------------------------------------------- */

/* Checks the ranks of data (r) and indices (q, last dim m) against batch_dims b: m in 1..r-b. */
static graft_status nd_ranks(const ir_node *node, const value_info *data, const value_info *idx,
                             int64_t b, int64_t *m, graft_err *e) {
    *m = -1;
    if (b < 0)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "batch_dims is %lld", (long long)b);
    if (idx->ndim == 0) return op_error(node, e, GRAFT_E_SHAPE, "indices must have rank >= 1");
    if (data->ndim == 0) return op_error(node, e, GRAFT_E_SHAPE, "data must have rank >= 1");
    if (idx->ndim < 0 || data->ndim < 0) return GRAFT_OK;
    if (b >= idx->ndim || b >= data->ndim)
        return op_error(node, e, GRAFT_E_SHAPE,
                        "batch_dims %lld needs indices and data of higher rank than %d and %d",
                        (long long)b, idx->ndim, data->ndim);
    *m = idx->dims[idx->ndim - 1];
    if (*m >= 0 && (*m < 1 || *m > data->ndim - b))
        return op_error(node, e, GRAFT_E_SHAPE,
                        "indices' last dim is %lld, expected 1 to %lld (data rank %d, batch_dims "
                        "%lld)",
                        (long long)*m, (long long)(data->ndim - b), data->ndim, (long long)b);
    for (int d = 0; d < b; d++)
        if (idx->dims[d] >= 0 && data->dims[d] >= 0 && idx->dims[d] != data->dims[d])
            return op_error(node, e, GRAFT_E_SHAPE,
                            "batch dim %d is %lld in the indices but %lld in the data", d,
                            (long long)idx->dims[d], (long long)data->dims[d]);
    return GRAFT_OK;
}

graft_status op_infer_GatherND(const ir_node *node, const value_info *in, int n_in, value_info *out,
                               int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    const value_info *data = &in[0], *idx = &in[1];
    TRY(check_index_dtype(node, "indices", idx->dtype, e));
    int64_t b = node->opset >= 12 ? attr_i(node, "batch_dims", 0) : 0, m;
    TRY(nd_ranks(node, data, idx, b, &m, e));
    op_unknown(&out[0], data->dtype);
    if (m < 0) return GRAFT_OK;
    int rank = idx->ndim - 1 + data->ndim - (int)b - (int)m;
    if (rank > GRAFT_MAX_DIMS)
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "output rank %d exceeds the limit of %d",
                        rank, GRAFT_MAX_DIMS);
    out[0].ndim = 0;
    for (int d = 0; d < idx->ndim - 1; d++) out[0].dims[out[0].ndim++] = idx->dims[d];
    for (int d = (int)(b + m); d < data->ndim; d++) out[0].dims[out[0].ndim++] = data->dims[d];
    if (idx->value) TRY(index_check_values(node, idx->value, m, (int)b, data->dims + b, e));
    return GRAFT_OK;
}

graft_status scatter_reduction(const ir_node *node, scatter_mode *mode, graft_err *e) {
    const char *r = attr_s(node, "reduction", "none");
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    int allowed = node->opset >= 18 ? 5 : node->opset >= 16 ? 3 : 1;
    for (int i = 0; i < allowed; i++)
        if (strcmp(r, names[i]) == 0) {
            *mode = (scatter_mode)i;
            return GRAFT_OK;
        }
    return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "reduction '%s' is not valid at opset %d", r,
                    node->opset);
}

graft_status op_infer_ScatterND(const ir_node *node, const value_info *in, int n_in,
                                value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 3, 3, n_out, 1, 1, e));
    const value_info *data = &in[0], *idx = &in[1], *upd = &in[2];
    TRY(check_index_dtype(node, "indices", idx->dtype, e));
    scatter_mode mode;
    TRY(scatter_reduction(node, &mode, e));
    if (upd->dtype && data->dtype && upd->dtype != data->dtype)
        return op_error(node, e, GRAFT_E_DTYPE, "updates are %s but the data is %s",
                        graft_dtype_name(upd->dtype), graft_dtype_name(data->dtype));
    int64_t m;
    TRY(nd_ranks(node, data, idx, 0, &m, e));
    op_same(&out[0], data);
    if (m < 0 || upd->ndim < 0) return GRAFT_OK;
    /* updates: indices.shape[:-1] + data.shape[m:] */
    int want = idx->ndim - 1 + data->ndim - (int)m;
    int64_t dims[2 * GRAFT_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < idx->ndim - 1; d++) dims[k++] = idx->dims[d];
    for (int d = (int)m; d < data->ndim; d++) dims[k++] = data->dims[d];
    bool fits = upd->ndim == want;
    for (int d = 0; fits && d < want; d++)
        fits = dims[d] < 0 || upd->dims[d] < 0 || dims[d] == upd->dims[d];
    if (!fits) {
        char su[256], sw[256];
        return op_error(
            node, e, GRAFT_E_SHAPE, "updates have shape %s, expected %s",
            shape_str(su, sizeof su, upd->ndim, upd->dims),
            shape_str(sw, sizeof sw, want < GRAFT_MAX_DIMS ? want : GRAFT_MAX_DIMS, dims));
    }
    if (idx->value) TRY(index_check_values(node, idx->value, m, 0, data->dims, e));
    return GRAFT_OK;
}

/* ---- Tile, Trilu --------------------------------------------------------------------------- */

graft_status op_infer_Tile(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    int_list reps;
    TRY(int_list_from_input(node, tensor_opt_input(in, n_in, 1), "repeats", GRAFT_MAX_DIMS, &reps,
                            e));
    if (reps.state == INT_LIST_ABSENT)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "needs the repeats input");
    op_same(&out[0], &in[0]);
    int r = in[0].ndim;
    if (r >= 0 && reps.n >= 0 && reps.n != r)
        return op_error(node, e, GRAFT_E_SHAPE, "has %d repeats for an input of rank %d", reps.n,
                        r);
    if (r < 0) {
        if (reps.n < 0) return GRAFT_OK;
        out[0].ndim = r = reps.n;
        for (int d = 0; d < r; d++) out[0].dims[d] = -1;
    }
    for (int d = 0; d < r; d++) {
        if (reps.state != INT_LIST_KNOWN) {
            out[0].dims[d] = -1;
            continue;
        }
        if (reps.v[d] < 0)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "repeat %d is %lld", d,
                            (long long)reps.v[d]);
        if (out[0].dims[d] > 0 && reps.v[d] > OP_MAX_ELEMENTS / out[0].dims[d])
            return op_error(node, e, GRAFT_E_SHAPE,
                            "repeat %d (%lld) makes axis %d over graft's limit of 2^40 elements", d,
                            (long long)reps.v[d], d);
        if (out[0].dims[d] >= 0) out[0].dims[d] *= reps.v[d];
    }
    return GRAFT_OK;
}

graft_status trilu_diagonal(const ir_node *node, const tensor *k, int64_t *out, graft_err *e) {
    *out = 0;
    if (!k) return GRAFT_OK;
    if (tensor_numel(k) != 1 || op_read_ints(k, out, 1) != 1)
        return op_error(node, e, GRAFT_E_SHAPE, "k must be a single int64");
    return GRAFT_OK;
}

graft_status op_infer_Trilu(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 2, n_out, 1, 1, e));
    const value_info *k = tensor_opt_input(in, n_in, 1);
    if (k) TRY(check_index_dtype(node, "k", k->dtype, e));
    if (k && k->value) {
        int64_t diag;
        TRY(trilu_diagonal(node, k->value, &diag, e));
    }
    int64_t upper = attr_i(node, "upper", 1);
    if (upper != 0 && upper != 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "upper is %lld, expected 0 or 1",
                        (long long)upper);
    if (in[0].ndim >= 0 && in[0].ndim < 2)
        return op_error(node, e, GRAFT_E_SHAPE, "input must have rank >= 2, got %d", in[0].ndim);
    op_same(&out[0], &in[0]);
    return GRAFT_OK;
}

/* ---- run-time checks and plans ------------------------------------------------------------- */

static bool index_tensor_ok(const tensor *t) {
    return t && (t->dtype == GRAFT_DTYPE_I32 || t->dtype == GRAFT_DTYPE_I64);
}

graft_status gather_elements_check(const op_call *c, int *axis) {
    const tensor *data = c->in[0], *idx = c->in[1];
    if (!data || !idx) return op_missing_input(c, data ? 1 : 0);
    if (!index_tensor_ok(idx))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "indices must be int32 or int64");
    if (data->ndim == 0 || idx->ndim != data->ndim)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "indices have rank %d but the data has rank %d", idx->ndim, data->ndim);
    TRY(op_axis(c->node, attr_i(c->node, "axis", 0), data->ndim, axis, c->err));
    for (int d = 0; d < data->ndim; d++)
        if (d != *axis && idx->dims[d] > data->dims[d])
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "indices have %lld entries on axis %d, the data only %lld",
                            (long long)idx->dims[d], d, (long long)data->dims[d]);
    return op_expect_output(c, c->out[0], data->dtype, idx->ndim, idx->dims);
}

/* The plan over data with batch_dims b and tuples of m entries from idx. */
static graft_status nd_plan_make(const op_call *c, const tensor *data, const tensor *idx, int b,
                                 nd_plan *p) {
    memset(p, 0, sizeof *p);
    if (!index_tensor_ok(idx))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "indices must be int32 or int64");
    if (idx->ndim < 1 || data->ndim < 1 || b < 0 || b >= idx->ndim || b >= data->ndim)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "indices of rank %d, data of rank %d",
                        idx->ndim, data->ndim);
    int64_t m = idx->dims[idx->ndim - 1];
    if (m < 1 || m > data->ndim - b)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "indices' last dim is %lld, expected 1 to %d", (long long)m,
                        data->ndim - b);
    int64_t strides[GRAFT_MAX_DIMS];
    dims_strides(data->ndim, data->dims, strides);
    p->m = (int)m;
    p->first_axis = b;
    p->batches = dims_numel(b, data->dims);
    p->batch_stride = dims_numel(data->ndim - b, data->dims + b);
    p->slice = dims_numel(data->ndim - b - p->m, data->dims + b + p->m);
    p->tuples = dims_numel(idx->ndim - 1 - b, idx->dims + b);
    for (int j = 0; j < p->m; j++) {
        p->dims[j] = data->dims[b + j];
        p->strides[j] = strides[b + j];
    }
    for (int d = 0; d < b; d++)
        if (idx->dims[d] != data->dims[d])
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "batch dim %d is %lld in the indices but %lld in the data", d,
                            (long long)idx->dims[d], (long long)data->dims[d]);
    return GRAFT_OK;
}

graft_status gather_nd_plan(const op_call *c, nd_plan *p) {
    const tensor *data = c->in[0], *idx = c->in[1];
    if (!data || !idx) return op_missing_input(c, data ? 1 : 0);
    int b = c->node->opset >= 12 ? (int)attr_i(c->node, "batch_dims", 0) : 0;
    TRY(nd_plan_make(c, data, idx, b, p));
    int64_t dims[GRAFT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < idx->ndim - 1 && n < GRAFT_MAX_DIMS; d++) dims[n++] = idx->dims[d];
    for (int d = b + p->m; d < data->ndim && n < GRAFT_MAX_DIMS; d++) dims[n++] = data->dims[d];
    return op_expect_output(c, c->out[0], data->dtype, n, dims);
}

graft_status scatter_nd_plan(const op_call *c, nd_plan *p, scatter_mode *mode) {
    const tensor *data = c->in[0], *idx = c->in[1], *upd = c->in[2];
    if (!data || !idx || !upd) return op_missing_input(c, !data ? 0 : !idx ? 1 : 2);
    TRY(scatter_reduction(c->node, mode, c->err));
    TRY(nd_plan_make(c, data, idx, 0, p));
    if (upd->dtype != data->dtype || tensor_numel(upd) != p->tuples * p->slice ||
        upd->ndim != idx->ndim - 1 + data->ndim - p->m)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "updates must be indices.shape[:-1] + data.shape[%d:] of the data's dtype",
                        p->m);
    return op_expect_output(c, c->out[0], data->dtype, data->ndim, data->dims);
}

graft_status tile_check(const op_call *c, int64_t *repeats) {
    const tensor *x = c->in[0], *r = c->n_in > 1 ? c->in[1] : NULL;
    if (!x || !r) return op_missing_input(c, x ? 1 : 0);
    if (r->ndim > 1 || tensor_numel(r) != x->ndim || op_read_ints(r, repeats, GRAFT_MAX_DIMS) < 0)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "repeats must be %d int64 values, one per input axis", x->ndim);
    int64_t dims[GRAFT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        if (repeats[d] < 0)
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "repeat %d is %lld", d,
                            (long long)repeats[d]);
        if (x->dims[d] > 0 && repeats[d] > OP_MAX_ELEMENTS / x->dims[d])
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "repeat %d (%lld) makes axis %d over graft's limit of 2^40 elements", d,
                            (long long)repeats[d], d);
        dims[d] = x->dims[d] * repeats[d];
    }
    return op_expect_output(c, c->out[0], x->dtype, x->ndim, dims);
}

/* shape_plan.c: run-time plans and checks of the data-movement ops, shared by the reference
 * kernels (src/cpu/ref) and the device backends' host-side glue. */
#include "shape_plan.h"

#include <string.h>

graft_status op_expect_output(const op_call *c, const tensor *out, graft_dtype dtype, int ndim,
                              const int64_t *dims) {
    if (out->dtype == dtype && shapes_equal(out->ndim, out->dims, ndim, dims)) return GRAFT_OK;
    char s1[256], s2[256];
    return op_error(c->node, c->err, GRAFT_E_INTERNAL,
                    "output is %s %s but the kernel computes %s %s", graft_dtype_name(out->dtype),
                    shape_str(s1, sizeof s1, out->ndim, out->dims), graft_dtype_name(dtype),
                    shape_str(s2, sizeof s2, ndim, dims));
}

graft_status op_check_output(const op_call *c, int i, graft_dtype dt, int64_t numel) {
    const tensor *o = c->out[i];
    if (!o || o->dtype != dt || tensor_numel(o) != numel || (numel > 0 && !o->data))
        return op_error(c->node, c->err, GRAFT_E_INTERNAL,
                        "output %d was not allocated as inference said", i);
    return GRAFT_OK;
}

graft_status op_missing_input(const op_call *c, int i) {
    return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "input %d is missing", i);
}

graft_status op_bad_output(const op_call *c, const char *what) {
    char s[256];
    const tensor *out = c->out[0];
    return op_error(c->node, c->err, GRAFT_E_INTERNAL, "output %s %s does not fit %s",
                    graft_dtype_name(out->dtype), shape_str(s, sizeof s, out->ndim, out->dims),
                    what);
}

int call_value_infos(const op_call *c, value_info *vi, int max) {
    int n = c->n_in < max ? c->n_in : max;
    for (int i = 0; i < n; i++) tensor_value_info(&vi[i], c->in[i]);
    return n;
}

int view_simplify(int ndim, const int64_t *dims, const int64_t *strides, int64_t *d, int64_t *s) {
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == 0) return -1;
        if (dims[i] == 1) continue;
        if (n > 0 && s[n - 1] == strides[i] * dims[i]) {
            d[n - 1] *= dims[i];
            s[n - 1] = strides[i];
        } else {
            d[n] = dims[i];
            s[n] = strides[i];
            n++;
        }
    }
    return n;
}

graft_status same_bytes_check(const op_call *c) {
    const tensor *in = c->in[0];
    const tensor *out = c->out[0];
    if (!in) return op_missing_input(c, 0);
    if (in->dtype == out->dtype && tensor_nbytes(in) == tensor_nbytes(out)) return GRAFT_OK;
    char s1[256], s2[256];
    return op_error(c->node, c->err, GRAFT_E_INTERNAL, "cannot copy %s %s into %s %s",
                    graft_dtype_name(in->dtype), shape_str(s1, sizeof s1, in->ndim, in->dims),
                    graft_dtype_name(out->dtype), shape_str(s2, sizeof s2, out->ndim, out->dims));
}

graft_status transpose_view(const op_call *c, tensor_view *v) {
    const tensor *in = c->in[0];
    if (!in) return op_missing_input(c, 0);
    int perm[GRAFT_MAX_DIMS];
    TRY(transpose_perm(c->node, in->ndim, perm, c->err));
    int64_t in_strides[GRAFT_MAX_DIMS];
    dims_strides(in->ndim, in->dims, in_strides);
    v->ndim = in->ndim;
    v->offset = 0;
    for (int i = 0; i < in->ndim; i++) {
        v->dims[i] = in->dims[perm[i]];
        v->strides[i] = in_strides[perm[i]];
    }
    return op_expect_output(c, c->out[0], in->dtype, v->ndim, v->dims);
}

graft_status slice_view(const op_call *c, tensor_view *v) {
    const tensor *in = c->in[0];
    if (!in) return op_missing_input(c, 0);
    /* Only input 0 need be readable memory: the plan reads its shape and the host-side lists. */
    value_info vi[5];
    int n = call_value_infos(c, vi, 5);
    slice_plan p;
    TRY(slice_plan_make(c->node, vi, n, &p, c->err));
    TRY(op_expect_output(c, c->out[0], in->dtype, p.ndim, p.len));
    int64_t in_strides[GRAFT_MAX_DIMS];
    dims_strides(in->ndim, in->dims, in_strides);
    v->ndim = in->ndim;
    v->offset = 0;
    for (int i = 0; i < in->ndim; i++) {
        v->dims[i] = p.len[i];
        v->strides[i] = in_strides[i] * p.step[i];
        v->offset += p.start[i] * in_strides[i];
    }
    return GRAFT_OK;
}

graft_status expand_view(const op_call *c, tensor_view *v) {
    const tensor *in = c->in[0];
    const tensor *out = c->out[0];
    if (!in) return op_missing_input(c, 0);
    int64_t in_strides[GRAFT_MAX_DIMS];
    dims_strides(in->ndim, in->dims, in_strides);
    int lead = out->ndim - in->ndim;
    bool ok = lead >= 0 && out->dtype == in->dtype;
    v->ndim = out->ndim;
    v->offset = 0;
    for (int i = 0; ok && i < out->ndim; i++) {
        int j = i - lead;
        v->dims[i] = out->dims[i];
        if (j < 0 || in->dims[j] == 1)
            v->strides[i] = 0; /* broadcast: reread the same element */
        else if (in->dims[j] == out->dims[i])
            v->strides[i] = in_strides[j];
        else
            ok = false;
    }
    if (ok) return GRAFT_OK;
    char s1[256], s2[256];
    return op_error(c->node, c->err, GRAFT_E_SHAPE, "cannot expand %s to %s",
                    shape_str(s1, sizeof s1, in->ndim, in->dims),
                    shape_str(s2, sizeof s2, out->ndim, out->dims));
}

/* A piece of Concat's output (or Split's input) must match it everywhere but on the axis. */
static graft_status check_piece(const op_call *c, const tensor *whole, const tensor *piece,
                                int axis) {
    bool ok = piece->dtype == whole->dtype && piece->ndim == whole->ndim;
    for (int d = 0; ok && d < whole->ndim; d++)
        if (d != axis && piece->dims[d] != whole->dims[d]) ok = false;
    if (ok) return GRAFT_OK;
    char s1[256], s2[256];
    return op_error(
        c->node, c->err, GRAFT_E_SHAPE, "piece %s %s does not fit %s %s on axis %d",
        graft_dtype_name(piece->dtype), shape_str(s1, sizeof s1, piece->ndim, piece->dims),
        graft_dtype_name(whole->dtype), shape_str(s2, sizeof s2, whole->ndim, whole->dims), axis);
}

graft_status concat_pieces_check(const op_call *c, const tensor *whole, tensor *const *pieces,
                                 int n, int *axis) {
    TRY(op_axis(c->node, attr_i(c->node, "axis", 0), whole->ndim, axis, c->err));
    int64_t sum_axis = 0;
    for (int i = 0; i < n; i++) {
        if (!pieces[i]) return op_missing_input(c, i);
        TRY(check_piece(c, whole, pieces[i], *axis));
        sum_axis += pieces[i]->dims[*axis];
    }
    if (sum_axis != whole->dims[*axis])
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "pieces add up to %lld on axis %d, not %lld", (long long)sum_axis, *axis,
                        (long long)whole->dims[*axis]);
    return GRAFT_OK;
}

graft_status gather_check(const op_call *c, int *axis) {
    const tensor *data = c->in[0], *idx = c->in[1];
    if (!data || !idx) return op_missing_input(c, data ? 1 : 0);
    if (data->ndim == 0)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "cannot gather from a scalar");
    if (idx->dtype != GRAFT_DTYPE_I64 && idx->dtype != GRAFT_DTYPE_I32)
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "indices must be int32 or int64");
    TRY(op_axis(c->node, attr_i(c->node, "axis", 0), data->ndim, axis, c->err));
    int64_t dims[GRAFT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < *axis; i++) dims[nd++] = data->dims[i];
    for (int i = 0; i < idx->ndim && nd < GRAFT_MAX_DIMS; i++) dims[nd++] = idx->dims[i];
    for (int i = *axis + 1; i < data->ndim && nd < GRAFT_MAX_DIMS; i++) dims[nd++] = data->dims[i];
    return op_expect_output(c, c->out[0], data->dtype, data->ndim - 1 + idx->ndim, dims);
}

/* The pad value as elem bytes of dtype: the float attribute before opset 11, then the optional
 * constant_value input (host memory; zero when omitted). */
static graft_status pad_constant(const op_call *c, graft_dtype dtype, unsigned char *bytes) {
    memset(bytes, 0, 16);
    if (c->node->opset < 11) {
        tensor t;
        memset(&t, 0, sizeof t);
        t.dtype = dtype;
        t.data = bytes;
        tensor_set_f64(&t, 0, attr_f(c->node, "value", 0.0f));
        return GRAFT_OK;
    }
    const tensor *cv = c->n_in > 2 ? c->in[2] : NULL;
    if (!cv || tensor_numel(cv) < 1) return GRAFT_OK;
    if (cv->dtype != dtype)
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "constant_value is %s, data is %s",
                        graft_dtype_name(cv->dtype), graft_dtype_name(dtype));
    memcpy(bytes, cv->data, graft_dtype_size(dtype));
    return GRAFT_OK;
}

/* The output shape the pads give, checked against the one inference set. */
static graft_status pad_check(const op_call *c, const pad_plan *p) {
    const tensor *in = c->in[0], *out = c->out[0];
    int64_t dims[GRAFT_MAX_DIMS];
    for (int k = 0; k < in->ndim; k++) {
        dims[k] = in->dims[k] + p->begin[k] + p->end[k];
        if (p->mode != PAD_CONSTANT && in->dims[k] == 0 && dims[k] > 0)
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "cannot pad the empty axis %d in a mode that copies input values", k);
    }
    if (!p->pads_known || out->dtype != in->dtype ||
        !shapes_equal(out->ndim, out->dims, in->ndim, dims)) {
        char s1[256], s2[256];
        return op_error(c->node, c->err, GRAFT_E_INTERNAL, "output %s does not match pads (%s)",
                        shape_str(s1, sizeof s1, out->ndim, out->dims),
                        shape_str(s2, sizeof s2, in->ndim, dims));
    }
    return GRAFT_OK;
}

graft_status pad_call_plan(const op_call *c, pad_plan *p, unsigned char *cval) {
    value_info vi[4];
    int n = call_value_infos(c, vi, 4);
    TRY(pad_plan_make(c->node, vi, n, p, c->err));
    TRY(pad_check(c, p));
    return pad_constant(c, c->in[0]->dtype, cval);
}

graft_status range_check(const op_call *c, int64_t *n) {
    const tensor *out = c->out[0];
    for (int i = 0; i < 3; i++)
        if (!c->in[i] || tensor_numel(c->in[i]) != 1 || c->in[i]->dtype != out->dtype)
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "start, limit and delta must be one-element tensors of the output's "
                            "dtype");
    *n = out->ndim == 1 ? out->dims[0] : -1;
    if (*n < 0) return op_bad_output(c, "a range");
    return GRAFT_OK;
}

graft_status constant_of_shape_value(const op_call *c, const tensor **value) {
    const tensor *out = c->out[0];
    *value = attr_t(c->node, "value");
    if (!*value)
        return out->dtype == GRAFT_DTYPE_F32 ? GRAFT_OK
                                             : op_bad_output(c, "the default float zero");
    if ((*value)->dtype != out->dtype || tensor_numel(*value) != 1 || !(*value)->data)
        return op_bad_output(c, "the value attribute");
    return GRAFT_OK;
}

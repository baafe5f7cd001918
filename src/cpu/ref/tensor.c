/* tensor.c: reference kernels of the data-movement ops: reshapes, Transpose, Concat, Split,
 * Gather, Slice and Expand. They move bytes, so every dtype shares one path. */
#include <stdlib.h>
#include <string.h>

#include "../../ops/tensor_plan.h"
#include "tensor_copy.h"

/* Outputs come shaped by inference; a kernel that disagrees must stop rather than overrun. */
static graft_status expect_shape(const op_call *c, const tensor *out, graft_dtype dtype, int ndim,
                                 const int64_t *dims) {
    if (out->dtype == dtype && shapes_equal(out->ndim, out->dims, ndim, dims)) return GRAFT_OK;
    char s1[256], s2[256];
    return op_error(c->node, c->err, GRAFT_E_INTERNAL,
                    "output is %s %s but the kernel computes %s %s", graft_dtype_name(out->dtype),
                    shape_str(s1, sizeof s1, out->ndim, out->dims), graft_dtype_name(dtype),
                    shape_str(s2, sizeof s2, ndim, dims));
}

static graft_status missing_input(const op_call *c, int i) {
    return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "input %d is missing", i);
}

/* Reshape-like ops keep the bytes in order; only the shape (already on the output) changes. */
static graft_status copy_same_bytes(const op_call *c) {
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    if (!in) return missing_input(c, 0);
    int64_t nbytes = tensor_nbytes(in);
    if (in->dtype != out->dtype || nbytes != tensor_nbytes(out)) {
        char s1[256], s2[256];
        return op_error(c->node, c->err, GRAFT_E_INTERNAL, "cannot copy %s %s into %s %s",
                        graft_dtype_name(in->dtype), shape_str(s1, sizeof s1, in->ndim, in->dims),
                        graft_dtype_name(out->dtype),
                        shape_str(s2, sizeof s2, out->ndim, out->dims));
    }
    if (nbytes > 0 && out->data != in->data) memcpy(out->data, in->data, (size_t)nbytes);
    return GRAFT_OK;
}

graft_status ref_Flatten(const op_call *c) {
    return copy_same_bytes(c);
}
graft_status ref_Reshape(const op_call *c) {
    return copy_same_bytes(c);
}
graft_status ref_Squeeze(const op_call *c) {
    return copy_same_bytes(c);
}
graft_status ref_Unsqueeze(const op_call *c) {
    return copy_same_bytes(c);
}

graft_status ref_Transpose(const op_call *c) {
    const tensor *in = c->in[0];
    if (!in) return missing_input(c, 0);
    int perm[GRAFT_MAX_DIMS];
    TRY(transpose_perm(c->node, in->ndim, perm, c->err));
    int64_t in_strides[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS], dims[GRAFT_MAX_DIMS];
    dims_strides(in->ndim, in->dims, in_strides);
    for (int i = 0; i < in->ndim; i++) {
        dims[i] = in->dims[perm[i]];
        strides[i] = in_strides[perm[i]];
    }
    TRY(expect_shape(c, c->out[0], in->dtype, in->ndim, dims));
    strided_copy(c->out[0]->data, in->data, graft_dtype_size(in->dtype), in->ndim, dims, strides);
    return GRAFT_OK;
}

/* Bytes of one "row" of t along axis: dims[axis] * (product of the dims after it) elements. */
static int64_t axis_block_bytes(const tensor *t, int axis) {
    return dtype_bytes(t->dtype, dims_numel(t->ndim - axis, t->dims + axis));
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

/* Concat and Split both walk the outer rows, copying each piece's block of every row; `join`
 * copies pieces into whole, otherwise whole is cut into pieces. */
static graft_status join_or_cut(const op_call *c, tensor *whole, tensor *const *pieces, int n,
                                bool join) {
    int axis;
    TRY(op_axis(c->node, attr_i(c->node, "axis", 0), whole->ndim, &axis, c->err));
    int64_t *offsets = calloc((size_t)n + 1, sizeof(int64_t)), sum_axis = 0;
    if (!offsets) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory");
    for (int i = 0; i < n; i++) {
        graft_status st = pieces[i] ? check_piece(c, whole, pieces[i], axis) : missing_input(c, i);
        if (st != GRAFT_OK) {
            free(offsets);
            return st;
        }
        offsets[i + 1] = offsets[i] + axis_block_bytes(pieces[i], axis);
        sum_axis += pieces[i]->dims[axis];
    }
    if (sum_axis != whole->dims[axis]) {
        free(offsets);
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "pieces add up to %lld on axis %d, not "
                        "%lld",
                        (long long)sum_axis, axis, (long long)whole->dims[axis]);
    }
    int64_t outer = dims_numel(axis, whole->dims), row = offsets[n];
    char *base = whole->data;
#pragma omp parallel for schedule(static) if (outer * row >= 4 * TENSOR_PARALLEL_MIN)
    for (int64_t o = 0; o < outer; o++) {
        for (int i = 0; i < n; i++) {
            int64_t len = offsets[i + 1] - offsets[i];
            char *piece = (char *)pieces[i]->data + o * len, *w = base + o * row + offsets[i];
            if (len == 0) continue;
            if (join)
                memcpy(w, piece, (size_t)len);
            else
                memcpy(piece, w, (size_t)len);
        }
    }
    free(offsets);
    return GRAFT_OK;
}

graft_status ref_Concat(const op_call *c) {
    return join_or_cut(c, c->out[0], (tensor *const *)c->in, c->n_in, true);
}

graft_status ref_Split(const op_call *c) {
    if (!c->in[0]) return missing_input(c, 0);
    return join_or_cut(c, (tensor *)c->in[0], c->out, c->n_out, false);
}

/* Indices as int64, negative ones counted from the end; an index outside [-dim, dim) fails. */
static graft_status gather_indices(const op_call *c, const tensor *idx, int64_t dim,
                                   int64_t **out) {
    if (idx->dtype != GRAFT_DTYPE_I64 && idx->dtype != GRAFT_DTYPE_I32)
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "indices must be int32 or int64");
    int64_t n = tensor_numel(idx);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!v) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory for indices");
    for (int64_t i = 0; i < n; i++) {
        int64_t k = tensor_get_i64(idx, i);
        if (k < -dim || k >= dim) {
            free(v);
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "index %lld (at %lld) is out of range for an axis of size %lld",
                            (long long)k, (long long)i, (long long)dim);
        }
        v[i] = k < 0 ? k + dim : k;
    }
    *out = v;
    return GRAFT_OK;
}

graft_status ref_Gather(const op_call *c) {
    const tensor *data = c->in[0], *idx = c->in[1];
    if (!data || !idx) return missing_input(c, data ? 1 : 0);
    if (data->ndim == 0)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "cannot gather from a scalar");
    int axis;
    TRY(op_axis(c->node, attr_i(c->node, "axis", 0), data->ndim, &axis, c->err));
    int64_t dims[GRAFT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < axis; i++) dims[nd++] = data->dims[i];
    for (int i = 0; i < idx->ndim && nd < GRAFT_MAX_DIMS; i++) dims[nd++] = idx->dims[i];
    for (int i = axis + 1; i < data->ndim && nd < GRAFT_MAX_DIMS; i++) dims[nd++] = data->dims[i];
    TRY(expect_shape(c, c->out[0], data->dtype, data->ndim - 1 + idx->ndim, dims));
    int64_t dim = data->dims[axis], *v;
    TRY(gather_indices(c, idx, dim, &v));
    int64_t outer = dims_numel(axis, data->dims), n = tensor_numel(idx);
    int64_t block =
        dtype_bytes(data->dtype, dims_numel(data->ndim - axis - 1, data->dims + axis + 1));
    const char *src = data->data;
    char *dst = c->out[0]->data;
#pragma omp parallel for schedule(static) if (outer * n * block >= 4 * TENSOR_PARALLEL_MIN)
    for (int64_t t = 0; t < outer * n; t++) {
        int64_t o = t / n, j = t % n;
        memcpy(dst + t * block, src + (o * dim + v[j]) * block, (size_t)block);
    }
    free(v);
    return GRAFT_OK;
}

/* value_info views of a call's inputs, for the plans shared with inference. */
static int call_value_infos(const op_call *c, value_info *vi, int max) {
    int n = c->n_in < max ? c->n_in : max;
    for (int i = 0; i < n; i++) tensor_value_info(&vi[i], c->in[i]);
    return n;
}

graft_status ref_Slice(const op_call *c) {
    const tensor *in = c->in[0];
    if (!in) return missing_input(c, 0);
    value_info vi[5];
    int n = call_value_infos(c, vi, 5);
    slice_plan p;
    TRY(slice_plan_make(c->node, vi, n, &p, c->err));
    TRY(expect_shape(c, c->out[0], in->dtype, p.ndim, p.len));
    if (tensor_numel(c->out[0]) == 0) return GRAFT_OK;
    int64_t in_strides[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS], first = 0;
    dims_strides(in->ndim, in->dims, in_strides);
    for (int i = 0; i < in->ndim; i++) {
        strides[i] = in_strides[i] * p.step[i];
        first += p.start[i] * in_strides[i];
    }
    size_t elem = graft_dtype_size(in->dtype);
    strided_copy(c->out[0]->data, (const char *)in->data + first * (int64_t)elem, elem, in->ndim,
                 p.len, strides);
    return GRAFT_OK;
}

graft_status ref_Expand(const op_call *c) {
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    if (!in) return missing_input(c, 0);
    int64_t in_strides[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS];
    dims_strides(in->ndim, in->dims, in_strides);
    int lead = out->ndim - in->ndim;
    bool ok = lead >= 0 && out->dtype == in->dtype;
    for (int i = 0; ok && i < out->ndim; i++) {
        int j = i - lead;
        if (j < 0 || in->dims[j] == 1)
            strides[i] = 0; /* broadcast: reread the same element */
        else if (in->dims[j] == out->dims[i])
            strides[i] = in_strides[j];
        else
            ok = false;
    }
    if (!ok) {
        char s1[256], s2[256];
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "cannot expand %s to %s",
                        shape_str(s1, sizeof s1, in->ndim, in->dims),
                        shape_str(s2, sizeof s2, out->ndim, out->dims));
    }
    strided_copy(out->data, in->data, graft_dtype_size(in->dtype), out->ndim, out->dims, strides);
    return GRAFT_OK;
}

/* tensor.c: reference kernels of the data-movement ops: reshapes, Transpose, Concat, Split,
 * Gather, Slice and Expand. They move bytes, so every dtype shares one path. */
#include <stdlib.h>
#include <string.h>

#include "../../ops/shape_plan.h"
#include "tensor_copy.h"

/* Reshape-like ops keep the bytes in order; only the shape (already on the output) changes. */
static graft_status copy_same_bytes(const op_call *c) {
    TRY(same_bytes_check(c));
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    int64_t nbytes = tensor_nbytes(in);
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

/* Transpose, Slice and Expand copy a view of the input densely into the output. */
static graft_status copy_input_view(const op_call *c,
                                    graft_status (*plan)(const op_call *, tensor_view *)) {
    tensor_view v;
    TRY(plan(c, &v));
    if (tensor_numel(c->out[0]) == 0) return GRAFT_OK;
    size_t elem = graft_dtype_size(c->in[0]->dtype);
    strided_copy(c->out[0]->data, (const char *)c->in[0]->data + v.offset * (int64_t)elem, elem,
                 v.ndim, v.dims, v.strides);
    return GRAFT_OK;
}

graft_status ref_Transpose(const op_call *c) {
    return copy_input_view(c, transpose_view);
}

graft_status ref_Slice(const op_call *c) {
    return copy_input_view(c, slice_view);
}

graft_status ref_Expand(const op_call *c) {
    return copy_input_view(c, expand_view);
}

/* Bytes of one "row" of t along axis: dims[axis] * (product of the dims after it) elements. */
static int64_t axis_block_bytes(const tensor *t, int axis) {
    return dtype_bytes(t->dtype, dims_numel(t->ndim - axis, t->dims + axis));
}

/* Concat and Split both walk the outer rows, copying each piece's block of every row; `join`
 * copies pieces into whole, otherwise whole is cut into pieces. */
static graft_status join_or_cut(const op_call *c, tensor *whole, tensor *const *pieces, int n,
                                bool join) {
    int axis;
    TRY(concat_pieces_check(c, whole, pieces, n, &axis));
    int64_t *offsets = calloc((size_t)n + 1, sizeof(int64_t));
    if (!offsets) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory");
    for (int i = 0; i < n; i++) offsets[i + 1] = offsets[i] + axis_block_bytes(pieces[i], axis);
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
    if (!c->in[0]) return op_missing_input(c, 0);
    return join_or_cut(c, (tensor *)c->in[0], c->out, c->n_out, false);
}

/* Indices as int64, negative ones counted from the end; an index outside [-dim, dim) fails. */
static graft_status gather_indices(const op_call *c, const tensor *idx, int64_t dim,
                                   int64_t **out) {
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
    int axis;
    TRY(gather_check(c, &axis));
    const tensor *data = c->in[0], *idx = c->in[1];
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

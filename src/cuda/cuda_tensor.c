/* cuda_tensor.c: CUDA kernels of the data-movement ops (reshapes, Transpose, Slice, Expand,
 * Concat, Split, Gather): host-side checks, views and unit sizes; launchers in tensor.cu. */
#include <stdint.h>
#include <string.h>

#include "../ops/shape_plan.h"
#include "cuda_internal.h"
#include "cuda_tensor.h"
#include "tensor_launch.h"

/* Largest power of two up to `unit` that divides v (a size, stride or address remainder). */
static int unit_dividing(int unit, int64_t v) {
    while (unit > 1 && v % unit != 0) unit /= 2;
    return unit;
}

static int64_t addr_mod16(const void *p) {
    return (int64_t)((uintptr_t)p & 15u);
}

/* A copy view in units of `unit` bytes: n axes (-1 empty, 0 a single unit). */
typedef struct copy_view {
    int n, unit;
    int64_t d[CUDA_TENSOR_VIEW_DIMS], s[CUDA_TENSOR_VIEW_DIMS];
} copy_view;

/* Rewrite an element view as bytes (each element one more axis of elem contiguous bytes), merge,
 * then regroup the bytes into the widest unit that every row length, stride and both pointers
 * allow: rows that are contiguous in src move as 16-byte words when aligned. */
static void plan_view(copy_view *v, size_t elem, int ndim, const int64_t *dims,
                      const int64_t *strides, const void *src, const void *dst) {
    int64_t bd[CUDA_TENSOR_VIEW_DIMS], bs[CUDA_TENSOR_VIEW_DIMS];
    for (int k = 0; k < ndim; k++) {
        bd[k] = dims[k];
        bs[k] = strides[k] * (int64_t)elem;
    }
    bd[ndim] = (int64_t)elem;
    bs[ndim] = 1;
    int n = view_simplify(ndim + 1, bd, bs, v->d, v->s);
    v->n = n;
    v->unit = 1;
    if (n <= 0) {
        v->unit = (int)elem; /* n == 0: one element of one byte, or an empty view */
        return;
    }
    /* A strided last axis (only for 1-byte elements) keeps single bytes. */
    if (v->s[n - 1] != 1) return;
    int u = unit_dividing(16, v->d[n - 1]);
    for (int k = 0; k < n - 1; k++) u = unit_dividing(u, v->s[k]);
    u = unit_dividing(u, addr_mod16(src));
    u = unit_dividing(u, addr_mod16(dst));
    v->d[n - 1] /= u;
    for (int k = 0; k < n - 1; k++) v->s[k] /= u;
    v->unit = u;
    int64_t d[CUDA_TENSOR_VIEW_DIMS], s[CUDA_TENSOR_VIEW_DIMS];
    memcpy(d, v->d, sizeof d);
    memcpy(s, v->s, sizeof s);
    v->n = view_simplify(n, d, s, v->d, v->s);
}

/* The axis that is contiguous in src when the last one is not, if tiling pays off; else -1. */
static int tiled_axis(const copy_view *v) {
    int n = v->n;
    if (n < 2 || v->s[n - 1] == 1 || v->s[n - 1] == 0 || v->d[n - 1] < 8) return -1;
    for (int k = n - 2; k >= 0; k--)
        if (v->s[k] == 1) return v->d[k] >= 8 ? k : -1;
    return -1;
}

graft_status cuda_tensor_copy_strided(cuda_backend *be, const op_call *c, void *dst,
                                      const void *src, size_t elem, int ndim, const int64_t *dims,
                                      const int64_t *strides) {
    copy_view v;
    plan_view(&v, elem, ndim, dims, strides, src, dst);
    graft_err *e = c->err;
    if (v.n < 0) return GRAFT_OK;
    if (v.n == 0 || (v.n == 1 && v.s[0] == 1)) {
        size_t bytes = (size_t)v.unit * (size_t)(v.n == 0 ? 1 : v.d[0]);
        CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, be->stream),
                 "copying a tensor view on the GPU");
        return GRAFT_OK;
    }
    int axis = tiled_axis(&v);
    if (axis >= 0)
        CUDA_TRY(e, cuda_tensor_copy_tiled(dst, src, v.unit, v.n, v.d, v.s, axis, be->stream),
                 "launching the tiled copy kernel");
    else
        CUDA_TRY(e, cuda_tensor_copy_view(dst, src, v.unit, v.n, v.d, v.s, be->stream),
                 "launching the strided copy kernel");
    return GRAFT_OK;
}

/* Reshape-like ops keep the bytes in order; only the shape (already on the output) changes. */
static graft_status copy_same_bytes(cuda_backend *be, const op_call *c, bool *handled) {
    *handled = true;
    TRY(same_bytes_check(c));
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    int64_t nbytes = tensor_nbytes(in);
    if (nbytes > 0 && out->data != in->data)
        CUDA_TRY(c->err,
                 cudaMemcpyAsync(out->data, in->data, (size_t)nbytes, cudaMemcpyDeviceToDevice,
                                 be->stream),
                 "copying a reshaped tensor on the GPU");
    return GRAFT_OK;
}

static graft_status cu_reshape(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return copy_same_bytes(be, c, handled);
}

/* Transpose, Slice and Expand copy a view of the input densely into the output. */
static graft_status copy_input_view(cuda_backend *be, const op_call *c, bool *handled,
                                    graft_status (*plan)(const op_call *, tensor_view *)) {
    *handled = true;
    tensor_view v;
    TRY(plan(c, &v));
    if (tensor_numel(c->out[0]) == 0) return GRAFT_OK;
    size_t elem = graft_dtype_size(c->in[0]->dtype);
    return cuda_tensor_copy_strided(be, c, c->out[0]->data,
                                    (const char *)c->in[0]->data + v.offset * (int64_t)elem, elem,
                                    v.ndim, v.dims, v.strides);
}

static graft_status cu_transpose(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return copy_input_view(be, c, handled, transpose_view);
}

static graft_status cu_slice(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return copy_input_view(be, c, handled, slice_view);
}

static graft_status cu_expand(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return copy_input_view(be, c, handled, expand_view);
}

/* Bytes of one row of t along axis: dims[axis] * (product of the dims after it) elements. */
static int64_t axis_block_bytes(const tensor *t, int axis) {
    return dtype_bytes(t->dtype, dims_numel(t->ndim - axis, t->dims + axis));
}

/* The widest unit that every row, piece width, piece offset and pointer allows (the pieces
 * already checked against whole). */
static int pieces_unit(const tensor *whole, tensor *const *pieces, int n, int axis) {
    int64_t off = 0;
    int u = unit_dividing(16, addr_mod16(whole->data));
    for (int i = 0; i < n; i++) {
        int64_t w = axis_block_bytes(pieces[i], axis);
        if (w > 0)
            u = unit_dividing(unit_dividing(unit_dividing(u, w), off), addr_mod16(pieces[i]->data));
        off += w;
    }
    return unit_dividing(u, off);
}

/* Concat (join) and Split (cut) move each piece's block of every outer row, a batch of pieces
 * per launch. */
static graft_status join_or_cut(cuda_backend *be, const op_call *c, tensor *whole,
                                tensor *const *pieces, int n, bool join) {
    int axis;
    TRY(concat_pieces_check(c, whole, pieces, n, &axis));
    int unit = pieces_unit(whole, pieces, n, axis);
    int64_t rows = dims_numel(axis, whole->dims), row = axis_block_bytes(whole, axis) / unit;
    if (rows == 0 || row == 0) return GRAFT_OK;
    int64_t off = 0;
    for (int b = 0; b < n; b += CUDA_TENSOR_PIECES) {
        void *ptr[CUDA_TENSOR_PIECES];
        int64_t widths[CUDA_TENSOR_PIECES], offsets[CUDA_TENSOR_PIECES];
        int m = n - b < CUDA_TENSOR_PIECES ? n - b : CUDA_TENSOR_PIECES;
        for (int i = 0; i < m; i++) {
            ptr[i] = pieces[b + i]->data;
            widths[i] = axis_block_bytes(pieces[b + i], axis) / unit;
            offsets[i] = off;
            off += widths[i];
        }
        CUDA_TRY(c->err,
                 cuda_tensor_copy_pieces(whole->data, ptr, widths, offsets, m, rows, row, unit,
                                         join, be->stream),
                 join ? "launching the Concat kernel" : "launching the Split kernel");
    }
    return GRAFT_OK;
}

static graft_status cu_concat(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = true;
    return join_or_cut(be, c, c->out[0], (tensor *const *)c->in, c->n_in, true);
}

/* Split's sizes need no reading: inference has already shaped every output from them. */
static graft_status cu_split(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = true;
    if (!c->in[0]) return op_missing_input(c, 0);
    return join_or_cut(be, c, (tensor *)c->in[0], c->out, c->n_out, false);
}

static graft_status cu_gather(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = true;
    int axis;
    TRY(gather_check(c, &axis));
    const tensor *data = c->in[0], *idx = c->in[1];
    int64_t dim = data->dims[axis], n = tensor_numel(idx);
    int64_t outer = dims_numel(axis, data->dims);
    int64_t block =
        dtype_bytes(data->dtype, dims_numel(data->ndim - axis - 1, data->dims + axis + 1));
    /* Every index is out of range for an empty axis: that much the host can see. */
    if (dim == 0 && n > 0)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "gathers %lld indices from an empty axis", (long long)n);
    if (tensor_numel(c->out[0]) == 0) return GRAFT_OK;
    if ((uintptr_t)idx->data % graft_dtype_size(idx->dtype) != 0) {
        *handled = false; /* misaligned indices cannot be loaded whole on the device */
        return GRAFT_OK;
    }
    int unit = unit_dividing(unit_dividing(unit_dividing(16, block), addr_mod16(data->data)),
                             addr_mod16(c->out[0]->data));
    /* Out-of-range indices give zero rows and raise the backend's flag, which the next
     * synchronize reports as an error (see tensor.cu). */
    CUDA_TRY(c->err,
             cuda_tensor_gather(c->out[0]->data, data->data, idx->data,
                                idx->dtype == GRAFT_DTYPE_I64, outer, dim, n, block / unit, unit,
                                be->bad_index, be->stream),
             "launching the Gather kernel");
    return GRAFT_OK;
}

const cuda_kernel cuda_tensor_kernels[] = {
    {"Flatten", cu_reshape, NULL},
    {"Reshape", cu_reshape, NULL},
    {"Squeeze", cu_reshape, NULL},
    {"Unsqueeze", cu_reshape, NULL},
    {"Transpose", cu_transpose, NULL},
    {"Slice", cu_slice, NULL},
    {"Expand", cu_expand, NULL},
    {"Concat", cu_concat, NULL},
    {"Split", cu_split, NULL},
    {"Gather", cu_gather, NULL},
    {"ConstantOfShape", cuda_tensor_constant_of_shape, NULL},
    {"Shape", cuda_tensor_shape, NULL},
    {"Range", cuda_tensor_range_kernel, NULL},
    {"Pad", cuda_tensor_pad_kernel, NULL},
    {"GatherElements", cuda_tensor_gather_elements, NULL},
    {"GatherND", cuda_tensor_gather_nd, NULL},
    {"ScatterND", cuda_tensor_scatter_nd, NULL},
    {"Tile", cuda_tensor_tile, NULL},
    {"Trilu", cuda_tensor_trilu, NULL},
    {"Einsum", cuda_tensor_einsum, NULL},
    {NULL, NULL, NULL},
};

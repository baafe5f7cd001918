/* tensor_index.c: reference kernels of GatherElements, GatherND, ScatterND, Tile and Trilu. The
 * gathers and Tile move bytes (every dtype shares one path); an index out of range fails with
 * the node, the value and the axis size before anything is written. */
#include <stdlib.h>
#include <string.h>

#include "../../core/scalar.h"
#include "../../ops/tensor_index.h"
#include "tensor_copy.h"

/* Index i of idx normalised into [0, dim), or an error naming it. */
static graft_status index_at(const op_call *c, const tensor *idx, int64_t i, int axis, int64_t dim,
                             int64_t *out) {
    int64_t k = tensor_get_i64(idx, i);
    if (k < -dim || k >= dim) return index_out_of_range(c->node, c->err, k, i, axis, dim);
    *out = k < 0 ? k + dim : k;
    return GRAFT_OK;
}

graft_status ref_GatherElements(const op_call *c) {
    int axis;
    TRY(gather_elements_check(c, &axis));
    const tensor *data = c->in[0], *idx = c->in[1];
    int r = data->ndim;
    int64_t n = tensor_numel(idx), dstr[GRAFT_MAX_DIMS];
    dims_strides(r, data->dims, dstr);
    size_t elem = graft_dtype_size(data->dtype);
    const char *src = data->data;
    char *dst = c->out[0]->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0, k = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t coord = rem % idx->dims[d];
            rem /= idx->dims[d];
            if (d != axis) off += coord * dstr[d];
        }
        TRY(index_at(c, idx, i, axis, data->dims[axis], &k));
        memcpy(dst + i * (int64_t)elem, src + (off + k * dstr[axis]) * (int64_t)elem, elem);
    }
    return GRAFT_OK;
}

/* The data offset (in elements) of every tuple of an ND plan, all indices checked first. */
static graft_status nd_offsets(const op_call *c, const tensor *idx, const nd_plan *p,
                               int64_t **out) {
    int64_t n = p->batches * p->tuples;
    int64_t *offs = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!offs) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory for indices");
    for (int64_t t = 0; t < n; t++) {
        int64_t off = (t / (p->tuples > 0 ? p->tuples : 1)) * p->batch_stride;
        for (int j = 0; j < p->m; j++) {
            int64_t k = 0;
            graft_status st = index_at(c, idx, t * p->m + j, p->first_axis + j, p->dims[j], &k);
            if (st != GRAFT_OK) {
                free(offs);
                return st;
            }
            off += k * p->strides[j];
        }
        offs[t] = off;
    }
    *out = offs;
    return GRAFT_OK;
}

graft_status ref_GatherND(const op_call *c) {
    nd_plan p;
    TRY(gather_nd_plan(c, &p));
    int64_t *offs;
    TRY(nd_offsets(c, c->in[1], &p, &offs));
    size_t elem = graft_dtype_size(c->in[0]->dtype);
    int64_t n = p.batches * p.tuples, block = p.slice * (int64_t)elem;
    const char *src = c->in[0]->data;
    char *dst = c->out[0]->data;
    for (int64_t t = 0; t < n && block > 0; t++)
        memcpy(dst + t * block, src + offs[t] * (int64_t)elem, (size_t)block);
    free(offs);
    return GRAFT_OK;
}

/* dst[i] = dst[i] (op) upd[i] for n elements of a numeric dtype: floats in double, integers in
 * 64 bits (wrapping). */
static void scatter_combine(tensor *dst, int64_t at, const tensor *upd, int64_t from, int64_t n,
                            scatter_mode mode) {
    bool flt = dtype_is_float(dst->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (flt) {
            double a = tensor_get_f64(dst, at + i), b = tensor_get_f64(upd, from + i);
            double v = mode == SCATTER_ADD   ? a + b
                       : mode == SCATTER_MUL ? a * b
                       : mode == SCATTER_MAX ? (b > a ? b : a)
                                             : (b < a ? b : a);
            tensor_set_f64(dst, at + i, v);
        } else {
            int64_t a = scalar_load_int(dst->data, dst->dtype, at + i);
            int64_t b = scalar_load_int(upd->data, upd->dtype, from + i);
            int64_t v = mode == SCATTER_ADD   ? (int64_t)((uint64_t)a + (uint64_t)b)
                        : mode == SCATTER_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                        : mode == SCATTER_MAX ? (b > a ? b : a)
                                              : (b < a ? b : a);
            scalar_store_int(dst->data, dst->dtype, at + i, v);
        }
    }
}

/* Updates apply in order, so with repeated indices the last one wins (reduction none) or all
 * combine (the others). */
graft_status ref_ScatterND(const op_call *c) {
    nd_plan p;
    scatter_mode mode;
    TRY(scatter_nd_plan(c, &p, &mode));
    const tensor *data = c->in[0], *upd = c->in[2];
    tensor *out = c->out[0];
    if (mode != SCATTER_NONE && !dtype_is_float(data->dtype) && !dtype_is_int(data->dtype))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "reduction needs numbers, not %s",
                        graft_dtype_name(data->dtype));
    int64_t *offs;
    TRY(nd_offsets(c, c->in[1], &p, &offs));
    size_t elem = graft_dtype_size(data->dtype);
    int64_t bytes = tensor_nbytes(data), block = p.slice * (int64_t)elem;
    if (bytes > 0 && out->data != data->data) memcpy(out->data, data->data, (size_t)bytes);
    for (int64_t t = 0; t < p.tuples && block > 0; t++) {
        if (mode == SCATTER_NONE)
            memcpy((char *)out->data + offs[t] * (int64_t)elem, (const char *)upd->data + t * block,
                   (size_t)block);
        else
            scatter_combine(out, offs[t], upd, t * p.slice, p.slice, mode);
    }
    free(offs);
    return GRAFT_OK;
}

/* Tile: every output row (all axes but the last) reads the input row at its coordinates modulo
 * the input's dims, repeated along the last axis. */
graft_status ref_Tile(const op_call *c) {
    int64_t reps[GRAFT_MAX_DIMS];
    TRY(tile_check(c, reps));
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    if (tensor_numel(y) == 0) return GRAFT_OK;
    size_t elem = graft_dtype_size(x->dtype);
    if (x->ndim == 0) {
        memcpy(y->data, x->data, elem);
        return GRAFT_OK;
    }
    int r = x->ndim;
    int64_t xstr[GRAFT_MAX_DIMS];
    dims_strides(r, x->dims, xstr);
    int64_t row = x->dims[r - 1] * (int64_t)elem, rows = dims_numel(r - 1, y->dims);
    const char *src = x->data;
    char *dst = y->data;
    for (int64_t o = 0; o < rows; o++) {
        int64_t rem = o, off = 0;
        for (int d = r - 2; d >= 0; d--) {
            off += (rem % y->dims[d] % x->dims[d]) * xstr[d];
            rem /= y->dims[d];
        }
        char *out_row = dst + o * row * reps[r - 1];
        for (int64_t k = 0; k < reps[r - 1]; k++)
            memcpy(out_row + k * row, src + off * (int64_t)elem, (size_t)row);
    }
    return GRAFT_OK;
}

/* Trilu: keeps the elements on and above (upper) or on and below the k-th diagonal of each
 * matrix of the last two axes; the others are zero. */
graft_status ref_Trilu(const op_call *c) {
    const tensor *x = c->in[0];
    if (!x) return op_missing_input(c, 0);
    int64_t k;
    TRY(trilu_diagonal(c->node, c->n_in > 1 ? c->in[1] : NULL, &k, c->err));
    if (x->ndim < 2) return op_error(c->node, c->err, GRAFT_E_SHAPE, "input must have rank >= 2");
    TRY(op_expect_output(c, c->out[0], x->dtype, x->ndim, x->dims));
    bool upper = attr_i(c->node, "upper", 1) != 0;
    int64_t rows = x->dims[x->ndim - 2], cols = x->dims[x->ndim - 1];
    int64_t mats = dims_numel(x->ndim - 2, x->dims);
    size_t elem = graft_dtype_size(x->dtype);
    const char *src = x->data;
    char *dst = c->out[0]->data;
    memset(dst, 0, (size_t)tensor_nbytes(c->out[0]));
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            /* columns kept in row i: j - i >= k (upper) or j - i <= k (lower) */
            int64_t lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
            lo = lo < 0 ? 0 : lo > cols ? cols : lo;
            hi = hi < 0 ? 0 : hi > cols ? cols : hi;
            if (hi <= lo) continue;
            int64_t at = ((m * rows + i) * cols + lo) * (int64_t)elem;
            memcpy(dst + at, src + at, (size_t)(hi - lo) * elem);
        }
    return GRAFT_OK;
}

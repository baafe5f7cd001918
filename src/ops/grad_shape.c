/* grad_shape.c: backward rules of the shape and data-movement ops (Identity, Flatten, Reshape,
 * Squeeze, Unsqueeze, Transpose, Slice, Concat, Split, Gather, Expand, Pad): gradients move as
 * the data moved, with the forward's plans; shape, axes, starts/ends, pads and indices take no
 * gradient. */
#include <stdlib.h>

#include "shape_plan.h"
#include "grad_util.h"

/* ---- reshapes: dX = dY in the same element order ------------------------------------------- */

static graft_status same_order_backward(const grad_call *c) {
    TRY(gr_check(c, 1, 1));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *x = c->in[0], *y = c->out[0], *dy = gr_dout(c, 0);
    if (tensor_numel(x) != tensor_numel(y)) {
        char sx[128], sy[128];
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: X %s and Y %s differ in size; expected a reshape",
                        shape_str(sx, sizeof sx, x->ndim, x->dims),
                        shape_str(sy, sizeof sy, y->ndim, y->dims));
    }
    for (int64_t i = 0; i < tensor_numel(x); i++) gr_set(dx, i, dy ? gr_get(dy, i) : 0.0);
    return GRAFT_OK;
}

graft_status grad_Identity(const grad_call *c) {
    return same_order_backward(c);
}

graft_status grad_Flatten(const grad_call *c) {
    return same_order_backward(c);
}

graft_status grad_Reshape(const grad_call *c) {
    return same_order_backward(c);
}

graft_status grad_Squeeze(const grad_call *c) {
    return same_order_backward(c);
}

graft_status grad_Unsqueeze(const grad_call *c) {
    return same_order_backward(c);
}

/* ---- views: Transpose and Slice ------------------------------------------------------------- */

/* Y is the dense copy of a view of X: dX = 0, then dY added back through the view. */
static graft_status view_backward(const grad_call *c,
                                  graft_status (*plan)(const op_call *, tensor_view *)) {
    TRY(gr_check(c, 1, 1));
    tensor *dxt = gr_din(c, 0);
    if (!dxt) return GRAFT_OK;
    op_call oc = gr_op_call(c);
    tensor_view v;
    TRY(plan(&oc, &v));
    const tensor *dy = gr_dout(c, 0);
    int64_t n = tensor_numel(c->out[0]), idx[GRAFT_MAX_DIMS] = {0}, at = v.offset;
    double *dx = gr_zeros(tensor_numel(c->in[0]));
    if (!dx) return gr_oom(c);
    for (int64_t i = 0; i < n; i++) {
        dx[at] += dy ? gr_get(dy, i) : 0.0;
        for (int d = v.ndim - 1; d >= 0; d--) { /* odometer step over the view */
            at += v.strides[d];
            if (++idx[d] < v.dims[d]) break;
            at -= v.strides[d] * v.dims[d];
            idx[d] = 0;
        }
    }
    gr_store(dxt, dx);
    free(dx);
    return GRAFT_OK;
}

graft_status grad_Transpose(const grad_call *c) {
    return view_backward(c, transpose_view);
}

graft_status grad_Slice(const grad_call *c) {
    return view_backward(c, slice_view);
}

/* ---- Concat: each input's gradient is its block of dY along the axis ------------------------ */

graft_status grad_Concat(const grad_call *c) {
    if (c->n_in < 1 || c->n_out < 1 || !c->out || !c->out[0])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "backward: needs the inputs and the output");
    TRY(gr_check(c, c->n_in, 1));
    const tensor *y = c->out[0], *dy = gr_dout(c, 0);
    op_call oc = gr_op_call(c);
    int axis;
    TRY(concat_pieces_check(&oc, y, (tensor *const *)c->in, c->n_in, &axis));
    int64_t outer = dims_numel(axis, y->dims), row = dims_numel(y->ndim - axis, y->dims + axis);
    int64_t first = 0; /* where piece i starts within a row of Y */
    for (int i = 0; i < c->n_in; i++) {
        const tensor *x = c->in[i];
        int64_t len = dims_numel(x->ndim - axis, x->dims + axis);
        tensor *dx = gr_din(c, i);
        for (int64_t o = 0; dx && o < outer; o++)
            for (int64_t j = 0; j < len; j++)
                gr_set(dx, o * len + j, dy ? gr_get(dy, o * row + first + j) : 0.0);
        first += len;
    }
    return GRAFT_OK;
}

/* ---- Gather: dY summed into the rows the indices picked ------------------------------------- */

graft_status grad_Gather(const grad_call *c) {
    TRY(gr_check(c, 2, 1));
    tensor *dxt = gr_din(c, 0);
    if (!dxt) return GRAFT_OK;
    op_call oc = gr_op_call(c);
    int axis;
    TRY(gather_check(&oc, &axis));
    const tensor *data = c->in[0], *idx = c->in[1], *dy = gr_dout(c, 0);
    int64_t dim = data->dims[axis], n = tensor_numel(idx);
    int64_t outer = dims_numel(axis, data->dims);
    int64_t block = dims_numel(data->ndim - axis - 1, data->dims + axis + 1);
    double *dx = gr_zeros(tensor_numel(data));
    if (!dx) return gr_oom(c);
    for (int64_t j = 0; j < n; j++) {
        int64_t k = tensor_get_i64(idx, j);
        if (k < -dim || k >= dim) {
            free(dx);
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "backward: index %lld (at %lld) is out of range for axis %d of "
                            "size %lld",
                            (long long)k, (long long)j, axis, (long long)dim);
        }
        if (k < 0) k += dim;
        for (int64_t o = 0; dy && o < outer; o++)
            for (int64_t b = 0; b < block; b++)
                dx[(o * dim + k) * block + b] += gr_get(dy, (o * n + j) * block + b);
    }
    gr_store(dxt, dx);
    free(dx);
    return GRAFT_OK;
}

/* ---- Expand: dX = dY summed over the broadcast dims ----------------------------------------- */

graft_status grad_Expand(const grad_call *c) {
    TRY(gr_check(c, 1, 1));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *y = c->out[0];
    double *g = gr_load_dout(c, 0, tensor_numel(y));
    if (!g) return gr_oom(c);
    graft_status st = gr_reduce_to(c, dx, g, y->ndim, y->dims, 1.0);
    free(g);
    return st;
}

/* ---- Split: dX is the outputs' gradients joined along the axis (absent ones as zeros) ------- */

graft_status grad_Split(const grad_call *c) {
    TRY(gr_check(c, 1, c->n_out));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *x = c->in[0];
    op_call oc = gr_op_call(c);
    int axis;
    TRY(concat_pieces_check(&oc, x, (tensor *const *)c->out, c->n_out, &axis));
    int64_t outer = dims_numel(axis, x->dims), row = dims_numel(x->ndim - axis, x->dims + axis);
    int64_t first = 0; /* where output k starts within a row of X */
    for (int k = 0; k < c->n_out; k++) {
        const tensor *y = c->out[k], *dy = gr_dout(c, k);
        int64_t len = dims_numel(y->ndim - axis, y->dims + axis);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < len; j++)
                gr_set(dx, o * row + first + j, dy ? gr_get(dy, o * len + j) : 0.0);
        first += len;
    }
    return GRAFT_OK;
}

/* ---- Pad: each output element's gradient goes to the input element it copied ---------------- */

graft_status grad_Pad(const grad_call *c) {
    TRY(gr_check(c, 2, 1)); /* data and pads; constant_value and axes may be omitted */
    tensor *dxt = gr_din(c, 0), *dct = c->n_in > 2 ? gr_din(c, 2) : NULL;
    if (!dxt && !dct) return GRAFT_OK;
    op_call oc = gr_op_call(c);
    pad_plan p;
    unsigned char cval[16];
    TRY(pad_call_plan(&oc, &p, cval));
    const tensor *x = c->in[0], *y = c->out[0], *dy = gr_dout(c, 0);
    double *dx = gr_zeros(tensor_numel(x) + 1), dconst = 0.0;
    if (!dx) return gr_oom(c);
    int64_t strides[GRAFT_MAX_DIMS], idx[GRAFT_MAX_DIMS] = {0};
    dims_strides(x->ndim, x->dims, strides);
    for (int64_t i = 0; i < tensor_numel(y); i++) {
        double g = dy ? gr_get(dy, i) : 0.0;
        int64_t at = 0;
        for (int d = 0; d < x->ndim && at >= 0; d++) {
            int64_t s = pad_plan_source(p.mode, idx[d], p.begin[d], x->dims[d]);
            at = s < 0 ? -1 : at + s * strides[d];
        }
        if (at >= 0)
            dx[at] += g;
        else
            dconst += g;
        for (int d = x->ndim - 1; d >= 0; d--) { /* odometer step over Y */
            if (++idx[d] < y->dims[d]) break;
            idx[d] = 0;
        }
    }
    if (dxt) gr_store(dxt, dx);
    if (dct && c->in[2]) gr_set(dct, 0, dconst);
    free(dx);
    return GRAFT_OK;
}

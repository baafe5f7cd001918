/* cuda_backward_shape.c: GPU backward rules of the ops that move data (reshapes, inference-mode
 * Dropout, Transpose, Concat, Split, Expand) and of ReduceMean / ReduceSum. */
#include <string.h>

#include "../ops/reduce.h"
#include "../ops/shape_plan.h"
#include "../ops/tensor_plan.h"
#include "backward_eltwise_launch.h"
#include "cuda_tensor.h"

/* The forward call as an op_call for the shared plan helpers (they read shapes and attributes
 * only; errors go to scratch: a malformed case is the CPU reference's to report). */
static op_call fwd_call(const cuda_bwd *b, const ir_node *fwd, graft_err *scratch) {
    op_call oc = {fwd, b->in, b->n_in, (tensor *const *)b->out, b->n_out, scratch};
    return oc;
}

/* ---- reshapes and inference-mode Dropout: dX = dY in the same element order ----------------- */

static graft_status same_order(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *y = b->out[0], *dy = b->dout[0];
    tensor *dx = b->din[0];
    if (!cuda_bwd_f32(x) || !y || tensor_numel(x) != tensor_numel(y) || cuda_bwd_wants_extra(b))
        return GRAFT_OK;
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    return cuda_bwd_copy(b, dx->data, dy->data, tensor_numel(x));
}

/* Dropout passes dY through unless it ran in training mode (input 2 true): that case, and a mode
 * the host cannot read, go to the CPU. */
static graft_status dropout(const cuda_bwd *b, bool *handled) {
    const tensor *mode = b->n_in > 2 ? b->in[2] : NULL;
    if (mode) {
        if (tensor_numel(mode) < 1 || !cuda_bwd_host_readable(mode)) return GRAFT_OK;
        if (tensor_get_f64(mode, 0) != 0.0) return GRAFT_OK;
    }
    return same_order(b, handled);
}

/* ---- Transpose: dX = dY through the inverse permutation ------------------------------------- */

static graft_status transpose(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *y = b->out[0], *dy = b->dout[0];
    tensor *dx = b->din[0];
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    int perm[GRAFT_MAX_DIMS];
    if (!cuda_bwd_f32(x) || !y || y->ndim != x->ndim ||
        transpose_perm(&fwd, x->ndim, perm, &scratch) != GRAFT_OK)
        return GRAFT_OK;
    int64_t ystr[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS];
    dims_strides(y->ndim, y->dims, ystr);
    for (int i = 0; i < x->ndim; i++) {
        if (y->dims[i] != x->dims[perm[i]]) return GRAFT_OK;
        strides[perm[i]] = ystr[i]; /* X's axis perm[i] is Y's axis i */
    }
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    if (tensor_numel(x) == 0) return GRAFT_OK;
    op_call oc = fwd_call(b, &fwd, b->call->err);
    return cuda_tensor_copy_strided(b->be, &oc, dx->data, dy->data, sizeof(float), x->ndim, x->dims,
                                    strides);
}

/* ---- Concat and Split: blocks of rows along the axis ---------------------------------------- */

/* Copy (or zero, src NULL) `rows` runs of `len` floats between row pitches. */
static graft_status copy_runs(const cuda_bwd *b, float *dst, int64_t dpitch, const float *src,
                              int64_t spitch, int64_t len, int64_t rows) {
    if (len <= 0 || rows <= 0) return GRAFT_OK;
    size_t w = (size_t)len * sizeof(float);
    cudaError_t err = src ? cudaMemcpy2DAsync(dst, (size_t)dpitch * sizeof(float), src,
                                              (size_t)spitch * sizeof(float), w, (size_t)rows,
                                              cudaMemcpyDeviceToDevice, b->be->stream)
                          : cudaMemset2DAsync(dst, (size_t)dpitch * sizeof(float), 0, w,
                                              (size_t)rows, b->be->stream);
    return cuda_bwd_launched(b, err, "copying a block of a gradient");
}

/* Concat: input i's gradient is its block of dY along the axis. */
static graft_status concat(const cuda_bwd *b, bool *handled) {
    const tensor *y = b->out[0], *dy = b->dout[0];
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    op_call oc = fwd_call(b, &fwd, &scratch);
    int axis;
    if (!cuda_bwd_f32(y) ||
        concat_pieces_check(&oc, y, (tensor *const *)b->in, b->n_in, &axis) != GRAFT_OK)
        return GRAFT_OK;
    for (int i = 0; i < b->n_in; i++)
        if (!cuda_bwd_f32(b->in[i])) return GRAFT_OK;
    *handled = true;
    int64_t outer = dims_numel(axis, y->dims), row = dims_numel(y->ndim - axis, y->dims + axis);
    int64_t first = 0; /* where piece i starts within a row of Y */
    for (int i = 0; i < b->n_in; i++) {
        const tensor *x = b->in[i];
        int64_t len = dims_numel(x->ndim - axis, x->dims + axis);
        tensor *dx = b->din[i];
        if (dx && !dy) TRY(cuda_bwd_zero(b, dx));
        if (dx && dy)
            TRY(copy_runs(b, dx->data, len, (const float *)dy->data + first, row, len, outer));
        first += len;
    }
    return GRAFT_OK;
}

/* Split: dX is the outputs' gradients joined along the axis, absent ones as zeros. */
static graft_status split(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0];
    tensor *dx = b->din[0];
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    op_call oc = fwd_call(b, &fwd, &scratch);
    int axis;
    if (!cuda_bwd_f32(x) || cuda_bwd_wants_extra(b) ||
        concat_pieces_check(&oc, x, (tensor *const *)b->out, b->n_out, &axis) != GRAFT_OK)
        return GRAFT_OK;
    *handled = true;
    if (!dx) return GRAFT_OK;
    int64_t outer = dims_numel(axis, x->dims), row = dims_numel(x->ndim - axis, x->dims + axis);
    int64_t first = 0; /* where output k starts within a row of X */
    for (int k = 0; k < b->n_out; k++) {
        const tensor *y = b->out[k], *dy = b->dout[k];
        int64_t len = dims_numel(y->ndim - axis, y->dims + axis);
        TRY(copy_runs(b, (float *)dx->data + first, row, dy ? dy->data : NULL, len, len, outer));
        first += len;
    }
    return GRAFT_OK;
}

/* ---- Expand: dX = dY summed over the broadcast dims ----------------------------------------- */

static graft_status expand(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *y = b->out[0], *dy = b->dout[0];
    tensor *dx = b->din[0];
    if (!cuda_bwd_f32(x) || !y || cuda_bwd_wants_extra(b)) return GRAFT_OK;
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    return cuda_bwd_reduce_to(b, dy->data, y->ndim, y->dims, dx, 1.0f, handled);
}

/* ---- ReduceMean, ReduceSum: dX = dY broadcast back over the reduced axes -------------------- */

/* The reduced axes as the forward read them. Axes in an input the host cannot read are found
 * from the shapes when the forward kept the dims (an axis of size 1 reduces to itself either
 * way); false when they cannot be known. */
static bool reduced_axes(const cuda_bwd *b, const ir_node *fwd, reduce_axes *ax) {
    const tensor *x = b->in[0], *y = b->out[0], *axes = b->n_in > 1 ? b->in[1] : NULL;
    graft_err scratch = {0};
    if (!axes || cuda_bwd_host_readable(axes))
        return reduce_resolve_axes(fwd, x->ndim, axes != NULL, axes, ax, &scratch) == GRAFT_OK &&
               ax->known;
    if (!attr_i(fwd, "keepdims", 1) || y->ndim != x->ndim) return false;
    memset(ax, 0, sizeof *ax);
    ax->known = ax->keepdims = true;
    for (int d = 0; d < x->ndim; d++) {
        if (y->dims[d] != x->dims[d] && y->dims[d] != 1) return false;
        ax->reduced[d] = y->dims[d] != x->dims[d];
    }
    return true;
}

static graft_status reduce(const cuda_bwd *b, bool mean, bool *handled) {
    const tensor *x = b->in[0], *y = b->out[0], *dy = b->dout[0];
    tensor *dx = b->din[0];
    ir_node fwd = cuda_bwd_fwd_node(b);
    reduce_axes ax;
    if (!cuda_bwd_f32(x) || !y || cuda_bwd_wants_extra(b) || !reduced_axes(b, &fwd, &ax))
        return GRAFT_OK;
    bw_view v = {.ndim = x->ndim};
    int64_t kept[GRAFT_MAX_DIMS], count = 1;
    for (int d = 0; d < x->ndim; d++) {
        kept[d] = ax.reduced[d] ? 1 : x->dims[d];
        if (ax.reduced[d]) count *= x->dims[d];
    }
    if (dims_numel(x->ndim, kept) != tensor_numel(y)) return GRAFT_OK;
    dims_strides(x->ndim, kept, v.strides);
    for (int d = 0; d < x->ndim; d++) {
        v.dims[d] = x->dims[d];
        if (ax.reduced[d]) v.strides[d] = 0;
    }
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    float scale = mean && count > 0 ? (float)(1.0 / (double)count) : 1.0f;
    return cuda_bwd_launched(b, bw_gather(dy->data, dx->data, &v, scale, b->be->stream),
                             "the reduction gradient kernel");
}

/* ---- dispatch ------------------------------------------------------------------------------- */

graft_status cuda_bwd_shape(const cuda_bwd *b, bool *handled) {
    *handled = false;
    const char *op = b->op;
    if (b->n_in < 1 || !b->in[0] || b->n_out < 1) return GRAFT_OK;
    if (!strcmp(op, "Concat")) return concat(b, handled);
    if (!strcmp(op, "Split")) return split(b, handled);
    if (!b->out[0]) return GRAFT_OK;
    if (!strcmp(op, "Identity") || !strcmp(op, "Flatten") || !strcmp(op, "Reshape") ||
        !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze"))
        return same_order(b, handled);
    if (!strcmp(op, "Dropout")) return dropout(b, handled);
    if (!strcmp(op, "Transpose")) return transpose(b, handled);
    if (!strcmp(op, "Expand")) return expand(b, handled);
    if (!strcmp(op, "ReduceMean")) return reduce(b, true, handled);
    if (!strcmp(op, "ReduceSum")) return reduce(b, false, handled);
    return GRAFT_OK;
}

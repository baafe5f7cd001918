/* cuda_backward_index.c: GPU backward rules of the ops that pick elements (Gather, Slice, Pad in
 * constant mode): dX is dY put back where the forward took it from, zeros elsewhere. */
#include <string.h>

#include "../ops/shape_plan.h"
#include "backward_eltwise_launch.h"
#include "backward_index_launch.h"

/* Inputs 1.. (the lists the forward reads on the host, node_input_on_host) readable here: the
 * shared plans read their values. */
static bool lists_on_host(const cuda_bwd *b) {
    for (int i = 1; i < b->n_in; i++)
        if (b->in[i] && !cuda_bwd_host_readable(b->in[i])) return false;
    return true;
}

/* The forward call as an op_call for the shared plan helpers (they read shapes, attributes and
 * the host-side lists; errors go to scratch: a malformed case is the CPU reference's to
 * report). */
static op_call fwd_call(const cuda_bwd *b, const ir_node *fwd, graft_err *scratch) {
    op_call oc = {fwd, b->in, b->n_in, (tensor *const *)b->out, b->n_out, scratch};
    return oc;
}

/* ---- Gather: dY's rows summed into the rows the indices picked ------------------------------ */

static graft_status gather(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *idx = b->n_in > 1 ? b->in[1] : NULL, *dy = b->dout[0];
    tensor *dx = b->din[0];
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    op_call oc = fwd_call(b, &fwd, &scratch);
    int axis;
    /* indices in host memory (never expected: they are no host-side list) the kernel cannot
     * read */
    if (!cuda_bwd_f32(x) || !idx || !b->out[0] || cuda_bwd_wants_extra(b) ||
        gather_check(&oc, &axis) != GRAFT_OK || cuda_bwd_host_readable(idx))
        return GRAFT_OK;
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    int64_t outer = dims_numel(axis, x->dims), dim = x->dims[axis];
    int64_t block = dims_numel(x->ndim - axis - 1, x->dims + axis + 1);
    cudaError_t err =
        bwi_gather_launch(dy->data, idx->data, idx->dtype == GRAFT_DTYPE_I64, dx->data, outer, dim,
                          tensor_numel(idx), block, b->be->bad_index, b->be->stream);
    return cuda_bwd_launched(b, err, "the Gather gradient kernel");
}

/* ---- Slice and Pad: dY put back on a lattice of dX ------------------------------------------ */

static graft_status lattice(const cuda_bwd *b, const bwi_lattice *l) {
    tensor *dx = b->din[0];
    const tensor *dy = b->dout[0];
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    return cuda_bwd_launched(b, bwi_lattice_launch(dy->data, dx->data, l, b->be->stream),
                             "the lattice gradient kernel");
}

/* Slice: dY at X's elements start + q * step (steps may be negative, ends clamped: the forward's
 * plan), zeros elsewhere. */
static graft_status slice(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *y = b->out[0];
    if (!cuda_bwd_f32(x) || !y || cuda_bwd_wants_extra(b) || !lists_on_host(b)) return GRAFT_OK;
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    op_call oc = fwd_call(b, &fwd, &scratch);
    value_info vi[5];
    int n = call_value_infos(&oc, vi, 5);
    slice_plan p;
    if (slice_plan_make(&fwd, vi, n, &p, &scratch) != GRAFT_OK || p.ndim != x->ndim ||
        op_expect_output(&oc, y, x->dtype, p.ndim, p.len) != GRAFT_OK)
        return GRAFT_OK;
    bwi_lattice l = {.ndim = x->ndim};
    for (int d = 0; d < x->ndim; d++) {
        if (p.step[d] == 0) return GRAFT_OK;
        l.x_dims[d] = x->dims[d];
        l.y_dims[d] = p.len[d];
        l.start[d] = p.start[d];
        l.step[d] = p.step[d];
    }
    *handled = true;
    return lattice(b, &l);
}

/* Pad, constant mode: dX is the window of dY the input was copied to (negative pads crop: the
 * cropped elements get zero). Reflect, edge and wrap, where an input element feeds several
 * outputs, go to the CPU. */
static graft_status pad(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *y = b->out[0];
    if (!cuda_bwd_f32(x) || !y || cuda_bwd_wants_extra(b) || !lists_on_host(b)) return GRAFT_OK;
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    op_call oc = fwd_call(b, &fwd, &scratch);
    pad_plan p;
    unsigned char cval[16];
    if (pad_call_plan(&oc, &p, cval) != GRAFT_OK || p.mode != PAD_CONSTANT || p.ndim != x->ndim ||
        y->ndim != x->ndim)
        return GRAFT_OK;
    bwi_lattice l = {.ndim = x->ndim};
    for (int d = 0; d < x->ndim; d++) {
        l.x_dims[d] = x->dims[d];
        l.y_dims[d] = y->dims[d];
        l.start[d] = -p.begin[d]; /* X's element i is Y's i + begin */
        l.step[d] = 1;
    }
    *handled = true;
    return lattice(b, &l);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

graft_status cuda_bwd_index(const cuda_bwd *b, bool *handled) {
    *handled = false;
    if (b->n_in < 1 || !b->in[0] || b->n_out != 1 || !b->out[0]) return GRAFT_OK;
    if (!strcmp(b->op, "Gather")) return gather(b, handled);
    if (!strcmp(b->op, "Slice")) return slice(b, handled);
    if (!strcmp(b->op, "Pad")) return pad(b, handled);
    return GRAFT_OK;
}

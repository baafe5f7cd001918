/* grad_util.h: helpers the backward rules share: dtype-generic element access, double copies,
 * broadcast index maps and argument checks. Internal to the backward rules in src/ops (and the
 * CPU backend's f32 Backward kernel, src/cpu/dnnl_backward_conv.c, for the window geometry). */
#ifndef GRAFT_OPS_GRAD_UTIL_H
#define GRAFT_OPS_GRAD_UTIL_H

#include "grad.h"
#include "op.h"

static inline double gr_get(const tensor *t, int64_t i) {
    return t->dtype == GRAFT_DTYPE_F32 ? (double)((const float *)t->data)[i]
                                       : ((const double *)t->data)[i];
}

static inline void gr_set(tensor *t, int64_t i, double v) {
    if (t->dtype == GRAFT_DTYPE_F32)
        ((float *)t->data)[i] = (float)v;
    else
        ((double *)t->data)[i] = v;
}

/* The output gradient dout[i] (NULL when absent), the input gradient din[i] (NULL when absent). */
const tensor *gr_dout(const grad_call *c, int i);
tensor *gr_din(const grad_call *c, int i);

/* Check that the first `need_in` inputs and `need_out` outputs are present, that every present
 * tensor among in/out/dout/din is f32 or f64 of one dtype, and that each din[i] has in[i]'s
 * shape and each dout[i] out[i]'s. Errors name the node. */
graft_status gr_check(const grad_call *c, int need_in, int need_out);

/* A malloc'd double copy of t's elements (NULL when out of memory; t may be empty). */
double *gr_load(const tensor *t);
/* A zeroed double buffer of n elements (at least one). */
double *gr_zeros(int64_t n);
/* Write n doubles into t. */
void gr_store(tensor *t, const double *v);

/* map[i] = index into a tensor of shape small (sdims, right-aligned, each dim 1 or equal) of
 * element i of the full shape (dims). Returns false when the shapes do not broadcast. */
bool gr_bcast_map(int64_t *map, int ndim, const int64_t *dims, int sndim, const int64_t *sdims);

/* dst (shape sdims of t) = sum of g (full shape dims) over the broadcast dims, times scale. */
graft_status gr_reduce_to(const grad_call *c, tensor *dst, const double *g, int ndim,
                          const int64_t *dims, double scale);

/* An out-of-memory error naming the node. */
graft_status gr_oom(const grad_call *c);

/* dout[i] as doubles, or zeros of n elements when it is absent (NULL when out of memory). */
double *gr_load_dout(const grad_call *c, int i, int64_t n);

/* The forward call as an op_call, for the plan helpers shared with the kernels (slice_view,
 * gather_check, reduce_call_axes): they only read the outputs, so the cast is safe. */
static inline op_call gr_op_call(const grad_call *c) {
    op_call oc = {c->node, c->in, c->n_in, (tensor *const *)c->out, c->n_out, c->err};
    return oc;
}

/* A Conv or pool window seen as 3-D (missing leading spatial axes: size 1, one tap), resolved by
 * the forward's nn_window_init and checked against Y's spatial size. */
typedef struct gr_window {
    int64_t in[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3], out[3];
    int64_t in_size, out_size, taps;
} gr_window;

/* The window of node c over X = in[0] (N, C, spatial...) with Y = out[0]; `kernel` gives the
 * kernel from the weights (Conv) or NULL (pools: the kernel_shape attribute). */
graft_status gr_window_init(const grad_call *c, const int64_t *kernel, gr_window *w);

/* Input position along axis a of tap j of the window at output position o. */
static inline int64_t gr_tap_pos(const gr_window *w, int a, int64_t o, int64_t j) {
    return o * w->stride[a] - w->pad_begin[a] + j * w->dilation[a];
}

#endif

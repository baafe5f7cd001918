/* nn.h: sliding-window geometry (kernel, strides, dilations, pads, auto_pad, ceil_mode) that the
 * shape inference of Conv and the pools and their kernels (reference and oneDNN) share. */
#ifndef GRAFT_OPS_NN_H
#define GRAFT_OPS_NN_H

#include "op.h"

/* Spatial ranks the nn kernels handle: 1-D, 2-D and 3-D. */
#define NN_MAX_SPATIAL 3

/* Where every window of a Conv or pool sits. Sizes are -1 where not known until run time. */
typedef struct nn_window {
    int nsp;                        /* spatial rank */
    int64_t in[NN_MAX_SPATIAL];     /* input spatial sizes */
    int64_t kernel[NN_MAX_SPATIAL]; /* kernel taps per axis (before dilation) */
    int64_t stride[NN_MAX_SPATIAL];
    int64_t dilation[NN_MAX_SPATIAL];
    int64_t pad_begin[NN_MAX_SPATIAL]; /* resolved: auto_pad already applied */
    int64_t pad_end[NN_MAX_SPATIAL];
    int64_t out[NN_MAX_SPATIAL];
    bool ceil_mode;
} nn_window;

/* Resolve the window attributes of `node` for an input with spatial sizes in[0..nsp-1].
 * `kernel` gives the kernel sizes (Conv: from the weights, entries may be -1); NULL means the
 * kernel_shape attribute is required (pools). Fails on malformed attributes or on a window that
 * does not fit the padded input. */
graft_status nn_window_init(const ir_node *node, int nsp, const int64_t *in, const int64_t *kernel,
                            nn_window *w, graft_err *e);

/* Effective extent of a dilated kernel along axis i. */
static inline int64_t nn_window_extent(const nn_window *w, int i) {
    return (w->kernel[i] - 1) * w->dilation[i] + 1;
}

#endif

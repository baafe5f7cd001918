/* cuda_conv.h: cuda_conv.c's cuDNN convolution state and the helpers the fused Conv groups
 * (cuda_fuse_conv.c) share with it. */
#ifndef GRAFT_CUDA_CONV_H
#define GRAFT_CUDA_CONV_H

#include "cuda_internal.h"

/* Convolution algorithms that need more scratch than this are passed over. */
#define CONV_MAX_WORKSPACE ((size_t)256 << 20)

/* cuDNN's view of a window: 2 or 3 spatial axes (1-D runs as 2-D with a leading axis of 1) and
 * symmetric pads. What symmetric pads cannot express is padded explicitly: the input is copied
 * into a buffer with `before` elements in front of each axis and enough behind it that cuDNN's
 * floor((in + 2 pad - extent) / stride) + 1 is exactly the output size graft inferred. */
typedef struct dnn_window {
    int nsp;
    int64_t in[3];     /* the original input's spatial sizes */
    int padded[3];     /* spatial sizes of what cuDNN reads (the copy when `copy`) */
    int64_t before[3]; /* explicit padding in front of each axis */
    int kernel[3], stride[3], dilation[3], pad[3], out[3];
    bool copy;
} dnn_window;

/* One node's cuDNN descriptors for the shapes it was last run with. */
typedef struct dnn_state {
    graft_dtype dtype;
    int ndim[2];
    int64_t dims[2][GRAFT_MAX_DIMS]; /* X, and W for Conv */
    bool usable;                     /* false: these shapes run on the CPU */
    dnn_window win;
    uint32_t fill_bits; /* the explicit padding's value: 0, or -inf for MaxPool */
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnPoolingDescriptor_t pool_desc;
    cudnnConvolutionFwdAlgo_t algo;
    size_t workspace_bytes;
    /* Channels-last (half precision, 2 spatial axes, X or Y planned NHWC): descriptors in NHWC,
     * filters read from a KRSC copy of W made once (kept across shape changes). */
    bool nhwc;
    void *w_nhwc;
    const void *w_src; /* the W that w_nhwc copies */
    int64_t w_numel;
} dnn_state;

/* What one cuDNN call reads and writes: x (X, an explicitly padded copy, or an NHWC copy of an
 * NCHW X), w (W, or its KRSC copy), y (the destination, or a buffer in the state's layout that
 * dnn_io_end copies to the destination in its own layout). */
typedef struct dnn_io {
    const void *x, *w;
    void *y;
    void *tmp[3];
    tensor *dst;  /* the destination tensor */
    bool convert; /* y is a buffer to copy into dst (layouts differ) */
    bool dst_nhwc;
} dnn_io;

void dnn_state_free(void *state);
/* The cuDNN data type of a graft dtype (F32, F16, BF16); false for others. */
bool dnn_type(graft_dtype dt, cudnnDataType_t *out);

typedef graft_status (*dnn_build_fn)(cuda_backend *be, const op_call *c, dnn_state *s);
/* The node's state in *state for the shapes of inputs 0..n_keyed-1 and the output's dtype,
 * built with `build` on first use or after a shape change. */
graft_status dnn_state_get(cuda_backend *be, const op_call *c, void **state, int n_keyed,
                           dnn_build_fn build, dnn_state **out);
/* Conv's build: descriptors, math type and the fastest allowed algorithm (usable = false when
 * cuDNN cannot run these shapes). c is a Conv node's call. */
graft_status conv_build(cuda_backend *be, const op_call *c, dnn_state *s);
/* Prepare io for a call on state s writing dst (channels-last when dst_nhwc); W is read when
 * the state has filters. dnn_io_end (always called after a successful begin, with the status of
 * the work in between) copies y into dst when needed and frees the temporaries. */
graft_status dnn_io_begin(cuda_backend *be, const op_call *c, dnn_state *s, tensor *dst,
                          bool dst_nhwc, dnn_io *io);
graft_status dnn_io_end(cuda_backend *be, dnn_io *io, graft_status st, graft_err *e);
/* The bias (one value per channel) added to io's y, in the state's layout. */
graft_status dnn_add_bias(cuda_backend *be, const dnn_state *s, const dnn_io *io,
                          const tensor *bias, graft_err *e);
/* y's shape as (outer, channels, inner) in the state's layout: channels-last is (N*H*W, C, 1). */
void dnn_split(const dnn_state *s, const tensor *y, int64_t *outer, int64_t *channels,
               int64_t *inner);

#endif

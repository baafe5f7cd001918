/* cuda_conv.c: Conv (1-D to 3-D, groups, bias), MaxPool and AveragePool through cuDNN's legacy
 * API, f32/f16/bf16, NCHW or, for the activations the layout plan keeps channels-last, NHWC
 * (with KRSC filters); pads cuDNN cannot express (asymmetric, ceil_mode) through an explicitly
 * padded copy of the input (NCHW only). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/nn.h"
#include "conv_util_launch.h"
#include "cuda_conv.h"
#include "cuda_float_types.h"
#include "cuda_internal.h"

void dnn_state_free(void *state) {
    dnn_state *s = state;
    if (!s) return;
    if (s->x_desc) cudnnDestroyTensorDescriptor(s->x_desc);
    if (s->y_desc) cudnnDestroyTensorDescriptor(s->y_desc);
    if (s->w_desc) cudnnDestroyFilterDescriptor(s->w_desc);
    if (s->conv_desc) cudnnDestroyConvolutionDescriptor(s->conv_desc);
    if (s->pool_desc) cudnnDestroyPoolingDescriptor(s->pool_desc);
    if (s->w_nhwc) cudaFree(s->w_nhwc);
    free(s);
}

bool dnn_type(graft_dtype dt, cudnnDataType_t *out) {
    static const cudnnDataType_t types[] = {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16};
    int i = cuda_float_index(dt);
    if (i >= 0) *out = types[i];
    return i >= 0;
}

static size_t elem_bytes(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 ? 4 : 2;
}

static bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

/* A cuDNN call that sets up a descriptor: parameters it rejects make the node run on the CPU
 * (*ok = false); other failures are errors. */
static graft_status dnn_setup(cudnnStatus_t st, bool *ok, graft_err *e, const char *what) {
    if (st == CUDNN_STATUS_SUCCESS) return GRAFT_OK;
    if (st == CUDNN_STATUS_BAD_PARAM || st == CUDNN_STATUS_NOT_SUPPORTED) {
        *ok = false;
        return GRAFT_OK;
    }
    return cudnn_fail(e, st, what);
}

/* ---- window geometry ------------------------------------------------------------------------ */

/* Axis `a` of cuDNN's window from graft's axis `s`. The last window needs `reach` elements past
 * the input's end; cuDNN gives pad + extra_end of them, and any total in [reach, reach + stride)
 * yields exactly `out` windows. Keep pad_begin as cuDNN's pad when it lies in that range;
 * otherwise pad symmetrically by what both sides allow and add the rest explicitly. */
static bool dnn_axis(const nn_window *w, int s, dnn_window *d, int a) {
    int64_t ext = nn_window_extent(w, s), pb = w->pad_begin[s];
    int64_t reach = (w->out[s] - 1) * w->stride[s] + ext - w->in[s] - pb;
    int64_t lo = reach > 0 ? reach : 0, hi = reach + w->stride[s] - 1;
    if (hi < lo) return false;
    int64_t total = pb < lo ? lo : pb > hi ? hi : pb;
    int64_t pad = pb < total ? pb : total;
    int64_t extra_end = total - pad, extra_begin = pb - pad;
    int64_t padded = w->in[s] + extra_begin + extra_end;
    if (!fits_int(padded) || !fits_int(pad) || !fits_int(w->kernel[s]) || !fits_int(w->stride[s]) ||
        !fits_int(w->dilation[s]) || !fits_int(w->out[s]))
        return false;
    d->in[a] = w->in[s];
    d->padded[a] = (int)padded;
    d->before[a] = extra_begin;
    d->kernel[a] = (int)w->kernel[s];
    d->stride[a] = (int)w->stride[s];
    d->dilation[a] = (int)w->dilation[s];
    d->pad[a] = (int)pad;
    d->out[a] = (int)w->out[s];
    if (extra_begin || extra_end) d->copy = true;
    return true;
}

static bool dnn_window_make(const nn_window *w, dnn_window *d) {
    memset(d, 0, sizeof *d);
    d->nsp = w->nsp < 2 ? 2 : w->nsp;
    int lead = d->nsp - w->nsp;
    for (int a = 0; a < lead; a++) {
        d->in[a] = 1;
        d->padded[a] = d->kernel[a] = d->stride[a] = d->dilation[a] = d->out[a] = 1;
    }
    for (int s = 0; s < w->nsp; s++)
        if (!dnn_axis(w, s, d, s + lead)) return false;
    return true;
}

/* Dims of an (N, C, spatial) tensor as cuDNN sees it; false when too large for its ints. */
static bool dnn_dims(int64_t n, int64_t c, const int *spatial, int nsp, int *dims, int *strides) {
    int64_t d[5] = {n, c, 0, 0, 0}, total = 1;
    for (int i = 0; i < nsp; i++) d[2 + i] = spatial[i];
    for (int i = 2 + nsp - 1; i >= 0; i--) {
        if (!fits_int(d[i]) || !fits_int(total)) return false;
        dims[i] = (int)d[i];
        strides[i] = (int)total;
        total *= d[i];
    }
    return fits_int(total);
}

/* NCHW, or NHWC (2 spatial axes): the same dims, strides (HWC, 1, WC, C). */
static graft_status make_tensor_desc(cudnnTensorDescriptor_t *desc, cudnnDataType_t type, int64_t n,
                                     int64_t c, const int *spatial, int nsp, bool nhwc, bool *ok,
                                     graft_err *e) {
    int dims[5], strides[5];
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(desc), "creating a cuDNN tensor descriptor");
    if (!dnn_dims(n, c, spatial, nsp, dims, strides)) {
        *ok = false;
        return GRAFT_OK;
    }
    if (nhwc) {
        strides[1] = 1;
        strides[3] = dims[1];
        strides[2] = dims[3] * dims[1];
    }
    return dnn_setup(cudnnSetTensorNdDescriptor(*desc, type, nsp + 2, dims, strides), ok, e,
                     "describing a tensor to cuDNN");
}

/* The input cuDNN reads: X itself, or X copied with explicit padding into *tmp (freed by the
 * caller with cuda_free on the stream once the cuDNN call is enqueued). */
static graft_status dnn_input(cuda_backend *be, const op_call *c, const dnn_state *s,
                              const void **x, void **tmp) {
    const tensor *xt = c->in[0];
    *x = xt->data;
    *tmp = NULL;
    if (!s->win.copy) return GRAFT_OK;
    const dnn_window *w = &s->win;
    conv_pad_geom g;
    memset(&g, 0, sizeof g);
    g.planes = xt->dims[0] * xt->dims[1];
    int lead = 3 - w->nsp;
    for (int a = 0; a < 3; a++) {
        int src = a - lead;
        g.in[a] = src >= 0 ? w->in[src] : 1;
        g.out[a] = src >= 0 ? w->padded[src] : 1;
        g.before[a] = src >= 0 ? w->before[src] : 0;
    }
    size_t es = elem_bytes(xt->dtype);
    size_t bytes = (size_t)(g.planes * g.out[0] * g.out[1] * g.out[2]) * es;
    TRY(cuda_malloc(be, bytes, tmp, c->err));
    cudaError_t err = conv_pad_launch(xt->data, *tmp, g, (int)es, s->fill_bits, be->stream);
    if (err != cudaSuccess) {
        cuda_free(be, *tmp);
        *tmp = NULL;
        return cuda_fail(c->err, err, "padding the input for cuDNN");
    }
    *x = *tmp;
    return GRAFT_OK;
}

/* Y's shape must be what the window gives (N, channels, out...): graft's inference set it. */
static graft_status check_output_shape(const op_call *c, const nn_window *w, int64_t channels) {
    const tensor *x = c->in[0], *y = c->out[0];
    bool ok = y->ndim == x->ndim && y->dims[0] == x->dims[0] && y->dims[1] == channels;
    for (int i = 0; ok && i < w->nsp; i++) ok = y->dims[2 + i] == w->out[i];
    if (ok) return GRAFT_OK;
    char sx[256], sy[256];
    return op_error(c->node, c->err, GRAFT_E_SHAPE, "output %s does not fit input %s",
                    shape_str(sy, sizeof sy, y->ndim, y->dims),
                    shape_str(sx, sizeof sx, x->ndim, x->dims));
}

/* ---- per-node state ------------------------------------------------------------------------- */

/* Channels-last for this call: half precision, 2 spatial axes, X or Y planned NHWC. */
static bool call_nhwc(const cuda_backend *be, const op_call *c) {
    return c->in[0]->ndim == 4 && c->out[0]->dtype != GRAFT_DTYPE_F32 &&
           (cuda_in_nhwc(be, c, 0) || cuda_out_nhwc(be, c, 0));
}

static bool dnn_state_matches(const dnn_state *s, const op_call *c, int n_keyed, bool nhwc) {
    if (s->dtype != c->out[0]->dtype || s->nhwc != nhwc) return false;
    for (int i = 0; i < n_keyed; i++) {
        const tensor *t = c->in[i];
        if (s->ndim[i] != t->ndim ||
            memcmp(s->dims[i], t->dims, sizeof(int64_t) * (size_t)t->ndim) != 0)
            return false;
    }
    return true;
}

/* The node's state for these shapes (inputs 0..n_keyed-1), built on first use or after a shape
 * change. */
graft_status dnn_state_get(cuda_backend *be, const op_call *c, void **state, int n_keyed,
                           dnn_build_fn build, dnn_state **out) {
    dnn_state *s = *state, *old = s;
    bool nhwc = call_nhwc(be, c);
    if (s && dnn_state_matches(s, c, n_keyed, nhwc)) {
        *out = s;
        return GRAFT_OK;
    }
    s = calloc(1, sizeof *s);
    if (!s) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "cuDNN state");
    if (old) { /* the KRSC filters outlive shape changes (and are not freed while recording) */
        s->w_nhwc = old->w_nhwc;
        s->w_src = old->w_src;
        s->w_numel = old->w_numel;
        old->w_nhwc = NULL;
        dnn_state_free(old);
        *state = NULL;
    }
    s->dtype = c->out[0]->dtype;
    s->nhwc = nhwc;
    for (int i = 0; i < n_keyed; i++) {
        s->ndim[i] = c->in[i]->ndim;
        memcpy(s->dims[i], c->in[i]->dims, sizeof(int64_t) * (size_t)c->in[i]->ndim);
    }
    s->usable = true;
    graft_status st = build(be, c, s);
    if (st != GRAFT_OK) {
        dnn_state_free(s);
        return st;
    }
    *state = s;
    *out = s;
    return GRAFT_OK;
}

/* ---- Conv --------------------------------------------------------------------------------- */

/* FFT algorithms are never taken: their transforms lose more precision than the tests allow
 * and their workspaces are large. fp32 without TF32 is held to the CPU's results (1e-5
 * relative): FMA math only, and no Winograd either; fp32 never converts its inputs to f16. */
static bool conv_algo_allowed(const cudnnConvolutionFwdAlgoPerf_t *p, bool fp32, bool strict_fp32) {
    if (p->status != CUDNN_STATUS_SUCCESS || p->memory > CONV_MAX_WORKSPACE) return false;
    if (p->algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
        p->algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING)
        return false;
    if (fp32 && p->mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
    if (!strict_fp32) return true;
    return p->mathType != CUDNN_TENSOR_OP_MATH && p->algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD &&
           p->algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}

/* Pick the fastest allowed algorithm cuDNN's heuristics rank; usable = false when none is. */
static graft_status conv_choose_algo(cuda_backend *be, dnn_state *s, bool strict_fp32,
                                     graft_err *e) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    TRY(dnn_setup(cudnnGetConvolutionForwardAlgorithm_v7(
                      be->dnn, s->x_desc, s->w_desc, s->conv_desc, s->y_desc,
                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                  &s->usable, e, "ranking cuDNN convolution algorithms"));
    for (int i = 0; s->usable && i < returned; i++) {
        if (!conv_algo_allowed(&perf[i], s->dtype == GRAFT_DTYPE_F32, strict_fp32)) continue;
        cudnnMathType_t math = strict_fp32 ? CUDNN_FMA_MATH : perf[i].mathType;
        CUDNN_TRY(e, cudnnSetConvolutionMathType(s->conv_desc, math), "setting a cuDNN math type");
        size_t ws = 0;
        cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(
            be->dnn, s->x_desc, s->w_desc, s->conv_desc, s->y_desc, perf[i].algo, &ws);
        if (st != CUDNN_STATUS_SUCCESS || ws > CONV_MAX_WORKSPACE) continue;
        s->algo = perf[i].algo;
        s->workspace_bytes = ws;
        return GRAFT_OK;
    }
    s->usable = false;
    return GRAFT_OK;
}

static graft_status conv_describe(const op_call *c, dnn_state *s, cudnnDataType_t type) {
    const tensor *x = c->in[0], *w = c->in[1], *y = c->out[0];
    const dnn_window *win = &s->win;
    graft_err *e = c->err;
    int nsp = win->nsp, wdims[5], wstrides[5];
    TRY(make_tensor_desc(&s->x_desc, type, x->dims[0], x->dims[1], win->padded, nsp, s->nhwc,
                         &s->usable, e));
    TRY(make_tensor_desc(&s->y_desc, type, y->dims[0], y->dims[1], win->out, nsp, s->nhwc,
                         &s->usable, e));
    CUDNN_TRY(e, cudnnCreateFilterDescriptor(&s->w_desc), "creating a cuDNN filter descriptor");
    CUDNN_TRY(e, cudnnCreateConvolutionDescriptor(&s->conv_desc),
              "creating a cuDNN convolution descriptor");
    if (!s->usable || !dnn_dims(w->dims[0], w->dims[1], win->kernel, nsp, wdims, wstrides)) {
        s->usable = false;
        return GRAFT_OK;
    }
    cudnnTensorFormat_t format = s->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    TRY(dnn_setup(cudnnSetFilterNdDescriptor(s->w_desc, type, format, nsp + 2, wdims), &s->usable,
                  e, "describing the weights to cuDNN"));
    /* Half precision multiplies in tensor cores and accumulates in f32 (compute type FLOAT). */
    if (s->usable)
        TRY(dnn_setup(cudnnSetConvolutionNdDescriptor(s->conv_desc, nsp, win->pad, win->stride,
                                                      win->dilation, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT),
                      &s->usable, e, "describing the convolution to cuDNN"));
    int64_t group = attr_i(c->node, "group", 1);
    if (s->usable && !fits_int(group)) s->usable = false;
    if (s->usable)
        TRY(dnn_setup(cudnnSetConvolutionGroupCount(s->conv_desc, (int)group), &s->usable, e,
                      "setting the convolution's groups"));
    return GRAFT_OK;
}

/* cuDNN must agree with graft's inference on the output's shape, or the node runs on the CPU. */
static graft_status conv_check_output(const op_call *c, dnn_state *s) {
    int dims[5], want[5], strides[5];
    const tensor *y = c->out[0];
    int nb = s->win.nsp + 2;
    TRY(dnn_setup(
        cudnnGetConvolutionNdForwardOutputDim(s->conv_desc, s->x_desc, s->w_desc, nb, dims),
        &s->usable, c->err, "computing cuDNN's convolution output shape"));
    if (!s->usable) return GRAFT_OK;
    if (!dnn_dims(y->dims[0], y->dims[1], s->win.out, s->win.nsp, want, strides) ||
        memcmp(dims, want, sizeof(int) * (size_t)nb) != 0)
        s->usable = false;
    return GRAFT_OK;
}

graft_status conv_build(cuda_backend *be, const op_call *c, dnn_state *s) {
    const tensor *x = c->in[0], *w = c->in[1];
    nn_window win;
    TRY(nn_window_init(c->node, x->ndim - 2, x->dims + 2, w->dims + 2, &win, c->err));
    TRY(check_output_shape(c, &win, w->dims[0]));
    cudnnDataType_t type;
    if (!dnn_type(s->dtype, &type) || !dnn_window_make(&win, &s->win) || (s->nhwc && s->win.copy)) {
        s->usable = false; /* an NHWC window that needs padding: the node runs on NCHW copies */
        return GRAFT_OK;
    }
    s->fill_bits = 0;
    TRY(conv_describe(c, s, type));
    bool strict_fp32 = s->dtype == GRAFT_DTYPE_F32 && !be->allow_tf32;
    cudnnMathType_t math = s->dtype != GRAFT_DTYPE_F32 ? CUDNN_TENSOR_OP_MATH
                           : strict_fp32               ? CUDNN_FMA_MATH
                                                       : CUDNN_DEFAULT_MATH;
    if (s->usable)
        CUDNN_TRY(c->err, cudnnSetConvolutionMathType(s->conv_desc, math),
                  "setting a cuDNN math type");
    if (s->usable) TRY(conv_check_output(c, s));
    if (s->usable) TRY(conv_choose_algo(be, s, strict_fp32, c->err));
    return GRAFT_OK;
}

/* ---- inputs and outputs of a cuDNN call ------------------------------------------------------ */

/* The KRSC copy of W for a channels-last state: made once (outside a CUDA graph recording, which
 * cannot own it); while recording, a stale or missing copy is made in *tmp for this call. */
static graft_status nhwc_filters(cuda_backend *be, const op_call *c, dnn_state *s, const void **w,
                                 void **tmp) {
    const tensor *wt = c->in[1];
    int64_t n = tensor_numel(wt);
    size_t es = graft_dtype_size(wt->dtype);
    if (s->w_nhwc && s->w_src == wt->data && s->w_numel == n) {
        *w = s->w_nhwc;
        return GRAFT_OK;
    }
    void *dst = NULL;
    if (be->capturing) {
        TRY(cuda_malloc(be, (size_t)n * es, tmp, c->err));
        dst = *tmp;
    } else {
        if (s->w_nhwc) cudaFree(s->w_nhwc);
        s->w_nhwc = NULL;
        CUDA_TRY(c->err, cudaMalloc(&s->w_nhwc, (size_t)n * es), "allocating KRSC filters");
        s->w_src = wt->data;
        s->w_numel = n;
        dst = s->w_nhwc;
    }
    int64_t dims[4] = {wt->dims[0], wt->dims[1], wt->dims[2], wt->dims[3]};
    TRY(cuda_nhwc_copy(be, dst, wt->data, dims, es, true, c->err));
    *w = dst;
    return GRAFT_OK;
}

graft_status dnn_io_begin(cuda_backend *be, const op_call *c, dnn_state *s, tensor *dst,
                          bool dst_nhwc, dnn_io *io) {
    memset(io, 0, sizeof *io);
    io->dst = dst;
    io->dst_nhwc = dst_nhwc;
    io->y = dst->data;
    io->w = s->w_desc ? c->in[1]->data : NULL;
    const tensor *x = c->in[0];
    size_t es = graft_dtype_size(x->dtype);
    graft_status st = GRAFT_OK;
    if (!s->nhwc) {
        st = dnn_input(be, c, s, &io->x, &io->tmp[0]);
    } else if (cuda_in_nhwc(be, c, 0)) {
        io->x = x->data;
    } else {
        st = cuda_malloc(be, (size_t)tensor_nbytes(x), &io->tmp[0], c->err);
        if (st == GRAFT_OK) st = cuda_nhwc_copy(be, io->tmp[0], x->data, x->dims, es, true, c->err);
        io->x = io->tmp[0];
    }
    if (st == GRAFT_OK && s->nhwc && s->w_desc) st = nhwc_filters(be, c, s, &io->w, &io->tmp[1]);
    if (st == GRAFT_OK && s->nhwc != dst_nhwc) {
        io->convert = true;
        st = cuda_malloc(be, (size_t)tensor_nbytes(dst), &io->tmp[2], c->err);
        io->y = io->tmp[2];
    }
    if (st != GRAFT_OK)
        for (int i = 0; i < 3; i++) cuda_free(be, io->tmp[i]);
    return st;
}

graft_status dnn_io_end(cuda_backend *be, dnn_io *io, graft_status st, graft_err *e) {
    if (st == GRAFT_OK && io->convert)
        st = cuda_nhwc_copy(be, io->dst->data, io->y, io->dst->dims,
                            graft_dtype_size(io->dst->dtype), io->dst_nhwc, e);
    for (int i = 0; i < 3; i++) cuda_free(be, io->tmp[i]);
    return st;
}

void dnn_split(const dnn_state *s, const tensor *y, int64_t *outer, int64_t *channels,
               int64_t *inner) {
    int64_t spatial = 1;
    for (int i = 2; i < y->ndim; i++) spatial *= y->dims[i];
    *outer = s->nhwc ? y->dims[0] * spatial : y->dims[0];
    *channels = y->dims[1];
    *inner = s->nhwc ? 1 : spatial;
}

graft_status dnn_add_bias(cuda_backend *be, const dnn_state *s, const dnn_io *io,
                          const tensor *bias, graft_err *e) {
    int64_t outer, channels, inner;
    dnn_split(s, io->dst, &outer, &channels, &inner);
    CUDA_TRY(
        e,
        conv_bias_add_launch(io->y, bias->data, outer, channels, inner, io->dst->dtype, be->stream),
        "adding Conv's bias");
    return GRAFT_OK;
}

static graft_status conv_forward(cuda_backend *be, const op_call *c, dnn_state *s) {
    const tensor *bias = c->n_in > 2 ? c->in[2] : NULL;
    void *ws = NULL;
    dnn_io io;
    if (s->workspace_bytes) TRY(cuda_workspace(be, s->workspace_bytes, &ws, c->err));
    TRY(dnn_io_begin(be, c, s, c->out[0], cuda_out_nhwc(be, c, 0), &io));
    float alpha = 1.0f, beta = 0.0f; /* f32 scaling factors for f32, f16 and bf16 data */
    cudnnStatus_t cst =
        cudnnConvolutionForward(be->dnn, &alpha, s->x_desc, io.x, s->w_desc, io.w, s->conv_desc,
                                s->algo, ws, s->workspace_bytes, &beta, s->y_desc, io.y);
    graft_status st = GRAFT_OK;
    if (cst != CUDNN_STATUS_SUCCESS) st = cudnn_fail(c->err, cst, "running a cuDNN convolution");
    if (st == GRAFT_OK && bias) st = dnn_add_bias(be, s, &io, bias, c->err);
    return dnn_io_end(be, &io, st, c->err);
}

static graft_status run_Conv(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    const tensor *x = c->in[0], *w = c->in[1], *bias = c->n_in > 2 ? c->in[2] : NULL;
    tensor *y = c->out[0];
    cudnnDataType_t type;
    *handled = false;
    if (!dnn_type(y->dtype, &type) || x->dtype != y->dtype || w->dtype != y->dtype ||
        (bias && bias->dtype != y->dtype))
        return GRAFT_OK;
    if (x->ndim < 3 || x->ndim > 2 + NN_MAX_SPATIAL || w->ndim != x->ndim || y->ndim != x->ndim)
        return GRAFT_OK;
    if (bias && (bias->ndim != 1 || bias->dims[0] != y->dims[1]))
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "bias B does not have one value per "
                        "output channel");
    if (tensor_numel(y) == 0) {
        *handled = true;
        return GRAFT_OK;
    }
    if (tensor_numel(x) == 0 || tensor_numel(w) == 0) return GRAFT_OK; /* empty sums: the CPU */
    dnn_state *s = NULL;
    TRY(dnn_state_get(be, c, state, 2, conv_build, &s));
    if (!s->usable) return GRAFT_OK;
    TRY(conv_forward(be, c, s));
    *handled = true;
    return GRAFT_OK;
}

/* ---- MaxPool and AveragePool ---------------------------------------------------------------- */

/* cuDNN pools match the reference when every window holds at least one input element, and, for
 * AveragePool counting pads, when no window reaches past the end padding (ceil_mode can make
 * one: the reference does not count the taps beyond it, cuDNN would). */
static bool pool_windows_fit(const nn_window *w, bool include_pad) {
    for (int i = 0; i < w->nsp; i++) {
        int64_t last_start = (w->out[i] - 1) * w->stride[i] - w->pad_begin[i];
        if (w->dilation[i] != 1 || w->pad_begin[i] >= w->kernel[i] || last_start >= w->in[i])
            return false;
        if (include_pad && last_start + w->kernel[i] > w->in[i] + w->pad_end[i]) return false;
    }
    return true;
}

/* The bits of -inf in the dtype: explicit padding that never wins a max. */
static uint32_t minus_infinity_bits(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 ? 0xff800000u : dt == GRAFT_DTYPE_F16 ? 0xfc00u : 0xff80u;
}

static graft_status pool_build_common(cuda_backend *be, const op_call *c, dnn_state *s,
                                      bool is_max) {
    const tensor *x = c->in[0], *y = c->out[0];
    nn_window win;
    TRY(nn_window_init(c->node, x->ndim - 2, x->dims + 2, NULL, &win, c->err));
    TRY(check_output_shape(c, &win, x->dims[1]));
    bool include_pad = !is_max && attr_i(c->node, "count_include_pad", 0) == 1;
    cudnnDataType_t type;
    if (!dnn_type(s->dtype, &type) || !pool_windows_fit(&win, include_pad) ||
        !dnn_window_make(&win, &s->win) || (s->nhwc && s->win.copy) ||
        /* explicit zeros would count in an average that excludes padding */
        (!is_max && !include_pad && s->win.copy)) {
        s->usable = false;
        return GRAFT_OK;
    }
    s->fill_bits = is_max ? minus_infinity_bits(s->dtype) : 0;
    const dnn_window *w = &s->win;
    TRY(make_tensor_desc(&s->x_desc, type, x->dims[0], x->dims[1], w->padded, w->nsp, s->nhwc,
                         &s->usable, c->err));
    TRY(make_tensor_desc(&s->y_desc, type, y->dims[0], y->dims[1], w->out, w->nsp, s->nhwc,
                         &s->usable, c->err));
    CUDNN_TRY(c->err, cudnnCreatePoolingDescriptor(&s->pool_desc),
              "creating a cuDNN pooling descriptor");
    cudnnPoolingMode_t mode = is_max        ? CUDNN_POOLING_MAX
                              : include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                            : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    if (s->usable)
        TRY(dnn_setup(cudnnSetPoolingNdDescriptor(s->pool_desc, mode, CUDNN_NOT_PROPAGATE_NAN,
                                                  w->nsp, w->kernel, w->pad, w->stride),
                      &s->usable, c->err, "describing the pooling to cuDNN"));
    int dims[5], want[5], strides[5], nb = w->nsp + 2;
    if (s->usable)
        TRY(dnn_setup(cudnnGetPoolingNdForwardOutputDim(s->pool_desc, s->x_desc, nb, dims),
                      &s->usable, c->err, "computing cuDNN's pooling output shape"));
    if (s->usable && (!dnn_dims(y->dims[0], y->dims[1], w->out, w->nsp, want, strides) ||
                      memcmp(dims, want, sizeof(int) * (size_t)nb) != 0))
        s->usable = false;
    (void)be;
    return GRAFT_OK;
}

static graft_status maxpool_build(cuda_backend *be, const op_call *c, dnn_state *s) {
    return pool_build_common(be, c, s, true);
}

static graft_status avgpool_build(cuda_backend *be, const op_call *c, dnn_state *s) {
    return pool_build_common(be, c, s, false);
}

/* Enqueue the pooling; a configuration cuDNN turns down when it runs (a dtype its pooling lacks)
 * leaves the node to the CPU from then on. */
static graft_status pool_forward(cuda_backend *be, const op_call *c, dnn_state *s, bool *handled) {
    dnn_io io;
    TRY(dnn_io_begin(be, c, s, c->out[0], cuda_out_nhwc(be, c, 0), &io));
    float alpha = 1.0f, beta = 0.0f;
    cudnnStatus_t cst =
        cudnnPoolingForward(be->dnn, s->pool_desc, &alpha, s->x_desc, io.x, &beta, s->y_desc, io.y);
    bool declined = cst == CUDNN_STATUS_NOT_SUPPORTED || cst == CUDNN_STATUS_BAD_PARAM;
    graft_status st = declined ? GRAFT_E_UNSUPPORTED
                      : cst != CUDNN_STATUS_SUCCESS
                          ? cudnn_fail(c->err, cst, "running a cuDNN pooling")
                          : GRAFT_OK;
    st = dnn_io_end(be, &io, st, c->err);
    if (declined) {
        s->usable = false;
        return GRAFT_OK;
    }
    *handled = st == GRAFT_OK;
    return st;
}

static graft_status run_pool(cuda_backend *be, const op_call *c, void **state, bool *handled,
                             bool is_max) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    cudnnDataType_t type;
    *handled = false;
    if (!dnn_type(y->dtype, &type) || x->dtype != y->dtype || x->ndim < 3 ||
        x->ndim > 2 + NN_MAX_SPATIAL || y->ndim != x->ndim)
        return GRAFT_OK;
    if (is_max && c->n_out > 1 && c->out[1]) return GRAFT_OK; /* Indices: the CPU */
    if (tensor_numel(y) == 0) {
        *handled = true;
        return GRAFT_OK;
    }
    dnn_state *s = NULL;
    TRY(dnn_state_get(be, c, state, 1, is_max ? maxpool_build : avgpool_build, &s));
    if (!s->usable) return GRAFT_OK;
    return pool_forward(be, c, s, handled);
}

static graft_status run_MaxPool(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    return run_pool(be, c, state, handled, true);
}

static graft_status run_AveragePool(cuda_backend *be, const op_call *c, void **state,
                                    bool *handled) {
    return run_pool(be, c, state, handled, false);
}

const cuda_kernel cuda_conv_kernels[] = {
    {"Conv", run_Conv, dnn_state_free},
    {"MaxPool", run_MaxPool, dnn_state_free},
    {"AveragePool", run_AveragePool, dnn_state_free},
    {NULL, NULL, NULL},
};

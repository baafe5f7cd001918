/* cuda_backward_conv.c: GPU backward rules of Conv (cuDNN's backward data and filter on the
 * forward's descriptors, dB as a per-channel sum), the pools and BatchNormalization in inference
 * mode (backward_conv.cu's kernels), f32, with src/ops' rules' semantics. */
#include <stdlib.h>
#include <string.h>

#include "../ops/grad_util.h"
#include "../ops/nn.h"
#include "backward_conv_launch.h"
#include "cuda_backward.h"
#include "cuda_conv.h"

/* The forward's window over X = in[0] with Y = out[0] (kernel: Conv's from W, NULL for a pool's
 * kernel_shape) as 3-D; false for one the CPU reference should judge (and report). */
static bool bwd_window(const cuda_bwd *b, const int64_t *kernel, gr_window *w) {
    graft_err scratch = {0};
    grad_call gc = {b->call->node, b->in, b->n_in, b->out, b->n_out, b->dout, b->din, &scratch};
    if (gr_window_init(&gc, kernel, w) != GRAFT_OK) return false;
    for (int a = 0; a < 3; a++)
        if (w->kernel[a] < 1 || w->stride[a] < 1 || w->dilation[a] < 1 || w->pad_begin[a] < 0 ||
            w->pad_end[a] < 0)
            return false;
    return true;
}

/* ---- Conv: cuDNN ------------------------------------------------------------------------- */

/* The cuDNN setup of one node for the X and W shapes it was built for. */
typedef struct conv_bwd_state {
    int ndim[2];
    int64_t dims[2][GRAFT_MAX_DIMS];
    void *dnn;               /* the forward's dnn_state (cuda_conv.h): descriptors, window */
    bool usable;             /* false: these shapes go to the CPU */
    bool data_ok, filter_ok; /* an allowed algorithm was found */
    cudnnConvolutionBwdDataAlgo_t data_algo;
    cudnnConvolutionBwdFilterAlgo_t filter_algo;
    cudnnMathType_t data_math, filter_math;
    size_t data_ws, filter_ws;
} conv_bwd_state;

static void conv_state_free(void *p) {
    conv_bwd_state *cs = p;
    if (!cs) return;
    dnn_state_free(cs->dnn);
    free(cs);
}

/* X (N, C, in...), W (M, C / group, k...), Y (N, M, out...) and B (M) as grad_conv.c takes
 * them, all f32 and non-empty (empty sums are left to the CPU). */
static bool conv_shapes_ok(const cuda_bwd *b) {
    if (b->n_in < 2 || b->n_out < 1 || !b->dout[0]) return false;
    const tensor *x = b->in[0], *w = b->in[1], *y = b->out[0];
    const tensor *bias = b->n_in > 2 ? b->in[2] : NULL;
    if (!cuda_bwd_f32(x) || !cuda_bwd_f32(w) || !cuda_bwd_f32(y) || (bias && !cuda_bwd_f32(bias)))
        return false;
    if (x->ndim < 3 || x->ndim > 2 + NN_MAX_SPATIAL || w->ndim != x->ndim || y->ndim != x->ndim)
        return false;
    if (tensor_numel(x) == 0 || tensor_numel(w) == 0 || tensor_numel(y) == 0) return false;
    gr_window win;
    if (!bwd_window(b, w->dims + 2, &win)) return false;
    int64_t group = attr_i(b->call->node, "group", 1);
    if (group < 1 || w->dims[1] * group != x->dims[1] || w->dims[0] % group != 0 ||
        y->dims[0] != x->dims[0] || y->dims[1] != w->dims[0])
        return false;
    return !bias || tensor_numel(bias) == w->dims[0];
}

/* A cuDNN status that turns a configuration down (the CPU runs it) rather than failing. */
static bool cudnn_declined(cudnnStatus_t st) {
    return st == CUDNN_STATUS_BAD_PARAM || st == CUDNN_STATUS_NOT_SUPPORTED;
}

/* The forward's choice (cuda_conv.c): FFT transforms lose precision, fp32 never converts its
 * inputs to f16, and strict fp32 (TF32 not allowed) passes over tensor-op math and Winograd. */
static bool bwd_algo_allowed(cudnnStatus_t st, size_t memory, cudnnMathType_t math, bool fft,
                             bool winograd, bool strict) {
    if (st != CUDNN_STATUS_SUCCESS || memory > CONV_MAX_WORKSPACE || fft) return false;
    if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
    return !strict || (math != CUDNN_TENSOR_OP_MATH && !winograd);
}

/* The math type the heuristics rank under: FMA only for strict fp32, else TF32 allowed. */
static cudnnMathType_t base_math(const cuda_backend *be) {
    return be->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* The first allowed backward-data algorithm of cuDNN's ranking whose workspace fits. */
static graft_status choose_data_algo(cuda_backend *be, const dnn_state *s, conv_bwd_state *cs,
                                     graft_err *e) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int returned = 0;
    bool strict = !be->allow_tf32;
    CUDNN_TRY(e, cudnnSetConvolutionMathType(s->conv_desc, base_math(be)),
              "setting a cuDNN math type");
    cudnnStatus_t st = cudnnGetConvolutionBackwardDataAlgorithm_v7(
        be->dnn, s->w_desc, s->y_desc, s->conv_desc, s->x_desc,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf);
    if (cudnn_declined(st)) return GRAFT_OK;
    if (st != CUDNN_STATUS_SUCCESS)
        return cudnn_fail(e, st, "ranking cuDNN's backward-data algorithms");
    for (int i = 0; i < returned; i++) {
        const cudnnConvolutionBwdDataAlgoPerf_t *p = &perf[i];
        bool fft = p->algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
                   p->algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING;
        bool winograd = p->algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
                        p->algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
        if (!bwd_algo_allowed(p->status, p->memory, p->mathType, fft, winograd, strict)) continue;
        cudnnMathType_t math = strict ? CUDNN_FMA_MATH : p->mathType;
        CUDNN_TRY(e, cudnnSetConvolutionMathType(s->conv_desc, math), "setting a cuDNN math type");
        size_t ws = 0;
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(be->dnn, s->w_desc, s->y_desc,
                                                          s->conv_desc, s->x_desc, p->algo, &ws);
        if (st != CUDNN_STATUS_SUCCESS || ws > CONV_MAX_WORKSPACE) continue;
        cs->data_algo = p->algo;
        cs->data_math = math;
        cs->data_ws = ws;
        cs->data_ok = true;
        return GRAFT_OK;
    }
    return GRAFT_OK;
}

/* The first allowed backward-filter algorithm of cuDNN's ranking whose workspace fits. */
static graft_status choose_filter_algo(cuda_backend *be, const dnn_state *s, conv_bwd_state *cs,
                                       graft_err *e) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int returned = 0;
    bool strict = !be->allow_tf32;
    CUDNN_TRY(e, cudnnSetConvolutionMathType(s->conv_desc, base_math(be)),
              "setting a cuDNN math type");
    cudnnStatus_t st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        be->dnn, s->x_desc, s->y_desc, s->conv_desc, s->w_desc,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf);
    if (cudnn_declined(st)) return GRAFT_OK;
    if (st != CUDNN_STATUS_SUCCESS)
        return cudnn_fail(e, st, "ranking cuDNN's backward-filter algorithms");
    for (int i = 0; i < returned; i++) {
        const cudnnConvolutionBwdFilterAlgoPerf_t *p = &perf[i];
        bool fft = p->algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
                   p->algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING;
        bool winograd = p->algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
                        p->algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
        if (!bwd_algo_allowed(p->status, p->memory, p->mathType, fft, winograd, strict)) continue;
        cudnnMathType_t math = strict ? CUDNN_FMA_MATH : p->mathType;
        CUDNN_TRY(e, cudnnSetConvolutionMathType(s->conv_desc, math), "setting a cuDNN math type");
        size_t ws = 0;
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(be->dnn, s->x_desc, s->y_desc,
                                                            s->conv_desc, s->w_desc, p->algo, &ws);
        if (st != CUDNN_STATUS_SUCCESS || ws > CONV_MAX_WORKSPACE) continue;
        cs->filter_algo = p->algo;
        cs->filter_math = math;
        cs->filter_ws = ws;
        cs->filter_ok = true;
        return GRAFT_OK;
    }
    return GRAFT_OK;
}

/* The forward's descriptors (conv_build, on the forward call: it reads Y from out[0] and does not
 * write it) and the backward algorithms, for the current X and W. */
static graft_status conv_state_build(const cuda_bwd *b, conv_bwd_state *cs) {
    graft_err *e = b->call->err;
    dnn_state_free(cs->dnn);
    cs->dnn = NULL;
    cs->usable = cs->data_ok = cs->filter_ok = false;
    cs->ndim[0] = cs->ndim[1] = 0; /* no key until the build succeeds */
    op_call fc = {b->call->node, b->in, b->n_in, (tensor *const *)b->out, b->n_out, e};
    dnn_state *s = NULL;
    TRY(dnn_state_get(b->be, &fc, &cs->dnn, 2, conv_build, &s));
    if (s->usable) TRY(choose_data_algo(b->be, s, cs, e));
    if (s->usable) TRY(choose_filter_algo(b->be, s, cs, e));
    cs->usable = s->usable;
    for (int i = 0; i < 2; i++) {
        cs->ndim[i] = b->in[i]->ndim;
        memcpy(cs->dims[i], b->in[i]->dims, sizeof(int64_t) * (size_t)b->in[i]->ndim);
    }
    return GRAFT_OK;
}

static bool conv_state_matches(const conv_bwd_state *cs, const cuda_bwd *b) {
    for (int i = 0; i < 2; i++) {
        const tensor *t = b->in[i];
        if (cs->ndim[i] != t->ndim ||
            memcmp(cs->dims[i], t->dims, sizeof(int64_t) * (size_t)t->ndim) != 0)
            return false;
    }
    return true;
}

static graft_status conv_state_get(const cuda_bwd *b, conv_bwd_state **out) {
    if (!b->state->p) {
        conv_bwd_state *cs = calloc(1, sizeof *cs);
        if (!cs) return cuda_bwd_fail(b, GRAFT_E_OUT_OF_MEMORY, "out of memory for cuDNN state");
        b->state->p = cs;
        b->state->free_fn = conv_state_free;
    }
    conv_bwd_state *cs = b->state->p;
    if (!conv_state_matches(cs, b)) TRY(conv_state_build(b, cs));
    *out = cs;
    return GRAFT_OK;
}

/* The explicit padding of the state's window (dnn_window's copy): X (N * C planes, in...)
 * inside what cuDNN reads (planes, padded...). */
static conv_pad_geom pad_geom(const dnn_state *s, const tensor *x, size_t *padded_bytes) {
    conv_pad_geom g;
    memset(&g, 0, sizeof g);
    g.planes = x->dims[0] * x->dims[1];
    int lead = 3 - s->win.nsp;
    for (int a = 0; a < 3; a++) {
        int src = a - lead;
        g.in[a] = src >= 0 ? s->win.in[src] : 1;
        g.out[a] = src >= 0 ? s->win.padded[src] : 1;
        g.before[a] = src >= 0 ? s->win.before[src] : 0;
    }
    *padded_bytes = (size_t)(g.planes * g.out[0] * g.out[1] * g.out[2]) * sizeof(float);
    return g;
}

/* A cuDNN call's status: a configuration turned down when it runs sets *declined (the CPU
 * runs these shapes from then on). */
static graft_status run_status(const cuda_bwd *b, cudnnStatus_t st, bool *declined,
                               const char *what) {
    if (st == CUDNN_STATUS_SUCCESS) return GRAFT_OK;
    if (cudnn_declined(st)) {
        *declined = true;
        return GRAFT_OK;
    }
    return cudnn_fail(b->call->err, st, what);
}

/* dX (N, C, in...) = cuDNN's backward data of dY (N, M, out...) and W, computed over the padded
 * input and cropped when the window pads explicitly. */
static graft_status conv_dx(const cuda_bwd *b, const conv_bwd_state *cs, void *ws, bool *declined) {
    cuda_backend *be = b->be;
    graft_err *e = b->call->err;
    const dnn_state *s = cs->dnn;
    size_t bytes;
    conv_pad_geom g = pad_geom(s, b->in[0], &bytes);
    void *padded = NULL, *dst = b->din[0]->data;
    CUDNN_TRY(e, cudnnSetConvolutionMathType(s->conv_desc, cs->data_math),
              "setting a cuDNN math type");
    if (s->win.copy) {
        TRY(cuda_malloc(be, bytes, &padded, e));
        dst = padded;
    }
    float alpha = 1.0f, beta = 0.0f;
    cudnnStatus_t st = cudnnConvolutionBackwardData(
        be->dnn, &alpha, s->w_desc, b->in[1]->data, s->y_desc, b->dout[0]->data, s->conv_desc,
        cs->data_algo, ws, cs->data_ws, &beta, s->x_desc, dst);
    graft_status r = run_status(b, st, declined, "running cuDNN's convolution backward data");
    if (r == GRAFT_OK && !*declined && padded)
        r = cuda_fail_if(e, bwd_crop_launch(padded, b->din[0]->data, g, be->stream),
                         "cropping dX out of its padded image");
    cuda_free(be, padded);
    return r;
}

/* dW (M, C / group, k...) = cuDNN's backward filter of X (padded explicitly when the window
 * needs it) and dY (N, M, out...). */
static graft_status conv_dw(const cuda_bwd *b, const conv_bwd_state *cs, void *ws, bool *declined) {
    cuda_backend *be = b->be;
    graft_err *e = b->call->err;
    const dnn_state *s = cs->dnn;
    size_t bytes;
    conv_pad_geom g = pad_geom(s, b->in[0], &bytes);
    const void *x = b->in[0]->data;
    void *padded = NULL;
    CUDNN_TRY(e, cudnnSetConvolutionMathType(s->conv_desc, cs->filter_math),
              "setting a cuDNN math type");
    if (s->win.copy) {
        TRY(cuda_malloc(be, bytes, &padded, e));
        graft_status r =
            cuda_fail_if(e, conv_pad_launch(x, padded, g, 4, 0, be->stream), "padding X for cuDNN");
        if (r != GRAFT_OK) {
            cuda_free(be, padded);
            return r;
        }
        x = padded;
    }
    float alpha = 1.0f, beta = 0.0f;
    cudnnStatus_t st = cudnnConvolutionBackwardFilter(
        be->dnn, &alpha, s->x_desc, x, s->y_desc, b->dout[0]->data, s->conv_desc, cs->filter_algo,
        ws, cs->filter_ws, &beta, s->w_desc, b->din[1]->data);
    graft_status r = run_status(b, st, declined, "running cuDNN's convolution backward filter");
    cuda_free(be, padded);
    return r;
}

/* dX and dW through cuDNN; *declined when cuDNN turned the shapes down (the CPU runs them). */
static graft_status conv_cudnn(const cuda_bwd *b, bool want_dx, bool want_dw, bool *declined) {
    conv_bwd_state *cs = NULL;
    TRY(conv_state_get(b, &cs));
    if (!cs->usable || (want_dx && !cs->data_ok) || (want_dw && !cs->filter_ok)) {
        *declined = true;
        return GRAFT_OK;
    }
    size_t ws_bytes = want_dx ? cs->data_ws : 0;
    if (want_dw && cs->filter_ws > ws_bytes) ws_bytes = cs->filter_ws;
    void *ws = NULL; /* one workspace: the two calls run one after the other on the stream */
    if (ws_bytes) TRY(cuda_workspace(b->be, ws_bytes, &ws, b->call->err));
    if (want_dx) TRY(conv_dx(b, cs, ws, declined));
    if (want_dw && !*declined) TRY(conv_dw(b, cs, ws, declined));
    if (*declined) cs->usable = false;
    return GRAFT_OK;
}

/* Y (N, M, out...) = X (N, C, in...) conv W (M, C / group, k...) + B (M): dX, dW (cuDNN) and
 * dB (dY summed per output channel). Shapes cuDNN turns down go to the CPU. */
graft_status cuda_bwd_conv(const cuda_bwd *b, bool *handled) {
    *handled = false;
    if (!conv_shapes_ok(b)) return GRAFT_OK;
    tensor *dx = b->din[0], *dw = b->din[1];
    tensor *db = b->n_in > 2 && b->in[2] ? b->din[2] : NULL;
    if (dx || dw) {
        bool declined = false;
        TRY(conv_cudnn(b, dx != NULL, dw != NULL, &declined));
        if (declined) return GRAFT_OK;
    }
    if (db) {
        const tensor *y = b->out[0];
        int64_t inner = tensor_numel(y) / (y->dims[0] * y->dims[1]);
        CUDA_TRY(b->call->err,
                 bwd_channel_sum_launch(b->dout[0]->data, db->data, y->dims[0], y->dims[1], inner,
                                        b->be->stream),
                 "summing Conv's bias gradient");
    }
    *handled = true;
    return GRAFT_OK;
}

/* ---- pools ------------------------------------------------------------------------------- */

static bool pool_geom_of(const cuda_bwd *b, bwd_pool_geom *g) {
    gr_window w;
    if (!bwd_window(b, NULL, &w)) return false;
    const tensor *x = b->in[0];
    g->planes = x->dims[0] * x->dims[1];
    for (int a = 0; a < 3; a++) {
        g->in[a] = w.in[a];
        g->kernel[a] = w.kernel[a];
        g->stride[a] = w.stride[a];
        g->dilation[a] = w.dilation[a];
        g->pad_begin[a] = w.pad_begin[a];
        g->pad_end[a] = w.pad_end[a];
        g->out[a] = w.out[a];
    }
    return true;
}

/* No input element lies in two windows: along every axis with more than one window, the stride
 * is at least the dilated kernel's extent. */
static bool pool_disjoint(const bwd_pool_geom *g) {
    for (int a = 0; a < 3; a++)
        if (g->out[a] > 1 && g->stride[a] < (g->kernel[a] - 1) * g->dilation[a] + 1) return false;
    return true;
}

/* MaxPool, AveragePool (grad_pool.c's window rules), GlobalAveragePool and GlobalMaxPool: dX
 * (N, C, in...) from dY (N, C, out...) and, for the max pools, X. */
graft_status cuda_bwd_pool(const cuda_bwd *b, bool *handled) {
    *handled = false;
    if (b->n_in < 1 || b->n_out < 1) return GRAFT_OK;
    const tensor *x = b->in[0], *y = b->out[0], *dy = b->dout[0];
    tensor *dx = b->din[0];
    if (!cuda_bwd_f32(x) || !cuda_bwd_f32(y) || !dy || x->ndim < 3) return GRAFT_OK;
    bool global = !strncmp(b->op, "Global", 6), is_max = strstr(b->op, "Max") != NULL;
    cudaError_t err = cudaSuccess;
    if (global) {
        int64_t planes = x->dims[0] * x->dims[1], size = dims_numel(x->ndim - 2, x->dims + 2);
        if (tensor_numel(y) != planes) return GRAFT_OK;
        if (dx)
            err = bwd_global_pool_launch(x->data, dy->data, dx->data, planes, size, is_max,
                                         b->be->stream);
    } else {
        bwd_pool_geom g;
        if (x->ndim > 2 + NN_MAX_SPATIAL || y->ndim != x->ndim || !pool_geom_of(b, &g))
            return GRAFT_OK;
        bool include_pad = attr_i(b->call->node, "count_include_pad", 0) == 1;
        if (dx && is_max)
            err = bwd_maxpool_launch(x->data, dy->data, dx->data, g, pool_disjoint(&g),
                                     b->be->stream);
        else if (dx)
            err = bwd_avgpool_launch(dy->data, dx->data, g, include_pad, b->be->stream);
    }
    if (err != cudaSuccess) return cuda_fail(b->call->err, err, "running a pool's backward");
    *handled = true;
    return GRAFT_OK;
}

/* ---- BatchNormalization ------------------------------------------------------------------ */

/* Running statistics normalise (inference mode): training_mode 0 from opset 14, and before it
 * no statistics output asked for (grad_norm.c's reading of the node). */
static bool bn_inference(const cuda_bwd *b) {
    if (b->fwd_opset >= 14) return attr_i(b->call->node, "training_mode", 0) == 0;
    for (int i = 1; i < b->n_out; i++)
        if (b->out[i]) return false;
    return true;
}

/* Inference mode: dX (N, C, ...) = dY * scale / sqrt(var + eps), and per channel (or per
 * activation, spatial=0) dScale, dB, dMean and dVar. Training mode goes to the CPU. */
graft_status cuda_bwd_batchnorm(const cuda_bwd *b, bool *handled) {
    *handled = false;
    if (b->n_in < 5 || b->n_out < 1 || !b->dout[0] || !cuda_bwd_f32(b->dout[0])) return GRAFT_OK;
    for (int i = 0; i < 5; i++)
        if (!cuda_bwd_f32(b->in[i])) return GRAFT_OK;
    const tensor *x = b->in[0];
    if (x->ndim < 2 || !bn_inference(b)) return GRAFT_OK;
    int64_t groups = x->dims[1], run = dims_numel(x->ndim - 2, x->dims + 2);
    if (tensor_numel(b->in[1]) != groups) { /* one parameter per activation */
        groups *= run;
        run = 1;
    }
    for (int i = 1; i < 5; i++)
        if (tensor_numel(b->in[i]) != groups) return GRAFT_OK;
    tensor *const *d = b->din;
    bwd_bn_args a = {
        .x = x->data,
        .dy = b->dout[0]->data,
        .scale = b->in[1]->data,
        .mean = b->in[3]->data,
        .var = b->in[4]->data,
        .dx = d[0] ? d[0]->data : NULL,
        .dscale = d[1] ? d[1]->data : NULL,
        .dbias = d[2] ? d[2]->data : NULL,
        .dmean = d[3] ? d[3]->data : NULL,
        .dvar = d[4] ? d[4]->data : NULL,
        .n = x->dims[0],
        .groups = groups,
        .run = run,
        .eps = attr_f(b->call->node, "epsilon", 1e-5f),
    };
    CUDA_TRY(b->call->err, bwd_batchnorm_launch(&a, b->be->stream),
             "running BatchNormalization's backward");
    *handled = true;
    return GRAFT_OK;
}

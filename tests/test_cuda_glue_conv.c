/* test_cuda_glue_conv.c: the host side of the CUDA Conv and pool kernels (src/cuda/cuda_conv.c)
 * without a GPU: a stand-in for cuDNN's legacy API computes on the host as cuDNN documents it
 * (symmetric pads, floor output sizes, max ignoring pads, include-pad averages over the whole
 * window, exclude-pad averages over the elements inside), and the results are compared with
 * graft's CPU reference over random 1-D to 3-D windows: asymmetric pads, auto_pad, ceil_mode,
 * dilations, groups and bias. The stand-in encodes cuDNN's semantics as documented; the GPU tests
 * check the real library. */
#include "../src/cuda/cuda_conv.c"

#include <math.h>
#include <stdio.h>

#include "test_node.h"
#include "test_util.h"

/* ---- a host cuDNN (f32, packed NCHW) -------------------------------------------------------- */

struct cudnnTensorStruct {
    int nb, dims[8];
};
struct cudnnFilterStruct {
    int nb, dims[8];
};
struct cudnnConvolutionStruct {
    int n, pad[3], stride[3], dilation[3], groups;
};
struct cudnnPoolingStruct {
    cudnnPoolingMode_t mode;
    int n, window[3], pad[3], stride[3];
};

static int bad_calls;

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
    *d = calloc(1, sizeof **d);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
    free(d);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nb,
                                         const int *dims, const int *strides) {
    int64_t packed = 1;
    if (t != CUDNN_DATA_FLOAT || (nb != 4 && nb != 5)) bad_calls++;
    d->nb = nb;
    for (int i = nb - 1; i >= 0; i--) {
        if (strides[i] != packed) bad_calls++;
        packed *= dims[i];
        d->dims[i] = dims[i];
    }
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
    *d = calloc(1, sizeof **d);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
    free(d);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                         cudnnTensorFormat_t f, int nb, const int *dims) {
    if (t != CUDNN_DATA_FLOAT || f != CUDNN_TENSOR_NCHW) bad_calls++;
    d->nb = nb;
    memcpy(d->dims, dims, sizeof(int) * (size_t)nb);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
    *d = calloc(1, sizeof **d);
    (*d)->groups = 1;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
    free(d);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int n, const int *pad,
                                              const int *stride, const int *dilation,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
    if (mode != CUDNN_CROSS_CORRELATION || compute != CUDNN_DATA_FLOAT) bad_calls++;
    d->n = n;
    for (int i = 0; i < n; i++) {
        d->pad[i] = pad[i];
        d->stride[i] = stride[i];
        d->dilation[i] = dilation[i];
    }
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
    d->groups = groups;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) {
    (void)d;
    if (m != CUDNN_FMA_MATH) bad_calls++; /* f32 without TF32 */
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t c,
                                                    const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int nb,
                                                    int *out) {
    if (nb != x->nb || nb != w->nb || c->n != nb - 2) bad_calls++;
    out[0] = x->dims[0];
    out[1] = w->dims[0];
    for (int i = 0; i < c->n; i++)
        out[2 + i] =
            (x->dims[2 + i] + 2 * c->pad[i] - ((w->dims[2 + i] - 1) * c->dilation[i] + 1)) /
                c->stride[i] +
            1;
    return CUDNN_STATUS_SUCCESS;
}
/* Ranks FFT and Winograd first: the glue must pass over them for f32. */
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y, const int n,
    int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
    (void)h, (void)x, (void)w, (void)c, (void)y;
    static const cudnnConvolutionFwdAlgo_t ranked[3] = {
        CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM};
    if (n < 3) bad_calls++;
    memset(perf, 0, sizeof *perf * 3);
    for (int i = 0; i < 3; i++) {
        perf[i].algo = ranked[i];
        perf[i].status = CUDNN_STATUS_SUCCESS;
        perf[i].mathType = CUDNN_FMA_MATH;
        perf[i].memory = 64;
    }
    *returned = 3;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h,
                                                      const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t c,
                                                      const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *s) {
    (void)h, (void)x, (void)w, (void)c, (void)y, (void)algo;
    *s = 64;
    return CUDNN_STATUS_SUCCESS;
}

/* Spatial dims of a 4-D or 5-D descriptor as 3-D. */
static void spatial3(const int *dims, int nb, int *s) {
    s[0] = nb == 5 ? dims[2] : 1;
    s[1] = dims[nb - 2];
    s[2] = dims[nb - 1];
}

/* One conv output point: the window's weighted sum, zeros outside the input. */
static double conv_point(const struct cudnnConvolutionStruct *cd, const float *x, const int *xs,
                         const float *w, const int *ws, const int *o) {
    double acc = 0;
    int lead = 3 - cd->n;
    for (int kd = 0; kd < ws[0]; kd++)
        for (int kh = 0; kh < ws[1]; kh++)
            for (int kw = 0; kw < ws[2]; kw++) {
                int k[3] = {kd, kh, kw}, at[3];
                bool inside = true;
                for (int a = 0; a < 3; a++) {
                    int s = a - lead;
                    at[a] = s < 0 ? o[a] + k[a]
                                  : o[a] * cd->stride[s] - cd->pad[s] + k[a] * cd->dilation[s];
                    if (at[a] < 0 || at[a] >= xs[a]) inside = false;
                }
                if (inside)
                    acc += (double)x[(at[0] * xs[1] + at[1]) * xs[2] + at[2]] *
                           w[(kd * ws[1] + kh) * ws[2] + kw];
            }
    return acc;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                      const cudnnTensorDescriptor_t xd, const void *xv,
                                      const cudnnFilterDescriptor_t wd, const void *wv,
                                      const cudnnConvolutionDescriptor_t cd,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_size,
                                      const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *yv) {
    (void)h;
    if (*(const float *)alpha != 1.0f || *(const float *)beta != 0.0f || !ws || ws_size != 64 ||
        algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        bad_calls++;
    int xs[3], wsz[3], ys[3];
    spatial3(xd->dims, xd->nb, xs);
    spatial3(wd->dims, wd->nb, wsz);
    spatial3(yd->dims, yd->nb, ys);
    int n_img = xd->dims[0], c = xd->dims[1], m = yd->dims[1];
    int cg = c / cd->groups, mg = m / cd->groups;
    int64_t xplane = (int64_t)xs[0] * xs[1] * xs[2], yplane = (int64_t)ys[0] * ys[1] * ys[2];
    int64_t wplane = (int64_t)wsz[0] * wsz[1] * wsz[2];
    for (int n = 0; n < n_img; n++)
        for (int oc = 0; oc < m; oc++)
            for (int64_t p = 0; p < yplane; p++) {
                int o[3] = {(int)(p / (ys[1] * ys[2])), (int)(p / ys[2] % ys[1]), (int)(p % ys[2])};
                double acc = 0;
                for (int ci = 0; ci < cg; ci++)
                    acc += conv_point(cd, (const float *)xv + (n * c + oc / mg * cg + ci) * xplane,
                                      xs, (const float *)wv + (oc * cg + ci) * wplane, wsz, o);
                ((float *)yv)[(n * m + oc) * yplane + p] = (float)acc;
            }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *d) {
    *d = calloc(1, sizeof **d);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) {
    free(d);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetPoolingNdDescriptor(cudnnPoolingDescriptor_t d, const cudnnPoolingMode_t mode,
                                          const cudnnNanPropagation_t nan, int n, const int *window,
                                          const int *pad, const int *stride) {
    (void)nan;
    d->mode = mode;
    d->n = n;
    for (int i = 0; i < n; i++) {
        d->window[i] = window[i];
        d->pad[i] = pad[i];
        d->stride[i] = stride[i];
        if (pad[i] >= window[i]) bad_calls++;
    }
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetPoolingNdForwardOutputDim(const cudnnPoolingDescriptor_t p,
                                                const cudnnTensorDescriptor_t x, int nb, int *out) {
    if (nb != x->nb || p->n != nb - 2) bad_calls++;
    out[0] = x->dims[0];
    out[1] = x->dims[1];
    for (int i = 0; i < p->n; i++)
        out[2 + i] = (x->dims[2 + i] + 2 * p->pad[i] - p->window[i]) / p->stride[i] + 1;
    return CUDNN_STATUS_SUCCESS;
}

static float pool_point(const struct cudnnPoolingStruct *p, const float *x, const int *xs,
                        const int *o) {
    int lead = 3 - p->n, lo[3], hi[3], window = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - lead;
        int k = s < 0 ? 1 : p->window[s], start = s < 0 ? o[a] : o[a] * p->stride[s] - p->pad[s];
        lo[a] = start < 0 ? 0 : start;
        hi[a] = start + k > xs[a] ? xs[a] : start + k;
        window *= k;
    }
    double best = -INFINITY, sum = 0;
    int count = 0;
    for (int d = lo[0]; d < hi[0]; d++)
        for (int h = lo[1]; h < hi[1]; h++)
            for (int w = lo[2]; w < hi[2]; w++) {
                double v = x[(d * xs[1] + h) * xs[2] + w];
                best = v > best ? v : best;
                sum += v;
                count++;
            }
    if (p->mode == CUDNN_POOLING_MAX) return (float)best;
    return (float)(sum / (p->mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? window : count));
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t p,
                                  const void *alpha, const cudnnTensorDescriptor_t xd,
                                  const void *xv, const void *beta,
                                  const cudnnTensorDescriptor_t yd, void *yv) {
    (void)h, (void)alpha, (void)beta;
    int xs[3], ys[3];
    spatial3(xd->dims, xd->nb, xs);
    spatial3(yd->dims, yd->nb, ys);
    int64_t planes = (int64_t)xd->dims[0] * xd->dims[1];
    int64_t xplane = (int64_t)xs[0] * xs[1] * xs[2], yplane = (int64_t)ys[0] * ys[1] * ys[2];
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t q = 0; q < yplane; q++) {
            int o[3] = {(int)(q / (ys[1] * ys[2])), (int)(q / ys[2] % ys[1]), (int)(q % ys[2])};
            ((float *)yv)[pl * yplane + q] = pool_point(p, (const float *)xv + pl * xplane, xs, o);
        }
    return CUDNN_STATUS_SUCCESS;
}

/* ---- host stand-ins for the padding and bias kernels and the device memory --------------- */

cudaError_t conv_pad_launch(const void *x, void *y, conv_pad_geom g, int es, uint32_t fill,
                            cudaStream_t s) {
    (void)s;
    if (es != 4) bad_calls++;
    int64_t total = g.planes * g.out[0] * g.out[1] * g.out[2];
    for (int64_t i = 0; i < total; i++) {
        int64_t w = i % g.out[2], h = i / g.out[2] % g.out[1],
                d = i / g.out[2] / g.out[1] % g.out[0];
        int64_t pl = i / g.out[2] / g.out[1] / g.out[0];
        int64_t id = d - g.before[0], ih = h - g.before[1], iw = w - g.before[2];
        bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2];
        ((uint32_t *)y)[i] =
            inside ? ((const uint32_t *)x)[((pl * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw]
                   : fill;
    }
    return cudaSuccess;
}

cudaError_t conv_bias_add_launch(void *y, const void *b, int64_t outer, int64_t channels,
                                 int64_t inner, graft_dtype dt, cudaStream_t s) {
    (void)s;
    if (dt != GRAFT_DTYPE_F32) bad_calls++;
    for (int64_t i = 0; i < outer * channels * inner; i++)
        ((float *)y)[i] += ((const float *)b)[i / inner % channels];
    return cudaSuccess;
}

/* Channels-last activations are not planned here (NCHW f32 only): the GPU tests cover NHWC. */
bool cuda_in_nhwc(const cuda_backend *be, const op_call *c, int k) {
    (void)be, (void)c, (void)k;
    return false;
}

bool cuda_out_nhwc(const cuda_backend *be, const op_call *c, int k) {
    (void)be, (void)c, (void)k;
    return false;
}

graft_status cuda_nhwc_copy(cuda_backend *be, void *dst, const void *src, const int64_t *dims,
                            size_t elem, bool to_nhwc, graft_err *e) {
    (void)be, (void)dst, (void)src, (void)dims, (void)elem, (void)to_nhwc, (void)e;
    bad_calls++;
    return GRAFT_OK;
}

static char workspace[64];
static int live_buffers;

graft_status cuda_workspace(cuda_backend *be, size_t bytes, void **out, graft_err *e) {
    (void)be;
    if (bytes > sizeof workspace) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "workspace");
    *out = workspace;
    return GRAFT_OK;
}

graft_status cuda_malloc(cuda_backend *be, size_t bytes, void **out, graft_err *e) {
    (void)be, (void)e;
    *out = malloc(bytes);
    live_buffers++;
    return GRAFT_OK;
}

void cuda_free(cuda_backend *be, void *p) {
    (void)be;
    if (p) live_buffers--;
    free(p);
}

/* ---- random nodes compared with the reference ---------------------------------------------- */

static uint32_t rng = 777;

static int rand_int(int n) {
    rng = rng * 1103515245u + 12345u;
    return (int)((rng >> 8) % (uint32_t)n);
}

static void fill(tensor *t) {
    int64_t n = tensor_numel(t);
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand_int(20001) / 10000.0f - 1.0f;
    t->data = p;
}

enum { KIND_CONV, KIND_MAX, KIND_AVG };

/* Window attributes at random; false when they do not fit the input (nothing to test). */
static bool random_window(test_node *t, int kind, int nsp, const int64_t *in, int64_t *k,
                          nn_window *win) {
    static const char *modes[3] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
    int64_t strides[3], dilations[3], pads[6];
    for (int i = 0; i < nsp; i++) {
        k[i] = 1 + rand_int(3);
        strides[i] = 1 + rand_int(3);
        dilations[i] = kind == KIND_CONV ? 1 + rand_int(2) : 1;
    }
    for (int i = 0; i < 2 * nsp; i++) pads[i] = rand_int(3);
    int mode = rand_int(6) - 3;
    if (mode >= 0)
        set_str(t, "auto_pad", modes[mode]);
    else
        set_ints(t, "pads", 2 * nsp, pads);
    set_ints(t, "strides", nsp, strides);
    set_ints(t, "dilations", nsp, dilations);
    if (kind != KIND_CONV) {
        set_ints(t, "kernel_shape", nsp, k);
        set_int(t, "ceil_mode", rand_int(2));
    }
    if (kind == KIND_AVG) set_int(t, "count_include_pad", rand_int(2));
    graft_err e;
    return nn_window_init(&t->node, nsp, in, kind == KIND_CONV ? k : NULL, win, &e) == GRAFT_OK;
}

/* One random node through the glue and the reference: 1 when they differ, 0 otherwise; counts
 * whether the glue took it. */
static int random_case(int kind, int *handled_count) {
    static const char *ops[3] = {"Conv", "MaxPool", "AveragePool"};
    test_node t;
    node_init(&t, ops[kind], 19);
    int nsp = 1 + rand_int(3);
    int64_t in[3], k[3], group = 1, n = 1 + rand_int(2), c = 1 + rand_int(4), m = 1 + rand_int(4);
    for (int i = 0; i < nsp; i++) in[i] = 1 + rand_int(nsp == 3 ? 5 : 9);
    nn_window win;
    if (!random_window(&t, kind, nsp, in, k, &win)) return 0;
    if (kind == KIND_CONV && rand_int(2)) {
        group = 1 + rand_int(3);
        c = group * (1 + rand_int(2));
        m = group * (1 + rand_int(2));
    }
    if (kind == KIND_CONV) set_int(&t, "group", group);
    tensor x = {GRAFT_DTYPE_F32, 2 + nsp, {n, c}, NULL},
           w = {GRAFT_DTYPE_F32, 2 + nsp, {m, c / group}, NULL};
    tensor b = {GRAFT_DTYPE_F32, 1, {m}, NULL};
    tensor y = {GRAFT_DTYPE_F32, 2 + nsp, {n, kind == KIND_CONV ? m : c}, NULL};
    for (int i = 0; i < nsp; i++) {
        x.dims[2 + i] = in[i];
        w.dims[2 + i] = k[i];
        y.dims[2 + i] = win.out[i];
    }
    tensor ref = y;
    fill(&x);
    fill(&w);
    fill(&b);
    fill(&y);
    fill(&ref);
    const tensor *ins[3] = {&x, &w, kind == KIND_CONV && rand_int(2) ? &b : NULL};
    tensor *outs[1] = {&y}, *ref_outs[1] = {&ref};
    graft_err err = {0};
    op_call call = {&t.node, ins, kind == KIND_CONV ? 3 : 1, outs, 1, &err};
    op_call ref_call = {&t.node, ins, kind == KIND_CONV ? 3 : 1, ref_outs, 1, &err};
    void *state = NULL;
    bool handled = false;
    cuda_backend be;
    memset(&be, 0, sizeof be);
    graft_status st = kind == KIND_CONV ? run_Conv(&be, &call, &state, &handled)
                                        : run_pool(&be, &call, &state, &handled, kind == KIND_MAX);
    graft_status ref_st = kind == KIND_CONV  ? ref_Conv(&ref_call)
                          : kind == KIND_MAX ? ref_MaxPool(&ref_call)
                                             : ref_AveragePool(&ref_call);
    int differs = st != GRAFT_OK || ref_st != GRAFT_OK;
    for (int64_t i = 0; handled && !differs && i < tensor_numel(&y); i++) {
        float g = ((float *)y.data)[i], r = ((float *)ref.data)[i];
        differs = !(fabsf(g - r) <= 1e-5f * (1.0f + fabsf(r)));
    }
    if (differs) printf("# %s, %d spatial axes, differs from the reference\n", ops[kind], nsp);
    *handled_count += handled;
    dnn_state_free(state);
    free(x.data), free(w.data), free(b.data), free(y.data), free(ref.data);
    return differs;
}

int main(void) {
    int differ[3] = {0}, handled[3] = {0};
    for (int iter = 0; iter < 6000; iter++)
        differ[iter % 3] += random_case(iter % 3, &handled[iter % 3]);
    CHECK("conv_matches_reference", !differ[KIND_CONV] && handled[KIND_CONV] > 1000,
          "%d differ, %d handled", differ[KIND_CONV], handled[KIND_CONV]);
    CHECK("maxpool_matches_reference", !differ[KIND_MAX] && handled[KIND_MAX] > 1000,
          "%d differ, %d handled", differ[KIND_MAX], handled[KIND_MAX]);
    CHECK("avgpool_matches_reference", !differ[KIND_AVG] && handled[KIND_AVG] > 600,
          "%d differ, %d handled", differ[KIND_AVG], handled[KIND_AVG]);
    CHECK("cudnn_calls_well_formed", bad_calls == 0, "%d malformed calls", bad_calls);
    CHECK("temporaries_freed", live_buffers == 0, "%d buffers left", live_buffers);
    return test_failures ? 1 : 0;
}

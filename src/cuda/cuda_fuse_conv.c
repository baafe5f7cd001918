/* cuda_fuse_conv.c: fused Conv groups: Conv -> Relu, Conv -> Add -> Relu and Conv -> Add in one
 * cudnnConvolutionBiasActivationForward, Conv -> Clip (ReLU6) as the convolution plus one
 * epilogue pass (cuDNN's fused call has no clipped activation). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/scalar.h"
#include "../ops/nn.h"
#include "cuda_conv.h"
#include "cuda_internal.h"
#include "fuse_conv_launch.h"

/* What follows the convolution's bias (and residual add). */
typedef enum conv_act { ACT_NONE, ACT_RELU, ACT_CLIP } conv_act;

/* ---- matching ------------------------------------------------------------------------------- */

static int match_add_relu(const ir_graph *g, int first, const unsigned char *on_dev,
                          const int *readers, int *members, int max_members) {
    int add = fusion_after_conv(g, first, on_dev, readers, "Add");
    if (add < 0 || max_members < 3) return 0;
    int relu = fusion_sole_reader(g, g->nodes[add].outputs[0], add, on_dev, readers, "Relu");
    if (relu < 0 || g->nodes[relu].n_out != 1) return 0;
    members[0] = first;
    members[1] = add;
    members[2] = relu;
    return 3;
}

static int match_pair(const ir_graph *g, int first, const unsigned char *on_dev, const int *readers,
                      int *members, int max_members, const char *op) {
    int r = fusion_after_conv(g, first, on_dev, readers, op);
    if (r < 0 || max_members < 2) return 0;
    members[0] = first;
    members[1] = r;
    return 2;
}

static int match_relu(const ir_graph *g, int first, const unsigned char *on_dev, const int *readers,
                      int *members, int max_members) {
    return match_pair(g, first, on_dev, readers, members, max_members, "Relu");
}

static int match_clip(const ir_graph *g, int first, const unsigned char *on_dev, const int *readers,
                      int *members, int max_members) {
    return match_pair(g, first, on_dev, readers, members, max_members, "Clip");
}

static int match_add(const ir_graph *g, int first, const unsigned char *on_dev, const int *readers,
                     int *members, int max_members) {
    return match_pair(g, first, on_dev, readers, members, max_members, "Add");
}

/* ---- the group's tensors -------------------------------------------------------------------- */

typedef struct conv_group {
    const op_call *conv;
    const tensor *x, *w, *bias; /* bias NULL when the Conv has none */
    const tensor *z;            /* the residual, or NULL */
    const op_call *add;         /* the Add member, or NULL */
    int z_input;                /* z's input index in the Add */
    tensor *y;                  /* the group's output: the last member's */
    conv_act act;
    float lo, hi; /* the clamp: Relu [0, inf), Clip [min, max], none (-inf, inf) */
} conv_group;

static bool same_shape(const tensor *a, const tensor *b) {
    return a && b && a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* Clip's bound input k (host memory): *v stays when omitted; false when not a float scalar of
 * the data's dtype. */
static bool clip_bound(const op_call *c, int k, graft_dtype dt, float *v) {
    const tensor *t = k < c->n_in ? c->in[k] : NULL;
    if (!t) return true;
    if (t->dtype != dt || tensor_numel(t) != 1 || !t->data) return false;
    *v = (float)scalar_load_f64(t->data, t->dtype, 0);
    return true;
}

static bool parse_act(const op_call *c, conv_group *cg) {
    cg->lo = -INFINITY;
    cg->hi = INFINITY;
    if (cg->act == ACT_RELU) cg->lo = 0.0f;
    if (cg->act != ACT_CLIP) return true;
    if (c->node->opset < 11) {
        cg->lo = attr_f(c->node, "min", -INFINITY);
        cg->hi = attr_f(c->node, "max", INFINITY);
        return true;
    }
    return clip_bound(c, 1, cg->y->dtype, &cg->lo) && clip_bound(c, 2, cg->y->dtype, &cg->hi);
}

/* The Add member: the residual is the operand that is not the convolution's output. */
static bool parse_add(const op_call *a, const op_call *conv, conv_group *cg) {
    if (a->n_in != 2 || a->n_out < 1) return false;
    int conv_out = conv->node->outputs[0];
    int k = a->node->inputs[0] == conv_out ? 0 : a->node->inputs[1] == conv_out ? 1 : -1;
    if (k < 0) return false;
    const tensor *y0 = conv->out[0];
    cg->z = a->in[1 - k];
    cg->add = a;
    cg->z_input = 1 - k;
    return same_shape(a->in[k], y0) && same_shape(cg->z, y0) && same_shape(a->out[0], y0) &&
           cg->z->data;
}

/* Fill cg from the members' calls; false for anything the fused kernels do not cover (the
 * members then run one by one, and their own kernels report real errors). */
static bool parse_group(const op_call *calls, int n, bool add, conv_act act, conv_group *cg) {
    memset(cg, 0, sizeof *cg);
    if (n != 1 + (add ? 1 : 0) + (act != ACT_NONE ? 1 : 0)) return false;
    const op_call *c = &calls[0];
    cudnnDataType_t type;
    if (c->n_in < 2 || c->n_out < 1 || !c->in[0] || !c->in[1] || !c->out[0]) return false;
    cg->conv = c;
    cg->x = c->in[0];
    cg->w = c->in[1];
    cg->bias = c->n_in > 2 ? c->in[2] : NULL;
    const tensor *y0 = c->out[0];
    graft_dtype dt = y0->dtype;
    if (!dnn_type(dt, &type) || cg->x->dtype != dt || cg->w->dtype != dt) return false;
    if (cg->x->ndim < 3 || cg->x->ndim > 2 + NN_MAX_SPATIAL || cg->w->ndim != cg->x->ndim ||
        y0->ndim != cg->x->ndim)
        return false;
    if (cg->bias && (cg->bias->dtype != dt || cg->bias->ndim != 1 ||
                     cg->bias->dims[0] != y0->dims[1] || !cg->bias->data))
        return false;
    if (add && !parse_add(&calls[1], c, cg)) return false;
    const op_call *last = &calls[n - 1];
    if (last->n_out < 1 || !same_shape(last->out[0], y0)) return false;
    cg->y = last->out[0];
    cg->act = act;
    if (act != ACT_NONE && (last->n_in < 1 || !same_shape(last->in[0], y0))) return false;
    return parse_act(last, cg) && cg->x->data && cg->w->data && cg->y->data;
}

/* ---- state ---------------------------------------------------------------------------------- */

/* The group's convolution state (cuda_conv.c's, keyed by X and W) and what the fused call adds,
 * built for the shapes in `key`. */
typedef struct fuse_state {
    void *conv; /* dnn_state */
    graft_dtype dtype;
    int ndim[2];
    int64_t dims[2][GRAFT_MAX_DIMS];
    bool built;
    bool fused; /* cuDNN's fused call runs these shapes (else conv + epilogue) */
    bool noted; /* the switch to conv + epilogue was logged */
    cudnnTensorDescriptor_t bias_desc;
    cudnnActivationDescriptor_t act_desc;
    cudnnConvolutionFwdAlgo_t algo;
    size_t workspace_bytes;
} fuse_state;

static void fuse_state_free(void *state) {
    fuse_state *fs = state;
    if (!fs) return;
    dnn_state_free(fs->conv);
    if (fs->bias_desc) cudnnDestroyTensorDescriptor(fs->bias_desc);
    if (fs->act_desc) cudnnDestroyActivationDescriptor(fs->act_desc);
    free(fs);
}

static bool fuse_key_matches(const fuse_state *fs, const conv_group *cg) {
    const tensor *t[2] = {cg->x, cg->w};
    if (!fs->built || fs->dtype != cg->y->dtype) return false;
    for (int i = 0; i < 2; i++)
        if (fs->ndim[i] != t[i]->ndim ||
            memcmp(fs->dims[i], t[i]->dims, sizeof(int64_t) * (size_t)t[i]->ndim) != 0)
            return false;
    return true;
}

static void fuse_key_set(fuse_state *fs, const conv_group *cg) {
    const tensor *t[2] = {cg->x, cg->w};
    fs->dtype = cg->y->dtype;
    for (int i = 0; i < 2; i++) {
        fs->ndim[i] = t[i]->ndim;
        memcpy(fs->dims[i], t[i]->dims, sizeof(int64_t) * (size_t)t[i]->ndim);
    }
    fs->built = true;
}

/* IMPLICIT_PRECOMP_GEMM: the one algorithm cuDNN's fused call takes with an identity
 * activation, and the fallback for Relu when the convolution's own choice is turned down. */
static bool use_precomp_gemm(cuda_backend *be, const dnn_state *s, fuse_state *fs) {
    size_t ws = 0;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    if (cudnnGetConvolutionForwardWorkspaceSize(be->dnn, s->x_desc, s->w_desc, s->conv_desc,
                                                s->y_desc, algo, &ws) != CUDNN_STATUS_SUCCESS ||
        ws > CONV_MAX_WORKSPACE)
        return false;
    fs->algo = algo;
    fs->workspace_bytes = ws;
    return true;
}

/* The bias and activation descriptors and the algorithm of the fused call for these shapes.
 * Clip has no cuDNN activation: it always takes conv + epilogue. */
static graft_status fuse_build(cuda_backend *be, const conv_group *cg, const dnn_state *s,
                               fuse_state *fs) {
    graft_err *e = cg->conv->err;
    fs->fused = false;
    if (cg->act == ACT_CLIP) return GRAFT_OK;
    cudnnDataType_t type;
    dnn_type(cg->y->dtype, &type);
    int nb = s->win.nsp + 2, dims[5], strides[5];
    for (int i = 0; i < nb; i++) dims[i] = strides[i] = 1;
    dims[1] = (int)cg->y->dims[1]; /* cuDNN's y descriptor already holds it in an int */
    strides[0] = dims[1];
    if (!fs->bias_desc)
        CUDNN_TRY(e, cudnnCreateTensorDescriptor(&fs->bias_desc), "creating a bias descriptor");
    if (!fs->act_desc)
        CUDNN_TRY(e, cudnnCreateActivationDescriptor(&fs->act_desc),
                  "creating an activation descriptor");
    if (cudnnSetTensorNdDescriptor(fs->bias_desc, type, nb, dims, strides) != CUDNN_STATUS_SUCCESS)
        return GRAFT_OK;
    cudnnActivationMode_t mode =
        cg->act == ACT_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY;
    if (cudnnSetActivationDescriptor(fs->act_desc, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0) !=
        CUDNN_STATUS_SUCCESS)
        return GRAFT_OK;
    if (cg->act == ACT_RELU) {
        fs->algo = s->algo;
        fs->workspace_bytes = s->workspace_bytes;
        fs->fused = true;
    } else {
        fs->fused = use_precomp_gemm(be, s, fs);
    }
    return GRAFT_OK;
}

/* ---- running -------------------------------------------------------------------------------- */

/* cuDNN turned the fused call down (bad or unsupported parameters, or an internal failure of
 * its fused path): conv + epilogue does the same work. A CUDA error that sticks is reported by
 * the calls that follow. */
static bool cudnn_declined(cudnnStatus_t st) {
    return (int)st >= (int)CUDNN_STATUS_BAD_PARAM && (int)st < (int)CUDNN_STATUS_EXECUTION_FAILED;
}

/* A zero bias for a Conv without one (cuDNN's fused call always adds a bias). */
static graft_status zero_bias(cuda_backend *be, const conv_group *cg, void **out) {
    size_t bytes = (size_t)cg->y->dims[1] * (cg->y->dtype == GRAFT_DTYPE_F32 ? 4 : 2);
    TRY(cuda_malloc(be, bytes, out, cg->conv->err));
    cudaError_t err = cudaMemsetAsync(*out, 0, bytes, be->stream);
    if (err == cudaSuccess) return GRAFT_OK;
    cuda_free(be, *out);
    *out = NULL;
    return cuda_fail(cg->conv->err, err, "zeroing a bias");
}

/* y = act(conv(x) + bias + z) in one cuDNN call; *st says whether cuDNN took it. Without a
 * residual, z is y itself with alpha2 = 0 (cuDNN wants a z). */
static graft_status run_fused(cuda_backend *be, const conv_group *cg, dnn_state *s,
                              const fuse_state *fs, bool y_nhwc, cudnnStatus_t *cst) {
    graft_err *e = cg->conv->err;
    void *ws = NULL, *zeros = NULL;
    if (fs->workspace_bytes) TRY(cuda_workspace(be, fs->workspace_bytes, &ws, e));
    const void *bias = cg->bias ? cg->bias->data : NULL;
    if (!bias) {
        TRY(zero_bias(be, cg, &zeros));
        bias = zeros;
    }
    dnn_io io;
    graft_status st = dnn_io_begin(be, cg->conv, s, cg->y, y_nhwc, &io);
    if (st != GRAFT_OK) {
        cuda_free(be, zeros);
        return st;
    }
    float alpha1 = 1.0f, alpha2 = cg->z ? 1.0f : 0.0f; /* f32 factors for f32, f16, bf16 */
    const void *z = cg->z ? cg->z->data : io.y;
    *cst = cudnnConvolutionBiasActivationForward(be->dnn, &alpha1, s->x_desc, io.x, s->w_desc, io.w,
                                                 s->conv_desc, fs->algo, ws, fs->workspace_bytes,
                                                 &alpha2, s->y_desc, z, fs->bias_desc, bias,
                                                 fs->act_desc, s->y_desc, io.y);
    cuda_free(be, zeros);
    if (*cst != CUDNN_STATUS_SUCCESS && !cudnn_declined(*cst))
        st = cudnn_fail(e, *cst, "running cuDNN's fused convolution");
    /* declined: nothing was written, nothing to copy */
    graft_status end =
        dnn_io_end(be, &io, *cst == CUDNN_STATUS_SUCCESS ? st : GRAFT_E_UNSUPPORTED, e);
    return *cst == CUDNN_STATUS_SUCCESS ? end : st;
}

/* The convolution (cuda_conv.c's algorithm), then bias, residual and clamp in one pass. */
static graft_status run_epilogue(cuda_backend *be, const conv_group *cg, dnn_state *s,
                                 bool y_nhwc) {
    graft_err *e = cg->conv->err;
    void *ws = NULL;
    if (s->workspace_bytes) TRY(cuda_workspace(be, s->workspace_bytes, &ws, e));
    dnn_io io;
    TRY(dnn_io_begin(be, cg->conv, s, cg->y, y_nhwc, &io));
    float alpha = 1.0f, beta = 0.0f;
    cudnnStatus_t cst =
        cudnnConvolutionForward(be->dnn, &alpha, s->x_desc, io.x, s->w_desc, io.w, s->conv_desc,
                                s->algo, ws, s->workspace_bytes, &beta, s->y_desc, io.y);
    graft_status st = GRAFT_OK;
    if (cst != CUDNN_STATUS_SUCCESS) st = cudnn_fail(e, cst, "running a cuDNN convolution");
    int64_t outer, channels, inner;
    dnn_split(s, cg->y, &outer, &channels, &inner);
    if (st == GRAFT_OK)
        st = cuda_fail_if(e,
                          conv_epilogue_launch(io.y, cg->bias ? cg->bias->data : NULL,
                                               cg->z ? cg->z->data : NULL, outer, channels, inner,
                                               cg->lo, cg->hi, cg->y->dtype, be->stream),
                          "running a fused convolution's epilogue");
    return dnn_io_end(be, &io, st, e);
}

static void note_declined(cuda_backend *be, fuse_state *fs, cudnnStatus_t st) {
    if (fs->noted || !be->log) return;
    fs->noted = true;
    char msg[200];
    snprintf(msg, sizeof msg,
             "fused Conv group: cuDNN's conv-bias-activation call declined (%s); running the "
             "convolution and a separate epilogue instead",
             cudnnGetErrorString(st));
    be->log(be->log_user, GRAFT_LOG_DEBUG, msg);
}

/* The fused call when cuDNN takes it (falling back from the convolution's algorithm to
 * IMPLICIT_PRECOMP_GEMM once), else conv + epilogue from then on. *done: y was written. */
static graft_status try_fused(cuda_backend *be, const conv_group *cg, dnn_state *s, fuse_state *fs,
                              bool y_nhwc, bool *done) {
    *done = false;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    TRY(run_fused(be, cg, s, fs, y_nhwc, &st));
    if (st != CUDNN_STATUS_SUCCESS &&
        fs->algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM && use_precomp_gemm(be, s, fs))
        TRY(run_fused(be, cg, s, fs, y_nhwc, &st));
    if (st == CUDNN_STATUS_SUCCESS) {
        *done = true;
        return GRAFT_OK;
    }
    fs->fused = false;
    note_declined(be, fs, st);
    return GRAFT_OK;
}

static graft_status run_group(cuda_backend *be, const op_call *calls, int n, void **state,
                              bool *handled, bool add, conv_act act) {
    *handled = false;
    conv_group cg;
    if (!parse_group(calls, n, add, act, &cg)) return GRAFT_OK;
    if (tensor_numel(cg.y) == 0) {
        *handled = true;
        return GRAFT_OK;
    }
    if (tensor_numel(cg.x) == 0 || tensor_numel(cg.w) == 0) return GRAFT_OK;
    /* cuDNN reads x while writing y; z may be y in the fused call only. */
    const void *zd = cg.z ? cg.z->data : NULL;
    if (cg.x->data == cg.y->data) return GRAFT_OK;
    fuse_state *fs = *state;
    if (!fs) {
        fs = calloc(1, sizeof *fs);
        if (!fs) return op_error(cg.conv->node, cg.conv->err, GRAFT_E_OUT_OF_MEMORY, "fusion");
        *state = fs;
    }
    dnn_state *s = NULL;
    TRY(dnn_state_get(be, cg.conv, &fs->conv, 2, conv_build, &s));
    if (!s->usable) return GRAFT_OK;
    /* the residual must be in the layout the convolution writes */
    if (cg.z && cuda_in_nhwc(be, cg.add, cg.z_input) != s->nhwc) return GRAFT_OK;
    bool y_nhwc = cuda_out_nhwc(be, &calls[n - 1], 0);
    if (!fuse_key_matches(fs, &cg)) {
        fs->built = false;
        TRY(fuse_build(be, &cg, s, fs));
        fuse_key_set(fs, &cg);
    }
    bool done = false;
    if (fs->fused && zd != cg.x->data) TRY(try_fused(be, &cg, s, fs, y_nhwc, &done));
    if (!done) {
        if (zd == cg.y->data) return GRAFT_OK; /* the convolution would overwrite z */
        TRY(run_epilogue(be, &cg, s, y_nhwc));
    }
    *handled = true;
    return GRAFT_OK;
}

static graft_status run_add_relu(void *impl, const op_call *calls, int n, void **state,
                                 bool *handled) {
    cuda_backend *be = impl;
    return run_group(be, calls, n, state, handled, true, ACT_RELU);
}

static graft_status run_relu(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    cuda_backend *be = impl;
    return run_group(be, calls, n, state, handled, false, ACT_RELU);
}

static graft_status run_clip(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    cuda_backend *be = impl;
    return run_group(be, calls, n, state, handled, false, ACT_CLIP);
}

static graft_status run_add(void *impl, const op_call *calls, int n, void **state, bool *handled) {
    cuda_backend *be = impl;
    return run_group(be, calls, n, state, handled, true, ACT_NONE);
}

/* Tried in order: the longest pattern first. */
const cuda_fusion cuda_conv_fusions[] = {
    {"conv_add_relu", match_add_relu, run_add_relu, fuse_state_free},
    {"conv_relu", match_relu, run_relu, fuse_state_free},
    {"conv_clip", match_clip, run_clip, fuse_state_free},
    {"conv_add", match_add, run_add, fuse_state_free},
    {NULL, NULL, NULL, NULL},
};

/* nn.c: shape inference and attribute checks of the nn op family (Conv, BatchNormalization,
 * pools, Gemm, MatMul) and the window geometry they share with the kernels. */
#include <string.h>

#include "nn.h"

/* ---- window geometry ------------------------------------------------------------------------ */

static graft_status read_axis_attr(const ir_node *node, const char *name, int count, int64_t dflt,
                                   int64_t min, int64_t *vals, graft_err *e) {
    const int64_t *attr;
    int64_t n = attr_ints(node, name, &attr);
    for (int i = 0; i < count; i++) vals[i] = dflt;
    if (n < 0) return GRAFT_OK;
    if (n != count)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "%s has %lld values, expected %d", name,
                        (long long)n, count);
    for (int i = 0; i < count; i++) {
        if (attr[i] < min)
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "%s[%d] = %lld, must be >= %lld",
                            name, i, (long long)attr[i], (long long)min);
        vals[i] = attr[i];
    }
    return GRAFT_OK;
}

typedef enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID } auto_pad_mode;

static graft_status read_auto_pad(const ir_node *node, auto_pad_mode *mode, graft_err *e) {
    const char *s = attr_s(node, "auto_pad", "NOTSET");
    if (!strcmp(s, "NOTSET") || !s[0])
        *mode = PAD_NOTSET;
    else if (!strcmp(s, "SAME_UPPER"))
        *mode = PAD_SAME_UPPER;
    else if (!strcmp(s, "SAME_LOWER"))
        *mode = PAD_SAME_LOWER;
    else if (!strcmp(s, "VALID"))
        *mode = PAD_VALID;
    else
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", s);
    return GRAFT_OK;
}

/* Kernel sizes: the kernel_shape attribute, checked against (or filling in) the weights' dims. */
static graft_status read_kernel(const ir_node *node, int nsp, const int64_t *from_weights,
                                int64_t *kernel, graft_err *e) {
    const int64_t *attr;
    int64_t n = attr_ints(node, "kernel_shape", &attr);
    if (n < 0 && !from_weights)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "the kernel_shape attribute is required");
    if (n >= 0 && n != nsp)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "kernel_shape has %lld values for %d spatial axes", (long long)n, nsp);
    for (int i = 0; i < nsp; i++) {
        int64_t k = from_weights ? from_weights[i] : -1;
        if (n >= 0) {
            if (attr[i] < 1)
                return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "kernel_shape[%d] = %lld", i,
                                (long long)attr[i]);
            if (k >= 0 && k != attr[i])
                return op_error(node, e, GRAFT_E_SHAPE,
                                "kernel_shape[%d] = %lld but the weights have %lld", i,
                                (long long)attr[i], (long long)k);
            k = attr[i];
        }
        kernel[i] = k;
    }
    return GRAFT_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) {
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/* Output size along axis i once pads are resolved; also resolves SAME pads. */
static void resolve_axis(nn_window *w, int i, auto_pad_mode mode) {
    int64_t in = w->in[i], ext = nn_window_extent(w, i), s = w->stride[i];
    if (in < 0 || w->kernel[i] < 0) {
        w->out[i] = -1;
        if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) w->pad_begin[i] = w->pad_end[i] = -1;
        return;
    }
    if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
        int64_t out = ceil_div(in, s);
        int64_t total = (out - 1) * s + ext - in;
        if (total < 0) total = 0;
        int64_t small = total / 2, big = total - small;
        w->pad_begin[i] = mode == PAD_SAME_UPPER ? small : big;
        w->pad_end[i] = mode == PAD_SAME_UPPER ? big : small;
        w->out[i] = out;
        return;
    }
    int64_t span = in + w->pad_begin[i] + w->pad_end[i] - ext;
    if (span < 0) {
        w->out[i] = 0;
        return;
    }
    if (!w->ceil_mode) {
        w->out[i] = span / s + 1;
        return;
    }
    int64_t out = ceil_div(span, s) + 1;
    /* The last window must start inside the input or its left padding (as ONNX Runtime and
     * PyTorch do); otherwise it would cover padding only. */
    if ((out - 1) * s >= in + w->pad_begin[i]) out--;
    w->out[i] = out;
}

graft_status nn_window_init(const ir_node *node, int nsp, const int64_t *in, const int64_t *kernel,
                            nn_window *w, graft_err *e) {
    memset(w, 0, sizeof *w);
    if (nsp < 1 || nsp > NN_MAX_SPATIAL)
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "%d spatial axes; graft supports 1 to %d",
                        nsp, NN_MAX_SPATIAL);
    w->nsp = nsp;
    for (int i = 0; i < nsp; i++) w->in[i] = in[i];
    TRY(read_kernel(node, nsp, kernel, w->kernel, e));
    TRY(read_axis_attr(node, "strides", nsp, 1, 1, w->stride, e));
    TRY(read_axis_attr(node, "dilations", nsp, 1, 1, w->dilation, e));
    int64_t pads[2 * NN_MAX_SPATIAL];
    TRY(read_axis_attr(node, "pads", 2 * nsp, 0, 0, pads, e));
    auto_pad_mode mode = PAD_NOTSET;
    TRY(read_auto_pad(node, &mode, e));
    for (int i = 0; i < nsp; i++) {
        if (mode != PAD_NOTSET && (pads[i] || pads[i + nsp]))
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                            "explicit pads cannot be combined with auto_pad '%s'",
                            attr_s(node, "auto_pad", ""));
        w->pad_begin[i] = pads[i];
        w->pad_end[i] = pads[i + nsp];
    }
    int64_t ceil_mode = kernel ? 0 : attr_i(node, "ceil_mode", 0);
    if (ceil_mode != 0 && ceil_mode != 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "ceil_mode = %lld, expected 0 or 1",
                        (long long)ceil_mode);
    w->ceil_mode = ceil_mode == 1;
    for (int i = 0; i < nsp; i++) {
        resolve_axis(w, i, mode);
        if (w->out[i] == 0) {
            char s[128];
            return op_error(
                node, e, GRAFT_E_SHAPE,
                "the window (kernel %lld, dilation %lld) along spatial axis %d does not "
                "fit the padded input of spatial shape %s",
                (long long)w->kernel[i], (long long)w->dilation[i], i,
                shape_str(s, sizeof s, nsp, in));
        }
    }
    return GRAFT_OK;
}

/* ---- shared checks ------------------------------------------------------------------------ */

static bool is_float(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F64 || dt == GRAFT_DTYPE_F16 ||
           dt == GRAFT_DTYPE_BF16;
}

static bool is_gemm_type(graft_dtype dt) {
    return is_float(dt) || dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64 ||
           dt == GRAFT_DTYPE_U32 || dt == GRAFT_DTYPE_U64;
}

/* An input's dtype must be accepted by `ok` (when known). */
static graft_status check_dtype(const ir_node *node, const value_info *v, const char *what,
                                bool (*ok)(graft_dtype), graft_err *e) {
    if (v->dtype == GRAFT_DTYPE_UNDEFINED || ok(v->dtype)) return GRAFT_OK;
    return op_error(node, e, GRAFT_E_DTYPE, "input %s has unsupported dtype %s", what,
                    graft_dtype_name(v->dtype));
}

/* Two inputs that must share a dtype (when both are known). */
static graft_status check_same_dtype(const ir_node *node, const value_info *a, const value_info *b,
                                     const char *what_a, const char *what_b, graft_err *e) {
    if (a->dtype == GRAFT_DTYPE_UNDEFINED || b->dtype == GRAFT_DTYPE_UNDEFINED ||
        a->dtype == b->dtype)
        return GRAFT_OK;
    return op_error(node, e, GRAFT_E_DTYPE, "%s is %s but %s is %s", what_a,
                    graft_dtype_name(a->dtype), what_b, graft_dtype_name(b->dtype));
}

/* Rank of an N x C x spatial input: 3..(2 + NN_MAX_SPATIAL), or -1 when unknown. */
static graft_status check_image_rank(const ir_node *node, const value_info *x, const char *what,
                                     graft_err *e) {
    char s[256];
    if (x->ndim < 0) return GRAFT_OK;
    if (x->ndim < 3)
        return op_error(node, e, GRAFT_E_SHAPE, "%s has shape %s; expected (N, C, spatial...)",
                        what, shape_str(s, sizeof s, x->ndim, x->dims));
    if (x->ndim > 2 + NN_MAX_SPATIAL)
        return op_error(node, e, GRAFT_E_UNSUPPORTED,
                        "%s has shape %s; graft supports 1 to %d spatial axes", what,
                        shape_str(s, sizeof s, x->ndim, x->dims), NN_MAX_SPATIAL);
    return GRAFT_OK;
}

/* Spatial rank when neither the input's nor the weights' rank is known: the kernel_shape attr. */
static int spatial_rank_from_attrs(const ir_node *node) {
    const int64_t *v;
    int64_t n = attr_ints(node, "kernel_shape", &v);
    return n > 0 && n <= NN_MAX_SPATIAL ? (int)n : -1;
}

static void set_output(value_info *out, graft_dtype dt, int ndim, const int64_t *dims) {
    memset(out, 0, sizeof *out);
    out->present = true;
    out->dtype = dt;
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->dims[i] = dims[i];
}

/* ---- Conv --------------------------------------------------------------------------------- */

static graft_status conv_check_channels(const ir_node *node, const value_info *x,
                                        const value_info *w, const value_info *b, int64_t group,
                                        graft_err *e) {
    char sx[256], sw[256];
    int64_t c = x->ndim >= 2 ? x->dims[1] : -1;
    int64_t m = w->ndim >= 1 ? w->dims[0] : -1, cg = w->ndim >= 2 ? w->dims[1] : -1;
    if (x->ndim >= 0 && w->ndim >= 0 && x->ndim != w->ndim)
        return op_error(node, e, GRAFT_E_SHAPE, "X %s and W %s differ in rank",
                        shape_str(sx, sizeof sx, x->ndim, x->dims),
                        shape_str(sw, sizeof sw, w->ndim, w->dims));
    if (c >= 0 && cg >= 0 && c != cg * group)
        return op_error(
            node, e, GRAFT_E_SHAPE, "X %s has %lld channels but W %s with group %lld expects %lld",
            shape_str(sx, sizeof sx, x->ndim, x->dims), (long long)c,
            shape_str(sw, sizeof sw, w->ndim, w->dims), (long long)group, (long long)(cg * group));
    if (m >= 0 && m % group != 0)
        return op_error(node, e, GRAFT_E_SHAPE,
                        "%lld output channels do not split into %lld groups", (long long)m,
                        (long long)group);
    if (b && b->ndim >= 0 && (b->ndim != 1 || (m >= 0 && b->dims[0] >= 0 && b->dims[0] != m)))
        return op_error(node, e, GRAFT_E_SHAPE, "bias B has shape %s, expected (%lld)",
                        shape_str(sx, sizeof sx, b->ndim, b->dims), (long long)m);
    return GRAFT_OK;
}

graft_status op_infer_Conv(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 3, n_out, 1, 1, e));
    const value_info *x = &in[0], *w = &in[1], *b = n_in > 2 && in[2].present ? &in[2] : NULL;
    TRY(check_dtype(node, x, "X", is_float, e));
    TRY(check_same_dtype(node, x, w, "X", "W", e));
    if (b) TRY(check_same_dtype(node, x, b, "X", "B", e));
    graft_dtype dt = x->dtype != GRAFT_DTYPE_UNDEFINED ? x->dtype : w->dtype;
    int64_t group = attr_i(node, "group", 1);
    if (group < 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "group = %lld", (long long)group);
    TRY(check_image_rank(node, x, "X", e));
    TRY(check_image_rank(node, w, "W", e));
    TRY(conv_check_channels(node, x, w, b, group, e));
    int rank = x->ndim >= 0 ? x->ndim : w->ndim;
    if (rank < 0) {
        int nsp = spatial_rank_from_attrs(node);
        if (nsp < 0) {
            op_unknown(&out[0], dt);
            return GRAFT_OK;
        }
        rank = nsp + 2;
    }
    int nsp = rank - 2;
    int64_t in_sp[NN_MAX_SPATIAL], kernel[NN_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) {
        in_sp[i] = x->ndim >= 0 ? x->dims[i + 2] : -1;
        kernel[i] = w->ndim >= 0 ? w->dims[i + 2] : -1;
    }
    nn_window win;
    TRY(nn_window_init(node, nsp, in_sp, kernel, &win, e));
    int64_t dims[GRAFT_MAX_DIMS];
    dims[0] = x->ndim >= 0 ? x->dims[0] : -1;
    dims[1] = w->ndim >= 0 ? w->dims[0] : -1;
    for (int i = 0; i < nsp; i++) dims[i + 2] = win.out[i];
    set_output(&out[0], dt, rank, dims);
    return GRAFT_OK;
}

/* ---- BatchNormalization ------------------------------------------------------------------- */

/* Training mode (batch statistics) is spelled training_mode=1 from opset 14 and by asking for
 * the extra outputs before it. */
static graft_status bn_check_inference(const ir_node *node, int n_out, graft_err *e) {
    int64_t training = node->opset >= 14 ? attr_i(node, "training_mode", 0) : 0;
    if (training != 0 && training != 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "training_mode = %lld",
                        (long long)training);
    bool extra_outputs = false;
    for (int i = 1; i < n_out; i++)
        if (!node->outputs || node->outputs[i] >= 0) extra_outputs = true;
    if (training || (node->opset < 14 && extra_outputs))
        return op_error(node, e, GRAFT_E_UNSUPPORTED,
                        "training mode (batch statistics%s) is not supported; graft runs "
                        "BatchNormalization in inference mode with the running mean and variance",
                        training ? ", training_mode=1" : ", extra outputs");
    return GRAFT_OK;
}

graft_status op_infer_BatchNormalization(const ir_node *node, const value_info *in, int n_in,
                                         value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 5, 5, n_out, 1, node->opset >= 14 ? 3 : 5, e));
    TRY(bn_check_inference(node, n_out, e));
    static const char *names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 5; i++) TRY(check_dtype(node, &in[i], names[i], is_float, e));
    const value_info *x = &in[0];
    char s[256];
    if (x->ndim >= 0 && x->ndim < 2)
        return op_error(node, e, GRAFT_E_SHAPE, "X has shape %s; expected (N, C, ...)",
                        shape_str(s, sizeof s, x->ndim, x->dims));
    bool spatial = node->opset >= 9 || attr_i(node, "spatial", 1) != 0;
    int64_t c = x->ndim >= 2 ? x->dims[1] : -1;
    int64_t per_activation = x->ndim >= 2 ? dims_numel(x->ndim - 1, x->dims + 1) : -1;
    for (int i = 1; i < 5; i++) {
        const value_info *p = &in[i];
        if (p->ndim < 0 || !op_shape_known(p)) continue;
        int64_t n = dims_numel(p->ndim, p->dims);
        bool fits = p->ndim == 1 && (c < 0 || n == c);
        /* spatial=0 (opsets 7 and 8): one parameter per activation, shape (C, D1, ...). */
        if (!spatial && per_activation >= 0 && n == per_activation) fits = true;
        if (!fits)
            return op_error(node, e, GRAFT_E_SHAPE, "%s has shape %s, expected (%lld)", names[i],
                            shape_str(s, sizeof s, p->ndim, p->dims), (long long)c);
    }
    op_same(&out[0], x);
    /* Inference mode leaves the running statistics as they were (opset 14+, training_mode=0). */
    for (int i = 1; i < n_out && i < 3; i++) op_same(&out[i], &in[i + 2]);
    return GRAFT_OK;
}

/* ---- pools -------------------------------------------------------------------------------- */

static bool is_maxpool_type(graft_dtype dt) {
    return is_float(dt) || dt == GRAFT_DTYPE_I8 || dt == GRAFT_DTYPE_U8;
}

static graft_status infer_pool(const ir_node *node, const value_info *x, value_info *out,
                               graft_err *e) {
    TRY(check_image_rank(node, x, "X", e));
    int rank = x->ndim >= 0 ? x->ndim : (spatial_rank_from_attrs(node) + 2);
    if (rank < 3) {
        op_unknown(out, x->dtype);
        return GRAFT_OK;
    }
    int nsp = rank - 2;
    int64_t in_sp[NN_MAX_SPATIAL];
    for (int i = 0; i < nsp; i++) in_sp[i] = x->ndim >= 0 ? x->dims[i + 2] : -1;
    nn_window win;
    TRY(nn_window_init(node, nsp, in_sp, NULL, &win, e));
    int64_t dims[GRAFT_MAX_DIMS];
    dims[0] = x->ndim >= 0 ? x->dims[0] : -1;
    dims[1] = x->ndim >= 0 ? x->dims[1] : -1;
    for (int i = 0; i < nsp; i++) dims[i + 2] = win.out[i];
    set_output(out, x->dtype, rank, dims);
    return GRAFT_OK;
}

graft_status op_infer_MaxPool(const ir_node *node, const value_info *in, int n_in, value_info *out,
                              int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, node->opset >= 8 ? 2 : 1, e));
    TRY(check_dtype(node, &in[0], "X", is_maxpool_type, e));
    int64_t order = attr_i(node, "storage_order", 0);
    if (order != 0 && order != 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "storage_order = %lld, expected 0 or 1",
                        (long long)order);
    TRY(infer_pool(node, &in[0], &out[0], e));
    if (n_out > 1) {
        out[1] = out[0];
        out[1].dtype = GRAFT_DTYPE_I64;
        out[1].value = NULL;
    }
    return GRAFT_OK;
}

graft_status op_infer_AveragePool(const ir_node *node, const value_info *in, int n_in,
                                  value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    TRY(check_dtype(node, &in[0], "X", is_float, e));
    int64_t cip = attr_i(node, "count_include_pad", 0);
    if (cip != 0 && cip != 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "count_include_pad = %lld, expected 0 or 1", (long long)cip);
    return infer_pool(node, &in[0], &out[0], e);
}

graft_status op_infer_GlobalAveragePool(const ir_node *node, const value_info *in, int n_in,
                                        value_info *out, int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    const value_info *x = &in[0];
    TRY(check_dtype(node, x, "X", is_float, e));
    char s[256];
    if (x->ndim >= 0 && x->ndim < 3)
        return op_error(node, e, GRAFT_E_SHAPE, "X has shape %s; expected (N, C, spatial...)",
                        shape_str(s, sizeof s, x->ndim, x->dims));
    op_same(&out[0], x);
    for (int i = 2; i < x->ndim; i++) out[0].dims[i] = 1;
    return GRAFT_OK;
}

/* ---- Gemm and MatMul ---------------------------------------------------------------------- */

/* C must broadcast one way onto (m, n). */
static graft_status gemm_check_c(const ir_node *node, const value_info *c, int64_t m, int64_t n,
                                 graft_err *e) {
    char s[256];
    if (c->ndim < 0) return GRAFT_OK;
    bool ok = c->ndim <= 2;
    int64_t target[2] = {m, n};
    for (int i = 0; ok && i < c->ndim; i++) {
        int64_t d = c->dims[i], t = target[2 - c->ndim + i];
        if (d >= 0 && t >= 0 && d != 1 && d != t) ok = false;
    }
    if (!ok)
        return op_error(node, e, GRAFT_E_SHAPE,
                        "C has shape %s, which does not broadcast to "
                        "(%lld, %lld)",
                        shape_str(s, sizeof s, c->ndim, c->dims), (long long)m, (long long)n);
    return GRAFT_OK;
}

graft_status op_infer_Gemm(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, node->opset >= 11 ? 2 : 3, 3, n_out, 1, 1, e));
    const value_info *a = &in[0], *b = &in[1], *c = n_in > 2 && in[2].present ? &in[2] : NULL;
    TRY(check_dtype(node, a, "A", is_gemm_type, e));
    TRY(check_same_dtype(node, a, b, "A", "B", e));
    if (c) TRY(check_same_dtype(node, a, c, "A", "C", e));
    char sa[256], sb[256];
    if ((a->ndim >= 0 && a->ndim != 2) || (b->ndim >= 0 && b->ndim != 2))
        return op_error(node, e, GRAFT_E_SHAPE, "A %s and B %s must both be matrices",
                        shape_str(sa, sizeof sa, a->ndim, a->dims),
                        shape_str(sb, sizeof sb, b->ndim, b->dims));
    bool ta = attr_i(node, "transA", 0) != 0, tb = attr_i(node, "transB", 0) != 0;
    int64_t m = a->ndim == 2 ? a->dims[ta ? 1 : 0] : -1,
            ka = a->ndim == 2 ? a->dims[ta ? 0 : 1] : -1;
    int64_t kb = b->ndim == 2 ? b->dims[tb ? 1 : 0] : -1,
            n = b->ndim == 2 ? b->dims[tb ? 0 : 1] : -1;
    if (ka >= 0 && kb >= 0 && ka != kb)
        return op_error(node, e, GRAFT_E_SHAPE,
                        "A %s (transA=%d) and B %s (transB=%d) disagree on the inner dimension",
                        shape_str(sa, sizeof sa, a->ndim, a->dims), ta,
                        shape_str(sb, sizeof sb, b->ndim, b->dims), tb);
    if (c) TRY(gemm_check_c(node, c, m, n, e));
    int64_t dims[2] = {m, n};
    set_output(&out[0], a->dtype != GRAFT_DTYPE_UNDEFINED ? a->dtype : b->dtype, 2, dims);
    return GRAFT_OK;
}

graft_status op_infer_MatMul(const ir_node *node, const value_info *in, int n_in, value_info *out,
                             int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    const value_info *a = &in[0], *b = &in[1];
    TRY(check_dtype(node, a, "A", is_gemm_type, e));
    TRY(check_same_dtype(node, a, b, "A", "B", e));
    graft_dtype dt = a->dtype != GRAFT_DTYPE_UNDEFINED ? a->dtype : b->dtype;
    char sa[256], sb[256];
    if (a->ndim == 0 || b->ndim == 0)
        return op_error(node, e, GRAFT_E_SHAPE, "MatMul of a scalar: A %s, B %s",
                        shape_str(sa, sizeof sa, a->ndim, a->dims),
                        shape_str(sb, sizeof sb, b->ndim, b->dims));
    if (a->ndim < 0 || b->ndim < 0) {
        op_unknown(&out[0], dt);
        return GRAFT_OK;
    }
    /* Numpy: a 1-D A is a row (1, K), a 1-D B a column (K, 1); the 1 is dropped afterwards. */
    int64_t k_a = a->dims[a->ndim - 1], k_b = b->dims[b->ndim >= 2 ? b->ndim - 2 : 0];
    if (k_a >= 0 && k_b >= 0 && k_a != k_b)
        return op_error(node, e, GRAFT_E_SHAPE, "A %s and B %s disagree on the inner dimension",
                        shape_str(sa, sizeof sa, a->ndim, a->dims),
                        shape_str(sb, sizeof sb, b->ndim, b->dims));
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    int64_t dims[GRAFT_MAX_DIMS + 2];
    int nd = 0;
    if (op_broadcast(node, nba, a->dims, nbb, b->dims, &nd, dims, NULL) != GRAFT_OK)
        return op_error(node, e, GRAFT_E_SHAPE,
                        "the batch dimensions of A %s and B %s do not "
                        "broadcast",
                        shape_str(sa, sizeof sa, a->ndim, a->dims),
                        shape_str(sb, sizeof sb, b->ndim, b->dims));
    if (a->ndim >= 2) dims[nd++] = a->dims[a->ndim - 2];
    if (b->ndim >= 2) dims[nd++] = b->dims[b->ndim - 1];
    if (nd > GRAFT_MAX_DIMS)
        return op_error(node, e, GRAFT_E_UNSUPPORTED, "result rank %d exceeds %d", nd,
                        GRAFT_MAX_DIMS);
    set_output(&out[0], dt, nd, dims);
    return GRAFT_OK;
}

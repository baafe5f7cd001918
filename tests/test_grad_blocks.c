/* test_grad_blocks.c: the backward rules of fine-tuned ResNet stages and BERT layers (Conv,
 * BatchNormalization, pools, element-wise ops, reductions, shape and data movement) against
 * central finite differences in f64 of the forward kernels, and the f32 rules against f64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad_check.h"

/* ---- inputs --------------------------------------------------------------------------------- */

/* A random f64 tensor with values in [lo, lo + width): positive ones for Sqrt, Pow, variances. */
static void rand_shifted(tensor *t, int ndim, const int64_t *dims, double lo, double width) {
    rand_tensor(t, ndim, dims, 1.0);
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double *v = (double *)t->data + i;
        *v = lo + 0.5 * (*v + 1.0) * width;
    }
}

/* A 1-D int64 tensor (n == -1: a scalar of vals[0]). */
static void int_tensor(tensor *t, int n, const int64_t *vals) {
    int64_t dims[1] = {n};
    tensor_make(t, GRAFT_DTYPE_I64, n < 0 ? 0 : 1, dims, NULL);
    for (int i = 0; i < (n < 0 ? 1 : n); i++) ((int64_t *)t->data)[i] = vals[i];
}

/* An f64 scalar. */
static void scalar_tensor(tensor *t, double v) {
    tensor_make(t, GRAFT_DTYPE_F64, 0, NULL, NULL);
    ((double *)t->data)[0] = v;
}

/* ---- Conv ----------------------------------------------------------------------------------- */

/* A Conv case: its name after "grad_conv", spatial rank, group, bias, auto_pad (NULL: pads);
 * dilations {0}: the default. */
typedef struct conv_case {
    const char *name;
    int nsp, group, bias;
    const char *auto_pad;
    int64_t x[5], w[5], strides[3], dilations[3], pads[6];
} conv_case;

static const conv_case conv_cases[] = {
    {"2d_pad1_bias", 2, 1, 1, NULL, {2, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
    {"2d_stride2_pad1", 2, 1, 1, NULL, {2, 3, 7, 6}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
    {"2d_asym_pads_nobias", 2, 1, 0, NULL, {1, 2, 5, 6}, {3, 2, 3, 2}, {1, 2}, {1, 1}, {0, 1, 2}},
    {"2d_dilation2", 2, 1, 1, NULL, {2, 2, 7, 7}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {2, 1, 1, 2}},
    {"2d_group2", 2, 2, 1, NULL, {2, 4, 5, 5}, {6, 2, 3, 3}, {2, 1}, {1, 1}, {1, 1, 1, 1}},
    {"2d_depthwise", 2, 3, 1, NULL, {2, 3, 6, 6}, {3, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
    {"2d_dw_x2_nobias", 2, 2, 0, NULL, {1, 2, 5, 5}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
    {"2d_pointwise", 2, 1, 1, NULL, {2, 4, 3, 3}, {5, 4, 1, 1}, {1, 1}, {1, 1}, {0}},
    {"2d_same_upper_s2", 2, 1, 1, "SAME_UPPER", {1, 2, 6, 5}, {3, 2, 3, 3}, {2, 2}, {1, 1}, {0}},
    {"2d_same_lower_s2", 2, 1, 1, "SAME_LOWER", {1, 2, 6, 5}, {3, 2, 4, 3}, {2, 2}, {1, 1}, {0}},
    {"2d_valid", 2, 1, 0, "VALID", {2, 2, 6, 5}, {3, 2, 3, 2}, {1, 2}, {1, 1}, {0}},
    {"1d_stride2_dil2", 1, 1, 1, NULL, {2, 3, 11}, {4, 3, 3}, {2}, {2}, {2, 1}},
    {"1d_group3", 1, 3, 1, NULL, {2, 6, 8}, {3, 2, 3}, {1}, {1}, {1, 1}},
    {"3d_s2", 3, 1, 1, NULL, {1, 2, 4, 5, 4}, {2, 2, 2, 3, 2}, {2, 1, 2}, {0}, {1, 0, 1, 0, 1, 1}},
};

static void test_conv(void) {
    for (size_t t = 0; t < sizeof conv_cases / sizeof conv_cases[0]; t++) {
        const conv_case *k = &conv_cases[t];
        test_node tn;
        node_init(&tn, "Conv", 11);
        set_ints(&tn, "strides", k->nsp, k->strides);
        if (k->dilations[0]) set_ints(&tn, "dilations", k->nsp, k->dilations);
        if (k->auto_pad)
            set_str(&tn, "auto_pad", k->auto_pad);
        else
            set_ints(&tn, "pads", 2 * k->nsp, k->pads);
        if (k->group != 1) set_int(&tn, "group", k->group);
        tensor in[3] = {{0}};
        rand_tensor(&in[0], k->nsp + 2, k->x, 1.0);
        rand_tensor(&in[1], k->nsp + 2, k->w, 1.0);
        if (k->bias) rand_tensor(&in[2], 1, k->w, 1.0);
        char name[64];
        snprintf(name, sizeof name, "grad_conv%s", k->name);
        grad_check_case(name, &tn, in, k->bias ? 3 : 2, 1, NULL, NULL, 0);
    }
}

/* ---- BatchNormalization --------------------------------------------------------------------- */

/* Training-mode forward (graft's kernel runs inference only): batch mean and biased variance
 * per channel, as PyTorch normalises. */
static graft_status bn_train_forward(const op_call *c) {
    const tensor *x = c->in[0];
    int64_t n = x->dims[0], ch = x->dims[1], run = dims_numel(x->ndim - 2, x->dims + 2);
    double eps = attr_f(c->node, "epsilon", 1e-5f);
    for (int64_t g = 0; g < ch; g++) {
        double mean = 0.0, var = 0.0;
        for (int64_t b = 0; b < n; b++)
            for (int64_t r = 0; r < run; r++) mean += tensor_get_f64(x, (b * ch + g) * run + r);
        mean /= (double)(n * run);
        for (int64_t b = 0; b < n; b++)
            for (int64_t r = 0; r < run; r++) {
                double d = tensor_get_f64(x, (b * ch + g) * run + r) - mean;
                var += d * d;
            }
        var /= (double)(n * run);
        double s = tensor_get_f64(c->in[1], g) / sqrt(var + eps),
               bias = tensor_get_f64(c->in[2], g);
        for (int64_t b = 0; b < n; b++)
            for (int64_t r = 0; r < run; r++) {
                int64_t at = (b * ch + g) * run + r;
                tensor_set_f64(c->out[0], at, (tensor_get_f64(x, at) - mean) * s + bias);
            }
    }
    return GRAFT_OK;
}

/* Y has X's shape (the forward's inference refuses training mode). */
static graft_status same_as_x(const ir_node *node, const value_info *in, int n_in, value_info *out,
                              int n_out, graft_err *e) {
    (void)node, (void)n_in, (void)n_out, (void)e;
    op_same(&out[0], &in[0]);
    return GRAFT_OK;
}

static void test_batchnorm(void) {
    static const struct {
        const char *name;
        int opset, training, ndim, spatial0;
        int64_t x[4];
    } cs[] = {
        {"grad_bn_inference", 15, 0, 4, 0, {2, 3, 4, 3}},
        {"grad_bn_inference_opset9", 9, 0, 4, 0, {3, 2, 2, 3}},
        {"grad_bn_inference_2d", 15, 0, 2, 0, {5, 4}},
        {"grad_bn_inference_spatial0", 7, 0, 3, 1, {2, 3, 4}},
        {"grad_bn_training", 15, 1, 4, 0, {3, 3, 3, 2}},
        {"grad_bn_training_2d", 15, 1, 2, 0, {6, 4}},
        {"grad_bn_training_1x1", 15, 1, 4, 0, {4, 2, 1, 1}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "BatchNormalization", cs[t].opset);
        set_float(&tn, "epsilon", 1e-3f);
        if (cs[t].training) set_int(&tn, "training_mode", 1);
        if (cs[t].spatial0) set_int(&tn, "spatial", 0);
        tensor in[5] = {{0}};
        int64_t pd[1] = {cs[t].spatial0 ? cs[t].x[1] * cs[t].x[2] : cs[t].x[1]};
        rand_tensor(&in[0], cs[t].ndim, cs[t].x, 2.0);
        rand_tensor(&in[1], 1, pd, 1.5);
        rand_tensor(&in[2], 1, pd, 1.0);
        rand_tensor(&in[3], 1, pd, 0.5);
        rand_shifted(&in[4], 1, pd, 0.5, 1.0);
        grad_check_case(cs[t].name, &tn, in, 5, 1, cs[t].training ? bn_train_forward : NULL,
                        cs[t].training ? same_as_x : NULL, 0);
    }
}

/* ---- pools ---------------------------------------------------------------------------------- */

/* A pool case: name after "grad_", MaxPool or AveragePool, spatial rank, ceil_mode,
 * count_include_pad, auto_pad (NULL: pads); dilations {0}: the default. */
typedef struct pool_case {
    const char *name;
    int is_max, nsp, ceil_mode, include_pad;
    const char *auto_pad;
    int64_t x[5], kernel[3], strides[3], pads[6], dilations[3];
} pool_case;

static const pool_case pool_cases[] = {
    {"2x2_s2", 1, 2, 0, 0, NULL, {2, 3, 6, 6}, {2, 2}, {2, 2}, {0}, {0}},
    {"3x3_s2_pad1", 1, 2, 0, 0, NULL, {2, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {0}},
    {"ceil_mode", 1, 2, 1, 0, NULL, {1, 2, 6, 7}, {3, 2}, {2, 2}, {0}, {0}},
    {"dilation_asym", 1, 2, 0, 0, NULL, {1, 2, 7, 6}, {2, 2}, {1, 2}, {0, 1, 1}, {2, 1}},
    {"1d_overlap", 1, 1, 0, 0, NULL, {2, 3, 9}, {3}, {1}, {1, 1}, {0}},
    {"same_upper", 1, 2, 0, 0, "SAME_UPPER", {1, 2, 5, 5}, {3, 3}, {2, 2}, {0}, {0}},
    {"pad_exclude", 0, 2, 0, 0, NULL, {2, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {0}},
    {"pad_include", 0, 2, 0, 1, NULL, {2, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {0}},
    {"ceil_include", 0, 2, 1, 1, NULL, {1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 0, 0, 1}, {0}},
    {"ceil_exclude", 0, 2, 1, 0, NULL, {1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 0, 0, 1}, {0}},
    {"same_lower", 0, 2, 0, 0, "SAME_LOWER", {1, 3, 5, 6}, {2, 3}, {2, 2}, {0}, {0}},
    {"1d", 0, 1, 0, 1, NULL, {2, 2, 8}, {3}, {2}, {1, 1}, {0}},
    {"3d", 0, 3, 0, 0, NULL, {1, 2, 4, 4, 4}, {2, 2, 2}, {2, 2, 2}, {0}, {0}},
};

static void test_pools(void) {
    for (size_t t = 0; t < sizeof pool_cases / sizeof pool_cases[0]; t++) {
        const pool_case *k = &pool_cases[t];
        test_node tn;
        node_init(&tn, k->is_max ? "MaxPool" : "AveragePool", k->is_max ? 12 : 19);
        set_ints(&tn, "kernel_shape", k->nsp, k->kernel);
        set_ints(&tn, "strides", k->nsp, k->strides);
        if (k->auto_pad)
            set_str(&tn, "auto_pad", k->auto_pad);
        else
            set_ints(&tn, "pads", 2 * k->nsp, k->pads);
        if (k->dilations[0]) set_ints(&tn, "dilations", k->nsp, k->dilations);
        if (k->ceil_mode) set_int(&tn, "ceil_mode", 1);
        if (k->include_pad) set_int(&tn, "count_include_pad", 1);
        tensor in[1] = {{0}};
        rand_tensor(&in[0], k->nsp + 2, k->x, 1.0);
        char name[64];
        snprintf(name, sizeof name, "grad_%spool_%s", k->is_max ? "max" : "avg", k->name);
        grad_check_case(name, &tn, in, 1, 1, NULL, NULL, 0);
    }
    test_node tn;
    node_init(&tn, "MaxPool", 12); /* with the Indices output, which takes no gradient */
    int64_t k2[2] = {2, 2}, x[4] = {2, 2, 4, 4};
    set_ints(&tn, "kernel_shape", 2, k2);
    set_ints(&tn, "strides", 2, k2);
    tensor in[1] = {{0}};
    rand_tensor(&in[0], 4, x, 1.0);
    grad_check_case("grad_maxpool_with_indices", &tn, in, 1, 2, NULL, NULL, 0);
}

/* GlobalMaxPool has no forward in graft yet: the maximum of each plane. */
static graft_status global_max_forward(const op_call *c) {
    const tensor *x = c->in[0];
    int64_t planes = x->dims[0] * x->dims[1], size = dims_numel(x->ndim - 2, x->dims + 2);
    for (int64_t p = 0; p < planes; p++) {
        double best = tensor_get_f64(x, p * size);
        for (int64_t i = 1; i < size; i++) best = fmax(best, tensor_get_f64(x, p * size + i));
        tensor_set_f64(c->out[0], p, best);
    }
    return GRAFT_OK;
}

static graft_status global_pool_shape(const ir_node *node, const value_info *in, int n_in,
                                      value_info *out, int n_out, graft_err *e) {
    (void)node, (void)n_in, (void)n_out, (void)e;
    op_same(&out[0], &in[0]);
    for (int i = 2; i < in[0].ndim; i++) out[0].dims[i] = 1;
    return GRAFT_OK;
}

static void test_global_pools(void) {
    static const struct {
        const char *name;
        int ndim;
        int64_t x[5];
    } cs[] = {
        {"grad_global_avgpool_2d", 4, {2, 3, 4, 5}},
        {"grad_global_avgpool_1d", 3, {2, 2, 7}},
        {"grad_global_maxpool_2d", 4, {2, 3, 3, 4}},
        {"grad_global_maxpool_3d", 5, {1, 2, 2, 3, 2}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        bool is_max = strstr(cs[t].name, "max") != NULL;
        test_node tn;
        node_init(&tn, is_max ? "GlobalMaxPool" : "GlobalAveragePool", 1);
        tensor in[1] = {{0}};
        rand_tensor(&in[0], cs[t].ndim, cs[t].x, 1.0);
        grad_check_case(cs[t].name, &tn, in, 1, 1, is_max ? global_max_forward : NULL,
                        is_max ? global_pool_shape : NULL, 0);
    }
}

/* ---- element-wise --------------------------------------------------------------------------- */

static void test_binary(void) {
    static const struct {
        const char *name, *op;
        int na, nb;
        int64_t a[4], b[4];
        double b_lo; /* > 0: B drawn from [b_lo, b_lo + 1) (Div's divisor, Pow's exponent) */
        double a_lo; /* > 0: A drawn from [a_lo, a_lo + 1.5) (Pow's base) */
    } cs[] = {
        {"grad_mul_same", "Mul", 2, 2, {3, 4}, {3, 4}, 0, 0},
        {"grad_mul_bcast_row", "Mul", 3, 1, {2, 3, 4}, {4}, 0, 0},
        {"grad_mul_bcast_both", "Mul", 3, 2, {2, 1, 4}, {3, 1}, 0, 0},
        {"grad_mul_scalar", "Mul", 3, 0, {2, 3, 2}, {0}, 0, 0},
        {"grad_sub_bcast", "Sub", 2, 3, {3, 1}, {2, 1, 4}, 0, 0},
        {"grad_sub_scalar_a", "Sub", 0, 2, {0}, {3, 4}, 0, 0},
        {"grad_div_same", "Div", 2, 2, {3, 4}, {3, 4}, 0.5, 0},
        {"grad_div_bcast_col", "Div", 3, 3, {2, 3, 4}, {2, 3, 1}, 0.5, 0},
        {"grad_div_scalar_b", "Div", 4, 0, {2, 2, 3, 2}, {0}, 0.7, 0},
        {"grad_pow_tensor_exp", "Pow", 2, 2, {3, 4}, {3, 4}, 0.5, 0.3},
        {"grad_pow_bcast_exp", "Pow", 3, 1, {2, 3, 4}, {4}, 0.5, 0.3},
        {"grad_pow_scalar_exp", "Pow", 3, 0, {2, 3, 4}, {0}, 1.5, 0.3},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, cs[t].op, 14);
        tensor in[2] = {{0}};
        if (cs[t].a_lo > 0)
            rand_shifted(&in[0], cs[t].na, cs[t].a, cs[t].a_lo, 1.5);
        else
            rand_tensor(&in[0], cs[t].na, cs[t].a, 1.0);
        if (cs[t].b_lo > 0) {
            rand_shifted(&in[1], cs[t].nb, cs[t].b, cs[t].b_lo, 1.0);
            if (cs[t].op[0] == 'D') /* a divisor of either sign, away from 0 */
                for (int64_t i = 0; i < tensor_numel(&in[1]); i += 2)
                    ((double *)in[1].data)[i] *= -1;
        } else {
            rand_tensor(&in[1], cs[t].nb, cs[t].b, 1.0);
        }
        grad_check_case(cs[t].name, &tn, in, 2, 1, NULL, NULL, 0);
    }
    /* x^2 with an int64 exponent, as torch.onnx writes the variance of a decomposed LayerNorm */
    test_node tn;
    node_init(&tn, "Pow", 13);
    tensor in[2] = {{0}};
    int64_t xd[2] = {3, 5}, two = 2;
    rand_tensor(&in[0], 2, xd, 2.0);
    int_tensor(&in[1], -1, &two);
    grad_check_case("grad_pow_int_exponent", &tn, in, 2, 1, NULL, NULL, 0);
}

static void test_unary(void) {
    static const struct {
        const char *name, *op;
        double lo, width; /* inputs in [lo, lo + width) */
    } cs[] = {
        {"grad_sqrt", "Sqrt", 0.2, 3.0},          {"grad_erf", "Erf", -3.0, 6.0},
        {"grad_neg", "Neg", -2.0, 4.0},           {"grad_exp", "Exp", -3.0, 5.0},
        {"grad_identity", "Identity", -2.0, 4.0},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, cs[t].op, 13);
        tensor in[1] = {{0}};
        int64_t d[3] = {2, 3, 4};
        rand_shifted(&in[0], 3, d, cs[t].lo, cs[t].width);
        grad_check_case(cs[t].name, &tn, in, 1, 1, NULL, NULL, 0);
    }
}

static void test_clip(void) {
    static const struct {
        const char *name;
        int opset;
        double lo, hi; /* NAN: absent */
    } cs[] = {
        {"grad_clip_attrs_opset6", 6, -0.5, 0.7},    {"grad_clip_inputs_both", 13, -0.6, 0.4},
        {"grad_clip_input_min_only", 13, -0.3, NAN}, {"grad_clip_input_max_only", 13, NAN, 0.2},
        {"grad_clip_relu6_like", 11, 0.0, 0.5},      {"grad_clip_min_above_max", 13, 0.5, -0.2},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Clip", cs[t].opset);
        tensor in[3] = {{0}};
        int64_t d[2] = {6, 7};
        rand_tensor(&in[0], 2, d, 1.5);
        int n_in = 1;
        if (cs[t].opset < 11) {
            set_float(&tn, "min", (float)cs[t].lo);
            set_float(&tn, "max", (float)cs[t].hi);
        } else {
            if (!isnan(cs[t].lo)) scalar_tensor(&in[1], cs[t].lo);
            if (!isnan(cs[t].hi)) scalar_tensor(&in[2], cs[t].hi);
            n_in = isnan(cs[t].hi) ? 2 : 3;
        }
        grad_check_case(cs[t].name, &tn, in, n_in, 1, NULL, NULL, 0);
    }
}

static void test_reduce(void) {
    static const struct {
        const char *name, *op;
        int opset, keepdims, n_axes, ndim;
        int64_t axes[3], x[4];
    } cs[] = {
        {"grad_reducemean_last_keep", "ReduceMean", 13, 1, 1, 3, {-1}, {2, 3, 4}},
        {"grad_reducemean_two_axes", "ReduceMean", 13, 0, 2, 4, {1, 3}, {2, 3, 2, 4}},
        {"grad_reducemean_all", "ReduceMean", 13, 0, 0, 3, {0}, {2, 3, 2}},
        {"grad_reducemean_input_axes", "ReduceMean", 18, 1, 1, 3, {-2}, {2, 3, 4}},
        {"grad_reducemean_input_noop", "ReduceMean", 18, 1, -1, 2, {0}, {3, 4}},
        {"grad_reducesum_input_axes", "ReduceSum", 13, 0, 2, 3, {0, -1}, {2, 3, 4}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, cs[t].op, cs[t].opset);
        set_int(&tn, "keepdims", cs[t].keepdims);
        bool from_input = cs[t].opset >= (cs[t].op[6] == 'S' ? 13 : 18);
        tensor in[2] = {{0}};
        rand_tensor(&in[0], cs[t].ndim, cs[t].x, 1.0);
        if (cs[t].n_axes < 0) { /* no axes with noop_with_empty_axes: the identity */
            set_int(&tn, "noop_with_empty_axes", 1);
        } else if (from_input && cs[t].n_axes > 0) {
            int_tensor(&in[1], cs[t].n_axes, cs[t].axes);
        } else if (cs[t].n_axes > 0) {
            set_ints(&tn, "axes", cs[t].n_axes, cs[t].axes);
        }
        grad_check_case(cs[t].name, &tn, in, in[1].data ? 2 : 1, 1, NULL, NULL, 0);
    }
}

/* ---- shape and data movement ---------------------------------------------------------------- */

static void test_reshapes(void) {
    int64_t x4[4] = {2, 3, 2, 2}, x3[3] = {2, 1, 4}, shape[3] = {3, -1, 2}, ax[2] = {1, -1};
    int64_t sq[1] = {1}, unsq[2] = {0, -1};
    struct {
        const char *name, *op;
        int opset, ndim, n_int;
        const int64_t *x, *ints;
        const char *attr;
    } cs[] = {
        {"grad_flatten_axis1", "Flatten", 13, 4, 0, x4, NULL, NULL},
        {"grad_flatten_axis_neg", "Flatten", 13, 4, 0, x4, NULL, "axis"},
        {"grad_reshape", "Reshape", 14, 4, 3, x4, shape, NULL},
        {"grad_squeeze_input", "Squeeze", 13, 3, 1, x3, sq, NULL},
        {"grad_squeeze_attr", "Squeeze", 11, 3, -1, x3, sq, "axes"},
        {"grad_unsqueeze_neg_axes", "Unsqueeze", 13, 3, 2, x3, unsq, NULL},
        {"grad_unsqueeze_attr", "Unsqueeze", 11, 4, -2, x4, ax, "axes"},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, cs[t].op, cs[t].opset);
        tensor in[2] = {{0}};
        rand_tensor(&in[0], cs[t].ndim, cs[t].x, 1.0);
        if (cs[t].attr && strcmp(cs[t].attr, "axis") == 0) set_int(&tn, "axis", -2);
        if (cs[t].attr && strcmp(cs[t].attr, "axes") == 0)
            set_ints(&tn, "axes", -cs[t].n_int, cs[t].ints);
        if (cs[t].n_int > 0) int_tensor(&in[1], cs[t].n_int, cs[t].ints);
        grad_check_case(cs[t].name, &tn, in, cs[t].n_int > 0 ? 2 : 1, 1, NULL, NULL, 0);
    }
}

static void test_transpose(void) {
    static const struct {
        const char *name;
        int ndim, has_perm;
        int64_t x[4], perm[4];
    } cs[] = {
        {"grad_transpose_attention", 4, 1, {2, 3, 4, 2}, {0, 2, 1, 3}},
        {"grad_transpose_cycle", 3, 1, {2, 3, 4}, {2, 0, 1}},
        {"grad_transpose_default", 3, 0, {2, 3, 4}, {0}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Transpose", 13);
        if (cs[t].has_perm) set_ints(&tn, "perm", cs[t].ndim, cs[t].perm);
        tensor in[1] = {{0}};
        rand_tensor(&in[0], cs[t].ndim, cs[t].x, 1.0);
        grad_check_case(cs[t].name, &tn, in, 1, 1, NULL, NULL, 0);
    }
}

static void test_slice(void) {
    static const struct {
        const char *name;
        int n;
        int64_t starts[2], ends[2], axes[2], steps[2];
    } cs[] = {
        {"grad_slice_cls_token", 1, {0}, {1}, {1}, {1}},
        {"grad_slice_neg_axes_step2", 2, {1, -1}, {4, -100}, {-1, 0}, {2, -1}},
        {"grad_slice_clamped_end", 1, {2}, {1000}, {-2}, {1}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Slice", 13);
        tensor in[5] = {{0}};
        int64_t x[3] = {2, 5, 6};
        rand_tensor(&in[0], 3, x, 1.0);
        int_tensor(&in[1], cs[t].n, cs[t].starts);
        int_tensor(&in[2], cs[t].n, cs[t].ends);
        int_tensor(&in[3], cs[t].n, cs[t].axes);
        int_tensor(&in[4], cs[t].n, cs[t].steps);
        grad_check_case(cs[t].name, &tn, in, 5, 1, NULL, NULL, 0);
    }
}

static void test_pad(void) {
    static const struct {
        const char *name, *mode;
        int64_t pads[6];
        bool value; /* a constant_value input (its gradient: dY's padded elements) */
    } cs[] = {
        {"grad_pad_constant", "constant", {0, 1, 2, 0, 2, 1}, true},
        {"grad_pad_constant_crop", "constant", {0, -1, 1, 0, 1, -2}, false},
        {"grad_pad_reflect", "reflect", {0, 2, 1, 0, 1, 3}, false},
        {"grad_pad_edge", "edge", {0, 1, 3, 0, 2, 1}, false},
        {"grad_pad_wrap", "wrap", {0, 2, 1, 0, 3, 2}, false},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Pad", 19);
        set_str(&tn, "mode", cs[t].mode);
        tensor in[3] = {{0}};
        int64_t x[3] = {2, 3, 4};
        rand_tensor(&in[0], 3, x, 1.0);
        int_tensor(&in[1], 6, cs[t].pads);
        if (cs[t].value) scalar_tensor(&in[2], 0.5);
        grad_check_case(cs[t].name, &tn, in, cs[t].value ? 3 : 2, 1, NULL, NULL, 0);
    }
}

static void test_concat_gather(void) {
    static const struct {
        const char *name;
        int axis, n;
        int64_t x[3][3];
    } cs[] = {
        {"grad_concat_last3", -1, 3, {{2, 3, 2}, {2, 3, 4}, {2, 3, 1}}},
        {"grad_concat_axis0", 0, 2, {{1, 3, 2}, {3, 3, 2}, {0}}},
        {"grad_concat_axis1", 1, 2, {{2, 2, 3}, {2, 1, 3}, {0}}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Concat", 13);
        set_int(&tn, "axis", cs[t].axis);
        tensor in[3] = {{0}};
        for (int i = 0; i < cs[t].n; i++) rand_tensor(&in[i], 3, cs[t].x[i], 1.0);
        grad_check_case(cs[t].name, &tn, in, cs[t].n, 1, NULL, NULL, 0);
    }
    static const struct {
        const char *name;
        int axis, n_idx;
        int64_t idx[5];
    } gs[] = {
        {"grad_gather_axis0_repeats", 0, 5, {1, 3, 1, -1, 0}},
        {"grad_gather_axis1_negative", 1, 3, {-1, 0, -1}},
        {"grad_gather_scalar_index", -1, -1, {2}},
    };
    for (size_t t = 0; t < sizeof gs / sizeof gs[0]; t++) {
        test_node tn;
        node_init(&tn, "Gather", 13);
        set_int(&tn, "axis", gs[t].axis);
        tensor in[2] = {{0}};
        int64_t x[3] = {4, 3, 3};
        rand_tensor(&in[0], 3, x, 1.0);
        int_tensor(&in[1], gs[t].n_idx, gs[t].idx);
        grad_check_case(gs[t].name, &tn, in, 2, 1, NULL, NULL, 0);
    }
}

/* Where (attention masks), Expand and Split. */
static void test_where_expand_split(void) {
    static const struct {
        const char *name;
        int nc, nx, ny;
        int64_t c[3], x[3], y[3];
    } ws[] = {
        {"grad_where_same", 2, 2, 2, {3, 4}, {3, 4}, {3, 4}},
        {"grad_where_mask_bcast", 3, 3, 0, {2, 1, 4}, {2, 3, 4}, {0}},
        {"grad_where_all_bcast", 2, 1, 3, {3, 1}, {4}, {2, 1, 1}},
    };
    for (size_t t = 0; t < sizeof ws / sizeof ws[0]; t++) {
        test_node tn;
        node_init(&tn, "Where", 16);
        tensor in[3] = {{0}};
        tensor_make(&in[0], GRAFT_DTYPE_BOOL, ws[t].nc, ws[t].c, NULL);
        for (int64_t i = 0; i < tensor_numel(&in[0]); i++)
            ((uint8_t *)in[0].data)[i] = rand_uniform() > 0.0;
        rand_tensor(&in[1], ws[t].nx, ws[t].x, 1.0);
        rand_tensor(&in[2], ws[t].ny, ws[t].y, 1.0);
        grad_check_case(ws[t].name, &tn, in, 3, 1, NULL, NULL, 0);
    }
    test_node tn;
    node_init(&tn, "Expand", 13);
    tensor in[2] = {{0}};
    int64_t xd[2] = {3, 1}, shape[3] = {2, 3, 4};
    rand_tensor(&in[0], 2, xd, 1.0);
    int_tensor(&in[1], 3, shape);
    grad_check_case("grad_expand", &tn, in, 2, 1, NULL, NULL, 0);
    node_init(&tn, "Split", 13); /* sizes as an input, a negative axis */
    set_int(&tn, "axis", -1);
    int64_t sd[3] = {2, 3, 5}, sizes[2] = {2, 3};
    rand_tensor(&in[0], 3, sd, 1.0);
    int_tensor(&in[1], 2, sizes);
    grad_check_case("grad_split_sizes_neg_axis", &tn, in, 2, 2, NULL, NULL, 0);
    node_init(&tn, "Split", 11); /* equal parts on axis 1 */
    set_int(&tn, "axis", 1);
    int64_t ed[3] = {2, 6, 2};
    rand_tensor(&in[0], 3, ed, 1.0);
    grad_check_case("grad_split_equal_3", &tn, in, 1, 3, NULL, NULL, 0);
}

/* ---- conventions at ties, bounds and modes (values by hand) --------------------------------- */

/* f64 tensor of the given shape holding vals. */
static void f64_tensor(tensor *t, int ndim, const int64_t *dims, const double *vals) {
    tensor_make(t, GRAFT_DTYPE_F64, ndim, dims, NULL);
    for (int64_t i = 0; i < tensor_numel(t); i++) ((double *)t->data)[i] = vals[i];
}

static bool same_values(const tensor *t, const double *want) {
    for (int64_t i = 0; i < tensor_numel(t); i++)
        if (tensor_get_f64(t, i) != want[i]) return false;
    return true;
}

/* MaxPool's ties go to the first maximum in scan order, the tap the forward's Indices name. */
static void test_maxpool_ties(void) {
    test_node tn;
    node_init(&tn, "MaxPool", 12);
    int64_t k2[2] = {2, 2}, xd[4] = {1, 1, 2, 4}, yd[4] = {1, 1, 1, 2};
    set_ints(&tn, "kernel_shape", 2, k2);
    set_ints(&tn, "strides", 2, k2);
    static const double xv[8] = {1, 1, 0, 2, 1, 0, 2, 2}, gv[2] = {1, 10};
    static const double want[8] = {1, 0, 0, 10, 0, 0, 0, 0};
    tensor x, y, idx, dy, dx;
    f64_tensor(&x, 4, xd, xv);
    f64_tensor(&dy, 4, yd, gv);
    tensor_make(&y, GRAFT_DTYPE_F64, 4, yd, NULL);
    tensor_make(&idx, GRAFT_DTYPE_I64, 4, yd, NULL);
    tensor_make(&dx, GRAFT_DTYPE_F64, 4, xd, NULL);
    graft_err err = {0};
    const tensor *ins[1] = {&x}, *outs[2] = {&y, &idx}, *douts[2] = {&dy, NULL};
    tensor *fouts[2] = {&y, &idx}, *dins[1] = {&dx};
    op_call fc = {&tn.node, ins, 1, fouts, 2, &err};
    grad_call gc = {&tn.node, ins, 1, outs, 2, douts, dins, &err};
    graft_status st = ref_MaxPool(&fc);
    if (st == GRAFT_OK) st = grad_MaxPool(&gc);
    bool at_indices = st == GRAFT_OK && tensor_get_f64(&dx, tensor_get_i64(&idx, 0)) == 1.0 &&
                      tensor_get_f64(&dx, tensor_get_i64(&idx, 1)) == 10.0;
    CHECK("grad_maxpool_tie_first_in_scan_order",
          st == GRAFT_OK && same_values(&dx, want) && at_indices,
          "status %d (%s), dX (%g %g %g %g / %g %g %g %g)", (int)st, err.msg,
          tensor_get_f64(&dx, 0), tensor_get_f64(&dx, 1), tensor_get_f64(&dx, 2),
          tensor_get_f64(&dx, 3), tensor_get_f64(&dx, 4), tensor_get_f64(&dx, 5),
          tensor_get_f64(&dx, 6), tensor_get_f64(&dx, 7));
    tensor_release(&x);
    tensor_release(&y);
    tensor_release(&idx);
    tensor_release(&dy);
    tensor_release(&dx);
}

/* Clip at its bounds: the gradient passes where x equals min or max (torch.clamp's rule). */
static void test_clip_bounds(void) {
    test_node tn;
    node_init(&tn, "Clip", 13);
    int64_t d[1] = {5};
    static const double xv[5] = {-1, -0.5, 0, 0.75, 1}, gv[5] = {1, 2, 3, 4, 5};
    static const double want[5] = {0, 2, 3, 4, 0};
    tensor x, lo, hi, y, dy, dx, dlo, dhi;
    f64_tensor(&x, 1, d, xv);
    f64_tensor(&dy, 1, d, gv);
    scalar_tensor(&lo, -0.5);
    scalar_tensor(&hi, 0.75);
    tensor_make(&y, GRAFT_DTYPE_F64, 1, d, NULL);
    tensor_make(&dx, GRAFT_DTYPE_F64, 1, d, NULL);
    tensor_make(&dlo, GRAFT_DTYPE_F64, 0, NULL, NULL);
    tensor_make(&dhi, GRAFT_DTYPE_F64, 0, NULL, NULL);
    graft_err err = {0};
    const tensor *ins[3] = {&x, &lo, &hi}, *outs[1] = {&y}, *douts[1] = {&dy};
    tensor *dins[3] = {&dx, &dlo, &dhi};
    grad_call gc = {&tn.node, ins, 3, outs, 1, douts, dins, &err};
    graft_status st = grad_Clip(&gc);
    CHECK("grad_clip_bounds_pass",
          st == GRAFT_OK && same_values(&dx, want) && tensor_get_f64(&dlo, 0) == 1.0 &&
              tensor_get_f64(&dhi, 0) == 5.0,
          "status %d (%s), dX %g %g %g %g %g, dmin %g, dmax %g", (int)st, err.msg,
          tensor_get_f64(&dx, 0), tensor_get_f64(&dx, 1), tensor_get_f64(&dx, 2),
          tensor_get_f64(&dx, 3), tensor_get_f64(&dx, 4), tensor_get_f64(&dlo, 0),
          tensor_get_f64(&dhi, 0));
    tensor *all[8] = {&x, &lo, &hi, &y, &dy, &dx, &dlo, &dhi};
    for (int i = 0; i < 8; i++) tensor_release(all[i]);
}

/* Before opset 14, asking for BatchNormalization's statistics outputs means batch statistics:
 * the same gradient as training_mode = 1 at opset 15, and not the inference one. */
static void test_bn_mode_spelling(void) {
    int64_t xd[4] = {3, 2, 2, 2}, pd[1] = {2};
    tensor in[5] = {{0}}, y, mean, dy, dx[3];
    rand_tensor(&in[0], 4, xd, 2.0);
    rand_tensor(&in[1], 1, pd, 1.5);
    rand_tensor(&in[2], 1, pd, 1.0);
    rand_tensor(&in[3], 1, pd, 0.5);
    rand_shifted(&in[4], 1, pd, 0.5, 1.0);
    rand_tensor(&dy, 4, xd, 1.0);
    tensor_make(&y, GRAFT_DTYPE_F64, 4, xd, NULL);
    tensor_make(&mean, GRAFT_DTYPE_F64, 1, pd, NULL);
    graft_err err = {0};
    graft_status st = GRAFT_OK;
    static const int opsets[3] = {9, 15, 15};
    for (int k = 0; k < 3; k++) {
        test_node tn;
        node_init(&tn, "BatchNormalization", opsets[k]);
        if (k == 1) set_int(&tn, "training_mode", 1);
        const tensor *ins[5] = {&in[0], &in[1], &in[2], &in[3], &in[4]};
        const tensor *outs[5] = {&y, k == 0 ? &mean : NULL, NULL, NULL, NULL};
        const tensor *douts[5] = {&dy, NULL, NULL, NULL, NULL};
        tensor_make(&dx[k], GRAFT_DTYPE_F64, 4, xd, NULL);
        tensor *dins[5] = {&dx[k], NULL, NULL, NULL, NULL};
        grad_call gc = {&tn.node, ins, 5, outs, 5, douts, dins, &err};
        if (st == GRAFT_OK) st = grad_BatchNormalization(&gc);
    }
    double d01 = 0.0, d12 = 0.0;
    for (int64_t i = 0; i < tensor_numel(&dx[0]); i++) {
        d01 = fmax(d01, fabs(tensor_get_f64(&dx[0], i) - tensor_get_f64(&dx[1], i)));
        d12 = fmax(d12, fabs(tensor_get_f64(&dx[1], i) - tensor_get_f64(&dx[2], i)));
    }
    CHECK("grad_bn_training_spellings", st == GRAFT_OK && d01 == 0.0 && d12 > 1e-3,
          "status %d (%s): opset 9 + outputs vs training_mode=1 differ by %g, training vs "
          "inference by %g",
          (int)st, err.msg, d01, d12);
    for (int i = 0; i < 5; i++) tensor_release(&in[i]);
    for (int i = 0; i < 3; i++) tensor_release(&dx[i]);
    tensor_release(&y);
    tensor_release(&mean);
    tensor_release(&dy);
}

/* ---- the contract: errors, absent gradients, the registry ----------------------------------- */

static void test_contract(void) {
    test_node tn;
    node_init(&tn, "Conv", 11);
    tn.node.name = (char *)"layer4.0.conv1";
    tensor x = {0}, w = {0}, y = {0}, dx = {0}, dy = {0};
    int64_t xd[4] = {1, 3, 4, 4}, wd[4] = {2, 4, 3, 3}, yd[4] = {1, 2, 2, 2};
    rand_tensor(&x, 4, xd, 1.0);
    rand_tensor(&w, 4, wd, 1.0);
    rand_tensor(&y, 4, yd, 1.0);
    tensor_make(&dx, GRAFT_DTYPE_F64, 4, xd, NULL);
    const tensor *ins[2] = {&x, &w}, *outs[1] = {&y}, *douts[1] = {NULL};
    tensor *dins[2] = {&dx, NULL};
    graft_err err = {0};
    grad_call gc = {&tn.node, ins, 2, outs, 1, douts, dins, &err};
    graft_status st = grad_Conv(&gc);
    CHECK("grad_conv_channel_error_names_node",
          st == GRAFT_E_SHAPE && strstr(err.msg, "layer4.0.conv1") &&
              strstr(err.msg, "(1, 3, 4, 4)"),
          "status %d, message '%s'", (int)st, err.msg);
    /* NULL dout is zero: dX must be overwritten with zeros, not left as it was */
    gc.n_in = 1;
    node_init(&tn, "MaxPool", 12);
    int64_t k2[2] = {2, 2}, pd[4] = {1, 2, 2, 2};
    set_ints(&tn, "kernel_shape", 2, k2);
    set_ints(&tn, "strides", 2, k2);
    tensor_release(&w);
    tensor_release(&y);
    tensor_make(&y, GRAFT_DTYPE_F64, 4, pd, NULL);
    int64_t px[4] = {1, 2, 4, 4};
    tensor_release(&x);
    tensor_release(&dx);
    rand_tensor(&x, 4, px, 1.0);
    rand_tensor(&dx, 4, px, 1.0);
    st = grad_MaxPool(&gc);
    double worst = 0.0;
    for (int64_t i = 0; i < tensor_numel(&dx); i++)
        worst = fmax(worst, fabs(tensor_get_f64(&dx, i)));
    CHECK("grad_null_dout_overwrites_zero", st == GRAFT_OK && worst == 0.0, "status %d, max %g",
          (int)st, worst);
    /* a dtype mix is refused, naming what is wrong */
    tensor_make(&dy, GRAFT_DTYPE_F32, 4, pd, NULL);
    douts[0] = &dy;
    st = grad_MaxPool(&gc);
    CHECK("grad_dtype_mix_refused", st == GRAFT_E_DTYPE && strstr(err.msg, "output gradient"),
          "status %d, message '%s'", (int)st, err.msg);
    tensor_release(&x);
    tensor_release(&y);
    tensor_release(&dx);
    tensor_release(&dy);
}

/* Every rule of the blocks is found by its op type. */
static void test_registry(void) {
    static const char *ops[] = {"Conv",
                                "BatchNormalization",
                                "MaxPool",
                                "AveragePool",
                                "GlobalAveragePool",
                                "GlobalMaxPool",
                                "Mul",
                                "Sub",
                                "Div",
                                "Pow",
                                "Sqrt",
                                "Erf",
                                "Neg",
                                "Exp",
                                "Clip",
                                "ReduceMean",
                                "ReduceSum",
                                "Identity",
                                "Flatten",
                                "Reshape",
                                "Squeeze",
                                "Unsqueeze",
                                "Transpose",
                                "Slice",
                                "Pad",
                                "Concat",
                                "Gather"};
    int missing = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) missing += grad_find(ops[i]) == NULL;
    CHECK("grad_find_block_rules", missing == 0 && grad_find("Conv") == grad_Conv,
          "%d of the rules are not registered", missing);
}

int main(void) {
    test_conv();
    test_batchnorm();
    test_pools();
    test_global_pools();
    test_binary();
    test_unary();
    test_clip();
    test_reduce();
    test_reshapes();
    test_transpose();
    test_slice();
    test_pad();
    test_concat_gather();
    test_where_expand_split();
    test_maxpool_ties();
    test_clip_bounds();
    test_bn_mode_spelling();
    test_contract();
    test_registry();
    return test_failures ? 1 : 0;
}

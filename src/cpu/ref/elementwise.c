/* elementwise.c: reference kernels of the unary element-wise ops (activations, math functions,
 * rounding, Sign, Clip, Not, IsNaN, IsInf, Identity, Dropout); the broadcasting ops are in
 * elementwise_binary.c, Cast in elementwise_cast.c. */
#include <string.h>
#include <tgmath.h>

#include "../../ops/op.h"
#include "elementwise_scalar.h"

typedef enum unary_kind {
    UN_RELU,
    UN_LEAKY_RELU,
    UN_CLIP,
    UN_SIGMOID,
    UN_TANH,
    UN_ERF,
    UN_GELU,
    UN_GELU_TANH,
    UN_SQRT,
    UN_NEG,
    UN_RECIPROCAL,
    UN_EXP,
    UN_LOG,
    UN_ABS,
    UN_SIGN,
    UN_FLOOR,
    UN_CEIL,
    UN_ROUND,
    UN_HARD_SIGMOID,
    UN_HARD_SWISH,
    UN_SOFTPLUS,
    UN_SOFTSIGN,
    UN_MISH,
    UN_ELU,
    UN_SELU,
    UN_CELU,
    UN_THRESHOLDED_RELU,
} unary_kind;

typedef struct unary_args {
    unary_kind kind;
    double alpha;  /* LeakyRelu, HardSigmoid, Elu, Selu, Celu, ThresholdedRelu */
    double lo, hi; /* Clip bounds for float inputs (+-inf when absent) */
    double beta;   /* HardSigmoid's offset, Selu's gamma */
} unary_args;

/* Elements converted per block when a 16-bit float tensor is computed in f32. */
#define HALF_BLOCK 2048

/* y[i] = EXPR over v = x[i], spread over threads when large. */
#define MAP_LOOP(T, EXPR)                                                                          \
    PARALLEL_SIMD_FOR for (int64_t i = 0; i < n; i++) {                                            \
        T v = x[i];                                                                                \
        y[i] = (EXPR);                                                                             \
    }                                                                                              \
    break;

/* One function per native float type; tgmath.h picks expf/exp etc. from T. Clip takes the max
 * with lo first, then the min with hi, so lo > hi gives hi as ONNX specifies; NaN passes
 * through Relu, LeakyRelu and Clip as it does in numpy. */
#define DEFINE_UNARY_FLOAT(NAME, T)                                                                \
    static void NAME(const unary_args *a, const T *x, T *y, int64_t n) {                           \
        const T alpha = (T)a->alpha, lo = (T)a->lo, hi = (T)a->hi;                                 \
        const T sqrt_2_over_pi = (T)0.7978845608028654, inv_sqrt2 = (T)0.7071067811865476;         \
        switch (a->kind) {                                                                         \
        case UN_RELU:                                                                              \
            MAP_LOOP(T, v < 0 ? (T)0 : v)                                                          \
        case UN_LEAKY_RELU:                                                                        \
            MAP_LOOP(T, v < 0 ? alpha * v : v)                                                     \
        case UN_CLIP:                                                                              \
            MAP_LOOP(T, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v))                           \
        case UN_SIGMOID:                                                                           \
            MAP_LOOP(T, (T)1 / ((T)1 + exp(-v)))                                                   \
        case UN_TANH:                                                                              \
            MAP_LOOP(T, tanh(v))                                                                   \
        case UN_ERF:                                                                               \
            MAP_LOOP(T, erf(v))                                                                    \
        case UN_GELU:                                                                              \
            MAP_LOOP(T, (T)0.5 * v * ((T)1 + erf(v * inv_sqrt2)))                                  \
        case UN_GELU_TANH:                                                                         \
            MAP_LOOP(T,                                                                            \
                     (T)0.5 * v * ((T)1 + tanh(sqrt_2_over_pi * (v + (T)0.044715 * v * v * v))))   \
        case UN_SQRT:                                                                              \
            MAP_LOOP(T, sqrt(v))                                                                   \
        case UN_NEG:                                                                               \
            MAP_LOOP(T, -v)                                                                        \
        case UN_RECIPROCAL:                                                                        \
            MAP_LOOP(T, (T)1 / v)                                                                  \
        case UN_EXP:                                                                               \
            MAP_LOOP(T, exp(v))                                                                    \
        case UN_LOG:                                                                               \
            MAP_LOOP(T, log(v))                                                                    \
        case UN_ABS:                                                                               \
            MAP_LOOP(T, fabs(v))                                                                   \
        default:                                                                                   \
            NAME##_more(a, x, y, n);                                                               \
        }                                                                                          \
    }

/* min(1, max(0, t)) with NaN passing through, as numpy's maximum / minimum do. */
#define CLAMP01(t) ((t) < zero ? zero : (t) > one ? one : (t))

/* The activations exporters add for MobileNetV3, EfficientNet, SELU/ELU nets and the rounding
 * ops of position buckets, in the forms ONNX writes them. Sign and Round keep NaN; Round is
 * half to even (rint in the default rounding mode). Softplus avoids overflowing exp(x); Celu
 * is max(0, x) + min(0, alpha (exp(x / alpha) - 1)) with the branch that is not 0 picked. */
#define DEFINE_UNARY_FLOAT_MORE(NAME, T)                                                           \
    static void NAME(const unary_args *a, const T *x, T *y, int64_t n) {                           \
        const T alpha = (T)a->alpha, beta = (T)a->beta, sixth = (T)(1.0 / 6.0);                    \
        const T zero = 0, one = 1, half = (T)0.5;                                                  \
        switch (a->kind) {                                                                         \
        case UN_SIGN:                                                                              \
            MAP_LOOP(T, v > zero ? one : v < zero ? -one : v == zero ? zero : v)                   \
        case UN_FLOOR:                                                                             \
            MAP_LOOP(T, floor(v))                                                                  \
        case UN_CEIL:                                                                              \
            MAP_LOOP(T, ceil(v))                                                                   \
        case UN_ROUND:                                                                             \
            MAP_LOOP(T, rint(v))                                                                   \
        case UN_HARD_SIGMOID:                                                                      \
            MAP_LOOP(T, CLAMP01(alpha *v + beta))                                                  \
        case UN_HARD_SWISH:                                                                        \
            MAP_LOOP(T, v *CLAMP01(sixth *v + half))                                               \
        case UN_SOFTPLUS:                                                                          \
            MAP_LOOP(T, v > zero ? v + log1p(exp(-v)) : log1p(exp(v)))                             \
        case UN_SOFTSIGN:                                                                          \
            MAP_LOOP(T, v / (one + fabs(v)))                                                       \
        case UN_MISH:                                                                              \
            MAP_LOOP(T, v *tanh(v > zero ? v + log1p(exp(-v)) : log1p(exp(v))))                    \
        case UN_ELU:                                                                               \
            MAP_LOOP(T, v < zero ? alpha * expm1(v) : v)                                           \
        case UN_SELU:                                                                              \
            MAP_LOOP(T, v <= zero ? beta * alpha * expm1(v) : beta * v)                            \
        case UN_CELU:                                                                              \
            MAP_LOOP(T, v > zero ? v : alpha * expm1(v / alpha))                                   \
        case UN_THRESHOLDED_RELU:                                                                  \
            MAP_LOOP(T, v > alpha ? v : zero)                                                      \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

DEFINE_UNARY_FLOAT_MORE(unary_f32_more, float)
DEFINE_UNARY_FLOAT_MORE(unary_f64_more, double)
DEFINE_UNARY_FLOAT(unary_f32, float)
DEFINE_UNARY_FLOAT(unary_f64, double)

/* f16 / bf16: compute in f32 block by block (the f32 call stays serial at this size). */
static void unary_half(const unary_args *a, const uint16_t *x, uint16_t *y, int64_t n,
                       bool is_bf16) {
    int64_t blocks = (n + HALF_BLOCK - 1) / HALF_BLOCK;
#pragma omp parallel for if (n >= ELEMENTWISE_PARALLEL_MIN) schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        float buf[HALF_BLOCK];
        int64_t start = b * HALF_BLOCK, len = n - start < HALF_BLOCK ? n - start : HALF_BLOCK;
        for (int64_t i = 0; i < len; i++)
            buf[i] = is_bf16 ? bf16_to_f32(x[start + i]) : f16_to_f32(x[start + i]);
        unary_f32(a, buf, buf, len);
        for (int64_t i = 0; i < len; i++)
            y[start + i] = is_bf16 ? f32_to_bf16(buf[i]) : f32_to_f16(buf[i]);
    }
}

/* Integer kernels: Relu, Neg, Abs, Sign and Clip. Negation goes through uint64 so that the most
 * negative value wraps (as two's complement hardware does) instead of overflowing. */
#define DEFINE_UNARY_SIGNED(NAME, T)                                                               \
    static void NAME(unary_kind kind, const T *x, T *y, int64_t n, T lo, T hi) {                   \
        switch (kind) {                                                                            \
        case UN_RELU:                                                                              \
            MAP_LOOP(T, v < 0 ? (T)0 : v)                                                          \
        case UN_NEG:                                                                               \
            MAP_LOOP(T, (T)(0 - (uint64_t)v))                                                      \
        case UN_ABS:                                                                               \
            MAP_LOOP(T, v < 0 ? (T)(0 - (uint64_t)v) : v)                                          \
        case UN_SIGN:                                                                              \
            MAP_LOOP(T, (T)((v > 0) - (v < 0)))                                                    \
        case UN_CLIP:                                                                              \
            MAP_LOOP(T, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v))                           \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

#define DEFINE_UNARY_UNSIGNED(NAME, T)                                                             \
    static void NAME(unary_kind kind, const T *x, T *y, int64_t n, T lo, T hi) {                   \
        switch (kind) {                                                                            \
        case UN_ABS:                                                                               \
            MAP_LOOP(T, v)                                                                         \
        case UN_SIGN:                                                                              \
            MAP_LOOP(T, (T)(v > 0))                                                                \
        case UN_CLIP:                                                                              \
            MAP_LOOP(T, (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v))                           \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }

/* X(suffix, C type, dtype, lowest, highest) */
#define SIGNED_INT_TYPES(X)                                                                        \
    X(i8, int8_t, I8, INT8_MIN, INT8_MAX)                                                          \
    X(i16, int16_t, I16, INT16_MIN, INT16_MAX)                                                     \
    X(i32, int32_t, I32, INT32_MIN, INT32_MAX)                                                     \
    X(i64, int64_t, I64, INT64_MIN, INT64_MAX)
#define UNSIGNED_INT_TYPES(X)                                                                      \
    X(u8, uint8_t, U8, 0, UINT8_MAX)                                                               \
    X(u16, uint16_t, U16, 0, UINT16_MAX)                                                           \
    X(u32, uint32_t, U32, 0, UINT32_MAX)                                                           \
    X(u64, uint64_t, U64, 0, UINT64_MAX)

#define DEFINE_SIGNED(S, T, DT, LOWEST, HIGHEST) DEFINE_UNARY_SIGNED(unary_##S, T)
#define DEFINE_UNSIGNED(S, T, DT, LOWEST, HIGHEST) DEFINE_UNARY_UNSIGNED(unary_##S, T)
SIGNED_INT_TYPES(DEFINE_SIGNED)
UNSIGNED_INT_TYPES(DEFINE_UNSIGNED)

/* Clip bound input `index` (opset 11+), or NULL when omitted. It must hold one element. */
static graft_status clip_bound(const op_call *c, int index, const tensor **bound) {
    *bound = index < c->n_in ? c->in[index] : NULL;
    if (*bound && (tensor_numel(*bound) != 1 || (*bound)->dtype != c->in[0]->dtype))
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "%s must be a scalar of the input's dtype",
                        index == 1 ? "min" : "max");
    return GRAFT_OK;
}

static graft_status unary_int(const op_call *c, unary_kind kind) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t n = tensor_numel(x);
    const tensor *lo = NULL, *hi = NULL;
    if (kind == UN_CLIP) {
        TRY(clip_bound(c, 1, &lo));
        TRY(clip_bound(c, 2, &hi));
    }
    switch (x->dtype) {
#define INT_CASE(S, T, DT, LOWEST, HIGHEST)                                                        \
    case GRAFT_DTYPE_##DT:                                                                         \
        unary_##S(kind, (const T *)x->data, (T *)y->data, n,                                       \
                  lo ? (T)scalar_load_int(lo->data, lo->dtype, 0) : (T)(LOWEST),                   \
                  hi ? (T)scalar_load_int(hi->data, hi->dtype, 0) : (T)(HIGHEST));                 \
        return GRAFT_OK;
        SIGNED_INT_TYPES(INT_CASE)
        UNSIGNED_INT_TYPES(INT_CASE)
#undef INT_CASE
    default:
        break;
    }
    return op_error(c->node, c->err, GRAFT_E_DTYPE, "no kernel for dtype %s",
                    graft_dtype_name(x->dtype));
}

static graft_status run_unary(const op_call *c, const unary_args *a) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t n = tensor_numel(x);
    if (n != tensor_numel(y) || y->dtype != x->dtype)
        return op_error(c->node, c->err, GRAFT_E_INTERNAL, "output does not match the input");
    switch (x->dtype) {
    case GRAFT_DTYPE_F32:
        unary_f32(a, x->data, y->data, n);
        return GRAFT_OK;
    case GRAFT_DTYPE_F64:
        unary_f64(a, x->data, y->data, n);
        return GRAFT_OK;
    case GRAFT_DTYPE_F16:
        unary_half(a, x->data, y->data, n, false);
        return GRAFT_OK;
    case GRAFT_DTYPE_BF16:
        unary_half(a, x->data, y->data, n, true);
        return GRAFT_OK;
    default:
        return unary_int(c, a->kind);
    }
}

static graft_status run_simple(const op_call *c, unary_kind kind) {
    unary_args a = {kind, 0.0, -INFINITY, INFINITY, 0.0};
    return run_unary(c, &a);
}

graft_status ref_Relu(const op_call *c) {
    return run_simple(c, UN_RELU);
}
graft_status ref_Sigmoid(const op_call *c) {
    return run_simple(c, UN_SIGMOID);
}
graft_status ref_Tanh(const op_call *c) {
    return run_simple(c, UN_TANH);
}
graft_status ref_Erf(const op_call *c) {
    return run_simple(c, UN_ERF);
}
graft_status ref_Sqrt(const op_call *c) {
    return run_simple(c, UN_SQRT);
}
graft_status ref_Neg(const op_call *c) {
    return run_simple(c, UN_NEG);
}
graft_status ref_Reciprocal(const op_call *c) {
    return run_simple(c, UN_RECIPROCAL);
}
graft_status ref_Exp(const op_call *c) {
    return run_simple(c, UN_EXP);
}
graft_status ref_Log(const op_call *c) {
    return run_simple(c, UN_LOG);
}
graft_status ref_Abs(const op_call *c) {
    return run_simple(c, UN_ABS);
}

graft_status ref_Sign(const op_call *c) {
    return run_simple(c, UN_SIGN);
}
graft_status ref_Floor(const op_call *c) {
    return run_simple(c, UN_FLOOR);
}
graft_status ref_Ceil(const op_call *c) {
    return run_simple(c, UN_CEIL);
}
graft_status ref_Round(const op_call *c) {
    return run_simple(c, UN_ROUND);
}
graft_status ref_HardSwish(const op_call *c) {
    return run_simple(c, UN_HARD_SWISH);
}
graft_status ref_Softplus(const op_call *c) {
    return run_simple(c, UN_SOFTPLUS);
}
graft_status ref_Softsign(const op_call *c) {
    return run_simple(c, UN_SOFTSIGN);
}
graft_status ref_Mish(const op_call *c) {
    return run_simple(c, UN_MISH);
}

/* An activation with ONNX's attribute defaults; `beta` carries HardSigmoid's beta or Selu's
 * gamma. */
static graft_status run_activation(const op_call *c, unary_kind kind, float alpha,
                                   const char *beta_name, float beta) {
    unary_args a = {kind, attr_f(c->node, "alpha", alpha), -INFINITY, INFINITY,
                    beta_name ? attr_f(c->node, beta_name, beta) : 0.0};
    return run_unary(c, &a);
}

graft_status ref_HardSigmoid(const op_call *c) {
    return run_activation(c, UN_HARD_SIGMOID, 0.2f, "beta", 0.5f);
}
graft_status ref_Elu(const op_call *c) {
    return run_activation(c, UN_ELU, 1.0f, NULL, 0.0f);
}
graft_status ref_Selu(const op_call *c) {
    return run_activation(c, UN_SELU, 1.67326319217681884765625f, "gamma",
                          1.05070102214813232421875f);
}
graft_status ref_Celu(const op_call *c) {
    return run_activation(c, UN_CELU, 1.0f, NULL, 0.0f);
}
graft_status ref_ThresholdedRelu(const op_call *c) {
    return run_activation(c, UN_THRESHOLDED_RELU, 1.0f, NULL, 0.0f);
}

graft_status ref_LeakyRelu(const op_call *c) {
    unary_args a = {UN_LEAKY_RELU, attr_f(c->node, "alpha", 0.01f), -INFINITY, INFINITY, 0.0};
    return run_unary(c, &a);
}

graft_status ref_Gelu(const op_call *c) {
    bool tanh_form = strcmp(attr_s(c->node, "approximate", "none"), "tanh") == 0;
    return run_simple(c, tanh_form ? UN_GELU_TANH : UN_GELU);
}

graft_status ref_Clip(const op_call *c) {
    unary_args a = {UN_CLIP, 0.0, -INFINITY, INFINITY, 0.0};
    if (!dtype_is_float(c->in[0]->dtype)) return run_unary(c, &a);
    if (c->node->opset < 11) {
        a.lo = attr_f(c->node, "min", -INFINITY);
        a.hi = attr_f(c->node, "max", INFINITY);
    } else {
        const tensor *lo, *hi;
        TRY(clip_bound(c, 1, &lo));
        TRY(clip_bound(c, 2, &hi));
        if (lo) a.lo = scalar_load_f64(lo->data, lo->dtype, 0);
        if (hi) a.hi = scalar_load_f64(hi->data, hi->dtype, 0);
    }
    return run_unary(c, &a);
}

graft_status ref_Not(const op_call *c) {
    const uint8_t *x = c->in[0]->data;
    uint8_t *y = c->out[0]->data;
    int64_t n = tensor_numel(c->in[0]);
    PARALLEL_SIMD_FOR
    for (int64_t i = 0; i < n; i++) y[i] = x[i] == 0;
    return GRAFT_OK;
}

/* IsNaN, IsInf: a float test per element into bool. */
typedef enum float_test { TEST_NAN, TEST_POS_INF, TEST_NEG_INF, TEST_ANY_INF } float_test;

static uint8_t float_test_one(float_test t, double v) {
    switch (t) {
    case TEST_NAN:
        return isnan(v);
    case TEST_POS_INF:
        return v == INFINITY;
    case TEST_NEG_INF:
        return v == -INFINITY;
    case TEST_ANY_INF:
        return isinf(v) != 0;
    }
    return 0;
}

static graft_status run_float_test(const op_call *c, float_test t) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t n = tensor_numel(x);
    if (!dtype_is_float(x->dtype) || y->dtype != GRAFT_DTYPE_BOOL || n != tensor_numel(y))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "no kernel for dtype %s",
                        graft_dtype_name(x->dtype));
    const void *src = x->data;
    uint8_t *dst = y->data;
    graft_dtype dt = x->dtype;
#pragma omp parallel for if (n >= ELEMENTWISE_PARALLEL_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = float_test_one(t, scalar_load_f64(src, dt, i));
    return GRAFT_OK;
}

graft_status ref_IsNaN(const op_call *c) {
    return run_float_test(c, TEST_NAN);
}

/* IsInf's detect_negative / detect_positive (both 1 by default) pick which infinities count. */
graft_status ref_IsInf(const op_call *c) {
    bool neg = attr_i(c->node, "detect_negative", 1) != 0;
    bool pos = attr_i(c->node, "detect_positive", 1) != 0;
    if (!neg && !pos) {
        int64_t n = tensor_numel(c->out[0]);
        if (n > 0) memset(c->out[0]->data, 0, (size_t)n);
        return GRAFT_OK;
    }
    return run_float_test(c, neg && pos ? TEST_ANY_INF : neg ? TEST_NEG_INF : TEST_POS_INF);
}

/* Copy the input to output 0 (skipped when the executor made them share memory). */
static graft_status copy_through(const op_call *c) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t nbytes = tensor_nbytes(x);
    if (nbytes != tensor_nbytes(y))
        return op_error(c->node, c->err, GRAFT_E_INTERNAL, "output size differs from the input");
    if (nbytes > 0 && y->data != x->data) memcpy(y->data, x->data, (size_t)nbytes);
    return GRAFT_OK;
}

graft_status ref_Identity(const op_call *c) {
    return copy_through(c);
}

/* Inference-mode Dropout: the data passes unchanged and the mask keeps everything. */
graft_status ref_Dropout(const op_call *c) {
    const tensor *mode = c->n_in > 2 ? c->in[2] : NULL;
    if (mode && tensor_numel(mode) >= 1 && ((const uint8_t *)mode->data)[0])
        return op_error(c->node, c->err, GRAFT_E_UNSUPPORTED,
                        "training_mode is true, but graft runs Dropout only in inference mode "
                        "(output = input)");
    TRY(copy_through(c));
    tensor *mask = c->n_out > 1 ? c->out[1] : NULL;
    if (!mask || !mask->data) return GRAFT_OK;
    int64_t n = tensor_numel(mask);
    if (mask->dtype == GRAFT_DTYPE_BOOL) {
        if (n > 0) memset(mask->data, 1, (size_t)n);
        return GRAFT_OK;
    }
    for (int64_t i = 0; i < n; i++) scalar_store_float(mask->data, mask->dtype, i, 1.0);
    return GRAFT_OK;
}

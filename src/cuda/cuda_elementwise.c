/* cuda_elementwise.c: the element-wise family on CUDA: attribute parsing, broadcast plans and
 * launcher choice for each op, the family's kernel table, and cuda_cast_buffer. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../core/scalar.h"
#include "../core/tensor.h"
#include "../ops/broadcast_plan.h"
#include "cuda_internal.h"
#include "elementwise_launch.h"

/* Turn a launcher's answer into the kernel's: no kernel for the case (nothing was launched)
 * hands the node to the CPU reference; a launch error is an error. */
static graft_status launched(cudaError_t err, bool *handled, graft_err *e, const char *what) {
    if (err == cudaErrorNotSupported) {
        *handled = false;
        return GRAFT_OK;
    }
    if (err != cudaSuccess) return cuda_fail(e, err, what);
    *handled = true;
    return GRAFT_OK;
}

/* Byte copy on the stream (Identity, Dropout, Cast to the same dtype); nothing when the
 * executor gave input and output the same memory. */
static graft_status copy_bytes(cuda_backend *be, void *dst, const void *src, int64_t bytes,
                               graft_err *e) {
    if (bytes <= 0 || dst == src) return GRAFT_OK;
    CUDA_TRY(e, cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, be->stream),
             "copying a tensor on the GPU");
    return GRAFT_OK;
}

/* ---- broadcast plans ------------------------------------------------------------------------ */

_Static_assert(EW_MAX_INPUTS <= BCAST_MAX_INPUTS, "ew_plan's inputs fit the shared plan's");

/* The shared plan (see src/ops/broadcast_plan.h), stored innermost first for the kernels. */
static graft_status plan_make(const op_call *c, const tensor *const *ins, int n_in, const tensor *y,
                              ew_plan *p) {
    if (y->ndim < 0 || y->ndim > GRAFT_MAX_DIMS)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "output rank %d is out of range",
                        (int)y->ndim);
    bcast_plan b;
    TRY(bcast_plan_make(c->node, c->err, ins, n_in, y, &b));
    memset(p, 0, sizeof *p);
    p->numel = b.numel;
    p->ndim = b.ndim;
    for (int d = 0; d < b.ndim; d++) {
        p->dims[d] = b.dims[b.ndim - 1 - d];
        for (int k = 0; k < n_in; k++) p->strides[k][d] = b.strides[k][b.ndim - 1 - d];
    }
    return GRAFT_OK;
}

/* ---- one-input ops -------------------------------------------------------------------------- */

static graft_status run_unary(cuda_backend *be, const op_call *c, ew_unary_op op,
                              const ew_unary_params *p, bool *handled) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    *handled = false;
    if (!x || y->dtype != x->dtype || tensor_numel(x) != tensor_numel(y)) return GRAFT_OK;
    return launched(ew_unary(op, x->dtype, x->data, y->data, tensor_numel(x), p, be->stream),
                    handled, c->err, "launching an element-wise kernel");
}

static graft_status run_simple(cuda_backend *be, const op_call *c, ew_unary_op op, bool *handled) {
    ew_unary_params p = {0.0, -INFINITY, INFINITY, false, false, 0, 0, 0.0};
    return run_unary(be, c, op, &p, handled);
}

#define SIMPLE_KERNEL(NAME, OP)                                                                    \
    static graft_status k_##NAME(cuda_backend *be, const op_call *c, void **state,                 \
                                 bool *handled) {                                                  \
        (void)state;                                                                               \
        return run_simple(be, c, OP, handled);                                                     \
    }
SIMPLE_KERNEL(Relu, EW_RELU)
SIMPLE_KERNEL(Sigmoid, EW_SIGMOID)
SIMPLE_KERNEL(Tanh, EW_TANH)
SIMPLE_KERNEL(Erf, EW_ERF)
SIMPLE_KERNEL(Sqrt, EW_SQRT)
SIMPLE_KERNEL(Neg, EW_NEG)
SIMPLE_KERNEL(Reciprocal, EW_RECIPROCAL)
SIMPLE_KERNEL(Exp, EW_EXP)
SIMPLE_KERNEL(Log, EW_LOG)
SIMPLE_KERNEL(Abs, EW_ABS)
SIMPLE_KERNEL(Sign, EW_SIGN)
SIMPLE_KERNEL(Floor, EW_FLOOR)
SIMPLE_KERNEL(Ceil, EW_CEIL)
SIMPLE_KERNEL(Round, EW_ROUND)
SIMPLE_KERNEL(HardSwish, EW_HARD_SWISH)
SIMPLE_KERNEL(Softplus, EW_SOFTPLUS)
SIMPLE_KERNEL(Softsign, EW_SOFTSIGN)
SIMPLE_KERNEL(Mish, EW_MISH)
#undef SIMPLE_KERNEL

/* Activations with ONNX's attribute defaults; beta carries HardSigmoid's beta or Selu's gamma,
 * as in the CPU reference. */
#define ACTIVATION_KERNEL(NAME, OP, ALPHA, BETA_NAME, BETA)                                        \
    static graft_status k_##NAME(cuda_backend *be, const op_call *c, void **state,                 \
                                 bool *handled) {                                                  \
        (void)state;                                                                               \
        const char *beta_name = BETA_NAME;                                                         \
        ew_unary_params p = {attr_f(c->node, "alpha", ALPHA),                                      \
                             -INFINITY,                                                            \
                             INFINITY,                                                             \
                             false,                                                                \
                             false,                                                                \
                             0,                                                                    \
                             0,                                                                    \
                             beta_name ? attr_f(c->node, beta_name, BETA) : 0.0};                  \
        return run_unary(be, c, OP, &p, handled);                                                  \
    }
ACTIVATION_KERNEL(HardSigmoid, EW_HARD_SIGMOID, 0.2f, "beta", 0.5f)
ACTIVATION_KERNEL(Elu, EW_ELU, 1.0f, NULL, 0.0f)
ACTIVATION_KERNEL(Selu, EW_SELU, 1.67326319217681884765625f, "gamma", 1.05070102214813232421875f)
ACTIVATION_KERNEL(Celu, EW_CELU, 1.0f, NULL, 0.0f)
ACTIVATION_KERNEL(ThresholdedRelu, EW_THRESHOLDED_RELU, 1.0f, NULL, 0.0f)
#undef ACTIVATION_KERNEL

/* IsNaN, IsInf: float in, bool out; IsInf's detect_negative / detect_positive pick the mode. */
static graft_status run_float_test(cuda_backend *be, const op_call *c, int mode, bool *handled) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    *handled = false;
    if (!x || y->dtype != GRAFT_DTYPE_BOOL || tensor_numel(x) != tensor_numel(y)) return GRAFT_OK;
    if (mode < 0) { /* IsInf detecting neither: all false */
        if (tensor_numel(y) > 0)
            CUDA_TRY(c->err, cudaMemsetAsync(y->data, 0, (size_t)tensor_numel(y), be->stream),
                     "filling IsInf's output");
        *handled = true;
        return GRAFT_OK;
    }
    return launched(ew_float_test(mode, x->dtype, x->data, y->data, tensor_numel(x), be->stream),
                    handled, c->err, "launching IsNaN / IsInf");
}

static graft_status k_IsNaN(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return run_float_test(be, c, 0, handled);
}

static graft_status k_IsInf(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    bool neg = attr_i(c->node, "detect_negative", 1) != 0;
    bool pos = attr_i(c->node, "detect_positive", 1) != 0;
    return run_float_test(be, c, neg && pos ? 1 : pos ? 2 : neg ? 3 : -1, handled);
}

static graft_status k_LeakyRelu(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    ew_unary_params p = {
        attr_f(c->node, "alpha", 0.01f), -INFINITY, INFINITY, false, false, 0, 0, 0.0};
    return run_unary(be, c, EW_LEAKY_RELU, &p, handled);
}

static graft_status k_Gelu(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const char *approx = attr_s(c->node, "approximate", "none");
    if (strcmp(approx, "tanh") == 0) return run_simple(be, c, EW_GELU_TANH, handled);
    if (strcmp(approx, "none") != 0) { /* let the CPU path report it */
        *handled = false;
        return GRAFT_OK;
    }
    return run_simple(be, c, EW_GELU, handled);
}

/* Clip bound input `index` (opset 11+, host memory), or NULL when omitted: one element of the
 * input's dtype, as the reference requires. */
static graft_status clip_bound(const op_call *c, int index, const tensor **bound) {
    *bound = index < c->n_in ? c->in[index] : NULL;
    if (*bound && (tensor_numel(*bound) != 1 || (*bound)->dtype != c->in[0]->dtype))
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "%s must be a scalar of the input's dtype",
                        index == 1 ? "min" : "max");
    return GRAFT_OK;
}

static graft_status k_Clip(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    ew_unary_params p = {0.0, -INFINITY, INFINITY, false, false, 0, 0, 0.0};
    *handled = false;
    if (!c->in[0]) return GRAFT_OK;
    if (dtype_is_float(c->in[0]->dtype) && c->node->opset < 11) {
        p.lo = attr_f(c->node, "min", -INFINITY);
        p.hi = attr_f(c->node, "max", INFINITY);
        return run_unary(be, c, EW_CLIP, &p, handled);
    }
    const tensor *lo, *hi;
    TRY(clip_bound(c, 1, &lo));
    TRY(clip_bound(c, 2, &hi));
    if (dtype_is_float(c->in[0]->dtype)) {
        if (lo) p.lo = scalar_load_f64(lo->data, lo->dtype, 0);
        if (hi) p.hi = scalar_load_f64(hi->data, hi->dtype, 0);
    } else {
        p.has_ilo = lo != NULL;
        p.has_ihi = hi != NULL;
        if (lo) p.ilo = scalar_load_int(lo->data, lo->dtype, 0);
        if (hi) p.ihi = scalar_load_int(hi->data, hi->dtype, 0);
    }
    return run_unary(be, c, EW_CLIP, &p, handled);
}

static graft_status k_Not(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    *handled = false;
    if (!x || x->dtype != GRAFT_DTYPE_BOOL || y->dtype != GRAFT_DTYPE_BOOL ||
        tensor_numel(x) != tensor_numel(y))
        return GRAFT_OK;
    return launched(ew_not(x->data, y->data, tensor_numel(x), be->stream), handled, c->err,
                    "launching Not");
}

static graft_status k_Identity(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    *handled = false;
    if (!x || tensor_nbytes(x) != tensor_nbytes(y)) return GRAFT_OK;
    TRY(copy_bytes(be, y->data, x->data, tensor_nbytes(x), c->err));
    *handled = true;
    return GRAFT_OK;
}

/* Inference Dropout: data copied, the mask (bool, opset 10+) all true. Training mode, and the
 * float masks of opsets 7..9, go to the CPU reference (which rejects training mode). */
static graft_status k_Dropout(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0], *mode = c->n_in > 2 ? c->in[2] : NULL;
    tensor *y = c->out[0], *mask = c->n_out > 1 ? c->out[1] : NULL;
    *handled = false;
    if (!x || tensor_nbytes(x) != tensor_nbytes(y)) return GRAFT_OK;
    if (mode && (mode->dtype != GRAFT_DTYPE_BOOL ||
                 (tensor_numel(mode) >= 1 && ((const uint8_t *)mode->data)[0])))
        return GRAFT_OK;
    if (mask && mask->data && mask->dtype != GRAFT_DTYPE_BOOL) return GRAFT_OK;
    TRY(copy_bytes(be, y->data, x->data, tensor_nbytes(x), c->err));
    if (mask && mask->data && tensor_numel(mask) > 0)
        CUDA_TRY(c->err, cudaMemsetAsync(mask->data, 1, (size_t)tensor_numel(mask), be->stream),
                 "filling Dropout's mask");
    *handled = true;
    return GRAFT_OK;
}

static graft_status k_Cast(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t n = x ? tensor_numel(x) : -1;
    *handled = false;
    if (!x || n != tensor_numel(y) || n < 0) return GRAFT_OK;
    if (x->dtype == y->dtype) {
        TRY(copy_bytes(be, y->data, x->data, tensor_nbytes(x), c->err));
        *handled = true;
        return GRAFT_OK;
    }
    return launched(ew_cast(x->dtype, x->data, y->dtype, y->data, n, be->stream), handled, c->err,
                    "launching Cast");
}

/* ---- broadcasting ops ----------------------------------------------------------------------- */

/* out = a op b: same-dtype inputs, output of the op's dtype (bool for comparisons); anything
 * else goes to the CPU reference, which reports it. */
static graft_status run_binary(cuda_backend *be, const op_call *c, ew_binary_op op, bool *handled) {
    *handled = false;
    if (c->n_in < 2 || !c->in[0] || !c->in[1]) return GRAFT_OK;
    const tensor *a = c->in[0], *b = c->in[1];
    tensor *y = c->out[0];
    bool cmp = ew_binary_is_bool(op);
    if (a->dtype != b->dtype || y->dtype != (cmp ? GRAFT_DTYPE_BOOL : a->dtype)) return GRAFT_OK;
    ew_plan plan;
    TRY(plan_make(c, c->in, 2, y, &plan));
    return launched(ew_binary(op, a->dtype, a->data, b->data, y->data, &plan, be->stream), handled,
                    c->err, "launching an element-wise kernel");
}

#define BINARY_KERNEL(NAME, OP)                                                                    \
    static graft_status k_##NAME(cuda_backend *be, const op_call *c, void **state,                 \
                                 bool *handled) {                                                  \
        (void)state;                                                                               \
        return run_binary(be, c, OP, handled);                                                     \
    }
BINARY_KERNEL(Add, EW_ADD)
BINARY_KERNEL(Sub, EW_SUB)
BINARY_KERNEL(Mul, EW_MUL)
BINARY_KERNEL(Div, EW_DIV)
BINARY_KERNEL(Equal, EW_EQUAL)
BINARY_KERNEL(Less, EW_LESS)
BINARY_KERNEL(Greater, EW_GREATER)
BINARY_KERNEL(GreaterOrEqual, EW_GREATER_EQUAL)
BINARY_KERNEL(LessOrEqual, EW_LESS_EQUAL)
BINARY_KERNEL(And, EW_AND)
BINARY_KERNEL(Or, EW_OR)
BINARY_KERNEL(Xor, EW_XOR)
BINARY_KERNEL(PRelu, EW_PRELU)
#undef BINARY_KERNEL

/* Mod: fmod = 1 on floats here; integer Mod goes to the CPU, which reports a zero divisor. */
static graft_status k_Mod(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = false;
    if (c->n_in < 2 || !c->in[0] || !dtype_is_float(c->in[0]->dtype) ||
        attr_i(c->node, "fmod", 0) != 1)
        return GRAFT_OK;
    return run_binary(be, c, EW_FMOD, handled);
}

static graft_status k_Pow(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = false;
    if (c->n_in < 2 || !c->in[0] || !c->in[1]) return GRAFT_OK;
    const tensor *x = c->in[0], *p = c->in[1];
    tensor *y = c->out[0];
    if (y->dtype != x->dtype) return GRAFT_OK;
    if (x->dtype == p->dtype && dtype_is_float(x->dtype)) return run_binary(be, c, EW_POW, handled);
    ew_plan plan;
    TRY(plan_make(c, c->in, 2, y, &plan));
    return launched(ew_pow_mixed(x->dtype, x->data, p->dtype, p->data, y->data, &plan, be->stream),
                    handled, c->err, "launching Pow");
}

/* Variadic Min / Max as the reference does them: the first pair into the output, which then
 * absorbs each further input in place; one input gives op(x, x) = x. */
static graft_status run_variadic(cuda_backend *be, const op_call *c, ew_binary_op op,
                                 bool *handled) {
    tensor *y = c->out[0];
    *handled = false;
    if (c->n_in < 1) return GRAFT_OK;
    for (int i = 0; i < c->n_in; i++)
        if (!c->in[i] || c->in[i]->dtype != y->dtype) return GRAFT_OK;
    ew_plan plan;
    const tensor *pair[2] = {c->in[0], c->n_in > 1 ? c->in[1] : c->in[0]};
    TRY(plan_make(c, pair, 2, y, &plan));
    TRY(launched(ew_binary(op, y->dtype, pair[0]->data, pair[1]->data, y->data, &plan, be->stream),
                 handled, c->err, "launching Min / Max"));
    for (int i = 2; i < c->n_in && *handled; i++) {
        pair[0] = y;
        pair[1] = c->in[i];
        TRY(plan_make(c, pair, 2, y, &plan));
        cudaError_t err =
            ew_binary(op, y->dtype, y->data, c->in[i]->data, y->data, &plan, be->stream);
        if (err != cudaSuccess) return cuda_fail(c->err, err, "launching Min / Max");
    }
    return GRAFT_OK;
}

static graft_status k_Min(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return run_variadic(be, c, EW_MIN, handled);
}

static graft_status k_Max(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return run_variadic(be, c, EW_MAX, handled);
}

static graft_status k_Where(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = false;
    if (c->n_in < 3 || !c->in[0] || !c->in[1] || !c->in[2]) return GRAFT_OK;
    const tensor *cond = c->in[0], *x = c->in[1], *w = c->in[2];
    tensor *y = c->out[0];
    if (cond->dtype != GRAFT_DTYPE_BOOL || x->dtype != w->dtype || y->dtype != x->dtype)
        return GRAFT_OK;
    ew_plan plan;
    TRY(plan_make(c, c->in, 3, y, &plan));
    return launched(ew_where(cond->data, x->data, w->data, y->data, graft_dtype_size(x->dtype),
                             &plan, be->stream),
                    handled, c->err, "launching Where");
}

/* ---- the table and the mixed-precision helper ---------------------------------------------- */

const cuda_kernel cuda_elementwise_kernels[] = {
    {"Relu", k_Relu, NULL},
    {"LeakyRelu", k_LeakyRelu, NULL},
    {"Clip", k_Clip, NULL},
    {"Sigmoid", k_Sigmoid, NULL},
    {"Tanh", k_Tanh, NULL},
    {"Erf", k_Erf, NULL},
    {"Gelu", k_Gelu, NULL},
    {"Sqrt", k_Sqrt, NULL},
    {"Neg", k_Neg, NULL},
    {"Reciprocal", k_Reciprocal, NULL},
    {"Exp", k_Exp, NULL},
    {"Log", k_Log, NULL},
    {"Abs", k_Abs, NULL},
    {"Not", k_Not, NULL},
    {"Identity", k_Identity, NULL},
    {"Dropout", k_Dropout, NULL},
    {"Cast", k_Cast, NULL},
    {"Add", k_Add, NULL},
    {"Sub", k_Sub, NULL},
    {"Mul", k_Mul, NULL},
    {"Div", k_Div, NULL},
    {"Pow", k_Pow, NULL},
    {"Equal", k_Equal, NULL},
    {"Less", k_Less, NULL},
    {"Greater", k_Greater, NULL},
    {"Min", k_Min, NULL},
    {"Max", k_Max, NULL},
    {"Where", k_Where, NULL},
    {"GreaterOrEqual", k_GreaterOrEqual, NULL},
    {"LessOrEqual", k_LessOrEqual, NULL},
    {"And", k_And, NULL},
    {"Or", k_Or, NULL},
    {"Xor", k_Xor, NULL},
    {"Mod", k_Mod, NULL},
    {"PRelu", k_PRelu, NULL},
    {"IsNaN", k_IsNaN, NULL},
    {"IsInf", k_IsInf, NULL},
    {"Sign", k_Sign, NULL},
    {"Floor", k_Floor, NULL},
    {"Ceil", k_Ceil, NULL},
    {"Round", k_Round, NULL},
    {"HardSigmoid", k_HardSigmoid, NULL},
    {"HardSwish", k_HardSwish, NULL},
    {"Softplus", k_Softplus, NULL},
    {"Softsign", k_Softsign, NULL},
    {"Mish", k_Mish, NULL},
    {"Elu", k_Elu, NULL},
    {"Selu", k_Selu, NULL},
    {"Celu", k_Celu, NULL},
    {"ThresholdedRelu", k_ThresholdedRelu, NULL},
    {NULL, NULL, NULL},
};

static bool is_mixed_precision_dtype(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F16 || dt == GRAFT_DTYPE_BF16;
}

graft_status cuda_cast_buffer(cuda_backend *be, const void *src, graft_dtype from, void *dst,
                              graft_dtype to, int64_t n, graft_err *e) {
    if (!is_mixed_precision_dtype(from) || !is_mixed_precision_dtype(to))
        return err_set(e, GRAFT_E_DTYPE,
                       "cuda_cast_buffer converts f32, f16 and bf16, not %s to %s",
                       graft_dtype_name(from), graft_dtype_name(to));
    if (n < 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "negative element count %lld", (long long)n);
    if (from == to) return copy_bytes(be, dst, src, n * (int64_t)graft_dtype_size(from), e);
    cudaError_t err = ew_cast(from, src, to, dst, n, be->stream);
    if (err != cudaSuccess) return cuda_fail(e, err, "converting a buffer between float types");
    return GRAFT_OK;
}

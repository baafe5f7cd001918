/* elementwise.c: shape inference and attribute checks of the element-wise op family. */
#include <math.h>
#include <string.h>

#include "op.h"

/* Dtype classes an op accepts, combined as a bit mask. */
enum {
    ACCEPT_FLOAT = 1,
    ACCEPT_SINT = 2,
    ACCEPT_UINT = 4,
    ACCEPT_BOOL = 8,
    ACCEPT_INT = ACCEPT_SINT | ACCEPT_UINT,
    ACCEPT_NUMERIC = ACCEPT_FLOAT | ACCEPT_INT,
    ACCEPT_ANY = ACCEPT_NUMERIC | ACCEPT_BOOL,
};

static unsigned dtype_class(graft_dtype dt) {
    switch (dt) {
    case GRAFT_DTYPE_F16:
    case GRAFT_DTYPE_BF16:
    case GRAFT_DTYPE_F32:
    case GRAFT_DTYPE_F64:
        return ACCEPT_FLOAT;
    case GRAFT_DTYPE_I8:
    case GRAFT_DTYPE_I16:
    case GRAFT_DTYPE_I32:
    case GRAFT_DTYPE_I64:
        return ACCEPT_SINT;
    case GRAFT_DTYPE_U8:
    case GRAFT_DTYPE_U16:
    case GRAFT_DTYPE_U32:
    case GRAFT_DTYPE_U64:
        return ACCEPT_UINT;
    case GRAFT_DTYPE_BOOL:
        return ACCEPT_BOOL;
    default:
        return 0;
    }
}

static const char *accept_text(unsigned accept) {
    switch (accept) {
    case ACCEPT_FLOAT:
        return "floating-point (float16, bfloat16, float32, float64)";
    case ACCEPT_FLOAT | ACCEPT_SINT:
        return "floating-point or signed integer";
    case ACCEPT_NUMERIC:
        return "numeric";
    case ACCEPT_ANY:
        return "numeric or bool";
    case ACCEPT_BOOL:
        return "bool";
    default:
        return "other";
    }
}

/* Fail when input `index` has a known dtype outside `accept`. */
static graft_status check_accept(const ir_node *node, const value_info *in, int index,
                                 unsigned accept, graft_err *e) {
    const value_info *v = &in[index];
    if (!v->present || v->dtype == GRAFT_DTYPE_UNDEFINED) return GRAFT_OK;
    if (!(dtype_class(v->dtype) & accept))
        return op_error(node, e, GRAFT_E_DTYPE, "input %d has dtype %s, but %s takes %s tensors",
                        index, graft_dtype_name(v->dtype), node->op_type, accept_text(accept));
    return GRAFT_OK;
}

static graft_status require_present(const ir_node *node, const value_info *in, int index,
                                    graft_err *e) {
    if (!in[index].present)
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "required input %d is missing", index);
    return GRAFT_OK;
}

/* Inputs first..first+count-1 must share one dtype; *dtype gets it (UNDEFINED when unknown). */
static graft_status same_dtypes(const ir_node *node, const value_info *in, int first, int count,
                                graft_dtype *dtype, graft_err *e) {
    int known = -1;
    for (int i = first; i < first + count; i++) {
        if (!in[i].present || in[i].dtype == GRAFT_DTYPE_UNDEFINED) continue;
        if (known < 0) {
            known = i;
        } else if (in[i].dtype != in[known].dtype) {
            return op_error(
                node, e, GRAFT_E_DTYPE,
                "inputs %d and %d have different dtypes (%s and %s); %s needs them equal", known, i,
                graft_dtype_name(in[known].dtype), graft_dtype_name(in[i].dtype), node->op_type);
        }
    }
    *dtype = known >= 0 ? in[known].dtype : GRAFT_DTYPE_UNDEFINED;
    return GRAFT_OK;
}

/* Multidirectional broadcast of inputs first..first+count-1 into out's rank and dims. */
static graft_status broadcast_inputs(const ir_node *node, const value_info *in, int first,
                                     int count, value_info *out, graft_err *e) {
    int ndim = 0;
    int64_t dims[GRAFT_MAX_DIMS];
    bool rank_known = true;
    for (int i = first; i < first + count; i++) {
        if (in[i].ndim < 0) {
            rank_known = false;
            continue;
        }
        if (in[i].ndim > GRAFT_MAX_DIMS)
            return op_error(node, e, GRAFT_E_UNSUPPORTED, "input %d has rank %d, above %d", i,
                            in[i].ndim, GRAFT_MAX_DIMS);
        int64_t merged[GRAFT_MAX_DIMS];
        int nmerged = 0;
        TRY(op_broadcast(node, ndim, dims, in[i].ndim, in[i].dims, &nmerged, merged, e));
        ndim = nmerged;
        memcpy(dims, merged, sizeof(int64_t) * (size_t)ndim);
    }
    out->ndim = rank_known ? ndim : -1;
    if (rank_known) memcpy(out->dims, dims, sizeof(int64_t) * (size_t)ndim);
    return GRAFT_OK;
}

/* One input, one output of the same dtype and shape. */
static graft_status infer_unary(const ir_node *node, const value_info *in, int n_in,
                                value_info *out, int n_out, unsigned accept, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    TRY(require_present(node, in, 0, e));
    TRY(check_accept(node, in, 0, accept, e));
    op_same(&out[0], &in[0]);
    return GRAFT_OK;
}

/* n-ary broadcasting op over inputs of one dtype; the output has `out_dtype` or, when that is
 * UNDEFINED, the inputs' dtype. */
static graft_status infer_broadcasting(const ir_node *node, const value_info *in, int n_in,
                                       value_info *out, int n_out, int min_in, int max_in,
                                       unsigned accept, graft_dtype out_dtype, graft_err *e) {
    TRY(op_check_arity(node, n_in, min_in, max_in, n_out, 1, 1, e));
    for (int i = 0; i < n_in; i++) {
        TRY(require_present(node, in, i, e));
        TRY(check_accept(node, in, i, accept, e));
    }
    graft_dtype dtype = GRAFT_DTYPE_UNDEFINED;
    TRY(same_dtypes(node, in, 0, n_in, &dtype, e));
    op_unknown(&out[0], out_dtype != GRAFT_DTYPE_UNDEFINED ? out_dtype : dtype);
    return broadcast_inputs(node, in, 0, n_in, &out[0], e);
}

#define UNARY_OP(name, accept)                                                                     \
    graft_status op_infer_##name(const ir_node *node, const value_info *in, int n_in,              \
                                 value_info *out, int n_out, graft_err *e) {                       \
        return infer_unary(node, in, n_in, out, n_out, accept, e);                                 \
    }

UNARY_OP(Relu, ACCEPT_FLOAT | ACCEPT_SINT)
UNARY_OP(Sigmoid, ACCEPT_FLOAT)
UNARY_OP(Tanh, ACCEPT_FLOAT)
UNARY_OP(Erf, ACCEPT_FLOAT)
UNARY_OP(Sqrt, ACCEPT_FLOAT)
UNARY_OP(Neg, ACCEPT_FLOAT | ACCEPT_SINT)
UNARY_OP(Reciprocal, ACCEPT_FLOAT)
UNARY_OP(Exp, ACCEPT_FLOAT)
UNARY_OP(Log, ACCEPT_FLOAT)
UNARY_OP(Abs, ACCEPT_NUMERIC)
UNARY_OP(Not, ACCEPT_BOOL)
UNARY_OP(Identity, ACCEPT_ANY)

graft_status op_infer_LeakyRelu(const ir_node *node, const value_info *in, int n_in,
                                value_info *out, int n_out, graft_err *e) {
    float alpha = attr_f(node, "alpha", 0.01f);
    if (!isfinite(alpha))
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "alpha %g is not finite", (double)alpha);
    return infer_unary(node, in, n_in, out, n_out, ACCEPT_FLOAT, e);
}

graft_status op_infer_Gelu(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    const char *approximate = attr_s(node, "approximate", "none");
    if (strcmp(approximate, "none") != 0 && strcmp(approximate, "tanh") != 0)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "approximate is \"%s\"; it must be \"none\" or \"tanh\"", approximate);
    return infer_unary(node, in, n_in, out, n_out, ACCEPT_FLOAT, e);
}

/* Clip's bound inputs (opset 11+) must be scalars of the input's dtype. */
static graft_status check_clip_bound(const ir_node *node, const value_info *in, int index,
                                     graft_err *e) {
    const value_info *b = &in[index];
    if (!b->present) return GRAFT_OK;
    if (b->dtype != GRAFT_DTYPE_UNDEFINED && in[0].dtype != GRAFT_DTYPE_UNDEFINED &&
        b->dtype != in[0].dtype)
        return op_error(node, e, GRAFT_E_DTYPE, "%s has dtype %s but the input is %s",
                        index == 1 ? "min" : "max", graft_dtype_name(b->dtype),
                        graft_dtype_name(in[0].dtype));
    if (op_shape_known(b) && dims_numel(b->ndim, b->dims) != 1) {
        char s[256];
        return op_error(node, e, GRAFT_E_SHAPE, "%s must be a scalar, got shape %s",
                        index == 1 ? "min" : "max", shape_str(s, sizeof s, b->ndim, b->dims));
    }
    return GRAFT_OK;
}

graft_status op_infer_Clip(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    if (node->opset < 11) {
        float lo = attr_f(node, "min", -INFINITY), hi = attr_f(node, "max", INFINITY);
        if (isnan(lo) || isnan(hi))
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "min or max is NaN");
        return infer_unary(node, in, n_in, out, n_out, ACCEPT_FLOAT, e);
    }
    TRY(op_check_arity(node, n_in, 1, 3, n_out, 1, 1, e));
    TRY(require_present(node, in, 0, e));
    TRY(check_accept(node, in, 0, ACCEPT_NUMERIC, e));
    for (int i = 1; i < n_in; i++) TRY(check_clip_bound(node, in, i, e));
    op_same(&out[0], &in[0]);
    return GRAFT_OK;
}

/* Dropout 12+: ratio and training_mode inputs. graft runs Dropout only as inference. */
static graft_status check_dropout_inputs(const ir_node *node, const value_info *in, int n_in,
                                         graft_err *e) {
    if (n_in > 1) TRY(check_accept(node, in, 1, ACCEPT_FLOAT, e));
    if (n_in > 2 && in[2].present) {
        TRY(check_accept(node, in, 2, ACCEPT_BOOL, e));
        const tensor *mode = in[2].value;
        if (mode && mode->data && tensor_numel(mode) >= 1 && ((const uint8_t *)mode->data)[0])
            return op_error(node, e, GRAFT_E_UNSUPPORTED,
                            "training_mode is true, but graft runs Dropout only in inference "
                            "mode (output = input)");
    }
    return GRAFT_OK;
}

graft_status op_infer_Dropout(const ir_node *node, const value_info *in, int n_in, value_info *out,
                              int n_out, graft_err *e) {
    int max_in = node->opset >= 12 ? 3 : 1;
    TRY(op_check_arity(node, n_in, 1, max_in, n_out, 1, 2, e));
    TRY(require_present(node, in, 0, e));
    TRY(check_accept(node, in, 0, ACCEPT_FLOAT, e));
    if (node->opset < 12) {
        float ratio = attr_f(node, "ratio", 0.5f);
        if (!(ratio >= 0.0f && ratio < 1.0f))
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "ratio %g is outside [0, 1)",
                            (double)ratio);
    } else {
        TRY(check_dropout_inputs(node, in, n_in, e));
    }
    op_same(&out[0], &in[0]);
    if (n_out > 1) {
        op_same(&out[1], &in[0]);
        /* Dropout 7..9 gives the mask the data's dtype; 10+ makes it bool. */
        if (node->opset >= 10) out[1].dtype = GRAFT_DTYPE_BOOL;
    }
    return GRAFT_OK;
}

/* ONNX element types graft has no tensors for, so Cast to them can only fail. */
static const char *unsupported_onnx_type(int64_t to) {
    switch (to) {
    case 8:
        return "string";
    case 14:
        return "complex64";
    case 15:
        return "complex128";
    case 17:
        return "float8e4m3fn";
    case 18:
        return "float8e4m3fnuz";
    case 19:
        return "float8e5m2";
    case 20:
        return "float8e5m2fnuz";
    case 21:
        return "uint4";
    case 22:
        return "int4";
    case 23:
        return "float4e2m1";
    default:
        return NULL;
    }
}

graft_status op_infer_Cast(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 1, 1, n_out, 1, 1, e));
    TRY(require_present(node, in, 0, e));
    if (!ir_node_attr(node, "to"))
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "the required attribute 'to' is missing");
    int64_t to = attr_i(node, "to", 0);
    const char *missing = unsupported_onnx_type(to);
    if (missing)
        return op_error(node, e, GRAFT_E_UNSUPPORTED,
                        "Cast to %s is not supported: graft has no %s tensors", missing, missing);
    if (to <= 0 || to >= GRAFT_DTYPE_COUNT || !dtype_is_valid((graft_dtype)to))
        return op_error(node, e, GRAFT_E_MALFORMED_MODEL, "'to' is %lld, not an ONNX element type",
                        (long long)to);
    TRY(check_accept(node, in, 0, ACCEPT_ANY, e));
    op_same(&out[0], &in[0]);
    out[0].dtype = (graft_dtype)to;
    return GRAFT_OK;
}

#define BROADCAST_OP(name, accept, out_dtype)                                                      \
    graft_status op_infer_##name(const ir_node *node, const value_info *in, int n_in,              \
                                 value_info *out, int n_out, graft_err *e) {                       \
        return infer_broadcasting(node, in, n_in, out, n_out, 2, 2, accept, out_dtype, e);         \
    }

BROADCAST_OP(Add, ACCEPT_NUMERIC, GRAFT_DTYPE_UNDEFINED)
BROADCAST_OP(Sub, ACCEPT_NUMERIC, GRAFT_DTYPE_UNDEFINED)
BROADCAST_OP(Mul, ACCEPT_NUMERIC, GRAFT_DTYPE_UNDEFINED)
BROADCAST_OP(Div, ACCEPT_NUMERIC, GRAFT_DTYPE_UNDEFINED)
BROADCAST_OP(Equal, ACCEPT_ANY, GRAFT_DTYPE_BOOL)
BROADCAST_OP(Less, ACCEPT_ANY, GRAFT_DTYPE_BOOL)
BROADCAST_OP(Greater, ACCEPT_ANY, GRAFT_DTYPE_BOOL)

graft_status op_infer_Min(const ir_node *node, const value_info *in, int n_in, value_info *out,
                          int n_out, graft_err *e) {
    return infer_broadcasting(node, in, n_in, out, n_out, 1, 1 << 20, ACCEPT_NUMERIC,
                              GRAFT_DTYPE_UNDEFINED, e);
}

graft_status op_infer_Max(const ir_node *node, const value_info *in, int n_in, value_info *out,
                          int n_out, graft_err *e) {
    return infer_broadcasting(node, in, n_in, out, n_out, 1, 1 << 20, ACCEPT_NUMERIC,
                              GRAFT_DTYPE_UNDEFINED, e);
}

/* Pow: from opset 12 the exponent may have another numeric dtype; the output takes the base's. */
graft_status op_infer_Pow(const ir_node *node, const value_info *in, int n_in, value_info *out,
                          int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 2, 2, n_out, 1, 1, e));
    TRY(require_present(node, in, 0, e));
    TRY(require_present(node, in, 1, e));
    unsigned accept = node->opset >= 12 ? ACCEPT_NUMERIC : ACCEPT_FLOAT;
    TRY(check_accept(node, in, 0, accept, e));
    TRY(check_accept(node, in, 1, accept, e));
    if (node->opset < 12) {
        graft_dtype dtype;
        TRY(same_dtypes(node, in, 0, 2, &dtype, e));
    }
    op_unknown(&out[0], in[0].dtype);
    return broadcast_inputs(node, in, 0, 2, &out[0], e);
}

graft_status op_infer_Where(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    TRY(op_check_arity(node, n_in, 3, 3, n_out, 1, 1, e));
    for (int i = 0; i < 3; i++) TRY(require_present(node, in, i, e));
    if (in[0].dtype != GRAFT_DTYPE_UNDEFINED && in[0].dtype != GRAFT_DTYPE_BOOL)
        return op_error(node, e, GRAFT_E_DTYPE, "the condition has dtype %s; it must be bool",
                        graft_dtype_name(in[0].dtype));
    graft_dtype dtype;
    TRY(same_dtypes(node, in, 1, 2, &dtype, e));
    op_unknown(&out[0], dtype);
    return broadcast_inputs(node, in, 0, 3, &out[0], e);
}

/* ---- the ops exporters add around activations, masks and position buckets ------------------ */

BROADCAST_OP(GreaterOrEqual, ACCEPT_ANY, GRAFT_DTYPE_BOOL)
BROADCAST_OP(LessOrEqual, ACCEPT_ANY, GRAFT_DTYPE_BOOL)
BROADCAST_OP(And, ACCEPT_BOOL, GRAFT_DTYPE_BOOL)
BROADCAST_OP(Or, ACCEPT_BOOL, GRAFT_DTYPE_BOOL)
BROADCAST_OP(Xor, ACCEPT_BOOL, GRAFT_DTYPE_BOOL)

UNARY_OP(Sign, ACCEPT_NUMERIC)
UNARY_OP(Floor, ACCEPT_FLOAT)
UNARY_OP(Ceil, ACCEPT_FLOAT)
UNARY_OP(Round, ACCEPT_FLOAT)
UNARY_OP(HardSwish, ACCEPT_FLOAT)
UNARY_OP(Softplus, ACCEPT_FLOAT)
UNARY_OP(Softsign, ACCEPT_FLOAT)
UNARY_OP(Mish, ACCEPT_FLOAT)

/* Mod: fmod 0 is the floored remainder (Python's %, sign of the divisor), defined for integers
 * only; fmod 1 is C's fmod (sign of the dividend). */
graft_status op_infer_Mod(const ir_node *node, const value_info *in, int n_in, value_info *out,
                          int n_out, graft_err *e) {
    int64_t fmod_attr = attr_i(node, "fmod", 0);
    if (fmod_attr != 0 && fmod_attr != 1)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "fmod is %lld; it must be 0 or 1",
                        (long long)fmod_attr);
    TRY(infer_broadcasting(node, in, n_in, out, n_out, 2, 2, ACCEPT_NUMERIC, GRAFT_DTYPE_UNDEFINED,
                           e));
    if (fmod_attr == 0 && dtype_class(out[0].dtype) == ACCEPT_FLOAT)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "fmod is 0 on %s inputs; ONNX requires fmod = 1 for floating point",
                        graft_dtype_name(out[0].dtype));
    return GRAFT_OK;
}

/* PRelu: the slope broadcasts to X (unidirectionally), so the output has X's shape. */
graft_status op_infer_PRelu(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    unsigned accept = node->opset >= 9 ? ACCEPT_NUMERIC : ACCEPT_FLOAT;
    TRY(infer_broadcasting(node, in, n_in, out, n_out, 2, 2, accept, GRAFT_DTYPE_UNDEFINED, e));
    if (in[0].ndim < 0 || out[0].ndim < 0) return GRAFT_OK;
    bool fits = out[0].ndim == in[0].ndim;
    for (int d = 0; fits && d < in[0].ndim; d++)
        fits = in[0].dims[d] < 0 || out[0].dims[d] < 0 || in[0].dims[d] == out[0].dims[d];
    if (!fits) {
        char xs[256], ss[256];
        return op_error(node, e, GRAFT_E_SHAPE, "the slope's shape %s does not broadcast to X's %s",
                        shape_str(ss, sizeof ss, in[1].ndim, in[1].dims),
                        shape_str(xs, sizeof xs, in[0].ndim, in[0].dims));
    }
    op_same(&out[0], &in[0]);
    return GRAFT_OK;
}

/* IsNaN, IsInf: float in, bool out of the same shape. */
static graft_status infer_float_test(const ir_node *node, const value_info *in, int n_in,
                                     value_info *out, int n_out, graft_err *e) {
    TRY(infer_unary(node, in, n_in, out, n_out, ACCEPT_FLOAT, e));
    out[0].dtype = GRAFT_DTYPE_BOOL;
    return GRAFT_OK;
}

graft_status op_infer_IsNaN(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    return infer_float_test(node, in, n_in, out, n_out, e);
}

graft_status op_infer_IsInf(const ir_node *node, const value_info *in, int n_in, value_info *out,
                            int n_out, graft_err *e) {
    return infer_float_test(node, in, n_in, out, n_out, e);
}

/* A float activation whose listed attributes (with their defaults) must be finite. */
static graft_status infer_activation(const ir_node *node, const value_info *in, int n_in,
                                     value_info *out, int n_out, const char *const *names,
                                     const float *defaults, int n_attrs, graft_err *e) {
    for (int i = 0; i < n_attrs; i++) {
        float v = attr_f(node, names[i], defaults[i]);
        if (!isfinite(v))
            return op_error(node, e, GRAFT_E_INVALID_ARGUMENT, "%s %g is not finite", names[i],
                            (double)v);
    }
    return infer_unary(node, in, n_in, out, n_out, ACCEPT_FLOAT, e);
}

/* ACTIVATION_OP(name, attribute names..., defaults...): the ONNX defaults of each op. */
#define ACTIVATION_OP(name, NAMES, DEFAULTS)                                                       \
    graft_status op_infer_##name(const ir_node *node, const value_info *in, int n_in,              \
                                 value_info *out, int n_out, graft_err *e) {                       \
        static const char *const names[] = NAMES;                                                  \
        static const float defaults[] = DEFAULTS;                                                  \
        return infer_activation(node, in, n_in, out, n_out, names, defaults,                       \
                                (int)(sizeof defaults / sizeof defaults[0]), e);                   \
    }
#define LIST(...)                                                                                  \
    { __VA_ARGS__ }

ACTIVATION_OP(HardSigmoid, LIST("alpha", "beta"), LIST(0.2f, 0.5f))
ACTIVATION_OP(Elu, LIST("alpha"), LIST(1.0f))
ACTIVATION_OP(Selu, LIST("alpha", "gamma"),
              LIST(1.67326319217681884765625f, 1.05070102214813232421875f))
ACTIVATION_OP(ThresholdedRelu, LIST("alpha"), LIST(1.0f))

graft_status op_infer_Celu(const ir_node *node, const value_info *in, int n_in, value_info *out,
                           int n_out, graft_err *e) {
    float alpha = attr_f(node, "alpha", 1.0f);
    if (!isfinite(alpha) || alpha == 0.0f)
        return op_error(node, e, GRAFT_E_INVALID_ARGUMENT,
                        "alpha %g must be finite and non-zero (Celu divides by it)", (double)alpha);
    return infer_unary(node, in, n_in, out, n_out, ACCEPT_FLOAT, e);
}

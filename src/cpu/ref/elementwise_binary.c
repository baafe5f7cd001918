/* elementwise_binary.c: reference kernels of the broadcasting element-wise ops: Add, Sub, Mul,
 * Div, Pow, Min, Max, Mod, PRelu, the comparisons, And, Or, Xor and Where. */
#include <math.h>
#include <string.h>

#include "../../ops/broadcast_plan.h"
#include "../../ops/op.h"
#include "elementwise_scalar.h"

/* Inner rows are cut into blocks of this many elements so one long row still spreads over
 * threads. */
#define ROW_BLOCK 16384

/* One contiguous output row of n elements; in[k] advances by s[k] elements (0 or 1 usually). */
typedef void (*row_fn)(const void *const *in, const int64_t *s, void *out, int64_t n,
                       const void *ctx);

/* Element offset of each input at the start of outer row `row`. */
static void plan_offsets(const bcast_plan *p, int64_t row, int64_t *off) {
    for (int k = 0; k < p->n_in; k++) off[k] = 0;
    for (int d = p->ndim - 2; d >= 0; d--) {
        int64_t i = row % p->dims[d];
        row /= p->dims[d];
        for (int k = 0; k < p->n_in; k++) off[k] += i * p->strides[k][d];
    }
}

static graft_status bcast_run(const op_call *c, const tensor *const *ins, int n_in, tensor *y,
                              row_fn fn, const void *ctx) {
    bcast_plan p;
    TRY(bcast_plan_make(c->node, c->err, ins, n_in, y, &p));
    if (p.numel <= 0) return GRAFT_OK;
    int64_t inner = p.dims[p.ndim - 1], rows = p.numel / inner;
    int64_t blocks = (inner + ROW_BLOCK - 1) / ROW_BLOCK, units = rows * blocks;
    size_t ey = graft_dtype_size(y->dtype), esize[BCAST_MAX_INPUTS];
    int64_t inner_stride[BCAST_MAX_INPUTS];
    for (int k = 0; k < n_in; k++) {
        esize[k] = graft_dtype_size(ins[k]->dtype);
        inner_stride[k] = p.strides[k][p.ndim - 1];
    }
#pragma omp parallel for if (p.numel >= ELEMENTWISE_PARALLEL_MIN) schedule(static)
    for (int64_t u = 0; u < units; u++) {
        int64_t row = u / blocks, start = (u % blocks) * ROW_BLOCK;
        int64_t len = inner - start < ROW_BLOCK ? inner - start : ROW_BLOCK;
        int64_t off[BCAST_MAX_INPUTS];
        const void *ptr[BCAST_MAX_INPUTS];
        plan_offsets(&p, row, off);
        for (int k = 0; k < n_in; k++)
            ptr[k] =
                (const char *)ins[k]->data + (size_t)(off[k] + start * inner_stride[k]) * esize[k];
        fn(ptr, inner_stride, (char *)y->data + (size_t)(row * inner + start) * ey, len, ctx);
    }
    return GRAFT_OK;
}

/* Row kernels. EXPR(x, w, CT) combines the loaded elements; the stride cases are split so the
 * compiler vectorises the contiguous and scalar-broadcast loops. */
#define ID(v) (v)
#define BOOL_LOAD(v) ((uint8_t)((v) != 0))
#define DEFINE_ROW(NAME, TIN, TOUT, CT, LOAD, STORE, EXPR)                                         \
    static void NAME(const void *const *in, const int64_t *s, void *out, int64_t n,                \
                     const void *ctx) {                                                            \
        const TIN *a = in[0], *b = in[1];                                                          \
        TOUT *y = out;                                                                             \
        (void)ctx;                                                                                 \
        if (s[0] == 1 && s[1] == 1) {                                                              \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                CT x = LOAD(a[i]), w = LOAD(b[i]);                                                 \
                y[i] = STORE(EXPR(x, w, CT));                                                      \
            }                                                                                      \
        } else if (s[0] == 1 && s[1] == 0) {                                                       \
            const CT w = LOAD(b[0]);                                                               \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                CT x = LOAD(a[i]);                                                                 \
                y[i] = STORE(EXPR(x, w, CT));                                                      \
            }                                                                                      \
        } else if (s[0] == 0 && s[1] == 1) {                                                       \
            const CT x = LOAD(a[0]);                                                               \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                CT w = LOAD(b[i]);                                                                 \
                y[i] = STORE(EXPR(x, w, CT));                                                      \
            }                                                                                      \
        } else {                                                                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                CT x = LOAD(a[i * s[0]]), w = LOAD(b[i * s[1]]);                                   \
                y[i] = STORE(EXPR(x, w, CT));                                                      \
            }                                                                                      \
        }                                                                                          \
    }

#define FLOAT_ROWS(OPN, EXPR)                                                                      \
    DEFINE_ROW(OPN##_f32, float, float, float, ID, ID, EXPR)                                       \
    DEFINE_ROW(OPN##_f64, double, double, double, ID, ID, EXPR)                                    \
    DEFINE_ROW(OPN##_f16, uint16_t, uint16_t, float, f16_to_f32, f32_to_f16, EXPR)                 \
    DEFINE_ROW(OPN##_bf16, uint16_t, uint16_t, float, bf16_to_f32, f32_to_bf16, EXPR)
#define INT_ROWS(OPN, SEXPR, UEXPR)                                                                \
    DEFINE_ROW(OPN##_i8, int8_t, int8_t, int8_t, ID, ID, SEXPR)                                    \
    DEFINE_ROW(OPN##_i16, int16_t, int16_t, int16_t, ID, ID, SEXPR)                                \
    DEFINE_ROW(OPN##_i32, int32_t, int32_t, int32_t, ID, ID, SEXPR)                                \
    DEFINE_ROW(OPN##_i64, int64_t, int64_t, int64_t, ID, ID, SEXPR)                                \
    DEFINE_ROW(OPN##_u8, uint8_t, uint8_t, uint8_t, ID, ID, UEXPR)                                 \
    DEFINE_ROW(OPN##_u16, uint16_t, uint16_t, uint16_t, ID, ID, UEXPR)                             \
    DEFINE_ROW(OPN##_u32, uint32_t, uint32_t, uint32_t, ID, ID, UEXPR)                             \
    DEFINE_ROW(OPN##_u64, uint64_t, uint64_t, uint64_t, ID, ID, UEXPR)
/* Comparisons: any numeric dtype or bool in, bool out. */
#define CMP_ROWS(OPN, EXPR)                                                                        \
    DEFINE_ROW(OPN##_f32, float, uint8_t, float, ID, ID, EXPR)                                     \
    DEFINE_ROW(OPN##_f64, double, uint8_t, double, ID, ID, EXPR)                                   \
    DEFINE_ROW(OPN##_f16, uint16_t, uint8_t, float, f16_to_f32, ID, EXPR)                          \
    DEFINE_ROW(OPN##_bf16, uint16_t, uint8_t, float, bf16_to_f32, ID, EXPR)                        \
    DEFINE_ROW(OPN##_i8, int8_t, uint8_t, int8_t, ID, ID, EXPR)                                    \
    DEFINE_ROW(OPN##_i16, int16_t, uint8_t, int16_t, ID, ID, EXPR)                                 \
    DEFINE_ROW(OPN##_i32, int32_t, uint8_t, int32_t, ID, ID, EXPR)                                 \
    DEFINE_ROW(OPN##_i64, int64_t, uint8_t, int64_t, ID, ID, EXPR)                                 \
    DEFINE_ROW(OPN##_u8, uint8_t, uint8_t, uint8_t, ID, ID, EXPR)                                  \
    DEFINE_ROW(OPN##_u16, uint16_t, uint8_t, uint16_t, ID, ID, EXPR)                               \
    DEFINE_ROW(OPN##_u32, uint32_t, uint8_t, uint32_t, ID, ID, EXPR)                               \
    DEFINE_ROW(OPN##_u64, uint64_t, uint8_t, uint64_t, ID, ID, EXPR)                               \
    DEFINE_ROW(OPN##_bool, uint8_t, uint8_t, uint8_t, BOOL_LOAD, ID, EXPR)

/* Integer arithmetic goes through uint64 so overflow wraps instead of being undefined. */
#define ADD_F(x, w, T) ((x) + (w))
#define SUB_F(x, w, T) ((x) - (w))
#define MUL_F(x, w, T) ((x) * (w))
#define DIV_F(x, w, T) ((x) / (w))
#define ADD_I(x, w, T) ((T)((uint64_t)(x) + (uint64_t)(w)))
#define SUB_I(x, w, T) ((T)((uint64_t)(x) - (uint64_t)(w)))
#define MUL_I(x, w, T) ((T)((uint64_t)(x) * (uint64_t)(w)))
/* Truncating division, as C, numpy's astype after true division and ONNX Runtime do; MIN / -1
 * would trap, so it wraps to MIN. Zero divisors are rejected before the loop. */
#define DIV_S(x, w, T) ((w) == -1 ? (T)(0 - (uint64_t)(x)) : (T)((x) / (w)))
#define DIV_U(x, w, T) ((T)((x) / (w)))
/* Min / Max propagate NaN from either side, like numpy's minimum / maximum. */
#define MIN_F(x, w, T) (((x) < (w) || (x) != (x)) ? (x) : (w))
#define MAX_F(x, w, T) (((x) > (w) || (x) != (x)) ? (x) : (w))
#define MIN_I(x, w, T) ((x) < (w) ? (x) : (w))
#define MAX_I(x, w, T) ((x) > (w) ? (x) : (w))
#define EQ(x, w, T) ((x) == (w))
#define LT(x, w, T) ((x) < (w))
#define GT(x, w, T) ((x) > (w))
#define GE(x, w, T) ((x) >= (w))
#define LE(x, w, T) ((x) <= (w))
#define AND(x, w, T) ((x) & (w))
#define OR(x, w, T) ((x) | (w))
#define XOR(x, w, T) ((x) ^ (w))
/* PRelu: x where x >= 0, else slope * x (NaN passes through). */
#define PRELU_F(x, w, T) ((x) < 0 ? (w) * (x) : (x))
#define PRELU_S(x, w, T) ((x) < 0 ? MUL_I(x, w, T) : (x))
#define PRELU_U(x, w, T) ((void)(w), (x))
/* Mod with fmod = 1: C's remainder (sign of the dividend), fmodf in f32 so f16 rounds once.
 * Integers: fmod = 1 truncates (C's %), fmod = 0 floors (Python's %, sign of the divisor).
 * x % -1 is 0, written out because MIN % -1 traps. Zero divisors are rejected before. */
#define FMOD_F(x, w, T) _Generic((x), float : fmodf, default : fmod)(x, w)
#define TMOD_S(x, w, T) ((w) == -1 ? (T)0 : (T)((x) % (w)))
#define TMOD_U(x, w, T) ((T)((x) % (w)))
#define FLOORED(r, w) (((r) != 0 && (((r) < 0) != ((w) < 0))) ? (r) + (w) : (r))
#define PMOD_S(x, w, T) ((w) == -1 ? (T)0 : (T)FLOORED((T)((x) % (w)), w))

FLOAT_ROWS(add, ADD_F)
FLOAT_ROWS(sub, SUB_F)
FLOAT_ROWS(mul, MUL_F)
FLOAT_ROWS(div, DIV_F)
FLOAT_ROWS(min, MIN_F)
FLOAT_ROWS(max, MAX_F)
INT_ROWS(add, ADD_I, ADD_I)
INT_ROWS(sub, SUB_I, SUB_I)
INT_ROWS(mul, MUL_I, MUL_I)
INT_ROWS(div, DIV_S, DIV_U)
INT_ROWS(min, MIN_I, MIN_I)
INT_ROWS(max, MAX_I, MAX_I)
CMP_ROWS(eq, EQ)
CMP_ROWS(lt, LT)
CMP_ROWS(gt, GT)
CMP_ROWS(ge, GE)
CMP_ROWS(le, LE)
DEFINE_ROW(and_bool, uint8_t, uint8_t, uint8_t, BOOL_LOAD, ID, AND)
DEFINE_ROW(or_bool, uint8_t, uint8_t, uint8_t, BOOL_LOAD, ID, OR)
DEFINE_ROW(xor_bool, uint8_t, uint8_t, uint8_t, BOOL_LOAD, ID, XOR)
FLOAT_ROWS(prelu, PRELU_F)
INT_ROWS(prelu, PRELU_S, PRELU_U)
FLOAT_ROWS(fmod, FMOD_F)
INT_ROWS(tmod, TMOD_S, TMOD_U)
INT_ROWS(pmod, PMOD_S, TMOD_U)

#define NUMERIC_CASES(OPN)                                                                         \
    case GRAFT_DTYPE_F32:                                                                          \
        return OPN##_f32;                                                                          \
    case GRAFT_DTYPE_F64:                                                                          \
        return OPN##_f64;                                                                          \
    case GRAFT_DTYPE_F16:                                                                          \
        return OPN##_f16;                                                                          \
    case GRAFT_DTYPE_BF16:                                                                         \
        return OPN##_bf16;                                                                         \
    case GRAFT_DTYPE_I8:                                                                           \
        return OPN##_i8;                                                                           \
    case GRAFT_DTYPE_I16:                                                                          \
        return OPN##_i16;                                                                          \
    case GRAFT_DTYPE_I32:                                                                          \
        return OPN##_i32;                                                                          \
    case GRAFT_DTYPE_I64:                                                                          \
        return OPN##_i64;                                                                          \
    case GRAFT_DTYPE_U8:                                                                           \
        return OPN##_u8;                                                                           \
    case GRAFT_DTYPE_U16:                                                                          \
        return OPN##_u16;                                                                          \
    case GRAFT_DTYPE_U32:                                                                          \
        return OPN##_u32;                                                                          \
    case GRAFT_DTYPE_U64:                                                                          \
        return OPN##_u64;

typedef enum binary_op {
    BIN_ADD,
    BIN_SUB,
    BIN_MUL,
    BIN_DIV,
    BIN_MIN,
    BIN_MAX,
    BIN_PRELU,
    BIN_FMOD,   /* Mod, fmod = 1 */
    BIN_FLOORED /* Mod, fmod = 0 (integers only) */
} binary_op;
typedef enum compare_op { CMP_EQ, CMP_LT, CMP_GT, CMP_GE, CMP_LE } compare_op;

/* pick_OPN(dtype): the row kernel of OPN for dtype, NULL when there is none. */
#define DEFINE_PICKER(OPN, BOOL_ROW)                                                               \
    static row_fn pick_##OPN(graft_dtype dt) {                                                     \
        switch (dt) {                                                                              \
            NUMERIC_CASES(OPN)                                                                     \
        case GRAFT_DTYPE_BOOL:                                                                     \
            return BOOL_ROW;                                                                       \
        default:                                                                                   \
            return NULL;                                                                           \
        }                                                                                          \
    }

DEFINE_PICKER(add, NULL)
DEFINE_PICKER(sub, NULL)
DEFINE_PICKER(mul, NULL)
DEFINE_PICKER(div, NULL)
DEFINE_PICKER(min, NULL)
DEFINE_PICKER(max, NULL)
DEFINE_PICKER(eq, eq_bool)
DEFINE_PICKER(lt, lt_bool)
DEFINE_PICKER(gt, gt_bool)
DEFINE_PICKER(ge, ge_bool)
DEFINE_PICKER(le, le_bool)
DEFINE_PICKER(prelu, NULL)

/* Mod: fmod's float rows with C's remainder for integers, or the floored integer rows. */
static row_fn pick_mod(graft_dtype dt, bool floored) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return floored ? NULL : fmod_f32;
    case GRAFT_DTYPE_F64:
        return floored ? NULL : fmod_f64;
    case GRAFT_DTYPE_F16:
        return floored ? NULL : fmod_f16;
    case GRAFT_DTYPE_BF16:
        return floored ? NULL : fmod_bf16;
#define MOD_CASE(DT, S)                                                                            \
    case GRAFT_DTYPE_##DT:                                                                         \
        return floored ? pmod_##S : tmod_##S;
        MOD_CASE(I8, i8)
        MOD_CASE(I16, i16)
        MOD_CASE(I32, i32)
        MOD_CASE(I64, i64)
        MOD_CASE(U8, u8)
        MOD_CASE(U16, u16)
        MOD_CASE(U32, u32)
        MOD_CASE(U64, u64)
#undef MOD_CASE
    default:
        return NULL;
    }
}

static row_fn pick_binary(binary_op op, graft_dtype dt) {
    switch (op) {
    case BIN_ADD:
        return pick_add(dt);
    case BIN_SUB:
        return pick_sub(dt);
    case BIN_MUL:
        return pick_mul(dt);
    case BIN_DIV:
        return pick_div(dt);
    case BIN_MIN:
        return pick_min(dt);
    case BIN_MAX:
        return pick_max(dt);
    case BIN_PRELU:
        return pick_prelu(dt);
    case BIN_FMOD:
        return pick_mod(dt, false);
    case BIN_FLOORED:
        return pick_mod(dt, true);
    }
    return NULL;
}

static row_fn pick_compare(compare_op op, graft_dtype dt) {
    switch (op) {
    case CMP_EQ:
        return pick_eq(dt);
    case CMP_LT:
        return pick_lt(dt);
    case CMP_GT:
        return pick_gt(dt);
    case CMP_GE:
        return pick_ge(dt);
    case CMP_LE:
        return pick_le(dt);
    }
    return NULL;
}

/* Inputs of a same-dtype op must agree (inference checks this; the kernel must not trust it). */
static graft_status check_same_dtype(const op_call *c, const tensor *a, const tensor *b) {
    if (a->dtype != b->dtype)
        return op_error(c->node, c->err, GRAFT_E_DTYPE,
                        "inputs have different dtypes (%s and %s); %s needs them equal",
                        graft_dtype_name(a->dtype), graft_dtype_name(b->dtype), c->node->op_type);
    return GRAFT_OK;
}

static graft_status no_kernel(const op_call *c, graft_dtype dt) {
    return op_error(c->node, c->err, GRAFT_E_DTYPE, "no kernel for dtype %s", graft_dtype_name(dt));
}

static graft_status check_no_zero_divisor(const op_call *c, const tensor *b) {
    if (!dtype_is_int(b->dtype)) return GRAFT_OK;
    int64_t n = tensor_numel(b);
    for (int64_t i = 0; i < n; i++)
        if (scalar_load_int(b->data, b->dtype, i) == 0)
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "integer division by zero (divisor element %lld is 0)", (long long)i);
    return GRAFT_OK;
}

static graft_status run_binary(const op_call *c, binary_op op) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "needs two inputs");
    TRY(check_same_dtype(c, c->in[0], c->in[1]));
    row_fn fn = pick_binary(op, c->in[0]->dtype);
    if (!fn || c->out[0]->dtype != c->in[0]->dtype) return no_kernel(c, c->in[0]->dtype);
    if (op == BIN_DIV || op == BIN_FMOD || op == BIN_FLOORED)
        TRY(check_no_zero_divisor(c, c->in[1]));
    return bcast_run(c, c->in, 2, c->out[0], fn, NULL);
}

graft_status ref_Add(const op_call *c) {
    return run_binary(c, BIN_ADD);
}
graft_status ref_Sub(const op_call *c) {
    return run_binary(c, BIN_SUB);
}
graft_status ref_Mul(const op_call *c) {
    return run_binary(c, BIN_MUL);
}
graft_status ref_Div(const op_call *c) {
    return run_binary(c, BIN_DIV);
}
graft_status ref_Mod(const op_call *c) {
    return run_binary(c, attr_i(c->node, "fmod", 0) ? BIN_FMOD : BIN_FLOORED);
}
/* The slope broadcasts to X; inference has checked that the output keeps X's shape. */
graft_status ref_PRelu(const op_call *c) {
    return run_binary(c, BIN_PRELU);
}

static graft_status run_compare(const op_call *c, compare_op op) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "needs two inputs");
    TRY(check_same_dtype(c, c->in[0], c->in[1]));
    row_fn fn = pick_compare(op, c->in[0]->dtype);
    if (!fn || c->out[0]->dtype != GRAFT_DTYPE_BOOL) return no_kernel(c, c->in[0]->dtype);
    return bcast_run(c, c->in, 2, c->out[0], fn, NULL);
}

graft_status ref_Equal(const op_call *c) {
    return run_compare(c, CMP_EQ);
}
graft_status ref_Less(const op_call *c) {
    return run_compare(c, CMP_LT);
}
graft_status ref_Greater(const op_call *c) {
    return run_compare(c, CMP_GT);
}
graft_status ref_GreaterOrEqual(const op_call *c) {
    return run_compare(c, CMP_GE);
}
graft_status ref_LessOrEqual(const op_call *c) {
    return run_compare(c, CMP_LE);
}

/* And, Or, Xor over bool (any non-zero byte is true). */
static graft_status run_logical(const op_call *c, row_fn fn) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "needs two inputs");
    if (c->in[0]->dtype != GRAFT_DTYPE_BOOL || c->in[1]->dtype != GRAFT_DTYPE_BOOL ||
        c->out[0]->dtype != GRAFT_DTYPE_BOOL)
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "%s takes bool tensors, got %s and %s",
                        c->node->op_type, graft_dtype_name(c->in[0]->dtype),
                        graft_dtype_name(c->in[1]->dtype));
    return bcast_run(c, c->in, 2, c->out[0], fn, NULL);
}

graft_status ref_And(const op_call *c) {
    return run_logical(c, and_bool);
}
graft_status ref_Or(const op_call *c) {
    return run_logical(c, or_bool);
}
graft_status ref_Xor(const op_call *c) {
    return run_logical(c, xor_bool);
}

/* Variadic Min / Max: the first pair goes into the output, which then absorbs each further input
 * in place (it has the full broadcast shape, so it reads and writes the same element). */
static graft_status run_variadic(const op_call *c, binary_op op) {
    tensor *y = c->out[0];
    for (int i = 0; i < c->n_in; i++) {
        if (!c->in[i])
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "input %d is missing", i);
        TRY(check_same_dtype(c, c->in[0], c->in[i]));
    }
    row_fn fn = pick_binary(op, c->in[0]->dtype);
    if (!fn || y->dtype != c->in[0]->dtype) return no_kernel(c, c->in[0]->dtype);
    if (c->n_in == 1) {
        const tensor *pair[2] = {c->in[0], c->in[0]};
        return bcast_run(c, pair, 2, y, fn, NULL); /* min(x, x) = x, with shape checks */
    }
    TRY(bcast_run(c, c->in, 2, y, fn, NULL));
    for (int i = 2; i < c->n_in; i++) {
        const tensor *pair[2] = {y, c->in[i]};
        TRY(bcast_run(c, pair, 2, y, fn, NULL));
    }
    return GRAFT_OK;
}

graft_status ref_Min(const op_call *c) {
    return run_variadic(c, BIN_MIN);
}
graft_status ref_Max(const op_call *c) {
    return run_variadic(c, BIN_MAX);
}

/* Pow. Integer powers are exact (wrapping like repeated multiplication); a negative integer
 * exponent gives the truncated real result: 1 for base 1, +-1 for base -1, else 0. */
static int64_t int_pow(int64_t base, int64_t expo, bool expo_unsigned) {
    if (!expo_unsigned && expo < 0) {
        if (base == 1) return 1;
        if (base == -1) return (expo & 1) ? -1 : 1;
        return 0;
    }
    uint64_t result = 1, b = (uint64_t)base, e = (uint64_t)expo;
    while (e) {
        if (e & 1) result *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)result;
}

typedef struct pow_ctx {
    graft_dtype base, expo;
} pow_ctx;

/* Any base and exponent dtypes, one element at a time; the result takes the base's dtype. */
static void pow_generic_row(const void *const *in, const int64_t *s, void *out, int64_t n,
                            const void *ctx) {
    const pow_ctx *pc = ctx;
    bool base_float = dtype_is_float(pc->base), expo_float = dtype_is_float(pc->expo);
    bool expo_unsigned = pc->expo == GRAFT_DTYPE_U8 || pc->expo == GRAFT_DTYPE_U16 ||
                         pc->expo == GRAFT_DTYPE_U32 || pc->expo == GRAFT_DTYPE_U64;
    for (int64_t i = 0; i < n; i++) {
        if (base_float || expo_float) {
            double r = pow(scalar_load_f64(in[0], pc->base, i * s[0]),
                           scalar_load_f64(in[1], pc->expo, i * s[1]));
            if (base_float)
                scalar_store_float(out, pc->base, i, r);
            else
                scalar_store_int(out, pc->base, i, scalar_f64_to_int(r, pc->base));
        } else {
            int64_t r = int_pow(scalar_load_int(in[0], pc->base, i * s[0]),
                                scalar_load_int(in[1], pc->expo, i * s[1]), expo_unsigned);
            scalar_store_int(out, pc->base, i, r);
        }
    }
}

#define POW_F32(x, w, T) powf(x, w)
#define SQUARE(x, w, T) ((void)(w), (x) * (x))
DEFINE_ROW(pow_f32, float, float, float, ID, ID, POW_F32)
DEFINE_ROW(square_f32, float, float, float, ID, ID, SQUARE)

graft_status ref_Pow(const op_call *c) {
    if (c->n_in < 2 || !c->in[0] || !c->in[1])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "needs two inputs");
    const tensor *x = c->in[0], *p = c->in[1];
    if (!dtype_is_float(x->dtype) && !dtype_is_int(x->dtype)) return no_kernel(c, x->dtype);
    if (!dtype_is_float(p->dtype) && !dtype_is_int(p->dtype)) return no_kernel(c, p->dtype);
    if (c->out[0]->dtype != x->dtype) return no_kernel(c, x->dtype);
    if (x->dtype == GRAFT_DTYPE_F32 && p->dtype == GRAFT_DTYPE_F32) {
        /* x^2 (variance in decomposed normalisations) is common and much cheaper than powf. */
        bool square = tensor_numel(p) == 1 && ((const float *)p->data)[0] == 2.0f;
        return bcast_run(c, c->in, 2, c->out[0], square ? square_f32 : pow_f32, NULL);
    }
    pow_ctx ctx = {x->dtype, p->dtype};
    return bcast_run(c, c->in, 2, c->out[0], pow_generic_row, &ctx);
}

/* Where selects whole elements, so one kernel per element size serves every dtype. */
#define DEFINE_WHERE_ROW(NAME, T)                                                                  \
    static void NAME(const void *const *in, const int64_t *s, void *out, int64_t n,                \
                     const void *ctx) {                                                            \
        const uint8_t *cond = in[0];                                                               \
        const T *x = in[1], *w = in[2];                                                            \
        T *y = out;                                                                                \
        (void)ctx;                                                                                 \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1)                                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = cond[i] ? x[i] : w[i];      \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = cond[i * s[0]] ? x[i * s[1]] : w[i * s[2]];     \
    }

DEFINE_WHERE_ROW(where_1, uint8_t)
DEFINE_WHERE_ROW(where_2, uint16_t)
DEFINE_WHERE_ROW(where_4, uint32_t)
DEFINE_WHERE_ROW(where_8, uint64_t)

graft_status ref_Where(const op_call *c) {
    if (c->n_in < 3 || !c->in[0] || !c->in[1] || !c->in[2])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "needs three inputs");
    if (c->in[0]->dtype != GRAFT_DTYPE_BOOL)
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "the condition has dtype %s, not bool",
                        graft_dtype_name(c->in[0]->dtype));
    TRY(check_same_dtype(c, c->in[1], c->in[2]));
    if (c->out[0]->dtype != c->in[1]->dtype) return no_kernel(c, c->in[1]->dtype);
    row_fn fn;
    switch (graft_dtype_size(c->in[1]->dtype)) {
    case 1:
        fn = where_1;
        break;
    case 2:
        fn = where_2;
        break;
    case 4:
        fn = where_4;
        break;
    case 8:
        fn = where_8;
        break;
    default:
        return no_kernel(c, c->in[1]->dtype);
    }
    return bcast_run(c, c->in, 3, c->out[0], fn, NULL);
}

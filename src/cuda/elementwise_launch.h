/* elementwise_launch.h: launchers of the element-wise family's CUDA kernels (elementwise.cu,
 * elementwise_binary.cu) and the mixed-precision conversion helper other families use. */
#ifndef GRAFT_CUDA_ELEMENTWISE_LAUNCH_H
#define GRAFT_CUDA_ELEMENTWISE_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher enqueues on `stream` and returns cudaGetLastError() after its launches, or
 * cudaErrorNotSupported, before launching anything, for a dtype (pair) it has no kernel for:
 * the caller then hands the node to the CPU reference. Float dtypes compute in f32 (f64 in f64)
 * and round once on store. Nothing is launched when there are no elements. */

/* A broadcast of up to three inputs to one output, dims stored INNERMOST FIRST (dims[0] is the
 * contiguous one), output dims of size 1 dropped and adjacent dims merged wherever every input
 * walks them contiguously, as the CPU reference's plan does. */
#define EW_MAX_INPUTS 3
typedef struct ew_plan {
    int ndim; /* 1..GRAFT_MAX_DIMS */
    int64_t numel;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t strides[EW_MAX_INPUTS][GRAFT_MAX_DIMS]; /* elements; 0 along broadcast dims */
} ew_plan;

typedef enum ew_unary_op {
    EW_RELU,
    EW_LEAKY_RELU,
    EW_CLIP,
    EW_SIGMOID,
    EW_TANH,
    EW_ERF,
    EW_GELU,
    EW_GELU_TANH,
    EW_SQRT,
    EW_NEG,
    EW_RECIPROCAL,
    EW_EXP,
    EW_LOG,
    EW_ABS,
    EW_SIGN,
    EW_FLOOR,
    EW_CEIL,
    EW_ROUND,
    EW_HARD_SIGMOID,
    EW_HARD_SWISH,
    EW_SOFTPLUS,
    EW_SOFTSIGN,
    EW_MISH,
    EW_ELU,
    EW_SELU,
    EW_CELU,
    EW_THRESHOLDED_RELU,
    EW_UNARY_COUNT
} ew_unary_op;

typedef struct ew_unary_params {
    double alpha;          /* LeakyRelu, HardSigmoid, Elu, Selu, Celu, ThresholdedRelu */
    double lo, hi;         /* Clip on float dtypes (-inf / +inf when absent) */
    bool has_ilo, has_ihi; /* Clip on integer dtypes: bounds given (else the dtype's limits) */
    int64_t ilo, ihi;      /* their values, as scalar_load_int reads them */
    double beta;           /* HardSigmoid's beta, Selu's gamma */
} ew_unary_params;

/* y = op(x) over n contiguous elements. Floats: F32, F16, BF16, F64 for every op. Integers:
 * Relu, Neg, Abs, Sign, Clip on I8, I16, I32, I64; Abs, Sign, Clip on U8. */
cudaError_t ew_unary(ew_unary_op op, graft_dtype dt, const void *x, void *y, int64_t n,
                     const ew_unary_params *p, cudaStream_t stream);

/* Logical Not over n bool elements (any non-zero byte is true). */
cudaError_t ew_not(const void *x, void *y, int64_t n, cudaStream_t stream);

/* IsNaN (mode 0) or IsInf (mode 1: both infinities, 2: +inf only, 3: -inf only) of n float
 * elements (F32, F16, BF16, F64) into bool. */
cudaError_t ew_float_test(int mode, graft_dtype dt, const void *x, void *y, int64_t n,
                          cudaStream_t stream);

/* ONNX Cast of n elements between F32, F16, BF16, F64, I64, I32, I8, U8 and BOOL (from != to),
 * exactly as the CPU reference: float to integer truncates toward zero (saturating to int64,
 * NaN to 0) and keeps the target's low bits, anything to bool is "not zero", and conversions
 * between floats round to nearest even once. */
cudaError_t ew_cast(graft_dtype from, const void *x, graft_dtype to, void *y, int64_t n,
                    cudaStream_t stream);

typedef enum ew_binary_op {
    EW_ADD,
    EW_SUB,
    EW_MUL,
    EW_DIV, /* floats only: integer division by zero is an error the host cannot see */
    EW_MIN,
    EW_MAX,
    EW_POW, /* floats only here (base and exponent of one dtype); see ew_pow_mixed */
    EW_EQUAL,
    EW_LESS,
    EW_GREATER,
    EW_GREATER_EQUAL,
    EW_LESS_EQUAL,
    EW_AND, /* And, Or, Xor: BOOL only */
    EW_OR,
    EW_XOR,
    EW_PRELU, /* b is the slope, broadcast to a's shape */
    EW_FMOD,  /* Mod with fmod = 1, floats only: integer Mod is left to the CPU like Div */
    EW_BINARY_COUNT
} ew_binary_op;

/* True for the ops whose output is bool. */
static inline bool ew_binary_is_bool(ew_binary_op op) {
    return op == EW_EQUAL || op == EW_LESS || op == EW_GREATER || op == EW_GREATER_EQUAL ||
           op == EW_LESS_EQUAL || op == EW_AND || op == EW_OR || op == EW_XOR;
}

/* y = a op b over a two-input plan; a and b have dtype dt. Arithmetic, Min, Max and PRelu: F32,
 * F16, BF16, F64, I32, I64 (integer arithmetic wraps; no integer Div or Mod), y has dtype dt.
 * Comparisons: those and I8, U8, BOOL, y is bool. y may be a itself (in-place, as variadic
 * Min/Max do). */
cudaError_t ew_binary(ew_binary_op op, graft_dtype dt, const void *a, const void *b, void *y,
                      const ew_plan *plan, cudaStream_t stream);

/* Pow of any base and exponent dtypes among F32, F16, BF16, F64, I32, I64 (the result has the
 * base's dtype): floats through f64 pow, integers exactly (wrapping), a negative integer
 * exponent truncating the real result, as the CPU reference. */
cudaError_t ew_pow_mixed(graft_dtype base_dt, const void *base, graft_dtype expo_dt,
                         const void *expo, void *y, const ew_plan *plan, cudaStream_t stream);

/* y = cond ? x : w over a three-input plan (cond bool first); x, w, y have elements of
 * elem_size bytes (1, 2, 4 or 8). */
cudaError_t ew_where(const void *cond, const void *x, const void *w, void *y, size_t elem_size,
                     const ew_plan *plan, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

/* The plain-C helper other families call (defined in cuda_elementwise.c; C callers only). */
#ifndef __CUDACC__
#include "cuda_internal.h"
/* dst = src converted between F32, F16 and BF16 (round to nearest even), n elements, both device
 * buffers, enqueued on be->stream; a copy when from == to. GRAFT_E_DTYPE for other dtypes. */
graft_status cuda_cast_buffer(cuda_backend *be, const void *src, graft_dtype from, void *dst,
                              graft_dtype to, int64_t n, graft_err *e);
#endif

#endif

// elementwise.cu: CUDA kernels of the one-input element-wise ops (activations, math functions,
// rounding, Sign, Clip, Not, IsNaN, IsInf) and of Cast, with their launchers.
#include <math.h>
#include <stdint.h>

#include <limits>

#include "cuda/elementwise_common.cuh"

namespace ew {
namespace {

// ---- float unary ops -------------------------------------------------------------------------

// The float and double forms of each math function, picked by overload.
__device__ __forceinline__ float m_exp(float v) {
    return expf(v);
}
__device__ __forceinline__ double m_exp(double v) {
    return exp(v);
}
__device__ __forceinline__ float m_log(float v) {
    return logf(v);
}
__device__ __forceinline__ double m_log(double v) {
    return log(v);
}
__device__ __forceinline__ float m_tanh(float v) {
    return tanhf(v);
}
__device__ __forceinline__ double m_tanh(double v) {
    return tanh(v);
}
__device__ __forceinline__ float m_erf(float v) {
    return erff(v);
}
__device__ __forceinline__ double m_erf(double v) {
    return erf(v);
}
__device__ __forceinline__ float m_sqrt(float v) {
    return sqrtf(v);
}
__device__ __forceinline__ double m_sqrt(double v) {
    return sqrt(v);
}
__device__ __forceinline__ float m_abs(float v) {
    return fabsf(v);
}
__device__ __forceinline__ double m_abs(double v) {
    return fabs(v);
}
__device__ __forceinline__ float m_expm1(float v) {
    return expm1f(v);
}
__device__ __forceinline__ double m_expm1(double v) {
    return expm1(v);
}
__device__ __forceinline__ float m_log1p(float v) {
    return log1pf(v);
}
__device__ __forceinline__ double m_log1p(double v) {
    return log1p(v);
}
__device__ __forceinline__ float m_floor(float v) {
    return floorf(v);
}
__device__ __forceinline__ double m_floor(double v) {
    return floor(v);
}
__device__ __forceinline__ float m_ceil(float v) {
    return ceilf(v);
}
__device__ __forceinline__ double m_ceil(double v) {
    return ceil(v);
}
__device__ __forceinline__ float m_rint(float v) {
    return rintf(v);
}
__device__ __forceinline__ double m_rint(double v) {
    return rint(v);
}
// Products and sums kept apart (no fused multiply-add) where the CPU reference rounds each.
__device__ __forceinline__ float m_mul(float a, float b) {
    return __fmul_rn(a, b);
}
__device__ __forceinline__ double m_mul(double a, double b) {
    return __dmul_rn(a, b);
}
__device__ __forceinline__ float m_add(float a, float b) {
    return __fadd_rn(a, b);
}
__device__ __forceinline__ double m_add(double a, double b) {
    return __dadd_rn(a, b);
}

// One float op on element type T, computed in compute_t<T> with the CPU reference's formulas
// (same operation order), rounded once on store. NaN passes through Relu, LeakyRelu and Clip.
// min(1, max(0, t)) with NaN passing through, as the CPU reference's CLAMP01.
template <class C> __device__ __forceinline__ C clamp01(C t) {
    return t < (C)0 ? (C)0 : t > (C)1 ? (C)1 : t;
}

// log(1 + exp(v)) without overflowing exp, as the CPU reference computes it.
template <class C> __device__ __forceinline__ C softplus(C v) {
    return v > (C)0 ? m_add(v, m_log1p(m_exp(-v))) : m_log1p(m_exp(v));
}

template <int OP, class T> struct unary_float {
    using C = compute_t<T>;
    C alpha, lo, hi, beta;

    __device__ __forceinline__ C eval(C v) const {
        const C zero = 0, one = 1, half = (C)0.5;
        if constexpr (OP == EW_RELU) return v < zero ? zero : v;
        if constexpr (OP == EW_LEAKY_RELU) return v < zero ? alpha * v : v;
        if constexpr (OP == EW_CLIP) {
            C t = v < lo ? lo : v; // max with lo first, then min with hi: lo > hi gives hi
            return t > hi ? hi : t;
        }
        if constexpr (OP == EW_SIGMOID) return one / (one + m_exp(-v));
        if constexpr (OP == EW_TANH) return m_tanh(v);
        if constexpr (OP == EW_ERF) return m_erf(v);
        if constexpr (OP == EW_GELU)
            return m_mul(m_mul(half, v), one + m_erf(m_mul(v, (C)0.7071067811865476)));
        if constexpr (OP == EW_GELU_TANH) {
            C cube = m_mul(m_mul(m_mul((C)0.044715, v), v), v);
            C inner = m_mul((C)0.7978845608028654, m_add(v, cube));
            return m_mul(m_mul(half, v), one + m_tanh(inner));
        }
        if constexpr (OP == EW_SQRT) return m_sqrt(v);
        if constexpr (OP == EW_NEG) return -v;
        if constexpr (OP == EW_RECIPROCAL) return one / v;
        if constexpr (OP == EW_EXP) return m_exp(v);
        if constexpr (OP == EW_LOG) return m_log(v);
        if constexpr (OP == EW_ABS) return m_abs(v);
        return eval_more(v);
    }
    // The activations and rounding ops exporters add (the CPU reference's unary_*_more).
    __device__ __forceinline__ C eval_more(C v) const {
        const C zero = 0, one = 1;
        if constexpr (OP == EW_SIGN) return v > zero ? one : v < zero ? -one : v == zero ? zero : v;
        if constexpr (OP == EW_FLOOR) return m_floor(v);
        if constexpr (OP == EW_CEIL) return m_ceil(v);
        if constexpr (OP == EW_ROUND) return m_rint(v);
        if constexpr (OP == EW_HARD_SIGMOID) return clamp01(m_add(m_mul(alpha, v), beta));
        if constexpr (OP == EW_HARD_SWISH)
            return m_mul(v, clamp01(m_add(m_mul((C)(1.0 / 6.0), v), (C)0.5)));
        if constexpr (OP == EW_SOFTPLUS) return softplus(v);
        if constexpr (OP == EW_SOFTSIGN) return v / m_add(one, m_abs(v));
        if constexpr (OP == EW_MISH) return m_mul(v, m_tanh(softplus(v)));
        if constexpr (OP == EW_ELU) return v < zero ? m_mul(alpha, m_expm1(v)) : v;
        if constexpr (OP == EW_SELU)
            return v <= zero ? m_mul(m_mul(beta, alpha), m_expm1(v)) : m_mul(beta, v);
        if constexpr (OP == EW_CELU) return v > zero ? v : m_mul(alpha, m_expm1(v / alpha));
        if constexpr (OP == EW_THRESHOLDED_RELU) return v > alpha ? v : zero;
        return v;
    }
    __device__ __forceinline__ T operator()(T x) const { return store<T>(eval(load(x))); }
};

template <int OP, class T>
cudaError_t launch_unary_float(const void *x, void *y, int64_t n, const ew_unary_params &p,
                               cudaStream_t s) {
    using C = compute_t<T>;
    unary_float<OP, T> f{(C)p.alpha, (C)p.lo, (C)p.hi, (C)p.beta};
    return launch_flat<unary_float<OP, T>, T, T>(f, x, y, n, s);
}

template <class T>
cudaError_t unary_float_op(ew_unary_op op, const void *x, void *y, int64_t n,
                           const ew_unary_params &p, cudaStream_t s) {
    switch (op) {
#define EW_CASE(OP)                                                                                \
    case OP:                                                                                       \
        return launch_unary_float<OP, T>(x, y, n, p, s);
        EW_CASE(EW_RELU)
        EW_CASE(EW_LEAKY_RELU)
        EW_CASE(EW_CLIP)
        EW_CASE(EW_SIGMOID)
        EW_CASE(EW_TANH)
        EW_CASE(EW_ERF)
        EW_CASE(EW_GELU)
        EW_CASE(EW_GELU_TANH)
        EW_CASE(EW_SQRT)
        EW_CASE(EW_NEG)
        EW_CASE(EW_RECIPROCAL)
        EW_CASE(EW_EXP)
        EW_CASE(EW_LOG)
        EW_CASE(EW_ABS)
        EW_CASE(EW_SIGN)
        EW_CASE(EW_FLOOR)
        EW_CASE(EW_CEIL)
        EW_CASE(EW_ROUND)
        EW_CASE(EW_HARD_SIGMOID)
        EW_CASE(EW_HARD_SWISH)
        EW_CASE(EW_SOFTPLUS)
        EW_CASE(EW_SOFTSIGN)
        EW_CASE(EW_MISH)
        EW_CASE(EW_ELU)
        EW_CASE(EW_SELU)
        EW_CASE(EW_CELU)
        EW_CASE(EW_THRESHOLDED_RELU)
#undef EW_CASE
    default:
        return cudaErrorNotSupported;
    }
}

// ---- integer unary ops -----------------------------------------------------------------------

// Relu, Neg, Abs, Sign, Clip on integers. Negation goes through uint64 so the most negative value
// wraps, as the CPU reference does.
template <int OP, class T> struct unary_int {
    T lo, hi;
    __device__ __forceinline__ T operator()(T v) const {
        if constexpr (OP == EW_RELU) return v < (T)0 ? (T)0 : v;
        if constexpr (OP == EW_NEG) return (T)(0 - (uint64_t)(int64_t)v);
        if constexpr (OP == EW_ABS) {
            if constexpr (std::is_signed<T>::value)
                return v < (T)0 ? (T)(0 - (uint64_t)(int64_t)v) : v;
            return v;
        }
        if constexpr (OP == EW_SIGN) {
            if constexpr (std::is_signed<T>::value) return (T)((v > (T)0) - (v < (T)0));
            return (T)(v != (T)0);
        }
        if constexpr (OP == EW_CLIP) {
            T t = v < lo ? lo : v;
            return t > hi ? hi : t;
        }
        return v;
    }
};

template <int OP, class T>
cudaError_t launch_unary_int(const void *x, void *y, int64_t n, const ew_unary_params &p,
                             cudaStream_t s) {
    unary_int<OP, T> f{p.has_ilo ? (T)p.ilo : std::numeric_limits<T>::lowest(),
                       p.has_ihi ? (T)p.ihi : std::numeric_limits<T>::max()};
    return launch_flat<unary_int<OP, T>, T, T>(f, x, y, n, s);
}

template <class T>
cudaError_t unary_int_op(ew_unary_op op, const void *x, void *y, int64_t n,
                         const ew_unary_params &p, cudaStream_t s) {
    if constexpr (std::is_signed<T>::value) {
        if (op == EW_RELU) return launch_unary_int<EW_RELU, T>(x, y, n, p, s);
        if (op == EW_NEG) return launch_unary_int<EW_NEG, T>(x, y, n, p, s);
    }
    if (op == EW_ABS) return launch_unary_int<EW_ABS, T>(x, y, n, p, s);
    if (op == EW_SIGN) return launch_unary_int<EW_SIGN, T>(x, y, n, p, s);
    if (op == EW_CLIP) return launch_unary_int<EW_CLIP, T>(x, y, n, p, s);
    return cudaErrorNotSupported; // other ops make no sense on integers: the CPU path decides
}

struct not_op {
    __device__ __forceinline__ uint8_t operator()(uint8_t v) const { return v == 0; }
};

// IsNaN (MODE 0), IsInf (1: either infinity, 2: +inf, 3: -inf).
template <int MODE, class T> struct float_test_op {
    __device__ __forceinline__ uint8_t operator()(T x) const {
        auto v = load(x);
        if constexpr (MODE == 0) return v != v;
        if constexpr (MODE == 1) return isinf(v) ? 1 : 0;
        if constexpr (MODE == 2) return v == (decltype(v))INFINITY;
        return v == -(decltype(v))INFINITY;
    }
};

template <class T>
cudaError_t float_test(int mode, const void *x, void *y, int64_t n, cudaStream_t s) {
    switch (mode) {
    case 0:
        return launch_flat<float_test_op<0, T>, T, uint8_t>({}, x, y, n, s);
    case 1:
        return launch_flat<float_test_op<1, T>, T, uint8_t>({}, x, y, n, s);
    case 2:
        return launch_flat<float_test_op<2, T>, T, uint8_t>({}, x, y, n, s);
    case 3:
        return launch_flat<float_test_op<3, T>, T, uint8_t>({}, x, y, n, s);
    default:
        return cudaErrorNotSupported;
    }
}

// ---- Cast ------------------------------------------------------------------------------------

template <int DT> struct dtype_c;
template <> struct dtype_c<GRAFT_DTYPE_F32> { using type = float; };
template <> struct dtype_c<GRAFT_DTYPE_F16> { using type = __half; };
template <> struct dtype_c<GRAFT_DTYPE_BF16> { using type = __nv_bfloat16; };
template <> struct dtype_c<GRAFT_DTYPE_F64> { using type = double; };
template <> struct dtype_c<GRAFT_DTYPE_I64> { using type = int64_t; };
template <> struct dtype_c<GRAFT_DTYPE_I32> { using type = int32_t; };
template <> struct dtype_c<GRAFT_DTYPE_I8> { using type = int8_t; };
template <> struct dtype_c<GRAFT_DTYPE_U8> { using type = uint8_t; };
template <> struct dtype_c<GRAFT_DTYPE_BOOL> { using type = uint8_t; };

// One element FROM -> TO with the reference's rules (elementwise_cast.c, core/scalar.h).
template <int FROM, int TO> struct cast_op {
    using S = typename dtype_c<FROM>::type;
    using D = typename dtype_c<TO>::type;

    __device__ __forceinline__ D from_int(int64_t v) const {
        if constexpr (TO == GRAFT_DTYPE_BOOL)
            return (D)(v != 0);
        else if constexpr (!is_floating<D>)
            return (D)(uint64_t)v; // keep the low bits
        else if constexpr (TO == GRAFT_DTYPE_F32)
            return (float)v;
        else
            return store<D>((double)v); // f64, or rounded once from double to f16 / bf16
    }
    __device__ __forceinline__ D operator()(S x) const {
        if constexpr (is_floating<S>) {
            if constexpr (TO == GRAFT_DTYPE_BOOL) {
                return (D)(load(x) != 0); // NaN is true
            } else if constexpr (!is_floating<D>) {
                return (D)(uint64_t)f64_to_i64((double)load(x));
            } else if constexpr (FROM == GRAFT_DTYPE_F64 || TO == GRAFT_DTYPE_F64) {
                return store<D>((double)load(x));
            } else {
                return store<D>((float)load(x)); // between f32 / f16 / bf16: exact in f32
            }
        } else {
            int64_t v = FROM == GRAFT_DTYPE_BOOL ? (int64_t)(x != 0) : (int64_t)x;
            return from_int(v);
        }
    }
};

template <int FROM>
cudaError_t cast_from(graft_dtype to, const void *x, void *y, int64_t n, cudaStream_t s) {
    using S = typename dtype_c<FROM>::type;
    switch (to) {
#define EW_CASE(DT)                                                                                \
    case DT:                                                                                       \
        return launch_flat<cast_op<FROM, DT>, S, typename dtype_c<DT>::type>(cast_op<FROM, DT>{},  \
                                                                             x, y, n, s);
        EW_CASE(GRAFT_DTYPE_F32)
        EW_CASE(GRAFT_DTYPE_F16)
        EW_CASE(GRAFT_DTYPE_BF16)
        EW_CASE(GRAFT_DTYPE_F64)
        EW_CASE(GRAFT_DTYPE_I64)
        EW_CASE(GRAFT_DTYPE_I32)
        EW_CASE(GRAFT_DTYPE_I8)
        EW_CASE(GRAFT_DTYPE_U8)
        EW_CASE(GRAFT_DTYPE_BOOL)
#undef EW_CASE
    default:
        return cudaErrorNotSupported;
    }
}

} // namespace
} // namespace ew

using namespace ew;

extern "C" cudaError_t ew_unary(ew_unary_op op, graft_dtype dt, const void *x, void *y, int64_t n,
                                const ew_unary_params *p, cudaStream_t stream) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return unary_float_op<float>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_F16:
        return unary_float_op<__half>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_BF16:
        return unary_float_op<__nv_bfloat16>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_F64:
        return unary_float_op<double>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_I8:
        return unary_int_op<int8_t>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_I16:
        return unary_int_op<int16_t>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_I32:
        return unary_int_op<int32_t>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_I64:
        return unary_int_op<int64_t>(op, x, y, n, *p, stream);
    case GRAFT_DTYPE_U8:
        return unary_int_op<uint8_t>(op, x, y, n, *p, stream);
    default:
        return cudaErrorNotSupported;
    }
}

extern "C" cudaError_t ew_not(const void *x, void *y, int64_t n, cudaStream_t stream) {
    return launch_flat<not_op, uint8_t, uint8_t>(not_op{}, x, y, n, stream);
}

extern "C" cudaError_t ew_float_test(int mode, graft_dtype dt, const void *x, void *y, int64_t n,
                                     cudaStream_t stream) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return float_test<float>(mode, x, y, n, stream);
    case GRAFT_DTYPE_F16:
        return float_test<__half>(mode, x, y, n, stream);
    case GRAFT_DTYPE_BF16:
        return float_test<__nv_bfloat16>(mode, x, y, n, stream);
    case GRAFT_DTYPE_F64:
        return float_test<double>(mode, x, y, n, stream);
    default:
        return cudaErrorNotSupported;
    }
}

extern "C" cudaError_t ew_cast(graft_dtype from, const void *x, graft_dtype to, void *y, int64_t n,
                               cudaStream_t stream) {
    switch (from) {
#define EW_CASE(DT)                                                                                \
    case DT:                                                                                       \
        return cast_from<DT>(to, x, y, n, stream);
        EW_CASE(GRAFT_DTYPE_F32)
        EW_CASE(GRAFT_DTYPE_F16)
        EW_CASE(GRAFT_DTYPE_BF16)
        EW_CASE(GRAFT_DTYPE_F64)
        EW_CASE(GRAFT_DTYPE_I64)
        EW_CASE(GRAFT_DTYPE_I32)
        EW_CASE(GRAFT_DTYPE_I8)
        EW_CASE(GRAFT_DTYPE_U8)
        EW_CASE(GRAFT_DTYPE_BOOL)
#undef EW_CASE
    default:
        return cudaErrorNotSupported;
    }
}

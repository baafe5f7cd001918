// elementwise_binary.cu: CUDA kernels of the broadcasting element-wise ops (Add, Sub, Mul, Div,
// Min, Max, Pow, PRelu, Mod, the comparisons, And, Or, Xor, Where) and their launchers.
#include <math.h>
#include <stdint.h>

#include "cuda/elementwise_common.cuh"

namespace ew {
namespace {

// ---- arithmetic, Min, Max, Pow ---------------------------------------------------------------

// a op b on element type T: floats computed in compute_t<T> and rounded once, integers wrapping
// through uint64 as the CPU reference does. Pow on f16 / bf16 / f64 goes through f64 pow as the
// reference's generic path does; on f32 it is powf, with the exact x * x for an exponent of 2.
template <int OP, class T> struct arith {
    __device__ __forceinline__ T operator()(T a, T b) const {
        if constexpr (is_floating<T>) {
            auto x = load(a), w = load(b);
            if constexpr (OP == EW_ADD) return store<T>(x + w);
            if constexpr (OP == EW_SUB) return store<T>(x - w);
            if constexpr (OP == EW_MUL) return store<T>(x * w);
            if constexpr (OP == EW_DIV) return store<T>(x / w);
            // Min / Max propagate NaN from either side, like numpy's minimum / maximum.
            if constexpr (OP == EW_MIN) return store<T>((x < w || x != x) ? x : w);
            if constexpr (OP == EW_MAX) return store<T>((x > w || x != x) ? x : w);
            if constexpr (OP == EW_PRELU) return store<T>(x < 0 ? x * w : x);
            // C's remainder, exact in f32 for the 16-bit types (rounded once on store).
            if constexpr (OP == EW_FMOD) return store<T>(fmod(x, w));
            if constexpr (OP == EW_POW) {
                if constexpr (std::is_same<T, float>::value) {
                    return w == 2.0f ? x * x : powf(x, w);
                } else {
                    double dx = (double)x, dw = (double)w;
                    return store<T>(dw == 2.0 ? dx * dx : pow(dx, dw));
                }
            }
            return a;
        } else {
            const uint64_t x = (uint64_t)(int64_t)a, w = (uint64_t)(int64_t)b;
            if constexpr (OP == EW_ADD) return (T)(x + w);
            if constexpr (OP == EW_SUB) return (T)(x - w);
            if constexpr (OP == EW_MUL) return (T)(x * w);
            if constexpr (OP == EW_MIN) return a < b ? a : b;
            if constexpr (OP == EW_MAX) return a > b ? a : b;
            if constexpr (OP == EW_PRELU) return a < (T)0 ? (T)(x * w) : a;
            return a;
        }
    }
};

// Comparisons produce bool bytes; bool inputs compare as 0 / 1 whatever non-zero byte they hold.
template <int OP, class T, bool IS_BOOL = false> struct compare {
    __device__ __forceinline__ uint8_t operator()(T a, T b) const {
        auto x = load(a), w = load(b);
        if constexpr (IS_BOOL) {
            x = x != 0;
            w = w != 0;
        }
        if constexpr (OP == EW_EQUAL) return x == w;
        if constexpr (OP == EW_LESS) return x < w;
        if constexpr (OP == EW_GREATER_EQUAL) return x >= w;
        if constexpr (OP == EW_LESS_EQUAL) return x <= w;
        return x > w;
    }
};

// And, Or, Xor on bool bytes (any non-zero byte is true).
template <int OP> struct logical {
    __device__ __forceinline__ uint8_t operator()(uint8_t a, uint8_t b) const {
        const uint8_t x = a != 0, w = b != 0;
        if constexpr (OP == EW_AND) return x & w;
        if constexpr (OP == EW_OR) return x | w;
        return x ^ w;
    }
};

template <class F, class T, class O>
cudaError_t run2(F f, const void *a, const void *b, void *y, const ew_plan &p, cudaStream_t s) {
    return launch_bcast<2, F, T, T, T, O>(f, p, a, b, nullptr, y, s);
}

template <class T>
cudaError_t arith_op(ew_binary_op op, const void *a, const void *b, void *y, const ew_plan &p,
                     cudaStream_t s) {
    switch (op) {
    case EW_ADD:
        return run2<arith<EW_ADD, T>, T, T>({}, a, b, y, p, s);
    case EW_SUB:
        return run2<arith<EW_SUB, T>, T, T>({}, a, b, y, p, s);
    case EW_MUL:
        return run2<arith<EW_MUL, T>, T, T>({}, a, b, y, p, s);
    case EW_MIN:
        return run2<arith<EW_MIN, T>, T, T>({}, a, b, y, p, s);
    case EW_MAX:
        return run2<arith<EW_MAX, T>, T, T>({}, a, b, y, p, s);
    case EW_PRELU:
        return run2<arith<EW_PRELU, T>, T, T>({}, a, b, y, p, s);
    default:
        break;
    }
    if constexpr (is_floating<T>) {
        // Integer Div is left to the CPU: a zero divisor is an error there, and only the host
        // can report it.
        if (op == EW_DIV) return run2<arith<EW_DIV, T>, T, T>({}, a, b, y, p, s);
        if (op == EW_POW) return run2<arith<EW_POW, T>, T, T>({}, a, b, y, p, s);
        if (op == EW_FMOD) return run2<arith<EW_FMOD, T>, T, T>({}, a, b, y, p, s);
    }
    return cudaErrorNotSupported;
}

template <class T, bool IS_BOOL = false>
cudaError_t compare_op(ew_binary_op op, const void *a, const void *b, void *y, const ew_plan &p,
                       cudaStream_t s) {
    switch (op) {
    case EW_EQUAL:
        return run2<compare<EW_EQUAL, T, IS_BOOL>, T, uint8_t>({}, a, b, y, p, s);
    case EW_LESS:
        return run2<compare<EW_LESS, T, IS_BOOL>, T, uint8_t>({}, a, b, y, p, s);
    case EW_GREATER:
        return run2<compare<EW_GREATER, T, IS_BOOL>, T, uint8_t>({}, a, b, y, p, s);
    case EW_GREATER_EQUAL:
        return run2<compare<EW_GREATER_EQUAL, T, IS_BOOL>, T, uint8_t>({}, a, b, y, p, s);
    case EW_LESS_EQUAL:
        return run2<compare<EW_LESS_EQUAL, T, IS_BOOL>, T, uint8_t>({}, a, b, y, p, s);
    default:
        return cudaErrorNotSupported;
    }
}

// ---- Pow with mixed dtypes -------------------------------------------------------------------

__device__ __forceinline__ double load_f64(const void *p, graft_dtype dt, int64_t i) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return ((const float *)p)[i];
    case GRAFT_DTYPE_F16:
        return __half2float(((const __half *)p)[i]);
    case GRAFT_DTYPE_BF16:
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case GRAFT_DTYPE_F64:
        return ((const double *)p)[i];
    case GRAFT_DTYPE_I32:
        return ((const int32_t *)p)[i];
    default:
        return (double)((const int64_t *)p)[i];
    }
}

__device__ __forceinline__ int64_t load_i64(const void *p, graft_dtype dt, int64_t i) {
    return dt == GRAFT_DTYPE_I32 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

// Exact integer power, wrapping like repeated multiplication; a negative exponent gives the
// truncated real result: 1 for base 1, +-1 for base -1, else 0.
__device__ __forceinline__ int64_t int_pow(int64_t base, int64_t expo) {
    if (expo < 0) {
        if (base == 1) return 1;
        if (base == -1) return (expo & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)base, e = (uint64_t)expo;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

__device__ __forceinline__ bool dt_float(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F16 || dt == GRAFT_DTYPE_BF16 ||
           dt == GRAFT_DTYPE_F64;
}

// One element of Pow, dtypes read at run time (a rare op in this form: no templates per pair).
__device__ void pow_element(graft_dtype bt, const void *base, int64_t ib, graft_dtype et,
                            const void *expo, int64_t ie, void *y, int64_t i) {
    if (dt_float(bt) || dt_float(et)) {
        double r = pow(load_f64(base, bt, ib), load_f64(expo, et, ie));
        switch (bt) {
        case GRAFT_DTYPE_F32:
            ((float *)y)[i] = (float)r;
            return;
        case GRAFT_DTYPE_F16:
            ((__half *)y)[i] = f64_to_f16(r);
            return;
        case GRAFT_DTYPE_BF16:
            ((__nv_bfloat16 *)y)[i] = f64_to_bf16(r);
            return;
        case GRAFT_DTYPE_F64:
            ((double *)y)[i] = r;
            return;
        case GRAFT_DTYPE_I32:
            ((int32_t *)y)[i] = (int32_t)(uint64_t)f64_to_i64(r);
            return;
        default:
            ((int64_t *)y)[i] = f64_to_i64(r);
            return;
        }
    }
    int64_t r = int_pow(load_i64(base, bt, ib), load_i64(expo, et, ie));
    if (bt == GRAFT_DTYPE_I32)
        ((int32_t *)y)[i] = (int32_t)(uint64_t)r;
    else
        ((int64_t *)y)[i] = r;
}

template <class Idx>
__global__ void pow_mixed_kernel(ew_plan p, graft_dtype bt, const void *base, graft_dtype et,
                                 const void *expo, void *y) {
    Idx n = (Idx)p.numel, step = (Idx)gridDim.x * (Idx)blockDim.x;
    for (Idx i = (Idx)blockIdx.x * (Idx)blockDim.x + (Idx)threadIdx.x; i < n; i += step) {
        Idx off[2];
        offsets<2, Idx>(p, i, off);
        pow_element(bt, base, (int64_t)off[0], et, expo, (int64_t)off[1], y, (int64_t)i);
    }
}

bool pow_dtype_ok(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F32 || dt == GRAFT_DTYPE_F16 || dt == GRAFT_DTYPE_BF16 ||
           dt == GRAFT_DTYPE_F64 || dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64;
}

// ---- Where -----------------------------------------------------------------------------------

// Where moves whole elements, so one kernel per element size serves every dtype.
template <class T> struct where_op {
    __device__ __forceinline__ T operator()(uint8_t c, T x, T w) const { return c ? x : w; }
};

template <class T>
cudaError_t where_sized(const void *cond, const void *x, const void *w, void *y, const ew_plan &p,
                        cudaStream_t s) {
    return launch_bcast<3, where_op<T>, uint8_t, T, T, T>({}, p, cond, x, w, y, s);
}

} // namespace
} // namespace ew

using namespace ew;

extern "C" cudaError_t ew_binary(ew_binary_op op, graft_dtype dt, const void *a, const void *b,
                                 void *y, const ew_plan *plan, cudaStream_t stream) {
    const ew_plan &p = *plan;
    if (op == EW_AND || op == EW_OR || op == EW_XOR) {
        if (dt != GRAFT_DTYPE_BOOL) return cudaErrorNotSupported;
        if (op == EW_AND) return run2<logical<EW_AND>, uint8_t, uint8_t>({}, a, b, y, p, stream);
        if (op == EW_OR) return run2<logical<EW_OR>, uint8_t, uint8_t>({}, a, b, y, p, stream);
        return run2<logical<EW_XOR>, uint8_t, uint8_t>({}, a, b, y, p, stream);
    }
    if (ew_binary_is_bool(op)) {
        switch (dt) {
        case GRAFT_DTYPE_F32:
            return compare_op<float>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_F16:
            return compare_op<__half>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_BF16:
            return compare_op<__nv_bfloat16>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_F64:
            return compare_op<double>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_I32:
            return compare_op<int32_t>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_I64:
            return compare_op<int64_t>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_I8:
            return compare_op<int8_t>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_U8:
            return compare_op<uint8_t>(op, a, b, y, p, stream);
        case GRAFT_DTYPE_BOOL:
            return compare_op<uint8_t, true>(op, a, b, y, p, stream);
        default:
            return cudaErrorNotSupported;
        }
    }
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return arith_op<float>(op, a, b, y, p, stream);
    case GRAFT_DTYPE_F16:
        return arith_op<__half>(op, a, b, y, p, stream);
    case GRAFT_DTYPE_BF16:
        return arith_op<__nv_bfloat16>(op, a, b, y, p, stream);
    case GRAFT_DTYPE_F64:
        return arith_op<double>(op, a, b, y, p, stream);
    case GRAFT_DTYPE_I32:
        return arith_op<int32_t>(op, a, b, y, p, stream);
    case GRAFT_DTYPE_I64:
        return arith_op<int64_t>(op, a, b, y, p, stream);
    default:
        return cudaErrorNotSupported;
    }
}

extern "C" cudaError_t ew_pow_mixed(graft_dtype base_dt, const void *base, graft_dtype expo_dt,
                                    const void *expo, void *y, const ew_plan *plan,
                                    cudaStream_t stream) {
    if (!pow_dtype_ok(base_dt) || !pow_dtype_ok(expo_dt)) return cudaErrorNotSupported;
    if (plan->numel <= 0) return cudaSuccess;
    unsigned grid = grid_for(plan->numel);
    if (plan->numel < ((int64_t)1 << 31))
        pow_mixed_kernel<uint32_t>
            <<<grid, kThreads, 0, stream>>>(*plan, base_dt, base, expo_dt, expo, y);
    else
        pow_mixed_kernel<int64_t>
            <<<grid, kThreads, 0, stream>>>(*plan, base_dt, base, expo_dt, expo, y);
    return cudaGetLastError();
}

extern "C" cudaError_t ew_where(const void *cond, const void *x, const void *w, void *y,
                                size_t elem_size, const ew_plan *plan, cudaStream_t stream) {
    switch (elem_size) {
    case 1:
        return where_sized<uint8_t>(cond, x, w, y, *plan, stream);
    case 2:
        return where_sized<uint16_t>(cond, x, w, y, *plan, stream);
    case 4:
        return where_sized<uint32_t>(cond, x, w, y, *plan, stream);
    case 8:
        return where_sized<uint64_t>(cond, x, w, y, *plan, stream);
    default:
        return cudaErrorNotSupported;
    }
}

/* reduce_ops.cu: the Reduce* kinds other than the sums' fast paths (Max, Min, Prod, L1, L2,
 * SumSquare, LogSum, LogSumExp, and Sum/Mean of any layout the split allows) and TopK: a warp
 * per contiguous row, a thread per column when the reduced axis is not innermost. */
#include <type_traits>

#include "reduce_common.cuh"
#include "reduce_launch.h"

namespace {

constexpr int kThreads = 256;

/* Accumulators: f64 for the float dtypes, 64-bit integers for the integer ones. */
template <typename T> struct acc_of { using type = double; };
template <> struct acc_of<int32_t> { using type = long long; };
template <> struct acc_of<int64_t> { using type = long long; };

template <typename T> __device__ __forceinline__ typename acc_of<T>::type load_acc(T v) {
    if constexpr (std::is_integral<T>::value)
        return (long long)v;
    else
        return (double)to_float(v);
}

template <typename T> __device__ __forceinline__ T store_acc(typename acc_of<T>::type a) {
    if constexpr (std::is_integral<T>::value)
        return (T)a;
    else
        return from_float<T>((float)a);
}

template <typename A> __device__ __forceinline__ bool not_finite(A v) {
    if constexpr (std::is_integral<A>::value)
        return false;
    else
        return isinf(v) || isnan(v);
}

template <typename A> __device__ __forceinline__ bool is_nan(A v) {
    if constexpr (std::is_integral<A>::value)
        return false;
    else
        return isnan(v);
}

template <typename A> __device__ __forceinline__ A identity(int kind) {
    if (kind == CUDA_REDUCE_PROD) return A(1);
    if constexpr (std::is_integral<A>::value) {
        if (kind == CUDA_REDUCE_MAX) return A(INT64_MIN);
        if (kind == CUDA_REDUCE_MIN) return A(INT64_MAX);
    } else {
        if (kind == CUDA_REDUCE_MAX) return A(-INFINITY);
        if (kind == CUDA_REDUCE_MIN) return A(INFINITY);
    }
    return A(0);
}

/* Integers add and multiply as unsigned (wrapping, as the CPU reference does). */
template <typename A> __device__ __forceinline__ A combine(int kind, A a, A b) {
    switch (kind) {
    case CUDA_REDUCE_MAX:
        return is_nan(a) ? a : is_nan(b) ? b : a > b ? a : b;
    case CUDA_REDUCE_MIN:
        return is_nan(a) ? a : is_nan(b) ? b : a < b ? a : b;
    case CUDA_REDUCE_PROD:
        if constexpr (std::is_integral<A>::value)
            return A((unsigned long long)a * (unsigned long long)b);
        else
            return a * b;
    default:
        if constexpr (std::is_integral<A>::value)
            return A((unsigned long long)a + (unsigned long long)b);
        else
            return a + b;
    }
}

/* What each element contributes before combining. */
template <typename A> __device__ __forceinline__ A contribution(int kind, A v, A shift) {
    switch (kind) {
    case CUDA_REDUCE_L1:
        return v < A(0) ? A(0) - v : v;
    case CUDA_REDUCE_L2:
    case CUDA_REDUCE_SUM_SQUARE:
        return combine(CUDA_REDUCE_PROD, v, v);
    case CUDA_REDUCE_LOG_SUM_EXP:
        if constexpr (std::is_integral<A>::value)
            return v;
        else
            return exp(v - shift);
    default:
        return v;
    }
}

template <typename A> __device__ __forceinline__ A finish(int kind, A acc, int64_t n, A shift) {
    if (kind == CUDA_REDUCE_MEAN) return acc / A(n);
    if constexpr (!std::is_integral<A>::value) {
        if (kind == CUDA_REDUCE_L2) return sqrt(acc);
        if (kind == CUDA_REDUCE_LOG_SUM) return log(acc);
        if (kind == CUDA_REDUCE_LOG_SUM_EXP) return log(acc) + shift;
    }
    return acc;
}

template <typename A> __device__ __forceinline__ A warp_combine(int kind, A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = combine(kind, v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/* The reduction of n elements `stride` apart from `first`, by one thread (lanes = 1) or the 32
 * lanes of a warp together (lanes = 32; every lane gets the result). LogSumExp first finds the
 * maximum and shifts by it; an infinite or NaN maximum is the answer. */
template <typename T>
__device__ typename acc_of<T>::type reduce_run(const T *first, int64_t n, int64_t stride, int kind,
                                               int lane, int lanes) {
    using A = typename acc_of<T>::type;
    A shift = A(0);
    if (kind == CUDA_REDUCE_LOG_SUM_EXP) {
        A m = identity<A>(CUDA_REDUCE_MAX);
        for (int64_t j = lane; j < n; j += lanes)
            m = combine(CUDA_REDUCE_MAX, m, load_acc(first[j * stride]));
        if (lanes == 32) m = warp_combine(CUDA_REDUCE_MAX, m);
        if (not_finite(m)) return m;
        shift = m;
    }
    A acc = identity<A>(kind);
    for (int64_t j = lane; j < n; j += lanes)
        acc = combine(kind, acc, contribution(kind, load_acc(first[j * stride]), shift));
    if (lanes == 32) acc = warp_combine(kind, acc);
    return finish(kind, acc, n, shift);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_rows_kernel(const T *x, T *y, int64_t rows, int64_t n, int kind) {
    int lane = threadIdx.x & 31;
    for (int64_t r = global_thread() >> 5; r < rows; r += grid_threads() >> 5) {
        auto v = reduce_run(x + r * n, n, 1, kind, lane, 32);
        if (lane == 0) y[r] = store_acc<T>(v);
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_cols_kernel(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, int kind) {
    for (int64_t t = global_thread(); t < outer * inner; t += grid_threads()) {
        int64_t o = t / inner, i = t - o * inner;
        y[t] = store_acc<T>(reduce_run(x + o * n * inner + i, n, inner, kind, 0, 1));
    }
}

/* ---- TopK ---------------------------------------------------------------------------------- */

template <typename T> __device__ __forceinline__ auto topk_key(T v) {
    if constexpr (std::is_integral<T>::value)
        return (long long)v;
    else
        return to_float(v);
}

/* -1, 0, 1 as a is below, equal to or above b; NaN above every number. */
template <typename K> __device__ __forceinline__ int key_order(K a, K b) {
    bool na = is_nan(a), nb = is_nan(b);
    if (na || nb) return int(na) - int(nb);
    return int(a > b) - int(a < b);
}

/* Each element counts the elements of its column that come before it (its rank) and, when that
 * is below k, writes itself at its rank. */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    topk_kernel(const T *x, T *values, int64_t *indices, int64_t cols, int64_t n, int64_t inner,
                int64_t k, bool largest) {
    for (int64_t t = global_thread(); t < cols * n; t += grid_threads()) {
        int64_t col = t / n, j = t - col * n;
        int64_t o = col / inner, i = col - o * inner;
        const T *base = x + o * n * inner + i;
        auto v = topk_key(base[j * inner]);
        int64_t rank = 0;
        for (int64_t q = 0; q < n && rank < k; q++) {
            int ord = key_order(topk_key(base[q * inner]), v);
            if (!largest) ord = -ord;
            rank += ord > 0 || (ord == 0 && q < j);
        }
        if (rank < k) {
            int64_t out = (o * k + rank) * inner + i;
            values[out] = base[j * inner];
            indices[out] = j;
        }
    }
}

} // namespace

extern "C" cudaError_t cuda_reduce_kind(const void *x, void *y, int64_t outer, int64_t n,
                                        int64_t inner, int kind, graft_dtype dt,
                                        cudaStream_t stream) {
    if (n < 1) return cudaErrorInvalidValue;
    bool integer = dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64;
    if (integer &&
        (kind == CUDA_REDUCE_L2 || kind == CUDA_REDUCE_LOG_SUM || kind == CUDA_REDUCE_LOG_SUM_EXP))
        return cudaErrorInvalidValue;
    if (outer * inner == 0) return cudaSuccess;
    NUMERIC_DTYPE_DISPATCH(dt, T, {
        const T *xs = static_cast<const T *>(x);
        T *ys = static_cast<T *>(y);
        if (inner == 1)
            reduce_rows_kernel<T>
                <<<grid_for(outer * 32, kThreads), kThreads, 0, stream>>>(xs, ys, outer, n, kind);
        else
            reduce_cols_kernel<T><<<grid_for(outer * inner, kThreads), kThreads, 0, stream>>>(
                xs, ys, outer, n, inner, kind);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_topk(const void *x, void *values, int64_t *indices, int64_t outer,
                                 int64_t n, int64_t inner, int64_t k, bool largest, graft_dtype dt,
                                 cudaStream_t stream) {
    int64_t cols = outer * inner;
    if (cols == 0 || k == 0) return cudaSuccess;
    if (k > n) return cudaErrorInvalidValue;
    NUMERIC_DTYPE_DISPATCH(dt, T, {
        topk_kernel<T><<<grid_for(cols * n, kThreads), kThreads, 0, stream>>>(
            static_cast<const T *>(x), static_cast<T *>(values), indices, cols, n, inner, k,
            largest);
    });
    return cudaGetLastError();
}

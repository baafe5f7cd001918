/* reduce_sum.cu: CUDA kernels of ReduceSum / ReduceMean / GlobalAveragePool (sums in f64 or
 * wrapping 64-bit integers), ArgMax, CumSum and the inference form of BatchNormalization. */
#include "reduce_common.cuh"
#include "reduce_launch.h"

namespace {

constexpr int64_t WARP_ROW_MAX = 1024; /* rows up to this long: one warp each */
constexpr int ROW_THREADS = 256;
constexpr int COL_X = 32, COL_Y = 8; /* column sums: 32 columns by 8 slices of the axis */
constexpr int64_t MIN_CHUNK = 4096;  /* fewest elements worth a split of its own */
constexpr int64_t MAX_SPLITS = 1024;

/* ---- accumulation types --------------------------------------------------------------------- */

/* Floats sum in f64, as the reference does: a reduction is memory-bound, so the wider adds cost
 * nothing and sums of many values keep their digits. Integers sum as the bits of a uint64 so that
 * wrap-around is defined, as in the reference. */
template <typename T> struct acc_of { using type = double; };
template <> struct acc_of<int32_t> { using type = unsigned long long; };
template <> struct acc_of<int64_t> { using type = unsigned long long; };

__device__ __forceinline__ double acc_load(float v) {
    return v;
}
__device__ __forceinline__ double acc_load(__half v) {
    return __half2float(v);
}
__device__ __forceinline__ double acc_load(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
__device__ __forceinline__ unsigned long long acc_load(int32_t v) {
    return (unsigned long long)(long long)v;
}
__device__ __forceinline__ unsigned long long acc_load(int64_t v) {
    return (unsigned long long)(long long)v;
}

/* Store a sum (or the mean, sum / n: float division, or integer division toward zero). */
template <typename T>
__device__ __forceinline__ void store_acc(T *dst, double a, int64_t n, bool mean) {
    *dst = from_float<T>((float)(mean ? a / (double)n : a));
}
__device__ __forceinline__ void store_acc(int32_t *dst, unsigned long long a, int64_t n,
                                          bool mean) {
    *dst = (int32_t)(mean ? (long long)a / n : (long long)a);
}
__device__ __forceinline__ void store_acc(int64_t *dst, unsigned long long a, int64_t n,
                                          bool mean) {
    *dst = (int64_t)(mean ? (long long)a / n : (long long)a);
}

/* ---- ReduceSum, ReduceMean, GlobalAveragePool ---------------------------------------------- */

/* Short contiguous rows (inner == 1, n <= WARP_ROW_MAX): one warp per row. */
template <typename T>
__global__ void __launch_bounds__(128)
    sum_rows_warp_kernel(const T *x, T *y, int64_t rows, int64_t n, bool mean) {
    using A = typename acc_of<T>::type;
    int lane = threadIdx.x & 31;
    for (int64_t r = global_thread() >> 5; r < rows; r += grid_threads() >> 5) {
        const T *xr = x + r * n;
        A acc = 0;
        for (int64_t j = lane; j < n; j += 32) acc += acc_load(xr[j]);
        acc = warp_sum(acc);
        if (lane == 0) store_acc(y + r, acc, n, mean);
    }
}

/* Long contiguous rows: one block per (row, piece); with splits > 1 each piece's sum goes to
 * partial[row * splits + piece] for sum_finish_kernel. */
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS)
    sum_rows_block_kernel(const T *x, T *y, typename acc_of<T>::type *partial, int64_t rows,
                          int64_t n, int64_t splits, int64_t chunk, bool mean) {
    using A = typename acc_of<T>::type;
    __shared__ A buf[32];
    for (int64_t w = blockIdx.x; w < rows * splits; w += gridDim.x) {
        int64_t r = w / splits, lo = (w - r * splits) * chunk;
        int64_t hi = lo + chunk < n ? lo + chunk : n;
        const T *xr = x + r * n;
        A acc = 0;
        for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) acc += acc_load(xr[j]);
        acc = block_sum(acc, buf);
        if (threadIdx.x == 0) {
            if (splits == 1)
                store_acc(y + r, acc, n, mean);
            else
                partial[w] = acc;
        }
    }
}

/* The axis is not innermost: a block covers 32 neighbouring columns (coalesced loads) and splits
 * its piece of the axis over 8 thread rows, summed through shared memory. */
template <typename T>
__global__ void __launch_bounds__(COL_X *COL_Y)
    sum_cols_kernel(const T *x, T *y, typename acc_of<T>::type *partial, int64_t outer, int64_t n,
                    int64_t inner, int64_t splits, int64_t chunk, bool mean) {
    using A = typename acc_of<T>::type;
    __shared__ A buf[COL_Y][COL_X + 1];
    int64_t tiles = (inner + COL_X - 1) / COL_X;
    for (int64_t w = blockIdx.x; w < outer * splits * tiles; w += gridDim.x) {
        int64_t tile = w % tiles, rest = w / tiles;
        int64_t piece = rest % splits, o = rest / splits;
        int64_t i = tile * COL_X + threadIdx.x;
        int64_t lo = piece * chunk, hi = lo + chunk < n ? lo + chunk : n;
        A acc = 0;
        if (i < inner) {
            const T *xc = x + o * n * inner + i;
            for (int64_t j = lo + threadIdx.y; j < hi; j += COL_Y) acc += acc_load(xc[j * inner]);
        }
        buf[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && i < inner) {
            A t = 0;
#pragma unroll
            for (int k = 0; k < COL_Y; k++) t += buf[k][threadIdx.x];
            if (splits == 1)
                store_acc(y + o * inner + i, t, n, mean);
            else
                partial[(o * splits + piece) * inner + i] = t;
        }
        __syncthreads();
    }
}

/* Adds the pieces partial[o][piece][i] of each output. */
template <typename T>
__global__ void sum_finish_kernel(const typename acc_of<T>::type *partial, T *y, int64_t outer,
                                  int64_t inner, int64_t splits, int64_t n, bool mean) {
    using A = typename acc_of<T>::type;
    for (int64_t c = global_thread(); c < outer * inner; c += grid_threads()) {
        int64_t o = c / inner, i = c - o * inner;
        A t = 0;
        for (int64_t p = 0; p < splits; p++) t += partial[(o * splits + p) * inner + i];
        store_acc(y + c, t, n, mean);
    }
}

template <typename T>
void launch_sum(const T *x, T *y, void *partial_mem, int64_t outer, int64_t n, int64_t inner,
                int64_t splits, bool mean, cudaStream_t s) {
    using A = typename acc_of<T>::type;
    A *partial = static_cast<A *>(partial_mem);
    if (splits < 1 || !partial) splits = 1;
    int64_t chunk = (n + splits - 1) / splits;
    if (inner == 1 && splits == 1 && n <= WARP_ROW_MAX) {
        sum_rows_warp_kernel<T><<<grid_for(outer, 4), 128, 0, s>>>(x, y, outer, n, mean);
    } else if (inner == 1) {
        sum_rows_block_kernel<T><<<grid_for(outer * splits, 1), ROW_THREADS, 0, s>>>(
            x, y, partial, outer, n, splits, chunk, mean);
    } else {
        int64_t tiles = (inner + COL_X - 1) / COL_X;
        sum_cols_kernel<T><<<grid_for(outer * splits * tiles, 1), dim3(COL_X, COL_Y), 0, s>>>(
            x, y, partial, outer, n, inner, splits, chunk, mean);
    }
    if (splits > 1)
        sum_finish_kernel<T><<<grid_for(outer * inner, 256), 256, 0, s>>>(partial, y, outer, inner,
                                                                          splits, n, mean);
}

template <typename T> __global__ void fill_nan_kernel(T *y, int64_t count) {
    for (int64_t i = global_thread(); i < count; i += grid_threads()) y[i] = from_float<T>(NAN);
}

/* ---- ArgMax --------------------------------------------------------------------------------- */

/* Comparison keys: floats (16-bit ones widen exactly) and signed integers. */
__device__ __forceinline__ float key_of(float v) {
    return v;
}
__device__ __forceinline__ float key_of(__half v) {
    return __half2float(v);
}
__device__ __forceinline__ float key_of(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
__device__ __forceinline__ long long key_of(int32_t v) {
    return v;
}
__device__ __forceinline__ long long key_of(int64_t v) {
    return v;
}
__device__ __forceinline__ bool key_nan(float v) {
    return isnan(v);
}
__device__ __forceinline__ bool key_nan(long long) {
    return false;
}

/* Is candidate a (value, index) better than b? NaN beats every number; equal values (and two
 * NaNs) go to the lower index, or the higher one with `last`. This is a total order, so any
 * reduction tree finds what the reference's left-to-right scan finds. An index < 0 is empty. */
template <typename K>
__device__ __forceinline__ bool better(K av, int64_t ai, K bv, int64_t bi, bool last) {
    if (ai < 0 || bi < 0) return bi < 0 && ai >= 0;
    bool an = key_nan(av), bn = key_nan(bv);
    if (an != bn) return an;
    if (!an && av != bv) return av > bv;
    return last ? ai > bi : ai < bi;
}

template <typename K> __device__ __forceinline__ void warp_best(K &v, int64_t &i, bool last) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        K ov = __shfl_xor_sync(FULL_MASK, v, o);
        int64_t oi = __shfl_xor_sync(FULL_MASK, i, o);
        if (better(ov, oi, v, i, last)) v = ov, i = oi;
    }
}

/* One warp per contiguous row (rows up to a few thousand long: class scores). */
template <typename T>
__global__ void __launch_bounds__(128)
    argmax_warp_kernel(const T *x, int64_t *y, int64_t rows, int64_t n, bool last) {
    using K = decltype(key_of(T()));
    int lane = threadIdx.x & 31;
    for (int64_t r = global_thread() >> 5; r < rows; r += grid_threads() >> 5) {
        const T *xr = x + r * n;
        K bv = K();
        int64_t bi = -1;
        for (int64_t j = lane; j < n; j += 32) {
            K v = key_of(xr[j]);
            if (better(v, j, bv, bi, last)) bv = v, bi = j;
        }
        warp_best(bv, bi, last);
        if (lane == 0) y[r] = bi;
    }
}

/* One block per long contiguous row (vocabulary-sized). */
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS)
    argmax_block_kernel(const T *x, int64_t *y, int64_t rows, int64_t n, bool last) {
    using K = decltype(key_of(T()));
    __shared__ K sv[32];
    __shared__ int64_t si[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n;
        K bv = K();
        int64_t bi = -1;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            K v = key_of(xr[j]);
            if (better(v, j, bv, bi, last)) bv = v, bi = j;
        }
        warp_best(bv, bi, last);
        if (lane == 0) sv[warp] = bv, si[warp] = bi;
        __syncthreads();
        if (warp == 0) {
            bv = lane < warps ? sv[lane] : K();
            bi = lane < warps ? si[lane] : -1;
            warp_best(bv, bi, last);
            if (lane == 0) y[r] = bi;
        }
        __syncthreads();
    }
}

/* The axis is not innermost: one thread per column, scanning it in order. */
template <typename T>
__global__ void argmax_col_kernel(const T *x, int64_t *y, int64_t outer, int64_t n, int64_t inner,
                                  bool last) {
    using K = decltype(key_of(T()));
    for (int64_t c = global_thread(); c < outer * inner; c += grid_threads()) {
        int64_t o = c / inner, i = c - o * inner;
        const T *xc = x + o * n * inner + i;
        K bv = key_of(xc[0]);
        int64_t bi = 0;
        for (int64_t j = 1; j < n; j++) {
            K v = key_of(xc[j * inner]);
            if (better(v, j, bv, bi, last)) bv = v, bi = j;
        }
        y[c] = bi;
    }
}

template <typename T>
void launch_argmax(const T *x, int64_t *y, int64_t outer, int64_t n, int64_t inner, bool last,
                   cudaStream_t s) {
    if (inner > 1)
        argmax_col_kernel<T>
            <<<grid_for(outer * inner, 256), 256, 0, s>>>(x, y, outer, n, inner, last);
    else if (n > 4096)
        argmax_block_kernel<T><<<grid_for(outer, 1), ROW_THREADS, 0, s>>>(x, y, outer, n, last);
    else
        argmax_warp_kernel<T><<<grid_for(outer, 4), 128, 0, s>>>(x, y, outer, n, last);
}

/* ---- CumSum --------------------------------------------------------------------------------- */

template <typename T> __device__ __forceinline__ void store_sum(T *dst, double a) {
    *dst = from_float<T>((float)a);
}
__device__ __forceinline__ void store_sum(int32_t *dst, unsigned long long a) {
    *dst = (int32_t)(long long)a;
}
__device__ __forceinline__ void store_sum(int64_t *dst, unsigned long long a) {
    *dst = (int64_t)(long long)a;
}

/* Contiguous rows: one block per row walks it in tiles of blockDim elements, each tile a block
 * scan (warp shuffles, then the warp totals), carrying the running total between tiles. */
template <typename T>
__global__ void cumsum_rows_kernel(const T *x, T *y, int64_t rows, int64_t n, bool exclusive,
                                   bool reverse) {
    using A = typename acc_of<T>::type;
    __shared__ A warp_prefix[32];
    __shared__ A tile_total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        A carry = 0;
        for (int64_t base = 0; base < n; base += blockDim.x) {
            int64_t j = base + threadIdx.x;
            int64_t at = reverse ? n - 1 - j : j;
            A v = j < n ? acc_load(xr[at]) : A(0);
            A inc = v;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                A t = __shfl_up_sync(FULL_MASK, inc, o);
                if (lane >= o) inc += t;
            }
            /* The exclusive value is the previous lane's inclusive one, not inc - v, which
             * would round differently from the reference's running sum. */
            A before = __shfl_up_sync(FULL_MASK, inc, 1);
            if (lane == 0) before = 0;
            if (lane == 31) warp_prefix[warp] = inc;
            __syncthreads();
            if (warp == 0) {
                A t = lane < warps ? warp_prefix[lane] : A(0);
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    A u = __shfl_up_sync(FULL_MASK, t, o);
                    if (lane >= o) t += u;
                }
                A ex = __shfl_up_sync(FULL_MASK, t, 1);
                if (lane < warps) warp_prefix[lane] = lane == 0 ? A(0) : ex;
                if (lane == 31) tile_total = t;
            }
            __syncthreads();
            if (j < n) store_sum(yr + at, carry + warp_prefix[warp] + (exclusive ? before : inc));
            carry += tile_total;
            __syncthreads();
        }
    }
}

/* The axis is not innermost: one thread per column runs the sum down it. */
template <typename T>
__global__ void cumsum_col_kernel(const T *x, T *y, int64_t outer, int64_t n, int64_t inner,
                                  bool exclusive, bool reverse) {
    using A = typename acc_of<T>::type;
    for (int64_t c = global_thread(); c < outer * inner; c += grid_threads()) {
        int64_t o = c / inner, i = c - o * inner;
        const T *xc = x + o * n * inner + i;
        T *yc = y + o * n * inner + i;
        A acc = 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t at = (reverse ? n - 1 - k : k) * inner;
            A v = acc_load(xc[at]);
            if (!exclusive) acc += v;
            store_sum(yc + at, acc);
            if (exclusive) acc += v;
        }
    }
}

template <typename T>
void launch_cumsum(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                   bool reverse, cudaStream_t s) {
    if (inner > 1) {
        cumsum_col_kernel<T><<<grid_for(outer * inner, 256), 256, 0, s>>>(x, y, outer, n, inner,
                                                                          exclusive, reverse);
        return;
    }
    int threads = n <= 64 ? 64 : n <= 128 ? 128 : 256;
    cumsum_rows_kernel<T>
        <<<grid_for(outer, 1), threads, 0, s>>>(x, y, outer, n, exclusive, reverse);
}

/* ---- BatchNormalization ---------------------------------------------------------------------- */

struct bn_param_types {
    graft_dtype t[4];
};

__device__ double load_param(const void *p, graft_dtype dt, int64_t i) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return static_cast<const float *>(p)[i];
    case GRAFT_DTYPE_F16:
        return __half2float(static_cast<const __half *>(p)[i]);
    case GRAFT_DTYPE_BF16:
        return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    case GRAFT_DTYPE_F64:
        return static_cast<const double *>(p)[i];
    default:
        return NAN;
    }
}

/* The reference's fold, in f64 with explicit roundings (no fused multiply-add) so that the f32
 * scale and shift come out the same bits. */
__global__ void bn_fold_kernel(const void *scale, const void *bias, const void *mean,
                               const void *var, bn_param_types pt, int64_t count, double eps,
                               float *scale_out, float *shift_out) {
    for (int64_t c = global_thread(); c < count; c += grid_threads()) {
        double s = load_param(scale, pt.t[0], c) / sqrt(load_param(var, pt.t[3], c) + eps);
        scale_out[c] = (float)s;
        shift_out[c] = (float)__dsub_rn(load_param(bias, pt.t[1], c),
                                        __dmul_rn(load_param(mean, pt.t[2], c), s));
    }
}

/* y = x * scale + shift rounded twice as the reference's f32 loop does (no FMA). I is uint32_t
 * when the tensor is small enough, saving the 64-bit divisions. */
template <typename T, typename I>
__global__ void bn_apply_kernel(const T *x, T *y, const float *scale, const float *shift, I total,
                                I groups, I run) {
    I stride = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        I g = (i / run) % groups;
        y[i] = from_float<T>(__fadd_rn(__fmul_rn(to_float(x[i]), scale[g]), shift[g]));
    }
}

template <typename T>
void launch_bn_apply(const T *x, T *y, const float *scale, const float *shift, int64_t total,
                     int64_t groups, int64_t run, cudaStream_t s) {
    unsigned grid = grid_for(total, 256);
    if (total < ((int64_t)1 << 31))
        bn_apply_kernel<T, uint32_t><<<grid, 256, 0, s>>>(x, y, scale, shift, (uint32_t)total,
                                                          (uint32_t)groups, (uint32_t)run);
    else
        bn_apply_kernel<T, uint64_t><<<grid, 256, 0, s>>>(x, y, scale, shift, (uint64_t)total,
                                                          (uint64_t)groups, (uint64_t)run);
}

} // namespace

extern "C" int64_t cuda_reduce_sum_splits(int64_t outer, int64_t n, int64_t inner, int sm_count) {
    if (n < 2 * MIN_CHUNK) return 1;
    /* Blocks the reduction has without splitting, against a few blocks per multiprocessor. */
    int64_t blocks = inner == 1 ? outer : outer * ((inner + COL_X - 1) / COL_X);
    int64_t want = 4 * (int64_t)(sm_count > 0 ? sm_count : 1);
    if (blocks >= want) return 1;
    int64_t splits = (want + blocks - 1) / blocks;
    if (splits > n / MIN_CHUNK) splits = n / MIN_CHUNK;
    if (splits > MAX_SPLITS) splits = MAX_SPLITS;
    return splits < 1 ? 1 : splits;
}

extern "C" cudaError_t cuda_reduce_sum(const void *x, void *y, void *partials, int64_t outer,
                                       int64_t n, int64_t inner, int64_t splits, bool mean,
                                       graft_dtype dt, cudaStream_t stream) {
    if (outer <= 0 || inner <= 0) return cudaSuccess;
    if (n <= 0) return cudaErrorInvalidValue;
    NUMERIC_DTYPE_DISPATCH(dt, T,
                           launch_sum<T>(static_cast<const T *>(x), static_cast<T *>(y), partials,
                                         outer, n, inner, splits, mean, stream));
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_fill_nan(void *y, int64_t count, graft_dtype dt, cudaStream_t stream) {
    if (count <= 0) return cudaSuccess;
    FLOAT_DTYPE_DISPATCH(dt, T,
                         fill_nan_kernel<T>
                         <<<grid_for(count, 256), 256, 0, stream>>>(static_cast<T *>(y), count));
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_argmax(const void *x, int64_t *y, int64_t outer, int64_t n,
                                   int64_t inner, bool select_last, graft_dtype dt,
                                   cudaStream_t stream) {
    if (outer <= 0 || inner <= 0) return cudaSuccess;
    if (n <= 0) return cudaErrorInvalidValue;
    NUMERIC_DTYPE_DISPATCH(
        dt, T,
        launch_argmax<T>(static_cast<const T *>(x), y, outer, n, inner, select_last, stream));
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_cumsum(const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                                   bool exclusive, bool reverse, graft_dtype dt,
                                   cudaStream_t stream) {
    if (outer <= 0 || n <= 0 || inner <= 0) return cudaSuccess;
    NUMERIC_DTYPE_DISPATCH(dt, T,
                           launch_cumsum<T>(static_cast<const T *>(x), static_cast<T *>(y), outer,
                                            n, inner, exclusive, reverse, stream));
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_batchnorm_fold(const void *scale, const void *bias, const void *mean,
                                           const void *var, const graft_dtype pdt[4], int64_t count,
                                           double eps, float *scale_out, float *shift_out,
                                           cudaStream_t stream) {
    if (count <= 0) return cudaSuccess;
    bn_param_types pt;
    for (int i = 0; i < 4; i++) {
        if (pdt[i] != GRAFT_DTYPE_F32 && pdt[i] != GRAFT_DTYPE_F16 && pdt[i] != GRAFT_DTYPE_BF16 &&
            pdt[i] != GRAFT_DTYPE_F64)
            return cudaErrorInvalidValue;
        pt.t[i] = pdt[i];
    }
    bn_fold_kernel<<<grid_for(count, 256), 256, 0, stream>>>(scale, bias, mean, var, pt, count, eps,
                                                             scale_out, shift_out);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_batchnorm_apply(const void *x, void *y, const float *scale,
                                            const float *shift, int64_t total, int64_t groups,
                                            int64_t run, graft_dtype dt, cudaStream_t stream) {
    if (total <= 0) return cudaSuccess;
    if (groups <= 0 || run <= 0) return cudaErrorInvalidValue;
    FLOAT_DTYPE_DISPATCH(dt, T,
                         launch_bn_apply<T>(static_cast<const T *>(x), static_cast<T *>(y), scale,
                                            shift, total, groups, run, stream));
    return cudaGetLastError();
}

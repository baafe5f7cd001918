/* reduce.cu: CUDA kernels of Softmax, LogSoftmax and LayerNormalization (with the fused residual
 * add variant): a warp per row with the row held in registers up to 1024 elements, a block per
 * row beyond, a thread per column when the axis is not innermost. */
#include "reduce_common.cuh"
#include "vec16.cuh"
#include "reduce_launch.h"

namespace {

/* Rows up to this long are held in registers by one warp (32 values a lane at most). */
constexpr int64_t WARP_ROW_MAX = 1024;
constexpr int WARP_ROW_THREADS = 128; /* 4 rows per block */
constexpr int BLOCK_ROW_THREADS = 512;

/* ---- Softmax, LogSoftmax -------------------------------------------------------------------- */

/* One warp per contiguous row of n <= 32 * VPT: max, sum of exp, then scale, all in registers. */
template <typename T, int VPT>
__global__ void __launch_bounds__(WARP_ROW_THREADS)
    softmax_warp_kernel(const T *x, T *y, int64_t rows, int n, bool log_form) {
    int lane = threadIdx.x & 31;
    for (int64_t r = global_thread() >> 5; r < rows; r += grid_threads() >> 5) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        float v[VPT];
        float mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            v[k] = j < n ? to_float(xr[j]) : -INFINITY;
            mx = fmaxf(mx, v[k]);
        }
        mx = warp_max(mx);
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            float d = v[k] - mx;
            float e = expf(d);
            if (lane + 32 * k < n) sum += e;
            v[k] = log_form ? d : e;
        }
        sum = warp_sum(sum);
        float post = log_form ? logf(sum) : 1.0f / sum;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            if (j < n) yr[j] = from_float<T>(log_form ? v[k] - post : v[k] * post);
        }
    }
}

/* One block per long contiguous row: three passes over global memory (the row stays in L1/L2
 * between them). */
template <typename T>
__global__ void __launch_bounds__(BLOCK_ROW_THREADS)
    softmax_block_kernel(const T *x, T *y, int64_t rows, int64_t n, bool log_form) {
    __shared__ float buf[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        float mx = -INFINITY;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, to_float(xr[j]));
        mx = block_max(mx, buf);
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(to_float(xr[j]) - mx);
        sum = block_sum(sum, buf);
        float post = log_form ? logf(sum) : 1.0f / sum;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            float d = to_float(xr[j]) - mx;
            yr[j] = from_float<T>(log_form ? d - post : expf(d) * post);
        }
    }
}

/* The axis is not innermost: one thread per (outer, inner) column, neighbouring threads on
 * neighbouring columns so that every pass over the axis reads coalesced. */
template <typename T>
__global__ void softmax_col_kernel(const T *x, T *y, int64_t outer, int64_t n, int64_t inner,
                                   bool log_form) {
    for (int64_t c = global_thread(); c < outer * inner; c += grid_threads()) {
        int64_t o = c / inner, i = c - o * inner;
        const T *xc = x + o * n * inner + i;
        T *yc = y + o * n * inner + i;
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; j++) mx = fmaxf(mx, to_float(xc[j * inner]));
        float sum = 0.0f;
        for (int64_t j = 0; j < n; j++) sum += expf(to_float(xc[j * inner]) - mx);
        float post = log_form ? logf(sum) : 1.0f / sum;
        for (int64_t j = 0; j < n; j++) {
            float d = to_float(xc[j * inner]) - mx;
            yc[j * inner] = from_float<T>(log_form ? d - post : expf(d) * post);
        }
    }
}

template <typename T>
void launch_softmax(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, bool log_form,
                    cudaStream_t s) {
    if (inner > 1) {
        softmax_col_kernel<T>
            <<<grid_for(outer * inner, 256), 256, 0, s>>>(x, y, outer, n, inner, log_form);
        return;
    }
    if (n > WARP_ROW_MAX) {
        softmax_block_kernel<T>
            <<<grid_for(outer, 1), BLOCK_ROW_THREADS, 0, s>>>(x, y, outer, n, log_form);
        return;
    }
    unsigned grid = grid_for(outer, WARP_ROW_THREADS / 32);
    int ni = (int)n;
    if (n <= 32)
        softmax_warp_kernel<T, 1><<<grid, WARP_ROW_THREADS, 0, s>>>(x, y, outer, ni, log_form);
    else if (n <= 64)
        softmax_warp_kernel<T, 2><<<grid, WARP_ROW_THREADS, 0, s>>>(x, y, outer, ni, log_form);
    else if (n <= 128)
        softmax_warp_kernel<T, 4><<<grid, WARP_ROW_THREADS, 0, s>>>(x, y, outer, ni, log_form);
    else if (n <= 256)
        softmax_warp_kernel<T, 8><<<grid, WARP_ROW_THREADS, 0, s>>>(x, y, outer, ni, log_form);
    else if (n <= 512)
        softmax_warp_kernel<T, 16><<<grid, WARP_ROW_THREADS, 0, s>>>(x, y, outer, ni, log_form);
    else
        softmax_warp_kernel<T, 32><<<grid, WARP_ROW_THREADS, 0, s>>>(x, y, outer, ni, log_form);
}

/* ---- LayerNormalization ------------------------------------------------------------------- */

template <typename T> struct ln_params {
    const T *x, *res;      /* res: the residual added to x first (NULL: none) */
    const T *scale, *bias; /* n values each; bias may be NULL */
    T *sum;                /* x + res written back (NULL: not wanted) */
    T *y;
    void *mean, *inv_std; /* per row, F32 or BF16 (stat_bf16); NULL: not wanted */
    bool stat_bf16;
    int64_t rows, n;
    float eps;
};

/* Element `at` of the normalised input: x, or x + res rounded to T as a separate Add gives. */
template <typename T> __device__ __forceinline__ float ln_input(const ln_params<T> &p, int64_t at) {
    float v = to_float(p.x[at]);
    if (p.res) v = to_float(from_float<T>(v + to_float(p.res[at])));
    return v;
}

template <typename T>
__device__ __forceinline__ void ln_store(const ln_params<T> &p, int64_t base, int64_t j, float v,
                                         float mean, float inv) {
    float o = (v - mean) * inv * to_float(p.scale[j]);
    if (p.bias) o += to_float(p.bias[j]);
    p.y[base + j] = from_float<T>(o);
}

__device__ __forceinline__ void ln_store_stat(void *dst, bool bf16, int64_t row, float v) {
    if (!dst) return;
    if (bf16)
        static_cast<__nv_bfloat16 *>(dst)[row] = __float2bfloat16_rn(v);
    else
        static_cast<float *>(dst)[row] = v;
}

/* One warp per row of n <= 32 * VPT held in registers: exact two-pass mean and variance. */
template <typename T, int VPT>
__global__ void __launch_bounds__(WARP_ROW_THREADS) layernorm_warp_kernel(ln_params<T> p) {
    int lane = threadIdx.x & 31;
    int n = (int)p.n;
    for (int64_t r = global_thread() >> 5; r < p.rows; r += grid_threads() >> 5) {
        int64_t base = r * p.n;
        float v[VPT];
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            v[k] = 0.0f;
            if (j < n) {
                v[k] = ln_input(p, base + j);
                if (p.sum) p.sum[base + j] = from_float<T>(v[k]);
                sum += v[k];
            }
        }
        float mean = warp_sum(sum) / (float)n;
        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            float d = v[k] - mean;
            if (lane + 32 * k < n) sq += d * d;
        }
        float inv = 1.0f / sqrtf(warp_sum(sq) / (float)n + p.eps);
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            if (j < n) ln_store(p, base, j, v[k], mean, inv);
        }
        if (lane == 0) {
            ln_store_stat(p.mean, p.stat_bf16, r, mean);
            ln_store_stat(p.inv_std, p.stat_bf16, r, inv);
        }
    }
}

/* One warp per row of n = 256 * CH elements of a 16-bit T, moved 8 at a time (16-byte loads and
 * stores; every pointer 16-byte aligned): the same two passes in registers as
 * layernorm_warp_kernel, a quarter of its memory instructions. */
template <typename T, int CH>
__global__ void __launch_bounds__(WARP_ROW_THREADS) layernorm_vec_kernel(ln_params<T> p) {
    const int lane = threadIdx.x & 31, n = 256 * CH;
    for (int64_t r = global_thread() >> 5; r < p.rows; r += grid_threads() >> 5) {
        const int64_t base = r * n;
        float v[CH][8], sum = 0.0f;
#pragma unroll
        for (int c = 0; c < CH; c++) {
            const int64_t at = base + (lane + 32 * c) * 8;
            load8(p.x + at, v[c]);
            if (p.res) {
                float rv[8];
                load8(p.res + at, rv);
#pragma unroll
                for (int e = 0; e < 8; e++) v[c][e] = to_float(from_float<T>(v[c][e] + rv[e]));
            }
            if (p.sum) store8(p.sum + at, v[c]);
#pragma unroll
            for (int e = 0; e < 8; e++) sum += v[c][e];
        }
        const float mean = warp_sum(sum) / (float)n;
        float sq = 0.0f;
#pragma unroll
        for (int c = 0; c < CH; c++)
#pragma unroll
            for (int e = 0; e < 8; e++) sq += (v[c][e] - mean) * (v[c][e] - mean);
        const float inv = 1.0f / sqrtf(warp_sum(sq) / (float)n + p.eps);
#pragma unroll
        for (int c = 0; c < CH; c++) {
            const int j = (lane + 32 * c) * 8;
            float g[8], b[8] = {0, 0, 0, 0, 0, 0, 0, 0}, o[8];
            load8(p.scale + j, g);
            if (p.bias) load8(p.bias + j, b);
#pragma unroll
            for (int e = 0; e < 8; e++) o[e] = (v[c][e] - mean) * inv * g[e] + b[e];
            store8(p.y + base + j, o);
        }
        if (lane == 0) {
            ln_store_stat(p.mean, p.stat_bf16, r, mean);
            ln_store_stat(p.inv_std, p.stat_bf16, r, inv);
        }
    }
}

/* The 16-byte path takes it: a 16-bit T, n a multiple of 256 up to 1024, aligned pointers. */
template <typename T> bool layernorm_vec_takes(const ln_params<T> &p) {
    return p.n % 256 == 0 && p.n <= 1024 && vec16_aligned(p.x) && vec16_aligned(p.res) &&
           vec16_aligned(p.sum) && vec16_aligned(p.y) && vec16_aligned(p.scale) &&
           vec16_aligned(p.bias);
}

/* One block per long row, the same two passes (and the output pass) over global memory. */
template <typename T>
__global__ void __launch_bounds__(BLOCK_ROW_THREADS) layernorm_block_kernel(ln_params<T> p) {
    __shared__ float buf[32];
    for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
        int64_t base = r * p.n;
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) sum += ln_input(p, base + j);
        float mean = block_sum(sum, buf) / (float)p.n;
        float sq = 0.0f;
        for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) {
            float d = ln_input(p, base + j) - mean;
            sq += d * d;
        }
        float inv = 1.0f / sqrtf(block_sum(sq, buf) / (float)p.n + p.eps);
        for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) {
            float v = ln_input(p, base + j);
            if (p.sum) p.sum[base + j] = from_float<T>(v);
            ln_store(p, base, j, v, mean, inv);
        }
        if (threadIdx.x == 0) {
            ln_store_stat(p.mean, p.stat_bf16, r, mean);
            ln_store_stat(p.inv_std, p.stat_bf16, r, inv);
        }
    }
}

template <typename T>
void launch_layernorm_vec(const ln_params<T> &p, unsigned grid, cudaStream_t s) {
    if (p.n == 256)
        layernorm_vec_kernel<T, 1><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else if (p.n == 512)
        layernorm_vec_kernel<T, 2><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else if (p.n == 768)
        layernorm_vec_kernel<T, 3><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else
        layernorm_vec_kernel<T, 4><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
}

template <typename T> void launch_layernorm(const ln_params<T> &p, cudaStream_t s) {
    if (p.n > WARP_ROW_MAX) {
        layernorm_block_kernel<T><<<grid_for(p.rows, 1), BLOCK_ROW_THREADS, 0, s>>>(p);
        return;
    }
    unsigned grid = grid_for(p.rows, WARP_ROW_THREADS / 32);
    if constexpr (sizeof(T) == 2) {
        if (layernorm_vec_takes(p)) {
            launch_layernorm_vec(p, grid, s);
            return;
        }
    }
    if (p.n <= 32)
        layernorm_warp_kernel<T, 1><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 64)
        layernorm_warp_kernel<T, 2><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 128)
        layernorm_warp_kernel<T, 4><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 256)
        layernorm_warp_kernel<T, 8><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 512)
        layernorm_warp_kernel<T, 16><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 768) /* BERT-base's hidden size */
        layernorm_warp_kernel<T, 24><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
    else
        layernorm_warp_kernel<T, 32><<<grid, WARP_ROW_THREADS, 0, s>>>(p);
}

/* Fill the typed parameters of one LayerNormalization launch. */
template <typename T>
ln_params<T> make_ln_params(const void *x, const void *res, const void *scale, const void *bias,
                            void *sum, void *y, int64_t rows, int64_t n, float eps) {
    ln_params<T> p = {};
    p.x = static_cast<const T *>(x);
    p.res = static_cast<const T *>(res);
    p.scale = static_cast<const T *>(scale);
    p.bias = static_cast<const T *>(bias);
    p.sum = static_cast<T *>(sum);
    p.y = static_cast<T *>(y);
    p.rows = rows;
    p.n = n;
    p.eps = eps;
    return p;
}

} // namespace

extern "C" cudaError_t cuda_softmax(const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                                    bool log_form, graft_dtype dt, cudaStream_t stream) {
    if (outer <= 0 || n <= 0 || inner <= 0) return cudaSuccess;
    FLOAT_DTYPE_DISPATCH(dt, T,
                         launch_softmax<T>(static_cast<const T *>(x), static_cast<T *>(y), outer, n,
                                           inner, log_form, stream));
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_layernorm(const void *x, const void *scale, const void *bias, void *y,
                                      void *mean, void *inv_std, graft_dtype stat_dt, int64_t rows,
                                      int64_t n, float eps, graft_dtype dt, cudaStream_t stream) {
    if (rows <= 0 || n <= 0) return cudaSuccess;
    if ((mean || inv_std) && stat_dt != GRAFT_DTYPE_F32 && stat_dt != GRAFT_DTYPE_BF16)
        return cudaErrorInvalidValue;
    FLOAT_DTYPE_DISPATCH(dt, T, {
        ln_params<T> p = make_ln_params<T>(x, nullptr, scale, bias, nullptr, y, rows, n, eps);
        p.mean = mean;
        p.inv_std = inv_std;
        p.stat_bf16 = stat_dt == GRAFT_DTYPE_BF16;
        launch_layernorm<T>(p, stream);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_add_layernorm(const void *x, const void *residual, const void *scale,
                                          const void *bias, void *sum, void *y, int64_t rows,
                                          int64_t n, float eps, graft_dtype dt,
                                          cudaStream_t stream) {
    if (rows <= 0 || n <= 0) return cudaSuccess;
    FLOAT_DTYPE_DISPATCH(
        dt, T,
        launch_layernorm<T>(make_ln_params<T>(x, residual, scale, bias, sum, y, rows, n, eps),
                            stream));
    return cudaGetLastError();
}

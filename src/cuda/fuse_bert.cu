/* fuse_bert.cu: CUDA kernels of BERT's fused groups: the GELU that follows a biased product, the
 * attention scores' scale, mask and softmax in one pass, and LayerNormalization written out as
 * its decomposed nodes. */
#include "fuse_bert_launch.h"
#include "reduce_common.cuh"
#include "vec16.cuh"

namespace {

constexpr int EW_THREADS = 256;
constexpr int ROW_THREADS = 128; /* 4 rows (one a warp) per block */

/* ---- GELU, in place -------------------------------------------------------------------------- */

template <int FORM>
__device__ __forceinline__ float gelu_of(float v, float k0, float k1, float k2) {
    if (FORM == CUDA_BERT_GELU_CHAIN) /* the exported nodes' own order: f32 matches step by step */
        return ((erff(v / k0) + k1) * v) * k2;
    if (FORM == CUDA_BERT_GELU_ERF) return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(inner));
}

/* VEC: count % 8 == 0 and y 16-byte aligned (16-bit T only), eight elements a step. */
template <typename T, int FORM, bool VEC>
__global__ void __launch_bounds__(EW_THREADS)
    gelu_kernel(T *y, int64_t count, const T *c0, const T *c1, const T *c2) {
    float k0 = 0.0f, k1 = 0.0f, k2 = 0.0f;
    if (FORM == CUDA_BERT_GELU_CHAIN) {
        k0 = to_float(*c0);
        k1 = to_float(*c1);
        k2 = to_float(*c2);
    }
    if constexpr (VEC) {
        for (int64_t i = global_thread(); i < count / 8; i += grid_threads()) {
            float v[8];
            load8(y + 8 * i, v);
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = gelu_of<FORM>(v[e], k0, k1, k2);
            store8(y + 8 * i, v);
        }
    } else {
        for (int64_t i = global_thread(); i < count; i += grid_threads())
            y[i] = from_float<T>(gelu_of<FORM>(to_float(y[i]), k0, k1, k2));
    }
}

template <typename T, bool VEC>
void launch_gelu_as(T *y, int64_t count, int form, const T *c0, const T *c1, const T *c2,
                    cudaStream_t s) {
    unsigned grid = grid_for(VEC ? count / 8 : count, EW_THREADS * (VEC ? 1 : 4));
    if (form == CUDA_BERT_GELU_CHAIN)
        gelu_kernel<T, CUDA_BERT_GELU_CHAIN, VEC><<<grid, EW_THREADS, 0, s>>>(y, count, c0, c1, c2);
    else if (form == CUDA_BERT_GELU_ERF)
        gelu_kernel<T, CUDA_BERT_GELU_ERF, VEC><<<grid, EW_THREADS, 0, s>>>(y, count, c0, c1, c2);
    else
        gelu_kernel<T, CUDA_BERT_GELU_TANH, VEC><<<grid, EW_THREADS, 0, s>>>(y, count, c0, c1, c2);
}

template <typename T>
void launch_gelu(T *y, int64_t count, int form, const T *c0, const T *c1, const T *c2,
                 cudaStream_t s) {
    if constexpr (sizeof(T) == 2) {
        if (count % 8 == 0 && vec16_aligned(y))
            return launch_gelu_as<T, true>(y, count, form, c0, c1, c2, s);
    }
    launch_gelu_as<T, false>(y, count, form, c0, c1, c2, s);
}

/* ---- Scale, mask, softmax -------------------------------------------------------------------- */

template <typename T> struct sms_params {
    const T *x, *scale, *mask;
    T *y;
    int64_t ms0, ms1, ms2, ms3; /* mask strides of (i0, i1, i2, j) */
    int64_t d1, d2, rows;       /* rows = d0 * d1 * d2 */
    int n;
    bool scale_mul;
};

/* One warp per row of n <= 32 * VPT held in registers: the scores are read once, the scaled
 * and masked values never leave the registers, the probabilities are written once. */
template <typename T, int VPT>
__global__ void __launch_bounds__(ROW_THREADS) scaled_masked_softmax_kernel(sms_params<T> p) {
    int lane = threadIdx.x & 31;
    float c = to_float(*p.scale);
    for (int64_t r = global_thread() >> 5; r < p.rows; r += grid_threads() >> 5) {
        int64_t i2 = r % p.d2, q = r / p.d2;
        int64_t i1 = q % p.d1, i0 = q / p.d1;
        const T *xr = p.x + r * p.n;
        const T *mr = p.mask + i0 * p.ms0 + i1 * p.ms1 + i2 * p.ms2;
        float v[VPT];
        float mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            v[k] = -INFINITY;
            if (j < p.n) {
                float s = to_float(xr[j]);
                /* Div or Mul, then Add: the nodes' order (true division, as the Div does). */
                s = p.scale_mul ? s * c : s / c;
                v[k] = s + to_float(mr[j * p.ms3]);
                mx = fmaxf(mx, v[k]);
            }
        }
        mx = warp_max(mx);
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            float e = expf(v[k] - mx);
            if (lane + 32 * k < p.n) sum += e;
            v[k] = e;
        }
        float inv = 1.0f / warp_sum(sum);
        T *yr = p.y + r * p.n;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            if (j < p.n) yr[j] = from_float<T>(v[k] * inv);
        }
    }
}

/* The same with 16-byte loads and stores: LANES lanes per row (32 / LANES rows per warp), each
 * holding up to CH chunks of VEC = 16 / sizeof(T) consecutive elements (n % VEC == 0, rows
 * 16-byte aligned; the mask's too when vec_mask). Every lane runs the same number of iterations,
 * so the shuffles see the whole warp. */
template <typename T> struct vec16 { static constexpr int N = 16 / sizeof(T); };

template <typename T, int LANES, int CH>
__global__ void __launch_bounds__(ROW_THREADS)
    scaled_masked_softmax_vec_kernel(sms_params<T> p, bool vec_mask) {
    constexpr int VEC = vec16<T>::N, RPW = 32 / LANES;
    const int lane = threadIdx.x & 31, sub = lane % LANES;
    const int64_t warp0 = global_thread() >> 5, warps = grid_threads() >> 5;
    const float c = to_float(*p.scale);
    const int chunks = p.n / VEC;
    for (int64_t base = warp0 * RPW; base < p.rows; base += warps * RPW) {
        const int64_t r = base + lane / LANES;
        const bool live = r < p.rows;
        const int64_t rr = live ? r : 0;
        const int64_t i2 = rr % p.d2, q = rr / p.d2;
        const int64_t i1 = q % p.d1, i0 = q / p.d1;
        const T *xr = p.x + rr * p.n;
        const T *mr = p.mask + i0 * p.ms0 + i1 * p.ms1 + i2 * p.ms2;
        float v[CH][VEC];
        float mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int ch = sub + LANES * k;
            const bool in = live && ch < chunks;
            uint4 xv = make_uint4(0, 0, 0, 0), mv = make_uint4(0, 0, 0, 0);
            if (in) xv = __ldg(reinterpret_cast<const uint4 *>(xr) + ch);
            if (in && vec_mask) mv = __ldg(reinterpret_cast<const uint4 *>(mr) + ch);
            const T *xe = reinterpret_cast<const T *>(&xv), *me = reinterpret_cast<const T *>(&mv);
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                float sv = to_float(xe[e]);
                sv = p.scale_mul ? sv * c : sv / c;
                float m = 0.0f;
                if (in)
                    m = vec_mask ? to_float(me[e]) : to_float(mr[(int64_t)(ch * VEC + e) * p.ms3]);
                v[k][e] = in ? sv + m : -INFINITY;
                mx = fmaxf(mx, v[k][e]);
            }
        }
#pragma unroll
        for (int off = LANES / 2; off > 0; off >>= 1)
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < CH; k++)
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                float ev = sub + LANES * k < chunks ? expf(v[k][e] - mx) : 0.0f;
                sum += ev;
                v[k][e] = ev;
            }
#pragma unroll
        for (int off = LANES / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        const float inv = 1.0f / sum;
        T *yr = p.y + rr * p.n;
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int ch = sub + LANES * k;
            if (!live || ch >= chunks) continue;
            uint4 yv;
            T *ye = reinterpret_cast<T *>(&yv);
#pragma unroll
            for (int e = 0; e < VEC; e++) ye[e] = from_float<T>(v[k][e] * inv);
            reinterpret_cast<uint4 *>(yr)[ch] = yv;
        }
    }
}

/* The 16-byte path when rows are whole 16-byte chunks (and at most 4 chunks a lane). */
template <typename T> bool launch_sms_vec(const sms_params<T> &p, cudaStream_t s) {
    constexpr int VEC = vec16<T>::N;
    auto aligned = [](const void *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
    if (p.n % VEC != 0 || !aligned(p.x) || !aligned(p.y) || p.n > 4 * 32 * VEC) return false;
    bool vec_mask =
        p.ms3 == 1 && aligned(p.mask) && p.ms0 % VEC == 0 && p.ms1 % VEC == 0 && p.ms2 % VEC == 0;
    int chunks = p.n / VEC, lanes = 2;
    while (lanes < 32 && lanes * 4 < chunks) lanes *= 2;
    unsigned grid = grid_for(p.rows, (ROW_THREADS / 32) * (32 / lanes));
    switch (lanes) {
    case 2:
        scaled_masked_softmax_vec_kernel<T, 2, 4><<<grid, ROW_THREADS, 0, s>>>(p, vec_mask);
        break;
    case 4:
        scaled_masked_softmax_vec_kernel<T, 4, 4><<<grid, ROW_THREADS, 0, s>>>(p, vec_mask);
        break;
    case 8:
        scaled_masked_softmax_vec_kernel<T, 8, 4><<<grid, ROW_THREADS, 0, s>>>(p, vec_mask);
        break;
    case 16:
        scaled_masked_softmax_vec_kernel<T, 16, 4><<<grid, ROW_THREADS, 0, s>>>(p, vec_mask);
        break;
    default:
        scaled_masked_softmax_vec_kernel<T, 32, 4><<<grid, ROW_THREADS, 0, s>>>(p, vec_mask);
    }
    return true;
}

template <typename T> void launch_sms(const sms_params<T> &p, cudaStream_t s) {
    if (launch_sms_vec(p, s)) return;
    unsigned grid = grid_for(p.rows, ROW_THREADS / 32);
    if (p.n <= 32)
        scaled_masked_softmax_kernel<T, 1><<<grid, ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 64)
        scaled_masked_softmax_kernel<T, 2><<<grid, ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 128)
        scaled_masked_softmax_kernel<T, 4><<<grid, ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 256)
        scaled_masked_softmax_kernel<T, 8><<<grid, ROW_THREADS, 0, s>>>(p);
    else if (p.n <= 512)
        scaled_masked_softmax_kernel<T, 16><<<grid, ROW_THREADS, 0, s>>>(p);
    else
        scaled_masked_softmax_kernel<T, 32><<<grid, ROW_THREADS, 0, s>>>(p);
}

/* ---- LayerNormalization from its decomposed nodes ------------------------------------------- */

/* One warp per row of n <= 32 * VPT, in the decomposed graph's order of operations:
 * d = s - mean(s), y = d / sqrt(mean(d^2) + eps) * scale + bias, with s = x (+ res, rounded to T
 * as the Add node would). */
template <typename T, int VPT>
__global__ void __launch_bounds__(ROW_THREADS)
    ln_decomposed_kernel(const T *x, const T *res, const T *eps_p, const T *scale, const T *bias,
                         T *y, int64_t rows, int n) {
    int lane = threadIdx.x & 31;
    float eps = to_float(*eps_p);
    for (int64_t r = global_thread() >> 5; r < rows; r += grid_threads() >> 5) {
        int64_t base = r * n;
        float v[VPT];
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            v[k] = 0.0f;
            if (j < n) {
                v[k] = to_float(x[base + j]);
                if (res) v[k] = to_float(from_float<T>(v[k] + to_float(res[base + j])));
                sum += v[k];
            }
        }
        float mean = warp_sum(sum) / (float)n;
        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            v[k] -= mean;
            if (lane + 32 * k < n) sq += v[k] * v[k];
        }
        float den = sqrtf(warp_sum(sq) / (float)n + eps);
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            int j = lane + 32 * k;
            if (j < n)
                y[base + j] = from_float<T>(v[k] / den * to_float(scale[j]) + to_float(bias[j]));
        }
    }
}

template <typename T>
void launch_ln_decomposed(const T *x, const T *res, const T *eps, const T *scale, const T *bias,
                          T *y, int64_t rows, int n, cudaStream_t s) {
    unsigned grid = grid_for(rows, ROW_THREADS / 32);
    if (n <= 64)
        ln_decomposed_kernel<T, 2>
            <<<grid, ROW_THREADS, 0, s>>>(x, res, eps, scale, bias, y, rows, n);
    else if (n <= 128)
        ln_decomposed_kernel<T, 4>
            <<<grid, ROW_THREADS, 0, s>>>(x, res, eps, scale, bias, y, rows, n);
    else if (n <= 256)
        ln_decomposed_kernel<T, 8>
            <<<grid, ROW_THREADS, 0, s>>>(x, res, eps, scale, bias, y, rows, n);
    else if (n <= 512)
        ln_decomposed_kernel<T, 16>
            <<<grid, ROW_THREADS, 0, s>>>(x, res, eps, scale, bias, y, rows, n);
    else if (n <= 768) /* BERT-base's hidden size */
        ln_decomposed_kernel<T, 24>
            <<<grid, ROW_THREADS, 0, s>>>(x, res, eps, scale, bias, y, rows, n);
    else
        ln_decomposed_kernel<T, 32>
            <<<grid, ROW_THREADS, 0, s>>>(x, res, eps, scale, bias, y, rows, n);
}

} // namespace

extern "C" cudaError_t cuda_bert_gelu(void *y, int64_t count, int form, const void *c0,
                                      const void *c1, const void *c2, graft_dtype dt,
                                      cudaStream_t stream) {
    if (form < CUDA_BERT_GELU_CHAIN || form > CUDA_BERT_GELU_TANH) return cudaErrorInvalidValue;
    if (form == CUDA_BERT_GELU_CHAIN && (!c0 || !c1 || !c2)) return cudaErrorInvalidValue;
    if (count <= 0) return cudaSuccess;
    FLOAT_DTYPE_DISPATCH(dt, T,
                         launch_gelu<T>(static_cast<T *>(y), count, form,
                                        static_cast<const T *>(c0), static_cast<const T *>(c1),
                                        static_cast<const T *>(c2), stream));
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_bert_scaled_masked_softmax(const void *x, const void *scale,
                                                       bool scale_mul, const void *mask,
                                                       const int64_t ms[4], void *y, int64_t d0,
                                                       int64_t d1, int64_t d2, int64_t n,
                                                       graft_dtype dt, cudaStream_t stream) {
    if (n > 1024 || d0 < 0 || d1 < 0 || d2 < 0 || n < 0) return cudaErrorInvalidValue;
    if (d0 == 0 || d1 == 0 || d2 == 0 || n == 0) return cudaSuccess;
    FLOAT_DTYPE_DISPATCH(dt, T, {
        sms_params<T> p;
        p.x = static_cast<const T *>(x);
        p.scale = static_cast<const T *>(scale);
        p.mask = static_cast<const T *>(mask);
        p.y = static_cast<T *>(y);
        p.ms0 = ms[0];
        p.ms1 = ms[1];
        p.ms2 = ms[2];
        p.ms3 = ms[3];
        p.d1 = d1;
        p.d2 = d2;
        p.rows = d0 * d1 * d2;
        p.n = (int)n;
        p.scale_mul = scale_mul;
        launch_sms<T>(p, stream);
    });
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_bert_layernorm_decomposed(const void *x, const void *res,
                                                      const void *eps, const void *scale,
                                                      const void *bias, void *y, int64_t rows,
                                                      int64_t n, graft_dtype dt,
                                                      cudaStream_t stream) {
    if (n > 1024 || rows < 0 || n < 0) return cudaErrorInvalidValue;
    if (rows == 0 || n == 0) return cudaSuccess;
    FLOAT_DTYPE_DISPATCH(
        dt, T,
        launch_ln_decomposed<T>(static_cast<const T *>(x), static_cast<const T *>(res),
                                static_cast<const T *>(eps), static_cast<const T *>(scale),
                                static_cast<const T *>(bias), static_cast<T *>(y), rows, (int)n,
                                stream));
    return cudaGetLastError();
}

/* attention.cu: fused attention forward (QK^T, scale, mask, softmax, product with V) for fp16 and
 * bf16 with tensor cores (WMMA) and an online softmax, never writing the scores. */
#include <mma.h>

#include "attention_launch.h"
#include "attention_common.cuh"
#include "reduce_common.cuh"

namespace {

using namespace nvcuda;

constexpr int BQ = 64;   /* query rows per block */
constexpr int BK = 64;   /* keys per tile */
constexpr int WARPS = 4; /* each owns 16 query rows */
constexpr int THREADS = WARPS * 32;
constexpr int PAD_H = 8;        /* row padding of 2-byte tiles: 16 bytes keeps WMMA's alignment */
constexpr int PAD_F = 4;        /* row padding of f32 tiles */
constexpr int LDK = BK + PAD_H; /* K^T tile (D, BK) */
constexpr int LDS = BK + PAD_F; /* scores (BQ, BK), f32 */
constexpr int LDP = BK + PAD_H; /* probabilities (BQ, BK) */

/* Shared memory of one block, in bytes; every part starts 32-byte aligned (WMMA needs 256 bits):
 * Q (BQ, D), K^T tile (D, BK), V tile (BK, D), scores (BQ, BK) f32, P (BQ, BK), O (BQ, D) f32. */
template <int D> struct layout {
    static constexpr int LDQ = D + PAD_H, LDV = D + PAD_H, LDO = D + PAD_F;
    static constexpr size_t q_off = 0;
    static constexpr size_t k_off = q_off + 2 * BQ * LDQ;
    static constexpr size_t v_off = k_off + 2 * D * LDK;
    static constexpr size_t s_off = v_off + 2 * BK * LDV;
    static constexpr size_t p_off = s_off + 4 * BQ * LDS;
    static constexpr size_t o_off = p_off + 2 * BQ * LDP;
    static constexpr size_t total = o_off + 4 * BQ * LDO;
    static_assert(k_off % 32 == 0 && v_off % 32 == 0 && s_off % 32 == 0 && p_off % 32 == 0 &&
                      o_off % 32 == 0,
                  "WMMA tiles must start 32-byte aligned");
};

/* Copies the (ROWS, COLS) tile at src (row stride gstride) into dst (row stride ld), zero past
 * nr rows or nc columns: padding rows and columns must be finite (0 * garbage could be NaN). */
template <typename T, int ROWS, int COLS>
__device__ __forceinline__ void load_tile(T *dst, int ld, const T *src, int64_t gstride, int nr,
                                          int nc, bool vec) {
    constexpr int CHUNKS = COLS / 8;
    for (int i = threadIdx.x; i < ROWS * CHUNKS; i += THREADS) {
        int r = i / CHUNKS, c = (i % CHUNKS) * 8;
        T *d = dst + r * ld + c;
        if (r < nr && vec && c + 8 <= nc) {
            *reinterpret_cast<uint4 *>(d) =
                __ldg(reinterpret_cast<const uint4 *>(src + r * gstride + c));
            continue;
        }
#pragma unroll
        for (int k = 0; k < 8; k++)
            d[k] = r < nr && c + k < nc ? src[r * gstride + c + k] : from_float<T>(0.0f);
    }
}

/* Scores of the warp's 16 query rows against the BK keys of the tile, into ss (f32). */
template <typename T, int D>
__device__ __forceinline__ void tile_scores(const T *qs, const T *ks, float *ss, int warp) {
    using L = layout<D>;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[BK / 16];
#pragma unroll
    for (int n = 0; n < BK / 16; n++) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int k = 0; k < D; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::load_matrix_sync(a, qs + warp * 16 * L::LDQ + k, L::LDQ);
#pragma unroll
        for (int n = 0; n < BK / 16; n++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
            wmma::load_matrix_sync(b, ks + k * LDK + n * 16, LDK);
            wmma::mma_sync(acc[n], a, b, acc[n]);
        }
    }
#pragma unroll
    for (int n = 0; n < BK / 16; n++)
        wmma::store_matrix_sync(ss + warp * 16 * LDS + n * 16, acc[n], LDS, wmma::mem_row_major);
}

/* O (the warp's 16 rows, f32 in shared memory) += P V over the tile. */
template <typename T, int D>
__device__ __forceinline__ void tile_pv(const T *ps, const T *vs, float *os, int warp) {
    using L = layout<D>;
#pragma unroll
    for (int n = 0; n < D / 16; n++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        float *o = os + warp * 16 * L::LDO + n * 16;
        wmma::load_matrix_sync(acc, o, L::LDO, wmma::mem_row_major);
#pragma unroll
        for (int k = 0; k < BK / 16; k++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
            wmma::load_matrix_sync(a, ps + warp * 16 * LDP + k * 16, LDP);
            wmma::load_matrix_sync(b, vs + k * 16 * L::LDV + n * 16, L::LDV);
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(o, acc, L::LDO, wmma::mem_row_major);
    }
}

/* One block per (batch * head, 64 query rows); 4 warps of 16 rows. Per key tile: the scores by
 * WMMA into shared memory, then two lanes per row scale, mask and exponentiate them against the
 * row's running maximum (f32), write P rounded to T, rescale the row's output so far, and the
 * warp adds P V by WMMA. */
template <typename T, int D>
__global__ void __launch_bounds__(THREADS) attention_kernel(attn_params<T> p) {
    using L = layout<D>;
    extern __shared__ __align__(128) unsigned char smem[];
    T *qs = reinterpret_cast<T *>(smem + L::q_off);
    T *ks = reinterpret_cast<T *>(smem + L::k_off);
    T *vs = reinterpret_cast<T *>(smem + L::v_off);
    float *ss = reinterpret_cast<float *>(smem + L::s_off);
    T *ps = reinterpret_cast<T *>(smem + L::p_off);
    float *os = reinterpret_cast<float *>(smem + L::o_off);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t S = p.s, bh = blockIdx.x, q0 = (int64_t)blockIdx.y * BQ;
    const T *ktg = p.kt + bh * D * S;
    const T *vg = p.v + bh * S * D;
    load_tile<T, BQ, D>(qs, L::LDQ, p.q + (bh * S + q0) * D, D, (int)min((int64_t)BQ, S - q0), D,
                        p.vec_qv);
    for (int i = threadIdx.x; i < BQ * L::LDO; i += THREADS) os[i] = 0.0f;

    const float scale = to_float(*p.scale);
    /* This lane's row of the block and which half of the columns it handles. */
    const int row = warp * 16 + (lane >> 1), hc = lane & 1;
    const int64_t qi = q0 + row; /* past S: computed on zeros, never stored */
    const T *mrow = p.mask + (bh / p.h) * p.ms0 + (bh % p.h) * p.ms1 + min(qi, S - 1) * p.ms2;
    const float *srow = ss + row * LDS + hc * (BK / 2);
    T *prow = ps + row * LDP + hc * (BK / 2);
    float *orow = os + row * L::LDO + hc * (D / 2);
    float m = -INFINITY, l = 0.0f;

    for (int64_t j0 = 0; j0 < S; j0 += BK) {
        const int nk = (int)min((int64_t)BK, S - j0);
        __syncthreads(); /* the last tile's K and V are read; Q and O's zeros are visible */
        load_tile<T, D, BK>(ks, LDK, ktg + j0, S, D, nk, p.vec_k);
        load_tile<T, BK, D>(vs, L::LDV, vg + j0 * D, D, nk, D, p.vec_qv);
        __syncthreads();
        tile_scores<T, D>(qs, ks, ss, warp);
        __syncwarp();

        /* (s op scale) + mask, in the nodes' order; keys past S do not exist. */
        float x[BK / 2], mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < BK / 2; c++) {
            int j = hc * (BK / 2) + c;
            x[c] = -INFINITY;
            if (j < nk) {
                float sc = p.scale_mul ? srow[c] * scale : srow[c] / scale;
                x[c] = sc + to_float(mrow[(j0 + j) * p.ms3]);
            }
            mx = fmaxf(mx, x[c]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
        const float m_new = fmaxf(m, mx);
        /* A row masked with -inf so far: exponents against 0 give zeros, not inf - inf. */
        const float base = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = expf(m - base);
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < BK / 2; c++) {
            float e = expf(x[c] - base);
            sum += e;
            prow[c] = from_float<T>(e);
        }
        sum += __shfl_xor_sync(FULL_MASK, sum, 1);
        l = l * alpha + sum;
        m = m_new;
#pragma unroll 8
        for (int c = 0; c < D / 2; c++) orow[c] *= alpha;
        __syncwarp();
        tile_pv<T, D>(ps, vs, os, warp);
        __syncwarp();
    }

    if (qi < S) {
        /* A fully masked row has l == 0: NaN, as the separate Softmax gives. */
        const float inv = 1.0f / l;
        T *og = p.out + (bh * S + qi) * D + hc * (D / 2);
#pragma unroll 8
        for (int c = 0; c < D / 2; c++) og[c] = from_float<T>(orow[c] * inv);
    }
}

template <typename T, int D>
cudaError_t launch(const attn_params<T> &p, int64_t bh, cudaStream_t stream) {
    const size_t bytes = layout<D>::total;
    static std::atomic<uint64_t> done{0};
    cudaError_t e = allow_shared_once(attention_kernel<T, D>, bytes, done);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)bh, (unsigned)((p.s + BQ - 1) / BQ));
    attention_kernel<T, D><<<grid, THREADS, bytes, stream>>>(p);
    return cudaGetLastError();
}

template <typename T>
cudaError_t run(const void *q, const void *kt, const void *v, const void *scale, bool scale_mul,
                const void *mask, const int64_t ms[4], void *out, int64_t b, int64_t h, int64_t s,
                int64_t d, cudaStream_t stream) {
    attn_params<T> p = attn_params_make<T>(q, kt, v, scale, scale_mul, mask, ms, out, h, s);
    if (d == 32) return launch<T, 32>(p, b * h, stream);
    if (d == 64) return launch<T, 64>(p, b * h, stream);
    if (d == 128) return launch<T, 128>(p, b * h, stream);
    return cudaErrorInvalidValue;
}

} // namespace

extern "C" bool cuda_attention_supported(int64_t bh, int64_t s, int64_t d, graft_dtype dt) {
    return (dt == GRAFT_DTYPE_F16 || dt == GRAFT_DTYPE_BF16) && (d == 32 || d == 64 || d == 128) &&
           bh >= 1 && bh < ((int64_t)1 << 31) && s >= 1 && (s + BQ - 1) / BQ <= 65535 &&
           bh * ((s + BQ - 1) / BQ) < ((int64_t)1 << 31); /* the register-tiled kernel's grid */
}

extern "C" cudaError_t cuda_attention(const void *q, const void *kt, const void *v,
                                      const void *scale, bool scale_mul, const void *mask,
                                      const int64_t ms[4], void *out, int64_t b, int64_t h,
                                      int64_t s, int64_t d, graft_dtype dt, cudaStream_t stream) {
    if (!cuda_attention_supported(b * h, s, d, dt)) return cudaErrorInvalidValue;
    if (cuda_attention_mma_takes(q, kt, v, out, s, d))
        return cuda_attention_mma(q, kt, v, scale, scale_mul, mask, ms, out, b, h, s, d, dt,
                                  stream);
    if (dt == GRAFT_DTYPE_F16)
        return run<__half>(q, kt, v, scale, scale_mul, mask, ms, out, b, h, s, d, stream);
    return run<__nv_bfloat16>(q, kt, v, scale, scale_mul, mask, ms, out, b, h, s, d, stream);
}

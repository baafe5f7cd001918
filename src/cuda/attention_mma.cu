/* attention_mma.cu: fused attention forward for fp16/bf16 with mma.sync tensor-core tiles kept in
 * registers: the scores, the online softmax and the output accumulate in registers, K and V tiles
 * stream through shared memory double-buffered with cp.async; the scores never reach memory. */
#include "attention_launch.h"
#include "attention_common.cuh"

namespace {

constexpr int BQ = 64;       /* query rows per block, 16 per warp */
constexpr int BK = 64;       /* keys per tile */
constexpr int THREADS = 128; /* 4 warps */
constexpr int PAD = 8;       /* halves of row padding: 16 bytes keeps ldmatrix rows aligned */

/* Shared memory in halves: Q (BQ, D), two stages of K^T (D, BK) and of V (BK, D). */
template <int D> struct tiles {
    static constexpr int LDQ = D + PAD, LDK = BK + PAD, LDV = D + PAD;
    static constexpr int Q = BQ * LDQ, K = D * LDK, V = BK * LDV;
    static constexpr size_t bytes = 2 * (size_t)(Q + 2 * K + 2 * V);
};

__device__ __forceinline__ unsigned smem_addr(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared, zero-filled when !valid (src is then not read). */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(unsigned *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* c += a b for one m16n8k16 tile, f32 accumulators. */
template <typename T>
__device__ __forceinline__ void mma(float *c, const unsigned *a, const unsigned *b);
template <>
__device__ __forceinline__ void mma<__half>(float *c, const unsigned *a, const unsigned *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float *c, const unsigned *a, const unsigned *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Two floats rounded to T, packed as one 32-bit register (the lower half first). */
template <typename T> __device__ __forceinline__ unsigned pack2(float lo, float hi);
template <> __device__ __forceinline__ unsigned pack2<__half>(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}
template <> __device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}

/* K^T (D, BK) and V (BK, D) of keys j0.. into a stage; keys past S are zeros. */
template <typename T, int D>
__device__ __forceinline__ void load_kv(T *ks, T *vs, const T *ktg, const T *vg, int64_t S,
                                        int64_t j0) {
    using L = tiles<D>;
    for (int i = threadIdx.x; i < D * (BK / 8); i += THREADS) {
        int d = i / (BK / 8), c = (i % (BK / 8)) * 8;
        bool ok = j0 + c < S;
        cp_async16(ks + d * L::LDK + c, ok ? ktg + d * S + j0 + c : ktg, ok);
    }
    for (int i = threadIdx.x; i < BK * (D / 8); i += THREADS) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        bool ok = j0 + r < S;
        cp_async16(vs + r * L::LDV + c, ok ? vg + (j0 + r) * D + c : vg, ok);
    }
}

/* One block per (batch * head, 64 query rows); warp w owns rows 16w..16w+15, and lane l the
 * rows l/4 and l/4 + 8 of those, at key columns 2 (l % 4) + {0, 1} of every 8. */
template <typename T, int D>
__global__ void __launch_bounds__(THREADS) attention_mma_kernel(attn_params<T> p) {
    using L = tiles<D>;
    extern __shared__ __align__(128) unsigned char smem[];
    T *qs = reinterpret_cast<T *>(smem);
    T *kst[2] = {qs + L::Q, qs + L::Q + L::K};
    T *vst[2] = {qs + L::Q + 2 * L::K, qs + L::Q + 2 * L::K + L::V};

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t S = p.s, bh = blockIdx.x, q0 = (int64_t)blockIdx.y * BQ;
    const T *ktg = p.kt + bh * D * S, *vg = p.v + bh * S * D;
    const T *qg = p.q + bh * S * D;
    for (int i = threadIdx.x; i < BQ * (D / 8); i += THREADS) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        bool ok = q0 + r < S;
        cp_async16(qs + r * L::LDQ + c, ok ? qg + (q0 + r) * D + c : qg, ok);
    }
    load_kv<T, D>(kst[0], vst[0], ktg, vg, S, 0);
    cp_commit();

    const float scale = to_float(*p.scale);
    const int g = lane >> 2, t4 = lane & 3;
    int64_t row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const T *mrow[2];
    for (int i = 0; i < 2; i++)
        mrow[i] = p.mask + (bh / p.h) * p.ms0 + (bh % p.h) * p.ms1 + min(row[i], S - 1) * p.ms2;

    unsigned qf[D / 16][4];
    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    const int64_t n_tiles = (S + BK - 1) / BK;
    for (int64_t t = 0; t < n_tiles; t++) {
        const int st = (int)(t & 1);
        const int64_t j0 = t * BK;
        if (t + 1 < n_tiles) {
            load_kv<T, D>(kst[st ^ 1], vst[st ^ 1], ktg, vg, S, j0 + BK);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        if (t == 0) {
#pragma unroll
            for (int k = 0; k < D / 16; k++)
                ldsm_x4(qf[k], qs + (warp * 16 + (lane & 15)) * L::LDQ + k * 16 + (lane >> 4) * 8);
        }
        /* scores: 16 rows x BK keys */
        float s[BK / 8][4];
#pragma unroll
        for (int n = 0; n < BK / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        const T *ks = kst[st];
#pragma unroll
        for (int k = 0; k < D / 16; k++)
#pragma unroll
            for (int n = 0; n < BK / 8; n += 2) {
                unsigned b[4];
                ldsm_x4_trans(b, ks + (k * 16 + (lane & 15)) * L::LDK + n * 8 + (lane >> 4) * 8);
                mma<T>(s[n], qf[k], b);
                mma<T>(s[n + 1], qf[k], b + 2);
            }
        /* (s op scale) + mask in the nodes' order; keys past S do not exist */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = e >> 1;
                const int64_t j = j0 + n * 8 + 2 * t4 + (e & 1);
                float v = -INFINITY;
                if (j < S) {
                    float sc = p.scale_mul ? s[n][e] * scale : s[n][e] / scale;
                    v = sc + to_float(mrow[i][j * p.ms3]);
                }
                s[n][e] = v;
                mx[i] = fmaxf(mx[i], v);
            }
        float alpha[2], base[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m[i], mx[i]);
            /* a row masked with -inf so far: exponents against 0 give zeros, not inf - inf */
            base[i] = m_new == -INFINITY ? 0.0f : m_new;
            alpha[i] = expf(m[i] - base[i]);
            m[i] = m_new;
        }
        /* probabilities, rounded to T as the A operand of P V (pairs of 8-key tiles) */
        unsigned pf[BK / 16][4];
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
            float e0 = expf(s[n][0] - base[0]), e1 = expf(s[n][1] - base[0]);
            float e2 = expf(s[n][2] - base[1]), e3 = expf(s[n][3] - base[1]);
            sum[0] += e0 + e1;
            sum[1] += e2 + e3;
            pf[n >> 1][(n & 1) * 2] = pack2<T>(e0, e1);
            pf[n >> 1][(n & 1) * 2 + 1] = pack2<T>(e2, e3);
        }
#pragma unroll
        for (int i = 0; i < 2; i++) l[i] = l[i] * alpha[i] + sum[i];
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
        const T *vs = vst[st];
#pragma unroll
        for (int k = 0; k < BK / 16; k++)
#pragma unroll
            for (int n = 0; n < D / 8; n += 2) {
                unsigned b[4];
                ldsm_x4_trans(b, vs + (k * 16 + (lane & 15)) * L::LDV + n * 8 + (lane >> 4) * 8);
                mma<T>(o[n], pf[k], b);
                mma<T>(o[n + 1], pf[k], b + 2);
            }
        __syncthreads(); /* this stage is read: the next loads may overwrite it */
    }

#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (row[i] >= S) continue;
        /* a fully masked row has l == 0: NaN, as the separate Softmax gives */
        const float inv = 1.0f / l[i];
        unsigned *og = reinterpret_cast<unsigned *>(p.out + (bh * S + row[i]) * D + 2 * t4);
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            og[n * 4] = pack2<T>(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
}

template <typename T, int D>
cudaError_t launch(const attn_params<T> &p, int64_t bh, cudaStream_t stream) {
    static std::atomic<uint64_t> done{0};
    cudaError_t e = allow_shared_once(attention_mma_kernel<T, D>, tiles<D>::bytes, done);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)bh, (unsigned)((p.s + BQ - 1) / BQ));
    attention_mma_kernel<T, D><<<grid, THREADS, tiles<D>::bytes, stream>>>(p);
    return cudaGetLastError();
}

template <typename T>
cudaError_t run(const void *q, const void *kt, const void *v, const void *scale, bool scale_mul,
                const void *mask, const int64_t ms[4], void *out, int64_t b, int64_t h, int64_t s,
                int64_t d, cudaStream_t stream) {
    attn_params<T> p = attn_params_make<T>(q, kt, v, scale, scale_mul, mask, ms, out, h, s);
    if (d == 32) return launch<T, 32>(p, b * h, stream);
    if (d == 64) return launch<T, 64>(p, b * h, stream);
    return launch<T, 128>(p, b * h, stream);
}

} // namespace

extern "C" bool cuda_attention_mma_takes(const void *q, const void *kt, const void *v,
                                         const void *out, int64_t s, int64_t d) {
    return aligned16(q) && aligned16(kt) && aligned16(v) && aligned16(out) && s % 8 == 0 &&
           (d == 32 || d == 64 || d == 128);
}

extern "C" cudaError_t cuda_attention_mma(const void *q, const void *kt, const void *v,
                                          const void *scale, bool scale_mul, const void *mask,
                                          const int64_t ms[4], void *out, int64_t b, int64_t h,
                                          int64_t s, int64_t d, graft_dtype dt,
                                          cudaStream_t stream) {
    if (!cuda_attention_mma_takes(q, kt, v, out, s, d) ||
        (dt != GRAFT_DTYPE_F16 && dt != GRAFT_DTYPE_BF16))
        return cudaErrorInvalidValue;
    if (dt == GRAFT_DTYPE_F16)
        return run<__half>(q, kt, v, scale, scale_mul, mask, ms, out, b, h, s, d, stream);
    return run<__nv_bfloat16>(q, kt, v, scale, scale_mul, mask, ms, out, b, h, s, d, stream);
}

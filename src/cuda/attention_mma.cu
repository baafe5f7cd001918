/* attention_mma.cu: fused attention forward for fp16/bf16 with mma.sync tensor-core tiles kept in
 * registers: the scores, the online softmax and the output accumulate in registers, K and V tiles
 * stream through shared memory double-buffered with cp.async; the scores never reach memory. The
 * operands are read and the output written through strides, so (batch, seq, heads, dim) tensors
 * need no Transpose before or after. */
#include "attention_launch.h"
#include "attention_common.cuh"

namespace {

constexpr int BQ = 64;       /* query rows per block, 16 per warp */
constexpr int BK = 64;       /* keys per tile */
constexpr int THREADS = 128; /* 4 warps */
constexpr int PAD = 8;       /* halves of row padding: 16 bytes keeps ldmatrix rows aligned */

/* Shared memory in halves: Q (BQ, D), two stages of K and of V (BK, D). K is held as K^T
 * (D, BK) when its keys are contiguous in memory (KR false) or as rows (BK, D) when its head dim
 * is (KR true). */
template <int D, bool KR> struct tiles {
    static constexpr int LDQ = D + PAD, LDK = KR ? D + PAD : BK + PAD, LDV = D + PAD;
    static constexpr int Q = BQ * LDQ, K = KR ? BK * LDK : D * LDK, V = BK * LDV;
    static constexpr size_t bytes = 2 * (size_t)(Q + 2 * K + 2 * V);
};

/* The kernel's view of its operands: attn_params plus element strides. */
template <typename T> struct mma_params {
    attn_params<T> a;
    cuda_attn_strides st;
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

/* K and V of keys j0.. into a stage; keys past S are zeros. kg, vg: this head's K and V. */
template <typename T, int D, bool KR>
__device__ __forceinline__ void load_kv(T *ks, T *vs, const T *kg, const T *vg,
                                        const cuda_attn_strides &st, int64_t S, int64_t j0) {
    using L = tiles<D, KR>;
    if (KR) {
        for (int i = threadIdx.x; i < BK * (D / 8); i += THREADS) {
            int r = i / (D / 8), c = (i % (D / 8)) * 8;
            bool ok = j0 + r < S;
            cp_async16(ks + r * L::LDK + c, ok ? kg + (j0 + r) * st.k[2] + c : kg, ok);
        }
    } else {
        for (int i = threadIdx.x; i < D * (BK / 8); i += THREADS) {
            int d = i / (BK / 8), c = (i % (BK / 8)) * 8;
            bool ok = j0 + c < S;
            cp_async16(ks + d * L::LDK + c, ok ? kg + d * st.k[3] + j0 + c : kg, ok);
        }
    }
    for (int i = threadIdx.x; i < BK * (D / 8); i += THREADS) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        bool ok = j0 + r < S;
        cp_async16(vs + r * L::LDV + c, ok ? vg + (j0 + r) * st.v[2] + c : vg, ok);
    }
}

/* B operands of the scores (keys n*8.. and (n+1)*8.. against head dims k*16..) from a K stage. */
template <int D, bool KR, typename T>
__device__ __forceinline__ void load_k_frag(unsigned *b, const T *ks, int k, int n, int lane) {
    using L = tiles<D, KR>;
    if (KR)
        ldsm_x4(b, ks + (n * 8 + (lane >> 4) * 8 + (lane & 7)) * L::LDK + k * 16 +
                       ((lane >> 3) & 1) * 8);
    else
        ldsm_x4_trans(b, ks + (k * 16 + (lane & 15)) * L::LDK + n * 8 + (lane >> 4) * 8);
}

/* One block per (batch * head, 64 query rows); warp w owns rows 16w..16w+15, and lane l the
 * rows l/4 and l/4 + 8 of those, at key columns 2 (l % 4) + {0, 1} of every 8. */
/* At most 128 registers a thread for D <= 64 (4 blocks an SM; unbounded it took 153, 3 blocks). */
template <typename T, int D, bool KR>
__global__ void __launch_bounds__(THREADS, D <= 64 ? 4 : 2) attention_mma_kernel(mma_params<T> mp) {
    using L = tiles<D, KR>;
    const attn_params<T> &p = mp.a;
    const cuda_attn_strides &st = mp.st;
    extern __shared__ __align__(128) unsigned char smem[];
    T *qs = reinterpret_cast<T *>(smem);
    T *kst[2] = {qs + L::Q, qs + L::Q + L::K};
    T *vst[2] = {qs + L::Q + 2 * L::K, qs + L::Q + 2 * L::K + L::V};

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* The query blocks of one head are neighbours in the grid: they run together and the
     * second reads that head's K and V from L2. */
    const int64_t S = p.s, nq = (S + BQ - 1) / BQ;
    const int64_t bh = blockIdx.x / nq, q0 = (int64_t)(blockIdx.x % nq) * BQ;
    const int64_t ib = bh / p.h, ih = bh % p.h;
    const T *kg = p.kt + ib * st.k[0] + ih * st.k[1], *vg = p.v + ib * st.v[0] + ih * st.v[1];
    const T *qg = p.q + ib * st.q[0] + ih * st.q[1];
    for (int i = threadIdx.x; i < BQ * (D / 8); i += THREADS) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        bool ok = q0 + r < S;
        cp_async16(qs + r * L::LDQ + c, ok ? qg + (q0 + r) * st.q[2] + c : qg, ok);
    }
    load_kv<T, D, KR>(kst[0], vst[0], kg, vg, st, S, 0);
    cp_commit();

    /* Scores in base-2 exponent units, (s op scale + mask) * log2(e), one FMA each: exp2 is one
     * MUFU op, and s / scale becomes s times its reciprocal (within an f32 ulp of the Div). */
    const float scale = to_float(*p.scale), log2e = 1.4426950408889634f;
    const float ks2 = (p.scale_mul ? scale : 1.0f / scale) * log2e;
    const bool row_mask = p.ms2 != 0; /* a mask per query row, not one per (batch, head) */
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
        const int sg = (int)(t & 1);
        const int64_t j0 = t * BK;
        if (t + 1 < n_tiles) {
            load_kv<T, D, KR>(kst[sg ^ 1], vst[sg ^ 1], kg, vg, st, S, j0 + BK);
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
        const T *ks = kst[sg];
#pragma unroll
        for (int k = 0; k < D / 16; k++)
#pragma unroll
            for (int n = 0; n < BK / 8; n += 2) {
                unsigned b[4];
                load_k_frag<D, KR>(b, ks, k, n, lane);
                mma<T>(s[n], qf[k], b);
                mma<T>(s[n + 1], qf[k], b + 2);
            }
        /* s[n][c] and s[n][2 + c]: rows g and g + 8 at key j; keys past S do not exist */
        float mx[2] = {-INFINITY, -INFINITY};
        const bool full = j0 + BK <= S;
#pragma unroll
        for (int n = 0; n < BK / 8; n++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const int64_t j = j0 + n * 8 + 2 * t4 + c;
                const bool ok = full || j < S;
                const int64_t at = (ok ? j : 0) * p.ms3;
                const float mk0 = to_float(mrow[0][at]) * log2e;
                const float mk1 = row_mask ? to_float(mrow[1][at]) * log2e : mk0;
                const float v0 = ok ? fmaf(s[n][c], ks2, mk0) : -INFINITY;
                const float v1 = ok ? fmaf(s[n][2 + c], ks2, mk1) : -INFINITY;
                s[n][c] = v0;
                s[n][2 + c] = v1;
                mx[0] = fmaxf(mx[0], v0);
                mx[1] = fmaxf(mx[1], v1);
            }
        float alpha[2], base[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m[i], mx[i]);
            /* a row masked with -inf so far: exponents against 0 give zeros, not inf - inf */
            base[i] = m_new == -INFINITY ? 0.0f : m_new;
            alpha[i] = exp2f(m[i] - base[i]);
            m[i] = m_new;
        }
        /* probabilities, rounded to T as the A operand of P V (pairs of 8-key tiles) */
        unsigned pf[BK / 16][4];
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
            float e0 = exp2f(s[n][0] - base[0]), e1 = exp2f(s[n][1] - base[0]);
            float e2 = exp2f(s[n][2] - base[1]), e3 = exp2f(s[n][3] - base[1]);
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
        const T *vs = vst[sg];
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
        unsigned *og = reinterpret_cast<unsigned *>(p.out + ib * st.out[0] + ih * st.out[1] +
                                                    row[i] * st.out[2] + 2 * t4);
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            og[n * 4] = pack2<T>(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
}

template <typename T, int D, bool KR>
cudaError_t launch(const mma_params<T> &p, int64_t bh, cudaStream_t stream) {
    static std::atomic<uint64_t> done{0};
    cudaError_t e = allow_shared_once(attention_mma_kernel<T, D, KR>, tiles<D, KR>::bytes, done);
    if (e != cudaSuccess) return e;
    dim3 grid((unsigned)(bh * ((p.a.s + BQ - 1) / BQ)));
    attention_mma_kernel<T, D, KR><<<grid, THREADS, tiles<D, KR>::bytes, stream>>>(p);
    return cudaGetLastError();
}

template <typename T, bool KR>
cudaError_t launch_d(const mma_params<T> &p, int64_t bh, int64_t d, cudaStream_t stream) {
    if (d == 32) return launch<T, 32, KR>(p, bh, stream);
    if (d == 64) return launch<T, 64, KR>(p, bh, stream);
    return launch<T, 128, KR>(p, bh, stream);
}

template <typename T>
cudaError_t run(const void *q, const void *k, const void *v, const void *scale, bool scale_mul,
                const void *mask, const int64_t ms[4], void *out, const cuda_attn_strides *st,
                int64_t b, int64_t h, int64_t s, int64_t d, cudaStream_t stream) {
    mma_params<T> p;
    p.a = attn_params_make<T>(q, k, v, scale, scale_mul, mask, ms, out, h, s);
    p.st = *st;
    if (st->k[3] == 1) return launch_d<T, true>(p, b * h, d, stream);
    return launch_d<T, false>(p, b * h, d, stream);
}

/* A stride the 16-byte rows allow: a multiple of 8 elements. */
bool rows_aligned(int64_t stride) {
    return stride % 8 == 0;
}

} // namespace

extern "C" void cuda_attn_strides_dense(cuda_attn_strides *st, int64_t h, int64_t s, int64_t d) {
    const int64_t head = s * d;
    for (int i = 0; i < 3; i++) {
        int64_t *x = i == 0 ? st->q : i == 1 ? st->v : st->out;
        x[0] = h * head;
        x[1] = head;
        x[2] = d;
    }
    st->k[0] = h * head;
    st->k[1] = head;
    st->k[2] = 1; /* K^T (d, s): the keys contiguous */
    st->k[3] = s;
}

extern "C" bool cuda_attention_mma_takes_strided(const void *q, const void *k, const void *v,
                                                 const void *out, const cuda_attn_strides *st,
                                                 int64_t s, int64_t d) {
    if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(out) || s % 8 != 0 ||
        (d != 32 && d != 64 && d != 128))
        return false;
    const int64_t *rows[3] = {st->q, st->v, st->out};
    for (int i = 0; i < 3; i++)
        if (!rows_aligned(rows[i][0]) || !rows_aligned(rows[i][1]) || !rows_aligned(rows[i][2]))
            return false;
    /* K: one of its key and dim strides is 1, the other a multiple of 8 */
    bool k_rows = st->k[3] == 1, k_cols = st->k[2] == 1;
    return (k_rows || k_cols) && rows_aligned(st->k[0]) && rows_aligned(st->k[1]) &&
           rows_aligned(k_rows ? st->k[2] : st->k[3]);
}

extern "C" bool cuda_attention_mma_takes(const void *q, const void *kt, const void *v,
                                         const void *out, int64_t s, int64_t d) {
    return aligned16(q) && aligned16(kt) && aligned16(v) && aligned16(out) && s % 8 == 0 &&
           (d == 32 || d == 64 || d == 128);
}

extern "C" cudaError_t cuda_attention_mma_strided(const void *q, const void *k, const void *v,
                                                  const void *scale, bool scale_mul,
                                                  const void *mask, const int64_t ms[4], void *out,
                                                  const cuda_attn_strides *st, int64_t b, int64_t h,
                                                  int64_t s, int64_t d, graft_dtype dt,
                                                  cudaStream_t stream) {
    if (!cuda_attention_mma_takes_strided(q, k, v, out, st, s, d) ||
        (dt != GRAFT_DTYPE_F16 && dt != GRAFT_DTYPE_BF16))
        return cudaErrorInvalidValue;
    if (dt == GRAFT_DTYPE_F16)
        return run<__half>(q, k, v, scale, scale_mul, mask, ms, out, st, b, h, s, d, stream);
    return run<__nv_bfloat16>(q, k, v, scale, scale_mul, mask, ms, out, st, b, h, s, d, stream);
}

extern "C" cudaError_t cuda_attention_mma(const void *q, const void *kt, const void *v,
                                          const void *scale, bool scale_mul, const void *mask,
                                          const int64_t ms[4], void *out, int64_t b, int64_t h,
                                          int64_t s, int64_t d, graft_dtype dt,
                                          cudaStream_t stream) {
    cuda_attn_strides st;
    cuda_attn_strides_dense(&st, h, s, d);
    return cuda_attention_mma_strided(q, kt, v, scale, scale_mul, mask, ms, out, &st, b, h, s, d,
                                      dt, stream);
}

/* attention_mma.cu: fused attention forward for fp16/bf16 with mma.sync tensor-core tiles kept in
 * registers: the scores, the online softmax and the output accumulate in registers, K and V tiles
 * stream through shared memory double-buffered with cp.async; the scores never reach memory. The
 * operands are read and the output written through strides, so (batch, seq, heads, dim) tensors
 * need no Transpose before or after. */
#include <cstdlib>
#include <cstring>

#include "attention_launch.h"
#include "attention_common.cuh"

namespace {

constexpr int BQ = 64;       /* query rows per block, 16 per warp */
constexpr int BK = 64;       /* keys per tile */
constexpr int THREADS = 128; /* 4 warps */
constexpr int PAD = 8;       /* halves of row padding: 16 bytes keeps ldmatrix rows aligned */

/* Shared memory in halves: two Q buffers (BQ, D) (the next work item's queries load while the
 * current item's last tile computes), two stages of K and of V (BK, D). K is held as K^T
 * (D, BK) when its keys are contiguous in memory (KR false) or as rows (BK, D) when its head dim
 * is (KR true). */
template <int D, bool KR> struct tiles {
    static constexpr int LDQ = D + PAD, LDK = KR ? D + PAD : BK + PAD, LDV = D + PAD;
    static constexpr int Q = BQ * LDQ, K = KR ? BK * LDK : D * LDK, V = BK * LDV;
    static constexpr size_t bytes = 2 * (size_t)(2 * Q + 2 * K + 2 * V);
};

/* The kernel's view of its operands: attn_params plus element strides. */
template <typename T> struct mma_params {
    attn_params<T> a;
    cuda_attn_strides st;
    int64_t bh;      /* batch * heads */
    bool mask_pairs; /* the mask's keys contiguous and every row 4-byte aligned */
};

/* One work item, (batch * head, 64 query rows): where its operands start. */
template <typename T> struct work_item {
    int bh, q0;
    const T *qg, *kg, *vg;
};

template <typename T>
__device__ __forceinline__ work_item<T> locate(const mma_params<T> &mp, int item, int nq) {
    const attn_params<T> &p = mp.a;
    const cuda_attn_strides &st = mp.st;
    work_item<T> w;
    w.bh = item / nq;
    w.q0 = (item % nq) * BQ;
    const int ib = w.bh / (int)p.h, ih = w.bh % (int)p.h;
    w.qg = p.q + ib * st.q[0] + ih * st.q[1];
    w.kg = p.kt + ib * st.k[0] + ih * st.k[1];
    w.vg = p.v + ib * st.v[0] + ih * st.v[1];
    return w;
}

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

/* An item's query rows into a Q buffer; rows past S are zeros. */
template <typename T, int D, bool KR>
__device__ __forceinline__ void load_q(T *qs, const work_item<T> &w, const cuda_attn_strides &st,
                                       int64_t S) {
    using L = tiles<D, KR>;
    for (int i = threadIdx.x; i < BQ * (D / 8); i += THREADS) {
        int r = i / (D / 8), c = (i % (D / 8)) * 8;
        bool ok = w.q0 + r < S;
        cp_async16(qs + r * L::LDQ + c, ok ? w.qg + (w.q0 + r) * st.q[2] + c : w.qg, ok);
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

/* The running state of 16 query rows of one warp: the output accumulators, the row maxima and
 * sums (base-2 units), the queries as A operands; and the constants of the scores. */
template <int D> struct row_state {
    unsigned qf[D / 16][4];
    float o[D / 8][4];
    float m[2], l[2];
};

template <typename T> struct score_consts {
    float ks2, log2e;
    bool row_mask, mask_pairs;
    const T *mrow[2];
};

/* The mask values of keys j, j + 1 (ms3 == 1, 4-byte aligned) as floats. */
template <typename T> __device__ __forceinline__ float2 mask_pair(const T *m);
template <> __device__ __forceinline__ float2 mask_pair<__half>(const __half *m) {
    return __half22float2(*reinterpret_cast<const __half2 *>(m));
}
template <> __device__ __forceinline__ float2 mask_pair<__nv_bfloat16>(const __nv_bfloat16 *m) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(m));
}

/* Scores to base-2 units with the mask added, s[n][c] and s[n][2 + c] being rows g and g + 8 at
 * key j0 + 8 n + 2 t4 + c; keys past S become -inf. mx: each row's maximum over this lane's
 * keys. A full tile of a contiguous mask reads the mask in pairs (the common case: it was ~15
 * instructions a score through 64-bit indexing). */
template <typename T>
__device__ __forceinline__ void scale_and_mask(float (*s)[4], float *mx, const score_consts<T> &sc,
                                               const attn_params<T> &p, int64_t S, int64_t j0,
                                               int t4) {
    mx[0] = mx[1] = -INFINITY;
    if (sc.mask_pairs && j0 + BK <= S) {
        const T *m0 = sc.mrow[0] + j0 + 2 * t4, *m1 = sc.mrow[1] + j0 + 2 * t4;
#pragma unroll
        for (int n = 0; n < BK / 8; n++) {
            const float2 a = mask_pair<T>(m0 + n * 8);
            const float2 b = sc.row_mask ? mask_pair<T>(m1 + n * 8) : a;
            s[n][0] = fmaf(s[n][0], sc.ks2, a.x * sc.log2e);
            s[n][1] = fmaf(s[n][1], sc.ks2, a.y * sc.log2e);
            s[n][2] = fmaf(s[n][2], sc.ks2, b.x * sc.log2e);
            s[n][3] = fmaf(s[n][3], sc.ks2, b.y * sc.log2e);
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        return;
    }
    const bool full = j0 + BK <= S;
#pragma unroll
    for (int n = 0; n < BK / 8; n++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int64_t j = j0 + n * 8 + 2 * t4 + c;
            const bool ok = full || j < S;
            const int64_t at = (ok ? j : 0) * p.ms3;
            const float mk0 = to_float(sc.mrow[0][at]) * sc.log2e;
            const float mk1 = sc.row_mask ? to_float(sc.mrow[1][at]) * sc.log2e : mk0;
            const float v0 = ok ? fmaf(s[n][c], sc.ks2, mk0) : -INFINITY;
            const float v1 = ok ? fmaf(s[n][2 + c], sc.ks2, mk1) : -INFINITY;
            s[n][c] = v0;
            s[n][2 + c] = v1;
            mx[0] = fmaxf(mx[0], v0);
            mx[1] = fmaxf(mx[1], v1);
        }
}

/* One tile of BK keys j0.. for a warp's 16 rows: scores, the online softmax, then P V. ks, vs:
 * the stage holding the tile. Lane l holds rows l/4 and l/4 + 8, at key columns 2 (l % 4) +
 * {0, 1} of every 8. */
template <typename T, int D, bool KR>
__device__ __forceinline__ void tile_step(row_state<D> &r, const score_consts<T> &sc, const T *ks,
                                          const T *vs, const attn_params<T> &p, int64_t S,
                                          int64_t j0, int lane) {
    using L = tiles<D, KR>;
    float s[BK / 8][4];
#pragma unroll
    for (int n = 0; n < BK / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < D / 16; k++)
#pragma unroll
        for (int n = 0; n < BK / 8; n += 2) {
            unsigned b[4];
            load_k_frag<D, KR>(b, ks, k, n, lane);
            mma<T>(s[n], r.qf[k], b);
            mma<T>(s[n + 1], r.qf[k], b + 2);
        }
    /* s[n][c] and s[n][2 + c]: rows g and g + 8 at key j; keys past S do not exist */
    float mx[2];
    scale_and_mask<T>(s, mx, sc, p, S, j0, lane & 3);
    float alpha[2], base[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        const float m_new = fmaxf(r.m[i], mx[i]);
        /* a row masked with -inf so far: exponents against 0 give zeros, not inf - inf */
        base[i] = m_new == -INFINITY ? 0.0f : m_new;
        alpha[i] = exp2f(r.m[i] - base[i]);
        r.m[i] = m_new;
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
    for (int i = 0; i < 2; i++) r.l[i] = r.l[i] * alpha[i] + sum[i];
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
        r.o[n][0] *= alpha[0];
        r.o[n][1] *= alpha[0];
        r.o[n][2] *= alpha[1];
        r.o[n][3] *= alpha[1];
    }
#pragma unroll
    for (int k = 0; k < BK / 16; k++)
#pragma unroll
        for (int n = 0; n < D / 8; n += 2) {
            unsigned b[4];
            ldsm_x4_trans(b, vs + (k * 16 + (lane & 15)) * L::LDV + n * 8 + (lane >> 4) * 8);
            mma<T>(r.o[n], pf[k], b);
            mma<T>(r.o[n + 1], pf[k], b + 2);
        }
}

/* A warp's 16 rows normalised and written; rows past S are not. */
template <typename T, int D>
__device__ __forceinline__ void store_rows(row_state<D> &r, const mma_params<T> &mp,
                                           const work_item<T> &w, int warp, int lane) {
    const cuda_attn_strides &st = mp.st;
    const int64_t ib = w.bh / mp.a.h, ih = w.bh % mp.a.h;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        r.l[i] += __shfl_xor_sync(0xffffffffu, r.l[i], 1);
        r.l[i] += __shfl_xor_sync(0xffffffffu, r.l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int64_t row = w.q0 + warp * 16 + (lane >> 2) + 8 * i;
        if (row >= mp.a.s) continue;
        /* a fully masked row has l == 0: NaN, as the separate Softmax gives */
        const float inv = 1.0f / r.l[i];
        unsigned *og = reinterpret_cast<unsigned *>(mp.a.out + ib * st.out[0] + ih * st.out[1] +
                                                    row * st.out[2] + 2 * (lane & 3));
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            og[n * 4] = pack2<T>(r.o[n][2 * i] * inv, r.o[n][2 * i + 1] * inv);
    }
}

/* Work items (batch * head, 64 query rows) blockIdx.x, + gridDim.x, ...; warp w owns rows
 * 16w..16w+15 of an item. The loads run one tile ahead across items: while an item's last tile
 * computes, the next item's queries and first K/V tile arrive, so a block that holds several
 * items does not wait for memory between them. Items of one head are neighbours: they run
 * together and the second reads that head's K and V from L2. */
/* MB: blocks an SM the registers must allow. D = 64 takes 3 (168 registers): BERT-base's attention
 * ran 0.83 ms against 1.03 ms with 4 (128 registers, spilling), H200, batch 128. */
template <typename T, int D, bool KR, int MB>
__global__ void __launch_bounds__(THREADS, MB) attention_mma_kernel(mma_params<T> mp) {
    using L = tiles<D, KR>;
    const attn_params<T> &p = mp.a;
    const cuda_attn_strides &st = mp.st;
    extern __shared__ __align__(128) unsigned char smem[];
    T *const base = reinterpret_cast<T *>(smem);
    T *const kbase = base + 2 * L::Q, *const vbase = kbase + 2 * L::K;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* the launcher's checks keep items, rows and tiles below 2^31 */
    const int S = (int)p.s, nq = (S + BQ - 1) / BQ, n_items = (int)mp.bh * nq;
    const int n_tiles = (S + BK - 1) / BK;
    int item = blockIdx.x;
    if (item >= n_items) return;
    {
        const work_item<T> w = locate(mp, item, nq);
        load_q<T, D, KR>(base, w, st, S);
        load_kv<T, D, KR>(kbase, vbase, w.kg, w.vg, st, S, 0);
        cp_commit();
    }
    /* Scores in base-2 exponent units, (s op scale + mask) * log2(e), one FMA each: exp2 is one
     * MUFU op, and s / scale becomes s times its reciprocal (within an f32 ulp of the Div). */
    score_consts<T> sc;
    const float scale = to_float(*p.scale);
    sc.log2e = 1.4426950408889634f;
    sc.ks2 = (p.scale_mul ? scale : 1.0f / scale) * sc.log2e;
    sc.row_mask = p.ms2 != 0; /* a mask per query row, not one per (batch, head) */
    sc.mask_pairs = mp.mask_pairs;
    int qslot = 0, stage = 0;
    for (; item < n_items; item += gridDim.x, qslot ^= 1) {
        const work_item<T> w = locate(mp, item, nq);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int row = min(w.q0 + warp * 16 + (lane >> 2) + 8 * i, S - 1);
            sc.mrow[i] =
                p.mask + (w.bh / (int)p.h) * p.ms0 + (w.bh % (int)p.h) * p.ms1 + row * p.ms2;
        }
        row_state<D> r;
#pragma unroll
        for (int n = 0; n < D / 8; n++) r.o[n][0] = r.o[n][1] = r.o[n][2] = r.o[n][3] = 0.0f;
        r.m[0] = r.m[1] = -INFINITY;
        r.l[0] = r.l[1] = 0.0f;
        for (int t = 0; t < n_tiles; t++, stage ^= 1) {
            const int nx = stage ^ 1;
            bool ahead = true;
            if (t + 1 < n_tiles) {
                load_kv<T, D, KR>(kbase + nx * L::K, vbase + nx * L::V, w.kg, w.vg, st, S,
                                  (t + 1) * BK);
            } else if (item + (int)gridDim.x < n_items) {
                const work_item<T> wn = locate(mp, item + (int)gridDim.x, nq);
                load_q<T, D, KR>(base + (qslot ^ 1) * L::Q, wn, st, S);
                load_kv<T, D, KR>(kbase + nx * L::K, vbase + nx * L::V, wn.kg, wn.vg, st, S, 0);
            } else {
                ahead = false;
            }
            if (ahead) {
                cp_commit();
                cp_wait<1>();
            } else {
                cp_wait<0>();
            }
            __syncthreads();
            if (t == 0) {
                const T *qs = base + qslot * L::Q;
#pragma unroll
                for (int k = 0; k < D / 16; k++)
                    ldsm_x4(r.qf[k],
                            qs + (warp * 16 + (lane & 15)) * L::LDQ + k * 16 + (lane >> 4) * 8);
            }
            tile_step<T, D, KR>(r, sc, kbase + stage * L::K, vbase + stage * L::V, p, S, t * BK,
                                lane);
            __syncthreads(); /* this stage is read: the next loads may overwrite it */
        }
        store_rows<T, D>(r, mp, w, warp, lane);
    }
}

/* Whether blocks take several work items (GRAFT_CUDA_ATTENTION_ITEMS=1 gives one item a block,
 * a diagnostic switch). */
bool items_persist() {
    static std::atomic<int> mode{-1};
    int m = mode.load(std::memory_order_relaxed);
    if (m < 0) {
        const char *v = getenv("GRAFT_CUDA_ATTENTION_ITEMS");
        m = !(v && !strcmp(v, "1"));
        mode.store(m, std::memory_order_relaxed);
    }
    return m == 1;
}

/* Blocks of `kernel` resident on the current device at once (SMs x blocks an SM), found once per
 * device: the persistent grid. 0 when the query fails. */
template <typename K> int64_t resident_blocks(K kernel, size_t bytes) {
    static std::atomic<int64_t> known[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
    int64_t n = known[dev].load(std::memory_order_relaxed);
    if (n > 0) return n;
    int sms = 0, per_sm = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, bytes) !=
            cudaSuccess)
        return 0;
    n = (int64_t)sms * per_sm;
    known[dev].store(n, std::memory_order_relaxed);
    return n;
}

template <typename T, int D, bool KR, int MB>
cudaError_t launch(const mma_params<T> &p, cudaStream_t stream) {
    static std::atomic<uint64_t> done{0};
    auto kernel = attention_mma_kernel<T, D, KR, MB>;
    const size_t bytes = tiles<D, KR>::bytes;
    cudaError_t e = allow_shared_once(kernel, bytes, done);
    if (e != cudaSuccess) return e;
    int64_t items = p.bh * ((p.a.s + BQ - 1) / BQ), blocks = items;
    if (items_persist()) {
        const int64_t resident = resident_blocks(kernel, bytes);
        if (resident > 0 && resident < items) blocks = resident;
    }
    kernel<<<dim3((unsigned)blocks), THREADS, bytes, stream>>>(p);
    return cudaGetLastError();
}

template <typename T, bool KR>
cudaError_t launch_d(const mma_params<T> &p, int64_t d, cudaStream_t stream) {
    if (d == 32) return launch<T, 32, KR, 4>(p, stream);
    if (d == 64) return launch<T, 64, KR, 3>(p, stream);
    return launch<T, 128, KR, 2>(p, stream);
}

template <typename T>
cudaError_t run(const void *q, const void *k, const void *v, const void *scale, bool scale_mul,
                const void *mask, const int64_t ms[4], void *out, const cuda_attn_strides *st,
                int64_t b, int64_t h, int64_t s, int64_t d, cudaStream_t stream) {
    mma_params<T> p;
    p.a = attn_params_make<T>(q, k, v, scale, scale_mul, mask, ms, out, h, s);
    p.st = *st;
    p.bh = b * h;
    p.mask_pairs = ms[3] == 1 && ((uintptr_t)mask & 3) == 0 && ms[0] % 2 == 0 && ms[1] % 2 == 0 &&
                   ms[2] % 2 == 0;
    if (st->k[3] == 1) return launch_d<T, true>(p, d, stream);
    return launch_d<T, false>(p, d, stream);
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

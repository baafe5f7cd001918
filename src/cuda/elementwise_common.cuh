// elementwise_common.cuh: device helpers shared by elementwise.cu and elementwise_binary.cu:
// conversions matching graft's CPU ones, vector loads, and the flat and broadcast kernels.
#ifndef GRAFT_CUDA_ELEMENTWISE_COMMON_CUH
#define GRAFT_CUDA_ELEMENTWISE_COMMON_CUH

#include <stdint.h>

#include <algorithm>
#include <type_traits>

#include "cuda/elementwise_launch.h"
#include "cuda/kernel_common.cuh"

namespace ew {

// ---- scalar types ----------------------------------------------------------------------------

template <class T> struct is_half16 : std::false_type {};
template <> struct is_half16<__half> : std::true_type {};
template <> struct is_half16<__nv_bfloat16> : std::true_type {};

template <class T>
constexpr bool is_floating = std::is_floating_point<T>::value || is_half16<T>::value;

// The type arithmetic happens in: f32 for the 16-bit floats, the type itself otherwise.
template <class T> struct compute { using type = T; };
template <> struct compute<__half> { using type = float; };
template <> struct compute<__nv_bfloat16> { using type = float; };
template <class T> using compute_t = typename compute<T>::type;

template <class T> __device__ __forceinline__ compute_t<T> load(T v) {
    return v;
}
template <> __device__ __forceinline__ float load<__half>(__half v) {
    return __half2float(v);
}
template <> __device__ __forceinline__ float load<__nv_bfloat16>(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

// f32 -> 16-bit float, round to nearest even; NaN keeps its sign and top payload bits (quieted)
// the way graft's f32_to_f16 / f32_to_bf16 do, so Cast is bit-identical to the CPU.
__device__ __forceinline__ __half f32_to_f16(float f) {
    if (f != f) {
        unsigned u = __float_as_uint(f);
        unsigned short h =
            (unsigned short)(((u >> 16) & 0x8000u) | 0x7c00u | 0x200u | ((u & 0x7fffffu) >> 13));
        return __ushort_as_half(h);
    }
    return __float2half_rn(f);
}
__device__ __forceinline__ __nv_bfloat16 f32_to_bf16(float f) {
    if (f != f) {
        unsigned u = __float_as_uint(f);
        return __ushort_as_bfloat16((unsigned short)((u >> 16) | 0x40u));
    }
    return __float2bfloat16_rn(f);
}
// f64 -> 16-bit float rounded once (the CPU rounds through f32 with round-to-odd: the same).
__device__ __forceinline__ __half f64_to_f16(double d) {
    return d != d ? f32_to_f16((float)d) : __double2half(d);
}
__device__ __forceinline__ __nv_bfloat16 f64_to_bf16(double d) {
    return d != d ? f32_to_bf16((float)d) : __double2bfloat16(d);
}
// Truncate toward zero into int64, saturating, NaN to 0 (scalar_f64_to_int for signed targets).
__device__ __forceinline__ int64_t f64_to_i64(double d) {
    if (d != d) return 0;
    if (d >= 9223372036854775808.0) return INT64_MAX;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)d;
}

// Store a computed value into element type T (a no-op conversion for the native types).
template <class T, class C> __device__ __forceinline__ T store(C v) {
    return (T)v;
}
template <> __device__ __forceinline__ __half store<__half, float>(float v) {
    return f32_to_f16(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16, float>(float v) {
    return f32_to_bf16(v);
}
template <> __device__ __forceinline__ __half store<__half, double>(double v) {
    return f64_to_f16(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16, double>(double v) {
    return f64_to_bf16(v);
}

// ---- vectors ---------------------------------------------------------------------------------

template <class T, int V> struct alignas(sizeof(T) * V) vec { T v[V]; };

// Elements per 16-byte access for the widest of the types (at least 1).
template <class... T> constexpr int vec_width() {
    constexpr size_t widest = std::max({sizeof(T)...});
    return widest >= 16 ? 1 : (int)(16 / widest);
}

template <int V> inline bool aligned(const void *p, size_t elem) {
    return ((uintptr_t)p % (elem * (size_t)V)) == 0;
}

// ---- launch shapes ---------------------------------------------------------------------------

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; grid-stride loops do the rest.
constexpr int64_t kMaxBlocks = 8192;

inline unsigned grid_for(int64_t work, int threads = kThreads) {
    return grid_size(work, threads, kMaxBlocks);
}

// ---- flat kernels (one input, contiguous): unary ops, Not, Cast ------------------------------

// y[i] = f(x[i]); with V > 1, x and y are aligned to V elements and the tail runs scalar. No
// __restrict__ here or below: the output may be an input's own memory (in place).
template <int V, class F, class TI, class TO>
__global__ void flat_kernel(F f, const TI *x, TO *y, int64_t n) {
    int64_t tid = global_thread(), step = grid_threads();
    int64_t nv = n / V;
    for (int64_t i = tid; i < nv; i += step) {
        vec<TI, V> a = reinterpret_cast<const vec<TI, V> *>(x)[i];
        vec<TO, V> r;
#pragma unroll
        for (int j = 0; j < V; j++) r.v[j] = f(a.v[j]);
        reinterpret_cast<vec<TO, V> *>(y)[i] = r;
    }
    for (int64_t i = nv * V + tid; i < n; i += step) y[i] = f(x[i]);
}

// Launch f over n elements, vectorised when both pointers allow it.
template <class F, class TI, class TO>
cudaError_t launch_flat(F f, const void *x, void *y, int64_t n, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    constexpr int V = vec_width<TI, TO>();
    const TI *xi = static_cast<const TI *>(x);
    TO *yo = static_cast<TO *>(y);
    if (V > 1 && aligned<V>(x, sizeof(TI)) && aligned<V>(y, sizeof(TO)))
        flat_kernel<V><<<grid_for(n / V + 1), kThreads, 0, s>>>(f, xi, yo, n);
    else
        flat_kernel<1><<<grid_for(n), kThreads, 0, s>>>(f, xi, yo, n);
    return cudaGetLastError();
}

// ---- broadcast kernels (two or three inputs) -------------------------------------------------

// The inputs of one broadcast op: NIN of them (2 or 3), of element types A, B, C.
template <int NIN, class A, class B, class C> struct inputs {
    const A *a;
    const B *b;
    const C *c;
};

template <int NIN, class F, class A, class B, class C>
__device__ __forceinline__ auto apply(const F &f, A a, B b, C c) {
    if constexpr (NIN == 3)
        return f(a, b, c);
    else
        return f(a, b);
}

// Element offsets of every input for output element i (general path, any rank).
template <int NIN, class Idx>
__device__ __forceinline__ void offsets(const ew_plan &p, Idx i, Idx *off) {
#pragma unroll
    for (int k = 0; k < NIN; k++) off[k] = 0;
#pragma unroll
    for (int d = 0; d < GRAFT_MAX_DIMS; d++) {
        if (d >= p.ndim) break;
        Idx c = i;
        if (d < p.ndim - 1) {
            Idx q = i / (Idx)p.dims[d];
            c = i - q * (Idx)p.dims[d];
            i = q;
        }
#pragma unroll
        for (int k = 0; k < NIN; k++) off[k] += c * (Idx)p.strides[k][d];
    }
}

// One thread per output element, offsets from the plan's dims: used when the inner dim is too
// short to give a block useful work. Idx is 32-bit when the output has under 2^31 elements.
template <int NIN, class Idx, class F, class A, class B, class C, class O>
__global__ void general_kernel(F f, ew_plan p, inputs<NIN, A, B, C> in, O *y) {
    Idx n = (Idx)p.numel;
    Idx step = (Idx)gridDim.x * (Idx)blockDim.x;
    for (Idx i = (Idx)blockIdx.x * (Idx)blockDim.x + (Idx)threadIdx.x; i < n; i += step) {
        Idx off[3];
        offsets<NIN, Idx>(p, i, off);
        C cv{};
        if constexpr (NIN == 3) cv = in.c[off[2]];
        y[i] = apply<NIN>(f, in.a[off[0]], in.b[off[1]], cv);
    }
}

// V consecutive elements of one row of an input whose inner stride s is 0 or 1 (any s for
// V == 1); with s == 1 and V > 1 the row base is aligned to V elements.
template <int V, class T>
__device__ __forceinline__ vec<T, V> load_row(const T *row, int64_t s, int64_t col) {
    vec<T, V> r;
    if (s == 0) {
        T v = row[0];
#pragma unroll
        for (int j = 0; j < V; j++) r.v[j] = v;
    } else if (V == 1) {
        r.v[0] = row[col * s];
    } else {
        r = *reinterpret_cast<const vec<T, V> *>(row + col);
    }
    return r;
}

// Offsets of every input at the start of row r (the plan's dims above the inner one).
template <int NIN>
__device__ __forceinline__ void row_offsets(const ew_plan &p, int64_t r, int64_t *off) {
#pragma unroll
    for (int k = 0; k < NIN; k++) off[k] = 0;
#pragma unroll
    for (int d = 1; d < GRAFT_MAX_DIMS; d++) {
        if (d >= p.ndim) break;
        int64_t q = r / p.dims[d], c = r - q * p.dims[d];
        r = q;
#pragma unroll
        for (int k = 0; k < NIN; k++) off[k] += c * p.strides[k][d];
    }
}

// Rows of the inner dim: blockIdx.y walks rows (row offsets computed once per row), x-threads
// walk V-element column groups with no division. Covers the equal-shape case (one row), a
// scalar operand, and a row vector broadcast over the leading dims (a bias), vectorised.
template <int NIN, int V, class F, class A, class B, class C, class O>
__global__ void rows_kernel(F f, ew_plan p, inputs<NIN, A, B, C> in, O *y) {
    const int64_t inner = p.dims[0], rows = p.numel / inner, nv = inner / V;
    const int64_t sa = p.strides[0][0], sb = p.strides[1][0], sc = p.strides[2][0];
    const int64_t tid = global_thread(), step = grid_threads();
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t off[3];
        row_offsets<NIN>(p, r, off);
        const A *ra = in.a + off[0];
        const B *rb = in.b + off[1];
        const C *rc = in.c + (NIN == 3 ? off[2] : 0);
        O *ry = y + r * inner;
        for (int64_t g = tid; g < nv; g += step) {
            vec<A, V> va = load_row<V>(ra, sa, g * V);
            vec<B, V> vb = load_row<V>(rb, sb, g * V);
            vec<C, V> vc{};
            if constexpr (NIN == 3) vc = load_row<V>(rc, sc, g * V);
            vec<O, V> vy;
#pragma unroll
            for (int j = 0; j < V; j++) vy.v[j] = apply<NIN>(f, va.v[j], vb.v[j], vc.v[j]);
            *reinterpret_cast<vec<O, V> *>(ry + g * V) = vy;
        }
        // The tail of a row that is not a multiple of V (only when there is one row).
        for (int64_t col = nv * V + tid; col < inner; col += step) {
            C cv{};
            if constexpr (NIN == 3) cv = rc[col * sc];
            ry[col] = apply<NIN>(f, ra[col * sa], rb[col * sb], cv);
        }
    }
}

// Can the rows kernel run with V-wide accesses? Every input's inner stride is 0 or 1; an input
// read contiguously has an aligned base and row starts; the output too.
template <int V>
inline bool rows_vectorisable(const ew_plan &p, int nin, const void *const *ptr,
                              const size_t *esize, const void *y, size_t ysize) {
    const int64_t inner = p.dims[0], rows = p.numel / inner;
    if (!aligned<V>(y, ysize) || (rows > 1 && inner % V != 0)) return false;
    for (int k = 0; k < nin; k++) {
        if (p.strides[k][0] == 0) continue;
        if (p.strides[k][0] != 1 || !aligned<V>(ptr[k], esize[k])) return false;
        for (int d = 1; d < p.ndim && rows > 1; d++)
            if (p.strides[k][d] % V != 0) return false;
    }
    return true;
}

// Run f over the plan: the rows kernel (vectorised when it can be) while the inner dim gives a
// block at least a warp of work, the general kernel otherwise.
template <int NIN, class F, class A, class B, class C, class O>
cudaError_t launch_bcast(F f, const ew_plan &p, const void *a, const void *b, const void *c,
                         void *y, cudaStream_t s) {
    if (p.numel <= 0) return cudaSuccess;
    constexpr int V = vec_width<A, B, C, O>();
    inputs<NIN, A, B, C> in{static_cast<const A *>(a), static_cast<const B *>(b),
                            static_cast<const C *>(c)};
    O *yo = static_cast<O *>(y);
    const int64_t inner = p.dims[0], rows = p.numel / inner;
    const void *ptr[3] = {a, b, c};
    const size_t esize[3] = {sizeof(A), sizeof(B), sizeof(C)};
    bool vectorise = V > 1 && rows_vectorisable<V>(p, NIN, ptr, esize, y, sizeof(O));
    int64_t groups = vectorise ? inner / V : inner;
    if (rows == 1 || groups >= 32) {
        int threads = groups >= kThreads ? kThreads : (int)((groups + 31) / 32 * 32);
        if (threads < 32) threads = 32;
        // Blocks along y take rows in turn; keep the whole grid near kMaxBlocks * 8 blocks.
        unsigned gx = grid_for(groups, threads);
        int64_t gy = rows < 65535 ? rows : 65535, cap = kMaxBlocks * 8 / gx;
        dim3 grid(gx, (unsigned)(gy < cap ? gy : cap > 0 ? cap : 1));
        if (vectorise)
            rows_kernel<NIN, V><<<grid, threads, 0, s>>>(f, p, in, yo);
        else
            rows_kernel<NIN, 1><<<grid, threads, 0, s>>>(f, p, in, yo);
    } else if (p.numel < ((int64_t)1 << 31)) {
        general_kernel<NIN, uint32_t><<<grid_for(p.numel), kThreads, 0, s>>>(f, p, in, yo);
    } else {
        general_kernel<NIN, int64_t><<<grid_for(p.numel), kThreads, 0, s>>>(f, p, in, yo);
    }
    return cudaGetLastError();
}

} // namespace ew

#endif

/* tensor.cu: data-movement kernels (strided and tiled copies, Concat/Split pieces, Gather, Pad,
 * fills, Range); they move units of 1 to 16 bytes, so every dtype shares them. */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernel_common.cuh"
#include "tensor_launch.h"

/* Unroll in device code; the host compiler (which also sees __host__ __device__ code) would warn
 * about the pragma. */
#ifdef __CUDA_ARCH__
#define DEVICE_UNROLL _Pragma("unroll")
#else
#define DEVICE_UNROLL
#endif

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;            /* units per thread per pass: independent loads in flight */
constexpr int64_t kMaxBlocks = 65536; /* grid-stride loops cover the rest */
constexpr int kTile = 32, kTileRows = 8;

/* Unsigned division by a run-time constant as a multiply-high and a shift (Granlund and
 * Montgomery): exact for n < 2^31 and 1 <= d <= 2^31, which the 32-bit paths guarantee. */
struct div32 {
    using index = uint32_t;
    using offset = int32_t;
    uint32_t d, m, s;
    static div32 make(int64_t d) {
        uint32_t s = 0;
        while ((uint64_t(1) << s) < uint64_t(d)) s++;
        uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << s) - uint64_t(d))) / uint64_t(d) + 1;
        return div32{uint32_t(d), uint32_t(m), s};
    }
    __host__ __device__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
        uint32_t hi = __umulhi(n, m);
#else
        uint32_t hi = uint32_t((uint64_t(n) * m) >> 32);
#endif
        return (hi + n) >> s;
    }
};

/* The 64-bit path for tensors past 2^31 units: plain division. */
struct div64 {
    using index = int64_t;
    using offset = int64_t;
    int64_t d;
    static div64 make(int64_t d) { return div64{d}; }
    __host__ __device__ int64_t div(int64_t n) const { return n / d; }
};

/* 32-bit indexing when every index and offset of the launch stays below 2^31. */
bool fits32(int64_t v) {
    return v >= 0 && v < (int64_t(1) << 31);
}

unsigned blocks_for(int64_t work, int64_t per_block) {
    return grid_size(work, per_block, kMaxBlocks);
}

/* Call f with a value of the unsigned type of `unit` bytes. */
template <typename F> cudaError_t by_unit(int unit, F f) {
    switch (unit) {
    case 1:
        return f(uint8_t{});
    case 2:
        return f(uint16_t{});
    case 4:
        return f(uint32_t{});
    case 8:
        return f(uint64_t{});
    case 16:
        return f(uint4{});
    default:
        return cudaErrorInvalidValue;
    }
}

/* Grid-stride loop over [0, total) that issues kUnroll loads before their stores, keeping
 * several memory requests in flight per thread; consecutive threads take consecutive indices. */
template <typename Idx, typename Load, typename Store>
__device__ __forceinline__ void unrolled_loop(Idx total, Load load, Store store) {
    using T = decltype(load(Idx(0)));
    const Idx stride = Idx(blockDim.x) * gridDim.x * kUnroll;
    for (Idx base = Idx(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x; base < total;
         base += stride) {
        T v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            Idx i = base + Idx(u) * blockDim.x;
            if (i < total) v[u] = load(i);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            Idx i = base + Idx(u) * blockDim.x;
            if (i < total) store(i, v[u]);
        }
    }
}

/* ---- strided views ---------------------------------------------------------------------- */

template <typename Div> struct view_params {
    int ndim;
    Div dim[CUDA_TENSOR_VIEW_DIMS];
    typename Div::offset stride[CUDA_TENSOR_VIEW_DIMS];
};

/* Source offset of dense index i: its coordinates, last axis fastest, dotted with the strides.
 * The loop is unrolled over the fixed maximum so the parameters are indexed statically. */
template <typename Div>
__host__ __device__ __forceinline__ typename Div::offset view_offset(const view_params<Div> &p,
                                                                     typename Div::index i) {
    using Off = typename Div::offset;
    Off off = 0;
    DEVICE_UNROLL
    for (int k = CUDA_TENSOR_VIEW_DIMS - 1; k >= 1; k--) {
        if (k < p.ndim) {
            typename Div::index q = p.dim[k].div(i);
            off += Off(i - q * p.dim[k].d) * p.stride[k];
            i = q;
        }
    }
    return off + Off(i) * p.stride[0];
}

template <typename T, typename Div>
__global__ void __launch_bounds__(kThreads)
    copy_view_kernel(T *__restrict__ dst, const T *__restrict__ src, typename Div::index total,
                     view_params<Div> p) {
    using Idx = typename Div::index;
    unrolled_loop(
        total, [&](Idx i) { return src[view_offset(p, i)]; }, [&](Idx i, T v) { dst[i] = v; });
}

/* Elements of the view and the largest |offset| it reaches in src. */
void view_extent(int ndim, const int64_t *dims, const int64_t *strides, int64_t *total,
                 int64_t *reach) {
    *total = 1;
    *reach = 0;
    for (int k = 0; k < ndim; k++) {
        *total *= dims[k];
        *reach += (strides[k] < 0 ? -strides[k] : strides[k]) * (dims[k] - 1);
    }
}

template <typename Div>
view_params<Div> make_view_params(int ndim, const int64_t *dims, const int64_t *strides) {
    view_params<Div> p{};
    p.ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        p.dim[k] = Div::make(dims[k]);
        p.stride[k] = typename Div::offset(strides[k]);
    }
    return p;
}

template <typename T, typename Div>
cudaError_t launch_view(void *dst, const void *src, int ndim, const int64_t *dims,
                        const int64_t *strides, int64_t total, cudaStream_t stream) {
    view_params<Div> p = make_view_params<Div>(ndim, dims, strides);
    copy_view_kernel<T, Div><<<blocks_for(total, kThreads * kUnroll), kThreads, 0, stream>>>(
        static_cast<T *>(dst), static_cast<const T *>(src), typename Div::index(total), p);
    return cudaGetLastError();
}

/* ---- tiled transposing copies ----------------------------------------------------------- */

/* A view cut into kTile x kTile tiles over (rows: the axis contiguous in src, cols: the last
 * axis, contiguous in dst); the other axes ("outer") pick which 2-D slab a tile lies in. */
template <typename Div> struct tile_params {
    using Idx = typename Div::index;
    using Off = typename Div::offset;
    int n_outer;
    Div outer[CUDA_TENSOR_VIEW_DIMS];
    Off outer_src[CUDA_TENSOR_VIEW_DIMS], outer_dst[CUDA_TENSOR_VIEW_DIMS];
    Div tiles_j, tiles_i; /* tile counts along cols and rows */
    Idx tiles, rows, cols;
    Off row_src, col_src, row_dst;
};

/* Where tile t starts: its first row and column and its slab's offsets in src and dst. */
template <typename Div>
__host__ __device__ __forceinline__ void
tile_origin(const tile_params<Div> &p, typename Div::index t, typename Div::offset *src_off,
            typename Div::offset *dst_off, typename Div::index *i0, typename Div::index *j0) {
    using Idx = typename Div::index;
    using Off = typename Div::offset;
    Idx q = p.tiles_j.div(t);
    *j0 = (t - q * p.tiles_j.d) * kTile;
    Idx rem = p.tiles_i.div(q);
    *i0 = (q - rem * p.tiles_i.d) * kTile;
    Off so = 0, dso = 0;
    DEVICE_UNROLL
    for (int k = CUDA_TENSOR_VIEW_DIMS - 1; k >= 0; k--) {
        if (k < p.n_outer) {
            Idx r = p.outer[k].div(rem);
            Off c = Off(rem - r * p.outer[k].d);
            so += c * p.outer_src[k];
            dso += c * p.outer_dst[k];
            rem = r;
        }
    }
    *src_off = so;
    *dst_off = dso;
}

/* Each block moves whole tiles: warps read tile columns along the src-contiguous axis, then
 * write tile rows along the last axis; the padded column keeps shared-memory banks apart. */
template <typename T, typename Div>
__global__ void __launch_bounds__(kTile *kTileRows)
    copy_tiled_kernel(T *__restrict__ dst, const T *__restrict__ src, tile_params<Div> p) {
    using Idx = typename Div::index;
    using Off = typename Div::offset;
    __shared__ T tile[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (Idx t = blockIdx.x; t < p.tiles; t += gridDim.x) {
        Off so, dso;
        Idx i0, j0;
        tile_origin(p, t, &so, &dso, &i0, &j0);
        Idx i = i0 + tx;
        for (int b = ty; b < kTile; b += kTileRows) {
            Idx j = j0 + b;
            if (i < p.rows && j < p.cols)
                tile[b][tx] = src[so + Off(i) * p.row_src + Off(j) * p.col_src];
        }
        __syncthreads();
        Idx j = j0 + tx;
        for (int a = ty; a < kTile; a += kTileRows) {
            Idx ia = i0 + a;
            if (ia < p.rows && j < p.cols) dst[dso + Off(ia) * p.row_dst + Off(j)] = tile[tx][a];
        }
        __syncthreads();
    }
}

template <typename Div>
tile_params<Div> make_tile_params(int ndim, const int64_t *dims, const int64_t *strides, int axis) {
    using Off = typename Div::offset;
    using Idx = typename Div::index;
    int64_t dense[CUDA_TENSOR_VIEW_DIMS];
    dense[ndim - 1] = 1;
    for (int k = ndim - 2; k >= 0; k--) dense[k] = dense[k + 1] * dims[k + 1];
    tile_params<Div> p{};
    int64_t outer = 1;
    for (int k = 0; k < ndim - 1; k++) {
        if (k == axis) continue;
        p.outer[p.n_outer] = Div::make(dims[k]);
        p.outer_src[p.n_outer] = Off(strides[k]);
        p.outer_dst[p.n_outer] = Off(dense[k]);
        p.n_outer++;
        outer *= dims[k];
    }
    int64_t rows = dims[axis], cols = dims[ndim - 1];
    int64_t ti = (rows + kTile - 1) / kTile, tj = (cols + kTile - 1) / kTile;
    p.tiles_i = Div::make(ti);
    p.tiles_j = Div::make(tj);
    p.tiles = Idx(outer * ti * tj);
    p.rows = Idx(rows);
    p.cols = Idx(cols);
    p.row_src = Off(strides[axis]);
    p.col_src = Off(strides[ndim - 1]);
    p.row_dst = Off(dense[axis]);
    return p;
}

template <typename T, typename Div>
cudaError_t launch_tiled(void *dst, const void *src, int ndim, const int64_t *dims,
                         const int64_t *strides, int axis, cudaStream_t stream) {
    tile_params<Div> p = make_tile_params<Div>(ndim, dims, strides, axis);
    copy_tiled_kernel<T, Div>
        <<<blocks_for(int64_t(p.tiles), 1), dim3(kTile, kTileRows), 0, stream>>>(
            static_cast<T *>(dst), static_cast<const T *>(src), p);
    return cudaGetLastError();
}

/* ---- Concat / Split pieces --------------------------------------------------------------- */

template <typename Div> struct pieces_params {
    void *piece[CUDA_TENSOR_PIECES];
    Div width[CUDA_TENSOR_PIECES];
    typename Div::offset offset[CUDA_TENSOR_PIECES];
    typename Div::offset row_width;
    typename Div::index rows;
};

/* Offset in whole of unit i of a piece w units wide that starts at offset off in each row. */
template <typename Div>
__host__ __device__ __forceinline__ typename Div::offset
piece_offset(const Div &w, typename Div::offset row_width, typename Div::offset off,
             typename Div::index i) {
    typename Div::index r = w.div(i);
    return typename Div::offset(r) * row_width + off + typename Div::offset(i - r * w.d);
}

/* blockIdx.y picks the piece; the unrolled search keeps parameter indexing static. */
template <typename T, typename Div, bool Join>
__global__ void __launch_bounds__(kThreads)
    pieces_kernel(T *__restrict__ whole, pieces_params<Div> p) {
    using Idx = typename Div::index;
    using Off = typename Div::offset;
    T *piece = nullptr;
    Div w{};
    Off off = 0;
#pragma unroll
    for (int k = 0; k < CUDA_TENSOR_PIECES; k++) {
        if (k == int(blockIdx.y)) {
            piece = static_cast<T *>(p.piece[k]);
            w = p.width[k];
            off = p.offset[k];
        }
    }
    auto at = [&](Idx i) { return piece_offset(w, p.row_width, off, i); };
    Idx total = p.rows * Idx(w.d);
    if (Join)
        unrolled_loop(
            total, [&](Idx i) { return piece[i]; }, [&](Idx i, T v) { whole[at(i)] = v; });
    else
        unrolled_loop(
            total, [&](Idx i) { return whole[at(i)]; }, [&](Idx i, T v) { piece[i] = v; });
}

/* The non-empty pieces (empty ones move nothing) in p; returns their count. */
template <typename Div>
int make_pieces_params(pieces_params<Div> *p, void *const *pieces, const int64_t *widths,
                       const int64_t *offsets, int n, int64_t rows, int64_t row_width,
                       int64_t *widest) {
    *p = pieces_params<Div>{};
    int m = 0;
    *widest = 0;
    for (int k = 0; k < n; k++) {
        if (widths[k] <= 0) continue;
        p->piece[m] = pieces[k];
        p->width[m] = Div::make(widths[k]);
        p->offset[m] = typename Div::offset(offsets[k]);
        if (widths[k] > *widest) *widest = widths[k];
        m++;
    }
    p->row_width = typename Div::offset(row_width);
    p->rows = typename Div::index(rows);
    return m;
}

template <typename T, typename Div>
cudaError_t launch_pieces(void *whole, void *const *pieces, const int64_t *widths,
                          const int64_t *offsets, int n, int64_t rows, int64_t row_width, bool join,
                          cudaStream_t stream) {
    pieces_params<Div> p;
    int64_t widest;
    int m = make_pieces_params(&p, pieces, widths, offsets, n, rows, row_width, &widest);
    if (m == 0) return cudaSuccess;
    dim3 grid(blocks_for(rows * widest, kThreads * kUnroll), unsigned(m));
    if (join)
        pieces_kernel<T, Div, true><<<grid, kThreads, 0, stream>>>(static_cast<T *>(whole), p);
    else
        pieces_kernel<T, Div, false><<<grid, kThreads, 0, stream>>>(static_cast<T *>(whole), p);
    return cudaGetLastError();
}

/* ---- Gather ----------------------------------------------------------------------------- */

/* Out-of-range indices: the CPU reference rejects them before copying anything, but here the
 * indices live on the device and the host cannot see them without synchronizing. Rather than
 * clamping (silently plausible output) or reading out of bounds, the kernel writes zeros for
 * such rows and raises *bad (when given) for the backend to check at its next synchronization. */
template <typename I, typename Div>
__host__ __device__ __forceinline__ typename Div::offset
gather_offset(const I *indices, const Div &inner, const Div &count, int64_t axis_dim,
              typename Div::index i, int64_t *given) {
    using Idx = typename Div::index;
    using Off = typename Div::offset;
    Idx q = inner.div(i), c = i - q * inner.d;
    Idx o = count.div(q), j = q - o * count.d;
    int64_t k = int64_t(indices[j]);
    *given = k;
    if (k < 0) k += axis_dim;
    if (k < 0 || k >= axis_dim) return -1;
    return (Off(o) * Off(axis_dim) + Off(k)) * Off(inner.d) + Off(c);
}

template <typename T, typename I, typename Div>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(T *__restrict__ dst, const T *__restrict__ src, const I *__restrict__ indices,
                  typename Div::index total, Div inner, Div count, int64_t axis_dim,
                  cuda_gather_fault *bad) {
    using Idx = typename Div::index;
    unrolled_loop(
        total,
        [&](Idx i) {
            int64_t given = 0;
            typename Div::offset off = gather_offset(indices, inner, count, axis_dim, i, &given);
            if (off < 0) {
                if (bad && atomicCAS(&bad->raised, 0, 1) == 0) {
                    bad->index = given;
                    bad->axis_dim = axis_dim;
                }
                return T{};
            }
            return src[off];
        },
        [&](Idx i, T v) { dst[i] = v; });
}

template <typename T, typename Div>
cudaError_t launch_gather(void *dst, const void *src, const void *indices, bool i64, int64_t outer,
                          int64_t axis_dim, int64_t n, int64_t inner, cuda_gather_fault *bad,
                          cudaStream_t stream) {
    int64_t total = outer * n * inner;
    unsigned blocks = blocks_for(total, kThreads * kUnroll);
    T *d = static_cast<T *>(dst);
    const T *s = static_cast<const T *>(src);
    Div din = Div::make(inner), dn = Div::make(n);
    auto t = typename Div::index(total);
    if (i64)
        gather_kernel<T, int64_t, Div><<<blocks, kThreads, 0, stream>>>(
            d, s, static_cast<const int64_t *>(indices), t, din, dn, axis_dim, bad);
    else
        gather_kernel<T, int32_t, Div><<<blocks, kThreads, 0, stream>>>(
            d, s, static_cast<const int32_t *>(indices), t, din, dn, axis_dim, bad);
    return cudaGetLastError();
}

/* ---- Pad -------------------------------------------------------------------------------- */

template <typename Div> struct pad_params {
    int ndim, mode;
    Div out_dim[GRAFT_MAX_DIMS];
    int64_t in_dim[GRAFT_MAX_DIMS], begin[GRAFT_MAX_DIMS], in_stride[GRAFT_MAX_DIMS];
};

/* The input index that output index o of an axis reads, or -1 for the constant (as the CPU
 * reference's pad_source). */
__host__ __device__ __forceinline__ int64_t pad_source(int mode, int64_t o, int64_t begin,
                                                       int64_t dim) {
    int64_t i = o - begin;
    if (i >= 0 && i < dim) return i;
    if (dim == 0) return -1;
    switch (mode) {
    case CUDA_PAD_EDGE:
        return i < 0 ? 0 : dim - 1;
    case CUDA_PAD_WRAP:
        return ((i % dim) + dim) % dim;
    case CUDA_PAD_REFLECT: {
        if (dim == 1) return 0;
        /* Reflection without repeating the edge is periodic with period 2 * (dim - 1). */
        int64_t period = 2 * (dim - 1), k = ((i % period) + period) % period;
        return k < dim ? k : period - k;
    }
    default:
        return -1;
    }
}

/* Input offset of output element i, or -1 when it is the constant. */
template <typename Div>
__host__ __device__ __forceinline__ int64_t pad_offset(const pad_params<Div> &p,
                                                       typename Div::index i) {
    int64_t off = 0;
    bool constant = false;
    DEVICE_UNROLL
    for (int k = GRAFT_MAX_DIMS - 1; k >= 0; k--) {
        if (k < p.ndim) {
            typename Div::index q = p.out_dim[k].div(i);
            int64_t s =
                pad_source(p.mode, int64_t(i - q * p.out_dim[k].d), p.begin[k], p.in_dim[k]);
            if (s < 0) constant = true;
            off += s * p.in_stride[k];
            i = q;
        }
    }
    return constant ? -1 : off;
}

template <typename T, typename Div>
__global__ void __launch_bounds__(kThreads)
    pad_kernel(T *__restrict__ dst, const T *__restrict__ src, typename Div::index total,
               pad_params<Div> p, T constant) {
    using Idx = typename Div::index;
    unrolled_loop(
        total,
        [&](Idx i) {
            int64_t off = pad_offset(p, i);
            return off < 0 ? constant : src[off];
        },
        [&](Idx i, T v) { dst[i] = v; });
}

template <typename Div>
pad_params<Div> make_pad_params(int ndim, const int64_t *out_dims, const int64_t *in_dims,
                                const int64_t *begin, int mode) {
    pad_params<Div> p{};
    p.ndim = ndim;
    p.mode = mode;
    int64_t stride = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        p.out_dim[k] = Div::make(out_dims[k]);
        p.in_dim[k] = in_dims[k];
        p.begin[k] = begin[k];
        p.in_stride[k] = stride;
        stride *= in_dims[k];
    }
    return p;
}

template <typename T, typename Div>
cudaError_t launch_pad(void *dst, const void *src, int ndim, const int64_t *out_dims,
                       const int64_t *in_dims, const int64_t *begin, int mode, const void *constant,
                       int64_t total, cudaStream_t stream) {
    pad_params<Div> p = make_pad_params<Div>(ndim, out_dims, in_dims, begin, mode);
    T c;
    std::memcpy(&c, constant, sizeof c);
    pad_kernel<T, Div><<<blocks_for(total, kThreads * kUnroll), kThreads, 0, stream>>>(
        static_cast<T *>(dst), static_cast<const T *>(src), typename Div::index(total), p, c);
    return cudaGetLastError();
}

/* ---- fills and ranges ------------------------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(kThreads) fill_kernel(T *dst, int64_t n, T v) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) dst[i] = v;
}

/* Explicitly rounded operations: the reference computes start + (float)i * delta with two
 * roundings, and a fused multiply-add would round once and differ in the last bit. */
__global__ void __launch_bounds__(kThreads)
    range_f32_kernel(float *dst, int64_t n, float s, float d) {
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        dst[i] = __fadd_rn(s, __fmul_rn(float(i), d));
}

__global__ void __launch_bounds__(kThreads)
    range_f64_kernel(double *dst, int64_t n, double s, double d) {
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        dst[i] = __dadd_rn(s, __dmul_rn(double(i), d));
}

/* Unsigned wrap-around is exact for every value inside [start, limit), as in the reference. */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    range_int_kernel(T *dst, int64_t n, uint64_t s, uint64_t d) {
    for (int64_t i = global_thread(); i < n; i += grid_threads())
        dst[i] = T(int64_t(s + uint64_t(i) * d));
}

template <typename T> uint64_t host_int(const void *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return uint64_t(int64_t(v));
}

} // namespace

extern "C" cudaError_t cuda_tensor_copy_view(void *dst, const void *src, int unit, int ndim,
                                             const int64_t *dims, const int64_t *strides,
                                             cudaStream_t stream) {
    if (ndim < 1 || ndim > CUDA_TENSOR_VIEW_DIMS) return cudaErrorInvalidValue;
    int64_t total, reach;
    view_extent(ndim, dims, strides, &total, &reach);
    if (total <= 0) return cudaSuccess;
    bool narrow = fits32(total) && fits32(reach);
    return by_unit(unit, [&](auto tag) {
        using T = decltype(tag);
        return narrow ? launch_view<T, div32>(dst, src, ndim, dims, strides, total, stream)
                      : launch_view<T, div64>(dst, src, ndim, dims, strides, total, stream);
    });
}

extern "C" cudaError_t cuda_tensor_copy_tiled(void *dst, const void *src, int unit, int ndim,
                                              const int64_t *dims, const int64_t *strides,
                                              int tile_axis, cudaStream_t stream) {
    if (ndim < 2 || ndim > CUDA_TENSOR_VIEW_DIMS || tile_axis < 0 || tile_axis >= ndim - 1 ||
        unit > 8)
        return cudaErrorInvalidValue;
    int64_t total, reach;
    view_extent(ndim, dims, strides, &total, &reach);
    if (total <= 0) return cudaSuccess;
    /* Tile counts stay below the element count, and the kernel computes offsets only for
     * elements inside the view. */
    bool narrow = fits32(total) && fits32(reach);
    return by_unit(unit, [&](auto tag) {
        using T = decltype(tag);
        return narrow ? launch_tiled<T, div32>(dst, src, ndim, dims, strides, tile_axis, stream)
                      : launch_tiled<T, div64>(dst, src, ndim, dims, strides, tile_axis, stream);
    });
}

extern "C" cudaError_t cuda_tensor_copy_pieces(void *whole, void *const *pieces,
                                               const int64_t *widths, const int64_t *offsets, int n,
                                               int64_t rows, int64_t row_width, int unit, bool join,
                                               cudaStream_t stream) {
    if (n < 0 || n > CUDA_TENSOR_PIECES) return cudaErrorInvalidValue;
    if (rows <= 0 || row_width <= 0) return cudaSuccess;
    bool narrow = fits32(rows * row_width);
    return by_unit(unit, [&](auto tag) {
        using T = decltype(tag);
        return narrow ? launch_pieces<T, div32>(whole, pieces, widths, offsets, n, rows, row_width,
                                                join, stream)
                      : launch_pieces<T, div64>(whole, pieces, widths, offsets, n, rows, row_width,
                                                join, stream);
    });
}

extern "C" cudaError_t cuda_tensor_gather(void *dst, const void *src, const void *indices,
                                          bool indices_i64, int64_t outer, int64_t axis_dim,
                                          int64_t n_indices, int64_t inner, int unit,
                                          cuda_gather_fault *bad_index, cudaStream_t stream) {
    if (outer <= 0 || n_indices <= 0 || inner <= 0) return cudaSuccess;
    bool narrow = fits32(outer * n_indices * inner) && fits32(outer * axis_dim * inner);
    return by_unit(unit, [&](auto tag) {
        using T = decltype(tag);
        return narrow ? launch_gather<T, div32>(dst, src, indices, indices_i64, outer, axis_dim,
                                                n_indices, inner, bad_index, stream)
                      : launch_gather<T, div64>(dst, src, indices, indices_i64, outer, axis_dim,
                                                n_indices, inner, bad_index, stream);
    });
}

extern "C" cudaError_t cuda_tensor_pad(void *dst, const void *src, int elem, int ndim,
                                       const int64_t *out_dims, const int64_t *in_dims,
                                       const int64_t *begin, int mode, const void *constant,
                                       cudaStream_t stream) {
    if (ndim < 1 || ndim > GRAFT_MAX_DIMS || elem > 8) return cudaErrorInvalidValue;
    int64_t total = 1;
    for (int k = 0; k < ndim; k++) total *= out_dims[k];
    if (total <= 0) return cudaSuccess;
    bool narrow = fits32(total);
    return by_unit(elem, [&](auto tag) {
        using T = decltype(tag);
        return narrow ? launch_pad<T, div32>(dst, src, ndim, out_dims, in_dims, begin, mode,
                                             constant, total, stream)
                      : launch_pad<T, div64>(dst, src, ndim, out_dims, in_dims, begin, mode,
                                             constant, total, stream);
    });
}

extern "C" cudaError_t cuda_tensor_fill(void *dst, int64_t n, int unit, const void *pattern,
                                        cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    return by_unit(unit, [&](auto tag) {
        using T = decltype(tag);
        T v;
        std::memcpy(&v, pattern, sizeof v);
        fill_kernel<T>
            <<<blocks_for(n, kThreads), kThreads, 0, stream>>>(static_cast<T *>(dst), n, v);
        return cudaGetLastError();
    });
}

extern "C" cudaError_t cuda_tensor_range(void *dst, graft_dtype dtype, int64_t n, const void *start,
                                         const void *delta, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    unsigned blocks = blocks_for(n, kThreads);
    switch (dtype) {
    case GRAFT_DTYPE_F32: {
        float s, d;
        std::memcpy(&s, start, sizeof s);
        std::memcpy(&d, delta, sizeof d);
        range_f32_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float *>(dst), n, s, d);
        break;
    }
    case GRAFT_DTYPE_F64: {
        double s, d;
        std::memcpy(&s, start, sizeof s);
        std::memcpy(&d, delta, sizeof d);
        range_f64_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<double *>(dst), n, s, d);
        break;
    }
    case GRAFT_DTYPE_I64:
        range_int_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(
            static_cast<int64_t *>(dst), n, host_int<int64_t>(start), host_int<int64_t>(delta));
        break;
    case GRAFT_DTYPE_I32:
        range_int_kernel<int32_t><<<blocks, kThreads, 0, stream>>>(
            static_cast<int32_t *>(dst), n, host_int<int32_t>(start), host_int<int32_t>(delta));
        break;
    case GRAFT_DTYPE_I16:
        range_int_kernel<int16_t><<<blocks, kThreads, 0, stream>>>(
            static_cast<int16_t *>(dst), n, host_int<int16_t>(start), host_int<int16_t>(delta));
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

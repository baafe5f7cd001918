/* tensor_index.cu: the indexing kernels (GatherElements, GatherND, ScatterND) and Trilu: a
 * thread per output (or update) element, indices read on the device and checked there. */
#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_common.cuh"
#include "tensor_index_launch.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536; /* grid-stride loops cover the rest */

unsigned blocks_for(int64_t work) {
    return grid_size(work, kThreads, kMaxBlocks);
}

/* Call f with a value of the unsigned type of `elem` bytes. */
template <typename F> cudaError_t by_elem(int elem, F f) {
    switch (elem) {
    case 1:
        return f(uint8_t{});
    case 2:
        return f(uint16_t{});
    case 4:
        return f(uint32_t{});
    case 8:
        return f(uint64_t{});
    default:
        return cudaErrorInvalidValue;
    }
}

/* Index k normalised into [0, dim); out of range records the first fault and gives -1. */
__device__ __forceinline__ int64_t checked_index(int64_t k, int64_t dim, cuda_gather_fault *bad) {
    int64_t given = k;
    if (k < 0) k += dim;
    if (k >= 0 && k < dim) return k;
    if (bad && atomicCAS(&bad->raised, 0, 1) == 0) {
        bad->index = given;
        bad->axis_dim = dim;
    }
    return -1;
}

struct elements_params {
    int ndim, axis;
    int64_t axis_dim, total;
    int64_t idx_dims[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS];
};

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    gather_elements_kernel(T *__restrict__ dst, const T *__restrict__ src,
                           const I *__restrict__ idx, elements_params p, cuda_gather_fault *bad) {
    for (int64_t i = global_thread(); i < p.total; i += grid_threads()) {
        int64_t rem = i, off = 0;
        for (int d = p.ndim - 1; d >= 0; d--) {
            int64_t coord = rem % p.idx_dims[d];
            rem /= p.idx_dims[d];
            if (d != p.axis) off += coord * p.strides[d];
        }
        int64_t k = checked_index(int64_t(idx[i]), p.axis_dim, bad);
        dst[i] = k < 0 ? T{} : src[off + k * p.strides[p.axis]];
    }
}

/* The data offset of tuple t, or -1 when one of its indices is out of range. */
template <typename I>
__device__ __forceinline__ int64_t tuple_offset(const I *idx, const cuda_nd_tuples &p, int64_t t,
                                                cuda_gather_fault *bad) {
    int64_t off = (t / p.tuples) * p.batch_stride;
    for (int j = 0; j < p.m; j++) {
        int64_t k = checked_index(int64_t(idx[t * p.m + j]), p.dims[j], bad);
        if (k < 0) return -1;
        off += k * p.strides[j];
    }
    return off;
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    gather_nd_kernel(T *__restrict__ dst, const T *__restrict__ src, const I *__restrict__ idx,
                     cuda_nd_tuples p, int64_t total, cuda_gather_fault *bad) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t t = i / p.slice, s = i - t * p.slice;
        int64_t off = tuple_offset(idx, p, t, bad);
        dst[i] = off < 0 ? T{} : src[off + s];
    }
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    scatter_nd_kernel(T *__restrict__ dst, const T *__restrict__ upd, const I *__restrict__ idx,
                      cuda_nd_tuples p, int64_t total, cuda_gather_fault *bad) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t t = i / p.slice, s = i - t * p.slice;
        int64_t off = tuple_offset(idx, p, t, bad);
        if (off >= 0) dst[off + s] = upd[i];
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    trilu_kernel(T *__restrict__ dst, const T *__restrict__ src, int64_t total, int64_t rows,
                 int64_t cols, int64_t k, bool upper) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t col = i % cols, row = (i / cols) % rows;
        bool keep = upper ? col - row >= k : col - row <= k;
        dst[i] = keep ? src[i] : T{};
    }
}

/* Launch KERNEL<T, I> with the indices cast to I (int64 or int32) and the other arguments. */
#define BY_INDEX(i64, KERNEL, blocks, stream, dst, src, indices, ...)                              \
    do {                                                                                           \
        if (i64)                                                                                   \
            KERNEL<T, int64_t><<<blocks, kThreads, 0, stream>>>(                                   \
                dst, src, static_cast<const int64_t *>(indices), __VA_ARGS__);                     \
        else                                                                                       \
            KERNEL<T, int32_t><<<blocks, kThreads, 0, stream>>>(                                   \
                dst, src, static_cast<const int32_t *>(indices), __VA_ARGS__);                     \
    } while (0)

} // namespace

extern "C" cudaError_t cuda_gather_elements(void *dst, const void *src, const void *indices,
                                            bool i64, int elem, int ndim, const int64_t *idx_dims,
                                            const int64_t *src_strides, int axis, int64_t axis_dim,
                                            cuda_gather_fault *fault, cudaStream_t stream) {
    if (ndim < 1 || ndim > GRAFT_MAX_DIMS) return cudaErrorInvalidValue;
    elements_params p{};
    p.ndim = ndim;
    p.axis = axis;
    p.axis_dim = axis_dim;
    p.total = 1;
    for (int d = 0; d < ndim; d++) {
        p.idx_dims[d] = idx_dims[d];
        p.strides[d] = src_strides[d];
        p.total *= idx_dims[d];
    }
    if (p.total <= 0) return cudaSuccess;
    return by_elem(elem, [&](auto tag) {
        using T = decltype(tag);
        BY_INDEX(i64, gather_elements_kernel, blocks_for(p.total), stream, static_cast<T *>(dst),
                 static_cast<const T *>(src), indices, p, fault);
        return cudaGetLastError();
    });
}

extern "C" cudaError_t cuda_gather_nd(void *dst, const void *src, const void *indices, bool i64,
                                      int elem, const cuda_nd_tuples *p, cuda_gather_fault *fault,
                                      cudaStream_t stream) {
    int64_t total = p->batches * p->tuples * p->slice;
    if (total <= 0) return cudaSuccess;
    if (p->m < 1 || p->m > GRAFT_MAX_DIMS) return cudaErrorInvalidValue;
    cuda_nd_tuples q = *p;
    return by_elem(elem, [&](auto tag) {
        using T = decltype(tag);
        BY_INDEX(i64, gather_nd_kernel, blocks_for(total), stream, static_cast<T *>(dst),
                 static_cast<const T *>(src), indices, q, total, fault);
        return cudaGetLastError();
    });
}

extern "C" cudaError_t cuda_scatter_nd(void *dst, const void *updates, const void *indices,
                                       bool i64, int elem, const cuda_nd_tuples *p,
                                       cuda_gather_fault *fault, cudaStream_t stream) {
    int64_t total = p->tuples * p->slice;
    if (total <= 0) return cudaSuccess;
    if (p->m < 1 || p->m > GRAFT_MAX_DIMS) return cudaErrorInvalidValue;
    cuda_nd_tuples q = *p;
    return by_elem(elem, [&](auto tag) {
        using T = decltype(tag);
        BY_INDEX(i64, scatter_nd_kernel, blocks_for(total), stream, static_cast<T *>(dst),
                 static_cast<const T *>(updates), indices, q, total, fault);
        return cudaGetLastError();
    });
}

extern "C" cudaError_t cuda_trilu(void *dst, const void *src, int elem, int64_t mats, int64_t rows,
                                  int64_t cols, int64_t k, bool upper, cudaStream_t stream) {
    int64_t total = mats * rows * cols;
    if (total <= 0) return cudaSuccess;
    return by_elem(elem, [&](auto tag) {
        using T = decltype(tag);
        trilu_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
            static_cast<T *>(dst), static_cast<const T *>(src), total, rows, cols, k, upper);
        return cudaGetLastError();
    });
}

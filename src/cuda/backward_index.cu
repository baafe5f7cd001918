// backward_index.cu: CUDA kernels of the backward rules of the ops that pick elements: Gather's
// deterministic sums of dY rows into the picked rows, and dY put back on a lattice (Slice, Pad).
#include "backward_index_launch.h"
#include "kernel_common.cuh"

namespace {

constexpr int THREADS = 256;
constexpr int64_t MAX_GRID = 1 << 20;

// ---- Gather ---------------------------------------------------------------------------------

// One thread block per row (o, k) of dx, its threads along the row. Each warp walks the indices
// 32 at a time: a ballot marks those that pick k, whose dy rows the lanes add in the order of j.
// Every dx element is written once, so no zero-fill and no atomics. Block 0 also checks the
// indices' range once, for the fault flag.
template <typename I>
__global__ void __launch_bounds__(THREADS)
    gather_grad_kernel(const float *dy, const I *idx, float *dx, int64_t outer, int64_t dim,
                       int64_t n, int64_t block, cuda_gather_fault *fault) {
    int lane = threadIdx.x & 31;
    for (int64_t j = threadIdx.x; fault && blockIdx.x == 0 && j < n; j += blockDim.x) {
        int64_t v = (int64_t)idx[j];
        if ((v < -dim || v >= dim) && atomicCAS(&fault->raised, 0, 1) == 0) {
            fault->index = v;
            fault->axis_dim = dim;
        }
    }
    for (int64_t row = blockIdx.x; row < outer * dim; row += gridDim.x) {
        int64_t o = row / dim, k = row - o * dim;
        const float *src = dy + o * n * block;
        float *dst = dx + row * block;
        for (int64_t b0 = 0; b0 < block; b0 += blockDim.x) {
            int64_t b = b0 + threadIdx.x; // lanes past the row still vote
            double acc = 0.0;
            for (int64_t j0 = 0; j0 < n; j0 += 32) {
                int64_t j = j0 + lane, v = j < n ? (int64_t)idx[j] : -1 - dim;
                unsigned hits = __ballot_sync(0xffffffffu, (v < 0 ? v + dim : v) == k);
                for (; hits && b < block; hits &= hits - 1)
                    acc += (double)src[(j0 + __ffs((int)hits) - 1) * block + b];
            }
            if (b < block) dst[b] = (float)acc;
        }
    }
}

// ---- Slice and Pad --------------------------------------------------------------------------

__global__ void __launch_bounds__(THREADS)
    lattice_kernel(const float *dy, float *dx, bwi_lattice l, int64_t n) {
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        int64_t rest = i, at = 0, ystride = 1;
        bool inside = true;
        for (int d = l.ndim - 1; d >= 0; d--) {
            int64_t q = rest / l.x_dims[d], off = rest - q * l.x_dims[d] - l.start[d];
            rest = q;
            int64_t p = off / l.step[d];
            inside = inside && p * l.step[d] == off && p >= 0 && p < l.y_dims[d];
            at += p * ystride;
            ystride *= l.y_dims[d];
        }
        dx[i] = inside ? dy[at] : 0.0f;
    }
}

} // namespace

extern "C" cudaError_t bwi_gather_launch(const float *dy, const void *idx, bool idx_i64, float *dx,
                                         int64_t outer, int64_t dim, int64_t n, int64_t block,
                                         cuda_gather_fault *fault, cudaStream_t stream) {
    int64_t rows = outer * dim;
    if (rows <= 0 || block <= 0) return cudaSuccess;
    if (n < 0) return cudaErrorInvalidValue;
    int64_t lanes = (block + 31) / 32 * 32;
    int threads = (int)(lanes < THREADS ? lanes : THREADS);
    unsigned grid = grid_size(rows, 1, MAX_GRID);
    if (idx_i64)
        gather_grad_kernel<<<grid, threads, 0, stream>>>(dy, (const int64_t *)idx, dx, outer, dim,
                                                         n, block, fault);
    else
        gather_grad_kernel<<<grid, threads, 0, stream>>>(dy, (const int32_t *)idx, dx, outer, dim,
                                                         n, block, fault);
    return cudaGetLastError();
}

extern "C" cudaError_t bwi_lattice_launch(const float *dy, float *dx, const bwi_lattice *l,
                                          cudaStream_t stream) {
    if (l->ndim < 0 || l->ndim > GRAFT_MAX_DIMS) return cudaErrorInvalidValue;
    int64_t n = 1;
    for (int d = 0; d < l->ndim; d++) {
        if (l->step[d] == 0) return cudaErrorInvalidValue;
        n *= l->x_dims[d];
    }
    if (n <= 0) return cudaSuccess;
    lattice_kernel<<<grid_size(n, THREADS, MAX_GRID), THREADS, 0, stream>>>(dy, dx, *l, n);
    return cudaGetLastError();
}

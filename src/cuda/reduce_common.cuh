/* reduce_common.cuh: device helpers the reduce family's kernels share: warp and block
 * reductions and grid sizing (dtype conversions and dispatch come from kernel_common.cuh). */
#ifndef GRAFT_CUDA_REDUCE_COMMON_CUH
#define GRAFT_CUDA_REDUCE_COMMON_CUH

#include "kernel_common.cuh"

/* Each .cu file gets its own copy: nothing here is shared across objects. */
namespace {

constexpr unsigned FULL_MASK = 0xffffffffu;

/* Sum over the 32 lanes of a warp; every lane gets the total. */
template <typename A> __device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* Largest over a warp. fmaxf drops NaN; a row with a NaN still ends up NaN in its sum. */
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/* Sum over a block whose size is a multiple of 32 (every thread calls it; every thread gets the
 * total). `buf` is __shared__ scratch of 32 values, free again when this returns. */
template <typename A> __device__ A block_sum(A v, A *buf) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        A t = lane < warps ? buf[lane] : A(0);
        t = warp_sum(t);
        if (lane == 0) buf[0] = t;
    }
    __syncthreads();
    A total = buf[0];
    __syncthreads();
    return total;
}

__device__ float block_max(float v, float *buf) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < warps ? buf[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0) buf[0] = t;
    }
    __syncthreads();
    float total = buf[0];
    __syncthreads();
    return total;
}

/* Blocks for `items` units of work at `per_block` units a block, at most 2^20 of them. */
inline unsigned grid_for(int64_t items, int64_t per_block) {
    return grid_size(items, per_block, 1 << 20);
}

} // namespace

#endif

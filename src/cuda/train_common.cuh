// train_common.cuh: what the head-training kernels share: launch geometry, rounding to the
// compute precision, and deterministic block reductions.
#ifndef GRAFT_CUDA_TRAIN_COMMON_CUH
#define GRAFT_CUDA_TRAIN_COMMON_CUH

#include "kernel_common.cuh"
#include "train_launch.h"

namespace train {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096; // grid-stride loops cover the rest

inline unsigned blocks_for(int64_t total, int64_t max_blocks = kMaxBlocks) {
    return grid_size(total, kThreads, max_blocks);
}

// The CPU head emulates bf16/fp16 compute by rounding fp32 values to the half format and back
// (round to nearest even, overflow to inf): the same here.
__device__ inline float round_to(float v, int mode) {
    if (mode == TRAIN_ROUND_BF16) return __bfloat162float(__float2bfloat16_rn(v));
    if (mode == TRAIN_ROUND_F16) return __half2float(__float2half_rn(v));
    return v;
}

// Sum of v over the block, in a fixed order (so the result does not vary between runs); valid
// in thread 0. blockDim.x is a multiple of 32, at most 1024. Safe to call repeatedly.
__device__ inline double block_sum(double v) {
    __shared__ double partial[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    int warps = (int)(blockDim.x >> 5);
    v = threadIdx.x < (unsigned)warps ? partial[threadIdx.x] : 0.0;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    __syncthreads();
    return v;
}

// The block's maximum of v, broadcast to every thread (fmaxf: NaN is ignored).
__device__ inline float block_max(float v) {
    __shared__ float partial[32];
    __shared__ float result;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = partial[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, partial[w]);
        result = m;
    }
    __syncthreads();
    float out = result;
    __syncthreads(); // a later call may overwrite result
    return out;
}

// The block's minimum of v, broadcast to every thread.
__device__ inline int64_t block_min_i64(int64_t v) {
    __shared__ long long partial[32];
    __shared__ long long result;
    long long x = v;
    for (int o = 16; o > 0; o >>= 1) {
        long long y = __shfl_down_sync(0xffffffffu, x, o);
        x = y < x ? y : x;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long m = partial[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = partial[w] < m ? partial[w] : m;
        result = m;
    }
    __syncthreads();
    int64_t out = (int64_t)result;
    __syncthreads();
    return out;
}

} // namespace train

#endif

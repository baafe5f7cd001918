/* reduce_common.cuh: device helpers the reduce family's kernels share: dtype conversions, warp
 * and block reductions, grid sizing and the dtype dispatch. */
#ifndef GRAFT_CUDA_REDUCE_COMMON_CUH
#define GRAFT_CUDA_REDUCE_COMMON_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "graft.h"

/* Each .cu file gets its own copy: nothing here is shared across objects. */
namespace {

constexpr unsigned FULL_MASK = 0xffffffffu;

__device__ __forceinline__ float to_float(float v) {
    return v;
}
__device__ __forceinline__ float to_float(__half v) {
    return __half2float(v);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) {
    return v;
}
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

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

/* Blocks for `items` units of work at `per_block` units a block; kernels loop (grid-stride) over
 * what a capped grid does not cover. */
inline unsigned grid_for(int64_t items, int64_t per_block) {
    int64_t blocks = (items + per_block - 1) / per_block;
    if (blocks < 1) blocks = 1;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    return (unsigned)blocks;
}

/* Global thread index and stride of a 1-D grid-stride loop, in 64 bits. */
__device__ __forceinline__ int64_t global_thread() {
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() {
    return (int64_t)gridDim.x * blockDim.x;
}

} // namespace

/* Run the statement with T bound to the element type of float dtype dt; other dtypes return
 * cudaErrorInvalidValue from the enclosing launcher. */
#define REDUCE_FLOAT_DISPATCH(dt, T, ...)                                                          \
    switch (dt) {                                                                                  \
    case GRAFT_DTYPE_F32: {                                                                        \
        using T = float;                                                                           \
        __VA_ARGS__;                                                                               \
        break;                                                                                     \
    }                                                                                              \
    case GRAFT_DTYPE_F16: {                                                                        \
        using T = __half;                                                                          \
        __VA_ARGS__;                                                                               \
        break;                                                                                     \
    }                                                                                              \
    case GRAFT_DTYPE_BF16: {                                                                       \
        using T = __nv_bfloat16;                                                                   \
        __VA_ARGS__;                                                                               \
        break;                                                                                     \
    }                                                                                              \
    default:                                                                                       \
        return cudaErrorInvalidValue;                                                              \
    }

/* The same, also binding I32 and I64. */
#define REDUCE_NUMERIC_DISPATCH(dt, T, ...)                                                        \
    switch (dt) {                                                                                  \
    case GRAFT_DTYPE_I32: {                                                                        \
        using T = int32_t;                                                                         \
        __VA_ARGS__;                                                                               \
        break;                                                                                     \
    }                                                                                              \
    case GRAFT_DTYPE_I64: {                                                                        \
        using T = int64_t;                                                                         \
        __VA_ARGS__;                                                                               \
        break;                                                                                     \
    }                                                                                              \
    default:                                                                                       \
        REDUCE_FLOAT_DISPATCH(dt, T, __VA_ARGS__)                                                  \
    }

#endif

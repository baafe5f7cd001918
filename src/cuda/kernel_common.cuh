/* kernel_common.cuh: helpers every CUDA kernel family shares: grid sizing, 64-bit grid-stride
 * indices, f32 <-> f16 / bf16 conversions and the float / numeric dtype dispatch. */
#ifndef GRAFT_CUDA_KERNEL_COMMON_CUH
#define GRAFT_CUDA_KERNEL_COMMON_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "graft.h"

/* Each .cu file gets its own copy: nothing here is shared across objects. */
namespace {

/* Blocks for `work` units at `per_block` units a block, at least 1 and at most `max_blocks`;
 * kernels loop (grid-stride) over what a capped grid does not cover. */
inline unsigned grid_size(int64_t work, int64_t per_block, int64_t max_blocks) {
    int64_t b = (work + per_block - 1) / per_block;
    return (unsigned)(b < 1 ? 1 : b > max_blocks ? max_blocks : b);
}

/* Global thread index and stride of a 1-D grid-stride loop, in 64 bits. */
__device__ __forceinline__ int64_t global_thread() {
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() {
    return (int64_t)gridDim.x * blockDim.x;
}

/* Element type <-> f32, rounding to nearest even on the way back. */
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

} // namespace

/* Run the statement with T bound to the element type of float dtype dt; other dtypes return
 * cudaErrorInvalidValue from the enclosing launcher. */
#define FLOAT_DTYPE_DISPATCH(dt, T, ...)                                                           \
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
#define NUMERIC_DTYPE_DISPATCH(dt, T, ...)                                                         \
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
        FLOAT_DTYPE_DISPATCH(dt, T, __VA_ARGS__)                                                   \
    }

#endif

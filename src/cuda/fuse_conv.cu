// fuse_conv.cu: the epilogue of fused Conv groups that cuDNN's fused call does not cover: bias,
// residual add and a clamp (Relu, Clip) in one pass over the convolution's output.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fuse_conv_launch.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096; // grid-stride loops cover the rest

unsigned blocks_for(int64_t total) {
    int64_t b = (total + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

__device__ inline float to_f32(float v) {
    return v;
}
__device__ inline float to_f32(__half v) {
    return __half2float(v);
}
__device__ inline float to_f32(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
template <typename T> __device__ inline T from_f32(float v);
template <> __device__ inline float from_f32<float>(float v) {
    return v;
}
template <> __device__ inline __half from_f32<__half>(float v) {
    return __float2half_rn(v);
}
template <> __device__ inline __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// The unfused graph adds the bias, then the residual, then clamps, rounding after each step;
// fp32 keeps that order (same results), half keeps the intermediates in fp32 (more accurate).
template <typename T>
__global__ void epilogue_kernel(T *__restrict__ y, const T *__restrict__ bias,
                                const T *__restrict__ z, int64_t channels, int64_t inner,
                                int64_t total, float lo, float hi) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        float v = to_f32(y[i]);
        if (bias) v += to_f32(bias[(i / inner) % channels]);
        if (z) v += to_f32(z[i]);
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
        y[i] = from_f32<T>(v);
    }
}

template <typename T>
cudaError_t launch(void *y, const void *bias, const void *z, int64_t channels, int64_t inner,
                   int64_t total, float lo, float hi, cudaStream_t stream) {
    epilogue_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<T *>(y), static_cast<const T *>(bias), static_cast<const T *>(z), channels,
        inner, total, lo, hi);
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t conv_epilogue_launch(void *y, const void *bias, const void *z, int64_t outer,
                                            int64_t channels, int64_t inner, float lo, float hi,
                                            graft_dtype dtype, cudaStream_t stream) {
    int64_t total = outer * channels * inner;
    if (total <= 0) return cudaSuccess;
    switch (dtype) {
    case GRAFT_DTYPE_F32:
        return launch<float>(y, bias, z, channels, inner, total, lo, hi, stream);
    case GRAFT_DTYPE_F16:
        return launch<__half>(y, bias, z, channels, inner, total, lo, hi, stream);
    case GRAFT_DTYPE_BF16:
        return launch<__nv_bfloat16>(y, bias, z, channels, inner, total, lo, hi, stream);
    default:
        return cudaErrorInvalidValue;
    }
}

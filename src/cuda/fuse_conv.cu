// fuse_conv.cu: the epilogue of fused Conv groups that cuDNN's fused call does not cover: bias,
// residual add and a clamp (Relu, Clip) in one pass over the convolution's output; the plain
// per-channel bias add of conv_util.cu runs through it too.
#include "fuse_conv_launch.h"
#include "kernel_common.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096; // grid-stride loops cover the rest

// The unfused graph adds the bias, then the residual, then clamps, rounding after each step;
// fp32 keeps that order (same results), half keeps the intermediates in fp32 (more accurate).
template <typename T>
__global__ void epilogue_kernel(T *__restrict__ y, const T *__restrict__ bias,
                                const T *__restrict__ z, int64_t channels, int64_t inner,
                                int64_t total, float lo, float hi) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        float v = to_float(y[i]);
        if (bias) v += to_float(bias[(i / inner) % channels]);
        if (z) v += to_float(z[i]);
        v = v < lo ? lo : v;
        v = v > hi ? hi : v;
        y[i] = from_float<T>(v);
    }
}

} // namespace

extern "C" cudaError_t conv_epilogue_launch(void *y, const void *bias, const void *z, int64_t outer,
                                            int64_t channels, int64_t inner, float lo, float hi,
                                            graft_dtype dtype, cudaStream_t stream) {
    int64_t total = outer * channels * inner;
    if (total <= 0) return cudaSuccess;
    unsigned blocks = grid_size(total, kThreads, kMaxBlocks);
    FLOAT_DTYPE_DISPATCH(dtype, T,
                         epilogue_kernel<T><<<blocks, kThreads, 0, stream>>>(
                             static_cast<T *>(y), static_cast<const T *>(bias),
                             static_cast<const T *>(z), channels, inner, total, lo, hi));
    return cudaGetLastError();
}

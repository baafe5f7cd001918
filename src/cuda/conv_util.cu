// conv_util.cu: small kernels around cuDNN and cuBLASLt: explicit image padding, the broadcast
// copy of Gemm's C, and the per-channel bias add (through fuse_conv.cu's epilogue kernel).
#include <math.h>

#include "conv_util_launch.h"
#include "fuse_conv_launch.h"
#include "kernel_common.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096; // grid-stride loops cover the rest

unsigned blocks_for(int64_t total) {
    return grid_size(total, kThreads, kMaxBlocks);
}

// One output element per step: copy from the input where the padded position falls inside it.
template <typename T>
__global__ void pad_kernel(const T *__restrict__ x, T *__restrict__ y, conv_pad_geom g, T fill,
                           int64_t total) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t w = i % g.out[2], rest = i / g.out[2];
        int64_t h = rest % g.out[1];
        rest /= g.out[1];
        int64_t d = rest % g.out[0], plane = rest / g.out[0];
        int64_t iw = w - g.before[2], ih = h - g.before[1], id = d - g.before[0];
        T v = fill;
        if (iw >= 0 && iw < g.in[2] && ih >= 0 && ih < g.in[1] && id >= 0 && id < g.in[0])
            v = x[((plane * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw];
        y[i] = v;
    }
}

template <typename T>
__global__ void broadcast_kernel(const T *__restrict__ c, int64_t c_rows, int64_t c_cols,
                                 T *__restrict__ y, int64_t cols, int64_t total) {
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        int64_t r = i / cols, col = i % cols;
        y[i] = c[(c_rows == 1 ? 0 : r) * c_cols + (c_cols == 1 ? 0 : col)];
    }
}

} // namespace

extern "C" cudaError_t conv_pad_launch(const void *x, void *y, conv_pad_geom g, int elem_bytes,
                                       uint32_t fill_bits, cudaStream_t stream) {
    int64_t total = g.planes * g.out[0] * g.out[1] * g.out[2];
    if (total <= 0) return cudaSuccess;
    unsigned blocks = blocks_for(total);
    if (elem_bytes == 4)
        pad_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(
            static_cast<const uint32_t *>(x), static_cast<uint32_t *>(y), g, fill_bits, total);
    else if (elem_bytes == 2)
        pad_kernel<uint16_t><<<blocks, kThreads, 0, stream>>>(
            static_cast<const uint16_t *>(x), static_cast<uint16_t *>(y), g,
            static_cast<uint16_t>(fill_bits), total);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

// The epilogue with neither residual nor clamp (+-inf bounds pass every value, NaN included) is
// the bias add: the same f32 sum rounded once, the same launch shape.
extern "C" cudaError_t conv_bias_add_launch(void *y, const void *bias, int64_t outer,
                                            int64_t channels, int64_t inner, graft_dtype dtype,
                                            cudaStream_t stream) {
    return conv_epilogue_launch(y, bias, nullptr, outer, channels, inner, -INFINITY, INFINITY,
                                dtype, stream);
}

extern "C" cudaError_t gemm_broadcast_c_launch(const void *c, int64_t c_rows, int64_t c_cols,
                                               void *y, int64_t rows, int64_t cols, int elem_bytes,
                                               cudaStream_t stream) {
    int64_t total = rows * cols;
    if (total <= 0) return cudaSuccess;
    unsigned blocks = blocks_for(total);
    if (elem_bytes == 4)
        broadcast_kernel<uint32_t>
            <<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t *>(c), c_rows, c_cols,
                                              static_cast<uint32_t *>(y), cols, total);
    else if (elem_bytes == 2)
        broadcast_kernel<uint16_t>
            <<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t *>(c), c_rows, c_cols,
                                              static_cast<uint16_t *>(y), cols, total);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}

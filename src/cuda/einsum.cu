/* einsum.cu: the Einsum kernel: one thread per output element walks the contracted loops and
 * sums the operands' products in f32 (any equation the planner bounds; no tensor cores). */
#include "einsum_launch.h"
#include "kernel_common.cuh"

namespace {

constexpr int kThreads = 256;

struct einsum_operands {
    const void *p[CUDA_EINSUM_MAX_OPERANDS];
};

template <typename T>
__device__ float contract(const cuda_einsum_loops &L, const einsum_operands &ops,
                          const int64_t *base) {
    int64_t off[CUDA_EINSUM_MAX_OPERANDS], cnt[CUDA_EINSUM_MAX_LOOPS];
    for (int k = 0; k < L.n_ops; k++) off[k] = base[k];
    for (int j = L.n_out; j < L.n_all; j++) {
        if (L.dims[j] == 0) return 0.0f;
        cnt[j] = 0;
    }
    float sum = 0.0f;
    for (;;) {
        float v = 1.0f;
        for (int k = 0; k < L.n_ops; k++) v *= to_float(static_cast<const T *>(ops.p[k])[off[k]]);
        sum += v;
        int j = L.n_all - 1;
        for (; j >= L.n_out; j--) {
            for (int k = 0; k < L.n_ops; k++) off[k] += L.strides[k][j];
            if (++cnt[j] < L.dims[j]) break;
            for (int k = 0; k < L.n_ops; k++) off[k] -= L.strides[k][j] * L.dims[j];
            cnt[j] = 0;
        }
        if (j < L.n_out) return sum;
    }
}

template <typename T>
__global__ void einsum_kernel(T *__restrict__ y, einsum_operands ops, cuda_einsum_loops L,
                              int64_t total) {
    for (int64_t o = global_thread(); o < total; o += grid_threads()) {
        int64_t base[CUDA_EINSUM_MAX_OPERANDS] = {0}, rest = o;
        for (int j = L.n_out - 1; j >= 0; j--) {
            int64_t i = rest % L.dims[j];
            rest /= L.dims[j];
            for (int k = 0; k < L.n_ops; k++) base[k] += i * L.strides[k][j];
        }
        y[o] = from_float<T>(contract<T>(L, ops, base));
    }
}

template <typename T>
cudaError_t launch(void *y, const einsum_operands &ops, const cuda_einsum_loops &L, int64_t total,
                   cudaStream_t stream) {
    einsum_kernel<T><<<grid_size(total, kThreads, 65535), kThreads, 0, stream>>>(
        static_cast<T *>(y), ops, L, total);
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t cuda_einsum(void *y, const void *const *operands, graft_dtype dtype,
                                   const cuda_einsum_loops *loops, int64_t total,
                                   cudaStream_t stream) {
    if (loops->n_ops < 1 || loops->n_ops > CUDA_EINSUM_MAX_OPERANDS ||
        loops->n_all > CUDA_EINSUM_MAX_LOOPS || loops->n_out > loops->n_all)
        return cudaErrorInvalidValue;
    if (total == 0) return cudaSuccess;
    einsum_operands ops{};
    for (int k = 0; k < loops->n_ops; k++) ops.p[k] = operands[k];
    switch (dtype) {
    case GRAFT_DTYPE_F32: return launch<float>(y, ops, *loops, total, stream);
    case GRAFT_DTYPE_F16: return launch<__half>(y, ops, *loops, total, stream);
    case GRAFT_DTYPE_BF16: return launch<__nv_bfloat16>(y, ops, *loops, total, stream);
    default: return cudaErrorInvalidValue;
    }
}

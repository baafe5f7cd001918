/* attention_common.cuh: what the two fused attention kernels (attention.cu's WMMA one and
 * attention_mma.cu's register-tiled one) share: their parameters and the launch-side helpers. */
#ifndef GRAFT_CUDA_ATTENTION_COMMON_CUH
#define GRAFT_CUDA_ATTENTION_COMMON_CUH

#include <atomic>

#include "kernel_common.cuh"

namespace {

template <typename T> struct attn_params {
    const T *q, *kt, *v, *scale, *mask;
    T *out;
    int64_t h, s;
    int64_t ms0, ms1, ms2, ms3;
    bool scale_mul;
    bool vec_qv; /* q, v 16-byte aligned: 8-element loads of their rows */
    bool vec_k;  /* kt 16-byte aligned and s % 8 == 0 */
};

inline bool aligned16(const void *ptr) {
    return ((uintptr_t)ptr & 15) == 0;
}

/* cuda_attention's arguments (attention_launch.h) as a kernel's parameters. */
template <typename T>
attn_params<T> attn_params_make(const void *q, const void *kt, const void *v, const void *scale,
                                bool scale_mul, const void *mask, const int64_t ms[4], void *out,
                                int64_t h, int64_t s) {
    attn_params<T> p;
    p.q = static_cast<const T *>(q);
    p.kt = static_cast<const T *>(kt);
    p.v = static_cast<const T *>(v);
    p.scale = static_cast<const T *>(scale);
    p.mask = static_cast<const T *>(mask);
    p.out = static_cast<T *>(out);
    p.h = h;
    p.s = s;
    p.ms0 = ms[0];
    p.ms1 = ms[1];
    p.ms2 = ms[2];
    p.ms3 = ms[3];
    p.scale_mul = scale_mul;
    p.vec_qv = aligned16(q) && aligned16(v);
    p.vec_k = aligned16(kt) && s % 8 == 0;
    return p;
}

/* Opts `kernel` into `bytes` of dynamic shared memory (above 48 KiB) once per device, `done`
 * holding a bit per device: a host-side setting kept out of the launches, which may be recorded
 * into a CUDA graph. */
template <typename K>
cudaError_t allow_shared_once(K kernel, size_t bytes, std::atomic<uint64_t> &done) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    const uint64_t bit = dev >= 0 && dev < 64 ? (uint64_t)1 << dev : 0;
    if (bit && (done.load(std::memory_order_relaxed) & bit)) return cudaSuccess;
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e == cudaSuccess) done.fetch_or(bit, std::memory_order_relaxed);
    return e;
}

} // namespace

#endif

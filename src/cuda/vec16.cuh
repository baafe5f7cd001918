/* vec16.cuh: eight 16-bit floats (fp16 / bf16) moved as one 16-byte word, for the memory-bound
 * kernels' vectorised paths (LayerNormalization, GELU). */
#ifndef GRAFT_CUDA_VEC16_CUH
#define GRAFT_CUDA_VEC16_CUH

#include "kernel_common.cuh"

namespace {

inline bool vec16_aligned(const void *p) {
    return ((uintptr_t)p & 15) == 0;
}

/* v[0..8) = the eight T at p (16-byte aligned), as floats. */
template <typename T> __device__ __forceinline__ void load8(const T *p, float v[8]) {
    uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const T *h = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = to_float(h[e]);
}

/* The eight floats v rounded to T, stored at p (16-byte aligned). */
template <typename T> __device__ __forceinline__ void store8(T *p, const float v[8]) {
    uint4 raw;
    T *h = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int e = 0; e < 8; e++) h[e] = from_float<T>(v[e]);
    *reinterpret_cast<uint4 *>(p) = raw;
}

} // namespace

#endif

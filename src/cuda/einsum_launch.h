/* einsum_launch.h: launcher of the Einsum kernel in einsum.cu, plain C interface. */
#ifndef GRAFT_CUDA_EINSUM_LAUNCH_H
#define GRAFT_CUDA_EINSUM_LAUNCH_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_EINSUM_MAX_OPERANDS 8
#define CUDA_EINSUM_MAX_LOOPS 16

/* The loops of an Einsum (src/ops/einsum.h's einsum_loops, bounded for a kernel argument): the
 * output's n_out loops first, then the contracted ones; strides in elements per operand. */
typedef struct cuda_einsum_loops {
    int n_ops, n_out, n_all;
    int64_t dims[CUDA_EINSUM_MAX_LOOPS];
    int64_t strides[CUDA_EINSUM_MAX_OPERANDS][CUDA_EINSUM_MAX_LOOPS];
} cuda_einsum_loops;

/* y (total elements, the output loops' sizes in order) = for each output element, the sum over
 * the contracted loops of the product of the operands' elements, accumulated in f32. All
 * operands and y are of dtype (F32, F16 or BF16; else cudaErrorInvalidValue). Returns
 * cudaGetLastError(); launches nothing for an empty output. */
cudaError_t cuda_einsum(void *y, const void *const *operands, graft_dtype dtype,
                        const cuda_einsum_loops *loops, int64_t total, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/* tensor_launch.h: launchers of the data-movement kernels in tensor.cu (plain C interface). */
#ifndef GRAFT_CUDA_TENSOR_LAUNCH_H
#define GRAFT_CUDA_TENSOR_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most axes of a copy view: a tensor's axes plus one for an element split into smaller units
 * (only when a pointer is not aligned to the element size). */
#define CUDA_TENSOR_VIEW_DIMS (GRAFT_MAX_DIMS + 1)
/* Pieces of Concat/Split one launch copies; more take several launches. */
#define CUDA_TENSOR_PIECES 8

/* Every size below counts units of `unit` bytes (1, 2, 4, 8 or 16); pointers are aligned to it.
 * All launchers return cudaGetLastError() after the launch and launch nothing for empty work. */

/* dst (dense, row-major over dims) = the view of src with dims and strides (negative: reversed,
 * zero: broadcast); src points at the view's first unit. ndim in 1..CUDA_TENSOR_VIEW_DIMS. */
cudaError_t cuda_tensor_copy_view(void *dst, const void *src, int unit, int ndim,
                                  const int64_t *dims, const int64_t *strides, cudaStream_t stream);

/* The same copy through shared-memory tiles, for views whose last axis is strided in src while
 * axis tile_axis (< ndim - 1) is contiguous there: reads and writes both stay coalesced. unit is
 * at most 8. */
cudaError_t cuda_tensor_copy_tiled(void *dst, const void *src, int unit, int ndim,
                                   const int64_t *dims, const int64_t *strides, int tile_axis,
                                   cudaStream_t stream);

/* Concat (join) or Split (!join) along a row-major cut: `whole` has `rows` rows of row_width
 * units; piece i (n <= CUDA_TENSOR_PIECES) has rows of widths[i] units that sit at offsets[i]
 * within each row of whole. */
cudaError_t cuda_tensor_copy_pieces(void *whole, void *const *pieces, const int64_t *widths,
                                    const int64_t *offsets, int n, int64_t rows, int64_t row_width,
                                    int unit, bool join, cudaStream_t stream);

/* What the Gather kernel records (device memory, zeroed by the owner) about the first
 * out-of-range index it meets: raised = 1, the index as given, the size of the axis. */
typedef struct cuda_gather_fault {
    int raised;
    int64_t index;
    int64_t axis_dim;
} cuda_gather_fault;

/* Gather: src is (outer, axis_dim, inner) and dst (outer, n_indices, inner); indices (int64 or
 * int32, device memory) count from the end when negative. An index outside [-axis_dim,
 * axis_dim) yields zeros and, when fault is not NULL, is recorded there (the first one only). */
cudaError_t cuda_tensor_gather(void *dst, const void *src, const void *indices, bool indices_i64,
                               int64_t outer, int64_t axis_dim, int64_t n_indices, int64_t inner,
                               int unit, cuda_gather_fault *fault, cudaStream_t stream);

/* Fill n units of dst with the unit-byte pattern (host memory). */
cudaError_t cuda_tensor_fill(void *dst, int64_t n, int unit, const void *pattern,
                             cudaStream_t stream);

/* Range: dst[i] = start + i * delta for i < n, as graft's reference computes it (one rounding
 * per operation in floats, wrap-around in integers). start and delta are one element of dtype
 * in host memory; dtype is F32, F64, I16, I32 or I64 (else cudaErrorInvalidValue). */
cudaError_t cuda_tensor_range(void *dst, graft_dtype dtype, int64_t n, const void *start,
                              const void *delta, cudaStream_t stream);

/* Pad modes, in the order of tensor_plan.h's pad_mode. */
enum { CUDA_PAD_CONSTANT, CUDA_PAD_REFLECT, CUDA_PAD_EDGE, CUDA_PAD_WRAP };

/* Pad (elements of elem bytes, 1..8): out_dims = in_dims + begin + end per axis (negative
 * begin/end crop); outside the input, constant mode writes *constant (elem bytes, host memory)
 * and the other modes read the reflected, edge or wrapped input element. ndim in
 * 1..GRAFT_MAX_DIMS; the other modes need every input axis non-empty. */
cudaError_t cuda_tensor_pad(void *dst, const void *src, int elem, int ndim, const int64_t *out_dims,
                            const int64_t *in_dims, const int64_t *begin, int mode,
                            const void *constant, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

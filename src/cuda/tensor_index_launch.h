/* tensor_index_launch.h: launchers of the indexing kernels in tensor_index.cu (GatherElements,
 * GatherND, ScatterND, Trilu), plain C interface. */
#ifndef GRAFT_CUDA_TENSOR_INDEX_LAUNCH_H
#define GRAFT_CUDA_TENSOR_INDEX_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"
#include "tensor_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elements are of elem bytes (1, 2, 4 or 8; else cudaErrorInvalidValue); indices are int64 or
 * int32 in device memory and count from the end when negative. An index out of range yields a
 * zero element (gathers) or no write (scatter) and is recorded in *fault (the first one only),
 * which the backend reports at its next synchronization. Every launcher returns
 * cudaGetLastError() and launches nothing for empty work. */

/* GatherElements: dst (shape idx_dims, ndim axes) takes src at the same coordinates except on
 * `axis`, where the index says; src_strides are the data's strides in elements. */
cudaError_t cuda_gather_elements(void *dst, const void *src, const void *indices, bool i64,
                                 int elem, int ndim, const int64_t *idx_dims,
                                 const int64_t *src_strides, int axis, int64_t axis_dim,
                                 cuda_gather_fault *fault, cudaStream_t stream);

/* The tuples of GatherND / ScatterND (see nd_plan in src/ops/tensor_index.h): `batches` x
 * `tuples` tuples of m indices; each selects `slice` contiguous elements at
 * batch * batch_stride + sum_j index_j * strides[j], index_j within dims[j]. */
typedef struct cuda_nd_tuples {
    int m;
    int64_t batches, tuples, slice, batch_stride;
    int64_t dims[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS];
} cuda_nd_tuples;

/* GatherND: dst (dense, batches * tuples * slice elements) = the selected slices of src. */
cudaError_t cuda_gather_nd(void *dst, const void *src, const void *indices, bool i64, int elem,
                           const cuda_nd_tuples *p, cuda_gather_fault *fault, cudaStream_t stream);

/* ScatterND without reduction: dst (already a copy of the data) gets each slice of updates
 * (tuples * slice elements) at its tuple's place. */
cudaError_t cuda_scatter_nd(void *dst, const void *updates, const void *indices, bool i64, int elem,
                            const cuda_nd_tuples *p, cuda_gather_fault *fault, cudaStream_t stream);

/* Trilu on `mats` matrices of rows x cols: dst keeps src where col - row >= k (upper) or
 * col - row <= k (lower), zero elsewhere. */
cudaError_t cuda_trilu(void *dst, const void *src, int elem, int64_t mats, int64_t rows,
                       int64_t cols, int64_t k, bool upper, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

/* backward_index_launch.h: launchers of backward_index.cu's f32 kernels for the backward rules of
 * Gather, Slice and Pad (cuda_backward_index.c), plain C interface. */
#ifndef GRAFT_CUDA_BACKWARD_INDEX_LAUNCH_H
#define GRAFT_CUDA_BACKWARD_INDEX_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "graft.h"
#include "tensor_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every launcher enqueues on `stream`, launches nothing for empty work, writes every element of
 * its output and returns cudaGetLastError() after its launch. */

/* Gather along an axis seen as (outer, dim, block): row k of dx is the sum of the rows j of dy
 * whose index idx[j] is k (a negative index counts from the end), summed in f64 in the order of j
 * as the CPU reference does, so duplicates add up deterministically; rows no index picks are
 * zero. idx: n int64 (idx_i64) or int32 values. An index outside [-dim, dim) picks no row and,
 * when fault is not NULL, is recorded there as the forward Gather records it (tensor_launch.h). */
cudaError_t bwi_gather_launch(const float *dy, // (outer, n, block)
                              const void *idx, // (n)
                              bool idx_i64,
                              float *dx, // (outer, dim, block)
                              int64_t outer, int64_t dim, int64_t n, int64_t block,
                              cuda_gather_fault *fault, cudaStream_t stream);

/* dY put back on a lattice of dX (Slice, and Pad with step 1 and start = -pad_begin): element i
 * of dx takes dy at q[d] = (i[d] - start[d]) / step[d] when step[d] divides i[d] - start[d] and
 * 0 <= q[d] < y_dims[d] on every axis d, else 0. Steps are nonzero (negative walks backwards), so
 * no two elements of dy meet. */
typedef struct bwi_lattice {
    int ndim; /* 0..GRAFT_MAX_DIMS */
    int64_t x_dims[GRAFT_MAX_DIMS], y_dims[GRAFT_MAX_DIMS];
    int64_t start[GRAFT_MAX_DIMS], step[GRAFT_MAX_DIMS];
} bwi_lattice;

cudaError_t bwi_lattice_launch(const float *dy, // (y_dims)
                               float *dx,       // (x_dims)
                               const bwi_lattice *l, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

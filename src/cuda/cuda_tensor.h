/* cuda_tensor.h: helpers shared by the tensor family's glue files (cuda_tensor*.c). */
#ifndef GRAFT_CUDA_TENSOR_H
#define GRAFT_CUDA_TENSOR_H

#include "cuda_internal.h"

/* Enqueue dst (dense, row-major over dims) = the view of src (elements of elem bytes, strides in
 * elements, src at the view's first element), in the widest units the layout allows. */
graft_status cuda_tensor_copy_strided(cuda_backend *be, const op_call *c, void *dst,
                                      const void *src, size_t elem, int ndim, const int64_t *dims,
                                      const int64_t *strides);

/* Kernels in cuda_tensor_generate.c. */
graft_status cuda_tensor_constant_of_shape(cuda_backend *be, const op_call *c, void **state,
                                           bool *handled);
graft_status cuda_tensor_shape(cuda_backend *be, const op_call *c, void **state, bool *handled);
graft_status cuda_tensor_range_kernel(cuda_backend *be, const op_call *c, void **state,
                                      bool *handled);
graft_status cuda_tensor_pad_kernel(cuda_backend *be, const op_call *c, void **state,
                                    bool *handled);

/* Kernels in cuda_tensor_index.c. */
graft_status cuda_tensor_gather_elements(cuda_backend *be, const op_call *c, void **state,
                                         bool *handled);
graft_status cuda_tensor_gather_nd(cuda_backend *be, const op_call *c, void **state, bool *handled);
graft_status cuda_tensor_scatter_nd(cuda_backend *be, const op_call *c, void **state,
                                    bool *handled);
graft_status cuda_tensor_tile(cuda_backend *be, const op_call *c, void **state, bool *handled);
graft_status cuda_tensor_trilu(cuda_backend *be, const op_call *c, void **state, bool *handled);
graft_status cuda_tensor_einsum(cuda_backend *be, const op_call *c, void **state, bool *handled);

#endif

/* tensor_copy.h: element-size-generic copies shared by the data-movement reference kernels. */
#ifndef GRAFT_CPU_REF_TENSOR_COPY_H
#define GRAFT_CPU_REF_TENSOR_COPY_H

#include <stddef.h>
#include <stdint.h>

/* Work (in elements) above which a copy is spread over OpenMP threads. */
#define TENSOR_PARALLEL_MIN 32768

/* Copy the N-d view of src with the given dims and strides (in elements; negative for reversed
 * axes, zero for broadcast ones) into dst, dense and row-major. src points at the view's first
 * element. */
void strided_copy(void *dst, const void *src, size_t elem, int ndim, const int64_t *dims,
                  const int64_t *strides);

/* Fill n elements of dst with the elem-byte value at value. */
void fill_elements(void *dst, const void *value, size_t elem, int64_t n);

#endif

/* tensor.h: dtype facts, shape arithmetic with overflow checks, and owned tensors. */
#ifndef GRAFT_CORE_TENSOR_H
#define GRAFT_CORE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "graft.h"

typedef graft_tensor tensor;

bool dtype_is_valid(graft_dtype dt);
bool dtype_is_float(graft_dtype dt); /* f16, bf16, f32, f64 */
bool dtype_is_int(graft_dtype dt);   /* signed or unsigned integers, not bool */

/* Product of dims; -1 when a dim is negative or the product exceeds 2^62. */
int64_t dims_numel(int ndim, const int64_t *dims);
/* Bytes of numel elements of dt; -1 on overflow. */
int64_t dtype_bytes(graft_dtype dt, int64_t numel);
int64_t tensor_numel(const tensor *t);
int64_t tensor_nbytes(const tensor *t);
bool shapes_equal(int ndim_a, const int64_t *a, int ndim_b, const int64_t *b);

/* bytes (at least 1) of host memory aligned to a cache line (64 bytes: vector loads never split
 * a line, as they would at malloc's 16), uninitialised; freed with free(). NULL when out of
 * memory. */
void *host_alloc_aligned(size_t bytes);
/* host_alloc_aligned for an array that will be written whole (a data set's features): from
 * HOST_LARGE_BYTES up, on 2 MiB boundaries with transparent huge pages asked for and its pages
 * faulted in on all threads now (zeroed), so the writer does not stop at every 4 KiB page;
 * uninitialised below that. Freed with free(). */
#define HOST_LARGE_BYTES ((size_t)64 << 20)
void *host_alloc_large(size_t bytes);
/* Allocate data for t (dtype and shape already set), zero-filled. */
graft_status tensor_alloc(tensor *t, graft_err *e);
/* Set dtype/shape and allocate. */
graft_status tensor_make(tensor *t, graft_dtype dt, int ndim, const int64_t *dims, graft_err *e);
/* Deep copy src into dst (allocates). */
graft_status tensor_clone(tensor *dst, const tensor *src, graft_err *e);
void tensor_release(tensor *t); /* frees data, leaves shape */

/* Read element i of any numeric dtype as double / int64 (for shape-like inputs and tests). */
double tensor_get_f64(const tensor *t, int64_t i);
int64_t tensor_get_i64(const tensor *t, int64_t i);
void tensor_set_f64(tensor *t, int64_t i, double v);

/* Row-major strides (in elements) for dims. */
void dims_strides(int ndim, const int64_t *dims, int64_t *strides);

#endif

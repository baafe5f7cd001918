/* elementwise_scalar.h: the element-wise reference kernels' shared loop prefix and the exact
 * element accessors of core/scalar.h. */
#ifndef GRAFT_CPU_REF_ELEMENTWISE_SCALAR_H
#define GRAFT_CPU_REF_ELEMENTWISE_SCALAR_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../../core/scalar.h"
#include "../../core/tensor.h"

/* Element-wise loops go parallel from this many elements on. */
#define ELEMENTWISE_PARALLEL_MIN 32768
/* Prefix of a loop over n elements: SIMD always, threads once n is large. */
#define PARALLEL_SIMD_FOR                                                                          \
    _Pragma("omp parallel for simd if (parallel: n >= ELEMENTWISE_PARALLEL_MIN)")

#endif

/* cuda_float_types.h: the float dtypes the cuDNN, cuBLASLt and custom-kernel glue computes in
 * (f32, f16, bf16), as an index into each library's own table of type names. */
#ifndef GRAFT_CUDA_FLOAT_TYPES_H
#define GRAFT_CUDA_FLOAT_TYPES_H

#include <stdbool.h>

#include "graft.h"

/* 0 for f32, 1 for f16, 2 for bf16; -1 for every other dtype (those run on the CPU). */
static inline int cuda_float_index(graft_dtype dt) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return 0;
    case GRAFT_DTYPE_F16:
        return 1;
    case GRAFT_DTYPE_BF16:
        return 2;
    default:
        return -1;
    }
}

static inline bool cuda_is_float(graft_dtype dt) {
    return cuda_float_index(dt) >= 0;
}

#endif

/* cuda_matmul.h: the general row-major matrix product through cuBLASLt that MatMul, Gemm and the
 * head training (forward and backward) share. */
#ifndef GRAFT_CUDA_MATMUL_H
#define GRAFT_CUDA_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_internal.h"

/* What runs on each element of the product (after the bias) before it is stored. GELU is
 * cuBLASLt's tanh approximation, not ONNX's default erf form: fuse it only where the model's
 * Gelu has approximate="tanh" (or the tolerance allows the difference, about 1e-3). */
enum { CUDA_GEMM_EPILOGUE_NONE = 0, CUDA_GEMM_EPILOGUE_RELU = 1, CUDA_GEMM_EPILOGUE_GELU = 2 };

/* c = epilogue(alpha * op(a) * op(b) + beta * c + bias), all row-major, `batch` times:
 *   op(a) (rows, k): a is stored (rows, k), or (k, rows) when trans_a; lda is its row stride;
 *   op(b) (k, cols): b is stored (k, cols), or (cols, k) when trans_b; ldb is its row stride;
 *   c (rows, cols) with row stride ldc (written; also read when beta != 0);
 *   bias (cols) or NULL: added to every row (a Linear layer's bias).
 * a, b, c and bias have one dtype, F32, F16 or BF16; the products accumulate in f32 and round
 * once on store. f32 uses TF32 only when the backend allows it. Batch members are stride_a,
 * stride_b and stride_c elements apart; a stride of 0 for a or b reuses one matrix for every
 * member. All pointers are device memory; the work is enqueued on be->stream. */
typedef struct cuda_gemm_args {
    int64_t rows, cols, k;
    const void *a;
    int64_t lda;
    bool trans_a;
    const void *b;
    int64_t ldb;
    bool trans_b;
    void *c;
    int64_t ldc;
    graft_dtype dtype;
    const void *bias;
    int epilogue; /* CUDA_GEMM_EPILOGUE_* */
    float alpha, beta;
    int64_t batch; /* 0 or 1: a single product */
    int64_t stride_a, stride_b, stride_c;
} cuda_gemm_args;

/* A product's cuBLASLt descriptors and chosen algorithm, kept for the next call of the same
 * shape (dims, leading dims, transposes, dtype, epilogue, batch strides, pointer alignment). */
typedef struct cuda_gemm_plan cuda_gemm_plan;

/* Run one product. `plan` may be NULL (descriptors made and dropped on every call); otherwise
 * *plan is reused when it matches, else replaced (start with *plan = NULL; free it with
 * cuda_gemm_plan_free). GRAFT_E_UNSUPPORTED when cuBLASLt has no algorithm for the case. */
graft_status cuda_gemm_run(cuda_backend *be, cuda_gemm_plan **plan, const cuda_gemm_args *g,
                           graft_err *e);
void cuda_gemm_plan_free(cuda_gemm_plan *plan);
/* The backend's record of the algorithms chosen by timing (cuda_backend.gemm_cache). */
void cuda_gemm_cache_free(cuda_gemm_cache *cache);

/* The arguments of one product of packed row-major operands: c (rows, cols) = op(a) op(b) with
 * a (rows, k) or, transposed, (k, rows), likewise b; alpha 1, beta 0, no bias, no batch. */
cuda_gemm_args cuda_gemm_dense(int64_t rows, int64_t cols, int64_t k, const void *a, bool trans_a,
                               const void *b, bool trans_b, void *c, graft_dtype dtype);

/* The common case in one call, without a kept plan: c (rows, cols) = epilogue(alpha * op(a) *
 * op(b) + bias), beta 0, no batch. */
graft_status cuda_gemm_lt(cuda_backend *be, int64_t rows, int64_t cols, int64_t k, const void *a,
                          int64_t lda, bool trans_a, const void *b, int64_t ldb, bool trans_b,
                          void *c, int64_t ldc, graft_dtype dtype, const void *bias, int epilogue,
                          float alpha, graft_err *e);

#endif

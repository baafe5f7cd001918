/* cuda_matmul.c: MatMul (numpy batching and broadcasting, 1-D operands) and Gemm (transposes,
 * alpha, beta, C broadcast) through cuBLASLt, and the general row-major product they share. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/broadcast_plan.h"
#include "conv_util_launch.h"
#include "cuda_float_types.h"
#include "cuda_matmul.h"

/* The workspace cuBLASLt may ask for; the backend's shared workspace starts at this size. */
#define GEMM_MAX_WORKSPACE ((size_t)32 << 20)

/* Everything the descriptors and the chosen algorithm depend on. */
typedef struct gemm_key {
    int64_t rows, cols, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
    int32_t dtype, epilogue, trans_a, trans_b, has_bias, tf32;
    uint32_t align_a, align_b, align_c, align_bias;
} gemm_key;

struct cuda_gemm_plan {
    gemm_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lt_a, lt_b, lt_c; /* cuBLASLt's A is our b, its B our a (see below) */
    cublasLtMatmulAlgo_t algo;
    size_t workspace_bytes;
};

void cuda_gemm_plan_free(cuda_gemm_plan *p) {
    if (!p) return;
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->lt_a) cublasLtMatrixLayoutDestroy(p->lt_a);
    if (p->lt_b) cublasLtMatrixLayoutDestroy(p->lt_b);
    if (p->lt_c) cublasLtMatrixLayoutDestroy(p->lt_c);
    free(p);
}

static void plan_free_state(void *state) {
    cuda_gemm_plan_free(state);
}

/* Alignment in bytes (up to 16) cuBLASLt may assume of a pointer. */
static uint32_t pointer_alignment(const void *p) {
    uintptr_t v = (uintptr_t)p;
    uint32_t a = 16;
    while (a > 1 && v % a) a /= 2;
    return a;
}

static bool gemm_cuda_type(graft_dtype dt, cudaDataType_t *out) {
    static const cudaDataType_t types[] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};
    int i = cuda_float_index(dt);
    if (i >= 0) *out = types[i];
    return i >= 0;
}

static gemm_key gemm_key_of(const cuda_backend *be, const cuda_gemm_args *g) {
    gemm_key k;
    memset(&k, 0, sizeof k); /* no stray padding bytes: keys compare with memcmp */
    bool batched = g->batch > 1;
    k.rows = g->rows;
    k.cols = g->cols;
    k.k = g->k;
    k.lda = g->lda;
    k.ldb = g->ldb;
    k.ldc = g->ldc;
    k.batch = batched ? g->batch : 1;
    k.stride_a = batched ? g->stride_a : 0;
    k.stride_b = batched ? g->stride_b : 0;
    k.stride_c = batched ? g->stride_c : 0;
    k.dtype = (int32_t)g->dtype;
    k.epilogue = g->epilogue;
    k.trans_a = g->trans_a;
    k.trans_b = g->trans_b;
    k.has_bias = g->bias != NULL;
    k.tf32 = g->dtype == GRAFT_DTYPE_F32 && be->allow_tf32;
    k.align_a = pointer_alignment(g->a);
    k.align_b = pointer_alignment(g->b);
    k.align_c = pointer_alignment(g->c);
    k.align_bias = g->bias ? pointer_alignment(g->bias) : 0;
    return k;
}

/* A row-major (r, c) matrix with row stride ld is cuBLASLt's column-major (c, r) with the same
 * ld; so the row-major c = op(a) op(b) is computed as the column-major c^T = op(b)^T op(a)^T. */
static graft_status make_layout(cublasLtMatrixLayout_t *out, cudaDataType_t type, int64_t lt_rows,
                                int64_t lt_cols, int64_t ld, int64_t batch, int64_t stride,
                                graft_err *e) {
    CUBLAS_TRY(e, cublasLtMatrixLayoutCreate(out, type, (uint64_t)lt_rows, (uint64_t)lt_cols, ld),
               "creating a cuBLASLt matrix layout");
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        CUBLAS_TRY(e,
                   cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                    &count, sizeof count),
                   "setting a cuBLASLt batch count");
        CUBLAS_TRY(e,
                   cublasLtMatrixLayoutSetAttribute(
                       *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
                   "setting a cuBLASLt batch stride");
    }
    return GRAFT_OK;
}

static cublasLtEpilogue_t epilogue_of(int epilogue, bool bias) {
    switch (epilogue) {
    case CUDA_GEMM_EPILOGUE_RELU:
        return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case CUDA_GEMM_EPILOGUE_GELU:
        return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default:
        return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    }
}

static graft_status set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                             const void *v, size_t size, graft_err *e) {
    CUBLAS_TRY(e, cublasLtMatmulDescSetAttribute(d, attr, v, size),
               "setting a cuBLASLt matmul attribute");
    return GRAFT_OK;
}

static graft_status plan_describe(cuda_gemm_plan *p, const cuda_gemm_args *g, cudaDataType_t type,
                                  graft_err *e) {
    const gemm_key *k = &p->key;
    cublasComputeType_t compute = k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CUBLAS_TRY(e, cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F),
               "creating a cuBLASLt matmul descriptor");
    cublasOperation_t op_lt_a = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_lt_b = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    TRY(set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof op_lt_a, e));
    TRY(set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof op_lt_b, e));
    cublasLtEpilogue_t epi = epilogue_of(k->epilogue, k->has_bias);
    TRY(set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, e));
    if (k->has_bias) {
        int32_t bias_type = (int32_t)type;
        TRY(set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type,
                     e));
        /* The heuristic reads the pointer's alignment; run() sets the pointer of each call. */
        TRY(set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias, e));
    }
    /* cuBLASLt's A = op(b)^T: (cols, k) column-major, stored as b is. */
    TRY(make_layout(&p->lt_a, type, k->trans_b ? k->k : k->cols, k->trans_b ? k->cols : k->k,
                    k->ldb, k->batch, k->stride_b, e));
    /* cuBLASLt's B = op(a)^T: (k, rows) column-major, stored as a is. */
    TRY(make_layout(&p->lt_b, type, k->trans_a ? k->rows : k->k, k->trans_a ? k->k : k->rows,
                    k->lda, k->batch, k->stride_a, e));
    TRY(make_layout(&p->lt_c, type, k->cols, k->rows, k->ldc, k->batch, k->stride_c, e));
    return GRAFT_OK;
}

static graft_status set_pref(cublasLtMatmulPreference_t pref,
                             cublasLtMatmulPreferenceAttributes_t a, const void *v, size_t size,
                             graft_err *e) {
    CUBLAS_TRY(e, cublasLtMatmulPreferenceSetAttribute(pref, a, v, size),
               "setting a cuBLASLt preference");
    return GRAFT_OK;
}

static graft_status plan_preferences(cublasLtMatmulPreference_t pref, const gemm_key *k,
                                     graft_err *e) {
    size_t ws = GEMM_MAX_WORKSPACE;
    TRY(set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws, e));
    /* Split-K partial sums kept in a 16-bit output type would round twice: f32 only. */
    uint32_t reduction =
        CUBLASLT_REDUCTION_SCHEME_MASK & ~(uint32_t)CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    TRY(set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof reduction,
                 e));
    /* cuBLASLt's A is our b and its B our a. */
    TRY(set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k->align_b, sizeof k->align_b,
                 e));
    TRY(set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k->align_a, sizeof k->align_a,
                 e));
    TRY(set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k->align_c, sizeof k->align_c,
                 e));
    TRY(set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k->align_c, sizeof k->align_c,
                 e));
    return GRAFT_OK;
}

/* Products of at least this many multiply-adds are timed among cuBLASLt's candidates, once per
 * shape and backend: the heuristic's first choice is not always the fastest.
 * GRAFT_CUDA_GEMM_TUNE=0 keeps the first choice (a diagnostic switch). */
#define GEMM_TUNE_MIN_MACS 268435456.0 /* 2^28 */
#define GEMM_CANDIDATES 8

static bool tune_wanted(const cuda_backend *be, const cuda_gemm_args *g) {
    const char *v = getenv("GRAFT_CUDA_GEMM_TUNE");
    double macs =
        (double)g->rows * (double)g->cols * (double)g->k * (double)(g->batch > 1 ? g->batch : 1);
    /* timing writes c: only where c is not also read (beta 0) */
    return !(v && strcmp(v, "0") == 0) && !be->capturing && g->beta == 0.0f &&
           macs >= GEMM_TUNE_MIN_MACS;
}

/* The chosen algorithms of the shapes timed so far. */
typedef struct gemm_tuned {
    gemm_key key;
    cublasLtMatmulAlgo_t algo;
    size_t workspace_bytes;
} gemm_tuned;

struct cuda_gemm_cache {
    gemm_tuned *e;
    int n, cap;
};

void cuda_gemm_cache_free(cuda_gemm_cache *c) {
    if (c) free(c->e);
    free(c);
}

static const gemm_tuned *cache_find(const cuda_backend *be, const gemm_key *k) {
    const cuda_gemm_cache *c = be->gemm_cache;
    for (int i = 0; c && i < c->n; i++)
        if (memcmp(&c->e[i].key, k, sizeof *k) == 0) return &c->e[i];
    return NULL;
}

static void cache_add(cuda_backend *be, const cuda_gemm_plan *p) {
    cuda_gemm_cache *c = be->gemm_cache;
    if (!c && !(c = be->gemm_cache = calloc(1, sizeof *c))) return; /* not kept: timed again */
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        gemm_tuned *e = realloc(c->e, sizeof *e * (size_t)cap);
        if (!e) return;
        c->e = e;
        c->cap = cap;
    }
    c->e[c->n++] = (gemm_tuned){p->key, p->algo, p->workspace_bytes};
}

/* Milliseconds of three runs of g with candidate r (after one untimed run); INFINITY when the
 * candidate fails to run. */
static graft_status time_candidate(cuda_backend *be, const cuda_gemm_plan *p,
                                   const cuda_gemm_args *g,
                                   const cublasLtMatmulHeuristicResult_t *r, cudaEvent_t ev[2],
                                   float *ms, graft_err *e) {
    void *ws = NULL;
    *ms = INFINITY;
    if (r->workspaceSize) TRY(cuda_workspace(be, r->workspaceSize, &ws, e));
    for (int i = 0; i < 4; i++) {
        if (i == 1) CUDA_TRY(e, cudaEventRecord(ev[0], be->stream), "timing a cuBLASLt algorithm");
        cublasStatus_t cs =
            cublasLtMatmul(be->lt, p->desc, &g->alpha, g->b, p->lt_a, g->a, p->lt_b, &g->beta, g->c,
                           p->lt_c, g->c, p->lt_c, &r->algo, ws, r->workspaceSize, be->stream);
        if (cs != CUBLAS_STATUS_SUCCESS) {
            CUDA_TRY(e, cudaStreamSynchronize(be->stream), "timing a cuBLASLt algorithm");
            return GRAFT_OK;
        }
    }
    CUDA_TRY(e, cudaEventRecord(ev[1], be->stream), "timing a cuBLASLt algorithm");
    CUDA_TRY(e, cudaEventSynchronize(ev[1]), "timing a cuBLASLt algorithm");
    CUDA_TRY(e, cudaEventElapsedTime(ms, ev[0], ev[1]), "timing a cuBLASLt algorithm");
    return GRAFT_OK;
}

/* The fastest of the n usable candidates into p, by timing them on g's own operands. */
static graft_status choose_by_timing(cuda_backend *be, cuda_gemm_plan *p, const cuda_gemm_args *g,
                                     const cublasLtMatmulHeuristicResult_t *r, int n,
                                     graft_err *e) {
    cudaEvent_t ev[2] = {NULL, NULL};
    graft_status st = GRAFT_OK;
    float best = INFINITY;
    if (cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess)
        st = err_set(e, GRAFT_E_BACKEND, "creating the events that time cuBLASLt's algorithms");
    for (int i = 0; i < n && st == GRAFT_OK; i++) {
        float ms;
        st = time_candidate(be, p, g, &r[i], ev, &ms, e);
        if (st == GRAFT_OK && ms < best) {
            best = ms;
            p->algo = r[i].algo;
            p->workspace_bytes = r[i].workspaceSize;
        }
    }
    for (int k = 0; k < 2; k++)
        if (ev[k]) cudaEventDestroy(ev[k]);
    if (st == GRAFT_OK) cache_add(be, p);
    return st;
}

/* Ask the heuristic for an algorithm (and time its candidates for a large product); *found is
 * false when cuBLASLt has none for the case. */
static graft_status plan_choose(cuda_backend *be, cuda_gemm_plan *p, const cuda_gemm_args *g,
                                bool *found, graft_err *e) {
    bool tune = tune_wanted(be, g);
    const gemm_tuned *kept = tune ? cache_find(be, &p->key) : NULL;
    *found = kept != NULL;
    if (kept) {
        p->algo = kept->algo;
        p->workspace_bytes = kept->workspace_bytes;
        return GRAFT_OK;
    }
    cublasLtMatmulPreference_t pref = NULL;
    CUBLAS_TRY(e, cublasLtMatmulPreferenceCreate(&pref), "creating a cuBLASLt preference");
    graft_status st = plan_preferences(pref, &p->key, e);
    cublasLtMatmulHeuristicResult_t results[GEMM_CANDIDATES];
    int returned = 0, usable = 0;
    cublasStatus_t hs = CUBLAS_STATUS_SUCCESS;
    if (st == GRAFT_OK)
        hs = cublasLtMatmulAlgoGetHeuristic(be->lt, p->desc, p->lt_a, p->lt_b, p->lt_c, p->lt_c,
                                            pref, tune ? GEMM_CANDIDATES : 4, results, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    TRY(st);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED) return GRAFT_OK;
    if (hs != CUBLAS_STATUS_SUCCESS) return cublas_fail(e, hs, "choosing a cuBLASLt algorithm");
    for (int i = 0; i < returned; i++)
        if (results[i].state == CUBLAS_STATUS_SUCCESS &&
            results[i].workspaceSize <= GEMM_MAX_WORKSPACE)
            results[usable++] = results[i];
    if (usable == 0) return GRAFT_OK;
    *found = true;
    p->algo = results[0].algo;
    p->workspace_bytes = results[0].workspaceSize;
    return tune && usable > 1 ? choose_by_timing(be, p, g, results, usable, e) : GRAFT_OK;
}

/* The plan for g in *slot: the kept one when it matches, else a new one. *plan is NULL (and
 * *slot untouched) when cuBLASLt has no algorithm. */
static graft_status plan_get(cuda_backend *be, cuda_gemm_plan **slot, const cuda_gemm_args *g,
                             cudaDataType_t type, cuda_gemm_plan **plan, graft_err *e) {
    gemm_key key = gemm_key_of(be, g);
    *plan = NULL;
    if (*slot && memcmp(&(*slot)->key, &key, sizeof key) == 0) {
        *plan = *slot;
        return GRAFT_OK;
    }
    cuda_gemm_plan *p = calloc(1, sizeof *p);
    if (!p) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory for a cuBLASLt plan");
    p->key = key;
    bool found = false;
    graft_status st = plan_describe(p, g, type, e);
    if (st == GRAFT_OK) st = plan_choose(be, p, g, &found, e);
    if (st != GRAFT_OK || !found) {
        cuda_gemm_plan_free(p);
        return st;
    }
    cuda_gemm_plan_free(*slot);
    *slot = p;
    *plan = p;
    return GRAFT_OK;
}

static graft_status gemm_check_args(const cuda_gemm_args *g, graft_err *e) {
    int64_t need_a = g->trans_a ? g->rows : g->k, need_b = g->trans_b ? g->k : g->cols;
    if (g->rows < 0 || g->cols < 0 || g->k < 0 || g->batch < 0)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT, "matrix product of negative size");
    if (g->lda < (need_a > 1 ? need_a : 1) || g->ldb < (need_b > 1 ? need_b : 1) ||
        g->ldc < (g->cols > 1 ? g->cols : 1))
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "matrix product (%lld x %lld) x (%lld x %lld): leading dimensions %lld, "
                       "%lld, %lld are too small",
                       (long long)g->rows, (long long)g->k, (long long)g->k, (long long)g->cols,
                       (long long)g->lda, (long long)g->ldb, (long long)g->ldc);
    if (g->batch > INT32_MAX)
        return err_set(e, GRAFT_E_UNSUPPORTED, "batch of %lld products exceeds cuBLASLt's limit",
                       (long long)g->batch);
    return GRAFT_OK;
}

/* k == 0: every product is an empty sum; c = 0 is all there is to write when nothing else is
 * added (ReLU and GELU keep 0). */
static graft_status gemm_empty_sum(cuda_backend *be, const cuda_gemm_args *g, size_t es,
                                   bool *supported, graft_err *e) {
    *supported = g->beta == 0.0f && !g->bias;
    if (!*supported) return GRAFT_OK;
    int64_t batch = g->batch > 1 ? g->batch : 1;
    for (int64_t t = 0; t < batch; t++)
        CUDA_TRY(e,
                 cudaMemset2DAsync((char *)g->c + (size_t)(t * g->stride_c) * es,
                                   (size_t)g->ldc * es, 0, (size_t)g->cols * es, (size_t)g->rows,
                                   be->stream),
                 "clearing an empty matrix product");
    return GRAFT_OK;
}

/* Enqueue the product; *supported is false (nothing enqueued, no error) when cuBLASLt has no
 * algorithm for it. */
static graft_status gemm_enqueue(cuda_backend *be, cuda_gemm_plan **slot, const cuda_gemm_args *g,
                                 bool *supported, graft_err *e) {
    cudaDataType_t type;
    *supported = false;
    if (!gemm_cuda_type(g->dtype, &type)) return GRAFT_OK;
    TRY(gemm_check_args(g, e));
    *supported = true;
    if (g->rows == 0 || g->cols == 0 || g->batch == 0) return GRAFT_OK;
    size_t es = g->dtype == GRAFT_DTYPE_F32 ? 4 : 2;
    if (g->k == 0) return gemm_empty_sum(be, g, es, supported, e);
    cuda_gemm_plan *local = NULL, *p = NULL;
    cuda_gemm_plan **use = slot ? slot : &local;
    TRY(plan_get(be, use, g, type, &p, e));
    if (!p) {
        *supported = false;
        return GRAFT_OK;
    }
    graft_status st = GRAFT_OK;
    if (g->bias)
        st = set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias, e);
    void *ws = NULL;
    if (st == GRAFT_OK && p->workspace_bytes) st = cuda_workspace(be, p->workspace_bytes, &ws, e);
    if (st == GRAFT_OK) {
        cublasStatus_t cs =
            cublasLtMatmul(be->lt, p->desc, &g->alpha, g->b, p->lt_a, g->a, p->lt_b, &g->beta, g->c,
                           p->lt_c, g->c, p->lt_c, &p->algo, ws, p->workspace_bytes, be->stream);
        if (cs != CUBLAS_STATUS_SUCCESS) st = cublas_fail(e, cs, "running a cuBLASLt matmul");
    }
    /* The call is enqueued with its own copy of what it needs: a one-off plan can go now. */
    cuda_gemm_plan_free(local);
    return st;
}

graft_status cuda_gemm_run(cuda_backend *be, cuda_gemm_plan **plan, const cuda_gemm_args *g,
                           graft_err *e) {
    bool supported = false;
    TRY(gemm_enqueue(be, plan, g, &supported, e));
    if (!supported)
        return err_set(e, GRAFT_E_UNSUPPORTED,
                       "cuBLASLt has no algorithm for a %s product (%lld x %lld) x (%lld x %lld)%s",
                       graft_dtype_name(g->dtype), (long long)g->rows, (long long)g->k,
                       (long long)g->k, (long long)g->cols,
                       g->k == 0 ? " with an empty inner dimension and a bias or beta" : "");
    return GRAFT_OK;
}

cuda_gemm_args cuda_gemm_dense(int64_t rows, int64_t cols, int64_t k, const void *a, bool trans_a,
                               const void *b, bool trans_b, void *c, graft_dtype dtype) {
    cuda_gemm_args g = {.rows = rows,
                        .cols = cols,
                        .k = k,
                        .a = a,
                        .lda = trans_a ? rows : k,
                        .trans_a = trans_a,
                        .b = b,
                        .ldb = trans_b ? k : cols,
                        .trans_b = trans_b,
                        .c = c,
                        .ldc = cols,
                        .dtype = dtype,
                        .epilogue = CUDA_GEMM_EPILOGUE_NONE,
                        .alpha = 1.0f,
                        .beta = 0.0f,
                        .batch = 1};
    return g;
}

graft_status cuda_gemm_lt(cuda_backend *be, int64_t rows, int64_t cols, int64_t k, const void *a,
                          int64_t lda, bool trans_a, const void *b, int64_t ldb, bool trans_b,
                          void *c, int64_t ldc, graft_dtype dtype, const void *bias, int epilogue,
                          float alpha, graft_err *e) {
    cuda_gemm_args g = cuda_gemm_dense(rows, cols, k, a, trans_a, b, trans_b, c, dtype);
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = ldc;
    g.bias = bias;
    g.epilogue = epilogue;
    g.alpha = alpha;
    return cuda_gemm_run(be, NULL, &g, e);
}

/* ---- MatMul ------------------------------------------------------------------------------- */

/* MatMul's batch dims after dropping 1s and merging runs that step evenly in A, B and Y: the
 * last is done by one strided-batched call, the others by a loop of calls. */
typedef struct matmul_batches {
    int n;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t sa[GRAFT_MAX_DIMS], sb[GRAFT_MAX_DIMS], sy[GRAFT_MAX_DIMS]; /* element strides */
} matmul_batches;

static void matmul_batches_make(const matmul_bcast *p, matmul_batches *mb) {
    int nb = p->nb;
    const int64_t *dims = p->dims, *sa = p->sa, *sb = p->sb, *sy = p->sy;
    mb->n = 0;
    for (int i = 0; i < nb; i++) {
        if (dims[i] == 1) continue;
        int j = mb->n - 1;
        /* Dim i continues the previous kept dim when each operand steps evenly across both. */
        if (j >= 0 && mb->sa[j] == sa[i] * dims[i] && mb->sb[j] == sb[i] * dims[i] &&
            mb->sy[j] == sy[i] * dims[i]) {
            mb->dims[j] *= dims[i];
            mb->sa[j] = sa[i];
            mb->sb[j] = sb[i];
            mb->sy[j] = sy[i];
            continue;
        }
        mb->dims[mb->n] = dims[i];
        mb->sa[mb->n] = sa[i];
        mb->sb[mb->n] = sb[i];
        mb->sy[mb->n] = sy[i];
        mb->n++;
    }
}

/* The strided-batched calls of the outer batch dims, one per outer index. */
static graft_status matmul_outer_loop(cuda_backend *be, const op_call *c, void **state,
                                      const matmul_batches *mb, cuda_gemm_args *g, bool *handled) {
    const char *a0 = g->a, *b0 = g->b;
    char *y0 = g->c;
    size_t es = g->dtype == GRAFT_DTYPE_F32 ? 4 : 2;
    int outer_dims = mb->n > 0 ? mb->n - 1 : 0;
    int64_t outer = 1;
    for (int i = 0; i < outer_dims; i++) outer *= mb->dims[i];
    for (int64_t t = 0; t < outer; t++) {
        int64_t rest = t, oa = 0, ob = 0, oy = 0;
        for (int i = outer_dims - 1; i >= 0; i--) {
            int64_t idx = rest % mb->dims[i];
            rest /= mb->dims[i];
            oa += idx * mb->sa[i];
            ob += idx * mb->sb[i];
            oy += idx * mb->sy[i];
        }
        g->a = a0 + (size_t)oa * es;
        g->b = b0 + (size_t)ob * es;
        g->c = y0 + (size_t)oy * es;
        bool supported = false;
        TRY(gemm_enqueue(be, (cuda_gemm_plan **)state, g, &supported, c->err));
        if (!supported) {
            if (t > 0)
                return op_error(c->node, c->err, GRAFT_E_BACKEND,
                                "cuBLASLt refused part of a batched product");
            return GRAFT_OK; /* nothing enqueued: the CPU runs the node */
        }
    }
    *handled = true;
    return GRAFT_OK;
}

static graft_status run_MatMul(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    const tensor *a = c->in[0], *b = c->in[1];
    tensor *y = c->out[0];
    *handled = false;
    if (!cuda_is_float(y->dtype) || a->dtype != y->dtype || b->dtype != y->dtype || a->ndim < 1 ||
        b->ndim < 1)
        return GRAFT_OK;
    /* numpy: a 1-D A is a row (1, K), a 1-D B a column (K, 1). */
    matmul_bcast bc;
    matmul_bcast_make(a, b, &bc);
    int64_t m = bc.m, n = bc.n, k = bc.k;
    int64_t kb = b->dims[b->ndim >= 2 ? b->ndim - 2 : 0];
    if (kb != k)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "A has %lld columns but B %lld rows",
                        (long long)k, (long long)kb);
    if (tensor_numel(y) == 0) {
        *handled = true;
        return GRAFT_OK;
    }
    if (k == 0) { /* empty sums */
        CUDA_TRY(c->err, cudaMemsetAsync(y->data, 0, (size_t)tensor_nbytes(y), be->stream),
                 "clearing an empty MatMul");
        *handled = true;
        return GRAFT_OK;
    }
    matmul_batches mb;
    matmul_batches_make(&bc, &mb);
    cuda_gemm_args g = cuda_gemm_dense(m, n, k, a->data, false, b->data, false, y->data, y->dtype);
    if (mb.n > 0) {
        int last = mb.n - 1;
        if (mb.sb[last] == 0 && mb.sa[last] == m * k) {
            g.rows = m * mb.dims[last]; /* B shared by consecutive A's: one taller product */
        } else {
            g.batch = mb.dims[last];
            g.stride_a = mb.sa[last];
            g.stride_b = mb.sb[last];
            g.stride_c = mb.sy[last];
        }
    }
    return matmul_outer_loop(be, c, state, &mb, &g, handled);
}

/* ---- Gemm --------------------------------------------------------------------------------- */

/* Put C, broadcast to (m, n), into Y for the product to add beta times. */
static graft_status gemm_stage_c(cuda_backend *be, const op_call *c, int64_t c_rows,
                                 int64_t c_cols) {
    const tensor *cm = c->in[2];
    tensor *y = c->out[0];
    if (cm->data == y->data) return GRAFT_OK;
    int64_t m = y->dims[0], n = y->dims[1];
    if (c_rows == m && c_cols == n) {
        CUDA_TRY(c->err,
                 cudaMemcpyAsync(y->data, cm->data, (size_t)tensor_nbytes(y),
                                 cudaMemcpyDeviceToDevice, be->stream),
                 "copying Gemm's C");
        return GRAFT_OK;
    }
    int es = y->dtype == GRAFT_DTYPE_F32 ? 4 : 2;
    CUDA_TRY(c->err,
             gemm_broadcast_c_launch(cm->data, c_rows, c_cols, y->data, m, n, es, be->stream),
             "broadcasting Gemm's C");
    return GRAFT_OK;
}

static graft_status run_Gemm(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    const tensor *a = c->in[0], *b = c->in[1], *cm = c->n_in > 2 ? c->in[2] : NULL;
    tensor *y = c->out[0];
    *handled = false;
    if (!cuda_is_float(y->dtype) || a->dtype != y->dtype || b->dtype != y->dtype ||
        (cm && cm->dtype != y->dtype) || a->ndim != 2 || b->ndim != 2 || y->ndim != 2)
        return GRAFT_OK;
    bool ta = attr_i(c->node, "transA", 0) != 0, tb = attr_i(c->node, "transB", 0) != 0;
    float alpha = attr_f(c->node, "alpha", 1.0f), beta = cm ? attr_f(c->node, "beta", 1.0f) : 0;
    int64_t m = a->dims[ta ? 1 : 0], k = a->dims[ta ? 0 : 1], n = b->dims[tb ? 0 : 1];
    if (b->dims[tb ? 1 : 0] != k || y->dims[0] != m || y->dims[1] != n)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "A, B and Y disagree on Gemm's sizes");
    if (m == 0 || n == 0) {
        *handled = true;
        return GRAFT_OK;
    }
    if (k == 0) return GRAFT_OK; /* Y = beta * C: rare enough for the CPU */
    cuda_gemm_args g = cuda_gemm_dense(m, n, k, a->data, ta, b->data, tb, y->data, y->dtype);
    g.alpha = alpha;
    if (cm && beta != 0.0f) {
        int64_t c_rows = cm->ndim == 2 ? cm->dims[0] : 1;
        int64_t c_cols = cm->ndim >= 1 ? cm->dims[cm->ndim - 1] : 1;
        if (cm->ndim > 2 || (c_rows != 1 && c_rows != m) || (c_cols != 1 && c_cols != n))
            return op_error(c->node, c->err, GRAFT_E_SHAPE, "C does not broadcast to (%lld, %lld)",
                            (long long)m, (long long)n);
        if (beta == 1.0f && c_rows == 1 && c_cols == n) {
            g.bias = cm->data; /* a Linear layer's bias: cuBLASLt's bias epilogue */
        } else {
            TRY(gemm_stage_c(be, c, c_rows, c_cols));
            g.beta = beta;
        }
    }
    bool supported = false;
    TRY(gemm_enqueue(be, (cuda_gemm_plan **)state, &g, &supported, c->err));
    *handled = supported;
    return GRAFT_OK;
}

const cuda_kernel cuda_matmul_kernels[] = {
    {"MatMul", run_MatMul, plan_free_state},
    {"Gemm", run_Gemm, plan_free_state},
    {NULL, NULL, NULL},
};

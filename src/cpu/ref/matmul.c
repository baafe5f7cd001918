/* matmul.c: reference kernels of Gemm and MatMul, and the blocked f32 matrix product that they
 * and Conv share. */
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../../core/half.h"
#include "../../ops/broadcast_plan.h"
#include "nn_ref.h"

enum { ROWS_PER_TASK = 32, COLS_PER_TASK = 256, DEPTH_PER_PASS = 256 };

/* The product's inner loops, compiled also for AVX-512 and AVX2 (+FMA) and picked at load time:
 * the default build targets baseline x86-64 (SSE2), four times slower here. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define VECTOR_CLONES                                                                              \
    __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
#else
#define VECTOR_CLONES
#endif

bool nn_may_parallelize(void) {
#ifdef _OPENMP
    return !omp_in_parallel();
#else
    return false;
#endif
}

/* c[i0:i1, j0:j1] += a[i0:i1, k0:k1] * b[k0:k1, j0:j1]. Four rows at a time so that each row of b
 * loaded serves four rows of c; the inner loop is contiguous and vectorizes. */
VECTOR_CLONES static void block_nn(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t k0,
                                   int64_t k1, const float *a, int64_t lda, const float *b,
                                   int64_t ldb, float *c, int64_t ldc) {
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
        float *restrict c0 = c + i * ldc, *restrict c1 = c0 + ldc;
        float *restrict c2 = c1 + ldc, *restrict c3 = c2 + ldc;
        const float *ar = a + i * lda;
        for (int64_t p = k0; p < k1; p++) {
            float v0 = ar[p], v1 = ar[lda + p], v2 = ar[2 * lda + p], v3 = ar[3 * lda + p];
            const float *restrict bp = b + p * ldb;
#pragma omp simd
            for (int64_t j = j0; j < j1; j++) {
                float bj = bp[j];
                c0[j] += v0 * bj;
                c1[j] += v1 * bj;
                c2[j] += v2 * bj;
                c3[j] += v3 * bj;
            }
        }
    }
    for (; i < i1; i++) {
        float *restrict cr = c + i * ldc;
        for (int64_t p = k0; p < k1; p++) {
            float v = a[i * lda + p];
            const float *restrict bp = b + p * ldb;
#pragma omp simd
            for (int64_t j = j0; j < j1; j++) cr[j] += v * bp[j];
        }
    }
}

/* c[i0:i1, j0:j1] += a[i0:i1, :] * b[j0:j1, :]^T: dot products of contiguous rows. */
VECTOR_CLONES static void block_nt(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t k,
                                   const float *a, int64_t lda, const float *b, int64_t ldb,
                                   float *c, int64_t ldc) {
    for (int64_t i = i0; i < i1; i++) {
        const float *restrict ar = a + i * lda;
        for (int64_t j = j0; j < j1; j++) {
            const float *restrict br = b + j * ldb;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t p = 0; p < k; p++) acc += ar[p] * br[p];
            c[i * ldc + j] += acc;
        }
    }
}

/* b (n, k) transposed into a new (k, n) buffer; NULL when out of memory. */
static float *transpose_copy(int64_t n, int64_t k, const float *b, int64_t ldb) {
    float *t = malloc((size_t)(n * k) * sizeof(float));
    if (!t) return NULL;
    for (int64_t j = 0; j < n; j++)
        for (int64_t p = 0; p < k; p++) t[p * n + j] = b[j * ldb + p];
    return t;
}

void nn_sgemm(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
              int64_t ldb, bool b_transposed, float *c, int64_t ldc, bool accumulate) {
    if (m <= 0 || n <= 0) return;
    if (!accumulate)
        for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, (size_t)n * sizeof(float));
    if (k <= 0) return;
    /* Dot products suit a few rows; more rows amortize a transposed copy of b, after which the
     * row-streaming kernel runs several times faster. */
    float *b_rows = b_transposed && m >= 4 ? transpose_copy(n, k, b, ldb) : NULL;
    if (b_rows) {
        nn_sgemm(m, n, k, a, lda, b_rows, n, false, c, ldc, true);
        free(b_rows);
        return;
    }
    int64_t row_tasks = (m + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    int64_t col_tasks = (n + COLS_PER_TASK - 1) / COLS_PER_TASK;
    int64_t tasks = row_tasks * col_tasks;
    bool parallel = tasks > 1 && m * n * k >= (1 << 18) && nn_may_parallelize();
#pragma omp parallel for schedule(dynamic) if (parallel)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t i0 = (t / col_tasks) * ROWS_PER_TASK, j0 = (t % col_tasks) * COLS_PER_TASK;
        int64_t i1 = i0 + ROWS_PER_TASK < m ? i0 + ROWS_PER_TASK : m;
        int64_t j1 = j0 + COLS_PER_TASK < n ? j0 + COLS_PER_TASK : n;
        if (b_transposed) {
            block_nt(i0, i1, j0, j1, k, a, lda, b, ldb, c, ldc);
            continue;
        }
        for (int64_t k0 = 0; k0 < k; k0 += DEPTH_PER_PASS) {
            int64_t k1 = k0 + DEPTH_PER_PASS < k ? k0 + DEPTH_PER_PASS : k;
            block_nn(i0, i1, j0, j1, k0, k1, a, lda, b, ldb, c, ldc);
        }
    }
}

float *nn_f32_copy(const tensor *t) {
    int64_t n = tensor_numel(t);
    float *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!buf) return NULL;
    if (t->dtype == GRAFT_DTYPE_F32) {
        if (n > 0) memcpy(buf, t->data, (size_t)n * sizeof(float));
        return buf;
    }
    const uint16_t *h = t->data;
    for (int64_t i = 0; i < n; i++)
        buf[i] = t->dtype == GRAFT_DTYPE_F16    ? f16_to_f32(h[i])
                 : t->dtype == GRAFT_DTYPE_BF16 ? bf16_to_f32(h[i])
                                                : (float)tensor_get_f64(t, i);
    return buf;
}

void nn_f32_store(tensor *t, const float *values) {
    int64_t n = tensor_numel(t);
    if (t->dtype == GRAFT_DTYPE_F32) {
        if (n > 0) memcpy(t->data, values, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *h = t->data;
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == GRAFT_DTYPE_F16)
            h[i] = f32_to_f16(values[i]);
        else if (t->dtype == GRAFT_DTYPE_BF16)
            h[i] = f32_to_bf16(values[i]);
        else
            tensor_set_f64(t, i, values[i]);
    }
}

static bool is_half(graft_dtype dt) {
    return dt == GRAFT_DTYPE_F16 || dt == GRAFT_DTYPE_BF16;
}

/* acc + x * y with two's-complement wrap-around, as integer MatMul in other runtimes does (signed
 * overflow would be undefined behaviour in C). */
static int64_t madd_wrap(int64_t acc, int64_t x, int64_t y) {
    return (int64_t)((uint64_t)acc + (uint64_t)x * (uint64_t)y);
}

static void set_i64(tensor *t, int64_t i, int64_t v) {
    switch (t->dtype) {
    case GRAFT_DTYPE_I64:
        ((int64_t *)t->data)[i] = v;
        break;
    case GRAFT_DTYPE_U64:
        ((uint64_t *)t->data)[i] = (uint64_t)v;
        break;
    case GRAFT_DTYPE_I32:
        ((int32_t *)t->data)[i] = (int32_t)v;
        break;
    case GRAFT_DTYPE_U32:
        ((uint32_t *)t->data)[i] = (uint32_t)v;
        break;
    default:
        tensor_set_f64(t, i, (double)v);
        break;
    }
}

graft_status nn_run_via_f32(const op_call *c, graft_status (*f32_kernel)(const op_call *)) {
    tensor in32[3] = {{0}}, out32 = *c->out[0];
    const tensor *ins[3] = {NULL, NULL, NULL};
    graft_status st = GRAFT_OK;
    out32.dtype = GRAFT_DTYPE_F32;
    out32.data =
        malloc((size_t)(tensor_numel(&out32) > 0 ? tensor_numel(&out32) : 1) * sizeof(float));
    if (!out32.data) st = GRAFT_E_OUT_OF_MEMORY;
    for (int i = 0; i < c->n_in && i < 3 && st == GRAFT_OK; i++) {
        if (!c->in[i]) continue;
        in32[i] = *c->in[i];
        in32[i].dtype = GRAFT_DTYPE_F32;
        in32[i].data = nn_f32_copy(c->in[i]);
        if (!in32[i].data) st = GRAFT_E_OUT_OF_MEMORY;
        ins[i] = &in32[i];
    }
    if (st == GRAFT_OK) {
        tensor *outs[1] = {&out32};
        op_call c32 = {c->node, ins, c->n_in, outs, 1, c->err};
        st = f32_kernel(&c32);
        if (st == GRAFT_OK) nn_f32_store(c->out[0], out32.data);
    } else {
        st = op_error(c->node, c->err, st, "out of memory staging 16-bit floats as f32");
    }
    for (int i = 0; i < 3; i++) free(in32[i].data);
    free(out32.data);
    return st;
}

/* ---- Gemm --------------------------------------------------------------------------------- */

typedef struct gemm_dims {
    int64_t m, n, k;
    bool trans_a, trans_b;
    int64_t c_rows, c_cols; /* C's shape seen as (c_rows, c_cols), each 1 or the full size */
    float alpha, beta;
} gemm_dims;

static gemm_dims gemm_read(const op_call *c) {
    gemm_dims g;
    const tensor *a = c->in[0], *b = c->in[1], *cc = c->n_in > 2 ? c->in[2] : NULL;
    g.trans_a = attr_i(c->node, "transA", 0) != 0;
    g.trans_b = attr_i(c->node, "transB", 0) != 0;
    g.m = a->dims[g.trans_a ? 1 : 0];
    g.k = a->dims[g.trans_a ? 0 : 1];
    g.n = b->dims[g.trans_b ? 0 : 1];
    g.alpha = attr_f(c->node, "alpha", 1.0f);
    g.beta = cc ? attr_f(c->node, "beta", 1.0f) : 0.0f;
    g.c_rows = cc && cc->ndim == 2 ? cc->dims[0] : 1;
    g.c_cols = cc && cc->ndim >= 1 ? cc->dims[cc->ndim - 1] : 1;
    return g;
}

/* y = alpha * y + beta * C (C broadcast over rows and/or columns). */
static void gemm_epilogue_f32(const gemm_dims *g, const float *cmat, float *y) {
    if (g->alpha == 1.0f && (g->beta == 0.0f || !cmat)) return;
    bool parallel = g->m * g->n >= 32768 && nn_may_parallelize();
#pragma omp parallel for if (parallel)
    for (int64_t i = 0; i < g->m; i++) {
        const float *crow = cmat ? cmat + (g->c_rows == 1 ? 0 : i) * g->c_cols : NULL;
        for (int64_t j = 0; j < g->n; j++) {
            float v = g->alpha * y[i * g->n + j];
            if (crow) v += g->beta * crow[g->c_cols == 1 ? 0 : j];
            y[i * g->n + j] = v;
        }
    }
}

static graft_status gemm_f32(const op_call *c) {
    gemm_dims g = gemm_read(c);
    const float *a = c->in[0]->data, *b = c->in[1]->data;
    const float *cmat = c->n_in > 2 && c->in[2] && g.beta != 0.0f ? c->in[2]->data : NULL;
    float *y = c->out[0]->data, *a_rows = NULL;
    if (g.trans_a) {
        /* A is stored (k, m); the product wants rows of A, so transpose once. */
        a_rows = malloc((size_t)(g.m * g.k > 0 ? g.m * g.k : 1) * sizeof(float));
        if (!a_rows) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "transposing A");
        for (int64_t p = 0; p < g.k; p++)
            for (int64_t i = 0; i < g.m; i++) a_rows[i * g.k + p] = a[p * g.m + i];
        a = a_rows;
    }
    nn_sgemm(g.m, g.n, g.k, a, g.k, b, g.trans_b ? g.k : g.n, g.trans_b, y, g.n, false);
    gemm_epilogue_f32(&g, cmat, y);
    free(a_rows);
    return GRAFT_OK;
}

/* f64 and integers, element by element (integers stay exact in int64). */
static graft_status gemm_generic(const op_call *c) {
    gemm_dims g = gemm_read(c);
    const tensor *a = c->in[0], *b = c->in[1], *cc = c->n_in > 2 ? c->in[2] : NULL;
    tensor *y = c->out[0];
    bool ints = dtype_is_int(y->dtype);
    double alpha = attr_f(c->node, "alpha", 1.0f), beta = cc ? attr_f(c->node, "beta", 1.0f) : 0;
    for (int64_t i = 0; i < g.m; i++)
        for (int64_t j = 0; j < g.n; j++) {
            int64_t ci = cc ? (g.c_rows == 1 ? 0 : i) * g.c_cols + (g.c_cols == 1 ? 0 : j) : 0;
            int64_t iacc = 0;
            double facc = 0;
            for (int64_t p = 0; p < g.k; p++) {
                int64_t ai = g.trans_a ? p * g.m + i : i * g.k + p;
                int64_t bi = g.trans_b ? j * g.k + p : p * g.n + j;
                if (ints)
                    iacc = madd_wrap(iacc, tensor_get_i64(a, ai), tensor_get_i64(b, bi));
                else
                    facc += tensor_get_f64(a, ai) * tensor_get_f64(b, bi);
            }
            if (ints && alpha == 1.0 && (beta == 1.0 || beta == 0.0)) {
                set_i64(y, i * g.n + j,
                        madd_wrap(iacc, cc && beta != 0.0 ? tensor_get_i64(cc, ci) : 0, 1));
                continue;
            }
            double v = alpha * (ints ? (double)iacc : facc);
            if (cc && beta != 0.0) v += beta * tensor_get_f64(cc, ci);
            if (ints)
                set_i64(y, i * g.n + j, (int64_t)v);
            else
                tensor_set_f64(y, i * g.n + j, v);
        }
    return GRAFT_OK;
}

graft_status ref_Gemm(const op_call *c) {
    graft_dtype dt = c->out[0]->dtype;
    if (dt == GRAFT_DTYPE_F32) return gemm_f32(c);
    if (is_half(dt)) return nn_run_via_f32(c, gemm_f32);
    return gemm_generic(c);
}

/* ---- MatMul ------------------------------------------------------------------------------- */

/* MatMul seen as `batches` products of (m, k) by (k, n), with each batch's element offsets. */
typedef struct matmul_plan {
    int64_t m, n, k, batches;
    int64_t *a_off, *b_off; /* per batch, in elements */
} matmul_plan;

static graft_status matmul_plan_make(const op_call *c, matmul_plan *p) {
    matmul_bcast mb;
    matmul_bcast_make(c->in[0], c->in[1], &mb);
    p->m = mb.m;
    p->n = mb.n;
    p->k = mb.k;
    p->batches = 1;
    for (int i = 0; i < mb.nb; i++) p->batches *= mb.dims[i];
    size_t nbatch = (size_t)(p->batches > 0 ? p->batches : 1);
    p->a_off = malloc(nbatch * sizeof(int64_t));
    p->b_off = malloc(nbatch * sizeof(int64_t));
    if (!p->a_off || !p->b_off) {
        free(p->a_off);
        free(p->b_off);
        return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "planning a batched MatMul");
    }
    for (int64_t t = 0; t < p->batches; t++) {
        int64_t rest = t, oa = 0, ob = 0;
        for (int i = mb.nb - 1; i >= 0; i--) {
            int64_t idx = rest % mb.dims[i];
            rest /= mb.dims[i];
            oa += idx * mb.sa[i];
            ob += idx * mb.sb[i];
        }
        p->a_off[t] = oa;
        p->b_off[t] = ob;
    }
    return GRAFT_OK;
}

static graft_status matmul_f32(const op_call *c) {
    matmul_plan p;
    TRY(matmul_plan_make(c, &p));
    const float *a = c->in[0]->data, *b = c->in[1]->data;
    float *y = c->out[0]->data;
    /* Many small products (attention heads): one per thread; few large ones: threads inside. */
    bool outer = p.batches >= 4 && p.batches * p.m * p.n * p.k >= (1 << 18) && nn_may_parallelize();
#pragma omp parallel for if (outer)
    for (int64_t t = 0; t < p.batches; t++)
        nn_sgemm(p.m, p.n, p.k, a + p.a_off[t], p.k, b + p.b_off[t], p.n, false, y + t * p.m * p.n,
                 p.n, false);
    free(p.a_off);
    free(p.b_off);
    return GRAFT_OK;
}

static graft_status matmul_generic(const op_call *c) {
    matmul_plan p;
    TRY(matmul_plan_make(c, &p));
    const tensor *a = c->in[0], *b = c->in[1];
    tensor *y = c->out[0];
    bool ints = dtype_is_int(y->dtype);
    for (int64_t t = 0; t < p.batches; t++)
        for (int64_t i = 0; i < p.m; i++)
            for (int64_t j = 0; j < p.n; j++) {
                int64_t iacc = 0, yi = (t * p.m + i) * p.n + j;
                double facc = 0;
                for (int64_t q = 0; q < p.k; q++) {
                    int64_t ai = p.a_off[t] + i * p.k + q, bi = p.b_off[t] + q * p.n + j;
                    if (ints)
                        iacc = madd_wrap(iacc, tensor_get_i64(a, ai), tensor_get_i64(b, bi));
                    else
                        facc += tensor_get_f64(a, ai) * tensor_get_f64(b, bi);
                }
                if (ints)
                    set_i64(y, yi, iacc);
                else
                    tensor_set_f64(y, yi, facc);
            }
    free(p.a_off);
    free(p.b_off);
    return GRAFT_OK;
}

graft_status ref_MatMul(const op_call *c) {
    graft_dtype dt = c->out[0]->dtype;
    if (dt == GRAFT_DTYPE_F32) return matmul_f32(c);
    if (is_half(dt)) return nn_run_via_f32(c, matmul_f32);
    return matmul_generic(c);
}

/* test_cuda_glue_matmul.c: the host side of the CUDA MatMul/Gemm kernels (src/cuda/cuda_matmul.c)
 * without a GPU: a stand-in for cuBLASLt computes each column-major product on the host from the
 * descriptors the glue builds, and the results are compared with a row-major reference. This
 * checks the row-major mapping, transposes, leading dims, batching and broadcasting, 1-D operands,
 * Gemm's C, the bias and ReLU epilogues, and plan reuse. */
#include "../src/cuda/cuda_matmul.c"

#include <math.h>
#include <stdio.h>

#include "test_node.h"
#include "test_util.h"

/* ---- a host cuBLASLt (f32 only) ----------------------------------------------------------- */

typedef struct fake_layout {
    uint64_t rows, cols;
    int64_t ld, batch, stride;
} fake_layout;

typedef struct fake_desc {
    int32_t trans_a, trans_b;
    uint32_t epilogue;
    const void *bias;
} fake_desc;

static int heuristic_calls, bad_calls;

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    fake_layout *f = calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    f->rows = rows;
    f->cols = cols;
    f->ld = ld;
    f->batch = 1;
    if (t != CUDA_R_32F || ld < (int64_t)rows) bad_calls++;
    *l = (cublasLtMatrixLayout_t)f;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t a, const void *buf,
                                                size_t size) {
    fake_layout *f = (fake_layout *)l;
    if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == 4)
        f->batch = *(const int32_t *)buf;
    else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && size == 8)
        f->stride = *(const int64_t *)buf;
    else
        bad_calls++;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
    fake_desc *f = calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    f->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) bad_calls++; /* no TF32 by default */
    *d = (cublasLtMatmulDesc_t)f;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t size) {
    fake_desc *f = (fake_desc *)d;
    if (a == CUBLASLT_MATMUL_DESC_TRANSA && size == 4)
        f->trans_a = *(const int32_t *)buf;
    else if (a == CUBLASLT_MATMUL_DESC_TRANSB && size == 4)
        f->trans_b = *(const int32_t *)buf;
    else if (a == CUBLASLT_MATMUL_DESC_EPILOGUE && size == 4)
        f->epilogue = *(const uint32_t *)buf;
    else if (a == CUBLASLT_MATMUL_DESC_BIAS_POINTER && size == sizeof(void *))
        f->bias = *(const void *const *)buf;
    else if (a != CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE || size != 4)
        bad_calls++;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t size) {
    (void)p;
    (void)buf;
    if (size != (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ? 8u : 4u)) bad_calls++;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              cublasLtMatmulPreference_t p, int n,
                                              cublasLtMatmulHeuristicResult_t *r, int *returned) {
    (void)h, (void)d, (void)a, (void)b, (void)c, (void)dd, (void)p, (void)n;
    heuristic_calls++;
    memset(r, 0, sizeof *r);
    r[0].state = CUBLAS_STATUS_SUCCESS;
    r[0].workspaceSize = 1024;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* Element (i, j) of op(x) for a column-major layout. */
static float lt_at(const float *x, const fake_layout *l, int32_t op, int64_t i, int64_t j) {
    return op == CUBLAS_OP_N ? x[i + j * l->ld] : x[j + i * l->ld];
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t al, const void *B,
                              cublasLtMatrixLayout_t bl, const void *beta, const void *C,
                              cublasLtMatrixLayout_t cl, void *D, cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_size,
                              cudaStream_t stream) {
    (void)h, (void)algo, (void)stream;
    const fake_desc *f = (const fake_desc *)desc;
    const fake_layout *la = (const fake_layout *)al, *lb = (const fake_layout *)bl;
    const fake_layout *ld = (const fake_layout *)dl;
    int64_t m = (int64_t)ld->rows, n = (int64_t)ld->cols;
    int64_t k = (int64_t)(f->trans_a == CUBLAS_OP_N ? la->cols : la->rows);
    if (C != D || cl != dl || !ws || ws_size < 1024 ||
        (f->trans_a == CUBLAS_OP_N ? la->rows : la->cols) != (uint64_t)m ||
        (f->trans_b == CUBLAS_OP_N ? lb->rows : lb->cols) != (uint64_t)k ||
        (f->trans_b == CUBLAS_OP_N ? lb->cols : lb->rows) != (uint64_t)n ||
        la->batch != ld->batch || lb->batch != ld->batch) {
        bad_calls++;
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    float s_alpha = *(const float *)alpha, s_beta = *(const float *)beta;
    bool bias = (f->epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
    bool relu = f->epilogue == CUBLASLT_EPILOGUE_RELU || f->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    for (int64_t t = 0; t < ld->batch; t++) {
        const float *a = (const float *)A + t * la->stride, *b = (const float *)B + t * lb->stride;
        float *d = (float *)D + t * ld->stride;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += (double)lt_at(a, la, f->trans_a, i, p) * lt_at(b, lb, f->trans_b, p, j);
                double v = s_alpha * acc + (bias ? ((const float *)f->bias)[i] : 0.0);
                if (s_beta != 0.0f) v += s_beta * d[i + j * ld->ld];
                d[i + j * ld->ld] = relu && v < 0 ? 0.0f : (float)v;
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    (void)s;
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t w, size_t h, cudaStream_t s) {
    (void)s;
    for (size_t i = 0; i < h; i++) memset((char *)p + i * pitch, v, w);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t st) {
    (void)k, (void)st;
    memcpy(d, s, n);
    return cudaSuccess;
}

cudaError_t gemm_broadcast_c_launch(const void *c, int64_t c_rows, int64_t c_cols, void *y,
                                    int64_t rows, int64_t cols, int es, cudaStream_t s) {
    (void)s, (void)es;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            ((float *)y)[i * cols + j] =
                ((const float *)c)[(c_rows == 1 ? 0 : i) * c_cols + (c_cols == 1 ? 0 : j)];
    return cudaSuccess;
}

static char workspace[4096];

graft_status cuda_workspace(cuda_backend *be, size_t bytes, void **out, graft_err *e) {
    (void)be;
    if (bytes > sizeof workspace) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "workspace");
    *out = workspace;
    return GRAFT_OK;
}

/* ---- references and random operands ------------------------------------------------------- */

static uint32_t rng = 12345;

static int rand_int(int n) {
    rng = rng * 1103515245u + 12345u;
    return (int)((rng >> 8) % (uint32_t)n);
}

static void fill(tensor *t) {
    int64_t n = tensor_numel(t);
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand_int(2001) / 1000.0f - 1.0f;
    t->data = p;
}

static bool close_all(const float *got, const float *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])))) return false;
    return true;
}

/* numpy matmul of a and b into y (shape written to ydims). */
static void ref_matmul(const tensor *a, const tensor *b, float *y, tensor *yt) {
    int64_t k = a->dims[a->ndim - 1], m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
    int64_t n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    int nb = nba > nbb ? nba : nbb;
    int64_t bd[GRAFT_MAX_DIMS], sa[GRAFT_MAX_DIMS], sb[GRAFT_MAX_DIMS], st_a = m * k, st_b = k * n;
    int64_t batches = 1;
    for (int i = nb - 1; i >= 0; i--) {
        int ia = i - (nb - nba), ib = i - (nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        bd[i] = da > db ? da : db;
        sa[i] = da == 1 ? 0 : st_a;
        sb[i] = db == 1 ? 0 : st_b;
        st_a *= da;
        st_b *= db;
        batches *= bd[i];
    }
    yt->ndim = 0;
    for (int i = 0; i < nb; i++) yt->dims[yt->ndim++] = bd[i];
    if (a->ndim >= 2) yt->dims[yt->ndim++] = m;
    if (b->ndim >= 2) yt->dims[yt->ndim++] = n;
    const float *av = a->data, *bv = b->data;
    for (int64_t t = 0; t < batches; t++) {
        int64_t rest = t, oa = 0, ob = 0;
        for (int i = nb - 1; i >= 0; i--) {
            oa += (rest % bd[i]) * sa[i];
            ob += (rest % bd[i]) * sb[i];
            rest /= bd[i];
        }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += (double)av[oa + i * k + p] * bv[ob + p * n + j];
                y[(t * m + i) * n + j] = (float)acc;
            }
    }
}

/* Random MatMul operands: ranks 1 to 4, batch dims broadcast at random, K possibly 0. */
static void random_matmul(tensor *a, tensor *b) {
    int64_t m = 1 + rand_int(5), k = rand_int(5), n = 1 + rand_int(5), bd[2];
    a->ndim = 1 + rand_int(4);
    b->ndim = 1 + rand_int(4);
    a->dtype = b->dtype = GRAFT_DTYPE_F32;
    int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    for (int i = 0; i < 2; i++) bd[i] = 1 + rand_int(3);
    for (int i = 0; i < a->ndim - 2; i++) a->dims[i] = rand_int(2) ? bd[nb - (a->ndim - 2) + i] : 1;
    for (int i = 0; i < b->ndim - 2; i++) b->dims[i] = rand_int(2) ? bd[nb - (b->ndim - 2) + i] : 1;
    a->dims[a->ndim - 1] = k;
    if (a->ndim >= 2) a->dims[a->ndim - 2] = m;
    b->dims[b->ndim >= 2 ? b->ndim - 2 : 0] = k;
    if (b->ndim >= 2) b->dims[b->ndim - 1] = n;
    fill(a);
    fill(b);
}

static void test_matmul(void) {
    cuda_backend be;
    memset(&be, 0, sizeof be);
    int bad = 0;
    for (int iter = 0; iter < 2000 && !bad; iter++) {
        tensor a = {0}, b = {0}, y = {0};
        random_matmul(&a, &b);
        float want[1024], got[1024];
        ref_matmul(&a, &b, want, &y);
        y.dtype = GRAFT_DTYPE_F32;
        y.data = got;
        test_node t;
        node_init(&t, "MatMul", 13);
        const tensor *ins[2] = {&a, &b};
        tensor *outs[1] = {&y};
        graft_err err = {0};
        op_call c = {&t.node, ins, 2, outs, 1, &err};
        void *state = NULL;
        for (int rep = 0; rep < 2 && !bad; rep++) { /* the second run reuses the plan */
            for (int i = 0; i < 1024; i++) got[i] = NAN;
            bool handled = false;
            if (run_MatMul(&be, &c, &state, &handled) != GRAFT_OK || !handled ||
                !close_all(got, want, tensor_numel(&y)))
                bad = 1;
        }
        if (bad)
            printf("# A rank %d (%lld, %lld, ...), B rank %d (%lld, %lld, ...)\n", a.ndim,
                   (long long)a.dims[0], (long long)a.dims[1], b.ndim, (long long)b.dims[0],
                   (long long)b.dims[1]);
        plan_free_state(state);
        free(a.data);
        free(b.data);
    }
    CHECK("matmul_broadcast_batches", !bad && !bad_calls, "mismatch (bad cuBLASLt calls: %d)",
          bad_calls);
}

/* Gemm with every transpose, alpha, beta and every shape C may have. */
static bool gemm_case(int64_t ta, int64_t tb, float alpha, float beta, int c_shape) {
    int64_t m = 1 + rand_int(6), k = 1 + rand_int(6), n = 1 + rand_int(6);
    tensor a = {GRAFT_DTYPE_F32, 2, {ta ? k : m, ta ? m : k}, NULL};
    tensor b = {GRAFT_DTYPE_F32, 2, {tb ? n : k, tb ? k : n}, NULL};
    tensor cm = {GRAFT_DTYPE_F32, 0, {0}, NULL}, y = {GRAFT_DTYPE_F32, 2, {m, n}, NULL};
    static const int64_t shapes[7][3] = {{0},        {0},         {1, -1},  {2, 1, -1},
                                         {2, -2, 1}, {2, -2, -1}, {2, 1, 1}}; /* -1: n, -2: m */
    cm.ndim = (int)shapes[c_shape][0];
    for (int i = 0; i < cm.ndim; i++) {
        int64_t d = shapes[c_shape][1 + i];
        cm.dims[i] = d == -1 ? n : d == -2 ? m : d;
    }
    fill(&a);
    fill(&b);
    if (c_shape) fill(&cm);
    int64_t cr = cm.ndim == 2 ? cm.dims[0] : 1, cc = cm.ndim >= 1 ? cm.dims[cm.ndim - 1] : 1;
    float want[64], got[64];
    const float *av = a.data, *bv = b.data, *cv = cm.data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (double)av[ta ? p * m + i : i * k + p] * bv[tb ? j * k + p : p * n + j];
            double v = alpha * acc;
            if (c_shape) v += beta * cv[(cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j)];
            want[i * n + j] = (float)v;
        }
    for (int i = 0; i < 64; i++) got[i] = NAN;
    y.data = got;
    test_node t;
    node_init(&t, "Gemm", 13);
    set_int(&t, "transA", ta);
    set_int(&t, "transB", tb);
    set_float(&t, "alpha", alpha);
    set_float(&t, "beta", beta);
    const tensor *ins[3] = {&a, &b, c_shape ? &cm : NULL};
    tensor *outs[1] = {&y};
    graft_err err = {0};
    op_call c = {&t.node, ins, 3, outs, 1, &err};
    void *state = NULL;
    bool handled = false;
    cuda_backend be;
    memset(&be, 0, sizeof be);
    bool ok =
        run_Gemm(&be, &c, &state, &handled) == GRAFT_OK && handled && close_all(got, want, m * n);
    plan_free_state(state);
    free(a.data);
    free(b.data);
    free(cm.data);
    return ok;
}

static void test_gemm(void) {
    static const float alphas[2] = {1.0f, 0.5f}, betas[3] = {0.0f, 1.0f, -2.0f};
    int bad = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int al = 0; al < 2; al++)
                for (int be = 0; be < 3; be++)
                    for (int cs = 0; cs < 7; cs++)
                        for (int rep = 0; rep < 5; rep++)
                            if (!gemm_case(ta, tb, alphas[al], betas[be], cs)) bad++;
    CHECK("gemm_transposes_and_c", !bad && !bad_calls, "%d mismatching cases", bad);
}

/* The general entry point on sub-matrices (leading dims larger than the rows), with a bias and
 * ReLU, run three times on one plan. */
static void test_gemm_lt(void) {
    cuda_backend be;
    memset(&be, 0, sizeof be);
    float A[8 * 10], B[10 * 12], C[8 * 16], bias[12], want[8 * 16];
    for (int i = 0; i < 80; i++) A[i] = (float)rand_int(2001) / 1000.0f - 1.0f;
    for (int i = 0; i < 120; i++) B[i] = (float)rand_int(2001) / 1000.0f - 1.0f;
    for (int i = 0; i < 12; i++) bias[i] = (float)rand_int(2001) / 1000.0f - 1.0f;
    int bad = 0, extra_heuristics = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int64_t rows = 5, cols = 7, k = 3, lda = 10, ldb = 12, ldc = 16;
            for (int i = 0; i < 8 * 16; i++) want[i] = 9.0f; /* outside the view: untouched */
            for (int64_t i = 0; i < rows; i++)
                for (int64_t j = 0; j < cols; j++) {
                    double acc = 0;
                    for (int64_t p = 0; p < k; p++)
                        acc += (double)(ta ? A[p * lda + i] : A[i * lda + p]) *
                               (tb ? B[j * ldb + p] : B[p * ldb + j]);
                    double v = 2.0 * acc + bias[j];
                    want[i * ldc + j] = v < 0 ? 0.0f : (float)v;
                }
            cuda_gemm_plan *plan = NULL;
            int before = heuristic_calls;
            cuda_gemm_args g = {.rows = rows,
                                .cols = cols,
                                .k = k,
                                .a = A,
                                .lda = lda,
                                .trans_a = ta,
                                .b = B,
                                .ldb = ldb,
                                .trans_b = tb,
                                .c = C,
                                .ldc = ldc,
                                .dtype = GRAFT_DTYPE_F32,
                                .bias = bias,
                                .epilogue = CUDA_GEMM_EPILOGUE_RELU,
                                .alpha = 2.0f,
                                .batch = 1};
            for (int rep = 0; rep < 3; rep++) {
                for (int i = 0; i < 8 * 16; i++) C[i] = i / 16 < rows && i % 16 < cols ? NAN : 9.0f;
                if (cuda_gemm_run(&be, &plan, &g, NULL) != GRAFT_OK || !close_all(C, want, 8 * 16))
                    bad++;
            }
            extra_heuristics += heuristic_calls - before - 1;
            cuda_gemm_plan_free(plan);
            for (int i = 0; i < 8 * 16; i++) C[i] = i / 16 < rows && i % 16 < cols ? NAN : 9.0f;
            if (cuda_gemm_lt(&be, rows, cols, k, A, lda, ta, B, ldb, tb, C, ldc, GRAFT_DTYPE_F32,
                             bias, CUDA_GEMM_EPILOGUE_RELU, 2.0f, NULL) != GRAFT_OK ||
                !close_all(C, want, 8 * 16))
                bad++;
        }
    CHECK("gemm_lt_strided_bias_relu", !bad, "%d mismatches", bad);
    CHECK("gemm_plan_reused", extra_heuristics == 0, "%d extra heuristic calls", extra_heuristics);
}

int main(void) {
    test_matmul();
    test_gemm();
    test_gemm_lt();
    return test_failures ? 1 : 0;
}

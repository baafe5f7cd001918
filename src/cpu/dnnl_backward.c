/* dnnl_backward.c: the Backward node's fast kernel on the CPU: f32 Gemm, MatMul and (in
 * dnnl_backward_conv.c) Conv gradients through oneDNN's sgemm, accumulating in float, and the
 * f32 <-> bf16/f16 Casts of mixed-precision round trips; every other forward op, and anything
 * else, goes to the reference kernel (the f64 rules). */
#include "graft_config.h"

#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#if GRAFT_HAVE_OPENMP
#include <omp.h>
#endif

#include "../core/half.h"
#include "../ops/backward.h"
#include "dnnl_backward.h"

bool bwd_sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return true;
    if (k <= 0) { /* an empty sum: c = beta * c, never reading c when beta is 0 */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return true;
    }
    return dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda > 0 ? lda : 1, b, ldb > 0 ? ldb : 1, beta, c,
                      ldc > 0 ? ldc : 1) == dnnl_success;
}

graft_status bwd_fail(const bwd_call *b, const char *what) {
    return op_error(b->call->node, b->call->err, GRAFT_E_BACKEND, "backward of %s: %s",
                    attr_s(b->call->node, "op", "?"), what);
}

/* ---- sums of dY for biases ------------------------------------------------------------------ */

/* The sum of x (n), in float lanes (what a vectorised float reduction gives). */
static float sum_run(const float *x, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

/* Rows of a float partial sum folded into a double total: bounded error for tall columns. */
#define COL_BLOCK 256

/* dc (n) = scale * column sums of g (m, n). */
static void sum_columns(const float *g, int64_t m, int64_t n, float scale, float *dc) {
    for (int64_t j0 = 0; j0 < n; j0 += 1024) {
        int64_t nj = n - j0 < 1024 ? n - j0 : 1024;
        float part[1024];
        double total[1024] = {0};
        for (int64_t i0 = 0; i0 < m; i0 += COL_BLOCK) {
            memset(part, 0, sizeof part);
            for (int64_t i = i0; i < m && i < i0 + COL_BLOCK; i++) {
                const float *row = g + i * n + j0;
#pragma omp simd
                for (int64_t j = 0; j < nj; j++) part[j] += row[j];
            }
            for (int64_t j = 0; j < nj; j++) total[j] += part[j];
        }
        for (int64_t j = 0; j < nj; j++) dc[j0 + j] = (float)(scale * total[j]);
    }
}

/* ---- Gemm: Y (M, N) = alpha * A' (M, K) * B' (K, N) + beta * C --------------------------- */

/* dC = beta * dY (m, n) summed to C's shape (a scalar, (N), (1, N), (M, 1) or (M, N)); false
 * when C's shape is none of those. */
static bool gemm_dc(const tensor *cc, tensor *dc, const float *g, int64_t m, int64_t n, float beta,
                    bool check_only) {
    if (cc->ndim > 2) return false;
    int64_t cm = cc->ndim == 2 ? cc->dims[0] : 1, cn = cc->ndim >= 1 ? cc->dims[cc->ndim - 1] : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n)) return false;
    if (check_only || !dc) return true;
    float *d = dc->data;
    if (cm == m && cn == n) {
        for (int64_t i = 0; i < m * n; i++) d[i] = beta * g[i];
    } else if (cn == n) {
        sum_columns(g, m, n, beta, d);
    } else {
        double total = 0.0;
        for (int64_t i = 0; i < m; i++) {
            float r = sum_run(g + i * n, n);
            if (cm == m)
                d[i] = beta * r;
            else
                total += r;
        }
        if (cm == 1) d[0] = (float)(beta * total);
    }
    return true;
}

graft_status bwd_gemm(const bwd_call *b, bool *handled) {
    const tensor *a = b->in[0], *bm = b->in[1], *y = b->out[0], *dy = b->dout[0];
    const tensor *cc = b->n_in > 2 ? b->in[2] : NULL;
    if (!a || !bm || !y || !dy || a->ndim != 2 || bm->ndim != 2 || y->ndim != 2) return GRAFT_OK;
    const ir_node *node = b->call->node;
    bool ta = attr_i(node, "transA", 0) != 0, tb = attr_i(node, "transB", 0) != 0;
    float alpha = attr_f(node, "alpha", 1.0f), beta = attr_f(node, "beta", 1.0f);
    int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
    int64_t n = tb ? bm->dims[0] : bm->dims[1];
    if ((tb ? bm->dims[1] : bm->dims[0]) != k || y->dims[0] != m || y->dims[1] != n)
        return GRAFT_OK;
    tensor *da = b->din[0], *db = b->din[1], *dc = b->n_in > 2 ? b->din[2] : NULL;
    if (dc && (!cc || !gemm_dc(cc, NULL, NULL, m, n, beta, true))) return GRAFT_OK;
    const float *g = dy->data, *av = a->data, *bv = bm->data;
    bool ok = true;
    if (da && !ta) /* dA (M, K) = alpha * dY (M, N) * B'^T (N, K) */
        ok =
            bwd_sgemm('N', tb ? 'N' : 'T', m, k, n, alpha, g, n, bv, tb ? k : n, 0.0f, da->data, k);
    else if (da) /* dA (K, M) = alpha * B' (K, N) * dY^T (N, M) */
        ok =
            bwd_sgemm(tb ? 'T' : 'N', 'T', k, m, n, alpha, bv, tb ? k : n, g, n, 0.0f, da->data, m);
    if (ok && db && !tb) /* dB (K, N) = alpha * A'^T (K, M) * dY (M, N) */
        ok =
            bwd_sgemm(ta ? 'N' : 'T', 'N', k, n, m, alpha, av, ta ? m : k, g, n, 0.0f, db->data, n);
    else if (ok && db) /* dB (N, K) = alpha * dY^T (N, M) * A' (M, K) */
        ok =
            bwd_sgemm('T', ta ? 'T' : 'N', n, k, m, alpha, g, n, av, ta ? m : k, 0.0f, db->data, k);
    if (!ok) return bwd_fail(b, "oneDNN's sgemm failed");
    if (dc) gemm_dc(cc, dc, g, m, n, beta, false);
    *handled = true;
    return GRAFT_OK;
}

/* ---- MatMul: Y (..., M, N) = A (..., M, K) * B (..., K, N), batch dims broadcast -------- */

/* `batches` products (m, k) x (k, n); per batch dim of Y its size and A's and B's element
 * strides (0 where that operand broadcasts). */
typedef struct mm_shape {
    int64_t m, n, k, batches;
    int nb;
    int64_t bdims[GRAFT_MAX_DIMS], sa[GRAFT_MAX_DIMS], sb[GRAFT_MAX_DIMS];
    bool a_shared, b_shared; /* one matrix for every batch */
    bool a_whole, b_whole;   /* one matrix per batch, batch t at t * its size */
} mm_shape;

static bool mm_shape_init(const tensor *a, const tensor *b, const tensor *y, mm_shape *s) {
    if (a->ndim < 1 || b->ndim < 1) return false;
    s->k = a->dims[a->ndim - 1];
    s->m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
    s->n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    if ((b->ndim >= 2 ? b->dims[b->ndim - 2] : b->dims[0]) != s->k) return false;
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    s->nb = nba > nbb ? nba : nbb;
    int64_t stride_a = s->m * s->k, stride_b = s->k * s->n;
    s->batches = 1;
    s->a_shared = s->b_shared = s->a_whole = s->b_whole = true;
    for (int i = s->nb - 1; i >= 0; i--) {
        int ia = i - (s->nb - nba), ib = i - (s->nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        s->bdims[i] = da > db ? da : db;
        s->sa[i] = da == 1 ? 0 : stride_a;
        s->sb[i] = db == 1 ? 0 : stride_b;
        if (da > 1) s->a_shared = false;
        if (db > 1) s->b_shared = false;
        if (da == 1 && s->bdims[i] > 1) s->a_whole = false;
        if (db == 1 && s->bdims[i] > 1) s->b_whole = false;
        stride_a *= da;
        stride_b *= db;
        s->batches *= s->bdims[i];
    }
    return tensor_numel(y) == s->batches * s->m * s->n;
}

static void mm_offsets(const mm_shape *s, int64_t t, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int i = s->nb - 1; i >= 0; i--) {
        int64_t idx = t % s->bdims[i];
        t /= s->bdims[i];
        *oa += idx * s->sa[i];
        *ob += idx * s->sb[i];
    }
}

/* One operand's gradient, batch by batch: dA_t (m, k) = dY_t (m, n) B_t^T, or dB_t (k, n) =
 * A_t^T dY_t. `whole`: each batch writes its own matrix (in parallel when there are enough);
 * else broadcast batches add into shared ones, in order (sgemm threads itself then). */
static bool mm_grad_batches(const bwd_call *b, const mm_shape *s, bool for_a, float *d) {
    const float *av = b->in[0]->data, *bv = b->in[1]->data, *g = b->dout[0]->data;
    bool whole = for_a ? s->a_whole : s->b_whole, ok = true;
    int64_t size = for_a ? s->m * s->k : s->k * s->n;
    if (!whole) memset(d, 0, (size_t)tensor_nbytes(b->din[for_a ? 0 : 1]));
    bool par = whole && s->batches >= b->threads && b->threads > 1;
#pragma omp parallel for num_threads(b->threads) if (par) schedule(static) reduction(&& : ok)
    for (int64_t t = 0; t < s->batches; t++) {
        int64_t oa, ob;
        mm_offsets(s, t, &oa, &ob);
        const float *gt = g + t * s->m * s->n;
        float beta = whole ? 0.0f : 1.0f;
        if (for_a)
            ok = ok && bwd_sgemm('N', 'T', s->m, s->k, s->n, 1.0f, gt, s->n, bv + ob, s->n, beta,
                                 d + (whole ? t * size : oa), s->k);
        else
            ok = ok && bwd_sgemm('T', 'N', s->k, s->n, s->m, 1.0f, av + oa, s->k, gt, s->n, beta,
                                 d + (whole ? t * size : ob), s->n);
    }
    return ok;
}

graft_status bwd_matmul(const bwd_call *b, bool *handled) {
    const tensor *a = b->in[0], *bm = b->in[1], *y = b->out[0], *dy = b->dout[0];
    mm_shape s;
    if (!a || !bm || !y || !dy || !mm_shape_init(a, bm, y, &s)) return GRAFT_OK;
    tensor *da = b->din[0], *db = b->din[1];
    const float *g = dy->data;
    int64_t rows = s.batches * s.m; /* A's and dY's batches stacked, when A is whole */
    bool ok = true;
    if (da && s.a_whole && s.b_shared) /* dA (B*m, k) = dY (B*m, n) * B^T in one product */
        ok = bwd_sgemm('N', 'T', rows, s.k, s.n, 1.0f, g, s.n, bm->data, s.n, 0.0f, da->data, s.k);
    else if (da)
        ok = mm_grad_batches(b, &s, true, da->data);
    if (ok && db && s.a_whole && s.b_shared) /* dB (k, n) = A^T (k, B*m) * dY (B*m, n) */
        ok = bwd_sgemm('T', 'N', s.k, s.n, rows, 1.0f, a->data, s.k, g, s.n, 0.0f, db->data, s.n);
    else if (ok && db)
        ok = mm_grad_batches(b, &s, false, db->data);
    if (!ok) return bwd_fail(b, "oneDNN's sgemm failed");
    *handled = true;
    return GRAFT_OK;
}

/* ---- the kernel ----------------------------------------------------------------------------- */

/* Every present tensor f32, each gradient of its value's size. */
static bool bwd_call_plain_f32(const bwd_call *b) {
    for (int i = 0; i < b->n_in; i++) {
        const tensor *x = b->in[i], *d = b->din[i];
        if ((x && x->dtype != GRAFT_DTYPE_F32) || (d && d->dtype != GRAFT_DTYPE_F32)) return false;
        if (d && (!x || tensor_numel(d) != tensor_numel(x))) return false;
    }
    for (int i = 0; i < b->n_out; i++) {
        const tensor *y = b->out[i], *d = b->dout[i];
        if ((y && y->dtype != GRAFT_DTYPE_F32) || (d && d->dtype != GRAFT_DTYPE_F32)) return false;
        if (d && (!y || tensor_numel(d) != tensor_numel(y))) return false;
    }
    return true;
}

/* A Cast between f32 and bf16/f16 (a mixed-precision round trip): dX = dY converted to X's
 * dtype, rounding to nearest even as the reference's conversion does. Inputs X, Y, dY; output
 * dX. Other dtypes, or no dY, go to the reference. */
static void bwd_cast(const op_call *c, int threads, bool *handled) {
    const tensor *x = c->in[0], *dy = c->in[2];
    tensor *dx = c->out[0];
    if (!x || !dy || !dx || tensor_numel(dx) != tensor_numel(dy) || !dx->data || !dy->data) return;
    graft_dtype to = dx->dtype, from = dy->dtype;
    bool f32_to_half = from == GRAFT_DTYPE_F32 && (to == GRAFT_DTYPE_BF16 || to == GRAFT_DTYPE_F16);
    bool half_to_f32 =
        to == GRAFT_DTYPE_F32 && (from == GRAFT_DTYPE_BF16 || from == GRAFT_DTYPE_F16);
    if (!f32_to_half && !half_to_f32) return;
    int64_t n = tensor_numel(dx);
    const float *src32 = dy->data;
    const uint16_t *src16 = dy->data;
    float *dst32 = dx->data;
    uint16_t *dst16 = dx->data;
    bool bf = to == GRAFT_DTYPE_BF16 || from == GRAFT_DTYPE_BF16;
#if GRAFT_HAVE_OPENMP
#pragma omp parallel for num_threads(threads) if (n > 65536)
#endif
    for (int64_t i = 0; i < n; i++) {
        if (f32_to_half)
            dst16[i] = bf ? f32_to_bf16(src32[i]) : f32_to_f16(src32[i]);
        else
            dst32[i] = bf ? bf16_to_f32(src16[i]) : f16_to_f32(src16[i]);
    }
    (void)threads;
    *handled = true;
}

graft_status dnnl_run_Backward(cpu_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = false;
    backward_layout l;
    graft_err scratch = {0}; /* a malformed node: the reference kernel reports it */
    if (backward_read_layout(c->node, c->n_in, c->n_out, &l, &scratch) != GRAFT_OK) return GRAFT_OK;
    graft_status (*rule)(const bwd_call *, bool *) = NULL;
    int threads = be->num_threads;
#if GRAFT_HAVE_OPENMP
    if (threads <= 0) threads = omp_get_max_threads();
#endif
    if (threads <= 0) threads = 1;
    if (!strcmp(l.op, "Cast") && l.n_fwd_in == 1 && l.n_fwd_out == 1 && c->n_in == 3 &&
        c->n_out == 1) {
        bwd_cast(c, threads, handled);
        return GRAFT_OK;
    }
    if (!strcmp(l.op, "Gemm"))
        rule = bwd_gemm;
    else if (!strcmp(l.op, "MatMul"))
        rule = bwd_matmul;
    else if (!strcmp(l.op, "Conv"))
        rule = bwd_conv;
    if (!rule || l.n_fwd_out != 1 || l.n_fwd_in < 2) return GRAFT_OK;
    bwd_call b = {.call = c,
                  .in = c->in,
                  .n_in = l.n_fwd_in,
                  .out = c->in + l.n_fwd_in,
                  .n_out = 1,
                  .dout = c->in + l.n_fwd_in + 1,
                  .din = c->out,
                  .threads = threads};
    if (!bwd_call_plain_f32(&b)) return GRAFT_OK;
    if (!b.dout[0]) { /* no gradient flows in: every gradient is zero */
        for (int i = 0; i < b.n_in; i++)
            if (b.din[i]) memset(b.din[i]->data, 0, (size_t)tensor_nbytes(b.din[i]));
        *handled = true;
        return GRAFT_OK;
    }
    return rule(&b, handled);
}

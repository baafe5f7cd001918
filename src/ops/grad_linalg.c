/* grad_linalg.c: backward rules of Gemm (transA/transB/alpha/beta, broadcast C) and MatMul
 * (1-D operands, batched with broadcast batch dims), computed in double. */
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "grad_util.h"

/* c (m, n) += a (m, k) * b (k, n), with a and b read through element strides so that either may
 * be a transposed view: a[i, p] = a[i * ars + p * acs], b[p, j] = b[p * brs + j * bcs]. */
static void dgemm_acc(int64_t m, int64_t n, int64_t k, const double *a, int64_t ars, int64_t acs,
                      const double *b, int64_t brs, int64_t bcs, double *c) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) {
            double av = a[i * ars + p * acs];
            if (av == 0.0) continue;
            const double *brow = b + p * brs;
            double *crow = c + i * n;
            for (int64_t j = 0; j < n; j++) crow[j] += av * brow[j * bcs];
        }
}

/* ---- Gemm: Y (M, N) = alpha * A' (M, K) * B' (K, N) + beta * C --------------------------------
 */

graft_status grad_Gemm(const grad_call *c) {
    TRY(gr_check(c, 2, 1));
    const tensor *a = c->in[0], *b = c->in[1], *y = c->out[0], *dy = gr_dout(c, 0);
    const tensor *cc = c->n_in > 2 ? c->in[2] : NULL;
    if (a->ndim != 2 || b->ndim != 2 || y->ndim != 2)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "backward: Gemm needs 2-D A, B and Y");
    bool ta = attr_i(c->node, "transA", 0) != 0, tb = attr_i(c->node, "transB", 0) != 0;
    double alpha = attr_f(c->node, "alpha", 1.0f), beta = attr_f(c->node, "beta", 1.0f);
    int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
    int64_t n = tb ? b->dims[0] : b->dims[1];
    if ((tb ? b->dims[1] : b->dims[0]) != k || y->dims[0] != m || y->dims[1] != n)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: Gemm shapes do not agree with transA/transB");
    tensor *da = gr_din(c, 0), *db = gr_din(c, 1), *dc = gr_din(c, 2);
    double *g = dy ? gr_load(dy) : gr_zeros(m * n);
    double *av = da || db ? gr_load(a) : NULL, *bv = da || db ? gr_load(b) : NULL;
    double *acc = gr_zeros(m * k > k * n ? m * k : k * n);
    graft_status st = GRAFT_OK;
    if (!g || !acc || ((da || db) && (!av || !bv))) {
        st = gr_oom(c);
        goto done;
    }
    /* strides of A' (M, K) and B' (K, N) over the stored A and B */
    int64_t a_rs = ta ? 1 : k, a_cs = ta ? m : 1, b_rs = tb ? 1 : n, b_cs = tb ? k : 1;
    if (da) { /* dA' (M, K) = alpha * dY (M, N) * B'^T (N, K) */
        dgemm_acc(m, k, n, g, n, 1, bv, b_cs, b_rs, acc);
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++)
                gr_set(da, ta ? p * m + i : i * k + p, alpha * acc[i * k + p]);
    }
    if (db) { /* dB' (K, N) = alpha * A'^T (K, M) * dY (M, N) */
        memset(acc, 0, (size_t)(k * n > 0 ? k * n : 1) * sizeof(double));
        dgemm_acc(k, n, m, av, a_cs, a_rs, g, n, 1, acc);
        for (int64_t p = 0; p < k; p++)
            for (int64_t j = 0; j < n; j++)
                gr_set(db, tb ? j * k + p : p * n + j, alpha * acc[p * n + j]);
    }
    if (dc && cc) st = gr_reduce_to(c, dc, g, 2, y->dims, beta);
done:
    free(g);
    free(av);
    free(bv);
    free(acc);
    return st;
}

/* ---- MatMul --------------------------------------------------------------------------------- */

/* MatMul as `batches` products (m, k) x (k, n): the batch dims of Y broadcast from A's and B's,
 * and each batch's element offsets into A and B (0 strides along broadcast dims). */
typedef struct mm_geom {
    int64_t m, n, k, batches;
    int nb;
    int64_t bdims[GRAFT_MAX_DIMS], sa[GRAFT_MAX_DIMS], sb[GRAFT_MAX_DIMS];
} mm_geom;

static graft_status mm_geometry(const grad_call *c, mm_geom *g) {
    const tensor *a = c->in[0], *b = c->in[1];
    if (a->ndim < 1 || b->ndim < 1)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "backward: MatMul of a scalar");
    g->k = a->dims[a->ndim - 1];
    g->m = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
    g->n = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    int64_t kb = b->ndim >= 2 ? b->dims[b->ndim - 2] : b->dims[0];
    if (kb != g->k)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "backward: MatMul inner dims %lld, %lld",
                        (long long)g->k, (long long)kb);
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    g->nb = nba > nbb ? nba : nbb;
    int64_t stride_a = g->m * g->k, stride_b = g->k * g->n;
    g->batches = 1;
    for (int i = g->nb - 1; i >= 0; i--) {
        int ia = i - (g->nb - nba), ib = i - (g->nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "backward: MatMul batch dims %lld and %lld do not broadcast",
                            (long long)da, (long long)db);
        g->bdims[i] = da > db ? da : db;
        g->sa[i] = da == 1 ? 0 : stride_a;
        g->sb[i] = db == 1 ? 0 : stride_b;
        stride_a *= da;
        stride_b *= db;
        g->batches *= g->bdims[i];
    }
    if (tensor_numel(c->out[0]) != g->batches * g->m * g->n)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: MatMul output has the wrong size");
    return GRAFT_OK;
}

static void mm_offsets(const mm_geom *g, int64_t t, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int i = g->nb - 1; i >= 0; i--) {
        int64_t idx = t % g->bdims[i];
        t /= g->bdims[i];
        *oa += idx * g->sa[i];
        *ob += idx * g->sb[i];
    }
}

graft_status grad_MatMul(const grad_call *c) {
    TRY(gr_check(c, 2, 1));
    mm_geom g = {0};
    TRY(mm_geometry(c, &g));
    tensor *da = gr_din(c, 0), *db = gr_din(c, 1);
    if (!da && !db) return GRAFT_OK;
    const tensor *dy = gr_dout(c, 0);
    int64_t na = tensor_numel(c->in[0]), nb = tensor_numel(c->in[1]);
    double *gy = dy ? gr_load(dy) : gr_zeros(g.batches * g.m * g.n);
    double *av = gr_load(c->in[0]), *bv = gr_load(c->in[1]);
    double *ga = da ? gr_zeros(na) : NULL, *gb = db ? gr_zeros(nb) : NULL;
    graft_status st = GRAFT_OK;
    if (!gy || !av || !bv || (da && !ga) || (db && !gb)) {
        st = gr_oom(c);
        goto done;
    }
    for (int64_t t = 0; t < g.batches; t++) {
        int64_t oa, ob;
        mm_offsets(&g, t, &oa, &ob);
        const double *gyt = gy + t * g.m * g.n;
        /* dA (m, k) += dY (m, n) * B^T; broadcast batches land on the same offsets and sum */
        if (ga) dgemm_acc(g.m, g.k, g.n, gyt, g.n, 1, bv + ob, 1, g.n, ga + oa);
        /* dB (k, n) += A^T (k, m) * dY (m, n) */
        if (gb) dgemm_acc(g.k, g.n, g.m, av + oa, 1, g.k, gyt, g.n, 1, gb + ob);
    }
    if (da) gr_store(da, ga);
    if (db) gr_store(db, gb);
done:
    free(gy);
    free(av);
    free(bv);
    free(ga);
    free(gb);
    return st;
}

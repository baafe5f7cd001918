/* cuda_backward_linalg.c: GPU backward rules of Gemm (transA/transB, alpha, beta, broadcast C)
 * and MatMul (1-D operands, batch broadcasting) as cuBLASLt products. */
#include <stdlib.h>
#include <string.h>

#include "../ops/broadcast_plan.h"
#include "backward_eltwise_launch.h"
#include "cuda_matmul.h"

/* The node's kept products: one plan per gradient (dA, dB), reused while the shapes hold. */
typedef struct lin_state {
    cuda_gemm_plan *plan[2];
} lin_state;

static void lin_state_free(void *p) {
    lin_state *s = p;
    if (!s) return;
    cuda_gemm_plan_free(s->plan[0]);
    cuda_gemm_plan_free(s->plan[1]);
    free(s);
}

static graft_status lin_plans(const cuda_bwd *b, cuda_gemm_plan ***plans) {
    cuda_bwd_state *st = b->state;
    if (!st->p) {
        lin_state *s = calloc(1, sizeof *s);
        if (!s) return cuda_bwd_fail(b, GRAFT_E_OUT_OF_MEMORY, "out of memory for kernel state");
        st->p = s;
        st->free_fn = lin_state_free;
    }
    *plans = ((lin_state *)st->p)->plan;
    return GRAFT_OK;
}

static graft_status zero_wanted(const cuda_bwd *b) {
    for (int i = 0; i < b->n_in; i++)
        if (b->din[i]) TRY(cuda_bwd_zero(b, b->din[i]));
    return GRAFT_OK;
}

/* ---- Gemm: Y (M, N) = alpha * A' (M, K) * B' (K, N) + beta * C ------------------------------ */

graft_status cuda_bwd_gemm(const cuda_bwd *b, bool *handled) {
    *handled = false;
    if (b->n_in < 2 || b->n_out < 1) return GRAFT_OK;
    const tensor *a = b->in[0], *bm = b->in[1], *y = b->out[0], *dy = b->dout[0];
    const tensor *cc = b->n_in > 2 ? b->in[2] : NULL;
    tensor *da = b->din[0], *db = b->din[1], *dc = b->n_in > 2 ? b->din[2] : NULL;
    if (!cuda_bwd_f32(a) || !cuda_bwd_f32(bm) || !cuda_bwd_f32(y) || a->ndim != 2 ||
        bm->ndim != 2 || y->ndim != 2)
        return GRAFT_OK;
    const ir_node *n = b->call->node;
    bool ta = attr_i(n, "transA", 0) != 0, tb = attr_i(n, "transB", 0) != 0;
    float alpha = attr_f(n, "alpha", 1.0f), beta = attr_f(n, "beta", 1.0f);
    int64_t m = ta ? a->dims[1] : a->dims[0], k = ta ? a->dims[0] : a->dims[1];
    int64_t nn = tb ? bm->dims[0] : bm->dims[1];
    if ((tb ? bm->dims[1] : bm->dims[0]) != k || y->dims[0] != m || y->dims[1] != nn)
        return GRAFT_OK;
    bw_reduce_plan cp; /* C must broadcast to Y: (), (N), (1, N), (M, 1), (M, N), ... */
    if (dc &&
        (!cuda_bwd_f32(cc) || !bw_reduce_plan_make(2, y->dims, cc->ndim, cc->dims, beta, 1, &cp)))
        return GRAFT_OK;
    *handled = true;
    if (!dy) return zero_wanted(b);
    cuda_gemm_plan **plans = NULL;
    TRY(lin_plans(b, &plans));
    if (da) {
        /* dA' (M, K) = alpha dY (M, N) B'^T; stored transposed, dA (K, M) = alpha B' dY^T */
        cuda_gemm_args g =
            ta ? cuda_gemm_dense(k, m, nn, bm->data, tb, dy->data, true, da->data, GRAFT_DTYPE_F32)
               : cuda_gemm_dense(m, k, nn, dy->data, false, bm->data, !tb, da->data,
                                 GRAFT_DTYPE_F32);
        g.alpha = alpha;
        TRY(cuda_gemm_run(b->be, &plans[0], &g, b->call->err));
    }
    if (db) {
        /* dB' (K, N) = alpha A'^T dY (M, N); stored transposed, dB (N, K) = alpha dY^T A' */
        cuda_gemm_args g =
            tb ? cuda_gemm_dense(nn, k, m, dy->data, true, a->data, ta, db->data, GRAFT_DTYPE_F32)
               : cuda_gemm_dense(k, nn, m, a->data, !ta, dy->data, false, db->data,
                                 GRAFT_DTYPE_F32);
        g.alpha = alpha;
        TRY(cuda_gemm_run(b->be, &plans[1], &g, b->call->err));
    }
    if (dc) TRY(cuda_bwd_reduce_to(b, dy->data, 2, y->dims, dc, beta, handled));
    return GRAFT_OK;
}

/* ---- MatMul --------------------------------------------------------------------------------- */

/* Batch dims of a set of products after dropping 1s and merging dims that every operand (left,
 * right, result) steps evenly across. */
typedef struct lin_batch {
    int n;
    int64_t dims[GRAFT_MAX_DIMS];
    int64_t s[3][GRAFT_MAX_DIMS]; /* element strides of left, right, result */
} lin_batch;

static void batch_merge(int nb, const int64_t *dims, const int64_t *sl, const int64_t *sr,
                        const int64_t *sc, lin_batch *lb) {
    const int64_t *s[3] = {sl, sr, sc};
    lb->n = 0;
    for (int i = 0; i < nb; i++) {
        if (dims[i] == 1) continue;
        int j = lb->n - 1;
        bool even = j >= 0;
        for (int o = 0; o < 3 && even; o++) even = lb->s[o][j] == s[o][i] * dims[i];
        if (even) {
            lb->dims[j] *= dims[i];
            for (int o = 0; o < 3; o++) lb->s[o][j] = s[o][i];
            continue;
        }
        lb->dims[lb->n] = dims[i];
        for (int o = 0; o < 3; o++) lb->s[o][lb->n] = s[o][i];
        lb->n++;
    }
}

/* The products of g (the pointers at member 0) over lb: the innermost batch dim as one
 * strided-batched call (or, where the right operand is shared and the rest packed, as taller
 * rows), the outer ones as a loop of calls. */
static graft_status run_batched(const cuda_bwd *b, cuda_gemm_plan **plan, cuda_gemm_args g,
                                const lin_batch *lb) {
    const float *l0 = g.a, *r0 = g.b;
    float *c0 = g.c;
    int last = lb->n - 1;
    if (last >= 0) {
        if (lb->s[1][last] == 0 && !g.trans_a && lb->s[0][last] == g.rows * g.k &&
            lb->s[2][last] == g.rows * g.cols) {
            g.rows *= lb->dims[last];
        } else {
            g.batch = lb->dims[last];
            g.stride_a = lb->s[0][last];
            g.stride_b = lb->s[1][last];
            g.stride_c = lb->s[2][last];
        }
    }
    int64_t outer = 1;
    for (int i = 0; i < last; i++) outer *= lb->dims[i];
    for (int64_t t = 0; t < outer; t++) {
        int64_t rest = t, off[3] = {0, 0, 0};
        for (int i = last - 1; i >= 0; i--) {
            int64_t idx = rest % lb->dims[i];
            rest /= lb->dims[i];
            for (int o = 0; o < 3; o++) off[o] += idx * lb->s[o][i];
        }
        g.a = l0 + off[0];
        g.b = r0 + off[1];
        g.c = c0 + off[2];
        TRY(cuda_gemm_run(b->be, plan, &g, b->call->err));
    }
    return GRAFT_OK;
}

/* Whether operand strides sx skip (0) a batch dim of size > 1: the operand is broadcast. */
static bool broadcast_in(const matmul_bcast *g, const int64_t *sx) {
    for (int i = 0; i < g->nb; i++)
        if (g->dims[i] > 1 && sx[i] == 0) return true;
    return false;
}

/* Whether sx is 0 along every batch dim of size > 1: one matrix serves every member. */
static bool shared_by_all(const matmul_bcast *g, const int64_t *sx) {
    for (int i = 0; i < g->nb; i++)
        if (g->dims[i] > 1 && sx[i] != 0) return false;
    return true;
}

/* Per-member products into a packed temporary (batches, rows, cols), summed over the members
 * that share each element of dX (whose batch dims broadcast to Y's). */
static graft_status products_summed(const cuda_bwd *b, const matmul_bcast *g, cuda_gemm_plan **plan,
                                    cuda_gemm_args ga, const int64_t *sl, const int64_t *sr,
                                    tensor *dx, bool *handled) {
    int64_t batches = 1, per = ga.rows * ga.cols, sc[GRAFT_MAX_DIMS], full[GRAFT_MAX_DIMS];
    for (int i = g->nb - 1; i >= 0; i--) {
        sc[i] = per * batches;
        batches *= g->dims[i];
        full[i] = g->dims[i];
    }
    full[g->nb] = ga.rows;
    full[g->nb + 1] = ga.cols;
    tensor shape = *dx; /* a 1-D operand's gradient seen as its (rows, cols) matrix */
    if (dx->ndim < 2) {
        shape.ndim = 2;
        shape.dims[0] = ga.rows;
        shape.dims[1] = ga.cols;
    }
    float *tmp = NULL;
    TRY(cuda_malloc(b->be, (size_t)(batches * per > 0 ? batches * per : 1) * sizeof(float),
                    (void **)&tmp, b->call->err));
    lin_batch lb;
    batch_merge(g->nb, g->dims, sl, sr, sc, &lb);
    ga.c = tmp;
    graft_status st = run_batched(b, plan, ga, &lb);
    if (st == GRAFT_OK) st = cuda_bwd_reduce_to(b, tmp, g->nb + 2, full, &shape, 1.0f, handled);
    cuda_free(b->be, tmp);
    return st;
}

/* dA (which 0: dY B^T per member) or dB (which 1: A^T dY per member). */
static graft_status matmul_grad(const cuda_bwd *b, const matmul_bcast *g, int which,
                                cuda_gemm_plan **plan, bool *handled) {
    const tensor *a = b->in[0], *bm = b->in[1], *dy = b->dout[0];
    tensor *dx = b->din[which];
    cuda_gemm_args ga = which == 0 ? cuda_gemm_dense(g->m, g->k, g->n, dy->data, false, bm->data,
                                                     true, dx->data, GRAFT_DTYPE_F32)
                                   : cuda_gemm_dense(g->k, g->n, g->m, a->data, true, dy->data,
                                                     false, dx->data, GRAFT_DTYPE_F32);
    const int64_t *sx = which == 0 ? g->sa : g->sb;
    const int64_t *sl = which == 0 ? g->sy : g->sa, *sr = which == 0 ? g->sb : g->sy;
    if (!broadcast_in(g, sx)) { /* dX has one matrix per member, where X has its own */
        lin_batch lb;
        batch_merge(g->nb, g->dims, sl, sr, sx, &lb);
        return run_batched(b, plan, ga, &lb);
    }
    if (which == 1 && shared_by_all(g, g->sb) && !broadcast_in(g, g->sa)) {
        /* one B for all: dB = A^T dY with the members stacked along the summed dim */
        int64_t batches = 1;
        for (int i = 0; i < g->nb; i++) batches *= g->dims[i];
        ga = cuda_gemm_dense(g->k, g->n, g->m * batches, a->data, true, dy->data, false, dx->data,
                             GRAFT_DTYPE_F32);
        return cuda_gemm_run(b->be, plan, &ga, b->call->err);
    }
    return products_summed(b, g, plan, ga, sl, sr, dx, handled);
}

/* Whether A's and B's batch dims broadcast (numpy: right-aligned, equal or 1). */
static bool batch_dims_agree(const tensor *a, const tensor *bm, int nb) {
    int nba = a->ndim > 2 ? a->ndim - 2 : 0, nbb = bm->ndim > 2 ? bm->ndim - 2 : 0;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - nba), ib = i - (nb - nbb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? bm->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
    }
    return true;
}

graft_status cuda_bwd_matmul(const cuda_bwd *b, bool *handled) {
    *handled = false;
    if (b->n_in < 2 || b->n_out < 1) return GRAFT_OK;
    const tensor *a = b->in[0], *bm = b->in[1], *y = b->out[0], *dy = b->dout[0];
    if (!cuda_bwd_f32(a) || !cuda_bwd_f32(bm) || !cuda_bwd_f32(y) || a->ndim < 1 || bm->ndim < 1)
        return GRAFT_OK;
    matmul_bcast g;
    matmul_bcast_make(a, bm, &g);
    int64_t kb = bm->dims[bm->ndim >= 2 ? bm->ndim - 2 : 0], batches = 1;
    for (int i = 0; i < g.nb; i++) batches *= g.dims[i];
    if (kb != g.k || g.nb + 2 > GRAFT_MAX_DIMS || !batch_dims_agree(a, bm, g.nb) ||
        tensor_numel(y) != batches * g.m * g.n)
        return GRAFT_OK;
    *handled = true;
    if (!dy) return zero_wanted(b);
    cuda_gemm_plan **plans = NULL;
    TRY(lin_plans(b, &plans));
    for (int which = 0; which < 2 && *handled; which++)
        if (b->din[which]) TRY(matmul_grad(b, &g, which, &plans[which], handled));
    return GRAFT_OK;
}

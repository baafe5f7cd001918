/* grad_elementwise.c: backward rules of the element-wise ops of decomposed LayerNorm / GELU
 * exports (Mul, Sub, Div, Pow with broadcasting; Sqrt, Erf, Neg, Exp, Clip), of attention masks
 * (Where) and of ReduceMean and ReduceSum, in double. */
#include <math.h>
#include <stdlib.h>

#include "reduce.h"
#include "grad_util.h"

/* ---- binary ops with broadcasting ----------------------------------------------------------- */

typedef enum binary_kind { BK_MUL, BK_SUB, BK_DIV, BK_POW } binary_kind;

/* d(a op b)/da and /db at one element, times g. Pow follows PyTorch: no gradient to the base
 * where the exponent is 0, none to the exponent where the base is 0 and the exponent >= 0. */
static void binary_partials(binary_kind k, double a, double b, double g, double *ga, double *gb) {
    switch (k) {
    case BK_MUL:
        *ga = g * b;
        *gb = g * a;
        return;
    case BK_SUB:
        *ga = g;
        *gb = -g;
        return;
    case BK_DIV:
        *ga = g / b;
        *gb = -g * a / (b * b);
        return;
    case BK_POW:
        *ga = b == 0.0 ? 0.0 : g * b * pow(a, b - 1.0);
        *gb = a == 0.0 && b >= 0.0 ? 0.0 : g * pow(a, b) * log(a);
        return;
    }
}

typedef struct binary_bufs {
    int64_t *ma, *mb;
    double *dy, *ga, *gb;
} binary_bufs;

static void binary_bufs_free(binary_bufs *b) {
    free(b->ma);
    free(b->mb);
    free(b->dy);
    free(b->ga);
    free(b->gb);
}

static graft_status binary_backward(const grad_call *c, binary_kind k) {
    TRY(gr_check(c, 2, 1));
    const tensor *a = c->in[0], *b = c->in[1], *y = c->out[0];
    tensor *da = gr_din(c, 0), *db = gr_din(c, 1);
    if (!da && !db) return GRAFT_OK;
    int64_t n = tensor_numel(y);
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(int64_t);
    binary_bufs bb = {malloc(bytes), malloc(bytes), gr_load_dout(c, 0, n), gr_zeros(n),
                      gr_zeros(n)};
    if (!bb.ma || !bb.mb || !bb.dy || !bb.ga || !bb.gb) {
        binary_bufs_free(&bb);
        return gr_oom(c);
    }
    if (!gr_bcast_map(bb.ma, y->ndim, y->dims, a->ndim, a->dims) ||
        !gr_bcast_map(bb.mb, y->ndim, y->dims, b->ndim, b->dims)) {
        binary_bufs_free(&bb);
        char sa[128], sb[128], sy[128];
        return op_error(
            c->node, c->err, GRAFT_E_SHAPE, "backward: A %s and B %s do not broadcast to Y %s",
            shape_str(sa, sizeof sa, a->ndim, a->dims), shape_str(sb, sizeof sb, b->ndim, b->dims),
            shape_str(sy, sizeof sy, y->ndim, y->dims));
    }
    /* B may be an integer exponent (Pow): read it through the dtype-generic accessor. */
    for (int64_t i = 0; i < n; i++)
        binary_partials(k, gr_get(a, bb.ma[i]), tensor_get_f64(b, bb.mb[i]), bb.dy[i], &bb.ga[i],
                        &bb.gb[i]);
    graft_status st = da ? gr_reduce_to(c, da, bb.ga, y->ndim, y->dims, 1.0) : GRAFT_OK;
    if (db && st == GRAFT_OK) st = gr_reduce_to(c, db, bb.gb, y->ndim, y->dims, 1.0);
    binary_bufs_free(&bb);
    return st;
}

graft_status grad_Mul(const grad_call *c) {
    return binary_backward(c, BK_MUL);
}

graft_status grad_Sub(const grad_call *c) {
    return binary_backward(c, BK_SUB);
}

graft_status grad_Div(const grad_call *c) {
    return binary_backward(c, BK_DIV);
}

graft_status grad_Pow(const grad_call *c) {
    return binary_backward(c, BK_POW);
}

/* ---- unary ops ------------------------------------------------------------------------------ */

typedef enum smooth_kind { SK_SQRT, SK_ERF, SK_NEG, SK_EXP } smooth_kind;

static double smooth_slope(smooth_kind k, double x) {
    switch (k) {
    case SK_SQRT:
        return 0.5 / sqrt(x);
    case SK_ERF:
        return 2.0 / sqrt(M_PI) * exp(-x * x);
    case SK_NEG:
        return -1.0;
    case SK_EXP:
        return exp(x);
    }
    return 0.0;
}

static graft_status smooth_backward(const grad_call *c, smooth_kind k) {
    TRY(gr_check(c, 1, 0));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *x = c->in[0], *dy = gr_dout(c, 0);
    if (dy && tensor_numel(dy) != tensor_numel(x))
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: output gradient and input differ in size");
    for (int64_t i = 0; i < tensor_numel(x); i++)
        gr_set(dx, i, dy ? gr_get(dy, i) * smooth_slope(k, gr_get(x, i)) : 0.0);
    return GRAFT_OK;
}

graft_status grad_Sqrt(const grad_call *c) {
    return smooth_backward(c, SK_SQRT);
}

graft_status grad_Erf(const grad_call *c) {
    return smooth_backward(c, SK_ERF);
}

graft_status grad_Neg(const grad_call *c) {
    return smooth_backward(c, SK_NEG);
}

graft_status grad_Exp(const grad_call *c) {
    return smooth_backward(c, SK_EXP);
}

/* ---- Clip ----------------------------------------------------------------------------------- */

/* A bound input (opset 11+): absent gives the default; otherwise a single value. */
static graft_status clip_bound(const grad_call *c, int i, double dflt, double *v) {
    const tensor *t = i < c->n_in ? c->in[i] : NULL;
    *v = dflt;
    if (!t) return GRAFT_OK;
    if (tensor_numel(t) != 1)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "backward: %s has %lld values, want 1",
                        i == 1 ? "min" : "max", (long long)tensor_numel(t));
    *v = tensor_get_f64(t, 0);
    return GRAFT_OK;
}

/* y = min(max(x, lo), hi), as the forward computes it (lo > hi gives hi). PyTorch's clamp rule:
 * dX = dY where lo <= x <= hi (the bounds themselves pass), else 0; dMin sums dY where x < lo
 * (and lo < hi), dMax where x > hi (or hi < lo). */
graft_status grad_Clip(const grad_call *c) {
    TRY(gr_check(c, 1, 0));
    const tensor *x = c->in[0], *dy = gr_dout(c, 0);
    tensor *dx = gr_din(c, 0), *dlo = gr_din(c, 1), *dhi = gr_din(c, 2);
    double lo, hi;
    if (c->node->opset < 11) {
        lo = attr_f(c->node, "min", -INFINITY);
        hi = attr_f(c->node, "max", INFINITY);
    } else {
        TRY(clip_bound(c, 1, -INFINITY, &lo));
        TRY(clip_bound(c, 2, INFINITY, &hi));
    }
    if (dy && tensor_numel(dy) != tensor_numel(x))
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: output gradient and input differ in size");
    double sum_lo = 0.0, sum_hi = 0.0;
    for (int64_t i = 0; i < tensor_numel(x); i++) {
        double v = gr_get(x, i), g = dy ? gr_get(dy, i) : 0.0;
        if (dx) gr_set(dx, i, v >= lo && v <= hi ? g : 0.0);
        if (v < lo && lo < hi) sum_lo += g;
        if (v > hi || hi < lo) sum_hi += g;
    }
    if (dlo && tensor_numel(dlo) == 1) gr_set(dlo, 0, sum_lo);
    if (dhi && tensor_numel(dhi) == 1) gr_set(dhi, 0, sum_hi);
    return GRAFT_OK;
}

/* ---- ReduceMean, ReduceSum ------------------------------------------------------------------ */

/* dX = dY broadcast back over the reduced axes (times 1 / the group size for the mean), with the
 * axes read as the forward reads them (attribute or input, negative axes, keepdims, noop). */
static graft_status reduce_backward(const grad_call *c, bool mean) {
    TRY(gr_check(c, 1, 1));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *x = c->in[0], *y = c->out[0];
    op_call oc = gr_op_call(c);
    reduce_axes ax;
    TRY(reduce_call_axes(&oc, &ax));
    int64_t kept[GRAFT_MAX_DIMS], count = 1;
    for (int d = 0; d < x->ndim; d++) {
        kept[d] = ax.reduced[d] ? 1 : x->dims[d];
        if (ax.reduced[d]) count *= x->dims[d];
    }
    int64_t n = tensor_numel(x);
    if (!ax.known || dims_numel(x->ndim, kept) != tensor_numel(y)) {
        char sx[128], sy[128];
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: Y %s is not X %s reduced over the node's axes",
                        shape_str(sy, sizeof sy, y->ndim, y->dims),
                        shape_str(sx, sizeof sx, x->ndim, x->dims));
    }
    int64_t *map = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!map) return gr_oom(c);
    gr_bcast_map(map, x->ndim, x->dims, x->ndim, kept);
    const tensor *dy = gr_dout(c, 0);
    double scale = mean && count > 0 ? 1.0 / (double)count : 1.0;
    for (int64_t i = 0; i < n; i++) gr_set(dx, i, dy ? scale * gr_get(dy, map[i]) : 0.0);
    free(map);
    return GRAFT_OK;
}

graft_status grad_ReduceMean(const grad_call *c) {
    return reduce_backward(c, true);
}

graft_status grad_ReduceSum(const grad_call *c) {
    return reduce_backward(c, false);
}

/* ---- Where: dY goes to X where the condition holds, to Y elsewhere; none to the condition --- */

graft_status grad_Where(const grad_call *c) {
    if (c->n_in < 3 || !c->in[0] || c->in[0]->dtype != GRAFT_DTYPE_BOOL || gr_din(c, 0))
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "backward: needs a bool condition (input 0, which takes no gradient)");
    grad_call values = *c; /* X and Y, checked as the other rules' inputs */
    values.in = c->in + 1;
    values.n_in = c->n_in - 1;
    values.din = c->din ? c->din + 1 : NULL;
    TRY(gr_check(&values, 2, 1));
    const tensor *cond = c->in[0], *y = c->out[0];
    int64_t n = tensor_numel(y);
    int64_t *map = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    double *dy = gr_load_dout(c, 0, n), *g = gr_zeros(n);
    graft_status st = GRAFT_OK;
    if (!map || !dy || !g) {
        st = gr_oom(c);
    } else if (!gr_bcast_map(map, y->ndim, y->dims, cond->ndim, cond->dims)) {
        char s1[128], s2[128];
        st = op_error(c->node, c->err, GRAFT_E_SHAPE,
                      "backward: the condition %s does not broadcast to Y %s",
                      shape_str(s1, sizeof s1, cond->ndim, cond->dims),
                      shape_str(s2, sizeof s2, y->ndim, y->dims));
    }
    const uint8_t *cv = cond->data;
    for (int k = 1; k <= 2 && st == GRAFT_OK; k++) {
        if (!gr_din(c, k)) continue;
        for (int64_t i = 0; i < n; i++) g[i] = (cv[map[i]] != 0) == (k == 1) ? dy[i] : 0.0;
        st = gr_reduce_to(c, gr_din(c, k), g, y->ndim, y->dims, 1.0);
    }
    free(map);
    free(dy);
    free(g);
    return st;
}

/* grad_norm.c: backward rules of LayerNormalization (X, Scale, B), Softmax (single axis from
 * opset 13, the flattened trailing part before) and BatchNormalization (running or batch
 * statistics), computed in double. */
#include <math.h>
#include <stdlib.h>

#include "op.h"
#include "reduce.h"
#include "grad_util.h"

/* ---- LayerNormalization --------------------------------------------------------------------- */

typedef struct ln_bufs {
    double *x, *dy, *scale, *dscale, *dbias;
    int64_t *smap, *bmap; /* normalised-shape index -> Scale / B index */
} ln_bufs;

static void ln_free(ln_bufs *b) {
    free(b->x);
    free(b->dy);
    free(b->scale);
    free(b->dscale);
    free(b->dbias);
    free(b->smap);
    free(b->bmap);
}

/* One row of n elements: dx, and dscale / dbias accumulated (in the normalised shape). */
static void ln_row(const double *x, const double *dy, const double *scale, int64_t n, double eps,
                   double *dx, double *dscale, double *dbias) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < n; j++) mean += x[j];
    mean /= (double)n;
    for (int64_t j = 0; j < n; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= (double)n;
    double rstd = 1.0 / sqrt(var + eps), m1 = 0.0, m2 = 0.0;
    for (int64_t j = 0; j < n; j++) {
        double xhat = (x[j] - mean) * rstd, g = dy[j] * scale[j];
        m1 += g;
        m2 += g * xhat;
        if (dscale) dscale[j] += dy[j] * xhat;
        if (dbias) dbias[j] += dy[j];
    }
    m1 /= (double)n;
    m2 /= (double)n;
    if (dx)
        for (int64_t j = 0; j < n; j++) {
            double xhat = (x[j] - mean) * rstd;
            dx[j] = rstd * (dy[j] * scale[j] - m1 - xhat * m2);
        }
}

graft_status grad_LayerNormalization(const grad_call *c) {
    TRY(gr_check(c, 2, 0));
    const tensor *x = c->in[0], *s = c->in[1], *bias = c->n_in > 2 ? c->in[2] : NULL;
    const tensor *dy = gr_dout(c, 0);
    tensor *dx = gr_din(c, 0), *ds = gr_din(c, 1), *dbt = bias ? gr_din(c, 2) : NULL;
    int axis;
    TRY(op_axis(c->node, attr_i(c->node, "axis", -1), x->ndim, &axis, c->err));
    axis_split sp = axis_split_dims(x->ndim, x->dims, axis, false);
    double eps = attr_f(c->node, "epsilon", 1e-5f);
    int m = x->ndim - axis;
    const int64_t *nd = x->dims + axis;
    ln_bufs b = {0};
    b.x = gr_load(x);
    b.dy = dy ? gr_load(dy) : gr_zeros(tensor_numel(x));
    b.scale = gr_zeros(sp.n);
    b.smap = malloc((size_t)(sp.n > 0 ? sp.n : 1) * sizeof(int64_t));
    b.bmap = malloc((size_t)(sp.n > 0 ? sp.n : 1) * sizeof(int64_t));
    b.dscale = ds ? gr_zeros(sp.n) : NULL;
    b.dbias = dbt ? gr_zeros(sp.n) : NULL;
    double *gx = dx ? gr_zeros(tensor_numel(x)) : NULL;
    graft_status st = GRAFT_OK;
    if (!b.x || !b.dy || !b.scale || !b.smap || !b.bmap || (ds && !b.dscale) || (dbt && !b.dbias) ||
        (dx && !gx)) {
        st = gr_oom(c);
        goto done;
    }
    if (!gr_bcast_map(b.smap, m, nd, s->ndim, s->dims) ||
        (bias && !gr_bcast_map(b.bmap, m, nd, bias->ndim, bias->dims))) {
        st = op_error(c->node, c->err, GRAFT_E_SHAPE,
                      "backward: Scale or B does not broadcast to the normalised shape");
        goto done;
    }
    for (int64_t j = 0; j < sp.n; j++) b.scale[j] = gr_get(s, b.smap[j]);
    for (int64_t r = 0; r < sp.outer && sp.n > 0; r++)
        ln_row(b.x + r * sp.n, b.dy + r * sp.n, b.scale, sp.n, eps, gx ? gx + r * sp.n : NULL,
               b.dscale, b.dbias);
    if (dx) gr_store(dx, gx);
    if (ds) st = gr_reduce_to(c, ds, b.dscale, m, nd, 1.0);
    if (dbt && st == GRAFT_OK) st = gr_reduce_to(c, dbt, b.dbias, m, nd, 1.0);
done:
    free(gx);
    ln_free(&b);
    return st;
}

/* ---- Softmax: dX = Y * (dY - sum(dY * Y)) along the axis ------------------------------------- */

graft_status grad_Softmax(const grad_call *c) {
    TRY(gr_check(c, 1, 1));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *y = c->out[0], *dy = gr_dout(c, 0);
    int axis;
    bool single;
    TRY(softmax_axis(c->node, y->ndim, &axis, &single, c->err));
    axis_split sp = axis_split_dims(y->ndim, y->dims, axis, single);
    for (int64_t o = 0; o < sp.outer; o++)
        for (int64_t i = 0; i < sp.inner; i++) {
            int64_t base = o * sp.n * sp.inner + i;
            double dot = 0.0;
            for (int64_t j = 0; dy && j < sp.n; j++) {
                int64_t at = base + j * sp.inner;
                dot += gr_get(dy, at) * gr_get(y, at);
            }
            for (int64_t j = 0; j < sp.n; j++) {
                int64_t at = base + j * sp.inner;
                gr_set(dx, at, dy ? gr_get(y, at) * (gr_get(dy, at) - dot) : 0.0);
            }
        }
    return GRAFT_OK;
}

/* ---- BatchNormalization --------------------------------------------------------------------- */

/* Batch statistics (training) from training_mode = 1 at opset 14+, and before it from asking for
 * the statistics outputs: the forward's reading of the node. */
static graft_status bn_training(const grad_call *c, bool *training) {
    *training = false;
    if (c->node->opset >= 14) {
        int64_t t = attr_i(c->node, "training_mode", 0);
        if (t != 0 && t != 1)
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "training_mode = %lld, expected 0 or 1", (long long)t);
        *training = t == 1;
        return GRAFT_OK;
    }
    for (int i = 1; i < c->n_out; i++)
        if (c->out && c->out[i]) *training = true;
    return GRAFT_OK;
}

/* X as (n, groups, run): one parameter group per channel (run = the spatial size), or per
 * activation (spatial=0 of opsets 7 and 8: groups = C * spatial, run = 1). */
typedef struct bn_view {
    int64_t n, groups, run;
    double eps;
    bool training;
} bn_view;

/* Group g: its statistics (batch or running), then dX, and dScale, dB, dMean, dVar at g. */
static void bn_group(const bn_view *v, int64_t g, const double *x, const double *dy,
                     const tensor *const *in, double *dx, double *dp /* 4 x groups */) {
    int64_t m = v->n * v->run;
    double mean = 0.0, var = 0.0;
    for (int64_t b = 0; v->training && b < v->n; b++)
        for (int64_t r = 0; r < v->run; r++) mean += x[(b * v->groups + g) * v->run + r];
    mean = v->training ? (m > 0 ? mean / (double)m : 0.0) : tensor_get_f64(in[3], g);
    for (int64_t b = 0; v->training && b < v->n; b++)
        for (int64_t r = 0; r < v->run; r++) {
            double d = x[(b * v->groups + g) * v->run + r] - mean;
            var += d * d;
        }
    var = v->training ? (m > 0 ? var / (double)m : 0.0) : tensor_get_f64(in[4], g);
    double rstd = 1.0 / sqrt(var + v->eps), s = tensor_get_f64(in[1], g), sum = 0.0, sum_xhat = 0.0;
    for (int64_t b = 0; b < v->n; b++)
        for (int64_t r = 0; r < v->run; r++) {
            int64_t at = (b * v->groups + g) * v->run + r;
            sum += dy[at];
            sum_xhat += dy[at] * (x[at] - mean) * rstd;
        }
    for (int64_t b = 0; dx && b < v->n; b++)
        for (int64_t r = 0; r < v->run; r++) {
            int64_t at = (b * v->groups + g) * v->run + r;
            double xhat = (x[at] - mean) * rstd;
            dx[at] = v->training ? s * rstd * (dy[at] - (sum + xhat * sum_xhat) / (double)m)
                                 : s * rstd * dy[at];
        }
    dp[g] = sum_xhat;
    dp[v->groups + g] = sum;
    /* running statistics: constants of a training-mode output, inputs of an inference one */
    dp[2 * v->groups + g] = v->training ? 0.0 : -s * rstd * sum;
    dp[3 * v->groups + g] = v->training ? 0.0 : -0.5 * s * rstd * rstd * sum_xhat;
}

graft_status grad_BatchNormalization(const grad_call *c) {
    TRY(gr_check(c, 5, 0));
    const tensor *x = c->in[0];
    char sx[128];
    if (x->ndim < 2)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: X has shape %s, want (N, C, ...)",
                        shape_str(sx, sizeof sx, x->ndim, x->dims));
    bn_view v = {x->dims[0], x->dims[1], dims_numel(x->ndim - 2, x->dims + 2), 0.0, false};
    if (tensor_numel(c->in[1]) != v.groups) { /* per activation */
        v.groups *= v.run;
        v.run = 1;
    }
    for (int i = 1; i < 5; i++)
        if (tensor_numel(c->in[i]) != v.groups)
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "backward: input %d has %lld values for X %s; want %lld", i,
                            (long long)tensor_numel(c->in[i]),
                            shape_str(sx, sizeof sx, x->ndim, x->dims), (long long)v.groups);
    TRY(bn_training(c, &v.training));
    v.eps = attr_f(c->node, "epsilon", 1e-5f);
    tensor *dxt = gr_din(c, 0);
    double *xv = gr_load(x), *dy = gr_load_dout(c, 0, tensor_numel(x));
    double *dx = dxt ? gr_zeros(tensor_numel(x)) : NULL, *dp = gr_zeros(4 * v.groups);
    if (!xv || !dy || !dp || (dxt && !dx)) {
        free(xv);
        free(dy);
        free(dx);
        free(dp);
        return gr_oom(c);
    }
    for (int64_t g = 0; g < v.groups; g++) bn_group(&v, g, xv, dy, c->in, dx, dp);
    if (dxt) gr_store(dxt, dx);
    for (int i = 1; i < 5; i++)
        if (gr_din(c, i)) gr_store(gr_din(c, i), dp + (i - 1) * v.groups);
    free(xv);
    free(dy);
    free(dx);
    free(dp);
    return GRAFT_OK;
}

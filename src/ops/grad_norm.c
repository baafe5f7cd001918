/* grad_norm.c: backward rules of LayerNormalization (X, Scale, B) and Softmax (single axis from
 * opset 13, the flattened trailing part before), computed in double. */
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

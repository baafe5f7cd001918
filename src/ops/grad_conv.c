/* grad_conv.c: backward rule of Conv (1-D to 3-D; strides, explicit pads or auto_pad, dilations,
 * groups incl. depthwise, optional bias) in double, on the forward's window geometry, as products
 * with a column matrix (im2col / col2im). */
#include <stdlib.h>
#include <string.h>

#include "nn.h"
#include "grad_util.h"

/* Conv's sizes: the window as 3-D, channels and groups. */
typedef struct conv_bwd_geom {
    gr_window w;
    int64_t batch, channels, out_channels, group_in, group_out;
} conv_bwd_geom;

static graft_status conv_bad_shapes(const grad_call *c, const char *why) {
    const tensor *x = c->in[0], *w = c->in[1], *y = c->out[0];
    char sx[128], sw[128], sy[128];
    return op_error(c->node, c->err, GRAFT_E_SHAPE, "backward: X %s, W %s, Y %s: %s",
                    shape_str(sx, sizeof sx, x->ndim, x->dims),
                    shape_str(sw, sizeof sw, w->ndim, w->dims),
                    shape_str(sy, sizeof sy, y->ndim, y->dims), why);
}

static graft_status conv_bwd_geometry(const grad_call *c, conv_bwd_geom *g) {
    const tensor *x = c->in[0], *w = c->in[1], *y = c->out[0];
    if (x->ndim < 3 || x->ndim > 2 + NN_MAX_SPATIAL || w->ndim != x->ndim || y->ndim != x->ndim)
        return conv_bad_shapes(c, "expected (N, C, spatial...) tensors of one rank, 1 to 3 "
                                  "spatial axes");
    TRY(gr_window_init(c, w->dims + 2, &g->w));
    int64_t group = attr_i(c->node, "group", 1);
    g->batch = x->dims[0];
    g->channels = x->dims[1];
    g->out_channels = w->dims[0];
    g->group_in = w->dims[1];
    if (group < 1 || g->group_in * group != g->channels || g->out_channels % group != 0 ||
        y->dims[0] != g->batch || y->dims[1] != g->out_channels)
        return conv_bad_shapes(c, "channel counts disagree with the group attribute");
    g->group_out = g->out_channels / group;
    return GRAFT_OK;
}

/* Between a group's input x (group_in, in_size) and its transposed column matrix colt
 * (out_size, group_in * taps), the input element each (output point, tap) reads: gather fills
 * colt (0 in the padding), scatter adds colt back into x (col2im). */
static void conv_columns(const gr_window *g, int64_t group_in, double *x, double *colt,
                         bool scatter) {
    int64_t kc = group_in * g->taps;
    for (int64_t r = 0; r < kc; r++) {
        int64_t ci = r / g->taps, t = r % g->taps;
        int64_t k[3] = {t / (g->kernel[1] * g->kernel[2]), (t / g->kernel[2]) % g->kernel[1],
                        t % g->kernel[2]};
        double *xc = x + ci * g->in_size;
        for (int64_t od = 0; od < g->out[0]; od++) {
            int64_t id = gr_tap_pos(g, 0, od, k[0]);
            for (int64_t oh = 0; oh < g->out[1]; oh++) {
                int64_t ih = gr_tap_pos(g, 1, oh, k[1]);
                double *dst = colt + (od * g->out[1] + oh) * g->out[2] * kc + r;
                bool inside = id >= 0 && id < g->in[0] && ih >= 0 && ih < g->in[1];
                double *src = xc + (inside ? (id * g->in[1] + ih) * g->in[2] : 0);
                for (int64_t ow = 0; ow < g->out[2]; ow++) {
                    int64_t iw = gr_tap_pos(g, 2, ow, k[2]);
                    bool in_w = inside && iw >= 0 && iw < g->in[2];
                    if (scatter && in_w)
                        src[iw] += dst[ow * kc];
                    else if (!scatter)
                        dst[ow * kc] = in_w ? src[iw] : 0.0;
                }
            }
        }
    }
}

/* Columns of the products handled together: a block of colt's rows stays in cache. */
#define CONV_BLOCK 256

/* y (n) += a * x (n), vectorised. */
static void axpy(int64_t n, double a, const double *restrict x, double *restrict y) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* One (sample, group), with kc = group_in * taps: dW_g (group_out, kc) += dY_g (group_out,
 * out_size) * colt (out_size, kc), and dcolt (out_size, kc) = dY_g^T * W_g scattered into dX_g.
 * Both products run as row updates of length kc. */
static void conv_group_backward(const conv_bwd_geom *g, const double *dy, double *x,
                                const double *w, double *dx, double *dw, double *colt) {
    int64_t kc = g->group_in * g->w.taps, np = g->w.out_size;
    if (dw) {
        conv_columns(&g->w, g->group_in, x, colt, false);
        for (int64_t r0 = 0; r0 < kc; r0 += CONV_BLOCK)
            for (int64_t m = 0; m < g->group_out; m++)
                for (int64_t p = 0; p < np; p++) {
                    double a = dy[m * np + p];
                    int64_t len = kc - r0 < CONV_BLOCK ? kc - r0 : CONV_BLOCK;
                    if (a != 0.0) axpy(len, a, colt + p * kc + r0, dw + m * kc + r0);
                }
    }
    if (dx) {
        memset(colt, 0, (size_t)(kc * np) * sizeof(double));
        for (int64_t r0 = 0; r0 < kc; r0 += CONV_BLOCK)
            for (int64_t m = 0; m < g->group_out; m++)
                for (int64_t p = 0; p < np; p++) {
                    double a = dy[m * np + p];
                    int64_t len = kc - r0 < CONV_BLOCK ? kc - r0 : CONV_BLOCK;
                    if (a != 0.0) axpy(len, a, w + m * kc + r0, colt + p * kc + r0);
                }
        conv_columns(&g->w, g->group_in, dx, colt, true);
    }
}

typedef struct conv_bufs {
    double *x, *w, *dy, *dx, *dw, *col;
} conv_bufs;

static void conv_bufs_free(conv_bufs *b) {
    free(b->x);
    free(b->w);
    free(b->dy);
    free(b->dx);
    free(b->dw);
    free(b->col);
}

/* Y (N, M, out...) = X (N, C, in...) conv W (M, C / group, k...) + B (M): dX and dW are the
 * forward's sums turned around, dB sums dY over the batch and the output positions. */
graft_status grad_Conv(const grad_call *c) {
    TRY(gr_check(c, 2, 1));
    conv_bwd_geom g;
    TRY(conv_bwd_geometry(c, &g));
    tensor *dxt = gr_din(c, 0), *dwt = gr_din(c, 1);
    tensor *dbt = c->n_in > 2 && c->in[2] ? gr_din(c, 2) : NULL;
    if (dbt && tensor_numel(dbt) != g.out_channels) return conv_bad_shapes(c, "B is not (M)");
    conv_bufs b = {0};
    b.dy = gr_load_dout(c, 0, tensor_numel(c->out[0]));
    b.x = dwt ? gr_load(c->in[0]) : NULL;
    b.w = dxt ? gr_load(c->in[1]) : NULL;
    b.dx = dxt ? gr_zeros(tensor_numel(c->in[0])) : NULL;
    b.dw = dwt ? gr_zeros(tensor_numel(c->in[1])) : NULL;
    b.col = dxt || dwt ? gr_zeros(g.group_in * g.w.taps * g.w.out_size) : NULL;
    if (!b.dy || (dwt && (!b.x || !b.dw)) || (dxt && (!b.w || !b.dx)) || ((dxt || dwt) && !b.col)) {
        conv_bufs_free(&b);
        return gr_oom(c);
    }
    int64_t groups = g.out_channels / g.group_out, wg = g.group_out * g.group_in * g.w.taps;
    for (int64_t n = 0; (dxt || dwt) && n < g.batch; n++)
        for (int64_t grp = 0; grp < groups; grp++) {
            int64_t xo = (n * g.channels + grp * g.group_in) * g.w.in_size;
            const double *dy = b.dy + (n * g.out_channels + grp * g.group_out) * g.w.out_size;
            conv_group_backward(&g, dy, b.x ? b.x + xo : NULL, b.w ? b.w + grp * wg : NULL,
                                b.dx ? b.dx + xo : NULL, b.dw ? b.dw + grp * wg : NULL, b.col);
        }
    if (dxt) gr_store(dxt, b.dx);
    if (dwt) gr_store(dwt, b.dw);
    for (int64_t m = 0; dbt && m < g.out_channels; m++) {
        double sum = 0.0;
        for (int64_t n = 0; n < g.batch; n++)
            for (int64_t p = 0; p < g.w.out_size; p++)
                sum += b.dy[(n * g.out_channels + m) * g.w.out_size + p];
        gr_set(dbt, m, sum);
    }
    conv_bufs_free(&b);
    return GRAFT_OK;
}

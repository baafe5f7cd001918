/* grad_conv.c: backward rule of Conv (1-D to 3-D; strides, explicit pads or auto_pad, dilations,
 * groups incl. depthwise, optional bias) in double, on the forward's window geometry. */
#include <stdlib.h>

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

/* One (sample, output channel, input channel) triple: dx (in_size) += dy (out_size) * w over
 * every tap, and dw (taps) += dy * x. dx may be NULL (then w is unread), dw too (then x). */
static void conv_plane_backward(const gr_window *g, const double *dy, const double *x,
                                const double *w, double *dx, double *dw) {
    for (int64_t t = 0; t < g->taps; t++) {
        int64_t k[3] = {t / (g->kernel[1] * g->kernel[2]), (t / g->kernel[2]) % g->kernel[1],
                        t % g->kernel[2]};
        double wt = dx ? w[t] : 0.0, acc = 0.0;
        for (int64_t od = 0; od < g->out[0]; od++) {
            int64_t id = gr_tap_pos(g, 0, od, k[0]);
            if (id < 0 || id >= g->in[0]) continue;
            for (int64_t oh = 0; oh < g->out[1]; oh++) {
                int64_t ih = gr_tap_pos(g, 1, oh, k[1]);
                if (ih < 0 || ih >= g->in[1]) continue;
                const double *dyr = dy + (od * g->out[1] + oh) * g->out[2];
                int64_t row = (id * g->in[1] + ih) * g->in[2];
                for (int64_t ow = 0; ow < g->out[2]; ow++) {
                    int64_t iw = gr_tap_pos(g, 2, ow, k[2]);
                    if (iw < 0 || iw >= g->in[2]) continue;
                    if (dx) dx[row + iw] += dyr[ow] * wt;
                    if (dw) acc += dyr[ow] * x[row + iw];
                }
            }
        }
        if (dw) dw[t] += acc;
    }
}

typedef struct conv_bufs {
    double *x, *w, *dy, *dx, *dw;
} conv_bufs;

static void conv_bufs_free(conv_bufs *b) {
    free(b->x);
    free(b->w);
    free(b->dy);
    free(b->dx);
    free(b->dw);
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
    if (!b.dy || (dwt && (!b.x || !b.dw)) || (dxt && (!b.w || !b.dx))) {
        conv_bufs_free(&b);
        return gr_oom(c);
    }
    for (int64_t n = 0; (dxt || dwt) && n < g.batch; n++)
        for (int64_t m = 0; m < g.out_channels; m++) {
            int64_t first = (m / g.group_out) * g.group_in; /* the group's first input channel */
            const double *dy = b.dy + (n * g.out_channels + m) * g.w.out_size;
            for (int64_t ci = 0; ci < g.group_in; ci++) {
                int64_t xo = (n * g.channels + first + ci) * g.w.in_size;
                int64_t wo = (m * g.group_in + ci) * g.w.taps;
                conv_plane_backward(&g.w, dy, b.x ? b.x + xo : NULL, b.w ? b.w + wo : NULL,
                                    b.dx ? b.dx + xo : NULL, b.dw ? b.dw + wo : NULL);
            }
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

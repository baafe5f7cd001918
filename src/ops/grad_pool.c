/* grad_pool.c: backward rules of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool in
 * double, on the forward's window geometry (shared with grad_conv.c through gr_window_init). */
#include <stdlib.h>

#include "nn.h"
#include "grad_util.h"

graft_status gr_window_init(const grad_call *c, const int64_t *kernel, gr_window *w) {
    const tensor *x = c->in[0], *y = c->out[0];
    char sx[128], sy[128];
    if (x->ndim < 3 || x->ndim > 2 + NN_MAX_SPATIAL || y->ndim != x->ndim)
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: X %s and Y %s: expected (N, C, spatial...) of one rank with 1 "
                        "to %d spatial axes",
                        shape_str(sx, sizeof sx, x->ndim, x->dims),
                        shape_str(sy, sizeof sy, y->ndim, y->dims), NN_MAX_SPATIAL);
    nn_window win;
    TRY(nn_window_init(c->node, x->ndim - 2, x->dims + 2, kernel, &win, c->err));
    int lead = 3 - win.nsp;
    w->in_size = w->out_size = w->taps = 1;
    for (int a = 0; a < 3; a++) {
        int s = a - lead;
        w->in[a] = s >= 0 ? win.in[s] : 1;
        w->kernel[a] = s >= 0 ? win.kernel[s] : 1;
        w->stride[a] = s >= 0 ? win.stride[s] : 1;
        w->dilation[a] = s >= 0 ? win.dilation[s] : 1;
        w->pad_begin[a] = s >= 0 ? win.pad_begin[s] : 0;
        w->pad_end[a] = s >= 0 ? win.pad_end[s] : 0;
        w->out[a] = s >= 0 ? win.out[s] : 1;
        w->in_size *= w->in[a];
        w->out_size *= w->out[a];
        w->taps *= w->kernel[a];
        if (s >= 0 && y->dims[2 + s] != win.out[s])
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "backward: Y %s does not follow from X %s and the window attributes",
                            shape_str(sy, sizeof sy, y->ndim, y->dims),
                            shape_str(sx, sizeof sx, x->ndim, x->dims));
    }
    if (y->dims[0] != x->dims[0] || (!kernel && y->dims[1] != x->dims[1]))
        return op_error(
            c->node, c->err, GRAFT_E_SHAPE, "backward: Y %s and X %s differ in batch or channels",
            shape_str(sy, sizeof sy, y->ndim, y->dims), shape_str(sx, sizeof sx, x->ndim, x->dims));
    return GRAFT_OK;
}

/* Taps [lo, hi) of the window at output position o along axis a that land inside the input,
 * and how many taps land inside the padded input (AveragePool's count_include_pad divisor):
 * the forward's tap_range. */
static void tap_range(const gr_window *w, int a, int64_t o, int64_t *lo, int64_t *hi,
                      int64_t *padded) {
    *lo = w->kernel[a];
    *hi = 0;
    *padded = 0;
    for (int64_t j = 0; j < w->kernel[a]; j++) {
        int64_t pos = gr_tap_pos(w, a, o, j);
        if (pos >= 0 && pos < w->in[a]) {
            if (j < *lo) *lo = j;
            *hi = j + 1;
        }
        if (pos < w->in[a] + w->pad_end[a]) (*padded)++;
    }
    if (*hi == 0) *lo = 0;
}

/* One output point o (3-D) of one plane: MaxPool sends g to the first maximum in scan order
 * (the tap the forward picked), AveragePool spreads g over the taps inside the input with the
 * forward's divisor. */
static void pool_point_backward(const gr_window *w, bool is_max, bool include_pad, const double *x,
                                double *dx, const int64_t *o, double g) {
    int64_t lo[3], hi[3], padded[3], best_at = -1;
    for (int a = 0; a < 3; a++) tap_range(w, a, o[a], &lo[a], &hi[a], &padded[a]);
    int64_t divisor = include_pad ? padded[0] * padded[1] * padded[2]
                                  : (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    double best = 0.0, share = divisor > 0 ? g / (double)divisor : 0.0;
    for (int64_t jd = lo[0]; jd < hi[0]; jd++)
        for (int64_t jh = lo[1]; jh < hi[1]; jh++) {
            int64_t row =
                (gr_tap_pos(w, 0, o[0], jd) * w->in[1] + gr_tap_pos(w, 1, o[1], jh)) * w->in[2];
            for (int64_t jw = lo[2]; jw < hi[2]; jw++) {
                int64_t at = row + gr_tap_pos(w, 2, o[2], jw);
                if (!is_max) {
                    dx[at] += share;
                } else if (best_at < 0 || x[at] > best) {
                    best = x[at];
                    best_at = at;
                }
            }
        }
    if (is_max && best_at >= 0) dx[best_at] += g;
}

static graft_status pool_backward(const grad_call *c, bool is_max) {
    TRY(gr_check(c, 1, 1));
    tensor *dxt = gr_din(c, 0);
    if (!dxt) return GRAFT_OK;
    gr_window w;
    TRY(gr_window_init(c, NULL, &w));
    const tensor *x = c->in[0];
    bool include_pad = !is_max && attr_i(c->node, "count_include_pad", 0) == 1;
    int64_t planes = x->dims[0] * x->dims[1];
    double *xv = is_max ? gr_load(x) : gr_zeros(1), *dx = gr_zeros(tensor_numel(x));
    double *dy = gr_load_dout(c, 0, tensor_numel(c->out[0]));
    if (!xv || !dx || !dy) {
        free(xv);
        free(dx);
        free(dy);
        return gr_oom(c);
    }
    for (int64_t plane = 0; plane < planes; plane++)
        for (int64_t p = 0; p < w.out_size; p++) {
            int64_t o[3] = {p / (w.out[1] * w.out[2]), (p / w.out[2]) % w.out[1], p % w.out[2]};
            pool_point_backward(&w, is_max, include_pad, is_max ? xv + plane * w.in_size : NULL,
                                dx + plane * w.in_size, o, dy[plane * w.out_size + p]);
        }
    gr_store(dxt, dx);
    free(xv);
    free(dx);
    free(dy);
    return GRAFT_OK;
}

graft_status grad_MaxPool(const grad_call *c) {
    return pool_backward(c, true);
}

graft_status grad_AveragePool(const grad_call *c) {
    return pool_backward(c, false);
}

/* ---- global pools: one window per (sample, channel) plane ----------------------------------- */

static graft_status global_pool_backward(const grad_call *c, bool is_max) {
    TRY(gr_check(c, 1, 1));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *x = c->in[0], *y = c->out[0], *dy = gr_dout(c, 0);
    int64_t planes = x->ndim >= 2 ? x->dims[0] * x->dims[1] : 0;
    int64_t size = x->ndim >= 2 ? dims_numel(x->ndim - 2, x->dims + 2) : 0;
    if (x->ndim < 3 || tensor_numel(y) != planes) {
        char sx[128], sy[128];
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: X %s and Y %s: expected (N, C, spatial...) and (N, C, 1...)",
                        shape_str(sx, sizeof sx, x->ndim, x->dims),
                        shape_str(sy, sizeof sy, y->ndim, y->dims));
    }
    for (int64_t p = 0; p < planes; p++) {
        double g = dy ? gr_get(dy, p) : 0.0;
        int64_t best_at = 0;
        for (int64_t i = 1; is_max && i < size; i++) /* the first maximum in memory order */
            if (gr_get(x, p * size + i) > gr_get(x, p * size + best_at)) best_at = i;
        for (int64_t i = 0; i < size; i++)
            gr_set(dx, p * size + i, is_max ? (i == best_at ? g : 0.0) : g / (double)size);
    }
    return GRAFT_OK;
}

graft_status grad_GlobalAveragePool(const grad_call *c) {
    return global_pool_backward(c, false);
}

graft_status grad_GlobalMaxPool(const grad_call *c) {
    return global_pool_backward(c, true);
}

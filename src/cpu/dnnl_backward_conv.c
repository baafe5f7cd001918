/* dnnl_backward_conv.c: Conv's gradients in f32 (1-D to 3-D; strides, pads / auto_pad,
 * dilations, groups incl. depthwise; dX, dW, dB) as oneDNN sgemm products with a column matrix
 * (im2col for dW, col2im for dX), threaded over (sample, group) or inside sgemm. */
#include "graft_config.h"

#include <stdlib.h>
#include <string.h>

#if GRAFT_HAVE_OPENMP
#include <omp.h>
#endif

#include "../ops/grad_util.h"
#include "../ops/nn.h"
#include "dnnl_backward.h"

/* The window as 3-D (the backward rules' gr_window) and the channel counts. */
typedef struct conv_geom {
    gr_window w;
    int64_t batch, channels, out_channels, groups, group_in, group_out;
    int64_t kc;    /* group_in * taps: rows of a group's column matrix */
    bool identity; /* 1x1, stride 1, no padding: the column matrix is X itself */
} conv_geom;

static bool conv_geom_init(const bwd_call *b, conv_geom *g) {
    const tensor *x = b->in[0], *w = b->in[1], *y = b->out[0];
    if (!x || !w || !y || x->ndim < 3 || x->ndim > 2 + NN_MAX_SPATIAL || w->ndim != x->ndim ||
        y->ndim != x->ndim)
        return false;
    graft_err scratch = {0}; /* a bad window: the reference kernel reports it */
    grad_call gc = {b->call->node, b->in, b->n_in, b->out, b->n_out, NULL, NULL, &scratch};
    if (gr_window_init(&gc, w->dims + 2, &g->w) != GRAFT_OK) return false;
    g->identity = true;
    for (int a = 0; a < 3; a++)
        if (g->w.kernel[a] != 1 || g->w.stride[a] != 1 || g->w.pad_begin[a] != 0 ||
            g->w.in[a] != g->w.out[a])
            g->identity = false;
    int64_t group = attr_i(b->call->node, "group", 1);
    g->batch = x->dims[0];
    g->channels = x->dims[1];
    g->out_channels = w->dims[0];
    g->group_in = w->dims[1];
    if (group < 1 || g->group_in * group != g->channels || g->out_channels % group != 0 ||
        y->dims[0] != g->batch || y->dims[1] != g->out_channels)
        return false;
    g->groups = group;
    g->group_out = g->out_channels / group;
    g->kc = g->group_in * g->w.taps;
    return b->n_in < 3 || !b->in[2] || tensor_numel(b->in[2]) == g->out_channels;
}

/* The output positions [lo, hi) along axis a whose tap j reads inside the input. */
static void tap_range(const conv_geom *g, int a, int64_t j, int64_t *lo, int64_t *hi) {
    int64_t off = j * g->w.dilation[a] - g->w.pad_begin[a], s = g->w.stride[a];
    /* o * s + off >= 0 and o * s + off < in */
    *lo = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t last = g->w.in[a] - 1 - off; /* o * s <= last */
    *hi = last < 0 ? 0 : last / s + 1;
    if (*hi > g->w.out[a]) *hi = g->w.out[a];
    if (*lo > *hi) *lo = *hi;
}

/* Between one input channel x (in_size) and its taps rows of a column matrix col (taps,
 * out_size): gather fills col (0 in the padding), scatter adds col back into x. */
static void conv_channel_columns(const conv_geom *g, float *x, float *col, bool scatter) {
    for (int64_t t = 0; t < g->w.taps; t++) {
        int64_t k[3] = {t / (g->w.kernel[1] * g->w.kernel[2]),
                        (t / g->w.kernel[2]) % g->w.kernel[1], t % g->w.kernel[2]};
        int64_t lo[3], hi[3];
        for (int a = 0; a < 3; a++) tap_range(g, a, k[a], &lo[a], &hi[a]);
        float *crow = col + t * g->w.out_size;
        if (!scatter && (lo[0] > 0 || hi[0] < g->w.out[0] || lo[1] > 0 || hi[1] < g->w.out[1] ||
                         lo[2] > 0 || hi[2] < g->w.out[2]))
            memset(crow, 0, (size_t)g->w.out_size * sizeof(float));
        int64_t sw = g->w.stride[2], w0 = k[2] * g->w.dilation[2] - g->w.pad_begin[2];
        for (int64_t od = lo[0]; od < hi[0]; od++) {
            int64_t id = od * g->w.stride[0] + k[0] * g->w.dilation[0] - g->w.pad_begin[0];
            for (int64_t oh = lo[1]; oh < hi[1]; oh++) {
                int64_t ih = oh * g->w.stride[1] + k[1] * g->w.dilation[1] - g->w.pad_begin[1];
                float *c = crow + (od * g->w.out[1] + oh) * g->w.out[2];
                int64_t base = (id * g->w.in[1] + ih) * g->w.in[2] + w0; /* + ow * sw: in the row */
                if (scatter) {
                    for (int64_t ow = lo[2]; ow < hi[2]; ow++) x[base + ow * sw] += c[ow];
                } else {
                    for (int64_t ow = lo[2]; ow < hi[2]; ow++) c[ow] = x[base + ow * sw];
                }
            }
        }
    }
}

/* One (sample, group)'s column matrix (kc, out_size) from X, channel by channel (in parallel
 * when `par`). */
static void im2col(const conv_geom *g, const float *x, float *col, bool par, int threads) {
#pragma omp parallel for num_threads(threads) if (par) schedule(static)
    for (int64_t ci = 0; ci < g->group_in; ci++)
        conv_channel_columns(g, (float *)x + ci * g->w.in_size,
                             col + ci * g->w.taps * g->w.out_size, false);
}

/* dX of one (sample, group) (group_in, in_size) = col2im(col); overwrites dx. */
static void col2im(const conv_geom *g, const float *col, float *dx, bool par, int threads) {
#pragma omp parallel for num_threads(threads) if (par) schedule(static)
    for (int64_t ci = 0; ci < g->group_in; ci++) {
        float *dxc = dx + ci * g->w.in_size;
        memset(dxc, 0, (size_t)g->w.in_size * sizeof(float));
        conv_channel_columns(g, dxc, (float *)col + ci * g->w.taps * g->w.out_size, true);
    }
}

/* Whether (sample, group) tasks run in parallel, one sgemm each on one thread; else one task
 * after another, with sgemm and the column loops threaded inside. */
static bool tasks_in_parallel(const conv_geom *g, int threads) {
    return threads > 1 && g->batch * g->groups >= threads;
}

/* dX (N, C, in...): per (sample, group) dcol (kc, P) = W_g^T (kc, go) * dY_ng (go, P), then
 * col2im (written straight into dX for a 1x1 identity window). */
static graft_status conv_dx(const bwd_call *b, const conv_geom *g, float *dx) {
    const float *w = b->in[1]->data, *dy = b->dout[0]->data;
    int64_t tasks = g->batch * g->groups, p = g->w.out_size;
    bool par = tasks_in_parallel(g, b->threads), ok = true;
    int nt = par ? b->threads : 1;
    size_t col_floats = g->identity ? 0 : (size_t)(g->kc * p);
    float *cols = col_floats ? malloc(col_floats * sizeof(float) * (size_t)nt) : NULL;
    if (col_floats && !cols) return bwd_fail(b, "out of memory for dX's column matrices");
#pragma omp parallel for num_threads(nt) if (par) schedule(static) reduction(&& : ok)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t n = t / g->groups, grp = t % g->groups;
#if GRAFT_HAVE_OPENMP
        float *col = cols ? cols + col_floats * (size_t)omp_get_thread_num() : NULL;
#else
        float *col = cols;
#endif
        float *dxt = dx + (n * g->channels + grp * g->group_in) * g->w.in_size;
        const float *wg = w + grp * g->group_out * g->kc;
        const float *dyt = dy + (n * g->out_channels + grp * g->group_out) * p;
        ok = ok && bwd_sgemm('T', 'N', g->kc, p, g->group_out, 1.0f, wg, g->kc, dyt, p, 0.0f,
                             col ? col : dxt, p);
        if (col) col2im(g, col, dxt, !par, b->threads);
    }
    free(cols);
    return ok ? GRAFT_OK : bwd_fail(b, "oneDNN's sgemm failed (dX)");
}

/* dW_g (go, kc) += dY_ng (go, P) * col_ng^T (P, kc) for the tasks [t0, t1) of group-major order
 * (t = grp * N + n) into dw (M, C / group, k...), with col a (kc, P) scratch matrix. */
static bool conv_dw_tasks(const bwd_call *b, const conv_geom *g, int64_t t0, int64_t t1, float *dw,
                          float *col, bool par_inside) {
    const float *x = b->in[0]->data, *dy = b->dout[0]->data;
    int64_t p = g->w.out_size;
    for (int64_t t = t0; t < t1; t++) {
        int64_t grp = t / g->batch, n = t % g->batch;
        const float *xt = x + (n * g->channels + grp * g->group_in) * g->w.in_size;
        const float *dyt = dy + (n * g->out_channels + grp * g->group_out) * p;
        if (!g->identity) im2col(g, xt, col, par_inside, b->threads);
        if (!bwd_sgemm('N', 'T', g->group_out, g->kc, p, 1.0f, dyt, p, g->identity ? xt : col, p,
                       1.0f, dw + grp * g->group_out * g->kc, g->kc))
            return false;
    }
    return true;
}

/* dW (M, C / group, k...): with at least as many groups as threads, each thread owns whole
 * groups; else with enough (sample, group) tasks each thread sums its share into a partial dW
 * (thread 0 into dW itself) and the partials are added; else tasks in order, threaded inside. */
static graft_status conv_dw(const bwd_call *b, const conv_geom *g, float *dw) {
    int64_t tasks = g->batch * g->groups, wn = g->out_channels * g->kc;
    size_t col_floats = g->identity ? 0 : (size_t)(g->kc * g->w.out_size);
    bool by_group = b->threads > 1 && g->groups >= b->threads;
    bool par = by_group || tasks_in_parallel(g, b->threads);
    int nt = par ? b->threads : 1;
    float *cols = col_floats ? malloc(col_floats * sizeof(float) * (size_t)nt) : NULL;
    float *parts = par && !by_group ? calloc((size_t)(wn * (nt - 1)) + 1, sizeof(float)) : NULL;
    if ((col_floats && !cols) || (par && !by_group && !parts)) {
        free(cols);
        free(parts);
        return bwd_fail(b, "out of memory for dW's column matrices");
    }
    memset(dw, 0, (size_t)wn * sizeof(float));
    bool ok = true;
#pragma omp parallel num_threads(nt) if (par) reduction(&& : ok)
    {
        int me = 0, count = 1;
#if GRAFT_HAVE_OPENMP
        me = omp_get_thread_num();
        count = omp_get_num_threads();
#endif
        float *col = cols ? cols + col_floats * (size_t)me : NULL;
        /* by group: whole groups per thread (tasks are group-major), so no two share a dW row */
        int64_t units = by_group ? g->groups : tasks, per = by_group ? g->batch : 1;
        int64_t u0 = units * me / count, u1 = units * (me + 1) / count;
        float *dst = !par || by_group || me == 0 ? dw : parts + (size_t)wn * (size_t)(me - 1);
        ok = conv_dw_tasks(b, g, u0 * per, u1 * per, dst, col, !par);
    }
    if (parts) {
#pragma omp parallel for num_threads(b->threads) schedule(static)
        for (int64_t i = 0; i < wn; i++)
            for (int k = 0; k < nt - 1; k++) dw[i] += parts[(size_t)wn * (size_t)k + (size_t)i];
    }
    free(cols);
    free(parts);
    return ok ? GRAFT_OK : bwd_fail(b, "oneDNN's sgemm failed (dW)");
}

/* dB (M) = dY summed over the batch and the output positions: float runs, double totals. */
static void conv_db(const bwd_call *b, const conv_geom *g, float *db) {
    const float *dy = b->dout[0]->data;
    int64_t p = g->w.out_size;
#pragma omp parallel for num_threads(b->threads) if (g->batch * g->out_channels * p >= 65536)
    for (int64_t m = 0; m < g->out_channels; m++) {
        double total = 0.0;
        for (int64_t n = 0; n < g->batch; n++) {
            const float *run = dy + (n * g->out_channels + m) * p;
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < p; i++) s += run[i];
            total += s;
        }
        db[m] = (float)total;
    }
}

graft_status bwd_conv(const bwd_call *b, bool *handled) {
    conv_geom g;
    if (!conv_geom_init(b, &g)) return GRAFT_OK;
    tensor *dx = b->din[0], *dw = b->din[1], *db = b->n_in > 2 && b->in[2] ? b->din[2] : NULL;
    if (dx) TRY(conv_dx(b, &g, dx->data));
    if (dw) TRY(conv_dw(b, &g, dw->data));
    if (db) conv_db(b, &g, db->data);
    *handled = true;
    return GRAFT_OK;
}

/* conv.c: reference kernel of Conv (1-D to 3-D, groups, dilations, pads): im2col and the f32
 * matrix product for f32 and 16-bit floats, direct loops in f64. */
#include <stdlib.h>
#include <string.h>

#include "nn_ref.h"

/* Conv's sizes, with the window seen as 3-D. */
typedef struct conv_geom {
    nn_window w; /* 3-D */
    int64_t batch, channels, out_channels, group;
    int64_t group_in, group_out; /* channels per group */
    int64_t in_size, out_size;   /* spatial element counts */
    int64_t taps;                /* kernel elements per input channel */
} conv_geom;

static graft_status conv_geom_make(const op_call *c, conv_geom *g) {
    const tensor *x = c->in[0], *w = c->in[1];
    nn_window win;
    TRY(nn_window_init(c->node, x->ndim - 2, x->dims + 2, w->dims + 2, &win, c->err));
    g->w = nn_window_as_3d(&win);
    g->batch = x->dims[0];
    g->channels = x->dims[1];
    g->out_channels = w->dims[0];
    g->group = attr_i(c->node, "group", 1);
    g->group_in = w->dims[1];
    g->group_out = g->out_channels / g->group;
    g->in_size = g->w.in[0] * g->w.in[1] * g->w.in[2];
    g->out_size = g->w.out[0] * g->w.out[1] * g->w.out[2];
    g->taps = g->w.kernel[0] * g->w.kernel[1] * g->w.kernel[2];
    if (g->group_in * g->group != g->channels || c->out[0]->dims[1] != g->out_channels)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "channel counts changed since inference");
    return GRAFT_OK;
}

/* A 1x1 kernel with unit strides and no padding reads the input as it is. */
static bool conv_is_pointwise(const conv_geom *g) {
    for (int i = 0; i < NN_MAX_SPATIAL; i++)
        if (g->w.kernel[i] != 1 || g->w.stride[i] != 1 || g->w.pad_begin[i] || g->w.pad_end[i])
            return false;
    return true;
}

/* One row of the column matrix: input channel `ch`, kernel tap (kd, kh, kw), every output point. */
static void im2col_row(const conv_geom *g, const float *x, int64_t ch, int64_t kd, int64_t kh,
                       int64_t kw, float *row) {
    const nn_window *w = &g->w;
    int64_t off_w = kw * w->dilation[2] - w->pad_begin[2];
    for (int64_t od = 0; od < w->out[0]; od++) {
        int64_t id = od * w->stride[0] - w->pad_begin[0] + kd * w->dilation[0];
        for (int64_t oh = 0; oh < w->out[1]; oh++) {
            int64_t ih = oh * w->stride[1] - w->pad_begin[1] + kh * w->dilation[1];
            float *dst = row + (od * w->out[1] + oh) * w->out[2];
            if (id < 0 || id >= w->in[0] || ih < 0 || ih >= w->in[1]) {
                memset(dst, 0, (size_t)w->out[2] * sizeof(float));
                continue;
            }
            const float *src = x + ((ch * w->in[0] + id) * w->in[1] + ih) * w->in[2];
            for (int64_t ow = 0; ow < w->out[2]; ow++) {
                int64_t iw = ow * w->stride[2] + off_w;
                dst[ow] = iw >= 0 && iw < w->in[2] ? src[iw] : 0.0f;
            }
        }
    }
}

/* col (group_in * taps, out_size) from the group's input x (group_in, D, H, W). */
static void im2col(const conv_geom *g, const float *x, float *col) {
    int64_t rows = g->group_in * g->taps;
    const int64_t *k = g->w.kernel;
    bool parallel = rows * g->out_size >= 32768 && nn_may_parallelize();
#pragma omp parallel for if (parallel)
    for (int64_t r = 0; r < rows; r++) {
        int64_t ch = r / g->taps, t = r % g->taps;
        im2col_row(g, x, ch, t / (k[1] * k[2]), (t / k[2]) % k[1], t % k[2], col + r * g->out_size);
    }
}

static graft_status conv_f32(const op_call *c) {
    conv_geom g;
    TRY(conv_geom_make(c, &g));
    const float *x = c->in[0]->data, *w = c->in[1]->data;
    const float *bias = c->n_in > 2 && c->in[2] ? c->in[2]->data : NULL;
    float *y = c->out[0]->data, *col = NULL;
    int64_t kc = g.group_in * g.taps;
    bool pointwise = conv_is_pointwise(&g);
    if (!pointwise) {
        int64_t n = kc * g.out_size;
        col = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        if (!col)
            return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY,
                            "no memory for the %lld x %lld column matrix", (long long)kc,
                            (long long)g.out_size);
    }
    for (int64_t n = 0; n < g.batch; n++)
        for (int64_t grp = 0; grp < g.group; grp++) {
            const float *xg = x + (n * g.channels + grp * g.group_in) * g.in_size;
            float *yg = y + (n * g.out_channels + grp * g.group_out) * g.out_size;
            if (!pointwise) im2col(&g, xg, col);
            if (bias)
                for (int64_t r = 0; r < g.group_out; r++)
                    for (int64_t p = 0; p < g.out_size; p++)
                        yg[r * g.out_size + p] = bias[grp * g.group_out + r];
            nn_sgemm(g.group_out, g.out_size, kc, w + grp * g.group_out * kc, kc,
                     pointwise ? xg : col, g.out_size, false, yg, g.out_size, bias != NULL);
        }
    free(col);
    return GRAFT_OK;
}

/* One output value of the f64 path: bias plus the window's weighted sum. */
static double conv_point_f64(const conv_geom *g, const double *x, const double *w, int64_t n,
                             int64_t m, const int64_t *o) {
    const nn_window *win = &g->w;
    int64_t grp = m / g->group_out;
    double acc = 0.0;
    for (int64_t ci = 0; ci < g->group_in; ci++) {
        const double *xc = x + (n * g->channels + grp * g->group_in + ci) * g->in_size;
        const double *wc = w + (m * g->group_in + ci) * g->taps;
        for (int64_t t = 0; t < g->taps; t++) {
            int64_t k[3] = {t / (win->kernel[1] * win->kernel[2]),
                            (t / win->kernel[2]) % win->kernel[1], t % win->kernel[2]};
            int64_t idx = 0;
            bool inside = true;
            for (int a = 0; a < 3; a++) {
                int64_t i = o[a] * win->stride[a] - win->pad_begin[a] + k[a] * win->dilation[a];
                if (i < 0 || i >= win->in[a]) inside = false;
                idx = idx * win->in[a] + i;
            }
            if (inside) acc += xc[idx] * wc[t];
        }
    }
    return acc;
}

static graft_status conv_f64(const op_call *c) {
    conv_geom g;
    TRY(conv_geom_make(c, &g));
    const double *x = c->in[0]->data, *w = c->in[1]->data;
    const double *bias = c->n_in > 2 && c->in[2] ? c->in[2]->data : NULL;
    double *y = c->out[0]->data;
    int64_t planes = g.batch * g.out_channels;
#pragma omp parallel for if (planes * g.out_size * g.taps >= 32768 && nn_may_parallelize())
    for (int64_t plane = 0; plane < planes; plane++) {
        int64_t n = plane / g.out_channels, m = plane % g.out_channels;
        for (int64_t p = 0; p < g.out_size; p++) {
            int64_t o[3] = {p / (g.w.out[1] * g.w.out[2]), (p / g.w.out[2]) % g.w.out[1],
                            p % g.w.out[2]};
            y[plane * g.out_size + p] = (bias ? bias[m] : 0.0) + conv_point_f64(&g, x, w, n, m, o);
        }
    }
    return GRAFT_OK;
}

graft_status ref_Conv(const op_call *c) {
    graft_dtype dt = c->out[0]->dtype;
    if (dt == GRAFT_DTYPE_F32) return conv_f32(c);
    if (dt == GRAFT_DTYPE_F64) return conv_f64(c);
    if (dt != GRAFT_DTYPE_F16 && dt != GRAFT_DTYPE_BF16)
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "no Conv kernel for %s",
                        graft_dtype_name(dt));
    return nn_run_via_f32(c, conv_f32); /* 16-bit floats: f32 math, one rounding at the end */
}

/* resize.c: reference kernel of Resize: one axis at a time (as ONNX's reference does), each
 * output element a weighted sum of its taps along that axis, in double precision. */
#include <stdlib.h>
#include <string.h>

#include "../../ops/resize.h"

/* One pass: src (dims) -> dst (dims with axis resized to out). */
static void resize_axis(const resize_plan *p, int axis, const double *src, const int64_t *dims,
                        double *dst, int64_t out, const int64_t *tap_idx, const double *tap_w,
                        const int *tap_n, int max_taps) {
    int64_t outer = 1, inner = 1, n = dims[axis];
    for (int d = 0; d < axis; d++) outer *= dims[d];
    for (int d = axis + 1; d < p->ndim; d++) inner *= dims[d];
    for (int64_t a = 0; a < outer; a++)
        for (int64_t o = 0; o < out; o++) {
            const int64_t *idx = tap_idx + o * max_taps;
            const double *w = tap_w + o * max_taps;
            double *row = dst + (a * out + o) * inner;
            for (int64_t i = 0; i < inner; i++) {
                if (tap_n[o] == 0) {
                    row[i] = p->extrapolation;
                    continue;
                }
                double acc = 0.0;
                for (int t = 0; t < tap_n[o]; t++) acc += w[t] * src[(a * n + idx[t]) * inner + i];
                row[i] = acc;
            }
        }
}

/* The taps of every output index of one axis, then the pass. */
static graft_status run_axis(const op_call *c, const resize_plan *p, int axis, const double *src,
                             int64_t *dims, double *dst) {
    int max_taps = resize_max_taps(p, axis);
    int64_t out = p->out_dims[axis];
    int64_t *idx = malloc(sizeof *idx * (size_t)(out * max_taps + 1));
    double *w = malloc(sizeof *w * (size_t)(out * max_taps + 1));
    int *n = malloc(sizeof *n * (size_t)(out + 1));
    if (!idx || !w || !n) {
        free(idx), free(w), free(n);
        return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory for Resize's taps");
    }
    for (int64_t o = 0; o < out; o++)
        n[o] = resize_taps(p, axis, o, idx + o * max_taps, w + o * max_taps);
    resize_axis(p, axis, src, dims, dst, out, idx, w, n, max_taps);
    dims[axis] = out;
    free(idx), free(w), free(n);
    return GRAFT_OK;
}

static int64_t numel_of(int ndim, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= dims[d];
    return n;
}

graft_status ref_Resize(const op_call *c) {
    const tensor *x = c->in[0];
    if (!x) return op_missing_input(c, 0);
    value_info vi[4];
    int n = call_value_infos(c, vi, 4);
    resize_plan p;
    TRY(resize_make_plan(c->node, vi, n, &p, c->err));
    TRY(op_expect_output(c, c->out[0], x->dtype, p.ndim, p.out_dims));
    int64_t dims[GRAFT_MAX_DIMS], biggest = tensor_numel(x);
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    for (int d = 0; d < p.ndim; d++) {
        if (p.identity[d]) continue;
        dims[d] = p.out_dims[d];
        int64_t m = numel_of(p.ndim, dims);
        if (m > biggest) biggest = m;
    }
    if (tensor_numel(c->out[0]) == 0) return GRAFT_OK;
    double *a = malloc(sizeof *a * (size_t)(biggest + 1)),
           *b = malloc(sizeof *b * (size_t)(biggest + 1));
    if (!a || !b) {
        free(a), free(b);
        return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory for Resize");
    }
    for (int64_t i = 0; i < tensor_numel(x); i++) a[i] = tensor_get_f64(x, i);
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    graft_status st = GRAFT_OK;
    for (int d = 0; d < p.ndim && st == GRAFT_OK; d++) {
        if (p.identity[d]) continue;
        st = run_axis(c, &p, d, a, dims, b);
        double *t = a;
        a = b, b = t;
    }
    for (int64_t i = 0; st == GRAFT_OK && i < tensor_numel(c->out[0]); i++)
        tensor_set_f64(c->out[0], i, a[i]);
    free(a), free(b);
    return st;
}

/* tensor_pad.c: the reference Pad kernel: constant, reflect, edge and wrap modes on any dtype,
 * negative pads cropping. */
#include <stdlib.h>
#include <string.h>

#include "../../ops/shape_plan.h"
#include "tensor_copy.h"

/* A run along the last axis: count output elements from dst on, read from src on (src -1: the
 * constant). Runs let the row loop use memcpy for the unpadded middle. */
typedef struct pad_run {
    int64_t dst, src, count;
} pad_run;

static int64_t pad_runs(const int64_t *map, int64_t n, pad_run *runs) {
    int64_t k = 0;
    for (int64_t o = 0; o < n; o++) {
        pad_run *last = k > 0 ? &runs[k - 1] : NULL;
        bool extends =
            last && ((map[o] < 0 && last->src < 0) ||
                     (map[o] >= 0 && last->src >= 0 && map[o] == last->src + last->count));
        if (extends) {
            last->count++;
        } else {
            runs[k].dst = o;
            runs[k].src = map[o];
            runs[k].count = 1;
            k++;
        }
    }
    return k;
}

typedef struct pad_job {
    const char *src;
    char *dst;
    size_t elem;
    int ndim;
    const int64_t *out_dims;
    int64_t in_strides[GRAFT_MAX_DIMS];
    int64_t *maps[GRAFT_MAX_DIMS];
    const pad_run *runs;
    int64_t n_runs;
    const unsigned char *constant;
} pad_job;

/* One output row (the last axis): all constant when an outer index falls in the padding. */
static void pad_row(const pad_job *j, int64_t r) {
    int last = j->ndim - 1;
    int64_t inner = j->out_dims[last], off = 0, rem = r;
    char *out = j->dst + r * inner * (int64_t)j->elem;
    for (int k = last - 1; k >= 0; k--) {
        int64_t s = j->maps[k][rem % j->out_dims[k]];
        rem /= j->out_dims[k];
        if (s < 0) {
            fill_elements(out, j->constant, j->elem, inner);
            return;
        }
        off += s * j->in_strides[k];
    }
    for (int64_t i = 0; i < j->n_runs; i++) {
        const pad_run *run = &j->runs[i];
        char *d = out + run->dst * (int64_t)j->elem;
        if (run->src < 0)
            fill_elements(d, j->constant, j->elem, run->count);
        else
            memcpy(d, j->src + (off + run->src) * (int64_t)j->elem, (size_t)run->count * j->elem);
    }
}

static graft_status pad_run_rows(const op_call *c, const pad_plan *p, const unsigned char *cval) {
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    int64_t total = 0;
    for (int k = 0; k < in->ndim; k++) total += out->dims[k];
    int64_t *maps = malloc(sizeof(int64_t) * (size_t)total);
    pad_run *runs = malloc(sizeof(pad_run) * (size_t)out->dims[in->ndim - 1]);
    if (!maps || !runs) {
        free(maps);
        free(runs);
        return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory for pad maps");
    }
    pad_job j = {
        in->data, out->data, graft_dtype_size(in->dtype), in->ndim, out->dims, {0}, {NULL}, runs,
        0,        cval};
    dims_strides(in->ndim, in->dims, j.in_strides);
    int64_t *m = maps;
    for (int k = 0; k < in->ndim; k++) {
        j.maps[k] = m;
        for (int64_t o = 0; o < out->dims[k]; o++)
            m[o] = pad_plan_source(p->mode, o, p->begin[k], in->dims[k]);
        m += out->dims[k];
    }
    j.n_runs = pad_runs(j.maps[in->ndim - 1], out->dims[in->ndim - 1], runs);
    int64_t rows = dims_numel(in->ndim - 1, out->dims);
#pragma omp parallel for schedule(static) if (tensor_numel(out) >= TENSOR_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) pad_row(&j, r);
    free(maps);
    free(runs);
    return GRAFT_OK;
}

graft_status ref_Pad(const op_call *c) {
    const tensor *in = c->in[0];
    tensor *out = c->out[0];
    if (!in) return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "input is missing");
    pad_plan p;
    unsigned char cval[16];
    TRY(pad_call_plan(c, &p, cval));
    if (tensor_numel(out) == 0) return GRAFT_OK;
    if (in->ndim == 0) {
        memcpy(out->data, in->data, graft_dtype_size(in->dtype));
        return GRAFT_OK;
    }
    return pad_run_rows(c, &p, cval);
}

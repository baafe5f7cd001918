/* pool.c: reference kernels of MaxPool (with its optional Indices output) and AveragePool over
 * 1-D to 3-D windows, for float types and 8-bit integers. */
#include <math.h>
#include <stdlib.h>

#include "nn_ref.h"

/* One pooling pass over planes of x; x and y hold f32, or f64 when `f64`. */
typedef struct pool_job {
    nn_window w; /* 3-D */
    int64_t planes, in_size, out_size;
    bool f64;
    const void *x;
    void *y;
    int64_t *indices;  /* MaxPool's second output, NULL when not asked for */
    bool column_major; /* storage_order = 1: indices count the first spatial axis fastest */
    bool include_pad;  /* AveragePool count_include_pad */
} pool_job;

static inline double load(const void *p, int64_t i, bool f64) {
    return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static inline void store(void *p, int64_t i, double v, bool f64) {
    if (f64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* Taps [lo, hi) of the window at output position o along axis a that land inside the input, and
 * the number of taps inside the padded input (for count_include_pad). */
static void tap_range(const nn_window *w, int a, int64_t o, int64_t *lo, int64_t *hi,
                      int64_t *padded) {
    int64_t start = o * w->stride[a] - w->pad_begin[a];
    *lo = w->kernel[a];
    *hi = 0;
    *padded = 0;
    for (int64_t j = 0; j < w->kernel[a]; j++) {
        int64_t pos = start + j * w->dilation[a];
        if (pos >= 0 && pos < w->in[a]) {
            if (j < *lo) *lo = j;
            *hi = j + 1;
        }
        if (pos < w->in[a] + w->pad_end[a]) (*padded)++;
    }
    if (*hi == 0) *lo = 0;
}

/* Input position along axis a of tap j of the window at output position o. */
static inline int64_t tap_pos(const nn_window *w, int a, int64_t o, int64_t j) {
    return o * w->stride[a] - w->pad_begin[a] + j * w->dilation[a];
}

/* One output point: position o (3-D) of plane `plane`. */
static void pool_point(const pool_job *job, bool is_max, int64_t plane, const int64_t *o,
                       int64_t out_index) {
    const nn_window *w = &job->w;
    int64_t lo[3], hi[3], padded[3];
    for (int a = 0; a < 3; a++) tap_range(w, a, o[a], &lo[a], &hi[a], &padded[a]);
    int64_t base = plane * job->in_size, best_at = -1, count = 0;
    double best = 0.0, sum = 0.0;
    for (int64_t jd = lo[0]; jd < hi[0]; jd++)
        for (int64_t jh = lo[1]; jh < hi[1]; jh++) {
            int64_t row = (tap_pos(w, 0, o[0], jd) * w->in[1] + tap_pos(w, 1, o[1], jh)) * w->in[2];
            for (int64_t jw = lo[2]; jw < hi[2]; jw++) {
                int64_t at = row + tap_pos(w, 2, o[2], jw);
                double v = load(job->x, base + at, job->f64);
                if (is_max && (best_at < 0 || v > best)) {
                    best = v;
                    best_at = at;
                }
                sum += v;
                count++;
            }
        }
    if (is_max) {
        store(job->y, out_index, best, job->f64);
        if (job->indices) {
            int64_t id = best_at / (w->in[1] * w->in[2]), ih = (best_at / w->in[2]) % w->in[1];
            int64_t iw = best_at % w->in[2];
            int64_t spatial =
                job->column_major ? id + ih * w->in[0] + iw * w->in[0] * w->in[1] : best_at;
            job->indices[out_index] = best_at < 0 ? -1 : base + spatial;
        }
        return;
    }
    int64_t divisor = job->include_pad ? padded[0] * padded[1] * padded[2] : count;
    store(job->y, out_index, divisor > 0 ? sum / (double)divisor : 0.0, job->f64);
}

static void pool_run(const pool_job *job, bool is_max) {
    const nn_window *w = &job->w;
    int64_t total = job->planes * job->out_size;
    bool parallel =
        total * w->kernel[0] * w->kernel[1] * w->kernel[2] >= 32768 && nn_may_parallelize();
#pragma omp parallel for if (parallel)
    for (int64_t plane = 0; plane < job->planes; plane++)
        for (int64_t p = 0; p < job->out_size; p++) {
            int64_t o[3] = {p / (w->out[1] * w->out[2]), (p / w->out[2]) % w->out[1],
                            p % w->out[2]};
            pool_point(job, is_max, plane, o, plane * job->out_size + p);
        }
}

static graft_status run_pool(const op_call *c, bool is_max) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    nn_window win;
    TRY(nn_window_init(c->node, x->ndim - 2, x->dims + 2, NULL, &win, c->err));
    pool_job job = {0};
    job.w = nn_window_as_3d(&win);
    job.planes = x->dims[0] * x->dims[1];
    job.in_size = job.w.in[0] * job.w.in[1] * job.w.in[2];
    job.out_size = job.w.out[0] * job.w.out[1] * job.w.out[2];
    job.indices = is_max && c->n_out > 1 && c->out[1] ? c->out[1]->data : NULL;
    job.column_major = attr_i(c->node, "storage_order", 0) == 1;
    job.include_pad = attr_i(c->node, "count_include_pad", 0) == 1;
    job.f64 = x->dtype == GRAFT_DTYPE_F64;
    if (x->dtype == GRAFT_DTYPE_F32 || job.f64) {
        job.x = x->data;
        job.y = y->data;
        pool_run(&job, is_max);
        return GRAFT_OK;
    }
    /* 16-bit floats and 8-bit integers go through f32, where each of their values is exact. */
    float *x32 = nn_f32_copy(x);
    float *y32 = malloc((size_t)(tensor_numel(y) > 0 ? tensor_numel(y) : 1) * sizeof(float));
    if (!x32 || !y32) {
        free(x32);
        free(y32);
        return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "staging the input as f32");
    }
    job.x = x32;
    job.y = y32;
    pool_run(&job, is_max);
    nn_f32_store(y, y32);
    free(x32);
    free(y32);
    return GRAFT_OK;
}

graft_status ref_MaxPool(const op_call *c) {
    return run_pool(c, true);
}

graft_status ref_AveragePool(const op_call *c) {
    return run_pool(c, false);
}

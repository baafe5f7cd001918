/* reduce.c: reference kernels of Softmax, LogSoftmax, LayerNormalization, ArgMax and CumSum
 * (the Reduce* ops are in reduce_axes.c): contiguous f32 fast paths, double accumulation for
 * floats, exact 64-bit integer arithmetic for integers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/scalar.h"
#include "../../ops/reduce.h"
#include "../../ops/shape_plan.h"

/* Below this many elements threads cost more than they save. */
#define PARALLEL_MIN 32768

/* The build targets baseline x86-64 (SSE2); the hot f32 row loops also get an AVX2 clone that
 * the dynamic loader picks on CPUs that have it (GCC function multi-versioning), which about
 * doubles their speed. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define HOT_ROW __attribute__((target_clones("avx2", "default")))
#else
#define HOT_ROW
#endif

static bool is_float(graft_dtype dt) {
    return dtype_is_float(dt);
}

/* Integers are carried as the bits of a uint64: wrap-around is defined, and signed values
 * round-trip through the two's complement. */
static uint64_t load_int(const tensor *t, int64_t i) {
    return (uint64_t)scalar_load_int(t->data, t->dtype, i);
}

static void store_int(tensor *t, int64_t i, uint64_t v) {
    scalar_store_int(t->data, t->dtype, i, (int64_t)v);
}

static bool is_unsigned(graft_dtype dt) {
    return dt == GRAFT_DTYPE_U8 || dt == GRAFT_DTYPE_U16 || dt == GRAFT_DTYPE_U32 ||
           dt == GRAFT_DTYPE_U64;
}

/* ------------------------------------------------------------------------------------------ */
/* Softmax, LogSoftmax                                                                          */

static inline float float_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t bits_of_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* e^x for the x <= 0 that softmax feeds it, within 1.5 ulp of exp: Cody-Waite range reduction
 * and a degree-6 polynomial. The library expf kept BERT's attention softmax scalar; this has no
 * calls or branches, and selects with bit masks because float ternaries under the default
 * -ftrapping-math stop GCC from vectorising. Results that would be denormal flush to 0 (so
 * -inf gives 0); NaN stays NaN. */
static inline float softmax_exp(float x) {
    uint32_t low = -(uint32_t)(x < -87.0f);
    float xc = float_of_bits((bits_of_float(x) & ~low) | (bits_of_float(-87.0f) & low));
    /* Adding 1.5 * 2^23 rounds to the integer n = round(x / ln 2), kept in the low bits. */
    float t = xc * 1.44269504f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float two_to_n = float_of_bits(((bits_of_float(t) - 0x4B400000u + 127u) << 23) & ~low);
    return p * two_to_n;
}

/* One contiguous f32 row: the BERT attention path. */
HOT_ROW static void softmax_row_f32(const float *x, float *y, int64_t n, bool log_form) {
    float mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 1; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    double sum = 0.0;
    if (log_form) {
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; j++) sum += softmax_exp(x[j] - mx);
        float log_sum = (float)log(sum);
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mx) - log_sum;
        return;
    }
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) {
        float v = softmax_exp(x[j] - mx);
        y[j] = v;
        sum += v;
    }
    float scale = (float)(1.0 / sum);
#pragma omp simd
    for (int64_t j = 0; j < n; j++) y[j] *= scale;
}

/* One strided column of any float dtype, computed in double. */
static void softmax_col_generic(const tensor *x, tensor *y, int64_t base, int64_t n, int64_t stride,
                                bool log_form) {
    double mx = tensor_get_f64(x, base);
    for (int64_t j = 1; j < n; j++) {
        double v = tensor_get_f64(x, base + j * stride);
        mx = v > mx ? v : mx;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) sum += exp(tensor_get_f64(x, base + j * stride) - mx);
    double log_sum = log(sum);
    for (int64_t j = 0; j < n; j++) {
        int64_t at = base + j * stride;
        double d = tensor_get_f64(x, at) - mx;
        tensor_set_f64(y, at, log_form ? d - log_sum : exp(d) / sum);
    }
}

static graft_status run_softmax(const op_call *c, bool log_form) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    if (!is_float(x->dtype))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "input dtype %s is not a float type",
                        graft_dtype_name(x->dtype));
    int axis;
    bool single;
    TRY(softmax_axis(c->node, x->ndim, &axis, &single, c->err));
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, single);
    if (s.n == 0 || s.outer == 0 || s.inner == 0) return GRAFT_OK;
    int64_t cols = s.outer * s.inner;
    bool par = cols * s.n >= PARALLEL_MIN;
    if (x->dtype == GRAFT_DTYPE_F32 && s.inner == 1) {
        const float *xp = x->data;
        float *yp = y->data;
#pragma omp parallel for if (par) schedule(static)
        for (int64_t r = 0; r < s.outer; r++)
            softmax_row_f32(xp + r * s.n, yp + r * s.n, s.n, log_form);
        return GRAFT_OK;
    }
#pragma omp parallel for if (par) schedule(static)
    for (int64_t col = 0; col < cols; col++) {
        int64_t o = col / s.inner, i = col % s.inner;
        softmax_col_generic(x, y, o * s.n * s.inner + i, s.n, s.inner, log_form);
    }
    return GRAFT_OK;
}

graft_status ref_Softmax(const op_call *c) {
    return run_softmax(c, false);
}
graft_status ref_LogSoftmax(const op_call *c) {
    return run_softmax(c, true);
}

/* ------------------------------------------------------------------------------------------ */
/* LayerNormalization                                                                           */

/* Fill dst[0..n) with Scale or B broadcast to the normalised shape norm_dims (m dims). */
static graft_status expand_to_norm(const op_call *c, const tensor *p, int m,
                                   const int64_t *norm_dims, int64_t n, double *dst) {
    for (int i = 0; i < p->ndim; i++) {
        int t = m - p->ndim + i;
        int64_t want = t >= 0 ? norm_dims[t] : 1;
        if (p->dims[i] != 1 && p->dims[i] != want) {
            char sp[256], sn[256];
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "input of shape %s does not broadcast to the normalised shape %s",
                            shape_str(sp, sizeof sp, p->ndim, p->dims),
                            shape_str(sn, sizeof sn, m, norm_dims));
        }
    }
    int64_t pstrides[GRAFT_MAX_DIMS];
    dims_strides(p->ndim, p->dims, pstrides);
    for (int64_t j = 0; j < n; j++) {
        int64_t rem = j, off = 0;
        for (int t = m - 1; t >= 0; t--) {
            int64_t coord = rem % norm_dims[t];
            rem /= norm_dims[t];
            int i = t - (m - p->ndim);
            if (i >= 0 && p->dims[i] != 1) off += coord * pstrides[i];
        }
        dst[j] = tensor_get_f64(p, off);
    }
    return GRAFT_OK;
}

typedef struct ln_row_stats {
    double mean, inv_std;
} ln_row_stats;

/* One contiguous f32 row (the BERT path): mean, then variance around it, in double. */
HOT_ROW static ln_row_stats layernorm_row_f32(const float *x, float *y, int64_t n,
                                              const float *scale, const float *bias, double eps) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) sum += x[j];
    float mean = (float)(sum / (double)n);
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < n; j++) {
        float d = x[j] - mean;
        sq += d * d;
    }
    double inv_d = 1.0 / sqrt(sq / (double)n + eps);
    float inv = (float)inv_d;
    if (bias) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mean) * inv * scale[j] + bias[j];
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mean) * inv * scale[j];
    }
    return (ln_row_stats){mean, inv_d};
}

/* One row of any float dtype, computed in double. */
static ln_row_stats layernorm_row_generic(const tensor *x, tensor *y, int64_t base, int64_t n,
                                          const double *scale, const double *bias, double eps) {
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) sum += tensor_get_f64(x, base + j);
    double mean = sum / (double)n, sq = 0.0;
    for (int64_t j = 0; j < n; j++) {
        double d = tensor_get_f64(x, base + j) - mean;
        sq += d * d;
    }
    double inv = 1.0 / sqrt(sq / (double)n + eps);
    for (int64_t j = 0; j < n; j++) {
        double v = (tensor_get_f64(x, base + j) - mean) * inv * scale[j];
        tensor_set_f64(y, base + j, bias ? v + bias[j] : v);
    }
    return (ln_row_stats){mean, inv};
}

typedef struct ln_job {
    const tensor *x;
    tensor *y, *mean, *inv_std; /* the last two NULL when not asked for */
    int64_t rows, n;
    double eps;
    double *scale, *bias;        /* broadcast to n, as double (bias NULL when absent) */
    float *scale_f32, *bias_f32; /* the same as f32, for the f32 path */
} ln_job;

static void layernorm_rows(const ln_job *job) {
    bool f32 = job->x->dtype == GRAFT_DTYPE_F32;
    bool par = job->rows * job->n >= PARALLEL_MIN;
#pragma omp parallel for if (par) schedule(static)
    for (int64_t r = 0; r < job->rows; r++) {
        ln_row_stats st;
        if (f32)
            st = layernorm_row_f32((const float *)job->x->data + r * job->n,
                                   (float *)job->y->data + r * job->n, job->n, job->scale_f32,
                                   job->bias_f32, job->eps);
        else
            st = layernorm_row_generic(job->x, job->y, r * job->n, job->n, job->scale, job->bias,
                                       job->eps);
        if (job->mean) tensor_set_f64(job->mean, r, st.mean);
        if (job->inv_std) tensor_set_f64(job->inv_std, r, st.inv_std);
    }
}

/* Broadcast Scale and B into the job's buffers (one allocation). */
static graft_status ln_prepare_operands(const op_call *c, ln_job *job, int m,
                                        const int64_t *norm_dims, void **block) {
    const tensor *b = c->n_in > 2 ? c->in[2] : NULL;
    size_t n = (size_t)job->n;
    *block = malloc(n * 2 * (sizeof(double) + sizeof(float)) + 1);
    if (!*block) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "out of memory");
    job->scale = *block;
    job->bias = b ? job->scale + n : NULL;
    job->scale_f32 = (float *)(job->scale + 2 * n);
    job->bias_f32 = b ? job->scale_f32 + n : NULL;
    TRY(expand_to_norm(c, c->in[1], m, norm_dims, job->n, job->scale));
    if (b) TRY(expand_to_norm(c, b, m, norm_dims, job->n, job->bias));
    for (size_t j = 0; j < n; j++) {
        job->scale_f32[j] = (float)job->scale[j];
        if (b) job->bias_f32[j] = (float)job->bias[j];
    }
    return GRAFT_OK;
}

graft_status ref_LayerNormalization(const op_call *c) {
    const tensor *x = c->in[0];
    if (c->n_in < 2 || !c->in[1] || !is_float(x->dtype))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "X must be a float tensor with a Scale");
    int axis;
    TRY(op_axis(c->node, attr_i(c->node, "axis", -1), x->ndim, &axis, c->err));
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, false);
    ln_job job = {.x = x,
                  .y = c->out[0],
                  .rows = s.outer,
                  .n = s.n,
                  .eps = attr_f(c->node, "epsilon", 1e-5f)};
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    if (c->n_out > 1 && c->out[1]) {
        job.mean = c->out[1];
        TRY(op_check_output(c, 1, job.mean->dtype, s.outer));
    }
    if (c->n_out > 2 && c->out[2]) {
        job.inv_std = c->out[2];
        TRY(op_check_output(c, 2, job.inv_std->dtype, s.outer));
    }
    if (s.n == 0 || s.outer == 0) { /* empty rows: their statistics are 0 */
        if (job.mean) memset(job.mean->data, 0, (size_t)tensor_nbytes(job.mean));
        if (job.inv_std) memset(job.inv_std->data, 0, (size_t)tensor_nbytes(job.inv_std));
        return GRAFT_OK;
    }
    void *block = NULL;
    graft_status st = ln_prepare_operands(c, &job, x->ndim - axis, x->dims + axis, &block);
    if (st == GRAFT_OK) layernorm_rows(&job);
    free(block);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* ArgMax                                                                                       */

/* NaN counts as the largest value, as numpy's argmax does: the first NaN wins, or the last one
 * with select_last_index. */
static bool beats(double v, double best, bool last) {
    if (isnan(best)) return last && isnan(v);
    if (isnan(v)) return true;
    return last ? v >= best : v > best;
}

static int64_t argmax_column(const tensor *x, int64_t base, int64_t n, int64_t stride, bool last) {
    int64_t best_at = 0;
    if (is_float(x->dtype)) {
        double best = tensor_get_f64(x, base);
        for (int64_t j = 1; j < n; j++) {
            double v = tensor_get_f64(x, base + j * stride);
            if (beats(v, best, last)) best = v, best_at = j;
        }
    } else if (is_unsigned(x->dtype)) {
        uint64_t best = load_int(x, base);
        for (int64_t j = 1; j < n; j++) {
            uint64_t v = load_int(x, base + j * stride);
            if (last ? v >= best : v > best) best = v, best_at = j;
        }
    } else {
        int64_t best = tensor_get_i64(x, base);
        for (int64_t j = 1; j < n; j++) {
            int64_t v = tensor_get_i64(x, base + j * stride);
            if (last ? v >= best : v > best) best = v, best_at = j;
        }
    }
    return best_at;
}

static int64_t argmax_row_f32(const float *x, int64_t n, bool last) {
    int64_t best_at = 0;
    float best = x[0];
    for (int64_t j = 1; j < n; j++)
        if (beats(x[j], best, last)) best = x[j], best_at = j;
    return best_at;
}

graft_status ref_ArgMax(const op_call *c) {
    const tensor *x = c->in[0];
    int axis;
    TRY(op_axis(c->node, attr_i(c->node, "axis", 0), x->ndim, &axis, c->err));
    bool last = attr_i(c->node, "select_last_index", 0) != 0;
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, true);
    int64_t cols = s.outer * s.inner;
    TRY(op_check_output(c, 0, GRAFT_DTYPE_I64, cols));
    if (cols == 0) return GRAFT_OK;
    if (s.n == 0)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "cannot take ArgMax over an empty axis");
    if (!is_float(x->dtype) && !dtype_is_int(x->dtype))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "input dtype %s is not numeric",
                        graft_dtype_name(x->dtype));
    int64_t *yp = c->out[0]->data;
    bool par = cols * s.n >= PARALLEL_MIN;
    if (x->dtype == GRAFT_DTYPE_F32 && s.inner == 1) {
#pragma omp parallel for if (par) schedule(static)
        for (int64_t r = 0; r < s.outer; r++)
            yp[r] = argmax_row_f32((const float *)x->data + r * s.n, s.n, last);
        return GRAFT_OK;
    }
#pragma omp parallel for if (par) schedule(static)
    for (int64_t col = 0; col < cols; col++) {
        int64_t o = col / s.inner, i = col % s.inner;
        yp[col] = argmax_column(x, o * s.n * s.inner + i, s.n, s.inner, last);
    }
    return GRAFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* CumSum                                                                                       */

typedef struct cumsum_dir {
    bool exclusive, reverse;
} cumsum_dir;

static void cumsum_row_f32(const float *x, float *y, int64_t n, int64_t stride, cumsum_dir d) {
    double acc = 0.0;
    for (int64_t k = 0; k < n; k++) {
        int64_t at = (d.reverse ? n - 1 - k : k) * stride;
        double v = x[at];
        if (!d.exclusive) acc += v;
        y[at] = (float)acc;
        if (d.exclusive) acc += v;
    }
}

static void cumsum_col_generic(const tensor *x, tensor *y, int64_t base, int64_t n, int64_t stride,
                               cumsum_dir d) {
    bool flt = is_float(x->dtype);
    double acc = 0.0;
    uint64_t iacc = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t at = base + (d.reverse ? n - 1 - k : k) * stride;
        if (flt) {
            double v = tensor_get_f64(x, at);
            if (!d.exclusive) acc += v;
            tensor_set_f64(y, at, acc);
            if (d.exclusive) acc += v;
        } else {
            uint64_t v = load_int(x, at);
            if (!d.exclusive) iacc += v;
            store_int(y, at, iacc);
            if (d.exclusive) iacc += v;
        }
    }
}

graft_status ref_CumSum(const op_call *c) {
    const tensor *x = c->in[0];
    int64_t axis_value;
    int axis;
    if (!c->in[1] || op_read_ints(c->in[1], &axis_value, 1) != 1)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "axis must be a scalar int32 or int64");
    TRY(op_axis(c->node, axis_value, x->ndim, &axis, c->err));
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    if (!is_float(x->dtype) && !dtype_is_int(x->dtype))
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "input dtype %s is not numeric",
                        graft_dtype_name(x->dtype));
    cumsum_dir d = {attr_i(c->node, "exclusive", 0) != 0, attr_i(c->node, "reverse", 0) != 0};
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, true);
    int64_t cols = s.outer * s.inner;
    if (cols == 0 || s.n == 0) return GRAFT_OK;
    bool par = cols > 1 && cols * s.n >= PARALLEL_MIN;
    tensor *y = c->out[0];
#pragma omp parallel for if (par) schedule(static)
    for (int64_t col = 0; col < cols; col++) {
        int64_t o = col / s.inner, i = col % s.inner;
        int64_t base = o * s.n * s.inner + i;
        if (x->dtype == GRAFT_DTYPE_F32)
            cumsum_row_f32((const float *)x->data + base, (float *)y->data + base, s.n, s.inner, d);
        else
            cumsum_col_generic(x, y, base, s.n, s.inner, d);
    }
    return GRAFT_OK;
}

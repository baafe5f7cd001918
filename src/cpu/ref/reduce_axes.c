/* reduce_axes.c: reference kernels of the Reduce* ops (Sum, Mean, Max, Min, Prod, L1, L2,
 * SumSquare, LogSum, LogSumExp): f32 fast paths for sums and means, double accumulation for
 * floats, exact 64-bit integer arithmetic (wrapping) for integers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/scalar.h"
#include "../../ops/reduce.h"
#include "../../ops/shape_plan.h"

/* Below this many elements threads cost more than they save. */
#define PARALLEL_MIN 32768

/* See reduce.c: an AVX2 clone of the hot f32 row loop where the CPU has it. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define HOT_ROW __attribute__((target_clones("avx2", "default")))
#else
#define HOT_ROW
#endif

static bool is_unsigned(graft_dtype dt) {
    return dt == GRAFT_DTYPE_U8 || dt == GRAFT_DTYPE_U16 || dt == GRAFT_DTYPE_U32 ||
           dt == GRAFT_DTYPE_U64;
}

/* A reduction in canonical form: size-1 dims dropped, neighbouring dims of the same kind
 * (kept / reduced) merged. Output elements run over the kept groups in order. */
typedef struct reduce_geom {
    int n_groups;
    int64_t dims[GRAFT_MAX_DIMS];
    bool reduced[GRAFT_MAX_DIMS];
    int64_t strides[GRAFT_MAX_DIMS]; /* in the input */
    int64_t n_out, n_red;
} reduce_geom;

static reduce_geom reduce_geometry(const tensor *x, const reduce_axes *ax) {
    reduce_geom g = {.n_out = 1, .n_red = 1};
    for (int i = 0; i < x->ndim; i++) {
        if (x->dims[i] == 1) continue;
        if (g.n_groups > 0 && g.reduced[g.n_groups - 1] == ax->reduced[i]) {
            g.dims[g.n_groups - 1] *= x->dims[i];
        } else {
            g.dims[g.n_groups] = x->dims[i];
            g.reduced[g.n_groups++] = ax->reduced[i];
        }
        if (ax->reduced[i])
            g.n_red *= x->dims[i];
        else
            g.n_out *= x->dims[i];
    }
    dims_strides(g.n_groups, g.dims, g.strides);
    return g;
}

/* Walks the offsets of the reduced elements of one output element. */
typedef struct odometer {
    int n;
    int64_t dims[GRAFT_MAX_DIMS], strides[GRAFT_MAX_DIMS], idx[GRAFT_MAX_DIMS];
    int64_t off;
} odometer;

static void odometer_next(odometer *it) {
    for (int d = it->n - 1; d >= 0; d--) {
        it->off += it->strides[d];
        if (++it->idx[d] < it->dims[d]) return;
        it->off -= it->strides[d] * it->dims[d];
        it->idx[d] = 0;
    }
}

/* Input offset of output element o, and an odometer over its reduced elements. */
static int64_t reduce_start(const reduce_geom *g, int64_t o, odometer *it) {
    int64_t base = 0;
    memset(it, 0, sizeof *it);
    for (int d = g->n_groups - 1; d >= 0; d--) {
        if (g->reduced[d]) continue;
        base += (o % g->dims[d]) * g->strides[d];
        o /= g->dims[d];
    }
    for (int d = 0; d < g->n_groups; d++) {
        if (!g->reduced[d]) continue;
        it->dims[it->n] = g->dims[d];
        it->strides[it->n++] = g->strides[d];
    }
    return base;
}

/* One group of floats, in double. LogSumExp shifts by the group's maximum first, so that large
 * values do not overflow; an infinite maximum is the answer itself. NaN propagates through
 * every kind (Max and Min included, as numpy's maximum does). */
static double reduce_floats(const tensor *x, int64_t base, odometer it, int64_t n,
                            reduce_kind kind) {
    double shift = 0.0;
    if (kind == REDUCE_LOG_SUM_EXP) {
        odometer first = it;
        shift = reduce_floats(x, base, first, n, REDUCE_MAX);
        if (isinf(shift) || isnan(shift)) return shift;
    }
    double acc = kind == REDUCE_PROD  ? 1.0
                 : kind == REDUCE_MAX ? -INFINITY
                 : kind == REDUCE_MIN ? INFINITY
                                      : 0.0;
    for (int64_t k = 0; k < n; k++, odometer_next(&it)) {
        double v = tensor_get_f64(x, base + it.off);
        switch (kind) {
        case REDUCE_PROD:
            acc *= v;
            break;
        case REDUCE_MAX:
            acc = v > acc || isnan(v) ? v : acc;
            break;
        case REDUCE_MIN:
            acc = v < acc || isnan(v) ? v : acc;
            break;
        case REDUCE_L1:
            acc += fabs(v);
            break;
        case REDUCE_L2:
        case REDUCE_SUM_SQUARE:
            acc += v * v;
            break;
        case REDUCE_LOG_SUM_EXP:
            acc += exp(v - shift);
            break;
        default:
            acc += v;
            break;
        }
    }
    switch (kind) {
    case REDUCE_MEAN:
        return acc / (double)n;
    case REDUCE_L2:
        return sqrt(acc);
    case REDUCE_LOG_SUM:
        return log(acc);
    case REDUCE_LOG_SUM_EXP:
        return log(acc) + shift;
    default:
        return acc;
    }
}

/* The smallest (or largest) value of an integer dtype, as the bits load_int gives. */
static uint64_t int_limit(graft_dtype dt, bool largest) {
    if (dt == GRAFT_DTYPE_BOOL) return largest ? 1 : 0;
    int bits = (int)graft_dtype_size(dt) * 8;
    uint64_t all = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    if (is_unsigned(dt)) return largest ? all : 0;
    int64_t top = (int64_t)(all >> 1);
    return (uint64_t)(largest ? top : -top - 1);
}

/* One group of integers, carried as the bits of a uint64 (wrap-around is defined, signed values
 * round-trip through the two's complement). */
static uint64_t reduce_ints(const tensor *x, int64_t base, odometer it, int64_t n,
                            reduce_kind kind) {
    bool uns = is_unsigned(x->dtype);
    uint64_t acc = kind == REDUCE_PROD  ? 1
                   : kind == REDUCE_MAX ? int_limit(x->dtype, false)
                   : kind == REDUCE_MIN ? int_limit(x->dtype, true)
                                        : 0;
    for (int64_t k = 0; k < n; k++, odometer_next(&it)) {
        uint64_t v = (uint64_t)scalar_load_int(x->data, x->dtype, base + it.off);
        bool above = uns ? v > acc : (int64_t)v > (int64_t)acc;
        bool below = uns ? v < acc : (int64_t)v < (int64_t)acc;
        switch (kind) {
        case REDUCE_PROD:
            acc *= v;
            break;
        case REDUCE_MAX:
            acc = above ? v : acc;
            break;
        case REDUCE_MIN:
            acc = below ? v : acc;
            break;
        case REDUCE_L1:
            acc += !uns && (int64_t)v < 0 ? (uint64_t)0 - v : v;
            break;
        case REDUCE_SUM_SQUARE:
            acc += v * v;
            break;
        default:
            acc += v;
            break;
        }
    }
    if (kind == REDUCE_MEAN) acc = uns ? acc / (uint64_t)n : (uint64_t)((int64_t)acc / n);
    return acc;
}

/* Any layout, any dtype: one output element at a time. Integer L2, LogSum and LogSumExp are
 * computed in double and truncated, as a cast of the float result would be. */
static void reduce_generic(const tensor *x, tensor *y, const reduce_geom *g, reduce_kind kind) {
    bool par = g->n_out * g->n_red >= PARALLEL_MIN;
    bool in_double = dtype_is_float(x->dtype) || kind == REDUCE_L2 || kind == REDUCE_LOG_SUM ||
                     kind == REDUCE_LOG_SUM_EXP;
#pragma omp parallel for if (par) schedule(static)
    for (int64_t o = 0; o < g->n_out; o++) {
        odometer it;
        int64_t base = reduce_start(g, o, &it);
        if (in_double)
            tensor_set_f64(y, o, reduce_floats(x, base, it, g->n_red, kind));
        else
            scalar_store_int(y->data, y->dtype, o,
                             (int64_t)reduce_ints(x, base, it, g->n_red, kind));
    }
}

/* One contiguous f32 row, summed in double. */
HOT_ROW static double sum_row_f32(const float *row, int64_t n) {
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < n; j++) acc += row[j];
    return acc;
}

/* f32 with the reduced part innermost: (rows, n) contiguous rows. */
static void reduce_rows_f32(const float *x, float *y, int64_t rows, int64_t n, bool mean) {
#pragma omp parallel for if (rows * n >= PARALLEL_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        double acc = sum_row_f32(x + r * n, n);
        y[r] = (float)(mean ? acc / (double)n : acc);
    }
}

/* f32 as (outer, n, inner) reducing n: add whole inner rows so the loads stay contiguous. */
static graft_status reduce_middle_f32(const float *x, float *y, int64_t outer, int64_t n,
                                      int64_t inner, bool mean) {
    bool par = outer > 1 && outer * n * inner >= PARALLEL_MIN;
    int failed = 0;
#pragma omp parallel for if (par) schedule(static) reduction(| : failed)
    for (int64_t o = 0; o < outer; o++) {
        double *acc = calloc((size_t)inner, sizeof *acc);
        if (!acc) {
            failed = 1;
            continue;
        }
        const float *block = x + o * n * inner;
        for (int64_t j = 0; j < n; j++) {
#pragma omp simd
            for (int64_t i = 0; i < inner; i++) acc[i] += block[j * inner + i];
        }
        for (int64_t i = 0; i < inner; i++)
            y[o * inner + i] = (float)(mean ? acc[i] / (double)n : acc[i]);
        free(acc);
    }
    return failed ? GRAFT_E_OUT_OF_MEMORY : GRAFT_OK;
}

/* The f32 fast paths; *done = false when the layout has none. */
static graft_status reduce_fast_f32(const tensor *x, tensor *y, const reduce_geom *g, bool mean,
                                    bool *done) {
    const float *xp = x->data;
    float *yp = y->data;
    int k = g->n_groups;
    *done = true;
    if (k == 0) {
        yp[0] = xp[0];
        return GRAFT_OK;
    }
    if (g->reduced[k - 1] && k <= 2) {
        reduce_rows_f32(xp, yp, k == 2 ? g->dims[0] : 1, g->dims[k - 1], mean);
        return GRAFT_OK;
    }
    if (!g->reduced[k - 1] && (k == 2 || k == 3) && g->reduced[k - 2])
        return reduce_middle_f32(xp, yp, k == 3 ? g->dims[0] : 1, g->dims[k - 2], g->dims[k - 1],
                                 mean);
    *done = false;
    return GRAFT_OK;
}

static graft_status run_reduce(const op_call *c, reduce_kind kind) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    reduce_axes ax;
    TRY(reduce_call_axes(c, &ax));
    bool bool_minmax = x->dtype == GRAFT_DTYPE_BOOL && (kind == REDUCE_MAX || kind == REDUCE_MIN);
    if (!dtype_is_float(x->dtype) && !dtype_is_int(x->dtype) && !bool_minmax)
        return op_error(c->node, c->err, GRAFT_E_DTYPE, "input dtype %s is not numeric",
                        graft_dtype_name(x->dtype));
    /* With noop_with_empty_axes nothing is reduced: every element is its own group. */
    reduce_geom g = reduce_geometry(x, &ax);
    TRY(op_check_output(c, 0, x->dtype, g.n_out));
    if (g.n_out == 0) return GRAFT_OK;
    bool mean = kind == REDUCE_MEAN;
    /* An integer mean of nothing is 0 rather than a division by 0; every other empty reduction
     * is its identity (0, 1, -inf, ...), which the loops give. */
    if (g.n_red == 0 && mean && !dtype_is_float(x->dtype)) {
        memset(y->data, 0, (size_t)tensor_nbytes(y));
        return GRAFT_OK;
    }
    if (g.n_red == 1 && reduce_kind_keeps_single(kind)) {
        /* Only size-1 dims reduced: the values stay, in the same order. */
        memcpy(y->data, x->data, (size_t)tensor_nbytes(x));
        return GRAFT_OK;
    }
    if (x->dtype == GRAFT_DTYPE_F32 && g.n_red > 0 && (kind == REDUCE_SUM || mean)) {
        bool done;
        graft_status st = reduce_fast_f32(x, y, &g, mean, &done);
        if (st != GRAFT_OK) return op_error(c->node, c->err, st, "out of memory");
        if (done) return GRAFT_OK;
    }
    reduce_generic(x, y, &g, kind);
    return GRAFT_OK;
}

#define REDUCE_REF(name, kind)                                                                     \
    graft_status ref_##name(const op_call *c) {                                                    \
        return run_reduce(c, kind);                                                                \
    }
REDUCE_REF(ReduceSum, REDUCE_SUM)
REDUCE_REF(ReduceMean, REDUCE_MEAN)
REDUCE_REF(ReduceMax, REDUCE_MAX)
REDUCE_REF(ReduceMin, REDUCE_MIN)
REDUCE_REF(ReduceProd, REDUCE_PROD)
REDUCE_REF(ReduceL1, REDUCE_L1)
REDUCE_REF(ReduceL2, REDUCE_L2)
REDUCE_REF(ReduceSumSquare, REDUCE_SUM_SQUARE)
REDUCE_REF(ReduceLogSum, REDUCE_LOG_SUM)
REDUCE_REF(ReduceLogSumExp, REDUCE_LOG_SUM_EXP)
#undef REDUCE_REF

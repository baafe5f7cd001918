/* cuda_reduce.c: CUDA kernels of the reduce family (Softmax, LayerNormalization, Reduce*, TopK,
 * ArgMax, CumSum) and of BatchNormalization (inference) and GlobalAveragePool: attributes and shape
 * splitting on the host, launches from reduce_launch.h. */
#include <string.h>

#include "../ops/reduce.h"
#include "../ops/shape_plan.h"
#include "cuda_float_types.h"
#include "cuda_internal.h"
#include "reduce_launch.h"

/* The float dtypes the kernels cover (F64 and the rest go to the CPU reference). */
static bool is_float_dt(graft_dtype dt) {
    return cuda_is_float(dt);
}

/* What the sum, ArgMax and CumSum kernels cover. */
static bool is_numeric_dt(graft_dtype dt) {
    return is_float_dt(dt) || dt == GRAFT_DTYPE_I32 || dt == GRAFT_DTYPE_I64;
}

static graft_status launched(const op_call *c, cudaError_t err, const char *what) {
    if (err == cudaSuccess) return GRAFT_OK;
    return op_error(c->node, c->err, GRAFT_E_BACKEND, "%s: %s (%s)", what, cudaGetErrorString(err),
                    cudaGetErrorName(err));
}

/* Device-to-device copy of a whole tensor, on the backend's stream. */
static graft_status copy_tensor(cuda_backend *be, const op_call *c, tensor *dst,
                                const tensor *src) {
    int64_t bytes = tensor_nbytes(src);
    if (bytes <= 0) return GRAFT_OK;
    CUDA_TRY(
        c->err,
        cudaMemcpyAsync(dst->data, src->data, (size_t)bytes, cudaMemcpyDeviceToDevice, be->stream),
        "copying a tensor on the device");
    return GRAFT_OK;
}

/* Zero bits are 0 in every dtype the kernels write. */
static graft_status zero_tensor(cuda_backend *be, const op_call *c, tensor *t) {
    int64_t bytes = tensor_nbytes(t);
    if (bytes <= 0) return GRAFT_OK;
    CUDA_TRY(c->err, cudaMemsetAsync(t->data, 0, (size_t)bytes, be->stream),
             "zero-filling a tensor on the device");
    return GRAFT_OK;
}

/* ---- Softmax, LogSoftmax ------------------------------------------------------------------ */

static graft_status run_softmax(cuda_backend *be, const op_call *c, bool *handled, bool log_form) {
    const tensor *x = c->in[0];
    *handled = is_float_dt(x->dtype);
    if (!*handled) return GRAFT_OK;
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    int axis;
    bool single;
    TRY(softmax_axis(c->node, x->ndim, &axis, &single, c->err));
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, single);
    if (s.n == 0 || s.outer == 0 || s.inner == 0) return GRAFT_OK;
    return launched(c,
                    cuda_softmax(x->data, c->out[0]->data, s.outer, s.n, s.inner, log_form,
                                 x->dtype, be->stream),
                    "softmax kernel");
}

static graft_status k_softmax(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return run_softmax(be, c, handled, false);
}

static graft_status k_log_softmax(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return run_softmax(be, c, handled, true);
}

/* ---- LayerNormalization ------------------------------------------------------------------- */

/* The optional Mean (out 1) and InvStdDev (out 2): one value per row in the stash dtype. Leaves
 * *ok false for a dtype the kernel does not write. */
static graft_status ln_stat_outputs(const op_call *c, int64_t rows, tensor *stat[2],
                                    graft_dtype *stat_dt, bool *ok) {
    *ok = true;
    *stat_dt = GRAFT_DTYPE_F32;
    for (int i = 1; i < 3; i++) {
        stat[i - 1] = c->n_out > i ? c->out[i] : NULL;
        if (!stat[i - 1]) continue;
        graft_dtype dt = stat[i - 1]->dtype;
        if (dt != GRAFT_DTYPE_F32 && dt != GRAFT_DTYPE_BF16) *ok = false;
        if (i == 2 && stat[0] && stat[0]->dtype != dt) *ok = false;
        if (!*ok) return GRAFT_OK;
        *stat_dt = dt;
        TRY(op_check_output(c, i, dt, rows));
    }
    return GRAFT_OK;
}

static graft_status k_layernorm(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    const tensor *scale = c->n_in > 1 ? c->in[1] : NULL, *bias = c->n_in > 2 ? c->in[2] : NULL;
    *handled = scale && is_float_dt(x->dtype) && scale->dtype == x->dtype &&
               (!bias || bias->dtype == x->dtype);
    if (!*handled) return GRAFT_OK;
    int axis;
    TRY(op_axis(c->node, attr_i(c->node, "axis", -1), x->ndim, &axis, c->err));
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, false);
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    tensor *stat[2];
    graft_dtype stat_dt;
    TRY(ln_stat_outputs(c, s.outer, stat, &stat_dt, handled));
    /* Scale and B that broadcast (fewer values than a row) are rare: the reference expands them. */
    if (tensor_numel(scale) != s.n || (bias && tensor_numel(bias) != s.n)) *handled = false;
    if (!*handled || s.outer == 0) return GRAFT_OK;
    if (s.n == 0) {
        /* Statistics of empty rows: the zeros the reference leaves in its zero-filled outputs. */
        for (int i = 0; i < 2; i++)
            if (stat[i]) TRY(zero_tensor(be, c, stat[i]));
        return GRAFT_OK;
    }
    float eps = attr_f(c->node, "epsilon", 1e-5f);
    return launched(c,
                    cuda_layernorm(x->data, scale->data, bias ? bias->data : NULL, c->out[0]->data,
                                   stat[0] ? stat[0]->data : NULL, stat[1] ? stat[1]->data : NULL,
                                   stat_dt, s.outer, s.n, eps, x->dtype, be->stream),
                    "layer normalization kernel");
}

/* ---- the Reduce* ops, TopK, GlobalAveragePool ----------------------------------------------- */

/* Sum (or mean) of x viewed as (outer, n, inner) over n, split into pieces when there are too
 * few outputs to fill the GPU. */
static graft_status sum_over(cuda_backend *be, const op_call *c, const tensor *x, tensor *y,
                             axis_split s, bool mean) {
    int64_t splits = cuda_reduce_sum_splits(s.outer, s.n, s.inner, be->prop.multiProcessorCount);
    void *partials = NULL;
    if (splits > 1)
        TRY(cuda_malloc(be, (size_t)(s.outer * s.inner * splits) * 8, &partials, c->err));
    cudaError_t err = cuda_reduce_sum(x->data, y->data, partials, s.outer, s.n, s.inner, splits,
                                      mean, x->dtype, be->stream);
    if (partials) cuda_free(be, partials);
    return launched(c, err, "reduction kernel");
}

/* Split x at the reduced axes as (outer, n, inner), ignoring size-1 dims. False when the reduced
 * axes are not one contiguous block (e.g. N and W of NCHW): those go to the CPU. */
static bool reduce_split(const tensor *x, const reduce_axes *ax, axis_split *s) {
    int state = 0; /* 0: before the reduced block, 1: in it, 2: after it */
    *s = (axis_split){1, 1, 1};
    for (int i = 0; i < x->ndim; i++) {
        if (x->dims[i] == 1) continue;
        if (ax->reduced[i]) {
            if (state == 2) return false;
            state = 1;
            s->n *= x->dims[i];
        } else {
            if (state == 1) state = 2;
            if (state == 0)
                s->outer *= x->dims[i];
            else
                s->inner *= x->dims[i];
        }
    }
    return true;
}

_Static_assert((int)REDUCE_LOG_SUM_EXP == CUDA_REDUCE_LOG_SUM_EXP &&
                   (int)REDUCE_MAX == CUDA_REDUCE_MAX && (int)REDUCE_L1 == CUDA_REDUCE_L1,
               "reduce_launch.h numbers the kinds as src/ops/reduce.h does");

/* What the GPU covers: the numeric dtypes, except L2, LogSum and LogSumExp of integers (their
 * float result truncated) and empty reductions, which the CPU reference does. */
static bool reduce_covered(reduce_kind kind, graft_dtype dt, int64_t n_red) {
    if (!is_numeric_dt(dt)) return false;
    bool in_double = kind == REDUCE_L2 || kind == REDUCE_LOG_SUM || kind == REDUCE_LOG_SUM_EXP;
    if (in_double && !is_float_dt(dt)) return false;
    return n_red > 0 || kind == REDUCE_SUM || kind == REDUCE_MEAN;
}

static graft_status run_reduce(cuda_backend *be, const op_call *c, bool *handled) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    reduce_kind kind = REDUCE_SUM;
    reduce_kind_of(c->node->op_type, &kind);
    bool mean = kind == REDUCE_MEAN, sum_like = kind == REDUCE_SUM || mean;
    reduce_axes ax;
    TRY(reduce_call_axes(c, &ax));
    *handled = ax.known && is_numeric_dt(x->dtype);
    if (!*handled) return GRAFT_OK;
    if (ax.noop && reduce_kind_keeps_single(kind)) {
        TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
        return copy_tensor(be, c, y, x);
    }
    int64_t n_out = 1, n_red = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (ax.reduced[i])
            n_red *= x->dims[i];
        else
            n_out *= x->dims[i];
    }
    TRY(op_check_output(c, 0, x->dtype, n_out));
    *handled = reduce_covered(kind, x->dtype, n_red);
    if (!*handled || n_out == 0) return GRAFT_OK;
    if (n_red == 0) {
        /* Sums over nothing are 0; a float mean of nothing is NaN (0 / 0). */
        if (mean && is_float_dt(y->dtype))
            return launched(c, cuda_fill_nan(y->data, n_out, y->dtype, be->stream), "NaN fill");
        return zero_tensor(be, c, y);
    }
    /* Only size-1 dims reduced: the values stay, in the same order. */
    if (n_red == 1 && reduce_kind_keeps_single(kind)) return copy_tensor(be, c, y, x);
    axis_split s;
    if (!reduce_split(x, &ax, &s)) {
        *handled = false;
        return GRAFT_OK;
    }
    if (sum_like) return sum_over(be, c, x, y, s, mean);
    return launched(
        c,
        cuda_reduce_kind(x->data, y->data, s.outer, s.n, s.inner, (int)kind, x->dtype, be->stream),
        "reduction kernel");
}

static graft_status k_reduce(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    return run_reduce(be, c, handled);
}

/* Columns longer than this, or more work than TOPK_MAX_WORK element comparisons, go to the CPU
 * (the kernel compares every pair of a column). */
#define TOPK_MAX_N 8192
#define TOPK_MAX_WORK ((int64_t)1 << 34)

static graft_status k_topk(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    if (!x || x->ndim < 1) return op_error(c->node, c->err, GRAFT_E_SHAPE, "X must have rank >= 1");
    int axis;
    int64_t k;
    TRY(topk_params(c->node, x->ndim, c->n_in > 1 ? c->in[1] : NULL, &axis, &k, c->err));
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, true);
    if (k > s.n)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "k is %lld, more than the %lld elements of axis %d", (long long)k,
                        (long long)s.n, axis);
    TRY(op_check_output(c, 0, x->dtype, s.outer * k * s.inner));
    TRY(op_check_output(c, 1, GRAFT_DTYPE_I64, s.outer * k * s.inner));
    *handled = is_numeric_dt(x->dtype) && s.n <= TOPK_MAX_N &&
               s.outer * s.inner * s.n <= TOPK_MAX_WORK / (s.n > 0 ? s.n : 1);
    if (!*handled) return GRAFT_OK;
    bool largest = attr_i(c->node, "largest", 1) != 0;
    return launched(c,
                    cuda_topk(x->data, c->out[0]->data, c->out[1]->data, s.outer, s.n, s.inner, k,
                              largest, x->dtype, be->stream),
                    "TopK kernel");
}

/* NCHW (or any N, C, spatial...): the mean of each (n, c) plane; NHWC when the plan keeps X
 * channels-last (Y, N x C x 1 x 1, is the same in both layouts). */
static graft_status k_global_average_pool(cuda_backend *be, const op_call *c, void **state,
                                          bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    *handled = x->ndim >= 3 && is_float_dt(x->dtype);
    if (!*handled) return GRAFT_OK;
    axis_split s = {x->dims[0] * x->dims[1], dims_numel(x->ndim - 2, x->dims + 2), 1};
    if (cuda_in_nhwc(be, c, 0)) /* channels-last: (N, H*W, C), the mean over the middle */
        s = (axis_split){x->dims[0], dims_numel(x->ndim - 2, x->dims + 2), x->dims[1]};
    TRY(op_check_output(c, 0, x->dtype, s.outer * s.inner));
    if (s.outer == 0) return GRAFT_OK;
    /* Empty planes average to 0 in the reference (not NaN as ReduceMean's do). */
    if (s.n == 0) return zero_tensor(be, c, y);
    return sum_over(be, c, x, y, s, true);
}

/* ---- ArgMax, CumSum ----------------------------------------------------------------------- */

static graft_status k_argmax(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    *handled = is_numeric_dt(x->dtype);
    if (!*handled) return GRAFT_OK;
    int axis;
    TRY(op_axis(c->node, attr_i(c->node, "axis", 0), x->ndim, &axis, c->err));
    bool last = attr_i(c->node, "select_last_index", 0) != 0;
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, true);
    TRY(op_check_output(c, 0, GRAFT_DTYPE_I64, s.outer * s.inner));
    if (s.outer * s.inner == 0) return GRAFT_OK;
    if (s.n == 0)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "cannot take ArgMax over an empty axis");
    return launched(
        c, cuda_argmax(x->data, c->out[0]->data, s.outer, s.n, s.inner, last, x->dtype, be->stream),
        "argmax kernel");
}

static graft_status k_cumsum(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    const tensor *x = c->in[0];
    int64_t axis_value;
    int axis;
    /* The axis input is on the host (op_input_on_host). */
    if (c->n_in < 2 || !c->in[1] || op_read_ints(c->in[1], &axis_value, 1) != 1)
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "axis must be a scalar int32 or int64");
    TRY(op_axis(c->node, axis_value, x->ndim, &axis, c->err));
    *handled = is_numeric_dt(x->dtype);
    if (!*handled) return GRAFT_OK;
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    bool exclusive = attr_i(c->node, "exclusive", 0) != 0;
    bool reverse = attr_i(c->node, "reverse", 0) != 0;
    axis_split s = axis_split_dims(x->ndim, x->dims, axis, true);
    if (s.outer == 0 || s.n == 0 || s.inner == 0) return GRAFT_OK;
    return launched(c,
                    cuda_cumsum(x->data, c->out[0]->data, s.outer, s.n, s.inner, exclusive, reverse,
                                x->dtype, be->stream),
                    "cumulative sum kernel");
}

/* ---- BatchNormalization ------------------------------------------------------------------- */

/* Inference form only: batch statistics (training_mode, or extra outputs before opset 14) and
 * dtypes without a kernel go to the CPU, which reports what it does not support. */
static bool bn_covered(const op_call *c) {
    const tensor *x = c->in[0];
    if (c->n_in < 5 || x->ndim < 2 || !is_float_dt(x->dtype)) return false;
    if (c->node->opset >= 14 && attr_i(c->node, "training_mode", 0) != 0) return false;
    for (int i = 1; i < 5; i++) {
        const tensor *p = c->in[i];
        if (!p || !(is_float_dt(p->dtype) || p->dtype == GRAFT_DTYPE_F64)) return false;
    }
    /* Outputs 1 and 2 hand back the running mean and variance unchanged (opset 14+). */
    for (int o = 1; o < c->n_out; o++) {
        const tensor *out = c->out[o];
        if (!out) continue;
        if (c->node->opset < 14 || o > 2) return false;
        const tensor *src = c->in[o + 2];
        if (out->dtype != src->dtype || tensor_numel(out) != tensor_numel(src)) return false;
    }
    return true;
}

/* Fold the parameters per group into f32 (scale, shift), then apply them. */
static graft_status bn_fold_apply(cuda_backend *be, const op_call *c, int64_t groups, int64_t run) {
    const tensor *x = c->in[0];
    graft_dtype pdt[4];
    for (int i = 0; i < 4; i++) pdt[i] = c->in[i + 1]->dtype;
    float *folded = NULL;
    TRY(cuda_malloc(be, (size_t)groups * 2 * sizeof(float), (void **)&folded, c->err));
    double eps = attr_f(c->node, "epsilon", 1e-5f);
    cudaError_t err =
        cuda_batchnorm_fold(c->in[1]->data, c->in[2]->data, c->in[3]->data, c->in[4]->data, pdt,
                            groups, eps, folded, folded + groups, be->stream);
    if (err == cudaSuccess)
        err = cuda_batchnorm_apply(x->data, c->out[0]->data, folded, folded + groups,
                                   tensor_numel(x), groups, run, x->dtype, be->stream);
    cuda_free(be, folded);
    return launched(c, err, "batch normalization kernel");
}

static graft_status k_batchnorm(cuda_backend *be, const op_call *c, void **state, bool *handled) {
    (void)state;
    *handled = bn_covered(c);
    if (!*handled) return GRAFT_OK;
    const tensor *x = c->in[0];
    int64_t ch = x->dims[1], inner = dims_numel(x->ndim - 2, x->dims + 2);
    /* Per-activation parameters (spatial=0, opsets 7 and 8) have one value per (c, position). */
    bool per_activation = tensor_numel(c->in[1]) != ch;
    int64_t groups = per_activation ? ch * inner : ch, run = per_activation ? 1 : inner;
    for (int i = 1; i < 5; i++)
        if (tensor_numel(c->in[i]) != groups)
            return op_error(c->node, c->err, GRAFT_E_SHAPE,
                            "input %d has %lld values, expected %lld", i,
                            (long long)tensor_numel(c->in[i]), (long long)groups);
    TRY(op_check_output(c, 0, x->dtype, tensor_numel(x)));
    if (tensor_numel(x) > 0 && groups > 0) TRY(bn_fold_apply(be, c, groups, run));
    for (int o = 1; o < c->n_out && o < 3; o++)
        if (c->out[o]) TRY(copy_tensor(be, c, c->out[o], c->in[o + 2]));
    return GRAFT_OK;
}

const cuda_kernel cuda_reduce_kernels[] = {
    {"Softmax", k_softmax, NULL},
    {"LogSoftmax", k_log_softmax, NULL},
    {"LayerNormalization", k_layernorm, NULL},
    {"ReduceMean", k_reduce, NULL},
    {"ReduceSum", k_reduce, NULL},
    {"ReduceMax", k_reduce, NULL},
    {"ReduceMin", k_reduce, NULL},
    {"ReduceProd", k_reduce, NULL},
    {"ReduceL1", k_reduce, NULL},
    {"ReduceL2", k_reduce, NULL},
    {"ReduceSumSquare", k_reduce, NULL},
    {"ReduceLogSum", k_reduce, NULL},
    {"ReduceLogSumExp", k_reduce, NULL},
    {"TopK", k_topk, NULL},
    {"ArgMax", k_argmax, NULL},
    {"CumSum", k_cumsum, NULL},
    {"BatchNormalization", k_batchnorm, NULL},
    {"GlobalAveragePool", k_global_average_pool, NULL},
    {NULL, NULL, NULL},
};

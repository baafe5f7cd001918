/* grad_rules.c: the backward-rule registry, the helpers the rules share, and the elementwise
 * rules (Add with broadcasting, Relu, Gelu, Tanh, Sigmoid, HardSigmoid, HardSwish, Elu,
 * Softplus, PRelu, Dropout, Cast). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "grad_util.h"

/* ---- helpers -------------------------------------------------------------------------------- */

const tensor *gr_dout(const grad_call *c, int i) {
    return c->dout && i < c->n_out ? c->dout[i] : NULL;
}

tensor *gr_din(const grad_call *c, int i) {
    return c->din && i < c->n_in ? c->din[i] : NULL;
}

graft_status gr_oom(const grad_call *c) {
    return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "out of memory in the backward pass");
}

static graft_status check_one(const grad_call *c, const tensor *t, const char *what, int i,
                              graft_dtype *dt) {
    if (!t) return GRAFT_OK;
    if (t->dtype != GRAFT_DTYPE_F32 && t->dtype != GRAFT_DTYPE_F64)
        return op_error(c->node, c->err, GRAFT_E_DTYPE,
                        "backward: %s %d has dtype %s; the rules take f32 or f64", what, i,
                        graft_dtype_name(t->dtype));
    if (*dt == GRAFT_DTYPE_UNDEFINED) *dt = t->dtype;
    if (t->dtype != *dt)
        return op_error(c->node, c->err, GRAFT_E_DTYPE,
                        "backward: %s %d is %s, other tensors are %s", what, i,
                        graft_dtype_name(t->dtype), graft_dtype_name(*dt));
    if (!t->data && tensor_numel(t) > 0)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "backward: %s %d has no data",
                        what, i);
    return GRAFT_OK;
}

static graft_status check_same_shape(const grad_call *c, const tensor *g, const tensor *v,
                                     const char *what, int i) {
    if (!g || !v) return GRAFT_OK; /* a missing forward tensor is caught where it is needed */
    if (!shapes_equal(g->ndim, g->dims, v->ndim, v->dims)) {
        char a[128], b[128];
        return op_error(c->node, c->err, GRAFT_E_SHAPE, "backward: %s %d has shape %s, want %s",
                        what, i, shape_str(a, sizeof a, g->ndim, g->dims),
                        shape_str(b, sizeof b, v->ndim, v->dims));
    }
    return GRAFT_OK;
}

graft_status gr_check(const grad_call *c, int need_in, int need_out) {
    if (c->n_in < need_in || c->n_out < need_out)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "backward: needs %d inputs and %d outputs, got %d and %d", need_in,
                        need_out, c->n_in, c->n_out);
    for (int i = 0; i < need_in; i++)
        if (!c->in[i])
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "backward: forward input %d is missing", i);
    for (int i = 0; i < need_out; i++)
        if (!c->out || !c->out[i])
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "backward: forward output %d is missing", i);
    graft_dtype dt = GRAFT_DTYPE_UNDEFINED;
    TRY(check_one(c, c->in[0], "input", 0, &dt));
    if (need_out > 0) TRY(check_one(c, c->out[0], "output", 0, &dt));
    for (int i = 0; i < c->n_out; i++) {
        TRY(check_one(c, gr_dout(c, i), "output gradient", i, &dt));
        TRY(check_same_shape(c, gr_dout(c, i), c->out ? c->out[i] : NULL, "output gradient", i));
    }
    for (int i = 0; i < c->n_in; i++) {
        TRY(check_one(c, gr_din(c, i), "input gradient", i, &dt));
        TRY(check_same_shape(c, gr_din(c, i), c->in[i], "input gradient", i));
    }
    return GRAFT_OK;
}

double *gr_zeros(int64_t n) {
    return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

double *gr_load(const tensor *t) {
    int64_t n = tensor_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = gr_get(t, i);
    return v;
}

double *gr_load_dout(const grad_call *c, int i, int64_t n) {
    const tensor *g = gr_dout(c, i);
    return g ? gr_load(g) : gr_zeros(n);
}

void gr_store(tensor *t, const double *v) {
    int64_t n = tensor_numel(t);
    for (int64_t i = 0; i < n; i++) gr_set(t, i, v[i]);
}

bool gr_bcast_map(int64_t *map, int ndim, const int64_t *dims, int sndim, const int64_t *sdims) {
    if (sndim > ndim) return false;
    int64_t sstr[GRAFT_MAX_DIMS], eff[GRAFT_MAX_DIMS], idx[GRAFT_MAX_DIMS] = {0};
    dims_strides(sndim, sdims, sstr);
    for (int d = 0; d < ndim; d++) {
        int sd = d - (ndim - sndim);
        if (sd < 0) {
            eff[d] = 0;
        } else if (sdims[sd] == dims[d]) {
            eff[d] = sdims[sd] == 1 ? 0 : sstr[sd];
        } else if (sdims[sd] == 1) {
            eff[d] = 0;
        } else {
            return false;
        }
    }
    int64_t n = dims_numel(ndim, dims), at = 0;
    for (int64_t i = 0; i < n; i++) {
        map[i] = at;
        for (int d = ndim - 1; d >= 0; d--) { /* odometer step */
            at += eff[d];
            if (++idx[d] < dims[d]) break;
            at -= eff[d] * dims[d];
            idx[d] = 0;
        }
    }
    return true;
}

graft_status gr_reduce_to(const grad_call *c, tensor *dst, const double *g, int ndim,
                          const int64_t *dims, double scale) {
    int64_t n = dims_numel(ndim, dims), ns = tensor_numel(dst);
    int64_t *map = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    double *acc = gr_zeros(ns);
    if (!map || !acc) {
        free(map);
        free(acc);
        return gr_oom(c);
    }
    if (!gr_bcast_map(map, ndim, dims, dst->ndim, dst->dims)) {
        free(map);
        free(acc);
        char a[128], b[128];
        return op_error(
            c->node, c->err, GRAFT_E_SHAPE, "backward: shape %s does not broadcast to %s",
            shape_str(a, sizeof a, dst->ndim, dst->dims), shape_str(b, sizeof b, ndim, dims));
    }
    for (int64_t i = 0; i < n; i++) acc[map[i]] += g[i];
    for (int64_t i = 0; i < ns; i++) gr_set(dst, i, scale * acc[i]);
    free(map);
    free(acc);
    return GRAFT_OK;
}

/* ---- Add ------------------------------------------------------------------------------------ */

graft_status grad_Add(const grad_call *c) {
    TRY(gr_check(c, 2, 1));
    const tensor *dy = gr_dout(c, 0), *y = c->out[0];
    double *g = dy ? gr_load(dy) : gr_zeros(tensor_numel(y));
    if (!g) return gr_oom(c);
    graft_status st = GRAFT_OK;
    for (int i = 0; i < 2 && st == GRAFT_OK; i++)
        if (gr_din(c, i)) st = gr_reduce_to(c, gr_din(c, i), g, y->ndim, y->dims, 1.0);
    free(g);
    return st;
}

/* ---- unary activations ---------------------------------------------------------------------- */

typedef enum unary_kind {
    UK_RELU,
    UK_GELU,
    UK_GELU_TANH,
    UK_TANH,
    UK_SIGMOID,
    UK_HARD_SIGMOID,
    UK_HARD_SWISH,
    UK_ELU,
    UK_SOFTPLUS
} unary_kind;

static double sigmoid(double x) {
    return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

/* dy/dx of the activation at x; alpha, beta: HardSigmoid's, Elu's alpha. At the kinks the
 * slopes are PyTorch's: HardSwish takes x / 3 + 1/2 on [-3, 3], Elu alpha e^x for x <= 0, and
 * HardSigmoid 0 where it saturates exactly. */
static double unary_slope(unary_kind k, double x, double alpha, double beta) {
    switch (k) {
    case UK_HARD_SIGMOID: {
        double t = alpha * x + beta;
        return t > 0.0 && t < 1.0 ? alpha : 0.0;
    }
    case UK_HARD_SWISH:
        return x < -3.0 ? 0.0 : x > 3.0 ? 1.0 : x / 3.0 + 0.5;
    case UK_ELU:
        return x > 0.0 ? 1.0 : alpha * exp(x);
    case UK_SOFTPLUS:
        return sigmoid(x);
    case UK_RELU:
        return x > 0.0 ? 1.0 : 0.0;
    case UK_GELU: {
        double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
        double pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        return cdf + x * pdf;
    }
    case UK_GELU_TANH: {
        const double k0 = sqrt(2.0 / M_PI), k1 = 0.044715;
        double t = tanh(k0 * (x + k1 * x * x * x));
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k0 * (1.0 + 3.0 * k1 * x * x);
    }
    case UK_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case UK_SIGMOID: {
        double s = sigmoid(x);
        return s * (1.0 - s);
    }
    }
    return 0.0;
}

static graft_status run_unary_with(const grad_call *c, unary_kind k, double alpha, double beta) {
    TRY(gr_check(c, 1, 0));
    tensor *dx = gr_din(c, 0);
    if (!dx) return GRAFT_OK;
    const tensor *x = c->in[0], *dy = gr_dout(c, 0);
    if (dy && tensor_numel(dy) != tensor_numel(x))
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: output gradient and input differ in size");
    int64_t n = tensor_numel(x);
    for (int64_t i = 0; i < n; i++)
        gr_set(dx, i, dy ? gr_get(dy, i) * unary_slope(k, gr_get(x, i), alpha, beta) : 0.0);
    return GRAFT_OK;
}

static graft_status run_unary(const grad_call *c, unary_kind k) {
    return run_unary_with(c, k, 0.0, 0.0);
}

graft_status grad_Relu(const grad_call *c) {
    return run_unary(c, UK_RELU);
}

graft_status grad_Gelu(const grad_call *c) {
    const char *approx = attr_s(c->node, "approximate", "none");
    if (strcmp(approx, "tanh") != 0 && strcmp(approx, "none") != 0)
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "approximate = '%s'; expected 'none' or 'tanh'", approx);
    return run_unary(c, strcmp(approx, "tanh") == 0 ? UK_GELU_TANH : UK_GELU);
}

graft_status grad_Tanh(const grad_call *c) {
    return run_unary(c, UK_TANH);
}

graft_status grad_Sigmoid(const grad_call *c) {
    return run_unary(c, UK_SIGMOID);
}

graft_status grad_HardSigmoid(const grad_call *c) {
    return run_unary_with(c, UK_HARD_SIGMOID, attr_f(c->node, "alpha", 0.2f),
                          attr_f(c->node, "beta", 0.5f));
}

graft_status grad_HardSwish(const grad_call *c) {
    return run_unary(c, UK_HARD_SWISH);
}

graft_status grad_Elu(const grad_call *c) {
    return run_unary_with(c, UK_ELU, attr_f(c->node, "alpha", 1.0f), 0.0);
}

graft_status grad_Softplus(const grad_call *c) {
    return run_unary(c, UK_SOFTPLUS);
}

/* ---- PRelu ---------------------------------------------------------------------------------- */

/* y = x < 0 ? slope x : x with the slope broadcast to X: dX = dY (x < 0 ? slope : 1), and
 * dSlope sums dY x over the elements where x < 0 that share each slope entry. */
graft_status grad_PRelu(const grad_call *c) {
    TRY(gr_check(c, 2, 0));
    const tensor *x = c->in[0], *slope = c->in[1], *dy = gr_dout(c, 0);
    tensor *dx = gr_din(c, 0), *ds = gr_din(c, 1);
    int64_t n = tensor_numel(x);
    int64_t *map = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    double *g = gr_zeros(n);
    if (!map || !g) {
        free(map);
        free(g);
        return gr_oom(c);
    }
    if (!gr_bcast_map(map, x->ndim, x->dims, slope->ndim, slope->dims)) {
        free(map);
        free(g);
        char a[128], b[128];
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: the slope's shape %s does not broadcast to X's %s",
                        shape_str(a, sizeof a, slope->ndim, slope->dims),
                        shape_str(b, sizeof b, x->ndim, x->dims));
    }
    for (int64_t i = 0; i < n; i++) {
        double xi = gr_get(x, i), gi = dy ? gr_get(dy, i) : 0.0;
        if (dx) gr_set(dx, i, xi < 0.0 ? gi * gr_get(slope, map[i]) : gi);
        g[i] = xi < 0.0 ? gi * xi : 0.0;
    }
    graft_status st = ds ? gr_reduce_to(c, ds, g, x->ndim, x->dims, 1.0) : GRAFT_OK;
    free(map);
    free(g);
    return st;
}

/* ---- Dropout -------------------------------------------------------------------------------- */

static double mask_get(const tensor *m, int64_t i) {
    if (m->dtype == GRAFT_DTYPE_BOOL) return ((const uint8_t *)m->data)[i] ? 1.0 : 0.0;
    return tensor_get_f64(m, i);
}

graft_status grad_Dropout(const grad_call *c) {
    if (c->n_in < 1 || !c->in[0])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "backward: data is missing");
    tensor *dx = gr_din(c, 0);
    const tensor *x = c->in[0], *dy = gr_dout(c, 0);
    graft_dtype dt = GRAFT_DTYPE_UNDEFINED;
    TRY(check_one(c, x, "input", 0, &dt));
    TRY(check_one(c, dy, "output gradient", 0, &dt));
    TRY(check_one(c, dx, "input gradient", 0, &dt));
    TRY(check_same_shape(c, dx, x, "input gradient", 0));
    TRY(check_same_shape(c, dy, x, "output gradient", 0));
    if (!dx) return GRAFT_OK;
    const tensor *mode = c->n_in > 2 ? c->in[2] : NULL;
    bool training = mode && tensor_numel(mode) >= 1 && tensor_get_f64(mode, 0) != 0.0;
    const tensor *ratio_t = c->n_in > 1 ? c->in[1] : NULL;
    double ratio = ratio_t && tensor_numel(ratio_t) >= 1 ? tensor_get_f64(ratio_t, 0)
                                                         : attr_f(c->node, "ratio", 0.5f);
    const tensor *mask = c->n_out > 1 && c->out ? c->out[1] : NULL;
    int64_t n = tensor_numel(x);
    if (training && ratio != 0.0) {
        if (!mask || tensor_numel(mask) != n || (!mask->data && n > 0))
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                            "backward of a training-mode Dropout needs the forward's mask "
                            "(output 1) with the data's size");
        if (!(ratio >= 0.0 && ratio <= 1.0))
            return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT, "ratio %g is outside [0, 1]",
                            ratio);
    }
    bool scaled = training && ratio != 0.0;
    double scale = scaled && ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0;
    for (int64_t i = 0; i < n; i++) {
        double g = dy ? gr_get(dy, i) : 0.0;
        gr_set(dx, i, scaled ? g * mask_get(mask, i) * scale : g);
    }
    return GRAFT_OK;
}

/* ---- Cast ----------------------------------------------------------------------------------- */

/* The gradient goes back converted to the input's dtype: between float dtypes a Cast is the
 * identity up to rounding, so dX = dY rounded to X's dtype (a bf16/fp16 round trip rounds the
 * gradient the way mixed precision does). Any float dtype, not only f32/f64. */
graft_status grad_Cast(const grad_call *c) {
    if (c->n_in < 1 || !c->in[0] || c->n_out < 1 || !c->out || !c->out[0])
        return op_error(c->node, c->err, GRAFT_E_INVALID_ARGUMENT,
                        "backward: Cast needs its input and output");
    tensor *dx = gr_din(c, 0);
    const tensor *x = c->in[0], *dy = gr_dout(c, 0);
    if (!dx) return GRAFT_OK;
    int64_t n = tensor_numel(x);
    if (!dtype_is_float(dx->dtype) || (dy && !dtype_is_float(dy->dtype)))
        return op_error(c->node, c->err, GRAFT_E_DTYPE,
                        "backward: a Cast's gradient needs float dtypes (got %s to %s)",
                        graft_dtype_name(x->dtype), graft_dtype_name(c->out[0]->dtype));
    if (tensor_numel(dx) != n || (dy && tensor_numel(dy) != n) || (!dx->data && n > 0) ||
        (dy && !dy->data && n > 0))
        return op_error(c->node, c->err, GRAFT_E_SHAPE,
                        "backward: a Cast's gradients need the input's %lld elements",
                        (long long)n);
    for (int64_t i = 0; i < n; i++) tensor_set_f64(dx, i, dy ? tensor_get_f64(dy, i) : 0.0);
    return GRAFT_OK;
}

/* ---- registry ------------------------------------------------------------------------------- */

typedef struct grad_entry {
    const char *op;
    grad_fn fn;
} grad_entry;

static const grad_entry grad_table[] = {
    {"Gemm", grad_Gemm},
    {"MatMul", grad_MatMul},
    {"Add", grad_Add},
    {"Relu", grad_Relu},
    {"Gelu", grad_Gelu},
    {"Tanh", grad_Tanh},
    {"Sigmoid", grad_Sigmoid},
    {"HardSigmoid", grad_HardSigmoid},
    {"HardSwish", grad_HardSwish},
    {"Elu", grad_Elu},
    {"Softplus", grad_Softplus},
    {"PRelu", grad_PRelu},
    {"Dropout", grad_Dropout},
    {"Cast", grad_Cast},
    {"LayerNormalization", grad_LayerNormalization},
    {"Softmax", grad_Softmax},
    {"Conv", grad_Conv},
    {"BatchNormalization", grad_BatchNormalization},
    {"MaxPool", grad_MaxPool},
    {"AveragePool", grad_AveragePool},
    {"GlobalAveragePool", grad_GlobalAveragePool},
    {"GlobalMaxPool", grad_GlobalMaxPool},
    {"Mul", grad_Mul},
    {"Sub", grad_Sub},
    {"Div", grad_Div},
    {"Pow", grad_Pow},
    {"Sqrt", grad_Sqrt},
    {"Erf", grad_Erf},
    {"Neg", grad_Neg},
    {"Exp", grad_Exp},
    {"Clip", grad_Clip},
    {"ReduceMean", grad_ReduceMean},
    {"ReduceSum", grad_ReduceSum},
    {"Identity", grad_Identity},
    {"Flatten", grad_Flatten},
    {"Reshape", grad_Reshape},
    {"Squeeze", grad_Squeeze},
    {"Unsqueeze", grad_Unsqueeze},
    {"Transpose", grad_Transpose},
    {"Slice", grad_Slice},
    {"Pad", grad_Pad},
    {"Concat", grad_Concat},
    {"Gather", grad_Gather},
    {"Expand", grad_Expand},
    {"Split", grad_Split},
    {"Where", grad_Where},
};

grad_fn grad_find(const char *op_type) {
    if (!op_type) return NULL;
    for (size_t i = 0; i < sizeof grad_table / sizeof grad_table[0]; i++)
        if (strcmp(grad_table[i].op, op_type) == 0) return grad_table[i].fn;
    return NULL;
}

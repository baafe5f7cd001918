/* cuda_backward_eltwise.c: GPU backward rules of the activations, the broadcasting binary ops,
 * Where, Clip, Softmax and LayerNormalization, and the helpers the rule files share. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../ops/broadcast_plan.h"
#include "../ops/reduce.h"
#include "backward_eltwise_launch.h"

/* ---- shared helpers ------------------------------------------------------------------------- */

graft_status cuda_bwd_launched(const cuda_bwd *b, cudaError_t err, const char *what) {
    if (err == cudaSuccess) return GRAFT_OK;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
    return cuda_bwd_fail(
        b, err == cudaErrorMemoryAllocation ? GRAFT_E_OUT_OF_MEMORY : GRAFT_E_BACKEND, msg);
}

graft_status cuda_bwd_copy(const cuda_bwd *b, float *dst, const float *src, int64_t n) {
    if (n <= 0 || dst == src) return GRAFT_OK;
    return cuda_bwd_launched(b,
                             cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float),
                                             cudaMemcpyDeviceToDevice, b->be->stream),
                             "copying a gradient");
}

graft_status cuda_bwd_zero(const cuda_bwd *b, tensor *dst) {
    int64_t bytes = tensor_nbytes(dst);
    if (bytes <= 0) return GRAFT_OK;
    return cuda_bwd_launched(b, cudaMemsetAsync(dst->data, 0, (size_t)bytes, b->be->stream),
                             "zeroing a gradient");
}

ir_node cuda_bwd_fwd_node(const cuda_bwd *b) {
    const ir_node *n = b->call->node;
    ir_node fwd = *n;
    fwd.op_type = (char *)b->op;
    fwd.domain = (char *)"";
    fwd.opset = b->fwd_opset;
    fwd.op = op_find(b->op);
    fwd.n_in = b->n_in;
    fwd.n_out = b->n_out;
    fwd.inputs = n->inputs;
    fwd.outputs = n->inputs ? n->inputs + b->n_in : NULL;
    return fwd;
}

bool cuda_bwd_host_readable(const tensor *t) {
    if (!t || !t->data) return false;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, t->data) != cudaSuccess) {
        cudaGetLastError(); /* not a pointer CUDA knows: leave it to the CPU */
        return false;
    }
    return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost ||
           a.type == cudaMemoryTypeManaged;
}

graft_status cuda_bwd_reduce_to(const cuda_bwd *b, const float *src, int ndim, const int64_t *dims,
                                tensor *dst, float scale, bool *handled) {
    bw_reduce_plan p;
    if (!bw_reduce_plan_make(ndim, dims, dst->ndim, dst->dims, scale,
                             b->be->prop.multiProcessorCount, &p) ||
        p.n_dst != tensor_numel(dst)) {
        *handled = false;
        return GRAFT_OK;
    }
    size_t bytes = bw_reduce_scratch_bytes(&p);
    void *scratch = NULL;
    if (bytes) TRY(cuda_malloc(b->be, bytes, &scratch, b->call->err));
    cudaError_t err = bw_reduce_to(src, dst->data, scratch, &p, b->be->stream);
    if (scratch) cuda_free(b->be, scratch);
    return cuda_bwd_launched(b, err, "the broadcast-sum kernel");
}

/* dout[i], or NULL (zero) when absent. */
static const tensor *dout_at(const cuda_bwd *b, int i) {
    return i < b->n_out ? b->dout[i] : NULL;
}

static tensor *din_at(const cuda_bwd *b, int i) {
    return i < b->n_in ? b->din[i] : NULL;
}

/* No gradient flows in: the wanted gradients are zeros. */
static graft_status zero_wanted(const cuda_bwd *b) {
    for (int i = 0; i < b->n_in; i++)
        if (b->din[i]) TRY(cuda_bwd_zero(b, b->din[i]));
    return GRAFT_OK;
}

/* ---- one-input activations ------------------------------------------------------------------ */

static const struct {
    const char *op;
    bw_unary_op kind;
} unary_ops[] = {
    {"Relu", BW_RELU},
    {"Tanh", BW_TANH},
    {"Sigmoid", BW_SIGMOID},
    {"HardSwish", BW_HARD_SWISH},
    {"Softplus", BW_SOFTPLUS},
    {"Sqrt", BW_SQRT},
    {"Erf", BW_ERF},
    {"Neg", BW_NEG},
    {"Exp", BW_EXP},
    {"Gelu", BW_GELU},
    {"HardSigmoid", BW_HARD_SIGMOID},
    {"Elu", BW_ELU},
};

/* dX = dY * f'(X); *handled stays false for an op not in unary_ops. */
static graft_status run_unary(const cuda_bwd *b, bool *handled) {
    int found = -1;
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        if (!strcmp(b->op, unary_ops[i].op)) found = (int)i;
    if (found < 0 || b->n_in < 1 || !cuda_bwd_f32(b->in[0])) return GRAFT_OK;
    const ir_node *n = b->call->node;
    bw_unary_op kind = unary_ops[found].kind;
    double alpha = 0.0, beta = 0.0;
    if (kind == BW_GELU) {
        const char *approx = attr_s(n, "approximate", "none");
        if (strcmp(approx, "none") != 0 && strcmp(approx, "tanh") != 0) return GRAFT_OK;
        if (!strcmp(approx, "tanh")) kind = BW_GELU_TANH;
    } else if (kind == BW_HARD_SIGMOID) {
        alpha = attr_f(n, "alpha", 0.2f);
        beta = attr_f(n, "beta", 0.5f);
    } else if (kind == BW_ELU) {
        alpha = attr_f(n, "alpha", 1.0f);
    }
    const tensor *x = b->in[0], *dy = dout_at(b, 0);
    tensor *dx = b->din[0];
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    if (tensor_numel(dy) != tensor_numel(x)) {
        *handled = false;
        return GRAFT_OK;
    }
    return cuda_bwd_launched(b,
                             bw_unary(kind, x->data, dy->data, dx->data, tensor_numel(x), alpha,
                                      beta, NULL, b->be->stream),
                             "the activation gradient kernel");
}

/* ---- Clip ----------------------------------------------------------------------------------- */

/* Bound input i (opset 11+): absent: the default; else one f32 value, read on the host when it
 * lives there and by the kernel otherwise. False for any other form. */
static bool clip_bound(const cuda_bwd *b, int i, float dflt, const float **dev, float *v) {
    const tensor *t = i < b->n_in ? b->in[i] : NULL;
    *dev = NULL;
    *v = dflt;
    if (!t) return true;
    if (!cuda_bwd_f32(t) || tensor_numel(t) != 1) return false;
    if (cuda_bwd_host_readable(t))
        *v = ((const float *)t->data)[0];
    else
        *dev = t->data;
    return true;
}

static graft_status run_clip(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *dy = dout_at(b, 0);
    tensor *dx = b->din[0];
    if (!cuda_bwd_f32(x) || din_at(b, 1) || din_at(b, 2))
        return GRAFT_OK; /* bounds' sums: the CPU */
    bw_clip_bounds cb = {NULL, NULL, -INFINITY, INFINITY};
    if (b->fwd_opset < 11) {
        cb.lo = attr_f(b->call->node, "min", -INFINITY);
        cb.hi = attr_f(b->call->node, "max", INFINITY);
    } else if (!clip_bound(b, 1, -INFINITY, &cb.lo_dev, &cb.lo) ||
               !clip_bound(b, 2, INFINITY, &cb.hi_dev, &cb.hi)) {
        return GRAFT_OK;
    }
    if (dy && tensor_numel(dy) != tensor_numel(x)) return GRAFT_OK;
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    return cuda_bwd_launched(b,
                             bw_unary(BW_CLIP, x->data, dy->data, dx->data, tensor_numel(x), 0.0,
                                      0.0, &cb, b->be->stream),
                             "the Clip gradient kernel");
}

/* ---- binary ops with broadcasting ----------------------------------------------------------- */

/* The shared broadcast plan of ins (n_in of them) to y, as the kernels take it; false when they
 * do not broadcast (the CPU reference reports it). */
static bool bcast_of(const cuda_bwd *b, const tensor *const *ins, int n_in, const tensor *y,
                     bw_bcast *p) {
    bcast_plan bp;
    graft_err scratch = {0};
    ir_node fwd = cuda_bwd_fwd_node(b);
    if (n_in > 2 || bcast_plan_make(&fwd, &scratch, ins, n_in, y, &bp) != GRAFT_OK) return false;
    memset(p, 0, sizeof *p);
    p->ndim = bp.ndim;
    p->n = bp.numel;
    for (int d = 0; d < bp.ndim; d++) {
        p->dims[d] = bp.dims[d];
        for (int k = 0; k < n_in; k++) p->strides[k][d] = bp.strides[k][d];
    }
    return true;
}

/* din[i] from g (y's full shape, n elements): summed to in[i]'s shape, or g itself when it is
 * din[i] (no broadcast). */
static graft_status settle(const cuda_bwd *b, int i, const float *g, const tensor *y, float scale,
                           bool *handled) {
    tensor *d = b->din[i];
    if (!d) return GRAFT_OK;
    if ((const void *)g == d->data) return GRAFT_OK;
    return cuda_bwd_reduce_to(b, g, y->ndim, y->dims, d, scale, handled);
}

/* Where din[i] goes in y's full shape: din[i] itself when it has y's size, else a temporary. */
static graft_status full_buffer(const cuda_bwd *b, int i, int64_t n, float **buf, bool *temp) {
    tensor *d = i < b->n_in ? b->din[i] : NULL;
    *buf = NULL;
    *temp = false;
    if (!d) return GRAFT_OK;
    if (tensor_numel(d) == n) {
        *buf = d->data;
        return GRAFT_OK;
    }
    *temp = true;
    return cuda_malloc(b->be, (size_t)(n > 0 ? n : 1) * sizeof(float), (void **)buf, b->call->err);
}

static graft_status run_add_sub(const cuda_bwd *b, float sign_b, bool *handled) {
    const tensor *y = b->n_out > 0 ? b->out[0] : NULL, *dy = dout_at(b, 0);
    bw_bcast plan;
    if (!cuda_bwd_f32(b->in[0]) || !cuda_bwd_f32(b->in[1]) || !cuda_bwd_f32(y) ||
        !bcast_of(b, b->in, 2, y, &plan))
        return GRAFT_OK;
    *handled = true;
    if (!dy) return zero_wanted(b);
    for (int i = 0; i < 2 && *handled; i++) {
        tensor *d = b->din[i];
        float scale = i == 0 ? 1.0f : sign_b;
        bw_view same = {.ndim = 1, .dims = {plan.n}, .strides = {1}};
        if (d && scale == 1.0f && tensor_numel(d) == plan.n)
            TRY(cuda_bwd_copy(b, d->data, dy->data, plan.n));
        else if (d && tensor_numel(d) == plan.n)
            TRY(cuda_bwd_launched(b, bw_gather(dy->data, d->data, &same, scale, b->be->stream),
                                  "the negated copy kernel"));
        else if (d)
            TRY(cuda_bwd_reduce_to(b, dy->data, y->ndim, y->dims, d, scale, handled));
    }
    return GRAFT_OK;
}

/* Mul, Div, Pow, PRelu: the partials in y's full shape, then summed to each input's shape. */
static graft_status run_binary(const cuda_bwd *b, bw_binary_op op, bool *handled) {
    const tensor *a = b->in[0], *e = b->in[1], *dy = dout_at(b, 0);
    const tensor *y = b->n_out > 0 ? b->out[0] : NULL;
    graft_dtype e_dt = e ? e->dtype : GRAFT_DTYPE_UNDEFINED;
    bool e_ok = e_dt == GRAFT_DTYPE_F32 ||
                (op == BW_POW && !b->din[1] &&
                 (e_dt == GRAFT_DTYPE_F64 || e_dt == GRAFT_DTYPE_I32 || e_dt == GRAFT_DTYPE_I64));
    bw_bcast plan;
    if (!cuda_bwd_f32(a) || !e_ok || !cuda_bwd_f32(y) || !bcast_of(b, b->in, 2, y, &plan))
        return GRAFT_OK;
    *handled = true;
    if (!dy) return zero_wanted(b);
    float *ga = NULL, *gb = NULL;
    bool temp_a = false, temp_b = false;
    graft_status st = full_buffer(b, 0, plan.n, &ga, &temp_a);
    if (st == GRAFT_OK) st = full_buffer(b, 1, plan.n, &gb, &temp_b);
    if (st == GRAFT_OK)
        st = cuda_bwd_launched(
            b, bw_binary(op, a->data, e->data, e_dt, dy->data, ga, gb, &plan, b->be->stream),
            "the binary gradient kernel");
    if (st == GRAFT_OK && ga) st = settle(b, 0, ga, y, 1.0f, handled);
    if (st == GRAFT_OK && gb && *handled) st = settle(b, 1, gb, y, 1.0f, handled);
    if (temp_a) cuda_free(b->be, ga);
    if (temp_b) cuda_free(b->be, gb);
    return st;
}

/* ---- Where: dY to X where the condition holds, to Y elsewhere; none to the condition --------- */

static graft_status run_where(const cuda_bwd *b, bool *handled) {
    const tensor *cond = b->in[0], *y = b->n_out > 0 ? b->out[0] : NULL, *dy = dout_at(b, 0);
    bw_bcast plan;
    if (b->n_in < 3 || !cond || cond->dtype != GRAFT_DTYPE_BOOL || b->din[0] ||
        !cuda_bwd_f32(b->in[1]) || !cuda_bwd_f32(b->in[2]) || !cuda_bwd_f32(y) ||
        !bcast_of(b, b->in, 1, y, &plan))
        return GRAFT_OK;
    *handled = true;
    if (!dy) return zero_wanted(b);
    float *gx = NULL, *gy = NULL;
    bool temp_x = false, temp_y = false;
    graft_status st = full_buffer(b, 1, plan.n, &gx, &temp_x);
    if (st == GRAFT_OK) st = full_buffer(b, 2, plan.n, &gy, &temp_y);
    if (st == GRAFT_OK)
        st = cuda_bwd_launched(b, bw_where(cond->data, dy->data, gx, gy, &plan, b->be->stream),
                               "the Where gradient kernel");
    if (st == GRAFT_OK && gx) st = settle(b, 1, gx, y, 1.0f, handled);
    if (st == GRAFT_OK && gy && *handled) st = settle(b, 2, gy, y, 1.0f, handled);
    if (temp_x) cuda_free(b->be, gx);
    if (temp_y) cuda_free(b->be, gy);
    return st;
}

/* ---- Softmax: dX = Y * (dY - sum(dY * Y)) along the axis ------------------------------------ */

static graft_status run_softmax(const cuda_bwd *b, bool *handled) {
    const tensor *y = b->n_out > 0 ? b->out[0] : NULL, *dy = dout_at(b, 0);
    tensor *dx = b->din[0];
    if (!cuda_bwd_f32(y)) return GRAFT_OK;
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    int axis;
    bool single;
    if (softmax_axis(&fwd, y->ndim, &axis, &single, &scratch) != GRAFT_OK) return GRAFT_OK;
    axis_split sp = axis_split_dims(y->ndim, y->dims, axis, single);
    *handled = true;
    if (!dx) return GRAFT_OK;
    if (!dy) return cuda_bwd_zero(b, dx);
    return cuda_bwd_launched(
        b, bw_softmax(y->data, dy->data, dx->data, sp.outer, sp.n, sp.inner, b->be->stream),
        "the Softmax gradient kernel");
}

/* ---- LayerNormalization --------------------------------------------------------------------- */

/* Whether t holds exactly the normalised shape's elements (m trailing dims nd, up to 1s). */
static bool per_element(const tensor *t, int m, const int64_t *nd, int64_t n) {
    bw_reduce_plan p;
    return cuda_bwd_f32(t) && tensor_numel(t) == n &&
           bw_reduce_plan_make(m, nd, t->ndim, t->dims, 1.0f, 1, &p);
}

/* dX, dScale (the sum over rows of dY * xhat) and dB (the sum over rows of dY). Scale and B of
 * fewer elements than the normalised shape (broadcast within it) go to the CPU. */
static graft_status run_layernorm(const cuda_bwd *b, bool *handled) {
    const tensor *x = b->in[0], *s = b->n_in > 1 ? b->in[1] : NULL, *dy = dout_at(b, 0);
    const tensor *bias = b->n_in > 2 ? b->in[2] : NULL;
    tensor *dx = b->din[0], *ds = din_at(b, 1), *dbias = bias ? din_at(b, 2) : NULL;
    if (!cuda_bwd_f32(x) || !s) return GRAFT_OK;
    ir_node fwd = cuda_bwd_fwd_node(b);
    graft_err scratch = {0};
    int axis;
    if (op_axis(&fwd, attr_i(&fwd, "axis", -1), x->ndim, &axis, &scratch) != GRAFT_OK)
        return GRAFT_OK;
    axis_split sp = axis_split_dims(x->ndim, x->dims, axis, false);
    int m = x->ndim - axis;
    if (!per_element(s, m, x->dims + axis, sp.n) ||
        (bias && !per_element(bias, m, x->dims + axis, sp.n)))
        return GRAFT_OK;
    *handled = true;
    if (!dy) return zero_wanted(b);
    double eps = attr_f(&fwd, "epsilon", 1e-5f);
    float *dyxhat = NULL;
    if (ds)
        TRY(cuda_malloc(b->be, (size_t)(tensor_numel(x) > 0 ? tensor_numel(x) : 1) * 4,
                        (void **)&dyxhat, b->call->err));
    graft_status st =
        cuda_bwd_launched(b,
                          bw_layernorm(x->data, dy->data, s->data, sp.outer, sp.n, eps,
                                       dx ? dx->data : NULL, dyxhat, b->be->stream),
                          "the LayerNormalization gradient kernel");
    if (st == GRAFT_OK && ds)
        st = cuda_bwd_reduce_to(b, dyxhat, x->ndim, x->dims, ds, 1.0f, handled);
    if (st == GRAFT_OK && dbias && *handled)
        st = cuda_bwd_reduce_to(b, dy->data, x->ndim, x->dims, dbias, 1.0f, handled);
    if (dyxhat) cuda_free(b->be, dyxhat);
    return st;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

graft_status cuda_bwd_eltwise(const cuda_bwd *b, bool *handled) {
    *handled = false;
    const char *op = b->op;
    if (b->n_in < 1 || !b->in[0] || b->n_out < 1) return GRAFT_OK;
    TRY(run_unary(b, handled));
    if (*handled) return GRAFT_OK;
    bool two = b->n_in >= 2 && b->in[1];
    if (!strcmp(op, "Add") && two) return run_add_sub(b, 1.0f, handled);
    if (!strcmp(op, "Sub") && two) return run_add_sub(b, -1.0f, handled);
    if (!strcmp(op, "Mul") && two) return run_binary(b, BW_MUL, handled);
    if (!strcmp(op, "Div") && two) return run_binary(b, BW_DIV, handled);
    if (!strcmp(op, "Pow") && two) return run_binary(b, BW_POW, handled);
    if (!strcmp(op, "PRelu") && two) return run_binary(b, BW_PRELU, handled);
    if (!strcmp(op, "Where")) return run_where(b, handled);
    if (!strcmp(op, "Clip")) return run_clip(b, handled);
    if (!strcmp(op, "Softmax")) return run_softmax(b, handled);
    if (!strcmp(op, "LayerNormalization")) return run_layernorm(b, handled);
    return cuda_bwd_shape(b, handled);
}

/* dnnl_eltwise.c: the f32 activations that cost compute (Sigmoid, Tanh, Elu, HardSwish, Mish, Gelu,
 * Log, Sqrt) through oneDNN's vectorised eltwise primitive, over the tensor as one flat array (so
 * any layout the plan keeps, input and output alike), and the oneDNN algorithm of every
 * activation a Conv takes as a post-op. Small tensors and other cases run the reference kernels;
 * Relu, Clip and the like stay there (memory-bound, and the reference keeps NaN). */
#include "graft_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/scalar.h"
#include "dnnl_common.h"

/* Below this many elements the primitive's call costs more than the reference loop. */
#define ELTWISE_MIN_ELEMENTS 4096

typedef struct eltwise_state {
    dnnl_node_state base;
    int64_t numel;
    dnnl_alg_kind_t alg;
    float alpha, beta;
    bool usable;
    dnnl_primitive_t prim;
    dnnl_memory_t x, y;
} eltwise_state;

static void eltwise_state_destroy(dnnl_node_state *base) {
    eltwise_state *s = (eltwise_state *)base;
    dnnl_destroy_primitive(&s->prim);
    dnnl_destroy_memory(&s->x);
    dnnl_destroy_memory(&s->y);
    free(s);
}

/* Clip's bounds: attributes before opset 11, optional scalar inputs after. False when a bound
 * is not an f32 scalar (the reference reports it). */
static bool clip_bounds(const op_call *c, float *lo, float *hi) {
    *lo = -INFINITY, *hi = INFINITY;
    if (c->node->opset < 11) {
        *lo = attr_f(c->node, "min", -INFINITY);
        *hi = attr_f(c->node, "max", INFINITY);
        return true;
    }
    for (int k = 1; k <= 2 && k < c->n_in; k++) {
        const tensor *b = c->in[k];
        if (!b) continue;
        if (b->dtype != GRAFT_DTYPE_F32 || tensor_numel(b) != 1 || !b->data) return false;
        *(k == 1 ? lo : hi) = (float)scalar_load_f64(b->data, b->dtype, 0);
    }
    return true;
}

/* oneDNN's algorithm and parameters for the call's op, false when it has none that computes
 * what ONNX says. */
static bool eltwise_alg(const op_call *c, dnnl_alg_kind_t *alg, float *alpha, float *beta) {
    const char *op = c->node->op_type;
    *alpha = 0.0f, *beta = 0.0f;
    if (!strcmp(op, "Relu")) return *alg = dnnl_eltwise_relu, true;
    if (!strcmp(op, "LeakyRelu"))
        return *alg = dnnl_eltwise_relu, *alpha = attr_f(c->node, "alpha", 0.01f), true;
    if (!strcmp(op, "Sigmoid")) return *alg = dnnl_eltwise_logistic, true;
    if (!strcmp(op, "Tanh")) return *alg = dnnl_eltwise_tanh, true;
    if (!strcmp(op, "Elu"))
        return *alg = dnnl_eltwise_elu, *alpha = attr_f(c->node, "alpha", 1.0f), true;
    if (!strcmp(op, "HardSwish")) return *alg = dnnl_eltwise_hardswish, true;
    if (!strcmp(op, "Mish")) return *alg = dnnl_eltwise_mish, true;
    if (!strcmp(op, "Exp")) return *alg = dnnl_eltwise_exp, true;
    if (!strcmp(op, "Log")) return *alg = dnnl_eltwise_log, true;
    if (!strcmp(op, "Sqrt")) return *alg = dnnl_eltwise_sqrt, true;
    if (!strcmp(op, "Abs")) return *alg = dnnl_eltwise_abs, true;
    if (!strcmp(op, "Gelu")) {
        const char *approx = attr_s(c->node, "approximate", "none");
        *alg = !strcmp(approx, "tanh") ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf;
        return true;
    }
    if (!strcmp(op, "Clip")) {
        /* max(lo, min(hi, x)) only when lo <= hi (ONNX gives hi otherwise) */
        if (!clip_bounds(c, alpha, beta) || !(*alpha <= *beta)) return false;
        *alg = dnnl_eltwise_clip_v2;
        return true;
    }
    return false;
}

bool dnnl_eltwise_alg(const op_call *c, int *alg, float *alpha, float *beta) {
    dnnl_alg_kind_t a;
    if (!eltwise_alg(c, &a, alpha, beta)) return false;
    *alg = (int)a;
    return true;
}

graft_status dnnl_eltwise_make(cpu_backend *be, const op_call *c, int alg, float alpha, float beta,
                               int64_t n, dnnl_primitive_t *prim, dnnl_memory_t *x,
                               dnnl_memory_t *y, bool *usable) {
    *usable = false;
    dnnl_memory_desc_t md;
    int64_t dims[1] = {n};
    TRY(dnnl_check(dnnl_plain_md(&md, 1, dims), c, "describe X"));
    dnnl_eltwise_desc_t desc;
    if (dnnl_eltwise_forward_desc_init(&desc, dnnl_forward_inference, (dnnl_alg_kind_t)alg, &md,
                                       alpha, beta) != dnnl_success)
        return GRAFT_OK; /* not usable: the reference runs */
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    if (!attr) return op_error(c->node, c->err, GRAFT_E_BACKEND, "oneDNN attributes");
    dnnl_primitive_desc_t pd = NULL;
    graft_status st = dnnl_make_primitive(be, &desc, attr, c, &pd, prim, usable);
    dnnl_primitive_attr_destroy(attr);
    dnnl_destroy_pd(&pd);
    if (st != GRAFT_OK || !*usable) return st;
    TRY(dnnl_make_memory(be, &md, NULL, c, x));
    return y ? dnnl_make_memory(be, &md, NULL, c, y) : GRAFT_OK;
}

/* The node's state for this size and these parameters, made anew when either changed. */
static graft_status eltwise_state_get(cpu_backend *be, const op_call *c, dnnl_alg_kind_t alg,
                                      float alpha, float beta, void **state, eltwise_state **out) {
    int64_t n = tensor_numel(c->in[0]);
    eltwise_state *s = *state;
    if (s && s->numel == n && s->alg == alg && s->alpha == alpha && s->beta == beta) {
        *out = s;
        return GRAFT_OK;
    }
    if (s) eltwise_state_destroy(&s->base);
    *state = NULL;
    s = calloc(1, sizeof *s);
    if (!s) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "eltwise state");
    s->base.destroy = eltwise_state_destroy;
    s->numel = n, s->alg = alg, s->alpha = alpha, s->beta = beta;
    graft_status st =
        dnnl_eltwise_make(be, c, (int)alg, alpha, beta, n, &s->prim, &s->x, &s->y, &s->usable);
    if (st != GRAFT_OK) {
        eltwise_state_destroy(&s->base);
        return st;
    }
    *state = *out = s;
    return GRAFT_OK;
}

graft_status dnnl_run_Eltwise(cpu_backend *be, const op_call *c, void **state, bool *handled) {
    *handled = false;
    if (!be->dnnl_engine || c->n_in < 1 || c->n_out < 1 || !c->in[0] || !c->out[0]) return GRAFT_OK;
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    if (x->dtype != GRAFT_DTYPE_F32 || y->dtype != GRAFT_DTYPE_F32 || !x->data || !y->data ||
        tensor_numel(x) < ELTWISE_MIN_ELEMENTS || tensor_numel(y) != tensor_numel(x) ||
        cpu_in_nhwc(be, c, 0) != cpu_out_nhwc(be, c, 0))
        return GRAFT_OK;
    dnnl_alg_kind_t alg;
    float alpha, beta;
    if (!eltwise_alg(c, &alg, &alpha, &beta)) return GRAFT_OK;
    eltwise_state *s = NULL;
    TRY(eltwise_state_get(be, c, alg, alpha, beta, state, &s));
    if (!s->usable) return GRAFT_OK;
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->x, x->data), c, "bind X"));
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->y, y->data), c, "bind Y"));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, s->x}, {DNNL_ARG_DST, s->y}};
    TRY(dnnl_execute(be, s->prim, 2, args, c));
    *handled = true;
    return GRAFT_OK;
}

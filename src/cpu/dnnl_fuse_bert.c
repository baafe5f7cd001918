/* dnnl_fuse_bert.c: the CPU's fused groups for BERT: MatMul -> Add(bias) and MatMul -> Add(bias)
 * -> GELU (a Gelu node or PyTorch's erf chain) as one oneDNN matmul with its bias and a
 * GELU post-op, matched by src/graph/fusion_bert_match.c (as on the GPU). */
#include "graft_config.h"

#include <math.h>
#include <string.h>

#include "../core/scalar.h"
#include "../graph/fusion_bert_match.h"
#include "cpu_backend.h"

#if GRAFT_HAVE_DNNL

/* The input of a two-input call that is not value v (NULL when both or neither are). */
static const tensor *other_call_input(const op_call *c, int v) {
    if (c->n_in != 2) return NULL;
    if (c->node->inputs[0] == v && c->node->inputs[1] != v) return c->in[1];
    if (c->node->inputs[1] == v && c->node->inputs[0] != v) return c->in[0];
    return NULL;
}

/* A single f32 value equal to want within float rounding. */
static bool scalar_is(const tensor *t, double want) {
    if (!t || t->dtype != GRAFT_DTYPE_F32 || tensor_numel(t) != 1 || !t->data) return false;
    double v = scalar_load_f64(t->data, t->dtype, 0);
    return fabs(v - want) <= 1e-6 * fabs(want);
}

/* Which GELU the members after the bias Add compute: a Gelu node, or the erf chain with
 * c0 = sqrt(2), c1 = 1, c2 = 0.5 (0.5 x (1 + erf(x / sqrt(2)))); false for other constants. */
static bool gelu_form(const op_call *calls, int n, dnnl_linear_act *act) {
    *act = DNNL_ACT_NONE;
    if (n == 2) return true;
    if (n == 3) {
        const char *form = attr_s(calls[2].node, "approximate", "none");
        *act = strcmp(form, "tanh") == 0 ? DNNL_ACT_GELU_TANH : DNNL_ACT_GELU_ERF;
        return true;
    }
    if (n != 7) return false;
    *act = DNNL_ACT_GELU_ERF;
    return scalar_is(calls[2].in[1], sqrt(2.0)) &&
           scalar_is(other_call_input(&calls[4], calls[3].node->outputs[0]), 1.0) &&
           scalar_is(other_call_input(&calls[6], calls[5].node->outputs[0]), 0.5);
}

static graft_status run_linear_group(void *impl, const op_call *calls, int n, void **state,
                                     bool *handled) {
    cpu_backend *be = impl;
    *handled = false;
    const op_call *mm = &calls[0], *add = &calls[1];
    dnnl_linear_act act;
    if (n < 2 || !gelu_form(calls, n, &act)) return GRAFT_OK;
    const tensor *bias = other_call_input(add, mm->node->outputs[0]);
    tensor *y = calls[n - 1].out[0];
    const tensor *p = mm->out[0];
    if (!bias || bias->ndim != 1 || !y || y->ndim != p->ndim ||
        memcmp(y->dims, p->dims, sizeof(int64_t) * (size_t)p->ndim) != 0 ||
        add->out[0]->ndim != p->ndim)
        return GRAFT_OK;
    return dnnl_run_linear(be, mm, bias, act, y, state, handled);
}

/* Longer groups first: with the GELU before the bare biased product. */
const fusion_rule dnnl_bert_fusions[] = {
    {"matmul_bias_gelu", fusion_match_matmul_bias_gelu, run_linear_group, dnnl_free_state},
    {"matmul_bias", fusion_match_matmul_bias, run_linear_group, dnnl_free_state},
    {NULL, NULL, NULL, NULL},
};

#endif

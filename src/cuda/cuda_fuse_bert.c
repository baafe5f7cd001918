/* cuda_fuse_bert.c: fused groups of BERT-style graphs: the residual Add into LayerNormalization
 * (also in its decomposed ReduceMean .. Add form), MatMul with a constant weight and its bias Add
 * (and the GELU after it) as one cuBLASLt call, the attention scores' scale, mask Add and
 * Softmax as one kernel (the whole attention: cuda_fuse_attention.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "../ops/reduce.h"
#include "attention_launch.h"
#include "../graph/fusion_bert_match.h"
#include "cuda_fallback.h"
#include "cuda_internal.h"
#include "graft_config.h"
#include "cuda_matmul.h"
#include "cuda_fuse_bert.h"
#include "fuse_bert_launch.h"
#include "reduce_launch.h"

/* In fp16 / bf16 a GELU after a biased product runs in cuBLASLt's GELU epilogue, the product's
 * own pass: its tanh form for a tanh-form Gelu, and also for the erf form (a Gelu node, or
 * PyTorch's Div-Erf-Add-Mul-Mul chain with GELU's constants), whose difference from the tanh
 * form (at most 5e-4) is below the output's own rounding (bf16: 4e-3 of the value, fp16: 5e-4).
 * GRAFT_CUDA_GELU=exact keeps the erf form's separate kernel (docs/cuda.md); fp32 always
 * does, as its tanhf / erff match the reference to f32 rounding. */
static bool erf_gelu_as_epilogue(void) {
    const char *v = getenv("GRAFT_CUDA_GELU");
    return !(v && strcmp(v, "exact") == 0);
}

/* ---- Run-time helpers ------------------------------------------------------------------------ */

/* ---- Add -> LayerNormalization --------------------------------------------------------------- */

/* Add(x, r) read first by a LayerNormalization (as its X, with no Mean / InvStdDev outputs).
 * With want_sum the Add's output is also read after the LayerNormalization (or is a graph
 * output) and the kernel writes it too; without, the LayerNormalization is its only reader. */
static int match_add_ln_common(const ir_graph *g, int first, const unsigned char *on_dev,
                               const int *readers, int *members, int max, bool want_sum) {
    const ir_node *add = &g->nodes[first];
    if (max < 2 || !fb_is_op(add, "Add", 2)) return 0;
    int v = fb_sole_output(g, first);
    if (v < 0 || add->inputs[0] < 0 || add->inputs[1] < 0 ||
        fb_may_broadcast(g, add->inputs[0], add->inputs[1]))
        return 0;
    /* The first reader must be the LayerNormalization: an outside reader before it would run
     * before the group (at its last member) has written the sum. */
    int ln = fb_next_reader(g, v, first);
    if (ln < 0) return 0;
    const ir_node *l = &g->nodes[ln];
    if (l->dead || strcmp(l->op_type, "LayerNormalization") != 0 || l->n_in < 2 ||
        l->inputs[0] != v || fb_sole_output(g, ln) < 0)
        return 0;
    for (int k = 1; k < l->n_in; k++)
        if (l->inputs[k] == v) return 0;
    bool outside = readers[v] > 1;
    if (outside != want_sum) return 0;
    members[0] = first;
    members[1] = ln;
    return fb_all_on_dev(on_dev, members, 2) ? 2 : 0;
}

static int match_add_ln(const ir_graph *g, int first, const unsigned char *on_dev,
                        const int *readers, int *members, int max) {
    return match_add_ln_common(g, first, on_dev, readers, members, max, false);
}

static int match_add_ln_sum(const ir_graph *g, int first, const unsigned char *on_dev,
                            const int *readers, int *members, int max) {
    return match_add_ln_common(g, first, on_dev, readers, members, max, true);
}

static graft_status run_add_ln_common(cuda_backend *be, const op_call *calls, int n, bool *handled,
                                      bool want_sum) {
    *handled = false;
    if (n != 2) return GRAFT_OK;
    const op_call *a = &calls[0], *l = &calls[1];
    const tensor *x = a->in[0], *r = a->in[1], *s = a->out[0];
    const tensor *scale = l->in[1], *bias = l->n_in > 2 ? l->in[2] : NULL;
    tensor *y = l->out[0];
    if (!x || !r || !s || !scale || !y || !is_float_dt(x->dtype)) return GRAFT_OK;
    graft_dtype dt = x->dtype;
    /* No broadcasting in the fused Add (the embeddings' position Add broadcasts over the
     * batch: it runs on its own). */
    if (r->dtype != dt || s->dtype != dt || !same_shape(x, s) || !same_shape(r, s)) return GRAFT_OK;
    for (int k = 1; k < l->n_out; k++)
        if (l->out[k]) return GRAFT_OK;
    int axis;
    TRY(op_axis(l->node, attr_i(l->node, "axis", -1), s->ndim, &axis, l->err));
    axis_split sp = axis_split_dims(s->ndim, s->dims, axis, false);
    int64_t total = tensor_numel(s);
    if (!is_dt_numel(y, dt, total) || !is_dt_numel(scale, dt, sp.n) ||
        (bias && !is_dt_numel(bias, dt, sp.n)) || (want_sum && !is_dt_numel(s, dt, total)))
        return GRAFT_OK;
    *handled = true;
    if (total == 0) return GRAFT_OK;
    float eps = attr_f(l->node, "epsilon", 1e-5f);
    return launched(l,
                    cuda_add_layernorm(x->data, r->data, scale->data, bias ? bias->data : NULL,
                                       want_sum ? s->data : NULL, y->data, sp.outer, sp.n, eps, dt,
                                       be->stream),
                    "fused add + layer normalization kernel");
}

static graft_status run_add_ln(void *impl, const op_call *calls, int n, void **state,
                               bool *handled) {
    cuda_backend *be = impl;
    (void)state;
    return run_add_ln_common(be, calls, n, handled, false);
}

static graft_status run_add_ln_sum(void *impl, const op_call *calls, int n, void **state,
                                   bool *handled) {
    cuda_backend *be = impl;
    (void)state;
    return run_add_ln_common(be, calls, n, handled, true);
}

/* ---- MatMul -> Add(bias) [-> GELU] ----------------------------------------------------------- */

typedef struct gelu_plan {
    int form; /* CUDA_BERT_GELU_*, or -1: none */
    const tensor *c[3];
    bool ok;
} gelu_plan;

/* Which GELU follows the product, with the chain's scalar operands checked against dt. */
static gelu_plan gelu_of(const op_call *calls, int n, graft_dtype dt) {
    gelu_plan gp = {.form = -1, .ok = n == 2};
    if (n == 3) {
        const char *form = attr_s(calls[2].node, "approximate", "none");
        gp.form = strcmp(form, "tanh") == 0 ? CUDA_BERT_GELU_TANH : CUDA_BERT_GELU_ERF;
        gp.ok = true;
    } else if (n == 7) {
        gp.form = CUDA_BERT_GELU_CHAIN;
        gp.c[0] = calls[2].in[1];
        gp.c[1] = other_call_input(&calls[4], calls[3].node->outputs[0]);
        gp.c[2] = other_call_input(&calls[6], calls[5].node->outputs[0]);
        gp.ok = true;
        for (int k = 0; k < 3; k++)
            if (!is_dt_numel(gp.c[k], dt, 1)) gp.ok = false;
    }
    return gp;
}

/* A biased product's state: its cuBLASLt plan, and whether an erf chain's constants are GELU's
 * (sqrt 2, 1, 0.5: read once from the device; -1 not yet). */
typedef struct matmul_bias_state {
    cuda_gemm_plan *plan;
    int chain_is_gelu;
} matmul_bias_state;

static float half_value(uint16_t v, graft_dtype dt) {
    return dt == GRAFT_DTYPE_BF16 ? bf16_to_f32(v) : f16_to_f32(v);
}

static bool chain_is_gelu(cuda_backend *be, matmul_bias_state *ms, const gelu_plan *gp,
                          graft_dtype dt) {
    if (ms->chain_is_gelu < 0 && !be->capturing) {
        uint16_t c[3];
        ms->chain_is_gelu = 0;
        for (int k = 0; k < 3; k++)
            if (cudaMemcpy(&c[k], gp->c[k]->data, 2, cudaMemcpyDeviceToHost) != cudaSuccess)
                return false;
        float c0 = half_value(c[0], dt), c1 = half_value(c[1], dt), c2 = half_value(c[2], dt);
        ms->chain_is_gelu = fabsf(c0 - 1.41421356f) < 1e-2f && c1 == 1.0f && c2 == 0.5f;
    }
    return ms->chain_is_gelu > 0;
}

static graft_status run_matmul_bias(void *impl, const op_call *calls, int n, void **state,
                                    bool *handled) {
    cuda_backend *be = impl;
    *handled = false;
    if (!*state) {
        matmul_bias_state *fresh = calloc(1, sizeof *fresh);
        if (!fresh)
            return op_error(calls[0].node, calls[0].err, GRAFT_E_OUT_OF_MEMORY, "product state");
        fresh->chain_is_gelu = -1;
        *state = fresh;
    }
    matmul_bias_state *ms = *state;
    const op_call *mm = &calls[0], *last = &calls[n - 1];
    const tensor *a = mm->in[0], *w = mm->in[1];
    const tensor *bias = other_call_input(&calls[1], mm->node->outputs[0]);
    tensor *y = last->out[0];
    if (!a || !w || !bias || !y || !is_float_dt(a->dtype) || a->ndim < 2 || w->ndim != 2)
        return GRAFT_OK;
    graft_dtype dt = a->dtype;
    int64_t k = a->dims[a->ndim - 1], cols = w->dims[1];
    if (w->dtype != dt || w->dims[0] != k || bias->ndim != 1 || k <= 0) return GRAFT_OK;
    int64_t rows = tensor_numel(a) / k;
    gelu_plan gp = gelu_of(calls, n, dt);
    if (!gp.ok || !is_dt_numel(bias, dt, cols) || !is_dt_numel(y, dt, rows * cols)) return GRAFT_OK;
    if (rows == 0 || cols == 0) {
        *handled = true;
        return GRAFT_OK;
    }
    bool lt_gelu = dt != GRAFT_DTYPE_F32 &&
                   (gp.form == CUDA_BERT_GELU_TANH ||
                    (erf_gelu_as_epilogue() &&
                     (gp.form == CUDA_BERT_GELU_ERF ||
                      (gp.form == CUDA_BERT_GELU_CHAIN && chain_is_gelu(be, ms, &gp, dt)))));
    /* The product and bias go straight into the group's output; the GELU then runs in place. */
    cuda_gemm_args ga = {.rows = rows,
                         .cols = cols,
                         .k = k,
                         .a = a->data,
                         .lda = k,
                         .b = w->data,
                         .ldb = cols,
                         .c = y->data,
                         .ldc = cols,
                         .dtype = dt,
                         .bias = bias->data,
                         .epilogue = lt_gelu ? CUDA_GEMM_EPILOGUE_GELU : CUDA_GEMM_EPILOGUE_NONE,
                         .alpha = 1.0f,
                         .beta = 0.0f,
                         .batch = 1};
    graft_status st = cuda_gemm_run(be, &ms->plan, &ga, last->err);
    if (st == GRAFT_E_UNSUPPORTED && lt_gelu) { /* no algorithm with the GELU epilogue */
        lt_gelu = false;
        ga.epilogue = CUDA_GEMM_EPILOGUE_NONE;
        st = cuda_gemm_run(be, &ms->plan, &ga, last->err);
    }
    if (st == GRAFT_E_UNSUPPORTED) return GRAFT_OK; /* nothing enqueued: members one by one */
    TRY(st);
    *handled = true;
    if (gp.form < 0 || lt_gelu) return GRAFT_OK;
    return launched(last,
                    cuda_bert_gelu(y->data, rows * cols, gp.form, gp.c[0] ? gp.c[0]->data : NULL,
                                   gp.c[1] ? gp.c[1]->data : NULL, gp.c[2] ? gp.c[2]->data : NULL,
                                   dt, be->stream),
                    "fused GELU kernel");
}

static void free_gemm_plan(void *state) {
    matmul_bias_state *ms = state;
    if (ms) cuda_gemm_plan_free(ms->plan);
    free(ms);
}

/* ---- Scale -> Add(mask) -> Softmax ----------------------------------------------------------- */

/* Div(s, c) or Mul(s, c) / Mul(c, s) with c a constant scalar, read only by Add(., mask), read
 * only by a Softmax. */
int cuda_match_scaled_masked_softmax(const ir_graph *g, int first, const unsigned char *on_dev,
                                     const int *readers, int *members, int max) {
    const ir_node *sc = &g->nodes[first];
    bool div = fb_is_op(sc, "Div", 2);
    if (max < 3 || (!div && !fb_is_op(sc, "Mul", 2))) return 0;
    int x = sc->inputs[0], c = sc->inputs[1];
    if (!div && !fb_is_const_scalar(g, c)) {
        x = sc->inputs[1];
        c = sc->inputs[0];
    }
    if (x < 0 || fb_is_const_value(g, x) || !fb_is_const_scalar(g, c)) return 0;
    int v = fb_sole_output(g, first);
    int add = fb_sole_reader(g, readers, v, first, "Add", 2);
    if (add < 0 || fb_other_input(&g->nodes[add], v) < 0) return 0;
    int sm = fb_sole_reader(g, readers, fb_sole_output(g, add), add, "Softmax", 1);
    if (sm < 0) return 0;
    members[0] = first;
    members[1] = add;
    members[2] = sm;
    return fb_all_on_dev(on_dev, members, 3) ? 3 : 0;
}

/* The mask's element strides along the scores' dims (padded to 4 on the left), 0 where the
 * mask broadcasts; false when the mask does not broadcast to the scores. */
bool cuda_mask_strides(const tensor *mask, const int64_t dims4[4], int rank, int64_t ms[4]) {
    if (mask->ndim > rank) return false;
    int64_t stride = 1;
    for (int i = 3; i >= 0; i--) {
        int mi = mask->ndim - (4 - i);
        int64_t md = mi >= 0 ? mask->dims[mi] : 1;
        if (md != 1 && md != dims4[i]) return false;
        ms[i] = md == 1 ? 0 : stride;
        stride *= md;
    }
    return true;
}

graft_status cuda_run_scaled_masked_softmax(void *impl, const op_call *calls, int n, void **state,
                                            bool *handled) {
    cuda_backend *be = impl;
    (void)state;
    *handled = false;
    if (n != 3) return GRAFT_OK;
    const op_call *sc = &calls[0], *ad = &calls[1], *sm = &calls[2];
    bool mul = strcmp(sc->node->op_type, "Mul") == 0;
    if (sc->n_in != 2 || !sc->in[0] || !sc->in[1]) return GRAFT_OK;
    /* Mul(c, s): the scalar may come first (the match took whichever input is constant). */
    int xi = mul && tensor_numel(sc->in[0]) == 1 && tensor_numel(sc->in[1]) != 1 ? 1 : 0;
    const tensor *x = sc->in[xi], *c = sc->in[1 - xi];
    const tensor *mask = other_call_input(ad, sc->node->outputs[0]);
    tensor *y = sm->out[0];
    if (!x || !c || !mask || !y || !is_float_dt(x->dtype) || x->ndim < 1 || x->ndim > 4)
        return GRAFT_OK;
    graft_dtype dt = x->dtype;
    int64_t total = tensor_numel(x);
    if (!is_dt_numel(c, dt, 1) || mask->dtype != dt || !same_shape(ad->out[0], x) ||
        !is_dt_numel(y, dt, total) || !same_shape(y, x))
        return GRAFT_OK;
    int axis;
    bool single;
    TRY(softmax_axis(sm->node, x->ndim, &axis, &single, sm->err));
    if (axis != x->ndim - 1) return GRAFT_OK;
    int64_t dims4[4] = {1, 1, 1, 1}, ms[4];
    for (int i = 0; i < x->ndim; i++) dims4[4 - x->ndim + i] = x->dims[i];
    if (dims4[3] > 1024 || !cuda_mask_strides(mask, dims4, x->ndim, ms)) return GRAFT_OK;
    *handled = true;
    if (total == 0) return GRAFT_OK;
    return launched(sm,
                    cuda_bert_scaled_masked_softmax(x->data, c->data, mul, mask->data, ms, y->data,
                                                    dims4[0], dims4[1], dims4[2], dims4[3], dt,
                                                    be->stream),
                    "fused scale + mask + softmax kernel");
}

/* ---- LayerNormalization, decomposed -----------------------------------------------------------
 */

/* A ReduceMean over the last axis only of its input (rank known), keeping dims. */
static bool is_last_axis_mean(const ir_graph *g, int i, int x) {
    const ir_node *n = &g->nodes[i];
    if (n->dead || strcmp(n->op_type, "ReduceMean") != 0 || n->n_in < 1 || n->inputs[0] != x ||
        attr_i(n, "keepdims", 1) != 1)
        return false;
    int rank = g->values[x].ndim;
    bool present = n->n_in > 1 && n->inputs[1] >= 0;
    if (rank < 1 || (present && !fb_is_const_value(g, n->inputs[1]))) return false;
    reduce_axes ax;
    graft_err e = {0};
    if (reduce_resolve_axes(n, rank, present, present ? &g->values[n->inputs[1]].data : NULL, &ax,
                            &e) != GRAFT_OK ||
        !ax.known || ax.noop)
        return false;
    for (int d = 0; d < rank; d++)
        if (ax.reduced[d] != (d == rank - 1)) return false;
    return true;
}

/* The sole reader of v when it is a last-axis mean, or -1. */
static int sole_mean_reader(const ir_graph *g, const int *readers, int v, int after) {
    if (v < 0 || readers[v] != 1) return -1;
    int r = fb_next_reader(g, v, after);
    return r >= 0 && is_last_axis_mean(g, r, v) && fb_sole_output(g, r) >= 0 ? r : -1;
}

/* ReduceMean(x), Sub(x, mean), Pow(d, 2), ReduceMean, Add(eps), Sqrt, Div(d, .), Mul(., scale),
 * Add(., bias), starting at the first ReduceMean `rm`: fills m[0..9) or returns false. */
static bool match_ln_nodes(const ir_graph *g, const int *readers, int rm, int *m) {
    const ir_node *r0 = &g->nodes[rm];
    int x = r0->n_in >= 1 ? r0->inputs[0] : -1;
    if (x < 0 || fb_is_const_value(g, x) || !is_last_axis_mean(g, rm, x)) return false;
    int mu = fb_sole_output(g, rm);
    int sub = fb_sole_reader(g, readers, mu, rm, "Sub", 2);
    if (sub < 0 || g->nodes[sub].inputs[0] != x || g->nodes[sub].inputs[1] != mu) return false;
    int d = fb_sole_output(g, sub);
    int pw = d >= 0 && readers[d] == 2 ? fb_next_reader(g, d, sub) : -1;
    if (pw < 0 || !fb_is_op(&g->nodes[pw], "Pow", 2) || g->nodes[pw].inputs[0] != d ||
        !fb_is_const_scalar(g, g->nodes[pw].inputs[1]) ||
        tensor_get_f64(&g->values[g->nodes[pw].inputs[1]].data, 0) != 2.0)
        return false;
    int rm2 = sole_mean_reader(g, readers, fb_sole_output(g, pw), pw);
    if (rm2 < 0) return false;
    int var = fb_sole_output(g, rm2);
    int add_eps = fb_sole_reader(g, readers, var, rm2, "Add", 2);
    if (add_eps < 0 || !fb_is_const_scalar(g, fb_other_input(&g->nodes[add_eps], var)))
        return false;
    int sq = fb_sole_reader(g, readers, fb_sole_output(g, add_eps), add_eps, "Sqrt", 1);
    if (sq < 0) return false;
    int div = fb_sole_reader(g, readers, fb_sole_output(g, sq), sq, "Div", 2);
    if (div < 0 || g->nodes[div].inputs[0] != d) return false;
    int nrm = fb_sole_output(g, div);
    int mul = fb_sole_reader(g, readers, nrm, div, "Mul", 2);
    if (mul < 0 || !fb_is_const_value(g, fb_other_input(&g->nodes[mul], nrm))) return false;
    int scaled = fb_sole_output(g, mul);
    int add_b = fb_sole_reader(g, readers, scaled, mul, "Add", 2);
    if (add_b < 0 || !fb_is_const_value(g, fb_other_input(&g->nodes[add_b], scaled))) return false;
    int found[9] = {rm, sub, pw, rm2, add_eps, sq, div, mul, add_b};
    memcpy(m, found, sizeof found);
    return true;
}

static int match_ln_decomposed(const ir_graph *g, int first, const unsigned char *on_dev,
                               const int *readers, int *members, int max) {
    if (max < 9 || !match_ln_nodes(g, readers, first, members)) return 0;
    return fb_all_on_dev(on_dev, members, 9) ? 9 : 0;
}

/* The same after Add(x, r) whose sum only the two nodes reading x of the normalisation read. */
static int match_add_ln_decomposed(const ir_graph *g, int first, const unsigned char *on_dev,
                                   const int *readers, int *members, int max) {
    const ir_node *add = &g->nodes[first];
    if (max < 10 || !fb_is_op(add, "Add", 2) || add->inputs[0] < 0 || add->inputs[1] < 0 ||
        fb_may_broadcast(g, add->inputs[0], add->inputs[1]))
        return 0;
    int s = fb_sole_output(g, first);
    if (s < 0 || readers[s] != 2) return 0;
    int rm = fb_next_reader(g, s, first);
    if (rm < 0 || !match_ln_nodes(g, readers, rm, members + 1)) return 0;
    members[0] = first;
    return fb_all_on_dev(on_dev, members, 10) ? 10 : 0;
}

static graft_status run_ln_decomposed(void *impl, const op_call *calls, int n, void **state,
                                      bool *handled) {
    cuda_backend *be = impl;
    (void)state;
    *handled = false;
    if (n != 9 && n != 10) return GRAFT_OK;
    const op_call *c = calls + (n - 9); /* the nine normalisation nodes */
    const tensor *x = c[0].in[0], *res = NULL;
    if (n == 10) {
        x = calls[0].in[0];
        res = calls[0].in[1];
        const tensor *s = calls[0].out[0];
        if (!x || !res || !s || !same_shape(x, s) || !same_shape(res, s) || res->dtype != x->dtype)
            return GRAFT_OK;
    }
    const tensor *eps = other_call_input(&c[4], c[3].node->outputs[0]);
    const tensor *scale = other_call_input(&c[7], c[6].node->outputs[0]);
    const tensor *bias = other_call_input(&c[8], c[7].node->outputs[0]);
    tensor *y = c[8].out[0];
    if (!x || !eps || !scale || !bias || !y || !is_float_dt(x->dtype) || x->ndim < 1)
        return GRAFT_OK;
    graft_dtype dt = x->dtype;
    int64_t cols = x->dims[x->ndim - 1], total = tensor_numel(x);
    /* Scale and bias must run along the last axis only: n values ending in that axis. */
    if (!is_dt_numel(eps, dt, 1) || !is_dt_numel(scale, dt, cols) || !is_dt_numel(bias, dt, cols) ||
        !is_dt_numel(y, dt, total) || !same_shape(y, x) || cols > 1024 ||
        (scale->ndim > 0 && scale->dims[scale->ndim - 1] != cols) ||
        (bias->ndim > 0 && bias->dims[bias->ndim - 1] != cols))
        return GRAFT_OK;
    *handled = true;
    if (total == 0) return GRAFT_OK;
    return launched(&c[8],
                    cuda_bert_layernorm_decomposed(x->data, res ? res->data : NULL, eps->data,
                                                   scale->data, bias->data, y->data, total / cols,
                                                   cols, dt, be->stream),
                    "fused layer normalization kernel");
}

/* Longer groups first: a product followed by a GELU is tried before the bare product, the whole
 * attention before its scale-mask-softmax part. */
const cuda_fusion cuda_bert_fusions[] = {
    {"matmul_bias_gelu", fusion_match_matmul_bias_gelu, run_matmul_bias, free_gemm_plan},
    {"matmul_bias", fusion_match_matmul_bias, run_matmul_bias, free_gemm_plan},
    {"add_layernorm", match_add_ln, run_add_ln, NULL},
    {"add_layernorm_sum", match_add_ln_sum, run_add_ln_sum, NULL},
    {"scaled_masked_softmax", cuda_match_scaled_masked_softmax, cuda_run_scaled_masked_softmax,
     NULL},
    {"add_layernorm_decomposed", match_add_ln_decomposed, run_ln_decomposed, NULL},
    {"layernorm_decomposed", match_ln_decomposed, run_ln_decomposed, NULL},
    {NULL, NULL, NULL, NULL}};

/* cuda_fuse_attention.c: the attention group: MatMul(Q, K^T), scale, Add(mask), Softmax,
 * MatMul(P, V) as one kernel in half precision, with the Transposes that make Q, K^T and V of
 * (batch, seq, heads, dim) tensors, and the one that turns the output back, folded into the
 * kernel's strides (no copies). Too small a grid runs the cuBLASLt products instead. */
#include <stdlib.h>
#include <string.h>

#include "../graph/fusion_bert_match.h"
#include "../graph/fusion_groups.h"
#include "../ops/reduce.h"
#include "attention_launch.h"
#include "cuda_fallback.h"
#include "cuda_fuse_bert.h"
#include "cuda_internal.h"
#include "graft_config.h"

/* A value of a half dtype: only those have the tensor-core kernel (f32 graphs keep the products in
 * cuBLASLt and the scale-mask-softmax group in between). */
static bool is_half_value(const ir_graph *g, int v) {
    return g->values[v].dtype == GRAFT_DTYPE_F16 || g->values[v].dtype == GRAFT_DTYPE_BF16;
}

/* How the attention group runs: ATTN_OFF (no group: the products and the scale-mask-softmax
 * group), ATTN_AUTO (the fused kernel when its blocks fill the GPU, else the products and the
 * fused softmax inside the group) or ATTN_KERNEL (the fused kernel at every size). The build
 * chooses (meson -Dflash_attention, on by default); GRAFT_CUDA_ATTENTION=unfused, auto or fused
 * overrides it (a diagnostic switch: timing the paths with one build, testing the kernels on
 * small shapes). */
enum { ATTN_OFF, ATTN_AUTO, ATTN_KERNEL };

static int attention_mode(void) {
    const char *v = getenv("GRAFT_CUDA_ATTENTION");
    if (v && strcmp(v, "fused") == 0) return ATTN_KERNEL;
    if (v && strcmp(v, "unfused") == 0) return ATTN_OFF;
    if (v && strcmp(v, "auto") == 0) return ATTN_AUTO;
    return GRAFT_FLASH_ATTENTION ? ATTN_AUTO : ATTN_OFF;
}

/* ---- Matching ---------------------------------------------------------------------------------
 */

/* A 4-D Transpose's perm (false without one: the default reverses, which no fold takes). */
static bool transpose_perm(const ir_node *n, int64_t perm[4]) {
    const int64_t *p;
    if (attr_ints(n, "perm", &p) != 4) return false;
    unsigned seen = 0;
    for (int i = 0; i < 4; i++) {
        if (p[i] < 0 || p[i] > 3 || (seen & (1u << p[i]))) return false;
        seen |= 1u << p[i];
        perm[i] = p[i];
    }
    return true;
}

/* The Transpose at or after node `from` that makes value v, read only by the group, when it can
 * be folded: its input's last axis (the head dim) lands on axis `dim_axis` of v. Else -1. */
static int foldable_transpose(const ir_graph *g, const unsigned char *on_dev, const int *readers,
                              int v, int dim_axis, int from) {
    if (v < 0 || readers[v] != 1) return -1;
    int t = g->values[v].producer;
    int64_t perm[4];
    if (t < from || !on_dev[t] || !fb_is_op(&g->nodes[t], "Transpose", 1) ||
        g->nodes[t].inputs[0] < 0 || !transpose_perm(&g->nodes[t], perm) || perm[dim_axis] != 3)
        return -1;
    return t;
}

/* MatMul(Q, KT) read only by Div(., c) or Mul(., c), c a constant scalar, then Add(mask) and
 * Softmax as the scale-mask-softmax group matches them, and the probabilities read only by
 * MatMul(P, V): core[0..5) = QK, scale, Add, Softmax, PV. Q's head dim, when known at load
 * time, must be one the kernel has. */
static bool match_core(const ir_graph *g, int qk, const unsigned char *on_dev, const int *readers,
                       int core[5]) {
    const ir_node *mm = &g->nodes[qk];
    if (!fb_is_op(mm, "MatMul", 2)) return false;
    int q = mm->inputs[0], kt = mm->inputs[1], scores = fb_sole_output(g, qk);
    if (q < 0 || kt < 0 || scores < 0 || readers[scores] != 1 || !is_half_value(g, scores))
        return false;
    const ir_value *qv = &g->values[q];
    if (qv->ndim >= 0 && (qv->ndim != 4 || (qv->dims[3] >= 0 && qv->dims[3] != 32 &&
                                            qv->dims[3] != 64 && qv->dims[3] != 128)))
        return false;
    int sc = fb_next_reader(g, scores, qk);
    if (sc < 0 || !fb_is_const_scalar(g, fb_other_input(&g->nodes[sc], scores))) return false;
    if (strcmp(g->nodes[sc].op_type, "Div") == 0 && g->nodes[sc].inputs[0] != scores) return false;
    if (cuda_match_scaled_masked_softmax(g, sc, on_dev, readers, core + 1, 3) != 3) return false;
    int p = fb_sole_output(g, core[3]);
    int pv = fb_sole_reader(g, readers, p, core[3], "MatMul", 2);
    if (pv < 0 || g->nodes[pv].inputs[0] != p || g->nodes[pv].inputs[1] == p ||
        g->nodes[pv].inputs[1] < 0)
        return false;
    core[0] = qk;
    core[4] = pv;
    return fb_all_on_dev(on_dev, core, 5);
}

/* The QK MatMul of the attention that MatMul `pv` may end (P <- Softmax <- Add <- scale <- QK),
 * or -1; match_core then checks the whole chain. */
static int producer_of(const ir_graph *g, int v) {
    return v >= 0 ? g->values[v].producer : -1;
}

static int qk_before(const ir_graph *g, int pv) {
    int p = producer_of(g, g->nodes[pv].inputs[0]);
    if (p < 0 || !fb_is_op(&g->nodes[p], "Softmax", 1)) return -1;
    int add = producer_of(g, g->nodes[p].inputs[0]);
    if (add < 0 || !fb_is_op(&g->nodes[add], "Add", 2)) return -1;
    for (int k = 0; k < 2; k++) {
        int sc = producer_of(g, g->nodes[add].inputs[k]);
        if (sc < 0 || g->nodes[sc].n_in != 2) continue;
        for (int j = 0; j < 2; j++) {
            int qk = producer_of(g, g->nodes[sc].inputs[j]);
            if (qk >= 0 && fb_is_op(&g->nodes[qk], "MatMul", 2)) return qk;
        }
    }
    return -1;
}

static int by_index(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* The group starts at `first`: the QK MatMul, or the earliest of the Transposes it folds (Q's,
 * K^T's and V's, each read only by the group; the output's, the product's only reader). */
static int match_attention(const ir_graph *g, int first, const unsigned char *on_dev,
                           const int *readers, int *members, int max) {
    if (max < 5 || attention_mode() == ATTN_OFF) return 0;
    int core[5], qk = first;
    if (fb_is_op(&g->nodes[first], "Transpose", 1)) {
        int v = fb_sole_output(g, first);
        int r = v >= 0 && readers[v] == 1 ? fb_next_reader(g, v, first) : -1;
        if (r < 0 || !fb_is_op(&g->nodes[r], "MatMul", 2)) return 0;
        qk = match_core(g, r, on_dev, readers, core) ? r : qk_before(g, r);
    }
    if (qk < 0 || !match_core(g, qk, on_dev, readers, core)) return 0;
    const ir_node *mqk = &g->nodes[core[0]], *mpv = &g->nodes[core[4]];
    int m[FUSION_GROUP_MAX], n = 0;
    for (int k = 0; k < 5; k++) m[n++] = core[k];
    int t[3] = {foldable_transpose(g, on_dev, readers, mqk->inputs[0], 3, first),
                foldable_transpose(g, on_dev, readers, mqk->inputs[1], 2, first),
                foldable_transpose(g, on_dev, readers, mpv->inputs[1], 3, first)};
    for (int k = 0; k < 3; k++)
        if (t[k] >= 0) m[n++] = t[k];
    int y = fb_sole_output(g, core[4]);
    int tout = fb_sole_reader(g, readers, y, core[4], "Transpose", 1);
    int64_t perm[4];
    if (tout >= 0 && on_dev[tout] && transpose_perm(&g->nodes[tout], perm) && perm[3] == 3 &&
        fb_sole_output(g, tout) >= 0)
        m[n++] = tout;
    qsort(m, (size_t)n, sizeof m[0], by_index);
    if (m[0] != first || n > max) return 0;
    memcpy(members, m, sizeof m[0] * (size_t)n);
    return n;
}

/* ---- Running ----------------------------------------------------------------------------------
 */

/* Each member's place in the group's calls; -1 for a Transpose not folded. */
typedef struct attn_roles {
    int qk, sc, ad, sm, pv, tq, tk, tv, tout;
} attn_roles;

static bool roles_of(const op_call *c, int n, attn_roles *r) {
    *r = (attn_roles){-1, -1, -1, -1, -1, -1, -1, -1, -1};
    for (int j = 0; j < n; j++) {
        const char *op = c[j].node->op_type;
        if (strcmp(op, "MatMul") == 0) *(r->qk < 0 ? &r->qk : &r->pv) = j;
        if (strcmp(op, "Div") == 0 || strcmp(op, "Mul") == 0) r->sc = j;
        if (strcmp(op, "Add") == 0) r->ad = j;
        if (strcmp(op, "Softmax") == 0) r->sm = j;
    }
    if (r->qk < 0 || r->pv < 0 || r->sc < 0 || r->ad < 0 || r->sm < 0) return false;
    const ir_node *qk = c[r->qk].node, *pv = c[r->pv].node;
    for (int j = 0; j < n; j++) {
        const ir_node *t = c[j].node;
        if (strcmp(t->op_type, "Transpose") != 0) continue;
        if (t->outputs[0] == qk->inputs[0])
            r->tq = j;
        else if (t->outputs[0] == qk->inputs[1])
            r->tk = j;
        else if (t->outputs[0] == pv->inputs[1])
            r->tv = j;
        else if (t->inputs[0] == pv->outputs[0])
            r->tout = j;
        else
            return false;
    }
    return true;
}

/* The group's member states when members run on their own (the products' cuBLASLt plans). */
typedef struct attn_state {
    void *member[FUSION_GROUP_MAX];
    const cuda_kernel *owner[FUSION_GROUP_MAX];
    void *sms;
} attn_state;

static void free_attn_state(void *state) {
    attn_state *a = state;
    if (!a) return;
    for (int k = 0; k < FUSION_GROUP_MAX; k++)
        if (a->member[k] && a->owner[k] && a->owner[k]->free_state)
            a->owner[k]->free_state(a->member[k]);
    free(a);
}

/* Member k through its own kernel (its state kept in the group's), or the CPU when must_run. */
static graft_status run_member(cuda_backend *be, attn_state *a, int k, const op_call *c,
                               bool must_run, bool *handled) {
    const cuda_kernel *kern = cuda_find_kernel(c->node->op_type);
    *handled = false;
    if (kern) {
        TRY(kern->run(be, c, &a->member[k], handled));
        if (a->member[k]) a->owner[k] = kern;
    }
    if (*handled || !must_run) return GRAFT_OK;
    if (be->capturing)
        return op_error(c->node, c->err, GRAFT_E_UNSUPPORTED,
                        "runs on the CPU, which a CUDA graph cannot record");
    be->fallbacks++;
    *handled = true;
    return cuda_run_on_cpu(be, c);
}

/* Too few (batch, head, 64-query) blocks to fill the GPU (the fused kernel would leave SMs idle)
 * or a sequence length only the WMMA kernel takes: the two cuBLASLt products with the
 * scale-mask-softmax between them are faster. With must_run every member runs (the group's
 * Transposes already have); else a first product that declines leaves the group to its members. */
static graft_status run_unfused(cuda_backend *be, const op_call *calls, const attn_roles *r,
                                attn_state *a, bool must_run, bool *handled) {
    bool h = false;
    TRY(run_member(be, a, r->qk, &calls[r->qk], must_run, &h));
    if (!h) return GRAFT_OK; /* nothing written yet: the members run one by one */
    *handled = true;
    op_call sms[3] = {calls[r->sc], calls[r->ad], calls[r->sm]};
    TRY(cuda_run_scaled_masked_softmax(be, sms, 3, &a->sms, &h));
    int rest[3] = {r->sc, r->ad, r->sm};
    for (int k = 0; k < 3 && !h; k++) {
        bool done = false;
        TRY(run_member(be, a, rest[k], &calls[rest[k]], true, &done));
    }
    return run_member(be, a, r->pv, &calls[r->pv], true, &h);
}

static bool dims_are(const tensor *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    return t && t->ndim == 4 && t->dims[0] == d0 && t->dims[1] == d1 && t->dims[2] == d2 &&
           t->dims[3] == d3;
}

static void dense_strides4(const tensor *t, int64_t st[4]) {
    st[3] = 1;
    for (int i = 2; i >= 0; i--) st[i] = st[i + 1] * t->dims[i + 1];
}

/* Per output axis, the stride at which the Transpose of call c reads its input. */
static bool read_strides(const op_call *c, int64_t out[4]) {
    int64_t perm[4], st[4];
    if (!c->in[0] || c->in[0]->ndim != 4 || !c->in[0]->data || !transpose_perm(c->node, perm))
        return false;
    dense_strides4(c->in[0], st);
    for (int i = 0; i < 4; i++) out[i] = st[perm[i]];
    return true;
}

/* Per input axis, the stride at which the Transpose of call c writes its output. */
static bool write_strides(const op_call *c, int64_t out[4]) {
    int64_t perm[4], st[4];
    if (!c->out[0] || c->out[0]->ndim != 4 || !c->out[0]->data || !transpose_perm(c->node, perm))
        return false;
    dense_strides4(c->out[0], st);
    for (int j = 0; j < 4; j++) out[perm[j]] = st[j];
    return true;
}

/* The fused kernel's operands: the folded Transposes' inputs (and the output's) in place. */
typedef struct attn_io {
    const void *q, *k, *v;
    void *out;
    cuda_attn_strides st;
} attn_io;

static bool folded_io(const op_call *c, const attn_roles *r, int64_t h, int64_t s, int64_t d,
                      attn_io *io) {
    cuda_attn_strides_dense(&io->st, h, s, d);
    io->q = c[r->qk].in[0]->data;
    io->k = c[r->qk].in[1]->data;
    io->v = c[r->pv].in[1]->data;
    io->out = c[r->pv].out[0]->data;
    int64_t t[4];
    if (r->tq >= 0) {
        if (!read_strides(&c[r->tq], t) || t[3] != 1) return false;
        io->q = c[r->tq].in[0]->data;
        memcpy(io->st.q, t, sizeof io->st.q);
    }
    if (r->tk >= 0) { /* K^T (b, h, d, s): the head dim contiguous, K as rows */
        if (!read_strides(&c[r->tk], t) || t[2] != 1) return false;
        io->k = c[r->tk].in[0]->data;
        int64_t k[4] = {t[0], t[1], t[3], t[2]};
        memcpy(io->st.k, k, sizeof k);
    }
    if (r->tv >= 0) {
        if (!read_strides(&c[r->tv], t) || t[3] != 1) return false;
        io->v = c[r->tv].in[0]->data;
        memcpy(io->st.v, t, sizeof io->st.v);
    }
    if (r->tout >= 0) {
        if (!write_strides(&c[r->tout], t) || t[3] != 1) return false;
        io->out = c[r->tout].out[0]->data;
        memcpy(io->st.out, t, sizeof io->st.out);
    }
    return io->q && io->k && io->v && io->out;
}

/* The Transposes the group folds, run as copies (before the products; the output's after). */
static graft_status run_transposes(cuda_backend *be, const op_call *calls, const attn_roles *r,
                                   attn_state *a, bool output) {
    int t[3] = {output ? r->tout : r->tq, output ? -1 : r->tk, output ? -1 : r->tv};
    for (int k = 0; k < 3; k++) {
        bool h;
        if (t[k] >= 0) TRY(run_member(be, a, t[k], &calls[t[k]], true, &h));
    }
    return GRAFT_OK;
}

/* The checked shapes of one attention: (b, h, s, d), the scale, the mask's strides. */
typedef struct attn_shape {
    int64_t b, h, s, d;
    graft_dtype dt;
    const tensor *c, *mask;
    int64_t ms[4];
} attn_shape;

static graft_status check_shapes(const op_call *calls, const attn_roles *r, attn_shape *x,
                                 bool *ok) {
    const op_call *qk = &calls[r->qk], *sc = &calls[r->sc], *ad = &calls[r->ad];
    const op_call *sm = &calls[r->sm], *pv = &calls[r->pv];
    const tensor *q = qk->in[0], *kt = qk->in[1], *v = pv->in[1], *y = pv->out[0];
    x->c = other_call_input(sc, qk->node->outputs[0]);
    x->mask = other_call_input(ad, sc->node->outputs[0]);
    *ok = false;
    if (!q || !kt || !v || !y || !x->c || !x->mask || q->ndim != 4) return GRAFT_OK;
    graft_dtype dt = x->dt = q->dtype;
    int64_t b = x->b = q->dims[0], h = x->h = q->dims[1], s = x->s = q->dims[2];
    int64_t d = x->d = q->dims[3];
    /* No broadcasting over batch or heads; every intermediate has the scores' shape. */
    if (!cuda_attention_supported(b * h, s, d, dt) || !dims_are(kt, b, h, d, s) ||
        !dims_are(v, b, h, s, d) || !dims_are(y, b, h, s, d) || !dims_are(qk->out[0], b, h, s, s) ||
        !dims_are(ad->out[0], b, h, s, s) || !dims_are(sm->out[0], b, h, s, s) || kt->dtype != dt ||
        v->dtype != dt || y->dtype != dt || qk->out[0]->dtype != dt || !is_dt_numel(x->c, dt, 1) ||
        x->mask->dtype != dt || tensor_numel(x->mask) == 0 || !x->mask->data)
        return GRAFT_OK;
    int axis;
    bool single;
    TRY(softmax_axis(sm->node, 4, &axis, &single, sm->err));
    int64_t dims4[4] = {b, h, s, s};
    *ok = axis == 3 && cuda_mask_strides(x->mask, dims4, 4, x->ms);
    return GRAFT_OK;
}

static graft_status run_attention(void *impl, const op_call *calls, int n, void **state,
                                  bool *handled) {
    cuda_backend *be = impl;
    *handled = false;
    attn_roles r;
    attn_shape x;
    bool ok;
    if (be->prop.major < 8 || !roles_of(calls, n, &r)) return GRAFT_OK; /* bf16 WMMA: sm_80 */
    TRY(check_shapes(calls, &r, &x, &ok));
    if (!ok) return GRAFT_OK;
    if (!*state && !(*state = calloc(1, sizeof(attn_state))))
        return op_error(calls[0].node, calls[0].err, GRAFT_E_OUT_OF_MEMORY, "attention state");
    attn_state *a = *state;
    const op_call *pv = &calls[r.pv];
    bool mul = strcmp(calls[r.sc].node->op_type, "Mul") == 0;
    /* Auto: the register-tiled kernel where it takes the shapes and fills the GPU, or where it
     * saves the group's Transposes (BERT-base at batch 1: 0.71-0.73 ms a forward against
     * 0.77-0.80 with the products; the WMMA kernel for other sequence lengths is slower than
     * the unfused products). */
    int mode = attention_mode();
    bool folds = r.tq >= 0 || r.tk >= 0 || r.tv >= 0 || r.tout >= 0;
    bool small = x.b * x.h * ((x.s + 63) / 64) < be->prop.multiProcessorCount;
    bool kernel = mode == ATTN_KERNEL || !small || folds;
    attn_io io;
    if (kernel && folded_io(calls, &r, x.h, x.s, x.d, &io) &&
        cuda_attention_mma_takes_strided(io.q, io.k, io.v, io.out, &io.st, x.s, x.d)) {
        *handled = true;
        return launched(pv,
                        cuda_attention_mma_strided(io.q, io.k, io.v, x.c->data, mul, x.mask->data,
                                                   x.ms, io.out, &io.st, x.b, x.h, x.s, x.d, x.dt,
                                                   be->stream),
                        "fused attention kernel");
    }
    if (folds) TRY(run_transposes(be, calls, &r, a, false));
    const tensor *q = calls[r.qk].in[0], *kt = calls[r.qk].in[1], *v = pv->in[1];
    tensor *y = pv->out[0];
    if (mode != ATTN_KERNEL &&
        (small || !cuda_attention_mma_takes(q->data, kt->data, v->data, y->data, x.s, x.d))) {
        TRY(run_unfused(be, calls, &r, a, folds, handled));
    } else {
        *handled = true;
        TRY(launched(pv,
                     cuda_attention(q->data, kt->data, v->data, x.c->data, mul, x.mask->data, x.ms,
                                    y->data, x.b, x.h, x.s, x.d, x.dt, be->stream),
                     "fused attention kernel"));
    }
    if (folds && *handled) TRY(run_transposes(be, calls, &r, a, true));
    return GRAFT_OK;
}

const cuda_fusion cuda_attention_fusions[] = {
    {"attention", match_attention, run_attention, free_attn_state}, {NULL, NULL, NULL, NULL}};

/* head.c: the trainable head: initialisation, forward through the reference kernels, backward
 * through the grad rules, mixed precision emulated by rounding to bf16/fp16. */
#include "head.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "../graph/build.h"
#include "../core/rng.h"
#include "../ops/op.h"
#include "../ops/grad.h"

void head_round(graft_precision p, float *v, int64_t n) {
    if (p == GRAFT_PRECISION_BF16)
        for (int64_t i = 0; i < n; i++) v[i] = bf16_to_f32(f32_to_bf16(v[i]));
    else if (p == GRAFT_PRECISION_FP16)
        for (int64_t i = 0; i < n; i++) v[i] = f16_to_f32(f32_to_f16(v[i]));
}

static void node_setup(ir_node *n, const char *op, int opset, ir_attr *attr, int n_attrs) {
    memset(n, 0, sizeof *n);
    n->name = (char *)"head";
    n->op_type = (char *)op;
    n->domain = (char *)"";
    n->opset = opset;
    n->attrs = attr;
    n->n_attrs = n_attrs;
    n->op = op_find(op);
}

static const char *activation_op(graft_activation a) {
    return a == GRAFT_ACTIVATION_GELU ? "Gelu" : a == GRAFT_ACTIVATION_TANH ? "Tanh" : "Relu";
}

static graft_status layer_init(head_layer *l, int index, int64_t in, int64_t out, bool has_act,
                               const graft_head_options *o, uint64_t *rng, graft_err *e) {
    l->in = in;
    l->out = out;
    l->has_act = has_act;
    int64_t wd[2] = {out, in}, bd[1] = {out};
    TRY(tensor_make(&l->w, GRAFT_DTYPE_F32, 2, wd, e));
    TRY(tensor_make(&l->b, GRAFT_DTYPE_F32, 1, bd, e));
    TRY(tensor_make(&l->dw, GRAFT_DTYPE_F32, 2, wd, e));
    TRY(tensor_make(&l->db, GRAFT_DTYPE_F32, 1, bd, e));
    TRY(tensor_make(&l->w_c, GRAFT_DTYPE_F32, 2, wd, e));
    TRY(tensor_make(&l->b_c, GRAFT_DTYPE_F32, 1, bd, e));
    /* PyTorch's nn.Linear default (kaiming_uniform with a = sqrt(5)): U(+-1/sqrt(in)) for
     * weights and biases; Xavier (Glorot) uniform: U(+-sqrt(6/(in+out))), zero biases. */
    double wbound =
        o->init == GRAFT_INIT_XAVIER ? sqrt(6.0 / (double)(in + out)) : 1.0 / sqrt((double)in);
    double bbound = o->init == GRAFT_INIT_XAVIER ? 0.0 : 1.0 / sqrt((double)in);
    float *w = l->w.data, *b = l->b.data;
    for (int64_t i = 0; i < in * out; i++) w[i] = (float)((2.0 * rng_uniform(rng) - 1.0) * wbound);
    for (int64_t i = 0; i < out; i++) b[i] = (float)((2.0 * rng_uniform(rng) - 1.0) * bbound);
    snprintf(l->w_name, sizeof l->w_name, "head.%d.weight", index);
    snprintf(l->b_name, sizeof l->b_name, "head.%d.bias", index);
    l->gemm_attr = (ir_attr){.name = (char *)"transB", .type = IR_ATTR_INT, .i = 1};
    node_setup(&l->gemm, "Gemm", 13, &l->gemm_attr, 1);
    l->act_attr =
        (ir_attr){.name = (char *)"approximate", .type = IR_ATTR_STRING, .s = (char *)"none"};
    const char *act = activation_op(o->activation);
    node_setup(&l->act, act, strcmp(act, "Gelu") == 0 ? 20 : 13, &l->act_attr,
               strcmp(act, "Gelu") == 0);
    return GRAFT_OK;
}

graft_status head_init(head *h, int64_t in_dim, const graft_head_options *o,
                       graft_precision precision, graft_err *e) {
    memset(h, 0, sizeof *h);
    if (!o || o->n_outputs < 1 || o->n_hidden < 0 || o->n_hidden > GRAFT_MAX_HIDDEN || in_dim < 1)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "head: need n_outputs >= 1, 0 <= n_hidden <= %d and features >= 1 (got "
                       "%d outputs, %d hidden, %lld features)",
                       GRAFT_MAX_HIDDEN, o ? o->n_outputs : 0, o ? o->n_hidden : 0,
                       (long long)in_dim);
    if (!(o->dropout >= 0.0f && o->dropout < 1.0f) || o->activation < 0 ||
        o->activation >= GRAFT_ACTIVATION_COUNT || o->init < 0 || o->init >= GRAFT_INIT_COUNT)
        return err_set(e, GRAFT_E_INVALID_ARGUMENT,
                       "head: dropout must be in [0, 1) and activation/init known (dropout %g)",
                       (double)o->dropout);
    h->activation = o->activation;
    h->dropout = o->dropout;
    h->precision = precision;
    uint64_t rng = o->seed ^ 0x6772616674ull; /* "graft" */
    h->rng = rng_next(&rng);
    int64_t in = in_dim;
    for (int i = 0; i <= o->n_hidden; i++) {
        bool last = i == o->n_hidden;
        int64_t out = last ? o->n_outputs : o->hidden[i];
        if (out < 1) {
            head_free(h);
            return err_set(e, GRAFT_E_INVALID_ARGUMENT, "head: hidden layer %d has size %lld", i,
                           (long long)out);
        }
        h->n_layers = i + 1;
        graft_status st = layer_init(&h->layers[i], i, in, out, !last, o, &rng, e);
        if (st != GRAFT_OK) {
            head_free(h);
            return st;
        }
        in = out;
    }
    return GRAFT_OK;
}

static void release_batch(head_layer *l) {
    tensor_release(&l->x), tensor_release(&l->z), tensor_release(&l->a);
    tensor_release(&l->d), tensor_release(&l->mask);
}

void head_free(head *h) {
    for (int i = 0; i < h->n_layers; i++) {
        head_layer *l = &h->layers[i];
        tensor_release(&l->w), tensor_release(&l->b), tensor_release(&l->dw);
        tensor_release(&l->db), tensor_release(&l->w_c), tensor_release(&l->b_c);
        release_batch(l);
    }
    h->n_layers = 0;
}

/* (Re)size the per-batch buffers for n rows. */
static graft_status ensure_batch(head *h, int64_t n, graft_err *e) {
    if (n == h->batch) return GRAFT_OK;
    for (int i = 0; i < h->n_layers; i++) {
        head_layer *l = &h->layers[i];
        release_batch(l);
        int64_t xd[2] = {n, l->in}, zd[2] = {n, l->out};
        TRY(tensor_make(&l->x, GRAFT_DTYPE_F32, 2, xd, e));
        TRY(tensor_make(&l->z, GRAFT_DTYPE_F32, 2, zd, e));
        TRY(tensor_make(&l->a, GRAFT_DTYPE_F32, 2, zd, e));
        TRY(tensor_make(&l->d, GRAFT_DTYPE_F32, 2, zd, e));
        TRY(tensor_make(&l->mask, GRAFT_DTYPE_BOOL, 2, zd, e));
    }
    h->batch = n;
    return GRAFT_OK;
}

static graft_status run_ref(ir_node *node, const tensor **in, int n_in, tensor *out, graft_err *e) {
    tensor *outs[1] = {out};
    op_call call = {node, in, n_in, outs, 1, e};
    return node->op->reference(&call);
}

/* d = a * mask / (1 - p), the mask drawn with keep probability 1 - p. */
static void dropout_forward(head *h, head_layer *l, int64_t n) {
    const float *z = l->a.data;
    float *a = l->d.data;
    uint8_t *mask = l->mask.data;
    float scale = 1.0f / (1.0f - h->dropout);
    rng_skip(&h->rng, (uint64_t)(h->rows_before * l->out));
    for (int64_t i = 0; i < n * l->out; i++) {
        mask[i] = rng_uniform(&h->rng) >= (double)h->dropout;
        a[i] = mask[i] ? z[i] * scale : 0.0f;
    }
    rng_skip(&h->rng, (uint64_t)(h->rows_after * l->out));
}

graft_status head_forward(head *h, const float *x, int64_t n, bool training, const float **logits,
                          graft_err *e) {
    TRY(ensure_batch(h, n, e));
    h->dropped = training && h->dropout > 0.0f;
    const float *cur = x;
    for (int i = 0; i < h->n_layers; i++) {
        head_layer *l = &h->layers[i];
        memcpy(l->x.data, cur, sizeof(float) * (size_t)(n * l->in));
        memcpy(l->w_c.data, l->w.data, sizeof(float) * (size_t)(l->in * l->out));
        memcpy(l->b_c.data, l->b.data, sizeof(float) * (size_t)l->out);
        head_round(h->precision, l->x.data, n * l->in);
        head_round(h->precision, l->w_c.data, l->in * l->out);
        head_round(h->precision, l->b_c.data, l->out);
        const tensor *gin[3] = {&l->x, &l->w_c, &l->b_c};
        TRY(run_ref(&l->gemm, gin, 3, &l->z, e));
        head_round(h->precision, l->z.data, n * l->out);
        if (!l->has_act) {
            cur = l->z.data;
            continue;
        }
        const tensor *ain[1] = {&l->z};
        TRY(run_ref(&l->act, ain, 1, &l->a, e));
        head_round(h->precision, l->a.data, n * l->out);
        if (h->dropped) dropout_forward(h, l, n);
        cur = h->dropped ? l->d.data : l->a.data;
    }
    *logits = cur;
    return GRAFT_OK;
}

/* Gradient of one layer: dy (N, out) at the layer's output -> dW, db added, dx (N, in) out. */
static graft_status layer_backward(head *h, head_layer *l, tensor *dy, tensor *dx, graft_err *e) {
    int64_t n = h->batch;
    if (l->has_act) {
        if (h->dropped) {
            float *d = dy->data;
            const uint8_t *mask = l->mask.data;
            float scale = 1.0f / (1.0f - h->dropout);
            for (int64_t i = 0; i < n * l->out; i++) d[i] = mask[i] ? d[i] * scale : 0.0f;
        }
        tensor dz;
        TRY(tensor_make(&dz, GRAFT_DTYPE_F32, 2, l->z.dims, e));
        const tensor *in[1] = {&l->z}, *out[1] = {&l->a}, *dout[1] = {dy};
        tensor *din[1] = {&dz};
        grad_call gc = {&l->act, in, 1, out, 1, dout, din, e};
        graft_status st = grad_find(l->act.op_type)(&gc);
        if (st == GRAFT_OK) memcpy(dy->data, dz.data, sizeof(float) * (size_t)(n * l->out));
        tensor_release(&dz);
        TRY(st);
        head_round(h->precision, dy->data, n * l->out);
    }
    tensor dw, db;
    TRY(tensor_make(&dw, GRAFT_DTYPE_F32, 2, l->w.dims, e));
    graft_status st = tensor_make(&db, GRAFT_DTYPE_F32, 1, l->b.dims, e);
    if (st == GRAFT_OK) {
        const tensor *in[3] = {&l->x, &l->w_c, &l->b_c}, *out[1] = {&l->z}, *dout[1] = {dy};
        tensor *din[3] = {dx, &dw, &db};
        grad_call gc = {&l->gemm, in, 3, out, 1, dout, din, e};
        st = grad_Gemm(&gc);
    }
    if (st == GRAFT_OK) {
        head_round(h->precision, dw.data, l->in * l->out);
        head_round(h->precision, db.data, l->out);
        float *gw = l->dw.data, *gb = l->db.data;
        const float *pw = dw.data, *pb = db.data;
        for (int64_t i = 0; i < l->in * l->out; i++) gw[i] += pw[i];
        for (int64_t i = 0; i < l->out; i++) gb[i] += pb[i];
        if (dx) head_round(h->precision, dx->data, n * l->in);
    }
    tensor_release(&dw), tensor_release(&db);
    return st;
}

graft_status head_backward(head *h, const float *dlogits, int64_t n, graft_err *e) {
    return head_backward_input(h, dlogits, n, NULL, e);
}

graft_status head_backward_input(head *h, const float *dlogits, int64_t n, float *dx_out,
                                 graft_err *e) {
    if (n != h->batch)
        return err_set(e, GRAFT_E_INTERNAL, "head backward for %lld rows after a forward of %lld",
                       (long long)n, (long long)h->batch);
    head_layer *last = &h->layers[h->n_layers - 1];
    tensor dy;
    int64_t dd[2] = {n, last->out};
    TRY(tensor_make(&dy, GRAFT_DTYPE_F32, 2, dd, e));
    memcpy(dy.data, dlogits, sizeof(float) * (size_t)(n * last->out));
    head_round(h->precision, dy.data, n * last->out);
    graft_status st = GRAFT_OK;
    for (int i = h->n_layers - 1; i >= 0 && st == GRAFT_OK; i--) {
        head_layer *l = &h->layers[i];
        tensor dx = {0};
        bool want = i > 0 || dx_out;
        if (want) {
            int64_t xd[2] = {n, l->in};
            st = tensor_make(&dx, GRAFT_DTYPE_F32, 2, xd, e);
        }
        if (st == GRAFT_OK) st = layer_backward(h, l, &dy, want ? &dx : NULL, e);
        if (st == GRAFT_OK && i == 0 && dx_out)
            memcpy(dx_out, dx.data, sizeof(float) * (size_t)(n * l->in));
        tensor_release(&dy);
        dy = dx;
    }
    tensor_release(&dy);
    return st;
}

void head_zero_grad(head *h) {
    for (int i = 0; i < h->n_layers; i++) {
        memset(h->layers[i].dw.data, 0, sizeof(float) * (size_t)tensor_numel(&h->layers[i].dw));
        memset(h->layers[i].db.data, 0, sizeof(float) * (size_t)tensor_numel(&h->layers[i].db));
    }
}

int head_params(head *h, optim_param *params) {
    int n = 0;
    for (int i = 0; i < h->n_layers; i++) {
        head_layer *l = &h->layers[i];
        params[n++] =
            (optim_param){l->w.data, l->dw.data, tensor_numel(&l->w), true, l->w_name, 0.0};
        params[n++] =
            (optim_param){l->b.data, l->db.data, tensor_numel(&l->b), false, l->b_name, 0.0};
    }
    return n;
}

/* A graph input named name (-1, n) f32: a dropout mask. */
static graft_status add_mask_input(ir_graph *g, const char *name, int64_t n, int *out,
                                   graft_err *e) {
    TRY(graph_add_value(g, name, out, e));
    ir_value *v = &g->values[*out];
    v->dtype = GRAFT_DTYPE_F32;
    v->ndim = 2;
    v->dims[0] = -1, v->dims[1] = n;
    v->is_graph_input = true;
    int *in = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    if (!in) return err_set(e, GRAFT_E_OUT_OF_MEMORY, "out of memory building the head");
    g->inputs = in;
    g->inputs[g->n_inputs++] = *out;
    return GRAFT_OK;
}

/* One layer after value cur: Gemm (transB) over its weights, the activation, with masks the
 * dropout mask's product. */
static graft_status append_layer(const head *h, int i, ir_graph *g, const char *last_name,
                                 bool masks, int *cur, graft_err *e) {
    const head_layer *l = &h->layers[i];
    tensor w, b;
    int wv, bv;
    TRY(tensor_clone(&w, &l->w, e));
    TRY(graph_add_const(g, l->w_name, &w, &wv, e));
    TRY(tensor_clone(&b, &l->b, e));
    TRY(graph_add_const(g, l->b_name, &b, &bv, e));
    const char *name = i == h->n_layers - 1 ? last_name : "head/gemm";
    TRY(graph_add_node(g, "Gemm", 13, (int[]){*cur, wv, bv}, 3, name, "transB", 1, cur, e));
    if (!l->has_act) return GRAFT_OK;
    const char *op = activation_op(h->activation);
    int a = *cur;
    TRY(graph_add_node(g, op, strcmp(op, "Gelu") == 0 ? 20 : 13, &a, 1, "head/act", NULL, 0, cur,
                       e));
    if (!masks) return GRAFT_OK;
    int mask;
    char mask_name[64];
    snprintf(mask_name, sizeof mask_name, "head/%d/dropout_mask", i);
    TRY(add_mask_input(g, mask_name, l->out, &mask, e));
    a = *cur;
    return graph_add_node(g, "Mul", 14, (int[]){a, mask}, 2, "head/dropout", NULL, 0, cur, e);
}

graft_status head_append(const head *h, ir_graph *g, int in, const char *last_name, int *out,
                         graft_err *e) {
    return head_append_masked(h, g, in, last_name, false, out, e);
}

graft_status head_append_masked(const head *h, ir_graph *g, int in, const char *last_name,
                                bool masks, int *out, graft_err *e) {
    int cur = in;
    for (int i = 0; i < h->n_layers; i++) TRY(append_layer(h, i, g, last_name, masks, &cur, e));
    *out = cur;
    return GRAFT_OK;
}

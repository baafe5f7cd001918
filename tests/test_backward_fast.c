/* test_backward_fast.c: the CPU backend's f32 fast kernel of the Backward node (Gemm, MatMul and
 * Conv gradients through oneDNN) against the reference kernel (the f64 rules), that it declines
 * other ops and dtypes, and one ResNet-sized Conv backward timed both ways (printed only). */
#include "graft_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_backend.h"
#include "ops/op.h"
#include "test_node.h"
#include "test_util.h"

#define MAX_IN 3

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float rand_uniform(void) { /* in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

/* A random tensor of dtype dt (f32 or f64). */
static void rand_tensor(tensor *t, graft_dtype dt, int ndim, const int64_t *dims) {
    tensor_make(t, dt, ndim, dims, NULL);
    for (int64_t i = 0; i < tensor_numel(t); i++) tensor_set_f64(t, i, rand_uniform());
}

/* The Backward node of forward node fn (n_in inputs, one output): own attributes, then fn's. */
static void backward_node(test_node *bn, const test_node *fn, int n_in) {
    node_init(bn, "Backward", 1);
    set_str(bn, "op", fn->node.op_type);
    set_int(bn, "fwd_opset", fn->node.opset);
    set_int(bn, "n_fwd_in", n_in);
    set_int(bn, "n_fwd_out", 1);
    for (int i = 0; i < fn->node.n_attrs; i++) bn->attrs[bn->node.n_attrs++] = fn->attrs[i];
}

/* Y of forward node fn on inputs in (omitted: NULL data) by its reference kernel. */
static graft_status forward(test_node *fn, tensor *in, int n_in, tensor *y, graft_err *e) {
    value_info vi[MAX_IN] = {{0}}, vo[1];
    const tensor *ins[MAX_IN] = {0};
    memset(vo, 0, sizeof vo);
    for (int i = 0; i < n_in; i++) {
        if (!in[i].data) continue;
        ins[i] = &in[i];
        vi[i].present = true;
        vi[i].dtype = in[i].dtype;
        vi[i].ndim = in[i].ndim;
        memcpy(vi[i].dims, in[i].dims, sizeof in[i].dims);
    }
    const op_def *def = op_find(fn->node.op_type);
    TRY(def->infer(&fn->node, vi, n_in, vo, 1, e));
    TRY(tensor_make(y, vo[0].dtype, vo[0].ndim, vo[0].dims, e));
    tensor *outs[1] = {y};
    op_call call = {&fn->node, ins, n_in, outs, 1, e};
    return def->reference(&call);
}

/* The Backward node's call on in, y, dy (NULL: none), writing the gradients wanted (bit i of
 * `want`) into din. */
typedef struct bwd_case {
    test_node bn;
    const tensor *ins[MAX_IN + 2];
    tensor din[MAX_IN];
    tensor *dins[MAX_IN];
    op_call call;
} bwd_case;

static void bwd_case_init(bwd_case *c, const test_node *fn, tensor *in, int n_in, tensor *y,
                          tensor *dy, unsigned want, graft_err *e) {
    memset(c, 0, sizeof *c);
    backward_node(&c->bn, fn, n_in);
    for (int i = 0; i < n_in; i++) {
        c->ins[i] = in[i].data ? &in[i] : NULL;
        if (!(want >> i & 1) || !in[i].data) continue;
        tensor_make(&c->din[i], in[i].dtype, in[i].ndim, in[i].dims, NULL);
        for (int64_t j = 0; j < tensor_numel(&c->din[i]); j++) tensor_set_f64(&c->din[i], j, NAN);
        c->dins[i] = &c->din[i];
    }
    c->ins[n_in] = y;
    c->ins[n_in + 1] = dy;
    c->call = (op_call){&c->bn.node, c->ins, n_in + 2, c->dins, n_in, e};
}

static void bwd_case_free(bwd_case *c) {
    for (int i = 0; i < MAX_IN; i++) tensor_release(&c->din[i]);
}

/* max |a - b| / max |b| over one gradient (NaN when a has one). */
static double rel_err(const tensor *a, const tensor *b) {
    double diff = 0.0, ref = 1e-30;
    for (int64_t i = 0; i < tensor_numel(b); i++) {
        double x = tensor_get_f64(a, i), y = tensor_get_f64(b, i);
        double d = fabs(x - y);
        if (!(d <= diff)) diff = d;
        ref = fmax(ref, fabs(y));
    }
    return diff / ref;
}

static cpu_backend *be;
static const cpu_fast_kernel *fast;

/* One case: forward, then the Backward node through the fast kernel and the reference kernel,
 * compared gradient by gradient. */
static void check_case(const char *name, test_node *fn, tensor *in, int n_in, unsigned want,
                       bool with_dy) {
    graft_err e = {0};
    tensor y = {0}, dy = {0};
    bwd_case f, r;
    if (forward(fn, in, n_in, &y, &e) != GRAFT_OK) {
        CHECK(name, false, "forward: %s", e.msg);
        return;
    }
    if (with_dy) rand_tensor(&dy, y.dtype, y.ndim, y.dims);
    bwd_case_init(&f, fn, in, n_in, &y, with_dy ? &dy : NULL, want, &e);
    bwd_case_init(&r, fn, in, n_in, &y, with_dy ? &dy : NULL, want, &e);
    void *state = NULL;
    bool handled = false;
    char why[1200] = "";
    if (op_find("Backward")->reference(&r.call) != GRAFT_OK)
        snprintf(why, sizeof why, "reference: %s", e.msg);
    else if (fast->run(be, &f.call, &state, &handled) != GRAFT_OK)
        snprintf(why, sizeof why, "fast kernel: %s", e.msg);
    else if (!handled)
        snprintf(why, sizeof why, "the fast kernel did not handle it");
    double worst = 0.0;
    for (int i = 0; i < n_in && !why[0]; i++) {
        if (!f.dins[i]) continue;
        double err = rel_err(&f.din[i], &r.din[i]);
        worst = fmax(worst, err);
        if (!(err < 1e-4)) snprintf(why, sizeof why, "gradient %d: rel err %.3g", i, err);
    }
    if (state && fast->free_state) fast->free_state(state);
    char label[160];
    snprintf(label, sizeof label, "backward_fast_%s (rel err %.2g)", name, worst);
    CHECK(label, !why[0], "%s", why);
    bwd_case_free(&f);
    bwd_case_free(&r);
    tensor_release(&y);
    tensor_release(&dy);
}

/* ---- Gemm ----------------------------------------------------------------------------------- */

static void test_gemm(void) {
    /* (M, K, N) = (5, 7, 6); C: none, scalar, (N), (1, N), (M, 1), (M, N) */
    static const int c_rank[] = {-1, 0, 1, 2, 2, 2};
    static const int64_t c_dims[][2] = {{0}, {0}, {6}, {1, 6}, {5, 1}, {5, 6}};
    int64_t m = 5, k = 7, n = 6;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int ci = 0; ci < 6; ci++) {
                test_node fn;
                node_init(&fn, "Gemm", 13);
                if (ta) set_int(&fn, "transA", 1);
                if (tb) set_int(&fn, "transB", 1);
                if (ci % 2) set_float(&fn, "alpha", 0.75f);
                if (ci >= 3) set_float(&fn, "beta", -1.5f);
                tensor in[3] = {{0}};
                int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? n : k, tb ? k : n};
                rand_tensor(&in[0], GRAFT_DTYPE_F32, 2, ad);
                rand_tensor(&in[1], GRAFT_DTYPE_F32, 2, bd);
                if (c_rank[ci] >= 0) rand_tensor(&in[2], GRAFT_DTYPE_F32, c_rank[ci], c_dims[ci]);
                char name[64];
                snprintf(name, sizeof name, "gemm_tA%d_tB%d_C%d", ta, tb, ci);
                check_case(name, &fn, in, c_rank[ci] >= 0 ? 3 : 2, 7u, true);
                for (int i = 0; i < 3; i++) tensor_release(&in[i]);
            }
    /* a BERT-sized linear layer's backward, and only dB wanted (the first trainable layer) */
    test_node fn;
    node_init(&fn, "Gemm", 13);
    set_int(&fn, "transB", 1);
    tensor in[3] = {{0}};
    int64_t ad[2] = {64, 96}, bd[2] = {80, 96}, cd[1] = {80};
    rand_tensor(&in[0], GRAFT_DTYPE_F32, 2, ad);
    rand_tensor(&in[1], GRAFT_DTYPE_F32, 2, bd);
    rand_tensor(&in[2], GRAFT_DTYPE_F32, 1, cd);
    check_case("gemm_linear_64x96x80", &fn, in, 3, 7u, true);
    check_case("gemm_only_dB", &fn, in, 3, 2u, true);
    check_case("gemm_no_dY", &fn, in, 3, 7u, false);
    for (int i = 0; i < 3; i++) tensor_release(&in[i]);
}

/* ---- MatMul --------------------------------------------------------------------------------- */

typedef struct mm_case {
    const char *name;
    int ra, rb;
    int64_t a[4], b[4];
} mm_case;

static const mm_case mm_cases[] = {
    {"2d", 2, 2, {5, 7}, {7, 6}},
    {"batched", 3, 3, {3, 5, 7}, {3, 7, 6}},
    {"batched_weight_2d", 3, 2, {4, 5, 7}, {7, 6}},
    {"weight_batched_a_2d", 2, 3, {5, 7}, {3, 7, 6}},
    {"broadcast_batch", 4, 4, {2, 1, 5, 7}, {1, 3, 7, 6}},
    {"broadcast_rank", 4, 3, {2, 3, 5, 7}, {3, 7, 6}},
    {"broadcast_ones", 4, 4, {2, 3, 5, 7}, {2, 1, 7, 6}},
    {"attention_heads", 4, 4, {2, 4, 16, 8}, {2, 4, 8, 16}},
    {"a_1d", 1, 3, {7}, {2, 7, 6}},
    {"b_1d", 3, 1, {2, 5, 7}, {7}},
    {"both_1d", 1, 1, {7}, {7}},
};

static void test_matmul(void) {
    for (size_t t = 0; t < sizeof mm_cases / sizeof *mm_cases; t++) {
        const mm_case *c = &mm_cases[t];
        test_node fn;
        node_init(&fn, "MatMul", 13);
        tensor in[2] = {{0}};
        rand_tensor(&in[0], GRAFT_DTYPE_F32, c->ra, c->a);
        rand_tensor(&in[1], GRAFT_DTYPE_F32, c->rb, c->b);
        char name[64];
        snprintf(name, sizeof name, "matmul_%s", c->name);
        check_case(name, &fn, in, 2, 3u, true);
        snprintf(name, sizeof name, "matmul_%s_only_dB", c->name);
        check_case(name, &fn, in, 2, 2u, true);
        tensor_release(&in[0]);
        tensor_release(&in[1]);
    }
}

/* ---- Conv ----------------------------------------------------------------------------------- */

/* A Conv case: spatial rank, group, bias, auto_pad (NULL: pads), dilations {0}: default. */
typedef struct conv_case {
    const char *name;
    int nsp, group, bias;
    const char *auto_pad;
    int64_t x[5], w[5], strides[3], dilations[3], pads[6];
} conv_case;

static const conv_case conv_cases[] = {
    {"2d_3x3_pad1_bias", 2, 1, 1, NULL, {2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {0}, {1, 1, 1, 1}},
    {"2d_stride2_pad1", 2, 1, 1, NULL, {3, 4, 9, 8}, {6, 4, 3, 3}, {2, 2}, {0}, {1, 1, 1, 1}},
    {"2d_asym_pads_nobias", 2, 1, 0, NULL, {1, 2, 5, 6}, {3, 2, 3, 2}, {1, 2}, {0}, {0, 1, 2, 0}},
    {"2d_dilation2", 2, 1, 1, NULL, {2, 2, 9, 9}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {2, 1, 1, 2}},
    {"2d_group2", 2, 2, 1, NULL, {2, 4, 7, 7}, {6, 2, 3, 3}, {2, 1}, {0}, {1, 1, 1, 1}},
    {"2d_depthwise", 2, 8, 1, NULL, {2, 8, 8, 8}, {8, 1, 3, 3}, {2, 2}, {0}, {1, 1, 1, 1}},
    {"2d_depthwise_x2_nobias",
     2,
     4,
     0,
     NULL,
     {3, 4, 7, 7},
     {8, 1, 3, 3},
     {1, 1},
     {0},
     {1, 1, 1, 1}},
    {"2d_1x1", 2, 1, 1, NULL, {2, 16, 5, 5}, {8, 16, 1, 1}, {1, 1}, {0}, {0}},
    {"2d_1x1_stride2", 2, 1, 0, NULL, {2, 8, 7, 7}, {16, 8, 1, 1}, {2, 2}, {0}, {0}},
    {"2d_same_upper_s2", 2, 1, 1, "SAME_UPPER", {1, 2, 6, 5}, {3, 2, 3, 3}, {2, 2}, {0}, {0}},
    {"2d_same_lower_k4", 2, 1, 1, "SAME_LOWER", {1, 2, 6, 5}, {3, 2, 4, 3}, {2, 2}, {0}, {0}},
    {"2d_valid", 2, 1, 0, "VALID", {2, 2, 6, 5}, {3, 2, 3, 2}, {1, 2}, {0}, {0}},
    {"2d_many_samples", 2, 1, 1, NULL, {9, 5, 6, 6}, {7, 5, 3, 3}, {1, 1}, {0}, {1, 1, 1, 1}},
    {"1d_stride2_dil2", 1, 1, 1, NULL, {2, 3, 11}, {4, 3, 3}, {2}, {2}, {2, 1}},
    {"1d_group3", 1, 3, 1, NULL, {2, 6, 8}, {3, 2, 3}, {1}, {0}, {1, 1}},
    {"3d_s2", 3, 1, 1, NULL, {1, 2, 4, 5, 4}, {2, 2, 2, 3, 2}, {2, 1, 2}, {0}, {1, 0, 1, 0, 1, 1}},
};

static void conv_node(test_node *fn, const conv_case *k) {
    node_init(fn, "Conv", 11);
    set_ints(fn, "strides", k->nsp, k->strides);
    if (k->dilations[0]) set_ints(fn, "dilations", k->nsp, k->dilations);
    if (k->auto_pad)
        set_str(fn, "auto_pad", k->auto_pad);
    else if (k->pads[0] || k->pads[1] || k->pads[2] || k->pads[3])
        set_ints(fn, "pads", 2 * k->nsp, k->pads);
    if (k->group != 1) set_int(fn, "group", k->group);
}

static void test_conv(void) {
    for (size_t t = 0; t < sizeof conv_cases / sizeof *conv_cases; t++) {
        const conv_case *k = &conv_cases[t];
        test_node fn;
        conv_node(&fn, k);
        tensor in[3] = {{0}};
        rand_tensor(&in[0], GRAFT_DTYPE_F32, k->nsp + 2, k->x);
        rand_tensor(&in[1], GRAFT_DTYPE_F32, k->nsp + 2, k->w);
        if (k->bias) rand_tensor(&in[2], GRAFT_DTYPE_F32, 1, k->w);
        char name[64];
        snprintf(name, sizeof name, "conv%s", k->name);
        check_case(name, &fn, in, k->bias ? 3 : 2, 7u, true);
        snprintf(name, sizeof name, "conv%s_only_dW", k->name);
        check_case(name, &fn, in, k->bias ? 3 : 2, 2u, true);
        for (int i = 0; i < 3; i++) tensor_release(&in[i]);
    }
}

/* ---- what the kernel declines --------------------------------------------------------------- */

static void check_declined(const char *name, test_node *fn, tensor *in, int n_in) {
    graft_err e = {0};
    tensor y = {0}, dy = {0};
    bwd_case f;
    graft_status st = forward(fn, in, n_in, &y, &e);
    if (st == GRAFT_OK) rand_tensor(&dy, y.dtype, y.ndim, y.dims);
    bwd_case_init(&f, fn, in, n_in, &y, &dy, 1u, &e);
    void *state = NULL;
    bool handled = true;
    if (st == GRAFT_OK) st = fast->run(be, &f.call, &state, &handled);
    if (state && fast->free_state) fast->free_state(state);
    CHECK(name, st == GRAFT_OK && !handled, "status %d, handled %d: %s", (int)st, (int)handled,
          e.msg);
    bwd_case_free(&f);
    tensor_release(&y);
    tensor_release(&dy);
}

static void test_declined(void) {
    test_node fn;
    tensor in[2] = {{0}};
    int64_t d[2] = {4, 5}, d2[2] = {5, 3};
    node_init(&fn, "Relu", 14);
    rand_tensor(&in[0], GRAFT_DTYPE_F32, 2, d);
    check_declined("backward_fast_declines_relu", &fn, in, 1);
    tensor_release(&in[0]);
    node_init(&fn, "MatMul", 13);
    rand_tensor(&in[0], GRAFT_DTYPE_F64, 2, d);
    rand_tensor(&in[1], GRAFT_DTYPE_F64, 2, d2);
    check_declined("backward_fast_declines_f64_matmul", &fn, in, 2);
    tensor_release(&in[0]);
    tensor_release(&in[1]);
}

/* ---- speed ---------------------------------------------------------------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A ResNet stage-3 3x3 Conv (N 16, C 256, 14x14) backward: dX, dW, dB, fast vs reference. */
static void time_resnet_conv(void) {
    static const conv_case k = {
        "", 2, 1, 1, NULL, {16, 256, 14, 14}, {256, 256, 3, 3}, {1, 1}, {0}, {1, 1, 1, 1}};
    test_node fn;
    conv_node(&fn, &k);
    tensor in[3] = {{0}}, y = {0}, dy = {0};
    rand_tensor(&in[0], GRAFT_DTYPE_F32, 4, k.x);
    rand_tensor(&in[1], GRAFT_DTYPE_F32, 4, k.w);
    rand_tensor(&in[2], GRAFT_DTYPE_F32, 1, k.w);
    graft_err e = {0};
    bwd_case f, r;
    graft_status st = forward(&fn, in, 3, &y, &e);
    if (st == GRAFT_OK) rand_tensor(&dy, y.dtype, y.ndim, y.dims);
    bwd_case_init(&f, &fn, in, 3, &y, &dy, 7u, &e);
    bwd_case_init(&r, &fn, in, 3, &y, &dy, 7u, &e);
    void *state = NULL;
    bool handled = false;
    if (st == GRAFT_OK) st = fast->run(be, &f.call, &state, &handled); /* warm up */
    double t0 = now();
    for (int i = 0; i < 3 && st == GRAFT_OK; i++) st = fast->run(be, &f.call, &state, &handled);
    double t_fast = (now() - t0) / 3, t1 = now();
    if (st == GRAFT_OK) st = op_find("Backward")->reference(&r.call);
    double t_ref = now() - t1;
    if (st == GRAFT_OK && handled)
        printf("speed: Conv 3x3 backward N=16 C=256 14x14: fast %.1f ms, reference %.1f ms "
               "(%.1fx)\n",
               1e3 * t_fast, 1e3 * t_ref, t_ref / t_fast);
    char name[96];
    snprintf(name, sizeof name, "backward_fast_resnet_conv_matches (rel err %.2g)",
             st == GRAFT_OK ? rel_err(&f.din[1], &r.din[1]) : 0.0);
    CHECK(name,
          st == GRAFT_OK && handled && rel_err(&f.din[0], &r.din[0]) < 1e-4 &&
              rel_err(&f.din[1], &r.din[1]) < 1e-4 && rel_err(&f.din[2], &r.din[2]) < 1e-4,
          "%s", st == GRAFT_OK ? "gradients differ" : e.msg);
    if (state && fast->free_state) fast->free_state(state);
    bwd_case_free(&f);
    bwd_case_free(&r);
    for (int i = 0; i < 3; i++) tensor_release(&in[i]);
    tensor_release(&y);
    tensor_release(&dy);
}

int main(void) {
    graft_backend gb;
    graft_err e = {0};
    if (cpu_backend_create(0, false, &gb, &e) != GRAFT_OK) {
        printf("FAIL cpu_backend_create: %s\n", e.msg);
        return 1;
    }
    be = gb.impl;
    fast = cpu_fast_kernel_find("Backward");
    if (!fast) {
        SKIP("backward_fast", "no fast Backward kernel in this build (oneDNN disabled)");
    } else {
        test_gemm();
        test_matmul();
        test_conv();
        test_declined();
        time_resnet_conv();
    }
    gb.destroy(gb.impl);
    printf("%d failure(s)\n", test_failures);
    return test_failures ? 1 : 0;
}

/* test_grad.c: checks every backward rule and loss against central finite differences in f64
 * (and the f32 rules against the f64 ones), and the losses against PyTorch's recorded values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/loss.h"
#include "grad_check.h"

/* Dropout's ratio and training_mode take no gradient. */
static void run_and_free(const char *name, test_node *tn, tensor *in, int n_in, int n_out,
                         op_compute_fn fwd) {
    grad_check_case(name, tn, in, n_in, n_out, fwd, NULL,
                    strcmp(tn->node.op_type, "Dropout") ? 0u : 6u);
}

/* ---- the rules' cases ----------------------------------------------------------------------- */

static void test_gemm(void) {
    static const struct {
        const char *name;
        int64_t m, n, k;
        int ta, tb, c_ndim;
        int64_t c_dims[2];
        float alpha, beta;
    } cs[] = {
        {"grad_gemm_bias_row", 3, 4, 5, 0, 1, 1, {4}, 1.0f, 1.0f},
        {"grad_gemm_transA", 4, 3, 2, 1, 0, 2, {4, 3}, 0.5f, 2.0f},
        {"grad_gemm_transAB_colC", 2, 5, 3, 1, 1, 2, {2, 1}, -1.5f, 0.75f},
        {"grad_gemm_scalarC", 3, 3, 4, 0, 0, 0, {0}, 1.25f, -0.5f},
        {"grad_gemm_noC", 5, 2, 3, 0, 1, -1, {0}, 2.0f, 1.0f},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Gemm", 13);
        set_int(&tn, "transA", cs[t].ta);
        set_int(&tn, "transB", cs[t].tb);
        set_float(&tn, "alpha", cs[t].alpha);
        set_float(&tn, "beta", cs[t].beta);
        tensor in[3] = {{0}};
        int64_t ad[2] = {cs[t].ta ? cs[t].k : cs[t].m, cs[t].ta ? cs[t].m : cs[t].k};
        int64_t bd[2] = {cs[t].tb ? cs[t].n : cs[t].k, cs[t].tb ? cs[t].k : cs[t].n};
        rand_tensor(&in[0], 2, ad, 1.0);
        rand_tensor(&in[1], 2, bd, 1.0);
        if (cs[t].c_ndim >= 0) rand_tensor(&in[2], cs[t].c_ndim, cs[t].c_dims, 1.0);
        run_and_free(cs[t].name, &tn, in, cs[t].c_ndim >= 0 ? 3 : 2, 1, NULL);
    }
}

static void test_matmul(void) {
    static const struct {
        const char *name;
        int na, nb;
        int64_t a[4], b[4];
    } cs[] = {
        {"grad_matmul_2d", 2, 2, {3, 4}, {4, 5}},
        {"grad_matmul_batched", 3, 3, {2, 3, 4}, {2, 4, 2}},
        {"grad_matmul_bcast_b", 4, 2, {2, 3, 2, 4}, {4, 3}},
        {"grad_matmul_bcast_a", 2, 3, {3, 4}, {2, 4, 5}},
        {"grad_matmul_bcast_both", 4, 4, {2, 1, 3, 4}, {1, 3, 4, 2}},
        {"grad_matmul_vec_mat", 1, 3, {4}, {2, 4, 3}},
        {"grad_matmul_mat_vec", 3, 1, {2, 3, 4}, {4}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "MatMul", 13);
        tensor in[2] = {{0}};
        rand_tensor(&in[0], cs[t].na, cs[t].a, 1.0);
        rand_tensor(&in[1], cs[t].nb, cs[t].b, 1.0);
        run_and_free(cs[t].name, &tn, in, 2, 1, NULL);
    }
}

static void test_add(void) {
    static const struct {
        const char *name;
        int na, nb;
        int64_t a[3], b[3];
    } cs[] = {
        {"grad_add_same", 2, 2, {3, 4}, {3, 4}},
        {"grad_add_row_bias", 2, 1, {3, 4}, {4}},
        {"grad_add_col_bcast", 3, 2, {2, 3, 4}, {3, 1}},
        {"grad_add_both_bcast", 3, 3, {2, 1, 4}, {1, 3, 1}},
        {"grad_add_scalar", 0, 2, {0}, {2, 3}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Add", 14);
        tensor in[2] = {{0}};
        rand_tensor(&in[0], cs[t].na, cs[t].a, 1.0);
        rand_tensor(&in[1], cs[t].nb, cs[t].b, 1.0);
        run_and_free(cs[t].name, &tn, in, 2, 1, NULL);
    }
}

static void test_unary(void) {
    static const struct {
        const char *name, *op, *approx;
        int opset, ndim;
        int64_t dims[3];
        double scale;
    } cs[] = {
        {"grad_relu", "Relu", NULL, 14, 2, {4, 5}, 1.0},
        {"grad_relu_3d", "Relu", NULL, 14, 3, {2, 3, 4}, 2.0},
        {"grad_gelu_erf", "Gelu", NULL, 20, 2, {4, 6}, 3.0},
        {"grad_gelu_tanh", "Gelu", "tanh", 20, 2, {4, 6}, 3.0},
        {"grad_tanh", "Tanh", NULL, 13, 2, {3, 7}, 2.0},
        {"grad_sigmoid", "Sigmoid", NULL, 13, 3, {2, 2, 5}, 4.0},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, cs[t].op, cs[t].opset);
        if (cs[t].approx) set_str(&tn, "approximate", cs[t].approx);
        tensor in[1] = {{0}};
        rand_tensor(&in[0], cs[t].ndim, cs[t].dims, cs[t].scale);
        run_and_free(cs[t].name, &tn, in, 1, 1, NULL);
    }
}

/* The activations of fine-tuned MobileNetV3 / EfficientNet / ELU blocks, with attributes that
 * differ from the defaults where the op has them (scale 4 reaches HardSwish's and HardSigmoid's
 * saturated ends). */
static void test_exporter_activations(void) {
    static const struct {
        const char *name, *op;
        int opset;
        const char *attr1, *attr2;
        float v1, v2;
    } cs[] = {
        {"grad_hardsigmoid", "HardSigmoid", 6, NULL, NULL, 0, 0},
        {"grad_hardsigmoid_attrs", "HardSigmoid", 6, "alpha", "beta", 0.3f, 0.4f},
        {"grad_hardswish", "HardSwish", 14, NULL, NULL, 0, 0},
        {"grad_elu", "Elu", 6, NULL, NULL, 0, 0},
        {"grad_elu_alpha", "Elu", 6, "alpha", NULL, 0.5f, 0},
        {"grad_softplus", "Softplus", 1, NULL, NULL, 0, 0},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, cs[t].op, cs[t].opset);
        if (cs[t].attr1) set_float(&tn, cs[t].attr1, cs[t].v1);
        if (cs[t].attr2) set_float(&tn, cs[t].attr2, cs[t].v2);
        tensor in[1] = {{0}};
        int64_t dims[2] = {6, 7};
        rand_tensor(&in[0], 2, dims, 4.0);
        run_and_free(cs[t].name, &tn, in, 1, 1, NULL);
    }
}

/* PRelu with the slopes exporters write: per channel (C, 1, 1), one shared, one per element. */
static void test_prelu(void) {
    static const struct {
        const char *name;
        int ns;
        int64_t s[3];
    } cs[] = {
        {"grad_prelu_channel", 3, {3, 1, 1}},
        {"grad_prelu_shared", 1, {1}},
        {"grad_prelu_same", 3, {3, 2, 4}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "PRelu", 16);
        tensor in[2] = {{0}};
        int64_t xd[4] = {2, 3, 2, 4};
        rand_tensor(&in[0], 4, xd, 2.0);
        rand_tensor(&in[1], cs[t].ns, cs[t].s, 0.5);
        run_and_free(cs[t].name, &tn, in, 2, 1, NULL);
    }
}

/* Training-mode Dropout forward with a fixed mask (the reference kernel runs inference only). */
static uint64_t dropout_seed;

static graft_status dropout_train(const op_call *c) {
    double ratio = tensor_get_f64(c->in[1], 0);
    uint64_t st = dropout_seed;
    for (int64_t i = 0; i < tensor_numel(c->in[0]); i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        bool keep = (double)(st >> 11) / 9007199254740992.0 >= ratio;
        ((uint8_t *)c->out[1]->data)[i] = keep;
        tensor_set_f64(c->out[0], i, keep ? tensor_get_f64(c->in[0], i) / (1.0 - ratio) : 0.0);
    }
    return GRAFT_OK;
}

static void test_dropout(void) {
    static const double ratios[] = {0.3, 0.5, 0.0};
    for (int t = 0; t < 3; t++) {
        char name[64];
        snprintf(name, sizeof name, "grad_dropout_train_ratio%.1f", ratios[t]);
        test_node tn;
        node_init(&tn, "Dropout", 13);
        tensor in[3] = {{0}};
        int64_t d[2] = {5, 6}, one[1] = {1};
        rand_tensor(&in[0], 2, d, 1.0);
        tensor_make(&in[1], GRAFT_DTYPE_F64, 0, one, NULL);
        ((double *)in[1].data)[0] = ratios[t];
        tensor_make(&in[2], GRAFT_DTYPE_BOOL, 0, one, NULL);
        ((uint8_t *)in[2].data)[0] = 1;
        dropout_seed = 1234 + (uint64_t)t;
        run_and_free(name, &tn, in, 3, 2, dropout_train);
    }
    test_node tn;
    node_init(&tn, "Dropout", 13);
    tensor in[1] = {{0}};
    int64_t d[2] = {3, 4};
    rand_tensor(&in[0], 2, d, 1.0);
    run_and_free("grad_dropout_inference", &tn, in, 1, 2, NULL);
}

/* Cast: float to float passes the gradient back in the input's dtype, so a bf16/fp16 input's
 * gradient is the output's rounded there (what mixed precision's round trips rely on); f64 to
 * f64 is checked by finite differences. */
static void test_cast(void) {
    test_node tn;
    node_init(&tn, "Cast", 13);
    set_int(&tn, "to", GRAFT_DTYPE_F64);
    tensor in[1] = {{0}};
    int64_t d[2] = {3, 5};
    rand_tensor(&in[0], 2, d, 1.0);
    run_and_free("grad_cast_f64", &tn, in, 1, 1, NULL);
    static const graft_dtype halves[] = {GRAFT_DTYPE_BF16, GRAFT_DTYPE_F16};
    for (int h = 0; h < 2; h++) {
        node_init(&tn, "Cast", 13);
        set_int(&tn, "to", GRAFT_DTYPE_F32);
        tensor x = {0}, y = {0}, dy = {0}, dx = {0};
        int64_t n[1] = {64};
        tensor_make(&x, halves[h], 1, n, NULL);
        tensor_make(&dx, halves[h], 1, n, NULL);
        tensor_make(&y, GRAFT_DTYPE_F32, 1, n, NULL);
        tensor_make(&dy, GRAFT_DTYPE_F32, 1, n, NULL);
        for (int i = 0; i < 64; i++) ((float *)dy.data)[i] = 1.0f + (float)i / 300.0f + 1e-4f;
        const tensor *ins[1] = {&x}, *outs[1] = {&y}, *douts[1] = {&dy};
        tensor *dins[1] = {&dx};
        graft_err e = {0};
        grad_call gc = {&tn.node, ins, 1, outs, 1, douts, dins, &e};
        bool ok = grad_find("Cast")(&gc) == GRAFT_OK, rounded = false;
        for (int i = 0; ok && i < 64; i++) {
            double got = tensor_get_f64(&dx, i), want = ((float *)dy.data)[i];
            ok = fabs(got - want) <= (h ? 1e-3 : 8e-3) * want; /* within half a unit */
            rounded = rounded || got != want;
        }
        CHECK(h ? "grad_cast_f16_rounds" : "grad_cast_bf16_rounds", ok && rounded, "%s",
              e.msg[0] ? e.msg : "the gradient is not the output's, rounded");
        tensor_release(&x), tensor_release(&y), tensor_release(&dy), tensor_release(&dx);
    }
}

static void test_layernorm(void) {
    static const struct {
        const char *name;
        int ndim, axis, s_ndim, b_ndim;
        int64_t dims[3], s_dims[2], b_dims[2];
    } cs[] = {
        {"grad_layernorm_last", 2, -1, 1, 1, {4, 6}, {6}, {6}},
        {"grad_layernorm_axis1", 3, 1, 2, 2, {2, 3, 4}, {3, 4}, {3, 4}},
        {"grad_layernorm_nobias", 3, -1, 1, -1, {2, 3, 5}, {5}, {0}},
        {"grad_layernorm_bcast_scale", 3, 1, 2, 1, {2, 3, 4}, {1, 4}, {4}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "LayerNormalization", 17);
        set_int(&tn, "axis", cs[t].axis);
        set_float(&tn, "epsilon", 1e-3f);
        tensor in[3] = {{0}};
        rand_tensor(&in[0], cs[t].ndim, cs[t].dims, 2.0);
        rand_tensor(&in[1], cs[t].s_ndim, cs[t].s_dims, 1.5);
        if (cs[t].b_ndim >= 0) rand_tensor(&in[2], cs[t].b_ndim, cs[t].b_dims, 1.0);
        run_and_free(cs[t].name, &tn, in, cs[t].b_ndim >= 0 ? 3 : 2, 1, NULL);
    }
}

static void test_softmax(void) {
    static const struct {
        const char *name;
        int opset, axis, ndim;
        int64_t dims[3];
    } cs[] = {
        {"grad_softmax_last", 13, -1, 2, {4, 5}},
        {"grad_softmax_axis1_of3", 13, 1, 3, {2, 4, 3}},
        {"grad_softmax_axis0", 13, 0, 2, {3, 4}},
        {"grad_softmax_opset11_flatten", 11, 1, 3, {2, 3, 4}},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        test_node tn;
        node_init(&tn, "Softmax", cs[t].opset);
        set_int(&tn, "axis", cs[t].axis);
        tensor in[1] = {{0}};
        rand_tensor(&in[0], cs[t].ndim, cs[t].dims, 2.0);
        run_and_free(cs[t].name, &tn, in, 1, 1, NULL);
    }
}

/* ---- losses: finite differences in f64 ------------------------------------------------------ */

static void loss_fd_case(const char *name, const loss_spec *spec, int64_t n, int64_t c,
                         const void *targets, double scale) {
    double *x = malloc((size_t)(n * c) * sizeof(double)),
           *g = malloc((size_t)(n * c) * sizeof(double));
    for (int64_t i = 0; i < n * c; i++) x[i] = scale * rand_uniform();
    graft_err err = {0};
    double loss, lp, lm, num = 0.0, den = 1e-300;
    graft_status st = loss_compute_f64(&loss, g, spec, x, targets, n, c, &err);
    for (int64_t i = 0; i < n * c && st == GRAFT_OK; i++) {
        double keep = x[i], h = 1e-6;
        x[i] = keep + h;
        loss_compute_f64(&lp, NULL, spec, x, targets, n, c, NULL);
        x[i] = keep - h;
        loss_compute_f64(&lm, NULL, spec, x, targets, n, c, NULL);
        x[i] = keep;
        double fd = (lp - lm) / (2 * h);
        num = fmax(num, fabs(fd - g[i]));
        den = fmax(den, fabs(fd));
    }
    CHECK(name, st == GRAFT_OK && num / den < 1e-6, "status %d (%s), rel err %.3g", (int)st,
          err.msg, num / den);
    free(x);
    free(g);
}

static void test_loss_fd(void) {
    enum { N = 6, C = 5 };
    int64_t cls[N];
    float t01[N * C], treal[N * C], w[C], pw[C];
    for (int i = 0; i < N; i++) cls[i] = (int64_t)((rand_uniform() + 1.0) * 0.5 * C) % C;
    for (int i = 0; i < N * C; i++) {
        t01[i] = (float)(0.5 + 0.5 * rand_uniform());
        treal[i] = (float)(2.0 * rand_uniform());
    }
    for (int k = 0; k < C; k++) {
        w[k] = (float)(1.1 + rand_uniform());
        pw[k] = (float)(1.5 + rand_uniform());
    }
    loss_spec ce = {.kind = LOSS_SOFTMAX_CE};
    loss_fd_case("loss_fd_ce", &ce, N, C, cls, 2.0);
    ce.label_smoothing = 0.15;
    loss_fd_case("loss_fd_ce_smooth", &ce, N, C, cls, 2.0);
    ce.class_weight = w;
    loss_fd_case("loss_fd_ce_smooth_weight", &ce, N, C, cls, 2.0);
    ce.label_smoothing = 0.0;
    loss_fd_case("loss_fd_ce_weight", &ce, N, C, cls, 2.0);
    loss_spec bce = {.kind = LOSS_BCE_LOGITS};
    loss_fd_case("loss_fd_bce", &bce, N, C, t01, 4.0);
    bce.pos_weight = pw;
    loss_fd_case("loss_fd_bce_pos_weight", &bce, N, C, t01, 4.0);
    loss_spec mse = {.kind = LOSS_MSE};
    loss_fd_case("loss_fd_mse", &mse, N, C, treal, 2.0);
}

static void test_loss_errors(void) {
    double x[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, loss;
    float xf[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, g[6];
    int64_t bad[2] = {1, 3};
    graft_err err = {0};
    loss_spec ce = {.kind = LOSS_SOFTMAX_CE};
    graft_status st = loss_compute_f64(&loss, NULL, &ce, x, bad, 2, 3, &err);
    CHECK("loss_ce_class_out_of_range",
          st == GRAFT_E_INVALID_ARGUMENT && strstr(err.msg, "sample 1"), "status %d, message '%s'",
          (int)st, err.msg);
    float t[6] = {0, 1, NAN, 0, 1, 0};
    loss_spec bce = {.kind = LOSS_BCE_LOGITS};
    st = loss_compute(&loss, g, &bce, xf, t, 2, 3, &err);
    CHECK("loss_bce_nan_target", st == GRAFT_E_INVALID_ARGUMENT && strstr(err.msg, "sample 0"),
          "status %d, message '%s'", (int)st, err.msg);
    ce.label_smoothing = 1.5;
    int64_t ok[2] = {0, 2};
    st = loss_compute(&loss, g, &ce, xf, ok, 2, 3, &err);
    CHECK("loss_ce_bad_smoothing", st == GRAFT_E_INVALID_ARGUMENT, "status %d", (int)st);
}

/* ---- losses against PyTorch ----------------------------------------------------------------- */

/* The number array after "key": in line (count in *n); NULL when absent. */
static double *json_array(const char *line, const char *key, int64_t *n) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    *n = 0;
    if (!p) return NULL;
    p += strlen(pat);
    if (*p != '[') { /* a single number */
        double *v = malloc(sizeof(double));
        *v = strtod(p, NULL);
        *n = 1;
        return v;
    }
    int64_t cap = 16;
    double *v = malloc((size_t)cap * sizeof(double));
    p++;
    while (*p && *p != ']') {
        char *end;
        double d = strtod(p, &end);
        if (end == p) break;
        if (*n == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof(double));
        v[(*n)++] = d;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    return v;
}

static double json_num(const char *line, const char *key) {
    int64_t n;
    double *v = json_array(line, key, &n), r = n ? v[0] : NAN;
    free(v);
    return r;
}

static void fixture_case(const char *line) {
    char name[96] = "loss_torch_?";
    const char *np = strstr(line, "\"name\":\"");
    if (np) snprintf(name, sizeof name, "loss_torch_%.*s", (int)strcspn(np + 8, "\""), np + 8);
    int64_t n = (int64_t)json_num(line, "n"), c = (int64_t)json_num(line, "c"), nl, nt, nw, ng;
    double *logits = json_array(line, "logits", &nl), *targets = json_array(line, "targets", &nt);
    double *weight = json_array(line, "weight", &nw), *grad = json_array(line, "grad", &ng);
    float *xf = malloc((size_t)(nl + 1) * sizeof(float)),
          *tf = malloc((size_t)(nt + 1) * sizeof(float));
    float *wf = malloc((size_t)(nw + 1) * sizeof(float)),
          *g = malloc((size_t)(nl + 1) * sizeof(float));
    int64_t *ti = malloc((size_t)(nt + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < nl; i++) xf[i] = (float)logits[i];
    for (int64_t i = 0; i < nt; i++) {
        tf[i] = (float)targets[i];
        ti[i] = (int64_t)targets[i];
    }
    for (int64_t i = 0; i < nw; i++) wf[i] = (float)weight[i];
    loss_spec spec = {0};
    bool ce = strstr(line, "\"kind\":\"ce\"") != NULL,
         bce = strstr(line, "\"kind\":\"bce\"") != NULL;
    spec.kind = ce ? LOSS_SOFTMAX_CE : bce ? LOSS_BCE_LOGITS : LOSS_MSE;
    spec.label_smoothing = json_num(line, "smoothing");
    if (ce && nw) spec.class_weight = wf;
    if (bce && nw) spec.pos_weight = wf;
    graft_err err = {0};
    double loss = NAN, want = json_num(line, "loss"), gerr = 0.0;
    graft_status st = GRAFT_E_INVALID_ARGUMENT;
    if (nl == n * c && ng == nl && nt == (ce ? n : n * c))
        st = loss_compute(&loss, g, &spec, xf, ce ? (const void *)ti : tf, n, c, &err);
    for (int64_t i = 0; st == GRAFT_OK && i < ng; i++)
        gerr = fmax(gerr, fabs(g[i] - grad[i]) / (1e-5 * fabs(grad[i]) + 1e-7));
    CHECK(name, st == GRAFT_OK && fabs(loss - want) <= 1e-5 * fabs(want) && gerr <= 1.0,
          "status %d (%s): loss %.9g vs torch %.9g, worst grad error %.3g x tolerance", (int)st,
          err.msg, loss, want, gerr);
    free(logits);
    free(targets);
    free(weight);
    free(grad);
    free(xf);
    free(tf);
    free(wf);
    free(g);
    free(ti);
}

static void test_loss_fixtures(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL loss_torch_fixtures: cannot open %s\n", path);
        test_failures++;
        return;
    }
    size_t cap = 1 << 16, len = 0;
    char *line = malloc(cap);
    int count = 0, ch;
    while ((ch = fgetc(f)) != EOF) {
        if (len + 1 >= cap) line = realloc(line, cap *= 2);
        if (ch != '\n') {
            line[len++] = (char)ch;
            continue;
        }
        line[len] = 0;
        if (line[0] == '{') {
            fixture_case(line);
            count++;
        }
        len = 0;
    }
    free(line);
    fclose(f);
    CHECK("loss_torch_fixture_count", count >= 8, "%d cases in %s", count, path);
}

int main(int argc, char **argv) {
    const char *fixtures = argc > 1 ? argv[1] : "tests/data/loss_fixtures.json";
    test_gemm();
    test_matmul();
    test_add();
    test_unary();
    test_exporter_activations();
    test_prelu();
    test_dropout();
    test_cast();
    test_layernorm();
    test_softmax();
    CHECK("grad_find_unknown", grad_find("LSTM") == NULL && grad_find("Gemm") == grad_Gemm,
          "grad_find gives the wrong rule");
    test_loss_fd();
    test_loss_errors();
    test_loss_fixtures(fixtures);
    return test_failures ? 1 : 0;
}

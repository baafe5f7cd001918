/* test_nn_kernels.c: runs Conv, MatMul, Gemm and the pools on random inputs through both the
 * oneDNN kernels and the reference kernels and compares them (rtol 1e-4). */
#include "graft_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_backend.h"
#include "ops/op.h"
#include "test_node.h"

#if !GRAFT_HAVE_DNNL
int main(void) {
    printf("SKIP nn_kernels: graft was built without oneDNN\n");
    return 0;
}
#else

static int failures;

/* ---- building nodes and tensors by hand ---------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rand_uniform(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
}

static void random_tensor(tensor *t, int ndim, const int64_t *dims) {
    tensor_make(t, GRAFT_DTYPE_F32, ndim, dims, NULL);
    float *v = t->data;
    for (int64_t i = 0; i < tensor_numel(t); i++) v[i] = rand_uniform();
}

/* ---- running one case both ways ------------------------------------------------------------ */

typedef graft_status (*infer_fn)(const ir_node *, const value_info *, int, value_info *, int,
                                 graft_err *);

/* Infer the output, run the oneDNN kernel (fresh state, then with new activations, then with
 * weights changed in place) and the reference, and compare. */
static void run_case(const char *name, test_node *tn, cpu_backend *be, infer_fn infer,
                     op_compute_fn ref, cpu_fast_fn fast, tensor *in, int n_in) {
    graft_err err = {0};
    value_info vi[3] = {{0}}, vo[1];
    const tensor *ins[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n_in; i++) {
        if (!in[i].data) continue;
        ins[i] = &in[i];
        vi[i].present = true;
        vi[i].dtype = in[i].dtype;
        vi[i].ndim = in[i].ndim;
        memcpy(vi[i].dims, in[i].dims, sizeof in[i].dims);
        vi[i].value = &in[i];
    }
    if (infer(&tn->node, vi, n_in, vo, 1, &err) != GRAFT_OK) {
        printf("FAIL %s: inference: %s\n", name, err.msg);
        failures++;
        return;
    }
    tensor want, got;
    tensor_make(&want, vo[0].dtype, vo[0].ndim, vo[0].dims, NULL);
    tensor_make(&got, vo[0].dtype, vo[0].ndim, vo[0].dims, NULL);
    tensor *want_out[1] = {&want}, *got_out[1] = {&got};
    op_call rc = {&tn->node, ins, n_in, want_out, 1, &err};
    op_call fc = {&tn->node, ins, n_in, got_out, 1, &err};
    void *state = NULL;
    char why[1200] = "";
    for (int round = 0; round < 3 && !why[0]; round++) {
        /* round 1: new activations, same weights (the cached state serves); round 2: weights
         * changed in place at the same address (the cached state must notice) */
        tensor *changed = round == 1 ? &in[0] : round == 2 && n_in > 1 ? &in[1] : NULL;
        if (changed)
            for (int64_t i = 0; i < tensor_numel(changed); i++)
                ((float *)changed->data)[i] = rand_uniform();
        bool handled = false;
        if (ref(&rc) != GRAFT_OK)
            snprintf(why, sizeof why, "reference: %s", err.msg);
        else if (fast(be, &fc, &state, &handled) != GRAFT_OK)
            snprintf(why, sizeof why, "oneDNN: %s", err.msg);
        else if (!handled)
            snprintf(why, sizeof why, "oneDNN kernel did not handle the case");
        const float *w = want.data, *g = got.data;
        for (int64_t i = 0; !why[0] && i < tensor_numel(&want); i++)
            if (!(fabsf(w[i] - g[i]) <= 1e-4f * fabsf(w[i]) + 1e-4f))
                snprintf(why, sizeof why, "round %d element %lld: oneDNN %.7g, reference %.7g",
                         round, (long long)i, g[i], w[i]);
    }
    if (state) dnnl_free_state(state);
    if (why[0]) {
        printf("FAIL %s: %s\n", name, why);
        failures++;
    } else {
        printf("PASS %s\n", name);
    }
    fflush(stdout);
    tensor_release(&want);
    tensor_release(&got);
}

/* ---- Conv ---------------------------------------------------------------------------------- */

typedef struct conv_case {
    const char *name;
    int nsp;
    int64_t n, c, m, in[3], k[3], stride, pad_b, pad_e, dilation, group;
    bool bias;
    const char *auto_pad;
} conv_case;

static const conv_case conv_cases[] = {
    {"conv2d_3x3_pad1", 2, 2, 8, 16, {9, 11}, {3, 3}, 1, 1, 1, 1, 1, true, NULL},
    {"conv2d_3x3_stride2_nobias", 2, 1, 4, 8, {13, 10}, {3, 3}, 2, 1, 1, 1, 1, false, NULL},
    {"conv2d_asym_pads", 2, 1, 3, 5, {7, 5}, {3, 3}, 2, 1, 0, 1, 1, true, NULL},
    {"conv2d_dilation2", 2, 2, 6, 6, {12, 12}, {3, 3}, 1, 2, 2, 2, 1, true, NULL},
    {"conv2d_groups2", 2, 1, 8, 12, {10, 10}, {3, 3}, 1, 1, 1, 1, 2, true, NULL},
    {"conv2d_depthwise", 2, 2, 16, 16, {14, 14}, {3, 3}, 2, 1, 1, 1, 16, true, NULL},
    {"conv2d_pointwise", 2, 2, 32, 64, {7, 7}, {1, 1}, 1, 0, 0, 1, 1, true, NULL},
    {"conv2d_7x7_stride2_rgb", 2, 1, 3, 16, {32, 32}, {7, 7}, 2, 3, 3, 1, 1, false, NULL},
    {"conv2d_same_upper", 2, 1, 4, 4, {9, 8}, {4, 3}, 2, 0, 0, 1, 1, true, "SAME_UPPER"},
    {"conv2d_same_lower", 2, 1, 4, 4, {9, 8}, {4, 3}, 2, 0, 0, 1, 1, true, "SAME_LOWER"},
    {"conv2d_valid", 2, 1, 4, 4, {9, 8}, {3, 3}, 2, 0, 0, 1, 1, true, "VALID"},
    {"conv1d_stride2_groups", 1, 2, 6, 9, {30}, {5}, 2, 2, 1, 1, 3, true, NULL},
    {"conv3d_pad1", 3, 1, 3, 4, {6, 7, 8}, {3, 3, 3}, 1, 1, 1, 1, 1, true, NULL},
};

static void test_conv(cpu_backend *be, const conv_case *cc) {
    test_node tn;
    node_init(&tn, "Conv", 13);
    int64_t kernel[3], strides[3], dil[3], pads[6];
    for (int i = 0; i < cc->nsp; i++) {
        kernel[i] = cc->k[i];
        strides[i] = cc->stride;
        dil[i] = cc->dilation;
        pads[i] = cc->pad_b;
        pads[i + cc->nsp] = cc->pad_e;
    }
    set_ints(&tn, "kernel_shape", cc->nsp, kernel);
    set_ints(&tn, "strides", cc->nsp, strides);
    set_ints(&tn, "dilations", cc->nsp, dil);
    if (cc->auto_pad)
        set_str(&tn, "auto_pad", cc->auto_pad);
    else
        set_ints(&tn, "pads", 2 * cc->nsp, pads);
    set_int(&tn, "group", cc->group);
    int64_t xd[5] = {cc->n, cc->c}, wd[5] = {cc->m, cc->c / cc->group}, bd[1] = {cc->m};
    for (int i = 0; i < cc->nsp; i++) {
        xd[i + 2] = cc->in[i];
        wd[i + 2] = cc->k[i];
    }
    tensor in[3] = {{0}};
    random_tensor(&in[0], cc->nsp + 2, xd);
    random_tensor(&in[1], cc->nsp + 2, wd);
    if (cc->bias) random_tensor(&in[2], 1, bd);
    run_case(cc->name, &tn, be, op_infer_Conv, ref_Conv, dnnl_run_Conv, in, cc->bias ? 3 : 2);
    for (int i = 0; i < 3; i++) tensor_release(&in[i]);
}

/* ---- MatMul and Gemm ----------------------------------------------------------------------- */

typedef struct matmul_case {
    const char *name;
    int na, nb;
    int64_t a[4], b[4];
} matmul_case;

static const matmul_case matmul_cases[] = {
    {"matmul_2d", 2, 2, {17, 33}, {33, 9}},
    {"matmul_batched_same", 3, 3, {4, 8, 16}, {4, 16, 5}},
    {"matmul_batch_broadcast_b", 4, 2, {2, 3, 7, 12}, {12, 10}},
    {"matmul_batch_broadcast_both", 4, 3, {3, 1, 6, 8}, {4, 8, 5}},
    {"matmul_batch_broadcast_a", 3, 4, {1, 5, 7}, {2, 3, 7, 4}},
    {"matmul_vector_a", 1, 3, {9}, {2, 9, 6}},
    {"matmul_vector_b", 3, 1, {2, 5, 9}, {9}},
    {"matmul_vector_vector", 1, 1, {64}, {64}},
    {"matmul_attention_like", 4, 4, {2, 4, 32, 16}, {2, 4, 16, 32}},
};

static void test_matmul(cpu_backend *be, const matmul_case *mc) {
    test_node tn;
    node_init(&tn, "MatMul", 13);
    tensor in[2] = {{0}};
    random_tensor(&in[0], mc->na, mc->a);
    random_tensor(&in[1], mc->nb, mc->b);
    run_case(mc->name, &tn, be, op_infer_MatMul, ref_MatMul, dnnl_run_MatMul, in, 2);
    for (int i = 0; i < 2; i++) tensor_release(&in[i]);
}

typedef struct gemm_case {
    const char *name;
    int64_t m, n, k;
    int trans_a, trans_b;
    float alpha, beta;
    int c_ndim; /* -1: no C */
    int64_t c[2];
} gemm_case;

static const gemm_case gemm_cases[] = {
    {"gemm_plain_no_c", 8, 10, 12, 0, 0, 1.0f, 1.0f, -1, {0}},
    {"gemm_transB_row_bias", 5, 20, 30, 0, 1, 1.0f, 1.0f, 1, {20}},
    {"gemm_transA_matrix_c", 7, 6, 9, 1, 0, 1.0f, 1.0f, 2, {7, 6}},
    {"gemm_both_trans_alpha_beta", 6, 7, 8, 1, 1, 0.25f, 0.35f, 2, {1, 7}},
    {"gemm_column_c", 9, 4, 5, 0, 0, 1.0f, 1.0f, 2, {9, 1}},
    {"gemm_scalar_c_beta", 3, 4, 5, 0, 1, 1.0f, 2.0f, 0, {0}},
    {"gemm_alpha_only_with_c", 4, 6, 3, 0, 0, 1.5f, 1.0f, 1, {6}},
    {"gemm_beta_zero", 4, 6, 3, 0, 0, 1.0f, 0.0f, 2, {4, 6}},
    {"gemm_linear_768", 4, 96, 768, 0, 1, 1.0f, 1.0f, 1, {96}},
};

static void test_gemm(cpu_backend *be, const gemm_case *gc) {
    test_node tn;
    node_init(&tn, "Gemm", 13);
    set_int(&tn, "transA", gc->trans_a);
    set_int(&tn, "transB", gc->trans_b);
    set_float(&tn, "alpha", gc->alpha);
    set_float(&tn, "beta", gc->beta);
    int64_t ad[2] = {gc->trans_a ? gc->k : gc->m, gc->trans_a ? gc->m : gc->k};
    int64_t bd[2] = {gc->trans_b ? gc->n : gc->k, gc->trans_b ? gc->k : gc->n};
    tensor in[3] = {{0}};
    random_tensor(&in[0], 2, ad);
    random_tensor(&in[1], 2, bd);
    if (gc->c_ndim >= 0) random_tensor(&in[2], gc->c_ndim, gc->c);
    run_case(gc->name, &tn, be, op_infer_Gemm, ref_Gemm, dnnl_run_Gemm, in,
             gc->c_ndim >= 0 ? 3 : 2);
    for (int i = 0; i < 3; i++) tensor_release(&in[i]);
}

/* ---- pools --------------------------------------------------------------------------------- */

typedef struct pool_case {
    const char *name;
    bool is_max;
    int64_t in[2], k, stride, pad, dilation;
    int ceil_mode, count_include_pad;
} pool_case;

static const pool_case pool_cases[] = {
    {"maxpool_3x3_stride2_pad1", true, {15, 14}, 3, 2, 1, 1, 0, 0},
    {"maxpool_ceil", true, {10, 11}, 3, 2, 0, 1, 1, 0},
    {"avgpool_exclude_pad", false, {12, 12}, 3, 1, 1, 1, 0, 0},
    {"avgpool_include_pad", false, {12, 13}, 3, 2, 1, 1, 0, 1},
    {"avgpool_ceil_exclude_pad", false, {9, 10}, 2, 2, 0, 1, 1, 0},
};

static void test_pool(cpu_backend *be, const pool_case *pc) {
    test_node tn;
    node_init(&tn, pc->is_max ? "MaxPool" : "AveragePool", pc->dilation > 1 ? 19 : 12);
    int64_t k[2] = {pc->k, pc->k}, s[2] = {pc->stride, pc->stride},
            d[2] = {pc->dilation, pc->dilation};
    int64_t pads[4] = {pc->pad, pc->pad, pc->pad, pc->pad};
    set_ints(&tn, "kernel_shape", 2, k);
    set_ints(&tn, "strides", 2, s);
    set_ints(&tn, "pads", 4, pads);
    if (pc->dilation > 1) set_ints(&tn, "dilations", 2, d);
    set_int(&tn, "ceil_mode", pc->ceil_mode);
    if (!pc->is_max) set_int(&tn, "count_include_pad", pc->count_include_pad);
    int64_t xd[4] = {2, 5, pc->in[0], pc->in[1]};
    tensor in[1] = {{0}};
    random_tensor(&in[0], 4, xd);
    run_case(pc->name, &tn, be, pc->is_max ? op_infer_MaxPool : op_infer_AveragePool,
             pc->is_max ? ref_MaxPool : ref_AveragePool,
             pc->is_max ? dnnl_run_MaxPool : dnnl_run_AveragePool, in, 1);
    tensor_release(&in[0]);
}

int main(void) {
    cpu_backend be;
    memset(&be, 0, sizeof be);
    graft_err err = {0};
    if (dnnl_backend_init(&be, &err) != GRAFT_OK) {
        printf("FAIL dnnl_backend_init: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
        test_conv(&be, &conv_cases[i]);
    for (size_t i = 0; i < sizeof matmul_cases / sizeof *matmul_cases; i++)
        test_matmul(&be, &matmul_cases[i]);
    for (size_t i = 0; i < sizeof gemm_cases / sizeof *gemm_cases; i++)
        test_gemm(&be, &gemm_cases[i]);
    for (size_t i = 0; i < sizeof pool_cases / sizeof *pool_cases; i++)
        test_pool(&be, &pool_cases[i]);
    dnnl_backend_fini(&be);
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
#endif

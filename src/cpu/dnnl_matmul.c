/* dnnl_matmul.c: MatMul (numpy semantics, batch dims broadcast) and Gemm (transposes as strides,
 * alpha as an output scale, C as a fused bias or an added pass) through oneDNN's matmul, f32. A
 * MatMul by a 2-D B (a layer's weights) runs over A's rows as one 2-D matmul with B packed once
 * into the layout the primitive prefers (format `any`) and kept in the node's state, keyed by B's
 * address and a fingerprint (as Conv's weights): ~1.5x the plain-B matmul at 32 rows, and 5-13%
 * ahead of oneDNN's inner product (what this path used before) at BERT-base's 128 and 1024. */
#include "graft_config.h"

#include <stdlib.h>
#include <string.h>

#include "dnnl_common.h"

typedef struct matmul_state {
    dnnl_node_state base;
    /* what the state was made for: the shapes of A, B and (Gemm) C */
    int ndim[3];
    int64_t dims[3][GRAFT_MAX_DIMS];
    bool usable;
    bool c_fused; /* Gemm: C is the primitive's bias; else added by gemm_add_c */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, y, bias;
    /* B packed: the primitive reads b (over b_buf, its preferred layout), reordered from B
     * through b_user (plain) whenever B's address or fingerprint changes */
    bool packed;
    dnnl_memory_t b_user;
    void *b_buf;
    const void *b_data;
    uint64_t b_fingerprint;
    /* the packed path: a bias (1-D, B's columns) and an activation post-op */
    bool packed_bias;
    dnnl_linear_act act;
    /* bf16 products (cpu_backend.bf16_products): A converted per run into a (over a_buf) from
     * a_user (the caller's float32), B packed in bf16 */
    bool bf16;
    dnnl_primitive_t a_reorder;
    dnnl_memory_t a_user;
    void *a_buf;
} matmul_state;

static void matmul_state_destroy(dnnl_node_state *base) {
    matmul_state *s = (matmul_state *)base;
    dnnl_destroy_primitive(&s->prim);
    dnnl_destroy_memory(&s->a);
    dnnl_destroy_memory(&s->b);
    dnnl_destroy_memory(&s->y);
    dnnl_destroy_memory(&s->bias);
    dnnl_destroy_memory(&s->b_user);
    free(s->b_buf);
    dnnl_destroy_primitive(&s->a_reorder);
    dnnl_destroy_memory(&s->a_user);
    free(s->a_buf);
    free(s);
}

static bool matmul_state_matches(const matmul_state *s, const op_call *c) {
    for (int i = 0; i < 3; i++) {
        const tensor *t = i < c->n_in ? c->in[i] : NULL;
        int nd = t ? t->ndim : -1;
        if (s->ndim[i] != nd) return false;
        if (t && memcmp(s->dims[i], t->dims, (size_t)nd * sizeof(int64_t))) return false;
    }
    return true;
}

static matmul_state *matmul_state_new(const op_call *c) {
    matmul_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.destroy = matmul_state_destroy;
    for (int i = 0; i < 3; i++) {
        const tensor *t = i < c->n_in ? c->in[i] : NULL;
        s->ndim[i] = t ? t->ndim : -1;
        if (t) memcpy(s->dims[i], t->dims, (size_t)t->ndim * sizeof(int64_t));
    }
    return s;
}

/* Create the primitive from its descriptors and the memory objects it runs on. */
static graft_status matmul_finish(cpu_backend *be, const op_call *c, matmul_state *s,
                                  const dnnl_memory_desc_t *a_md, const dnnl_memory_desc_t *b_md,
                                  const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *y_md,
                                  dnnl_primitive_attr_t attr) {
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, a_md, b_md, bias_md, y_md) != dnnl_success)
        return GRAFT_OK; /* not usable: the reference runs */
    dnnl_primitive_desc_t pd = NULL;
    TRY(dnnl_make_primitive(be, &desc, attr, c, &pd, &s->prim, &s->usable));
    dnnl_destroy_pd(&pd);
    if (!s->usable) return GRAFT_OK;
    TRY(dnnl_make_memory(be, a_md, NULL, c, &s->a));
    TRY(dnnl_make_memory(be, b_md, NULL, c, &s->b));
    TRY(dnnl_make_memory(be, y_md, NULL, c, &s->y));
    if (bias_md) TRY(dnnl_make_memory(be, bias_md, NULL, c, &s->bias));
    return GRAFT_OK;
}

/* The packed B again when B moved or changed (always when the backend's weights vary). */
static graft_status matmul_repack_b(cpu_backend *be, const op_call *c, matmul_state *s) {
    uint64_t fp = dnnl_weights_fingerprint(c->in[1]);
    if (!be->weights_vary && s->b_data == c->in[1]->data && s->b_fingerprint == fp) return GRAFT_OK;
    const dnnl_memory_desc_t *md = NULL;
    TRY(dnnl_check(dnnl_memory_get_memory_desc(s->b, &md), c, "query the packed layout"));
    dnnl_memory_desc_t packed = *md;
    dnnl_destroy_memory(&s->b);
    free(s->b_buf);
    s->b_buf = NULL;
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->b_user, c->in[1]->data), c, "bind B"));
    TRY(dnnl_reorder_once(be, s->b_user, &packed, c, &s->b_buf, &s->b));
    s->b_data = c->in[1]->data;
    s->b_fingerprint = fp;
    return GRAFT_OK;
}

static graft_status matmul_run(cpu_backend *be, const op_call *c, matmul_state *s,
                               const void *bias) {
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->a, c->in[0]->data), c, "bind A"));
    if (s->packed)
        TRY(matmul_repack_b(be, c, s));
    else
        TRY(dnnl_check(dnnl_memory_set_data_handle(s->b, c->in[1]->data), c, "bind B"));
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->y, c->out[0]->data), c, "bind Y"));
    if (s->bias) TRY(dnnl_check(dnnl_memory_set_data_handle(s->bias, (void *)bias), c, "bind C"));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->a},
                               {DNNL_ARG_WEIGHTS, s->b},
                               {DNNL_ARG_DST, s->y},
                               {DNNL_ARG_BIAS, s->bias}};
    return dnnl_execute(be, s->prim, s->bias ? 4 : 3, args, c);
}

typedef graft_status (*matmul_build_fn)(cpu_backend *be, const op_call *c, matmul_state *s);

/* The node's state for these shapes, built on first use or after a shape change. */
static graft_status matmul_state_get(cpu_backend *be, const op_call *c, void **state,
                                     matmul_build_fn build, matmul_state **out) {
    matmul_state *s = *state;
    if (s && matmul_state_matches(s, c)) {
        *out = s;
        return GRAFT_OK;
    }
    if (s) matmul_state_destroy(&s->base);
    *state = NULL;
    s = matmul_state_new(c);
    if (!s) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "matmul state");
    graft_status st = build(be, c, s);
    if (st != GRAFT_OK) {
        matmul_state_destroy(&s->base);
        return st;
    }
    *state = s;
    *out = s;
    return GRAFT_OK;
}

/* ---- MatMul ------------------------------------------------------------------------------- */

/* A (..., K) times a 2-D B (K, N): oneDNN's matmul over the rows of A, B packed once into the
 * primitive's preferred (blocked) layout. */
static graft_status matmul_build_packed(cpu_backend *be, const op_call *c, matmul_state *s) {
    const tensor *a = c->in[0], *b = c->in[1];
    int64_t k = b->dims[0], n = b->dims[1], rows = tensor_numel(a) / k;
    dnnl_dims_t sd = {rows, k}, wd = {k, n}, dd = {rows, n}, bd = {1, n};
    dnnl_memory_desc_t src_md, src_in, w_any, w_md, dst_md, bias_md;
    dnnl_data_type_t in_type = s->bf16 ? dnnl_bf16 : dnnl_f32; /* A and B; Y stays f32 */
    if (s->packed_bias)
        TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&bias_md, 2, bd, dnnl_f32, dnnl_ab), c,
                       "bias"));
    TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&src_md, 2, sd, dnnl_f32, dnnl_ab), c, "A"));
    TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&src_in, 2, sd, in_type, dnnl_ab), c, "A"));
    TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&w_any, 2, wd, in_type, dnnl_format_tag_any), c,
                   "B"));
    TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&w_md, 2, wd, dnnl_f32, dnnl_ab), c, "B"));
    TRY(dnnl_check(dnnl_memory_desc_init_by_tag(&dst_md, 2, dd, dnnl_f32, dnnl_ab), c, "Y"));
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &src_in, &w_any, s->packed_bias ? &bias_md : NULL, &dst_md) !=
        dnnl_success)
        return GRAFT_OK;
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    if (!attr) return op_error(c->node, c->err, GRAFT_E_BACKEND, "oneDNN attributes");
    dnnl_post_ops_t po = NULL;
    graft_status st = GRAFT_OK;
    if (s->act != DNNL_ACT_NONE) {
        dnnl_alg_kind_t alg =
            s->act == DNNL_ACT_GELU_ERF ? dnnl_eltwise_gelu_erf : dnnl_eltwise_gelu_tanh;
        st = dnnl_check(dnnl_post_ops_create(&po), c, "post-ops");
        if (st == GRAFT_OK)
            st = dnnl_check(dnnl_post_ops_append_eltwise(po, 1.0f, alg, 0.0f, 0.0f), c, "GELU");
        if (st == GRAFT_OK) st = dnnl_check(dnnl_primitive_attr_set_post_ops(attr, po), c, "GELU");
    }
    dnnl_primitive_desc_t pd = NULL;
    if (st == GRAFT_OK) st = dnnl_make_primitive(be, &desc, attr, c, &pd, &s->prim, &s->usable);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (st == GRAFT_OK && s->usable) {
        const dnnl_memory_desc_t *chosen =
            dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        dnnl_memory_desc_t packed = *chosen;
        st = dnnl_make_memory(be, &w_md, NULL, c, &s->b_user);
        if (st == GRAFT_OK)
            st = dnnl_check(dnnl_memory_set_data_handle(s->b_user, b->data), c, "bind B");
        if (st == GRAFT_OK) st = dnnl_reorder_once(be, s->b_user, &packed, c, &s->b_buf, &s->b);
        s->packed = st == GRAFT_OK;
        s->b_data = b->data;
        s->b_fingerprint = dnnl_weights_fingerprint(b);
    }
    dnnl_destroy_pd(&pd);
    if (st != GRAFT_OK || !s->usable) return st;
    if (s->bf16) { /* A's bf16 copy, made by a reorder before each product */
        s->a_buf = host_alloc_aligned(dnnl_memory_desc_get_size(&src_in));
        if (!s->a_buf) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "bf16 A");
        TRY(dnnl_make_memory(be, &src_in, s->a_buf, c, &s->a));
        TRY(dnnl_make_memory(be, &src_md, NULL, c, &s->a_user));
        TRY(dnnl_make_reorder(be, &src_md, &src_in, c, &s->a_reorder));
    } else {
        TRY(dnnl_make_memory(be, &src_md, NULL, c, &s->a));
    }
    if (s->packed_bias) TRY(dnnl_make_memory(be, &bias_md, NULL, c, &s->bias));
    return dnnl_make_memory(be, &dst_md, NULL, c, &s->y);
}

graft_status dnnl_run_linear(cpu_backend *be, const op_call *c, const tensor *bias,
                             dnnl_linear_act act, tensor *y, void **state, bool *handled) {
    *handled = false;
    const tensor *a = c->in[0], *b = c->in[1];
    if (!be->dnnl_engine || !be->pack_matmul_weights || !dnnl_all_f32(c) || b->ndim != 2 ||
        a->ndim < 2 || y->dtype != GRAFT_DTYPE_F32 || tensor_numel(y) != tensor_numel(c->out[0]) ||
        tensor_numel(y) == 0 || tensor_numel(a) == 0 ||
        (bias && (bias->dtype != GRAFT_DTYPE_F32 || tensor_numel(bias) != b->dims[1])))
        return GRAFT_OK;
    matmul_state *s = *state;
    if (!s || !matmul_state_matches(s, c) || s->packed_bias != (bias != NULL) || s->act != act ||
        s->bf16 != be->bf16_products) {
        if (s) matmul_state_destroy(&s->base);
        *state = NULL;
        s = matmul_state_new(c);
        if (!s) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "matmul state");
        s->packed_bias = bias != NULL;
        s->act = act;
        s->bf16 = be->bf16_products;
        graft_status st = matmul_build_packed(be, c, s);
        *state = s;
        if (st != GRAFT_OK) return st;
    }
    if (!s->usable) return GRAFT_OK;
    TRY(matmul_repack_b(be, c, s));
    if (s->a_reorder) {
        TRY(dnnl_check(dnnl_memory_set_data_handle(s->a_user, a->data), c, "bind A"));
        dnnl_exec_arg_t conv[2] = {{DNNL_ARG_FROM, s->a_user}, {DNNL_ARG_TO, s->a}};
        TRY(dnnl_execute(be, s->a_reorder, 2, conv, c));
    } else {
        TRY(dnnl_check(dnnl_memory_set_data_handle(s->a, a->data), c, "bind A"));
    }
    TRY(dnnl_check(dnnl_memory_set_data_handle(s->y, y->data), c, "bind Y"));
    if (bias) TRY(dnnl_check(dnnl_memory_set_data_handle(s->bias, bias->data), c, "bind bias"));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->a},
                               {DNNL_ARG_WEIGHTS, s->b},
                               {DNNL_ARG_DST, s->y},
                               {DNNL_ARG_BIAS, s->bias}};
    TRY(dnnl_execute(be, s->prim, bias ? 4 : 3, args, c));
    *handled = true;
    return GRAFT_OK;
}

/* A and B as rank-r operands: 1-D A is a row (1, K), 1-D B a column (K, 1), batch dims padded
 * with leading 1s; oneDNN broadcasts batch dims of size 1. */
static graft_status matmul_build(cpu_backend *be, const op_call *c, matmul_state *s) {
    const tensor *a = c->in[0], *b = c->in[1];
    int64_t ad[GRAFT_MAX_DIMS + 1], bd[GRAFT_MAX_DIMS + 1], yd[GRAFT_MAX_DIMS + 1];
    int an = 0, bn = 0;
    if (a->ndim == 1) ad[an++] = 1;
    for (int i = 0; i < a->ndim; i++) ad[an++] = a->dims[i];
    for (int i = 0; i < b->ndim; i++) bd[bn++] = b->dims[i];
    if (b->ndim == 1) bd[bn++] = 1;
    int r = an > bn ? an : bn;
    int64_t pa[GRAFT_MAX_DIMS + 1], pb[GRAFT_MAX_DIMS + 1];
    for (int i = 0; i < r; i++) {
        pa[i] = i < r - an ? 1 : ad[i - (r - an)];
        pb[i] = i < r - bn ? 1 : bd[i - (r - bn)];
        yd[i] = pa[i] > pb[i] ? pa[i] : pb[i];
    }
    yd[r - 2] = pa[r - 2];
    yd[r - 1] = pb[r - 1];
    if (r > DNNL_MAX_NDIMS) return GRAFT_OK; /* not usable; the reference runs */
    dnnl_memory_desc_t a_md, b_md, y_md;
    TRY(dnnl_check(dnnl_plain_md(&a_md, r, pa), c, "describe A"));
    TRY(dnnl_check(dnnl_plain_md(&b_md, r, pb), c, "describe B"));
    TRY(dnnl_check(dnnl_plain_md(&y_md, r, yd), c, "describe Y"));
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    if (!attr) return op_error(c->node, c->err, GRAFT_E_BACKEND, "oneDNN attributes");
    graft_status st = matmul_finish(be, c, s, &a_md, &b_md, NULL, &y_md, attr);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

graft_status dnnl_run_MatMul(cpu_backend *be, const op_call *c, void **state, bool *handled) {
    *handled = false;
    if (!be->dnnl_engine || !dnnl_all_f32(c) || tensor_numel(c->out[0]) == 0 ||
        tensor_numel(c->in[0]) == 0 || tensor_numel(c->in[1]) == 0)
        return GRAFT_OK;
    matmul_state *s = NULL;
    bool packed = be->pack_matmul_weights && c->in[1]->ndim == 2 && c->in[0]->ndim >= 2;
    TRY(matmul_state_get(be, c, state, packed ? matmul_build_packed : matmul_build, &s));
    if (!s->usable) return GRAFT_OK;
    TRY(matmul_run(be, c, s, NULL));
    *handled = true;
    return GRAFT_OK;
}

/* ---- Gemm --------------------------------------------------------------------------------- */

/* C seen as (rows, cols), each 1 or the full size of Y. */
static void gemm_c_shape(const tensor *cm, int64_t *rows, int64_t *cols) {
    *rows = cm->ndim == 2 ? cm->dims[0] : 1;
    *cols = cm->ndim >= 1 ? cm->dims[cm->ndim - 1] : 1;
}

static graft_status gemm_build(cpu_backend *be, const op_call *c, matmul_state *s) {
    const tensor *a = c->in[0], *b = c->in[1], *cm = c->n_in > 2 ? c->in[2] : NULL;
    bool ta = attr_i(c->node, "transA", 0) != 0, tb = attr_i(c->node, "transB", 0) != 0;
    float alpha = attr_f(c->node, "alpha", 1.0f), beta = attr_f(c->node, "beta", 1.0f);
    int64_t m = a->dims[ta ? 1 : 0], k = a->dims[ta ? 0 : 1], n = b->dims[tb ? 0 : 1];
    /* Transposes are only strides: A^T stored (k, m) reads as (m, k) with strides (1, m). */
    dnnl_dims_t a_dims = {m, k}, a_str = {ta ? 1 : k, ta ? m : 1};
    dnnl_dims_t b_dims = {k, n}, b_str = {tb ? 1 : n, tb ? k : 1};
    dnnl_dims_t y_dims = {m, n}, y_str = {n, 1};
    dnnl_memory_desc_t a_md, b_md, y_md, c_md;
    TRY(dnnl_check(dnnl_memory_desc_init_by_strides(&a_md, 2, a_dims, dnnl_f32, a_str), c, "A"));
    TRY(dnnl_check(dnnl_memory_desc_init_by_strides(&b_md, 2, b_dims, dnnl_f32, b_str), c, "B"));
    TRY(dnnl_check(dnnl_memory_desc_init_by_strides(&y_md, 2, y_dims, dnnl_f32, y_str), c, "Y"));
    /* A per-column C (a Linear layer's bias) fuses as the matmul's bias; oneDNN runs other bias
     * shapes only with its slow reference code, so those get an added pass instead. */
    int64_t cd[2] = {0, 0};
    if (cm) gemm_c_shape(cm, &cd[0], &cd[1]);
    s->c_fused = cm && beta == 1.0f && alpha == 1.0f && cd[0] == 1 && cd[1] == n;
    if (s->c_fused) TRY(dnnl_check(dnnl_plain_md(&c_md, 2, cd), c, "describe C"));
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    if (!attr) return op_error(c->node, c->err, GRAFT_E_BACKEND, "oneDNN attributes");
    graft_status st = GRAFT_OK;
    if (alpha != 1.0f)
        st = dnnl_check(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), c, "scale");
    if (st == GRAFT_OK)
        st = matmul_finish(be, c, s, &a_md, &b_md, s->c_fused ? &c_md : NULL, &y_md, attr);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

/* y += beta * C, C broadcast over rows and/or columns. */
static void gemm_add_c(const tensor *cm, float beta, tensor *y) {
    int64_t rows, cols, m = y->dims[0], n = y->dims[1];
    gemm_c_shape(cm, &rows, &cols);
    const float *cv = cm->data;
    float *yv = y->data;
#pragma omp parallel for if (m * n >= 32768)
    for (int64_t i = 0; i < m; i++) {
        const float *crow = cv + (rows == 1 ? 0 : i) * cols;
        for (int64_t j = 0; j < n; j++) yv[i * n + j] += beta * crow[cols == 1 ? 0 : j];
    }
}

graft_status dnnl_run_Gemm(cpu_backend *be, const op_call *c, void **state, bool *handled) {
    *handled = false;
    if (!be->dnnl_engine || !dnnl_all_f32(c) || c->in[0]->ndim != 2 || c->in[1]->ndim != 2 ||
        tensor_numel(c->out[0]) == 0 || tensor_numel(c->in[0]) == 0)
        return GRAFT_OK;
    matmul_state *s = NULL;
    TRY(matmul_state_get(be, c, state, gemm_build, &s));
    if (!s->usable) return GRAFT_OK;
    const tensor *cm = c->n_in > 2 ? c->in[2] : NULL;
    TRY(matmul_run(be, c, s, s->c_fused ? cm->data : NULL));
    float beta = attr_f(c->node, "beta", 1.0f);
    if (cm && !s->c_fused && beta != 0.0f) gemm_add_c(cm, beta, c->out[0]);
    *handled = true;
    return GRAFT_OK;
}

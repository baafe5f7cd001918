/* dnnl_conv.c: Conv (f32, 1-D to 3-D, groups, dilations, bias) through oneDNN, with the weights
 * reordered once into the primitive's preferred layout and kept in the node's state; optionally
 * with post-ops (a residual add, a ReLU) for the fused Conv groups of dnnl_fuse.c. */
#include "graft_config.h"

#include <stdlib.h>
#include <string.h>

#include "../ops/nn.h"
#include "dnnl_common.h"

/* Whether to let the primitive pick blocked activation layouts (nChw16c) and reorder graft's
 * plain NCHW tensors to and from them around every call, rather than run on NCHW directly.
 * Measured on AVX-512 (ResNet-50's convolutions, one thread): the blocked kernels win 25-30% with
 * the reorders included for 3x3 and 7x7 kernels; for 1x1 kernels the reorders cost more than
 * they save (plain NCHW runs as one GEMM there). */
static bool conv_wants_blocked_activations(const nn_window *w) {
    for (int i = 0; i < w->nsp; i++)
        if (w->kernel[i] > 1) return true;
    return false;
}

typedef struct conv_state {
    dnnl_node_state base;
    /* what the state was made for */
    int ndim;
    int64_t x_dims[GRAFT_MAX_DIMS], w_dims[GRAFT_MAX_DIMS];
    const void *w_data;
    uint64_t w_fingerprint;
    bool has_bias;
    bool x_nhwc, y_nhwc; /* X / Y channels-last (the layout plan): the primitive runs on them */
    bool bf16;           /* built for bf16 products (cpu_backend.bf16_products) */
    dnnl_conv_post post;
    bool usable; /* false: oneDNN cannot run this case well; the reference runs */
    dnnl_primitive_t conv;
    dnnl_memory_t src, weights, bias, dst; /* in the primitive's layouts */
    /* The residual add is a sum post-op: the residual is copied into Y (reordered into the
     * blocked Y) before the convolution adds to it. (A binary add post-op reading the plain
     * residual where it is makes oneDNN drop its blocked kernels for 3x3 convolutions and runs
     * ~20x slower in its GEMM ones for 1x1.) */
    dnnl_memory_t residual; /* over the residual (plain, Y's shape), for the reorder */
    dnnl_primitive_t residual_reorder;
    bool epilogue; /* the residual and ReLU in a pass of graft's after a plain convolution */
    dnnl_primitive_t act_prim; /* the epilogue's other activations: in place on Y, flat */
    dnnl_memory_t act_mem;
    void *weights_buf; /* the reordered weights */
    /* plain <-> blocked activations, when the primitive wants blocked ones; their buffers live
     * only during a call, so that a model's convolutions do not each hold two activations */
    dnnl_primitive_t src_reorder, dst_reorder;
    dnnl_memory_t src_user, dst_user;
    size_t src_bytes, dst_bytes;
} conv_state;

static void conv_state_destroy(dnnl_node_state *base) {
    conv_state *s = (conv_state *)base;
    dnnl_destroy_primitive(&s->conv);
    dnnl_destroy_primitive(&s->src_reorder);
    dnnl_destroy_primitive(&s->dst_reorder);
    dnnl_destroy_primitive(&s->residual_reorder);
    dnnl_destroy_primitive(&s->act_prim);
    dnnl_destroy_memory(&s->act_mem);
    dnnl_destroy_memory(&s->src);
    dnnl_destroy_memory(&s->weights);
    dnnl_destroy_memory(&s->bias);
    dnnl_destroy_memory(&s->dst);
    dnnl_destroy_memory(&s->residual);
    dnnl_destroy_memory(&s->src_user);
    dnnl_destroy_memory(&s->dst_user);
    free(s->weights_buf);
    free(s);
}

static bool conv_state_matches(const conv_state *s, const op_call *c, const dnnl_conv_post *post,
                               bool x_nhwc, bool y_nhwc) {
    const tensor *x = c->in[0], *w = c->in[1];
    bool has_bias = c->n_in > 2 && c->in[2];
    return s->x_nhwc == x_nhwc && s->y_nhwc == y_nhwc && s->ndim == x->ndim && w->ndim == x->ndim &&
           s->w_data == w->data && s->w_fingerprint == dnnl_weights_fingerprint(w) &&
           s->has_bias == has_bias && s->post.add == post->add && s->post.act == post->act &&
           s->post.alpha == post->alpha && s->post.beta == post->beta &&
           !memcmp(s->x_dims, x->dims, (size_t)x->ndim * sizeof(int64_t)) &&
           !memcmp(s->w_dims, w->dims, (size_t)w->ndim * sizeof(int64_t));
}

/* A reorder primitive between two layouts, kept for every call (activations). */

/* An activation's descriptor: row-major, or channels-last. */
static dnnl_status_t activation_md(dnnl_memory_desc_t *md, const tensor *t, bool nhwc) {
    if (!nhwc) return dnnl_plain_md(md, t->ndim, t->dims);
    dnnl_dims_t d = {t->dims[0], t->dims[1], t->dims[2], t->dims[3]};
    return dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_nhwc);
}

/* Descriptors of the user's tensors: X, W (grouped as (G, M/G, C/G, k...) when group > 1), B, Y. */
static graft_status conv_user_mds(const op_call *c, int64_t group, const conv_state *s,
                                  dnnl_memory_desc_t *x_md, dnnl_memory_desc_t *w_md,
                                  dnnl_memory_desc_t *b_md, dnnl_memory_desc_t *y_md) {
    const tensor *x = c->in[0], *w = c->in[1], *y = c->out[0];
    int64_t wd[GRAFT_MAX_DIMS + 1];
    int wn = 0;
    if (group > 1) {
        wd[wn++] = group;
        wd[wn++] = w->dims[0] / group;
    } else {
        wd[wn++] = w->dims[0];
    }
    for (int i = 1; i < w->ndim; i++) wd[wn++] = w->dims[i];
    TRY(dnnl_check(activation_md(x_md, x, s->x_nhwc), c, "describe X"));
    TRY(dnnl_check(dnnl_plain_md(w_md, wn, wd), c, "describe W"));
    TRY(dnnl_check(dnnl_plain_md(b_md, 1, w->dims), c, "describe B"));
    return dnnl_check(activation_md(y_md, y, s->y_nhwc), c, "describe Y");
}

/* The convolution descriptor: plain or `any` activations, `any` weights. Anything but success
 * means oneDNN does not take this case (graft's reference then runs it). */
static dnnl_status_t conv_desc_init(const op_call *c, const nn_window *win, bool any_activations,
                                    bool bf16, const dnnl_memory_desc_t *x_md,
                                    const dnnl_memory_desc_t *w_md, const dnnl_memory_desc_t *b_md,
                                    const dnnl_memory_desc_t *y_md, dnnl_convolution_desc_t *desc) {
    dnnl_memory_desc_t src_any, w_any, dst_any, src_bf16;
    const dnnl_memory_desc_t *src = x_md, *dst = y_md;
    dnnl_data_type_t in_type = bf16 ? dnnl_bf16 : dnnl_f32; /* X and W; Y stays f32 */
    dnnl_status_t st =
        dnnl_memory_desc_init_by_tag(&w_any, w_md->ndims, w_md->dims, in_type, dnnl_format_tag_any);
    if (bf16 && !any_activations) { /* X's layout in bf16: a reorder converts it per run */
        src_bf16 = *x_md;
        src_bf16.data_type = dnnl_bf16;
        src = &src_bf16;
    }
    if (st == dnnl_success && any_activations) {
        st = dnnl_memory_desc_init_by_tag(&src_any, x_md->ndims, x_md->dims, in_type,
                                          dnnl_format_tag_any);
        if (st == dnnl_success)
            st = dnnl_memory_desc_init_by_tag(&dst_any, y_md->ndims, y_md->dims, dnnl_f32,
                                              dnnl_format_tag_any);
        src = &src_any;
        dst = &dst_any;
    }
    if (st != dnnl_success) return st;
    dnnl_dims_t strides, dilates, pad_l, pad_r;
    for (int i = 0; i < win->nsp; i++) {
        strides[i] = win->stride[i];
        dilates[i] = win->dilation[i] - 1; /* oneDNN counts the gaps between taps */
        pad_l[i] = win->pad_begin[i];
        pad_r[i] = win->pad_end[i];
    }
    bool has_bias = c->n_in > 2 && c->in[2];
    return dnnl_dilated_convolution_forward_desc_init(
        desc, dnnl_forward_inference, dnnl_convolution_direct, src, &w_any, has_bias ? b_md : NULL,
        dst, strides, dilates, pad_l, pad_r);
}

/* Memory for an activation: over the user's buffer when the primitive takes the plain layout,
 * else over a per-call buffer in its layout, with a reorder from or to the user's. */
static graft_status conv_activation(cpu_backend *be, const op_call *c,
                                    const dnnl_memory_desc_t *user_md,
                                    const dnnl_memory_desc_t *prim_md, bool is_src, conv_state *s) {
    dnnl_memory_t *mem = is_src ? &s->src : &s->dst, *user = is_src ? &s->src_user : &s->dst_user;
    TRY(dnnl_make_memory(be, prim_md, NULL, c, mem));
    if (dnnl_memory_desc_equal(user_md, prim_md)) return GRAFT_OK;
    *(is_src ? &s->src_bytes : &s->dst_bytes) = dnnl_memory_desc_get_size(prim_md);
    TRY(dnnl_make_memory(be, user_md, NULL, c, user));
    return dnnl_make_reorder(be, is_src ? user_md : prim_md, is_src ? prim_md : user_md, c,
                             is_src ? &s->src_reorder : &s->dst_reorder);
}

/* The convolution primitive, with the post-ops of s->post (in ONNX's order: Conv -> Add ->
 * Relu) or none. oneDNN declining leaves s->usable false. */
static graft_status conv_primitive(cpu_backend *be, const op_call *c,
                                   const dnnl_convolution_desc_t *desc, bool post_ops,
                                   conv_state *s, dnnl_primitive_desc_t *pd) {
    s->usable = false;
    dnnl_primitive_attr_t attr = dnnl_make_attr();
    if (!attr) return op_error(c->node, c->err, GRAFT_E_BACKEND, "oneDNN attributes");
    if (post_ops) {
        dnnl_post_ops_t po = NULL;
        dnnl_status_t ps = dnnl_post_ops_create(&po);
        if (ps == dnnl_success && s->post.add) ps = dnnl_post_ops_append_sum(po, 1.0f);
        if (ps == dnnl_success && s->post.act)
            ps = dnnl_post_ops_append_eltwise(po, 1.0f, (dnnl_alg_kind_t)s->post.act, s->post.alpha,
                                              s->post.beta);
        if (ps == dnnl_success) ps = dnnl_primitive_attr_set_post_ops(attr, po);
        if (po) dnnl_post_ops_destroy(po);
        if (ps != dnnl_success) {
            dnnl_primitive_attr_destroy(attr);
            return GRAFT_OK; /* not usable */
        }
    }
    graft_status st = dnnl_make_primitive(be, desc, attr, c, pd, &s->conv, &s->usable);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

static bool post_is_relu(const dnnl_conv_post *p) {
    return p->act == (int)dnnl_eltwise_relu && p->alpha == 0.0f;
}

static graft_status conv_build(cpu_backend *be, const op_call *c, conv_state *s) {
    const tensor *x = c->in[0], *w = c->in[1];
    nn_window win;
    TRY(nn_window_init(c->node, x->ndim - 2, x->dims + 2, w->dims + 2, &win, c->err));
    dnnl_memory_desc_t x_md, w_md, b_md, y_md;
    TRY(conv_user_mds(c, attr_i(c->node, "group", 1), s, &x_md, &w_md, &b_md, &y_md));
    dnnl_convolution_desc_t desc;
    /* channels-last X and Y: the primitive runs on them; one of them (a region's edge): the
     * primitive's layouts with reorders from X and to Y; else blocked where that pays */
    bool any = s->x_nhwc != s->y_nhwc ||
               (!s->x_nhwc && !s->y_nhwc && conv_wants_blocked_activations(&win));
    s->bf16 = be->bf16_products;
    if (conv_desc_init(c, &win, any, s->bf16, &x_md, &w_md, &b_md, &y_md, &desc) != dnnl_success)
        return GRAFT_OK; /* not usable */
    dnnl_primitive_desc_t pd = NULL;
    bool post_ops = s->post.add || s->post.act;
    TRY(conv_primitive(be, c, &desc, post_ops, s, &pd));
    if (!s->usable) return GRAFT_OK;
    const char *impl = NULL;
    if (post_ops &&
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        strstr(impl, "gemm")) {
        /* oneDNN's GEMM convolutions (plain layouts, 1x1 kernels) apply post-ops in a slow
         * pass: measured 2x (ReLU) to 5x (sum + ReLU) their time without, more than separate
         * Relu and Add nodes cost. Those convolve without post-ops, then one pass of graft's
         * own adds the residual and applies the ReLU in place. */
        dnnl_destroy_primitive(&s->conv);
        dnnl_destroy_pd(&pd);
        s->epilogue = true;
        if (s->post.act && !post_is_relu(&s->post)) {
            TRY(dnnl_eltwise_make(be, c, s->post.act, s->post.alpha, s->post.beta,
                                  tensor_numel(c->out[0]), &s->act_prim, &s->act_mem, NULL,
                                  &s->usable));
            if (!s->usable) return GRAFT_OK;
        }
        TRY(conv_primitive(be, c, &desc, false, s, &pd));
        if (!s->usable) return GRAFT_OK;
    }
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *wt_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t w_user = NULL;
    graft_status st = dnnl_make_memory(be, &w_md, w->data, c, &w_user);
    if (st == GRAFT_OK) st = dnnl_reorder_once(be, w_user, wt_md, c, &s->weights_buf, &s->weights);
    if (st == GRAFT_OK) st = conv_activation(be, c, &x_md, src_md, true, s);
    if (st == GRAFT_OK) st = conv_activation(be, c, &y_md, dst_md, false, s);
    if (st == GRAFT_OK && s->has_bias) st = dnnl_make_memory(be, &b_md, NULL, c, &s->bias);
    if (st == GRAFT_OK && s->post.add && !s->epilogue && s->dst_reorder) {
        st = dnnl_make_memory(be, &y_md, NULL, c, &s->residual);
        if (st == GRAFT_OK) st = dnnl_make_reorder(be, &y_md, dst_md, c, &s->residual_reorder);
    }
    dnnl_destroy_memory(&w_user);
    dnnl_destroy_pd(&pd);
    return st;
}

static graft_status conv_state_get(cpu_backend *be, const op_call *c, const dnnl_conv_post *post,
                                   void **state, conv_state **out) {
    conv_state *s = *state;
    bool x_nhwc = cpu_in_nhwc(be, c, 0), y_nhwc = cpu_out_nhwc(be, c, 0);
    if (s && conv_state_matches(s, c, post, x_nhwc, y_nhwc) && s->bf16 == be->bf16_products) {
        *out = s;
        return GRAFT_OK;
    }
    if (s) conv_state_destroy(&s->base);
    *state = NULL;
    s = calloc(1, sizeof *s);
    if (!s) return op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "Conv state");
    s->base.destroy = conv_state_destroy;
    s->ndim = c->in[0]->ndim;
    memcpy(s->x_dims, c->in[0]->dims, sizeof s->x_dims);
    memcpy(s->w_dims, c->in[1]->dims, sizeof s->w_dims);
    s->w_data = c->in[1]->data;
    s->w_fingerprint = dnnl_weights_fingerprint(c->in[1]);
    s->has_bias = c->n_in > 2 && c->in[2];
    s->x_nhwc = x_nhwc;
    s->y_nhwc = y_nhwc;
    s->post = *post;
    graft_status st = conv_build(be, c, s);
    if (st != GRAFT_OK) {
        conv_state_destroy(&s->base);
        return st;
    }
    *state = s;
    *out = s;
    return GRAFT_OK;
}

/* y = relu(y + r), or without r, or without the ReLU; in place. NaN passes through the ReLU as
 * in the Relu node's reference kernel. */
static void conv_epilogue(tensor *y, const tensor *r, bool relu) {
    float *yd = y->data;
    const float *rd = r ? r->data : NULL;
    int64_t n = tensor_numel(y);
#pragma omp parallel for if (n >= 32768) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = yd[i] + (rd ? rd[i] : 0.0f);
        yd[i] = relu && v < 0.0f ? 0.0f : v;
    }
}

/* One call: reorder X in if needed, convolve, reorder Y out if needed. */
static graft_status conv_execute(cpu_backend *be, const op_call *c, conv_state *s) {
    if (s->src_reorder) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, s->src_user}, {DNNL_ARG_TO, s->src}};
        TRY(dnnl_execute(be, s->src_reorder, 2, args, c));
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, s->src},
                               {DNNL_ARG_WEIGHTS, s->weights},
                               {DNNL_ARG_DST, s->dst},
                               {DNNL_ARG_BIAS, s->bias}};
    TRY(dnnl_execute(be, s->conv, s->has_bias ? 4 : 3, args, c));
    if (s->dst_reorder) {
        dnnl_exec_arg_t back[2] = {{DNNL_ARG_FROM, s->dst}, {DNNL_ARG_TO, s->dst_user}};
        TRY(dnnl_execute(be, s->dst_reorder, 2, back, c));
    }
    return GRAFT_OK;
}

bool dnnl_conv_covers(const cpu_backend *be, const op_call *c) {
    if (c->n_in < 2 || c->n_out < 1 || !c->in[0] || !c->in[1] || !c->out[0]) return false;
    const tensor *x = c->in[0], *w = c->in[1];
    if (!be->dnnl_engine || !dnnl_all_f32(c) || x->ndim < 3 || x->ndim > 5 || w->ndim != x->ndim)
        return false;
    if ((cpu_in_nhwc(be, c, 0) || cpu_out_nhwc(be, c, 0)) && x->ndim != 4) return false;
    return tensor_numel(x) != 0 && tensor_numel(c->out[0]) != 0;
}

graft_status dnnl_run_Conv(cpu_backend *be, const op_call *c, void **state, bool *handled) {
    static const dnnl_conv_post none = {false, 0, 0.0f, 0.0f};
    return dnnl_conv_run(be, c, &none, NULL, state, handled);
}

graft_status dnnl_conv_run(cpu_backend *be, const op_call *c, const dnnl_conv_post *post,
                           const tensor *residual, void **state, bool *handled) {
    *handled = false;
    if (!dnnl_conv_covers(be, c) || (post->add && (!residual || !residual->data))) return GRAFT_OK;
    const tensor *x = c->in[0];
    conv_state *s = NULL;
    TRY(conv_state_get(be, c, post, state, &s));
    if (!s->usable) return GRAFT_OK;
    void *src_buf = s->src_bytes ? host_alloc_aligned(s->src_bytes) : NULL;
    void *dst_buf = s->dst_bytes ? host_alloc_aligned(s->dst_bytes) : NULL;
    /* the epilogue adds the residual after the convolution: when the residual is Y's own buffer
     * (planned in place), the convolution writes elsewhere and the epilogue adds it to Y */
    bool aside = s->epilogue && s->post.add && residual->data == c->out[0]->data;
    void *aside_buf = aside ? host_alloc_aligned((size_t)tensor_nbytes(c->out[0])) : NULL;
    graft_status st = GRAFT_OK;
    if ((s->src_bytes && !src_buf) || (s->dst_bytes && !dst_buf) || (aside && !aside_buf))
        st = op_error(c->node, c->err, GRAFT_E_OUT_OF_MEMORY, "no memory for blocked activations");
    dnnl_memory_t src_user = s->src_reorder ? s->src_user : s->src;
    dnnl_memory_t dst_user = s->dst_reorder ? s->dst_user : s->dst;
    if (st == GRAFT_OK)
        st = dnnl_check(dnnl_memory_set_data_handle(src_user, x->data), c, "bind X");
    if (st == GRAFT_OK)
        st = dnnl_check(dnnl_memory_set_data_handle(dst_user, aside ? aside_buf : c->out[0]->data),
                        c, "bind Y");
    if (st == GRAFT_OK && s->src_reorder)
        st = dnnl_check(dnnl_memory_set_data_handle(s->src, src_buf), c, "bind blocked X");
    if (st == GRAFT_OK && s->dst_reorder)
        st = dnnl_check(dnnl_memory_set_data_handle(s->dst, dst_buf), c, "bind blocked Y");
    if (st == GRAFT_OK && s->has_bias)
        st = dnnl_check(dnnl_memory_set_data_handle(s->bias, c->in[2]->data), c, "bind B");
    if (st == GRAFT_OK && s->residual)
        st = dnnl_check(dnnl_memory_set_data_handle(s->residual, residual->data), c,
                        "bind the residual");
    if (st == GRAFT_OK && s->residual_reorder) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, s->residual}, {DNNL_ARG_TO, s->dst}};
        st = dnnl_execute(be, s->residual_reorder, 2, args, c);
    } else if (st == GRAFT_OK && s->post.add && !s->epilogue && residual->data != c->out[0]->data) {
        memmove(c->out[0]->data, residual->data, (size_t)tensor_nbytes(c->out[0]));
    }
    if (st == GRAFT_OK) st = conv_execute(be, c, s);
    if (st == GRAFT_OK && aside) {
        tensor conv_y = *c->out[0];
        conv_y.data = aside_buf;
        conv_epilogue(c->out[0], &conv_y, post_is_relu(&s->post)); /* Y holds the residual */
    } else if (st == GRAFT_OK && s->epilogue && (s->post.add || post_is_relu(&s->post))) {
        conv_epilogue(c->out[0], s->post.add ? residual : NULL, post_is_relu(&s->post));
    }
    if (st == GRAFT_OK && s->act_prim) {
        st = dnnl_check(dnnl_memory_set_data_handle(s->act_mem, c->out[0]->data), c, "bind Y");
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, s->act_mem}, {DNNL_ARG_DST, s->act_mem}};
        if (st == GRAFT_OK) st = dnnl_execute(be, s->act_prim, 2, args, c);
    }
    free(src_buf);
    free(dst_buf);
    free(aside_buf);
    *handled = st == GRAFT_OK;
    return st;
}

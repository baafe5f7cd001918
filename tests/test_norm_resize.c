/* test_norm_resize.c: shape inference, attribute checks and kernel edge cases of
 * InstanceNormalization, GroupNormalization, Resize and Einsum (ONNX's node tests cover their
 * usual results in the conformance suites). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "test_node.h"
#include "test_util.h"

#define U -1 /* an unknown dim */
#define F32 GRAFT_DTYPE_F32

static value_info shaped(graft_dtype dt, int ndim, const int64_t *dims) {
    value_info v;
    memset(&v, 0, sizeof v);
    v.present = true;
    v.dtype = dt;
    v.ndim = ndim;
    for (int i = 0; i < ndim; i++) v.dims[i] = dims[i];
    return v;
}

static tensor wrap(graft_dtype dt, int ndim, const int64_t *dims, void *data) {
    tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    t.data = data;
    return t;
}

static value_info known(const tensor *t) {
    value_info v = shaped(t->dtype, t->ndim, t->dims);
    v.value = t;
    return v;
}

/* Inference's status, and its output in *out. */
static graft_status infer(test_node *t, const value_info *in, int n_in, value_info *out,
                          graft_err *e) {
    memset(out, 0, sizeof *out);
    return op_find(t->node.op_type)->infer(&t->node, in, n_in, out, 1, e);
}

static bool dims_are(const value_info *v, int ndim, const int64_t *dims) {
    if (v->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (v->dims[i] != dims[i]) return false;
    return true;
}

static void expect_shape(const char *name, test_node *t, const value_info *in, int n_in, int ndim,
                         const int64_t *dims) {
    value_info out;
    graft_err e = {0};
    graft_status st = infer(t, in, n_in, &out, &e);
    char got[128];
    shape_str(got, sizeof got, out.ndim, out.dims);
    CHECK(name, st == GRAFT_OK && dims_are(&out, ndim, dims), "status %d (%s), shape %s", st, e.msg,
          got);
}

/* Inference fails with `want`, and its message names `needle`. */
static void expect_error(const char *name, test_node *t, const value_info *in, int n_in,
                         graft_status want, const char *needle) {
    value_info out;
    graft_err e = {0};
    graft_status st = infer(t, in, n_in, &out, &e);
    CHECK(name, st == want && strstr(e.msg, needle) && strstr(e.msg, "test"),
          "status %d, message '%s' (want %d naming '%s' and the node)", st, e.msg, want, needle);
}

/* The kernel on an output shaped by inference. */
static graft_status run_kernel(test_node *t, const tensor *const *ins, int n_in, tensor *out,
                               graft_err *e) {
    value_info vi[4], vo;
    for (int i = 0; i < n_in; i++) vi[i] = known(ins[i]);
    TRY(infer(t, vi, n_in, &vo, e));
    TRY(tensor_make(out, vo.dtype, vo.ndim, vo.dims, e));
    tensor *outs[1] = {out};
    op_call call = {&t->node, ins, n_in, outs, 1, e};
    return op_find(t->node.op_type)->reference(&call);
}

static void test_norms(void) {
    test_node t;
    node_init(&t, "InstanceNormalization", 6);
    value_info in[3] = {shaped(F32, 4, (int64_t[]){U, 3, U, U}), shaped(F32, 1, (int64_t[]){3}),
                        shaped(F32, 1, (int64_t[]){3})};
    expect_shape("instancenorm_symbolic", &t, in, 3, 4, (int64_t[]){U, 3, U, U});
    in[1].dims[0] = 4;
    expect_error("instancenorm_scale_size", &t, in, 3, GRAFT_E_SHAPE, "scale has 4 elements");
    in[0] = shaped(F32, 2, (int64_t[]){2, 3});
    in[1].dims[0] = 3;
    expect_error("instancenorm_rank2", &t, in, 3, GRAFT_E_SHAPE, "rank >= 3");

    node_init(&t, "GroupNormalization", 18);
    in[0] = shaped(F32, 4, (int64_t[]){2, 6, 5, 5});
    expect_error("groupnorm_no_num_groups", &t, in, 3, GRAFT_E_MALFORMED_MODEL, "num_groups");
    set_int(&t, "num_groups", 3);
    expect_shape("groupnorm18_per_group_scale", &t, in, 3, 4, (int64_t[]){2, 6, 5, 5});
    t.node.opset = 21; /* opset 21: one scale per channel, so 3 no longer fits 6 channels */
    expect_error("groupnorm21_per_group_scale", &t, in, 3, GRAFT_E_SHAPE, "channels of X");
    in[1].dims[0] = in[2].dims[0] = 6;
    expect_shape("groupnorm21_per_channel_scale", &t, in, 3, 4, (int64_t[]){2, 6, 5, 5});
    node_init(&t, "GroupNormalization", 21);
    set_int(&t, "num_groups", 4);
    expect_error("groupnorm_uneven_groups", &t, in, 3, GRAFT_E_SHAPE, "do not divide");

    /* GroupNormalization with one group per channel is InstanceNormalization */
    float x[2 * 2 * 3] = {1, 2, 3, 4, 6, 8, -1, 0, 1, 5, 5, 5}, s[2] = {2, 1}, b[2] = {0, 1};
    tensor tx = wrap(F32, 3, (int64_t[]){2, 2, 3}, x), ts = wrap(F32, 1, (int64_t[]){2}, s),
           tb = wrap(F32, 1, (int64_t[]){2}, b), y1 = {0}, y2 = {0};
    const tensor *ins[3] = {&tx, &ts, &tb};
    graft_err e = {0};
    set_int(&t, "num_groups", 2);
    t.attrs[0].i = 2;
    graft_status s1 = run_kernel(&t, ins, 3, &y1, &e);
    node_init(&t, "InstanceNormalization", 6);
    graft_status s2 = run_kernel(&t, ins, 3, &y2, &e);
    bool same = s1 == GRAFT_OK && s2 == GRAFT_OK;
    for (int i = 0; same && i < 12; i++) same = ((float *)y1.data)[i] == ((float *)y2.data)[i];
    /* a constant group normalises to 0, leaving the bias */
    CHECK("groupnorm_equals_instancenorm", same && ((float *)y2.data)[9] == 1.0f, "%s", e.msg);
    tensor_release(&y1);
    tensor_release(&y2);
}

static void test_resize_shapes(void) {
    test_node t;
    node_init(&t, "Resize", 13);
    float sc[4] = {1, 1, 2, 1.5f};
    int64_t sz[4] = {1, 3, 7, 9};
    tensor tsc = wrap(F32, 1, (int64_t[]){4}, sc),
           tsz = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){4}, sz);
    value_info none = {0};
    value_info in[4] = {shaped(F32, 4, (int64_t[]){U, 3, 5, 4}), none,
                        shaped(F32, 1, (int64_t[]){4}), none};
    /* without the scales' value every axis may change (no axes attribute before opset 18) */
    expect_shape("resize_unknown_scales", &t, in, 3, 4, (int64_t[]){U, U, U, U});
    in[2] = known(&tsc);
    expect_shape("resize_scales_round_down", &t, in, 3, 4, (int64_t[]){U, 3, 10, 6});
    in[2] = none;
    in[3] = known(&tsz);
    expect_shape("resize_sizes_symbolic_batch", &t, in, 4, 4, (int64_t[]){1, 3, 7, 9});
    in[2] = known(&tsc);
    expect_error("resize_scales_and_sizes", &t, in, 4, GRAFT_E_INVALID_ARGUMENT, "exactly one");
    in[2] = none;
    set_str(&t, "mode", "bicubic");
    expect_error("resize_bad_mode", &t, in, 4, GRAFT_E_UNSUPPORTED, "mode 'bicubic'");
    t.attrs[0].s = (char *)"nearest";
    set_int(&t, "antialias", 1);
    expect_error("resize_nearest_antialias", &t, in, 4, GRAFT_E_INVALID_ARGUMENT, "antialias");
    node_init(&t, "Resize", 18);
    set_str(&t, "coordinate_transformation_mode", "half_pixel_symmetric");
    expect_error("resize_symmetric_before_19", &t, in, 4, GRAFT_E_INVALID_ARGUMENT, "opset 19");
    node_init(&t, "Resize", 18);
    set_str(&t, "keep_aspect_ratio_policy", "not_larger");
    set_ints(&t, "axes", 2, (int64_t[]){2, 3});
    int64_t sz2[2] = {10, 10};
    tensor tsz2 = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){2}, sz2);
    in[0] = shaped(F32, 4, (int64_t[]){2, 3, 5, 4});
    in[3] = known(&tsz2);
    /* not_larger: one scale, min(10/5, 10/4) = 2, for both axes */
    expect_shape("resize_keep_aspect_not_larger", &t, in, 4, 4, (int64_t[]){2, 3, 10, 8});
    in[3] = known(&tsz);
    expect_error("resize_sizes_per_axis", &t, in, 4, GRAFT_E_SHAPE, "2 integers");
    node_init(&t, "Resize", 13);
    set_str(&t, "coordinate_transformation_mode", "tf_crop_and_resize");
    expect_error("resize_crop_needs_roi", &t, in, 4, GRAFT_E_INVALID_ARGUMENT, "roi");
}

static void test_resize_kernels(void) {
    /* Resize-10 rounds nearest down (Upsample's rule): 2 -> 3 picks 0 0 1 (x / 1.5) */
    test_node t;
    node_init(&t, "Resize", 10);
    float x[3] = {10, 20, 30}, sc[1] = {1.5f};
    tensor tx = wrap(F32, 1, (int64_t[]){2}, x), tsc = wrap(F32, 1, (int64_t[]){1}, sc), y = {0};
    const tensor *ins[2] = {&tx, &tsc};
    graft_err e = {0};
    graft_status s = run_kernel(&t, ins, 2, &y, &e);
    const float *o = y.data;
    CHECK("resize10_nearest_floor",
          s == GRAFT_OK && y.dims[0] == 3 && o[0] == 10 && o[1] == 10 && o[2] == 20, "%s", e.msg);
    tensor_release(&y);
    /* linear half_pixel upscaling clamps at the edges: 2 -> 4 gives 10 12.5 17.5 20 */
    node_init(&t, "Resize", 13);
    set_str(&t, "mode", "linear");
    float sc2[1] = {2.0f};
    tensor tsc2 = wrap(F32, 1, (int64_t[]){1}, sc2), tx2 = wrap(F32, 1, (int64_t[]){2}, x);
    tensor troi = wrap(F32, 1, (int64_t[]){0}, NULL);
    const tensor *ins2[3] = {&tx2, &troi, &tsc2};
    s = run_kernel(&t, ins2, 3, &y, &e);
    o = y.data;
    CHECK("resize_linear_half_pixel_edges",
          s == GRAFT_OK && o[0] == 10 && o[1] == 12.5f && o[2] == 17.5f && o[3] == 20, "%s", e.msg);
    tensor_release(&y);
}

static void test_einsum(void) {
    test_node t;
    node_init(&t, "Einsum", 12);
    value_info in[2] = {shaped(F32, 4, (int64_t[]){U, 12, U, 64}),
                        shaped(F32, 4, (int64_t[]){U, 12, U, 64})};
    set_str(&t, "equation", "bhqd,bhkd->bhqk");
    expect_shape("einsum_attention_scores", &t, in, 2, 4, (int64_t[]){U, 12, U, U});
    in[0] = shaped(F32, 4, (int64_t[]){2, 12, 5, 64});
    in[1] = shaped(F32, 4, (int64_t[]){2, 12, 7, 64});
    t.attrs[0].s = (char *)"bhqd, bhkd"; /* implicit: the labels seen once, sorted: "kq" */
    expect_shape("einsum_implicit_sorted", &t, in, 2, 2, (int64_t[]){7, 5});
    in[0] = shaped(F32, 3, (int64_t[]){1, 5, 8});
    in[1] = shaped(F32, 2, (int64_t[]){4, 8});
    t.attrs[0].s = (char *)"...d,ed->...e";
    expect_shape("einsum_ellipsis", &t, in, 2, 3, (int64_t[]){1, 5, 4});
    in[1] = shaped(F32, 3, (int64_t[]){3, 1, 8});
    t.attrs[0].s = (char *)"...d,...d->...";
    expect_shape("einsum_ellipsis_broadcast", &t, in, 2, 2, (int64_t[]){3, 5});
    in[1] = shaped(F32, 2, (int64_t[]){4, 7});
    t.attrs[0].s = (char *)"...d,ed->...e";
    expect_error("einsum_label_sizes", &t, in, 2, GRAFT_E_SHAPE, "has size 7");
    t.attrs[0].s = (char *)"ij,jk,kl->il";
    expect_error("einsum_term_count", &t, in, 2, GRAFT_E_INVALID_ARGUMENT, "3 input terms");
    in[0] = shaped(F32, 2, (int64_t[]){4, 7});
    t.attrs[0].s = (char *)"ij,ij->iz";
    expect_error("einsum_output_label_unknown", &t, in, 2, GRAFT_E_INVALID_ARGUMENT, "'z'");
    t.attrs[0].s = (char *)"i1,ij->i";
    expect_error("einsum_bad_character", &t, in, 2, GRAFT_E_INVALID_ARGUMENT, "'1'");
    t.attrs[0].s = (char *)"ijk,ij->i";
    expect_error("einsum_rank_mismatch", &t, in, 2, GRAFT_E_SHAPE, "rank 2");

    /* a diagonal (a repeated label) and an int64 matrix product, computed */
    float m[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    tensor tm = wrap(F32, 2, (int64_t[]){3, 3}, m), y = {0};
    const tensor *one[1] = {&tm};
    graft_err e = {0};
    t.attrs[0].s = (char *)"ii->i";
    graft_status s = run_kernel(&t, one, 1, &y, &e);
    const float *d = y.data;
    CHECK("einsum_diagonal", s == GRAFT_OK && d[0] == 1 && d[1] == 5 && d[2] == 9, "%s", e.msg);
    tensor_release(&y);
    int64_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    tensor ta = wrap(GRAFT_DTYPE_I64, 2, (int64_t[]){2, 2}, a),
           tb = wrap(GRAFT_DTYPE_I64, 2, (int64_t[]){2, 2}, b);
    const tensor *two[2] = {&ta, &tb};
    t.attrs[0].s = (char *)"ij,jk->ik";
    s = run_kernel(&t, two, 2, &y, &e);
    const int64_t *p = y.data;
    CHECK("einsum_int64_matmul",
          s == GRAFT_OK && p[0] == 19 && p[1] == 22 && p[2] == 43 && p[3] == 50, "%s", e.msg);
    tensor_release(&y);
}

int main(void) {
    test_norms();
    test_resize_shapes();
    test_resize_kernels();
    test_einsum();
    return test_failures ? 1 : 0;
}

/* test_shape_inference.c: unit tests of the tensor-family shape inference over partly known
 * shapes and values, plus a few reference kernels on edge cases (negative steps, reflect pads,
 * out-of-range indices). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/op.h"
#include "test_node.h"
#include "test_util.h"

#define U -1 /* an unknown dim */

/* What is known about an input: dtype and dims (ndim -1: unknown rank). */
static value_info shaped(graft_dtype dt, int ndim, const int64_t *dims) {
    value_info v;
    memset(&v, 0, sizeof v);
    v.present = true;
    v.dtype = dt;
    v.ndim = ndim;
    for (int i = 0; i < ndim; i++) v.dims[i] = dims[i];
    return v;
}

/* A 1-D int64 input whose value is known; t and vals must outlive the value_info. */
static value_info known_ints(tensor *t, int64_t *vals, int n) {
    memset(t, 0, sizeof *t);
    t->dtype = GRAFT_DTYPE_I64;
    t->ndim = 1;
    t->dims[0] = n;
    t->data = vals;
    value_info v = shaped(GRAFT_DTYPE_I64, 1, t->dims);
    v.value = t;
    return v;
}

static value_info scalar_i64(tensor *t, int64_t *val) {
    value_info v = known_ints(t, val, 1);
    t->ndim = 0;
    v.ndim = 0;
    return v;
}

/* Run the op's inference and compare the output with the expected dtype and shape. */
static void expect(const char *name, test_node *t, const value_info *in, int n_in, int n_out,
                   int out_index, graft_dtype dt, int ndim, const int64_t *dims) {
    value_info out[4];
    graft_err e = {0};
    memset(out, 0, sizeof out);
    const op_def *def = op_find(t->node.op_type);
    graft_status st = def->infer(&t->node, in, n_in, out, n_out, &e);
    if (st != GRAFT_OK) {
        CHECK(name, false, "inference failed: %s", e.msg);
        return;
    }
    const value_info *o = &out[out_index];
    char got[256], want[256];
    shape_str(got, sizeof got, o->ndim, o->dims);
    shape_str(want, sizeof want, ndim, dims);
    bool same = o->present && o->dtype == dt && o->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = o->dims[i] == dims[i];
    CHECK(name, same, "got %s %s (rank %d), want %s %s (rank %d)", graft_dtype_name(o->dtype), got,
          o->ndim, graft_dtype_name(dt), want, ndim);
}

static void expect_error(const char *name, test_node *t, const value_info *in, int n_in, int n_out,
                         graft_status want) {
    value_info out[4];
    graft_err e = {0};
    graft_status st = op_find(t->node.op_type)->infer(&t->node, in, n_in, out, n_out, &e);
    CHECK(name, st == want, "status %d (%s), want %d", st, e.msg, want);
}

static void test_reshape(void) {
    test_node t;
    tensor ts;
    node_init(&t, "Reshape", 14);
    int64_t bert[3] = {U, 128, 768}, copy_split[4] = {0, 0, 12, 64};
    value_info in[2] = {shaped(GRAFT_DTYPE_F32, 3, bert), known_ints(&ts, copy_split, 4)};
    expect("reshape_copy_unknown_dim", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 4,
           (int64_t[]){U, 128, 12, 64});
    int64_t full[3] = {2, 3, 4}, infer[2] = {-1, 4};
    in[0] = shaped(GRAFT_DTYPE_F32, 3, full);
    in[1] = known_ints(&ts, infer, 2);
    expect("reshape_infer_minus_one", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){6, 4});
    int64_t part[2] = {U, 8}, infer3[3] = {-1, 2, 4};
    in[0] = shaped(GRAFT_DTYPE_F32, 2, part);
    in[1] = known_ints(&ts, infer3, 3);
    expect("reshape_minus_one_unknown_input", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 3,
           (int64_t[]){U, 2, 4});
    in[1] = shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){3});
    expect("reshape_unknown_value_known_length", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 3,
           (int64_t[]){U, U, U});
    int64_t small[2] = {2, 3}, bad[2] = {4, 2};
    in[0] = shaped(GRAFT_DTYPE_F32, 2, small);
    in[1] = known_ints(&ts, bad, 2);
    expect_error("reshape_wrong_count", &t, in, 2, 1, GRAFT_E_SHAPE);
    int64_t two[2] = {-1, -1};
    in[1] = known_ints(&ts, two, 2);
    expect_error("reshape_two_minus_ones", &t, in, 2, 1, GRAFT_E_INVALID_ARGUMENT);
}

static void test_concat_flatten_transpose(void) {
    test_node t;
    node_init(&t, "Concat", 13);
    set_int(&t, "axis", 0);
    value_info in[2] = {shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){U, 3}),
                        shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){2, 3})};
    expect("concat_unknown_on_axis", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){U, 3});
    t.attrs[0].i = -1;
    in[1] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){4, 5});
    expect("concat_unknown_off_axis", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){4, 8});
    in[0] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){3, 3});
    expect_error("concat_mismatch", &t, in, 2, 1, GRAFT_E_SHAPE);
    in[1] = shaped(GRAFT_DTYPE_I64, 2, (int64_t[]){3, 5});
    expect_error("concat_dtype_mismatch", &t, in, 2, 1, GRAFT_E_DTYPE);

    node_init(&t, "Flatten", 13);
    in[0] = shaped(GRAFT_DTYPE_F32, 3, (int64_t[]){U, 3, 4});
    expect("flatten_unknown_batch", &t, in, 1, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){U, 12});
    set_int(&t, "axis", -3);
    expect("flatten_axis_minus_rank", &t, in, 1, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){1, U});

    node_init(&t, "Transpose", 13);
    int64_t perm[3] = {0, 2, 1};
    set_ints(&t, "perm", 3, perm);
    in[0] = shaped(GRAFT_DTYPE_F32, 3, (int64_t[]){U, 3, 5});
    expect("transpose_perm", &t, in, 1, 1, 0, GRAFT_DTYPE_F32, 3, (int64_t[]){U, 5, 3});
    perm[2] = 0;
    node_init(&t, "Transpose", 13);
    set_ints(&t, "perm", 3, perm);
    expect_error("transpose_bad_perm", &t, in, 1, 1, GRAFT_E_INVALID_ARGUMENT);
}

static void test_slice(void) {
    test_node t;
    tensor ts[4];
    node_init(&t, "Slice", 13);
    int64_t axes[2] = {1, 2};
    value_info in[5] = {shaped(GRAFT_DTYPE_F32, 3, (int64_t[]){4, U, 6}),
                        shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){2}),
                        shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){2}), known_ints(&ts[0], axes, 2)};
    expect("slice_unknown_starts_known_axes", &t, in, 4, 1, 0, GRAFT_DTYPE_F32, 3,
           (int64_t[]){4, U, U});
    in[3] = shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){2});
    expect("slice_unknown_axes_known_rank", &t, in, 4, 1, 0, GRAFT_DTYPE_F32, 3,
           (int64_t[]){U, U, U});
    int64_t starts[1] = {1}, ends[1] = {INT64_MAX}, ax0[1] = {0}, steps[1] = {2};
    in[0] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){10, U});
    in[1] = known_ints(&ts[0], starts, 1);
    in[2] = known_ints(&ts[1], ends, 1);
    in[3] = known_ints(&ts[2], ax0, 1);
    in[4] = known_ints(&ts[3], steps, 1);
    expect("slice_int64_max_end", &t, in, 5, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){5, U});
    starts[0] = -1;
    ends[0] = INT64_MIN;
    steps[0] = -1;
    expect("slice_reverse", &t, in, 5, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){10, U});
    steps[0] = 0;
    expect_error("slice_zero_step", &t, in, 5, 1, GRAFT_E_INVALID_ARGUMENT);

    node_init(&t, "Slice", 9); /* attributes before opset 10 */
    int64_t s9[1] = {-3}, e9[1] = {100}, a9[1] = {-1};
    set_ints(&t, "starts", 1, s9);
    set_ints(&t, "ends", 1, e9);
    set_ints(&t, "axes", 1, a9);
    in[0] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){U, 5});
    expect("slice_opset9_attributes", &t, in, 1, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){U, 3});
}

static void test_gather_shape(void) {
    test_node t;
    tensor ts;
    int64_t zero = 0, big = 4;
    node_init(&t, "Gather", 13);
    value_info in[2] = {shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){4}), scalar_i64(&ts, &zero)};
    expect("gather_on_shape_tensor", &t, in, 2, 1, 0, GRAFT_DTYPE_I64, 0, NULL);
    in[1] = scalar_i64(&ts, &big);
    expect_error("gather_constant_index_out_of_range", &t, in, 2, 1, GRAFT_E_INVALID_ARGUMENT);
    set_int(&t, "axis", 1);
    in[0] = shaped(GRAFT_DTYPE_F32, 3, (int64_t[]){U, 7, 5});
    in[1] = shaped(GRAFT_DTYPE_I32, 2, (int64_t[]){2, 3});
    expect("gather_axis1_2d_indices", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 4, (int64_t[]){U, 2, 3, 5});

    node_init(&t, "Shape", 15);
    in[0] = shaped(GRAFT_DTYPE_F32, 3, (int64_t[]){U, U, U});
    expect("shape_of_unknown_dims", &t, in, 1, 1, 0, GRAFT_DTYPE_I64, 1, (int64_t[]){3});
    set_int(&t, "start", -2);
    expect("shape_start_negative", &t, in, 1, 1, 0, GRAFT_DTYPE_I64, 1, (int64_t[]){2});
    in[0] = shaped(GRAFT_DTYPE_F32, -1, NULL);
    expect("shape_of_unknown_rank", &t, in, 1, 1, 0, GRAFT_DTYPE_I64, 1, (int64_t[]){U});
}

static void test_squeeze_unsqueeze(void) {
    test_node t;
    tensor ts;
    node_init(&t, "Unsqueeze", 11);
    int64_t ax[1] = {0};
    set_ints(&t, "axes", 1, ax);
    value_info in[2] = {shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){U, 5})};
    expect("unsqueeze_opset11_attribute", &t, in, 1, 1, 0, GRAFT_DTYPE_F32, 3,
           (int64_t[]){1, U, 5});
    node_init(&t, "Unsqueeze", 13);
    int64_t last[2] = {-1, 0};
    in[1] = known_ints(&ts, last, 2);
    expect("unsqueeze_opset13_input", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 4, (int64_t[]){1, U, 5, 1});
    in[1] = shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){1});
    expect("unsqueeze_unknown_axes", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 3, (int64_t[]){U, U, U});

    node_init(&t, "Squeeze", 13);
    in[0] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){1, U});
    expect("squeeze_no_axes_unknown_dim", &t, in, 1, 1, 0, GRAFT_DTYPE_F32, -1, NULL);
    in[1] = known_ints(&ts, ax, 1);
    expect("squeeze_axis0", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 1, (int64_t[]){U});
    in[0] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){3, U});
    expect_error("squeeze_not_one", &t, in, 2, 1, GRAFT_E_SHAPE);
}

static void test_split_expand_pad(void) {
    test_node t;
    tensor ts;
    node_init(&t, "Split", 18);
    set_int(&t, "num_outputs", 3);
    value_info in[4] = {shaped(GRAFT_DTYPE_F32, 1, (int64_t[]){7})};
    expect("split_num_outputs_last_smaller", &t, in, 1, 3, 2, GRAFT_DTYPE_F32, 1, (int64_t[]){1});
    node_init(&t, "Split", 13);
    in[1] = shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){2});
    expect("split_unknown_sizes", &t, in, 2, 2, 1, GRAFT_DTYPE_F32, 1, (int64_t[]){U});
    expect_error("split_uneven_before_18", &t, in, 1, 2, GRAFT_E_SHAPE);

    node_init(&t, "Expand", 13);
    in[0] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){3, 1});
    in[1] = shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){3});
    expect("expand_unknown_shape_value", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 3, (int64_t[]){U, 3, U});
    int64_t target[3] = {2, 1, 6};
    in[1] = known_ints(&ts, target, 3);
    expect("expand_bidirectional", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 3, (int64_t[]){2, 3, 6});

    node_init(&t, "Pad", 13);
    in[0] = shaped(GRAFT_DTYPE_F32, 2, (int64_t[]){2, U});
    in[1] = shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){4});
    expect("pad_unknown_pads", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){U, U});
    int64_t pads[4] = {1, 0, 1, 2};
    in[1] = known_ints(&ts, pads, 4);
    expect("pad_known_pads_unknown_dim", &t, in, 2, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){4, U});
    pads[0] = -4;
    expect_error("pad_negative_size", &t, in, 2, 1, GRAFT_E_SHAPE);
}

static void test_generators(void) {
    test_node t;
    tensor ts[3];
    node_init(&t, "ConstantOfShape", 9);
    value_info in[3] = {shaped(GRAFT_DTYPE_I64, 1, (int64_t[]){2})};
    expect("constantofshape_unknown_value", &t, in, 1, 1, 0, GRAFT_DTYPE_F32, 2, (int64_t[]){U, U});

    node_init(&t, "Constant", 13);
    int64_t vals[3] = {1, 2, 3};
    set_ints(&t, "value_ints", 3, vals);
    expect("constant_value_ints", &t, in, 0, 1, 0, GRAFT_DTYPE_I64, 1, (int64_t[]){3});
    node_attr(&t, "value_float", IR_ATTR_FLOAT);
    expect_error("constant_two_values", &t, in, 0, 1, GRAFT_E_MALFORMED_MODEL);
    node_init(&t, "Constant", 13);
    node_attr(&t, "value_strings", IR_ATTR_STRINGS);
    expect_error("constant_strings_unsupported", &t, in, 0, 1, GRAFT_E_UNSUPPORTED);

    node_init(&t, "Range", 11);
    int64_t start = 0, limit = 10, delta = 3;
    in[0] = scalar_i64(&ts[0], &start);
    in[1] = scalar_i64(&ts[1], &limit);
    in[2] = scalar_i64(&ts[2], &delta);
    expect("range_known", &t, in, 3, 1, 0, GRAFT_DTYPE_I64, 1, (int64_t[]){4});
    in[1] = shaped(GRAFT_DTYPE_I64, 0, NULL);
    expect("range_unknown_limit", &t, in, 3, 1, 0, GRAFT_DTYPE_I64, 1, (int64_t[]){U});
}

/* Run a kernel on an output shaped by inference; returns its status. */
static graft_status run_kernel(test_node *t, const tensor *const *ins, int n_in, tensor *out,
                               graft_err *e) {
    value_info vi[5], vo[1];
    for (int i = 0; i < n_in; i++) {
        vi[i] = shaped(ins[i]->dtype, ins[i]->ndim, ins[i]->dims);
        vi[i].value = ins[i];
    }
    const op_def *def = op_find(t->node.op_type);
    TRY(def->infer(&t->node, vi, n_in, vo, 1, e));
    TRY(tensor_make(out, vo[0].dtype, vo[0].ndim, vo[0].dims, e));
    tensor *outs[1] = {out};
    op_call call = {&t->node, ins, n_in, outs, 1, e};
    return def->reference(&call);
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

static void test_kernels(void) {
    test_node t;
    graft_err e = {0};
    tensor out;
    float x[6] = {0, 1, 2, 3, 4, 5};
    int64_t st = -1, en = INT64_MIN, ax = 1, sp = -2;
    tensor data = wrap(GRAFT_DTYPE_F32, 2, (int64_t[]){2, 3}, x);
    tensor ts = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){1}, &st);
    tensor te = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){1}, &en);
    tensor ta = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){1}, &ax);
    tensor tp = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){1}, &sp);
    node_init(&t, "Slice", 13);
    const tensor *sl[5] = {&data, &ts, &te, &ta, &tp};
    graft_status s = run_kernel(&t, sl, 5, &out, &e);
    const float *o = out.data;
    CHECK("kernel_slice_negative_step",
          s == GRAFT_OK && out.dims[1] == 2 && o[0] == 2 && o[1] == 0 && o[2] == 5 && o[3] == 3,
          "status %d %s", s, e.msg);
    tensor_release(&out);

    int64_t pads[4] = {0, 2, 0, 2};
    tensor tpads = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){4}, pads);
    node_init(&t, "Pad", 13);
    t.attrs[0] = (ir_attr){.name = (char *)"mode", .type = IR_ATTR_STRING, .s = (char *)"reflect"};
    t.node.n_attrs = 1;
    const tensor *pd[2] = {&data, &tpads};
    s = run_kernel(&t, pd, 2, &out, &e);
    o = out.data;
    CHECK("kernel_pad_reflect",
          s == GRAFT_OK && out.dims[1] == 7 && o[0] == 2 && o[1] == 1 && o[2] == 0 && o[5] == 1 &&
              o[6] == 0 && o[7] == 5,
          "status %d %s", s, e.msg);
    tensor_release(&out);

    int32_t bad_idx[2] = {1, 2};
    tensor tidx = wrap(GRAFT_DTYPE_I32, 1, (int64_t[]){2}, bad_idx);
    node_init(&t, "Gather", 13);
    const tensor *g[2] = {&data, &tidx};
    value_info vi[2] = {shaped(GRAFT_DTYPE_F32, 2, data.dims),
                        shaped(GRAFT_DTYPE_I32, 1, tidx.dims)},
               vo;
    op_find("Gather")->infer(&t.node, vi, 2, &vo, 1, &e);
    tensor_make(&out, vo.dtype, vo.ndim, vo.dims, &e);
    tensor *outs[1] = {&out};
    op_call call = {&t.node, g, 2, outs, 1, &e};
    s = ref_Gather(&call);
    CHECK("kernel_gather_out_of_range", s == GRAFT_E_INVALID_ARGUMENT, "status %d", s);
    tensor_release(&out);
}

/* The kernel of t on ins whose values inference does not see (as for graph inputs), so that
 * the kernel's own index checks run. */
static graft_status run_unseen(test_node *t, const tensor *const *ins, int n_in, graft_err *e) {
    value_info vi[3], vo;
    for (int i = 0; i < n_in; i++) vi[i] = shaped(ins[i]->dtype, ins[i]->ndim, ins[i]->dims);
    TRY(op_find(t->node.op_type)->infer(&t->node, vi, n_in, &vo, 1, e));
    tensor out;
    TRY(tensor_make(&out, vo.dtype, vo.ndim, vo.dims, e));
    tensor *outs[1] = {&out};
    op_call call = {&t->node, ins, n_in, outs, 1, e};
    graft_status s = op_find(t->node.op_type)->reference(&call);
    tensor_release(&out);
    return s;
}

/* An out-of-range index is an error naming the node, the value and the axis size, at load when
 * the indices are constant and in the kernel otherwise. */
static void test_index_errors(void) {
    float data[6] = {0, 1, 2, 3, 4, 5};
    tensor x = wrap(GRAFT_DTYPE_F32, 2, (int64_t[]){2, 3}, data);
    int64_t ge_idx[2] = {0, 3}; /* 3 is outside axis 1 (size 3) */
    tensor tge = wrap(GRAFT_DTYPE_I64, 2, (int64_t[]){1, 2}, ge_idx);
    test_node t;
    graft_err e = {0};
    node_init(&t, "GatherElements", 13);
    set_int(&t, "axis", 1);
    graft_status s = run_unseen(&t, (const tensor *[]){&x, &tge}, 2, &e);
    CHECK("gatherelements_index_error",
          s == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "'test'") && strstr(e.msg, "index 3") &&
              strstr(e.msg, "axis 1 of size 3"),
          "status %d: %s", s, e.msg);
    int64_t nd_idx[2] = {1, -4}; /* (1, -4): -4 is outside axis 1 */
    tensor tnd = wrap(GRAFT_DTYPE_I64, 2, (int64_t[]){1, 2}, nd_idx);
    node_init(&t, "GatherND", 13);
    s = run_unseen(&t, (const tensor *[]){&x, &tnd}, 2, &e);
    CHECK("gathernd_index_error",
          s == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "index -4") &&
              strstr(e.msg, "axis 1 of size 3"),
          "status %d: %s", s, e.msg);
    int64_t sc_idx[1] = {2}; /* row 2 of a 2-row tensor */
    tensor tsc = wrap(GRAFT_DTYPE_I64, 2, (int64_t[]){1, 1}, sc_idx);
    tensor upd = wrap(GRAFT_DTYPE_F32, 2, (int64_t[]){1, 3}, data);
    node_init(&t, "ScatterND", 13);
    s = run_unseen(&t, (const tensor *[]){&x, &tsc, &upd}, 3, &e);
    CHECK("scatternd_index_error",
          s == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "index 2") &&
              strstr(e.msg, "axis 0 of size 2"),
          "status %d: %s", s, e.msg);
    /* Constant indices: the load (inference) already refuses them. */
    value_info vi[2] = {shaped(GRAFT_DTYPE_F32, 2, x.dims), shaped(GRAFT_DTYPE_I64, 2, tnd.dims)},
               vo;
    vi[1].value = &tnd;
    node_init(&t, "GatherND", 13);
    s = op_find("GatherND")->infer(&t.node, vi, 2, &vo, 1, &e);
    CHECK("gathernd_constant_index_error_at_load",
          s == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "index -4"), "status %d: %s", s, e.msg);
    /* Tile with unknown repeats keeps the rank; known ones multiply the dims. */
    int64_t reps[2] = {3, 2};
    tensor treps = wrap(GRAFT_DTYPE_I64, 1, (int64_t[]){2}, reps);
    vi[1] = shaped(GRAFT_DTYPE_I64, 1, treps.dims);
    vi[0].dims[0] = -1;
    node_init(&t, "Tile", 13);
    s = op_find("Tile")->infer(&t.node, vi, 2, &vo, 1, &e);
    CHECK("tile_unknown_repeats", s == GRAFT_OK && vo.ndim == 2 && vo.dims[1] == -1, "%s", e.msg);
    vi[1].value = &treps;
    s = op_find("Tile")->infer(&t.node, vi, 2, &vo, 1, &e);
    CHECK("tile_symbolic_dim", s == GRAFT_OK && vo.dims[0] == -1 && vo.dims[1] == 6, "%s", e.msg);
}

int main(void) {
    test_reshape();
    test_concat_flatten_transpose();
    test_slice();
    test_gather_shape();
    test_squeeze_unsqueeze();
    test_split_expand_pad();
    test_generators();
    test_kernels();
    test_index_errors();
    return test_failures ? 1 : 0;
}

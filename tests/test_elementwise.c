/* test_elementwise.c: the exporters' element-wise ops beyond ONNX's node tests: shape inference
 * errors (PRelu's slope, Mod's fmod, bool-only logic) and reference kernels on edge cases (ties
 * in Round, signs in Mod, the most negative integer, NaN, overflow in Softplus). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/tensor.h"
#include "ops/op.h"
#include "test_node.h"
#include "test_util.h"

static value_info shaped(graft_dtype dt, int ndim, const int64_t *dims) {
    value_info v;
    memset(&v, 0, sizeof v);
    v.present = true;
    v.dtype = dt;
    v.ndim = ndim;
    for (int i = 0; i < ndim; i++) v.dims[i] = dims[i];
    return v;
}

static graft_status infer(test_node *t, const value_info *in, int n_in, value_info *out,
                          graft_err *e) {
    memset(out, 0, sizeof *out);
    return op_find(t->node.op_type)->infer(&t->node, in, n_in, out, 1, e);
}

static void expect_status(const char *name, test_node *t, const value_info *in, int n_in,
                          graft_status want) {
    value_info out;
    graft_err e = {0};
    graft_status st = infer(t, in, n_in, &out, &e);
    CHECK(name, st == want, "status %d (%s), want %d", st, e.msg, want);
}

static void test_inference(void) {
    test_node t;
    value_info out;
    graft_err e = {0};
    int64_t x4[4] = {2, 3, 4, 4}, c11[3] = {3, 1, 1}, x2[2] = {2, 3}, s5[1] = {5};
    value_info in[2] = {shaped(GRAFT_DTYPE_F32, 4, x4), shaped(GRAFT_DTYPE_F32, 3, c11)};
    node_init(&t, "PRelu", 16);
    graft_status st = infer(&t, in, 2, &out, &e);
    CHECK("infer_prelu_channel_slope",
          st == GRAFT_OK && out.ndim == 4 && out.dims[1] == 3 && out.dims[3] == 4, "%s", e.msg);
    in[0] = shaped(GRAFT_DTYPE_F32, 2, x2);
    in[1] = shaped(GRAFT_DTYPE_F32, 1, s5);
    expect_status("infer_prelu_slope_does_not_broadcast", &t, in, 2, GRAFT_E_SHAPE);
    in[1] = shaped(GRAFT_DTYPE_F32, 3, c11); /* (3,1,1) would widen X (2,3) to rank 3 */
    expect_status("infer_prelu_slope_of_higher_rank", &t, in, 2, GRAFT_E_SHAPE);

    node_init(&t, "Mod", 13);
    in[0] = shaped(GRAFT_DTYPE_F32, 2, x2);
    in[1] = shaped(GRAFT_DTYPE_F32, 2, x2);
    expect_status("infer_mod_float_needs_fmod1", &t, in, 2, GRAFT_E_INVALID_ARGUMENT);
    set_int(&t, "fmod", 2);
    expect_status("infer_mod_fmod_2", &t, in, 2, GRAFT_E_INVALID_ARGUMENT);

    node_init(&t, "And", 7);
    expect_status("infer_and_float_refused", &t, in, 2, GRAFT_E_DTYPE);
    node_init(&t, "Sign", 13);
    in[0] = shaped(GRAFT_DTYPE_BOOL, 2, x2);
    expect_status("infer_sign_bool_refused", &t, in, 1, GRAFT_E_DTYPE);
    node_init(&t, "Celu", 12);
    set_float(&t, "alpha", 0.0f);
    in[0] = shaped(GRAFT_DTYPE_F32, 2, x2);
    expect_status("infer_celu_alpha_zero", &t, in, 1, GRAFT_E_INVALID_ARGUMENT);

    int64_t b1[2] = {1, 3};
    in[0] = shaped(GRAFT_DTYPE_I64, 2, x2);
    in[1] = shaped(GRAFT_DTYPE_I64, 2, b1);
    node_init(&t, "GreaterOrEqual", 16);
    st = infer(&t, in, 2, &out, &e);
    CHECK("infer_greaterorequal_i64_bool",
          st == GRAFT_OK && out.dtype == GRAFT_DTYPE_BOOL && out.ndim == 2 && out.dims[0] == 2,
          "%s", e.msg);
    in[0] = shaped(GRAFT_DTYPE_F16, 2, x2);
    node_init(&t, "IsNaN", 13);
    st = infer(&t, in, 1, &out, &e);
    CHECK("infer_isnan_bool", st == GRAFT_OK && out.dtype == GRAFT_DTYPE_BOOL, "%s", e.msg);
}

/* Run op's inference and reference kernel on inputs; *out gets the result (caller releases). */
static graft_status run(test_node *t, const tensor *const *ins, int n_in, tensor *out,
                        graft_err *e) {
    value_info vi[4], vo;
    for (int i = 0; i < n_in; i++) vi[i] = shaped(ins[i]->dtype, ins[i]->ndim, ins[i]->dims);
    TRY(infer(t, vi, n_in, &vo, e));
    TRY(tensor_make(out, vo.dtype, vo.ndim, vo.dims, e));
    tensor *outs[1] = {out};
    op_call call = {&t->node, ins, n_in, outs, 1, e};
    return op_find(t->node.op_type)->reference(&call);
}

static tensor wrap(graft_dtype dt, int64_t n, void *data) {
    tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = 1;
    t.dims[0] = n;
    t.data = data;
    return t;
}

/* out's n floats equal want's within 1e-6 relative and 1e-40 absolute (NaN matching NaN). */
static bool same_floats(const tensor *out, const float *want, int n) {
    const float *o = out->data;
    for (int i = 0; i < n; i++) {
        bool close = fabsf(o[i] - want[i]) <= 1e-6f * fabsf(want[i]) + 1e-40f;
        if (!(o[i] == want[i] || close || (isnan(o[i]) && isnan(want[i])))) return false;
    }
    return true;
}

static void unary_f32(const char *name, const char *op, int opset, float *x, const float *want,
                      int n) {
    test_node t;
    graft_err e = {0};
    tensor out = {0}, tx = wrap(GRAFT_DTYPE_F32, n, x);
    const tensor *ins[1] = {&tx};
    node_init(&t, op, opset);
    graft_status st = run(&t, ins, 1, &out, &e);
    CHECK(name, st == GRAFT_OK && same_floats(&out, want, n), "status %d %s", st, e.msg);
    tensor_release(&out);
}

static void test_float_kernels(void) {
    float ties[6] = {-2.5f, -0.5f, 0.5f, 1.5f, 2.5f, NAN};
    unary_f32("kernel_round_half_to_even", "Round", 11, ties,
              (const float[]){-2.0f, -0.0f, 0.0f, 2.0f, 2.0f, NAN}, 6);
    float signs[4] = {-3.0f, 0.0f, 2.0f, NAN};
    unary_f32("kernel_sign_keeps_nan", "Sign", 13, signs, (const float[]){-1, 0, 1, NAN}, 4);
    float big[3] = {100.0f, -100.0f, NAN};
    /* log(1 + e^-100) = 3.72e-44 (a float denormal), not 0 and not inf - inf */
    unary_f32("kernel_softplus_no_overflow", "Softplus", 1, big,
              (const float[]){100.0f, 3.72e-44f, NAN}, 3);
    unary_f32("kernel_mish_tails", "Mish", 18, big, (const float[]){100.0f, -3.72e-42f, NAN}, 3);
    unary_f32("kernel_hardsigmoid_nan", "HardSigmoid", 6, big, (const float[]){1, 0, NAN}, 3);
    float inf[4] = {INFINITY, -INFINITY, NAN, 1.0f};
    test_node t;
    graft_err e = {0};
    tensor out = {0}, tx = wrap(GRAFT_DTYPE_F32, 4, inf);
    const tensor *ins[1] = {&tx};
    node_init(&t, "IsInf", 10);
    set_int(&t, "detect_positive", 0);
    graft_status st = run(&t, ins, 1, &out, &e);
    const uint8_t *b = out.data;
    CHECK("kernel_isinf_negative_only", st == GRAFT_OK && !b[0] && b[1] && !b[2] && !b[3],
          "status %d %s", st, e.msg);
    tensor_release(&out);
}

/* Mod on int64 in both modes (Python's % and C's), the most negative value by -1, a zero
 * divisor refused. */
static void test_integer_kernels(void) {
    int64_t a[5] = {-7, 7, -7, INT64_MIN, 6}, d[5] = {3, -3, -3, -1, 4};
    int64_t floored[5] = {2, -2, -1, 0, 2}, truncated[5] = {-1, 1, -1, 0, 2};
    tensor ta = wrap(GRAFT_DTYPE_I64, 5, a), td = wrap(GRAFT_DTYPE_I64, 5, d);
    const tensor *ins[2] = {&ta, &td};
    for (int fmod = 0; fmod < 2; fmod++) {
        test_node t;
        graft_err e = {0};
        tensor out = {0};
        node_init(&t, "Mod", 13);
        set_int(&t, "fmod", fmod);
        graft_status st = run(&t, ins, 2, &out, &e);
        CHECK(fmod ? "kernel_mod_i64_fmod1" : "kernel_mod_i64_floored",
              st == GRAFT_OK && memcmp(out.data, fmod ? truncated : floored, sizeof a) == 0,
              "status %d %s", st, e.msg);
        tensor_release(&out);
    }
    int64_t zero[1] = {0};
    tensor tz = wrap(GRAFT_DTYPE_I64, 1, zero);
    const tensor *zins[2] = {&ta, &tz};
    test_node t;
    graft_err e = {0};
    tensor out = {0};
    node_init(&t, "Mod", 13);
    graft_status st = run(&t, zins, 2, &out, &e);
    CHECK("kernel_mod_zero_divisor", st == GRAFT_E_INVALID_ARGUMENT && strstr(e.msg, "zero"),
          "status %d %s", st, e.msg);
    tensor_release(&out);

    int8_t s8[4] = {-128, -1, 0, 127}, want8[4] = {-1, -1, 0, 1};
    tensor t8 = wrap(GRAFT_DTYPE_I8, 4, s8);
    const tensor *sins[1] = {&t8};
    node_init(&t, "Sign", 13);
    st = run(&t, sins, 1, &out, &e);
    CHECK("kernel_sign_i8", st == GRAFT_OK && memcmp(out.data, want8, 4) == 0, "status %d", st);
    tensor_release(&out);
}

int main(void) {
    test_inference();
    test_float_kernels();
    test_integer_kernels();
    return test_failures ? 1 : 0;
}

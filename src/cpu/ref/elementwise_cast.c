/* elementwise_cast.c: reference kernel of Cast between every graft dtype, following ONNX's rules:
 * float to integer truncates toward zero, integer to narrower integer keeps the low bits, and
 * anything to bool is "not zero". */
#include <string.h>

#include "../../ops/op.h"
#include "elementwise_scalar.h"

/* One element of any dtype into any other, exactly where the target can hold the value. */
static void cast_element(const void *x, graft_dtype from, void *y, graft_dtype to, int64_t i) {
    if (dtype_is_float(from)) {
        double d = scalar_load_f64(x, from, i);
        if (dtype_is_float(to))
            scalar_store_float(y, to, i, d);
        else if (to == GRAFT_DTYPE_BOOL)
            ((uint8_t *)y)[i] = d != 0.0; /* NaN is true */
        else
            scalar_store_int(y, to, i, scalar_f64_to_int(d, to));
        return;
    }
    int64_t v = scalar_load_int(x, from, i);
    if (!dtype_is_float(to)) {
        scalar_store_int(y, to, i, v);
        return;
    }
    bool is_unsigned = from == GRAFT_DTYPE_U64;
    if (to == GRAFT_DTYPE_F32) /* straight to float: no double rounding through double */
        ((float *)y)[i] = is_unsigned ? (float)(uint64_t)v : (float)v;
    else
        scalar_store_float(y, to, i, is_unsigned ? (double)(uint64_t)v : (double)v);
}

static void cast_generic(const tensor *x, tensor *y, int64_t n) {
    graft_dtype from = x->dtype, to = y->dtype;
    const void *src = x->data;
    void *dst = y->data;
#pragma omp parallel for if (n >= ELEMENTWISE_PARALLEL_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) cast_element(src, from, dst, to, i);
}

/* Typed loops for the conversions real models spend time in (masks, mixed precision). */
#define CAST_LOOP(TS, TD, EXPR)                                                                    \
    do {                                                                                           \
        const TS *src = x->data;                                                                   \
        TD *dst = y->data;                                                                         \
        PARALLEL_SIMD_FOR for (int64_t i = 0; i < n; i++) {                                        \
            TS v = src[i];                                                                         \
            dst[i] = (EXPR);                                                                       \
        }                                                                                          \
        return true;                                                                               \
    } while (0)

static bool cast_from_f32(const tensor *x, tensor *y, int64_t n) {
    switch (y->dtype) {
    case GRAFT_DTYPE_F16:
        CAST_LOOP(float, uint16_t, f32_to_f16(v));
    case GRAFT_DTYPE_BF16:
        CAST_LOOP(float, uint16_t, f32_to_bf16(v));
    case GRAFT_DTYPE_F64:
        CAST_LOOP(float, double, (double)v);
    case GRAFT_DTYPE_I64:
        CAST_LOOP(float, int64_t, scalar_f64_to_int(v, GRAFT_DTYPE_I64));
    case GRAFT_DTYPE_I32:
        CAST_LOOP(float, int32_t,
                  (int32_t)(uint32_t)(uint64_t)scalar_f64_to_int(v, GRAFT_DTYPE_I32));
    case GRAFT_DTYPE_BOOL:
        CAST_LOOP(float, uint8_t, v != 0.0f);
    default:
        return false;
    }
}

static bool cast_to_f32(const tensor *x, tensor *y, int64_t n) {
    switch (x->dtype) {
    case GRAFT_DTYPE_F16:
        CAST_LOOP(uint16_t, float, f16_to_f32(v));
    case GRAFT_DTYPE_BF16:
        CAST_LOOP(uint16_t, float, bf16_to_f32(v));
    case GRAFT_DTYPE_F64:
        CAST_LOOP(double, float, (float)v);
    case GRAFT_DTYPE_I64:
        CAST_LOOP(int64_t, float, (float)v);
    case GRAFT_DTYPE_I32:
        CAST_LOOP(int32_t, float, (float)v);
    case GRAFT_DTYPE_U8:
        CAST_LOOP(uint8_t, float, (float)v);
    case GRAFT_DTYPE_BOOL:
        CAST_LOOP(uint8_t, float, v ? 1.0f : 0.0f);
    default:
        return false;
    }
}

static bool cast_between_ints(const tensor *x, tensor *y, int64_t n) {
    if (x->dtype == GRAFT_DTYPE_I64 && y->dtype == GRAFT_DTYPE_I32)
        CAST_LOOP(int64_t, int32_t, (int32_t)(uint32_t)(uint64_t)v);
    if (x->dtype == GRAFT_DTYPE_I32 && y->dtype == GRAFT_DTYPE_I64)
        CAST_LOOP(int32_t, int64_t, (int64_t)v);
    if (x->dtype == GRAFT_DTYPE_BOOL && y->dtype == GRAFT_DTYPE_I64)
        CAST_LOOP(uint8_t, int64_t, v ? 1 : 0);
    if (x->dtype == GRAFT_DTYPE_I64 && y->dtype == GRAFT_DTYPE_BOOL)
        CAST_LOOP(int64_t, uint8_t, v != 0);
    return false;
}

graft_status ref_Cast(const op_call *c) {
    const tensor *x = c->in[0];
    tensor *y = c->out[0];
    int64_t n = tensor_numel(x);
    if (!dtype_is_valid(x->dtype) || !dtype_is_valid(y->dtype))
        return op_error(c->node, c->err, GRAFT_E_UNSUPPORTED, "cannot cast %s to %s",
                        graft_dtype_name(x->dtype), graft_dtype_name(y->dtype));
    if (n != tensor_numel(y))
        return op_error(c->node, c->err, GRAFT_E_INTERNAL, "output size differs from the input");
    if (n <= 0) return GRAFT_OK;
    if (x->dtype == y->dtype) {
        if (y->data != x->data) memcpy(y->data, x->data, (size_t)tensor_nbytes(x));
        return GRAFT_OK;
    }
    if (x->dtype == GRAFT_DTYPE_F32 && cast_from_f32(x, y, n)) return GRAFT_OK;
    if (y->dtype == GRAFT_DTYPE_F32 && cast_to_f32(x, y, n)) return GRAFT_OK;
    if (cast_between_ints(x, y, n)) return GRAFT_OK;
    cast_generic(x, y, n);
    return GRAFT_OK;
}

/* scalar.h: exact reads and writes of one element of any dtype, inline for kernels' generic
 * paths: integers never pass through double, floats are rounded once. */
#ifndef GRAFT_CORE_SCALAR_H
#define GRAFT_CORE_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "graft.h"
#include "half.h"

/* Element i of an integer or bool array, as int64 (uint64 keeps its bits). */
static inline int64_t scalar_load_int(const void *p, graft_dtype dt, int64_t i) {
    switch (dt) {
    case GRAFT_DTYPE_I8:
        return ((const int8_t *)p)[i];
    case GRAFT_DTYPE_I16:
        return ((const int16_t *)p)[i];
    case GRAFT_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case GRAFT_DTYPE_I64:
        return ((const int64_t *)p)[i];
    case GRAFT_DTYPE_U8:
        return ((const uint8_t *)p)[i];
    case GRAFT_DTYPE_U16:
        return ((const uint16_t *)p)[i];
    case GRAFT_DTYPE_U32:
        return ((const uint32_t *)p)[i];
    case GRAFT_DTYPE_U64:
        return (int64_t)((const uint64_t *)p)[i];
    case GRAFT_DTYPE_BOOL:
        return ((const uint8_t *)p)[i] != 0;
    default:
        return 0;
    }
}

/* Element i of any numeric array as double (exact for every float dtype). */
static inline double scalar_load_f64(const void *p, graft_dtype dt, int64_t i) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        return ((const float *)p)[i];
    case GRAFT_DTYPE_F64:
        return ((const double *)p)[i];
    case GRAFT_DTYPE_F16:
        return f16_to_f32(((const uint16_t *)p)[i]);
    case GRAFT_DTYPE_BF16:
        return bf16_to_f32(((const uint16_t *)p)[i]);
    case GRAFT_DTYPE_U64:
        return (double)((const uint64_t *)p)[i];
    default:
        return (double)scalar_load_int(p, dt, i);
    }
}

/* Store v into an integer array, keeping the low bits (two's complement wrap, as ONNX Cast). */
static inline void scalar_store_int(void *p, graft_dtype dt, int64_t i, int64_t v) {
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case GRAFT_DTYPE_I8:
        ((int8_t *)p)[i] = (int8_t)(uint8_t)u;
        break;
    case GRAFT_DTYPE_I16:
        ((int16_t *)p)[i] = (int16_t)(uint16_t)u;
        break;
    case GRAFT_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)(uint32_t)u;
        break;
    case GRAFT_DTYPE_I64:
        ((int64_t *)p)[i] = v;
        break;
    case GRAFT_DTYPE_U8:
        ((uint8_t *)p)[i] = (uint8_t)u;
        break;
    case GRAFT_DTYPE_U16:
        ((uint16_t *)p)[i] = (uint16_t)u;
        break;
    case GRAFT_DTYPE_U32:
        ((uint32_t *)p)[i] = (uint32_t)u;
        break;
    case GRAFT_DTYPE_U64:
        ((uint64_t *)p)[i] = u;
        break;
    case GRAFT_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    default:
        break;
    }
}

/* Truncate toward zero into int64. Out of range is undefined in ONNX; C would make it undefined
 * behaviour, so saturate instead (NaN gives 0). Unsigned targets wrap the result, so a negative
 * value cast to uint8 gives what numpy gives on common hardware (-1 -> 255). */
static inline int64_t scalar_f64_to_int(double d, graft_dtype dt) {
    if (isnan(d)) return 0;
    if (dt == GRAFT_DTYPE_U64 && d >= 9223372036854775808.0)
        return d >= 18446744073709551616.0 ? -1 : (int64_t)(uint64_t)d;
    if (d >= 9223372036854775808.0) return INT64_MAX;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)d;
}

/* Round d to float with round-to-odd, so that a later rounding to a narrower float (f16, bf16)
 * gives the correctly rounded result of d rather than a double-rounded one. */
static inline float scalar_f64_to_f32_odd(double d) {
    float f = (float)d;
    if ((double)f == d || isnan(d) || isinf(f)) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f); /* truncate toward zero */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits |= 1u; /* inexact: make the last bit odd */
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Store d into a float array of any float dtype, correctly rounded. */
static inline void scalar_store_float(void *p, graft_dtype dt, int64_t i, double d) {
    switch (dt) {
    case GRAFT_DTYPE_F32:
        ((float *)p)[i] = (float)d;
        break;
    case GRAFT_DTYPE_F64:
        ((double *)p)[i] = d;
        break;
    case GRAFT_DTYPE_F16:
        ((uint16_t *)p)[i] = f32_to_f16(scalar_f64_to_f32_odd(d));
        break;
    case GRAFT_DTYPE_BF16:
        ((uint16_t *)p)[i] = f32_to_bf16(scalar_f64_to_f32_odd(d));
        break;
    default:
        break;
    }
}

#endif

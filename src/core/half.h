/* half.h: conversions between f32 and the 16-bit floats f16 (IEEE binary16) and bf16. */
#ifndef GRAFT_CORE_HALF_H
#define GRAFT_CORE_HALF_H

#include <stdint.h>
#include <string.h>

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f); /* round to nearest even, overflow to inf, NaN kept */

/* bf16's two are inline and branch-free, so loops over rows of them vectorise (a call per
 * value cost seconds over a million cached feature rows). */
static inline float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) { /* round to nearest even, NaN kept (quiet) */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

#endif

/* half.h: conversions between f32 and the 16-bit floats f16 (IEEE binary16) and bf16. */
#ifndef GRAFT_CORE_HALF_H
#define GRAFT_CORE_HALF_H

#include <stdint.h>

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f); /* round to nearest even, overflow to inf, NaN kept */
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f); /* round to nearest even, NaN kept */

#endif

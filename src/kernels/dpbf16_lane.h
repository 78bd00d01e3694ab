/* One lane of AVX512_BF16 in plain C: what vcvtne2ps2bf16 makes of a float and what vdpbf16ps adds into a
 * float32 lane, as Intel documents them. The portable twins of the bf16 products (bgemm.c, conv3x3_bf16.c)
 * compute with these, so that every CPU runs and tests the same packing and the same order of sums. */
#ifndef SNUG_KERNELS_DPBF16_LANE_H
#define SNUG_KERNELS_DPBF16_LANE_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "kernels/vmath.h" /* vm_to_bits, vm_from_bits */

/* x rounded to bfloat16 as vcvtne2ps2bf16 documents it: zero and denormals to a zero of their sign, infinities
 * kept, NaNs truncated and made quiet, other values to nearest, ties to even (an integer add of 0x7FFF plus
 * the lowest kept bit; a carry into the exponent is the correct rounding, up to infinity). */
static inline uint32_t dpbf16_of(float x) {
    const uint32_t u = vm_to_bits(x), exp = u >> 23 & 0xFF;
    if (exp == 0) return u >> 16 & 0x8000;
    if (exp == 0xFF) return u & 0x7FFFFF ? (u >> 16 | 0x40) : u >> 16;
    return (u + 0x7FFF + (u >> 16 & 1)) >> 16;
}

/* A bf16 (the low 16 bits) as the float32 it denotes, denormals read as zero. */
static inline float dpbf16_value(uint32_t h) {
    const uint32_t u = (h & 0xFFFF) << 16;
    return vm_from_bits(u >> 23 & 0xFF ? u : u & 0x80000000u);
}

/* Denormals to a zero of their sign: vdpbf16ps's inputs (the accumulator included) and results. */
static inline float dpbf16_flush(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

/* One lane of vdpbf16ps: the product of the high halves, then of the low halves, each added by a fused
 * multiply-add (one rounding each), the result flushed after each. fmaf rounds a result below FLT_MIN to the
 * denormal grid before the flush, so an exact sum within 2^-150 below FLT_MIN comes out as FLT_MIN, where
 * hardware that rounds to 24 bits first may flush it to zero; nothing else differs from the documented lane. */
static inline float dpbf16_lane(float acc, uint32_t a, uint32_t b) {
    acc = dpbf16_flush(fmaf(dpbf16_value(a >> 16), dpbf16_value(b >> 16), dpbf16_flush(acc)));
    return dpbf16_flush(fmaf(dpbf16_value(a), dpbf16_value(b), acc));
}

#endif

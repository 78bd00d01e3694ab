/* bfloat16: the top 16 bits of a float (sign, the 8 exponent bits, 7 mantissa bits), the storage type of bf16
 * mixed precision. Widening is exact (the bits shifted up); narrowing rounds to nearest, ties to even, as an
 * IEEE conversion would: subnormals round like any other value (no flush to zero), a finite value at or past
 * the midpoint above the largest bf16 becomes infinity, and NaN stays NaN (quieted). The scalar functions are
 * branch-free integer code, so the array kernels built on them vectorise and give the same bits in every
 * VM_KERNEL clone and on every chunk split. */
#ifndef SNUG_KERNELS_BF16_H
#define SNUG_KERNELS_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t bf16;

/* x rounded to nearest, ties to even (bf16_round_bits: the float pattern u with its low 16 bits rounded away;
 * bf16_from_float: its top half). Adding 0x7FFF plus the lowest kept bit to the pattern carries into the
 * kept bits exactly when the dropped half is above the midpoint, or at it with an odd kept part; a carry out of
 * the mantissa moves the exponent up, which is also how the largest finite values round to infinity. The same
 * addition would turn a NaN whose payload lies only in the dropped bits into infinity (or, for the all-ones
 * pattern, wrap to zero), so NaN is selected by a mask instead: its top bits with the quiet bit set. */
static inline uint32_t bf16_round_bits(uint32_t u) {
    const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
    const uint32_t quiet_nan = u | 0x00400000u;
    const uint32_t nan_mask = 0u - (uint32_t)((u & 0x7FFFFFFFu) > 0x7F800000u);
    return ((quiet_nan & nan_mask) | (rounded & ~nan_mask)) & 0xFFFF0000u;
}

static inline bf16 bf16_from_float(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (bf16)(bf16_round_bits(u) >> 16);
}

/* Exact: every bf16 is a float. */
static inline float bf16_to_float(bf16 h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The float whose value is bf16_from_float(x): what storing x in bf16 and reading it back gives. Computed on
 * the 32-bit pattern, with no narrowing and widening between (the vectorised loops then stay in 32-bit lanes). */
static inline float bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = bf16_round_bits(u);
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The array forms, one element at a time as the functions above (vectorised, on the calling thread). */
void bf16_pack(bf16 *dst, const float *src, size_t n);
void bf16_unpack(float *dst, const bf16 *src, size_t n);
void bf16_round_floats(float *dst, const float *src, size_t n); /* dst may be src */
/* The bfloat16 of floats that already are bfloat16 values (bf16_round's results): their top halves, with no
 * rounding arithmetic; the bits of bf16_pack over such values. */
void bf16_pack_rounded(bf16 *dst, const float *src, size_t n);
/* values rounded in place and their bfloat16 in packed, in one pass: the bits of bf16_round_floats then
 * bf16_pack. */
void bf16_round_pack(float *values, bf16 *packed, size_t n);

/* The same over large arrays: chunks spread over the OpenMP threads once the array is long enough and the work
 * outweighs opening a team (core/parallel.h), a direct call below that. The bits never depend on the split. */
void bf16_pack_par(bf16 *dst, const float *src, size_t n);
void bf16_unpack_par(float *dst, const bf16 *src, size_t n);
void bf16_round_floats_par(float *dst, const float *src, size_t n); /* dst may be src */
void bf16_round_pack_par(float *values, bf16 *packed, size_t n);

#endif

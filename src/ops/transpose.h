/* Out-of-place matrix transpose, for the layouts a product wants: linear layers of 17 to 64 rows multiply
 * transposed (y^T = W x^T), which needs x^T and gives y^T. A scalar transpose costs ~1 ns per float (a
 * 64-row micro-batch of MLP spent 5% of its step there, on one thread while the other waited); 16 x 16 blocks
 * turned in AVX-512 registers cost a tenth of that. */
#ifndef SNUG_OPS_TRANSPOSE_H
#define SNUG_OPS_TRANSPOSE_H

#include <stddef.h>

/* dst (c, r), rows ldd apart = src (r, c)^T, rows lds apart. Splits the columns of src over the OpenMP threads
 * when that pays; every element is a copy, so the result does not depend on it. */
void transpose_floats(float *dst, size_t ldd, const float *src, size_t lds, size_t r, size_t c);

/* The same on the calling thread only (sgemm's packing, inside its own parallel region). */
void transpose_floats_serial(float *dst, size_t ldd, const float *src, size_t lds, size_t r, size_t c);

/* Rows [0, r) of src (r, c) as strips of 8 rows, each column of a strip 8 consecutive floats: dst[s * sstride +
 * p * 8 + i] = src[(8 s + i) * lds + p] for p < c, and zero for the rows past r in the last strip (sgemm's
 * packing of a row-major A). Two strips per 16 x 16 register block: transpose_floats_serial with ldd = 8 turns
 * half-empty blocks. On the calling thread. */
void transpose_to_strips8(float *dst, size_t sstride, const float *src, size_t lds, size_t r, size_t c);

#endif

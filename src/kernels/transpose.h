/* Out-of-place matrix transpose, for the layouts sgemm's packing wants (a weight read as W^T, a row-major A cut
 * into strips). A scalar transpose costs ~1 ns per float; 16 x 16 blocks turned in AVX-512 registers cost a
 * tenth of that. Both run on the calling thread (sgemm packs inside its own parallel region). */
#ifndef SNUG_KERNELS_TRANSPOSE_H
#define SNUG_KERNELS_TRANSPOSE_H

#include <stddef.h>

/* dst (c, r), rows ldd apart = src (r, c)^T, rows lds apart. */
void transpose_floats(float *dst, size_t ldd, const float *src, size_t lds, size_t r, size_t c);

/* Rows [0, r) of src (r, c) as strips of 8 rows, each column of a strip 8 consecutive floats: dst[s * sstride +
 * p * 8 + i] = src[(8 s + i) * lds + p] for p < c, and zero for the rows past r in the last strip (sgemm's
 * packing of a row-major A). Two strips per 16 x 16 register block: transpose_floats with ldd = 8 would turn
 * half-empty blocks. On the calling thread. */
void transpose_to_strips8(float *dst, size_t sstride, const float *src, size_t lds, size_t r, size_t c);

#endif

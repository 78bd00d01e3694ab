/* What conv3x3_winograd.c (the driver, the products, F(2x2, 3x3)'s transforms) shares with
 * conv3x3_winograd_f4.c (F(4x4, 3x3)'s transforms): where a plane's tiles sit in the vectors of a block. */
#ifndef SNUG_KERNELS_WINOGRAD_TILES_H
#define SNUG_KERNELS_WINOGRAD_TILES_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/avx512.h"

/* Which tiles share a vector. Narrow planes (tw <= 8 tiles across) put R = 16 / tw whole tile rows into one
 * vector, tile (ty0 + r, tx) in lane r tw + tx, so that small planes fill their vectors; wider ones give each
 * tile row ceil(tw / 16) vectors of up to 16 tiles. A block is nvb consecutive vectors. */
typedef struct wgeom {
    size_t n;        /* outputs per tile side: 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)) */
    size_t th, tw;   /* tile rows and columns: ceil(h / n), ceil(w / n) */
    size_t R;        /* tile rows per vector, or 1 */
    size_t per_row;  /* vectors per tile row when R = 1 */
    size_t nvec;     /* vectors of the plane */
} wgeom;

/* F(4x4, 3x3)'s transforms, the counterparts of F(2x2, 3x3)'s in conv3x3_winograd.c. */

/* U = G g G^T of one kernel g (3x3, row-major): u[xi * xi_stride] = U[xi / 6][xi % 6]. */
void winograd4_weight_tile(float *u, size_t xi_stride, const float g[9]);

#ifdef SNUG_AVX512
/* v = B^T d for six taps (16 lanes of each): F(4x4)'s input transform along one direction, shared by the input
 * gradient's tiles-in-lanes transform and the weight gradient's channels-in-lanes one. */
static inline __attribute__((always_inline)) AVX512 void bt6(__m512 v[6], const __m512 d[6]) {
    const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f), five = _mm512_set1_ps(5.0f);
    const __m512 a = _mm512_fnmadd_ps(four, d[2], d[4]), b = _mm512_fnmadd_ps(four, d[1], d[3]); /* d4-4d2, d3-4d1 */
    const __m512 c = _mm512_sub_ps(d[4], d[2]), e = _mm512_mul_ps(two, _mm512_sub_ps(d[3], d[1]));
    v[0] = _mm512_fmadd_ps(four, d[0], _mm512_fnmadd_ps(five, d[2], d[4]));
    v[1] = _mm512_add_ps(a, b);
    v[2] = _mm512_sub_ps(a, b);
    v[3] = _mm512_add_ps(c, e);
    v[4] = _mm512_sub_ps(c, e);
    v[5] = _mm512_fmadd_ps(four, d[1], _mm512_fnmadd_ps(five, d[3], d[5]));
}

/* The same for 16 kernels, tap i of kernel j in lane j of g[i]: the same operations in the same order per
 * lane, so the same bits. Row xi of u (pairs floats apart) gets the lanes m at column p0. */
AVX512 void winograd4_weight_tiles16(float *u, size_t pairs, size_t p0, __mmask16 m, const __m512 g[9]);

/* v[xi * xs + lane] = (B^T d B)[xi] of the tiles of vector q of plane (h, w) (lanes without a tile: zero or
 * finite leftovers). */
AVX512 void winograd4_input_vec(float *v, size_t xs, const float *plane, size_t h, size_t w, const wgeom *g,
                                size_t q);

/* The outputs Y = A^T M A of vector q's tiles (m[xi * xs + lane]) into plane out (h, w): bias not NULL:
 * out = *bias + Y, else out += Y. */
AVX512 void winograd4_output_vec(float *out, const float *m, size_t xs, size_t h, size_t w, const wgeom *g,
                                 size_t q, const float *bias);
#endif

#endif

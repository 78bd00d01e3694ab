/* F(4x4, 3x3)'s transforms for the Winograd driver of conv3x3_winograd.c: 36 products per 4x4 output tile and
 * channel pair instead of F(2x2, 3x3)'s 16 per 2x2 (2.25 per output instead of 4), with (Lavin and Gray's
 * points 0, +-1, +-2)
 *     B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *     G   = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
 *     A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * on 6x6 input tiles (rows 4 ty - 1 .. 4 ty + 4, columns likewise, zero outside the plane). The larger
 * coefficients cost accuracy (2.8e-6 of the terms' magnitudes against F(2x2)'s 1.3e-7), which is why only the
 * input gradient takes F(4x4), where it saves a quarter of the products or more (conv3x3_winograd_tile).
 *
 * The input transform runs down the columns first, 16 columns a vector with plain loads, into a small buffer;
 * then along each transformed row, whose taps (column 4 tx - 1 + j of tile tx) come out of the buffer by
 * permutes. The output transform runs down the columns of M, then along its rows, and interleaves the four
 * outputs of each tile row into the plane's row order by permutes. */
#include "kernels/winograd_tiles.h"

#include <stdint.h>

/* 1D transforms: the rows of a tile (the columns go the same way). Fixed expressions, so the bits depend on
 * the data only. */
static void g_rows(float a[6], float g0, float g1, float g2) {
    a[0] = 0.25f * g0;
    a[1] = (-1.0f / 6.0f) * ((g0 + g1) + g2);
    a[2] = (-1.0f / 6.0f) * ((g0 - g1) + g2);
    a[3] = (1.0f / 24.0f) * ((g0 + 2.0f * g1) + 4.0f * g2);
    a[4] = (1.0f / 24.0f) * ((g0 - 2.0f * g1) + 4.0f * g2);
    a[5] = g2;
}

void winograd4_weight_tile(float *u, size_t xi_stride, const float g[9]) {
    float a[6][3], r[6];
    for (int j = 0; j < 3; j++) { /* G g, column j */
        float col[6];
        g_rows(col, g[j], g[3 + j], g[6 + j]);
        for (int i = 0; i < 6; i++) a[i][j] = col[i];
    }
    for (int i = 0; i < 6; i++) { /* (G g) G^T, row i */
        g_rows(r, a[i][0], a[i][1], a[i][2]);
        for (int j = 0; j < 6; j++) u[(size_t)(6 * i + j) * xi_stride] = r[j];
    }
}

#ifdef SNUG_AVX512

/* g_rows for 16 kernels: mul and add as the scalar code (no fused multiply-add), the same bits. */
static inline __attribute__((always_inline)) AVX512 void g_rows16(__m512 a[6], __m512 g0, __m512 g1, __m512 g2) {
    const __m512 two = _mm512_set1_ps(2.0f), four = _mm512_set1_ps(4.0f);
    const __m512 s6 = _mm512_set1_ps(-1.0f / 6.0f), s24 = _mm512_set1_ps(1.0f / 24.0f);
    a[0] = _mm512_mul_ps(_mm512_set1_ps(0.25f), g0);
    a[1] = _mm512_mul_ps(s6, _mm512_add_ps(_mm512_add_ps(g0, g1), g2));
    a[2] = _mm512_mul_ps(s6, _mm512_add_ps(_mm512_sub_ps(g0, g1), g2));
    a[3] = _mm512_mul_ps(s24, _mm512_add_ps(_mm512_add_ps(g0, _mm512_mul_ps(two, g1)), _mm512_mul_ps(four, g2)));
    a[4] = _mm512_mul_ps(s24, _mm512_add_ps(_mm512_sub_ps(g0, _mm512_mul_ps(two, g1)), _mm512_mul_ps(four, g2)));
    a[5] = g2;
}

AVX512 void winograd4_weight_tiles16(float *u, size_t pairs, size_t p0, __mmask16 m, const __m512 g[9]) {
    __m512 a[3][6], r[6];
    for (int j = 0; j < 3; j++) g_rows16(a[j], g[j], g[3 + j], g[6 + j]); /* a[j][i] = (G g)[i][j] */
    for (int i = 0; i < 6; i++) {
        g_rows16(r, a[0][i], a[1][i], a[2][i]);
        for (int j = 0; j < 6; j++) _mm512_mask_storeu_ps(u + (size_t)(6 * i + j) * pairs + p0, m, r[j]);
    }
}

/* y = A^T m for six values. */
static inline __attribute__((always_inline)) AVX512 void at6(__m512 y[4], const __m512 m[6]) {
    const __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
    const __m512 c = _mm512_add_ps(m[3], m[4]), d = _mm512_sub_ps(m[3], m[4]);
    y[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
    y[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d, b);
    y[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), c, a);
    y[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d, b), m[5]);
}

/* ---- input ------------------------------------------------------------------------------------------------ */

/* Columns c0 - 1 + 16 k .. + 15 of one input row (zero outside the plane), c0 = 4 tx0. */
static inline __attribute__((always_inline)) AVX512 __m512 row_chunk(const float *row, size_t w, size_t c0, size_t k) {
    if (c0 == 0 && k == 0) /* columns -1 .. 14: column 0 on into lane 1 */
        return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(_mm512_maskz_loadu_ps(avx512_lanes(w), row)),
                                                       _mm512_setzero_si512(), 15));
    const size_t c = c0 - 1 + 16 * k;
    return c < w ? _mm512_maskz_loadu_ps(avx512_lanes(w - c), row + c) : _mm512_setzero_ps();
}

/* Chunks of 16 buffer columns that the taps of nt tiles reach (columns 0 .. 4 nt + 1). */
static size_t chunks_of(size_t nt) { return (4 * nt + 1) / 16 + 1; }

/* buf[i][e] = (B^T d)[i] of input column 4 tx0 - 1 + e, for the rows of tile row ty. */
static AVX512 void columns_down(float buf[6][80], const float *plane, size_t h, size_t w, size_t ty, size_t tx0,
                                size_t nch) {
    const float *rows[6];
    for (int k = 0; k < 6; k++) {
        const size_t y = 4 * ty + (size_t)k; /* input row y - 1 */
        rows[k] = y >= 1 && y <= h ? plane + (y - 1) * w : NULL;
    }
    for (size_t k = 0; k < nch; k++) {
        __m512 d[6], v[6];
        for (int r = 0; r < 6; r++) d[r] = rows[r] ? row_chunk(rows[r], w, 4 * tx0, k) : _mm512_setzero_ps();
        bt6(v, d);
        for (int i = 0; i < 6; i++) _mm512_store_ps(&buf[i][16 * k], v[i]);
    }
}

/* The six taps of 16 tiles from one buffer row: d[j] lane l = b[4 l + j]. Taps 0-3 gather lanes 0-7 from
 * chunks 0-1 and lanes 8-15 from chunks 2-3 with one index; taps 4 and 5 are taps 0 and 1 of the next tile. */
static inline __attribute__((always_inline)) AVX512 void row_taps6(__m512 d[6], const float *b, size_t nch) {
    __m512 c[5];
    for (size_t k = 0; k < 5; k++) c[k] = k < nch ? _mm512_load_ps(b + 16 * k) : _mm512_setzero_ps();
    for (int j = 0; j < 4; j++) {
        const __m512i idx = _mm512_add_epi32(_mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0),
                                             _mm512_set1_epi32(j));
        d[j] = _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(c[0], idx, c[1]),
                                    _mm512_permutex2var_ps(c[2], idx, c[3]));
    }
    const __m512i c4 = _mm512_castps_si512(c[4]);
    d[4] = _mm512_castsi512_ps(_mm512_alignr_epi32(c4, _mm512_castps_si512(d[0]), 1));
    d[5] = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_alignr_epi32(c4, c4, 1), _mm512_castps_si512(d[1]), 1));
}

/* The 36 values of tiles (ty, tx0 + lane), lanes [0, nt): wide planes, one piece of a tile row per vector
 * (lanes past nt zero). */
static AVX512 void input_vec_wide(float *v, size_t xs, const float *plane, size_t h, size_t w, size_t ty, size_t tx0,
                                  size_t nt) {
    _Alignas(64) float buf[6][80];
    const size_t nch = chunks_of(nt);
    const __mmask16 lanes = avx512_lanes(nt);
    columns_down(buf, plane, h, w, ty, tx0, nch);
    for (int i = 0; i < 6; i++) {
        __m512 d[6], t[6];
        row_taps6(d, buf[i], nch);
        bt6(t, d);
        for (int j = 0; j < 6; j++) _mm512_storeu_ps(v + (size_t)(6 * i + j) * xs, _mm512_maskz_mov_ps(lanes, t[j]));
    }
}

/* The column pass of one tile row of a narrow plane (w <= 32): buf[i][at + e] = (B^T d)[i] of column e - 1 for
 * e in [0, 4 tw) (its tiles' taps 0-3; the stores run up to 16 floats past, into the next row's place), and
 * (B^T d)[i] of column 4 tw - 1 (tap 4 of its last tile) into lane `end` of last[i] + 16. */
static AVX512 void narrow_row_down(float buf[6][80], float last[6][32], const float *plane, size_t h, size_t w,
                                   size_t tw, size_t ty, size_t at, size_t end) {
    const size_t nx = (4 * tw + 15) / 16, col = 4 * tw - 1; /* nx <= 2 */
    __m512 x[2][6];
    for (size_t k = 0; k < nx; k++) {
        __m512 d[6];
        for (int r = 0; r < 6; r++) {
            const size_t y = 4 * ty + (size_t)r; /* input row y - 1 */
            d[r] = y >= 1 && y <= h && 16 * k < w ? _mm512_maskz_loadu_ps(avx512_lanes(w - 16 * k), plane + (y - 1) * w + 16 * k)
                                                  : _mm512_setzero_ps();
        }
        bt6(x[k], d);
    }
    for (int i = 0; i < 6; i++) {
        const __m512i x0 = _mm512_castps_si512(x[0][i]);
        _mm512_storeu_ps(&buf[i][at], _mm512_castsi512_ps(_mm512_alignr_epi32(x0, _mm512_setzero_si512(), 15)));
        if (nx > 1)
            _mm512_storeu_ps(&buf[i][at + 16],
                             _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(x[1][i]), x0, 15)));
        _mm512_mask_storeu_ps(&last[i][16 + end - col % 16], (__mmask16)(1u << (col % 16)), x[col / 16][i]);
    }
}

/* Narrow planes, R tile rows a vector: lane r tw + tx's taps 0-3 sit at 4 lane + j of one buffer, as in a wide
 * row, so the same permutes take them for all R rows at once; a row's last tile takes tap 4 from `last` and
 * tap 5 (column 4 tw, past every narrow plane) zero. */
static AVX512 void input_vec_narrow(float *v, size_t xs, const float *plane, size_t h, size_t w, const wgeom *g,
                                    size_t q) {
    _Alignas(64) float buf[6][80], last[6][32];
    const size_t ty0 = q * g->R, rows = g->th - ty0 < g->R ? g->th - ty0 : g->R;
    __mmask16 ends = 0;
    for (int i = 0; i < 6; i++) /* entries no row writes read as zero */
        for (size_t k = rows * 4 * g->tw / 16; k < 4; k++) _mm512_store_ps(&buf[i][16 * k], _mm512_setzero_ps());
    for (size_t r = 0; r < rows; r++) {
        const size_t end = r * g->tw + g->tw - 1;
        narrow_row_down(buf, last, plane, h, w, g->tw, ty0 + r, 4 * r * g->tw, end);
        ends |= (__mmask16)(1u << end);
    }
    const __m512i zero = _mm512_setzero_si512();
    for (int i = 0; i < 6; i++) {
        __m512 d[6], t[6];
        row_taps6(d, buf[i], 4);
        d[4] = _mm512_mask_blend_ps(ends, _mm512_castsi512_ps(_mm512_alignr_epi32(zero, _mm512_castps_si512(d[0]), 1)),
                                    _mm512_loadu_ps(&last[i][16]));
        d[5] = _mm512_maskz_mov_ps((__mmask16)~ends,
                                   _mm512_castsi512_ps(_mm512_alignr_epi32(zero, _mm512_castps_si512(d[1]), 1)));
        bt6(t, d);
        for (int j = 0; j < 6; j++) _mm512_storeu_ps(v + (size_t)(6 * i + j) * xs, t[j]);
    }
}

AVX512 void winograd4_input_vec(float *v, size_t xs, const float *plane, size_t h, size_t w, const wgeom *g,
                                size_t q) {
    if (g->R > 1) {
        input_vec_narrow(v, xs, plane, h, w, g, q);
        return;
    }
    const size_t ty = q / g->per_row, tx0 = q % g->per_row * 16, nt = g->tw - tx0 < 16 ? g->tw - tx0 : 16;
    input_vec_wide(v, xs, plane, h, w, ty, tx0, nt);
}

/* ---- output ----------------------------------------------------------------------------------------------- */

/* row[0, ncol) (+)= y[0..3] interleaved (column 4 l + b from lane shift + l of y[b]); bias: row = bias + ... */
static inline __attribute__((always_inline)) AVX512 void put_row4(float *row, __m512 y[4], size_t ncol,
                                                                  size_t shift, const float *bias) {
    const __m512i sh = _mm512_set1_epi32((int)shift);
    const __m512i ilo = _mm512_add_epi32(_mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0), sh);
    const __m512i ihi = _mm512_add_epi32(_mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8),
                                         sh);
    const __m512i qa = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), qb = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    __m512d p = _mm512_castps_pd(_mm512_permutex2var_ps(y[0], ilo, y[1])); /* y0 y1 pairs, lanes 0-7 */
    __m512d r = _mm512_castps_pd(_mm512_permutex2var_ps(y[2], ilo, y[3]));
    __m512 o[4];
    o[0] = _mm512_castpd_ps(_mm512_permutex2var_pd(p, qa, r));
    o[1] = _mm512_castpd_ps(_mm512_permutex2var_pd(p, qb, r));
    if (ncol > 32) {
        p = _mm512_castps_pd(_mm512_permutex2var_ps(y[0], ihi, y[1]));
        r = _mm512_castps_pd(_mm512_permutex2var_ps(y[2], ihi, y[3]));
        o[2] = _mm512_castpd_ps(_mm512_permutex2var_pd(p, qa, r));
        o[3] = _mm512_castpd_ps(_mm512_permutex2var_pd(p, qb, r));
    }
    for (size_t k = 0; k < 4 && 16 * k < ncol; k++) {
        const size_t n = ncol - 16 * k;
        const __mmask16 m = avx512_lanes(n);
        float *dst = row + 16 * k;
        const __m512 x = bias ? _mm512_add_ps(_mm512_set1_ps(*bias), o[k])
                              : _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), o[k]);
        if (n >= 16) _mm512_storeu_ps(dst, x); /* a masked store into a line not in cache is slow */
        else _mm512_mask_storeu_ps(dst, m, x);
    }
}

/* The rows y[0..3] of one tile row (lanes shift .. shift + tiles - 1) at plane row 4 ty, columns c0 on. */
static inline __attribute__((always_inline)) AVX512 void put_tile_row(float *out, __m512 y[4][4], size_t h, size_t w,
                                                                      size_t ty, size_t c0, size_t shift,
                                                                      const float *bias) {
    const size_t ncol = w - c0 < 64 ? w - c0 : 64;
    for (size_t r = 0; r < 4 && 4 * ty + r < h; r++) put_row4(out + (4 * ty + r) * w + c0, y[r], ncol, shift, bias);
}

AVX512 void winograd4_output_vec(float *out, const float *m, size_t xs, size_t h, size_t w, const wgeom *g,
                                 size_t q, const float *bias) {
    __m512 t[4][6], y[4][4]; /* A^T M down the columns, then along the rows */
    for (int b = 0; b < 6; b++) {
        __m512 col[6], c[4];
        for (int a = 0; a < 6; a++) col[a] = _mm512_loadu_ps(m + (size_t)(6 * a + b) * xs);
        at6(c, col);
        for (int r = 0; r < 4; r++) t[r][b] = c[r];
    }
    for (int r = 0; r < 4; r++) at6(y[r], t[r]);
    if (g->R == 1) {
        put_tile_row(out, y, h, w, q / g->per_row, q % g->per_row * 64, 0, bias);
        return;
    }
    for (size_t r = 0, ty = q * g->R; r < g->R && ty < g->th; r++, ty++)
        put_tile_row(out, y, h, w, ty, 0, r * g->tw, bias);
}

#endif

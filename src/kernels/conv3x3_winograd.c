/* conv3x3_winograd: Winograd F(2x2, 3x3) as conv3x3_winograd.h describes. Compiled for AVX-512 through a
 * function attribute (the build has no -march), like conv3x3_direct; conv3x3_winograd_available says whether
 * to call it. The input tiles are read straight from the unpadded planes (masked loads, zeros outside), so the
 * scratch holds only one block's transformed input and products. */
#include "kernels/conv3x3_winograd.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/checked.h"
#include "kernels/avx512.h"
#include "kernels/winograd_tiles.h"
#include "kernels/gemm_direct.h"

/* Output channels of one register tile; its vectors of 16 tiles are the block's (1 to 3). */
#define MR 8

/* The transformed values per tile: (n + 2)^2. */
static size_t xi_count(size_t n) { return (n + 2) * (n + 2); }

static wgeom wgeom_of(size_t h, size_t w, size_t n) {
    wgeom g = {.n = n, .th = (h + n - 1) / n, .tw = (w + n - 1) / n};
    g.R = g.tw <= 8 ? 16 / g.tw : 1;
    g.per_row = (g.tw + 15) / 16;
    g.nvec = g.R > 1 ? (g.th + g.R - 1) / g.R : g.th * g.per_row;
    return g;
}

/* Vectors of 16 tiles per block for in input channels: V = nxi x in x 16 nv floats stays near 256 KB, in L2
 * while every group of 8 output channels reads it again; never more than the plane has (its scratch is sized
 * by this too). */
static size_t block_vecs(size_t in, const wgeom *g) {
    const size_t nv = g->n == 2 ? (in <= 64 ? 3 : in <= 128 ? 2 : 1) : (in <= 32 ? 3 : in <= 64 ? 2 : 1);
    return nv < g->nvec ? nv : g->nvec;
}

/* The forward keeps F(2x2, 3x3), whose rounding is the direct kernel's (about 1e-7 of the terms' magnitudes)
 * and whose outputs over all-zero inputs are exactly the bias. F(4x4)'s rounding (about 2e-6) in the forward
 * decides ReLU masks and max-pool choices near a tie differently from a direct convolution: ResNet-20's PyTorch
 * comparison at batch 4 flipped a ReLU after a residual add, moving 1e-2 of some gradients. A backward's
 * rounding decides nothing, only adds its 2e-6. The input gradient takes F(4x4, 3x3) where its products
 * (36 a vector of tiles) are at least a quarter fewer than F(2x2)'s (16 a vector, more vectors): planes of
 * 12x12 and up, but not 8x8 (one vector of 16 tiles either way, of which F(4x4) would fill 4 lanes) nor short
 * wide strips (a third vector per tile row for a few tiles). */
size_t conv3x3_winograd_tile(const conv3x3_shape *s, bool dx) {
    const wgeom g2 = wgeom_of(s->h, s->w, 2), g4 = wgeom_of(s->h, s->w, 4);
    return dx && 36 * g4.nvec * 5 <= 16 * g2.nvec * 4 ? 4 : 2;
}

bool conv3x3_winograd_available(void) {
#ifdef SNUG_AVX512
    return gemm_direct_has_avx512();
#else
    return false;
#endif
}

bool conv3x3_winograd_weights_floats(const conv3x3_shape *s, bool dx, size_t *n) {
    return size_mul(s->c, s->co, n) && size_mul(*n, xi_count(conv3x3_winograd_tile(s, dx)), n);
}

/* One thread's block: V (nxi, in, nbs) then M (nxi, MR, nbs). */
static bool thread_floats(size_t in, const wgeom *g, size_t *n) {
    const size_t nbs = 16 * block_vecs(in, g);
    return size_add(in, MR, n) && size_mul(*n, xi_count(g->n) * nbs, n);
}

bool conv3x3_winograd_scratch_floats(const conv3x3_shape *s, bool dx, size_t T, size_t *n) {
    const wgeom g = wgeom_of(s->h, s->w, conv3x3_winograd_tile(s, dx));
    return thread_floats(dx ? s->co : s->c, &g, n) && size_mul(*n, T < 1 ? 1 : T, n);
}

/* The contiguous range [*lo, *hi) of n items that part t of T owns. */
static void part_range(size_t n, size_t t, size_t T, size_t *lo, size_t *hi) {
    *lo = n * t / T;
    *hi = n * (t + 1) / T;
}

/* U = G g G^T for one kernel g (3x3, row-major), u[xi] = U[xi / 4][xi % 4], xi_stride floats apart. */
static void weight_tile(float *u, size_t xi_stride, const float g[9]) {
    float a[4][3], r[4][4];
    for (int j = 0; j < 3; j++) { /* G g: the rows */
        a[0][j] = g[j];
        a[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        a[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        a[3][j] = g[6 + j];
    }
    for (int i = 0; i < 4; i++) { /* (G g) G^T: the columns */
        r[i][0] = a[i][0];
        r[i][1] = 0.5f * (a[i][0] + a[i][1] + a[i][2]);
        r[i][2] = 0.5f * (a[i][0] - a[i][1] + a[i][2]);
        r[i][3] = a[i][2];
    }
    for (int xi = 0; xi < 16; xi++) u[xi * xi_stride] = r[xi / 4][xi % 4];
}

/* Pairs p in part t of T, in the order that writes u's rows contiguously: forward p = ci co + o (u[xi][ci][o]),
 * input gradient p = o c + ci (u[xi][o][ci], the kernel rotated: g'[i] = g[8 - i]). Runs of 16 pairs go
 * through a small buffer, so that each of the 16 rows of u (pairs floats apart, often a multiple of 4 KB that
 * maps them all to one cache set) receives whole cache lines. */
#ifdef SNUG_AVX512
/* weight_tile for 16 kernels at once, kernel j in lane j (its 9 taps gathered from its own offset): the same
 * operations in the same order per lane, so the same bits; each row of u receives 16 consecutive floats. */
static AVX512 void weight_tiles16(float *u, size_t pairs, size_t p0, size_t n, const float *w, __m512i off,
                                  bool dx, size_t tile) {
    const __mmask16 m = avx512_lanes(n);
    const __m512 half = _mm512_set1_ps(0.5f);
    __m512 g[9], a[4][3];
    for (int i = 0; i < 9; i++) /* the input gradient's kernel is rotated: g'[i] = g[8 - i] */
        g[i] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, _mm512_add_epi32(off, _mm512_set1_epi32(dx ? 8 - i : i)),
                                        w, 4);
    if (tile == 4) {
        winograd4_weight_tiles16(u, pairs, p0, m, g);
        return;
    }
    for (int j = 0; j < 3; j++) {
        a[0][j] = g[j];
        a[1][j] = _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(g[j], g[3 + j]), g[6 + j]));
        a[2][j] = _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(g[j], g[3 + j]), g[6 + j]));
        a[3][j] = g[6 + j];
    }
    for (int i = 0; i < 4; i++) {
        float *row = u + (size_t)(4 * i) * pairs + p0;
        _mm512_mask_storeu_ps(row, m, a[i][0]);
        _mm512_mask_storeu_ps(row + pairs, m,
                              _mm512_mul_ps(half, _mm512_add_ps(_mm512_add_ps(a[i][0], a[i][1]), a[i][2])));
        _mm512_mask_storeu_ps(row + 2 * pairs, m,
                              _mm512_mul_ps(half, _mm512_add_ps(_mm512_sub_ps(a[i][0], a[i][1]), a[i][2])));
        _mm512_mask_storeu_ps(row + 3 * pairs, m, a[i][2]);
    }
}

/* The pairs [lo, hi) sixteen at a time; false (nothing done) when a tap's offset would not fit a gather's
 * 32-bit index. */
static AVX512 bool weights_avx512(const conv3x3_shape *s, float *u, const float *w, bool dx, size_t lo, size_t hi,
                                  size_t tile) {
    const size_t pairs = s->c * s->co;
    if (pairs > (size_t)INT32_MAX / 9) return false;
    for (size_t p0 = lo; p0 < hi; p0 += 16) {
        const size_t n = hi - p0 < 16 ? hi - p0 : 16;
        int32_t off[16] = {0};
        for (size_t j = 0; j < n; j++) {
            const size_t p = p0 + j, o = dx ? p / s->c : p % s->co, ci = dx ? p % s->c : p / s->co;
            off[j] = (int32_t)((o * s->c + ci) * 9);
        }
        weight_tiles16(u, pairs, p0, n, w, _mm512_loadu_si512(off), dx, tile);
    }
    return true;
}
#endif

void conv3x3_winograd_weights(const conv3x3_shape *s, float *u, const float *w, bool dx, size_t t, size_t T) {
    const size_t pairs = s->c * s->co, tile = conv3x3_winograd_tile(s, dx), nxi = xi_count(tile);
    float buf[36][16];
    size_t lo, hi;
    part_range(pairs, t, T, &lo, &hi);
#ifdef SNUG_AVX512
    if (conv3x3_winograd_available() && weights_avx512(s, u, w, dx, lo, hi, tile)) return;
#endif
    for (size_t p0 = lo; p0 < hi; p0 += 16) {
        const size_t n = hi - p0 < 16 ? hi - p0 : 16;
        for (size_t j = 0; j < n; j++) {
            const size_t p = p0 + j, o = dx ? p / s->c : p % s->co, ci = dx ? p % s->c : p / s->co;
            const float *g = w + (o * s->c + ci) * 9;
            float k[9];
            for (int i = 0; i < 9; i++) k[i] = dx ? g[8 - i] : g[i];
            if (tile == 4) winograd4_weight_tile(&buf[0][j], 16, k);
            else weight_tile(&buf[0][j], 16, k);
        }
        for (size_t xi = 0; xi < nxi; xi++)
            for (size_t j = 0; j < n; j++) u[xi * pairs + p0 + j] = buf[xi][j];
    }
}

#ifdef SNUG_AVX512

/* One product's operands and destination: src (in, h, w) -> dst (out, h, w). */
typedef struct wjob {
    size_t in, out, h, w;
    const float *src;
    const float *u;     /* (16, in, out) */
    float *dst;
    const float *bias;  /* (out): dst = bias + ...; NULL: dst += ... */
    size_t tile;        /* 2: F(2x2, 3x3); 4: F(4x4, 3x3) */
    bool fresh;         /* without a bias: dst = 0 + ... (dst holds stale memory) */
} wjob;

/* ---- input transform: V = B^T d B, 16 tiles a vector ------------------------------------------------------ */

/* The row transform d B of one input row y - 1 (y = 0 and y = h + 1: the zero padding) for tiles tx0 + lane:
 * the taps d[j] (columns 2 tx - 1 + j) are the even and odd columns from 2 tx0 on (a permutation of two masked
 * loads), and those shifted by one lane with the column before (2 tx0 - 1) or after (2 tx0 + 32) brought in. */
static inline __attribute__((always_inline)) AVX512 void row_taps(__m512 t[4], const float *plane, size_t h,
                                                                  size_t w, size_t y, size_t tx0) {
    if (y == 0 || y > h) {
        t[0] = t[1] = t[2] = t[3] = _mm512_setzero_ps();
        return;
    }
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const float *row = plane + (y - 1) * w;
    const size_t c0 = 2 * tx0, left = w - c0; /* c0 < w */
    const __m512 lo = _mm512_maskz_loadu_ps(avx512_lanes(left), row + c0);
    const __m512 hi = left > 16 ? _mm512_maskz_loadu_ps(avx512_lanes(left - 16), row + c0 + 16) : _mm512_setzero_ps();
    const __m512 xl = _mm512_set1_ps(tx0 ? row[c0 - 1] : 0.0f), xr = _mm512_set1_ps(left > 32 ? row[c0 + 32] : 0.0f);
    const __m512 d1 = _mm512_permutex2var_ps(lo, ie, hi), d2 = _mm512_permutex2var_ps(lo, io, hi);
    const __m512 d0 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(d2), _mm512_castps_si512(xl), 15));
    const __m512 d3 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(xr), _mm512_castps_si512(d1), 1));
    t[0] = _mm512_sub_ps(d0, d2);
    t[1] = _mm512_add_ps(d1, d2);
    t[2] = _mm512_sub_ps(d2, d1);
    t[3] = _mm512_sub_ps(d1, d3);
}

/* v[xi] = (B^T d B)[xi] of tiles (ty, tx0 + lane); lanes past the tile row hold finite leftovers. */
static inline __attribute__((always_inline)) AVX512 void tile_row_v(__m512 v[16], const float *plane, size_t h,
                                                                    size_t w, size_t ty, size_t tx0) {
    __m512 r0[4], r1[4], r2[4], r3[4];
    row_taps(r0, plane, h, w, 2 * ty, tx0);
    row_taps(r1, plane, h, w, 2 * ty + 1, tx0);
    row_taps(r2, plane, h, w, 2 * ty + 2, tx0);
    row_taps(r3, plane, h, w, 2 * ty + 3, tx0);
    #pragma GCC unroll 4
    for (int j = 0; j < 4; j++) { /* B^T (d B): the rows */
        v[j] = _mm512_sub_ps(r0[j], r2[j]);
        v[4 + j] = _mm512_add_ps(r1[j], r2[j]);
        v[8 + j] = _mm512_sub_ps(r2[j], r1[j]);
        v[12 + j] = _mm512_sub_ps(r1[j], r3[j]);
    }
}

/* v[xi * xs + lane] for the tiles of vector q of plane: one tile row piece (lanes past it zero), or R tile
 * rows merged into their lanes (expand). Whole vectors stored, so products never read stale scratch. */
static AVX512 void input_vec(float *v, size_t xs, const float *plane, size_t h, size_t w, const wgeom *g, size_t q) {
    __m512 acc[16], t[16];
    const size_t ty0 = g->R == 1 ? q / g->per_row : q * g->R, tx0 = g->R == 1 ? q % g->per_row * 16 : 0;
    const __mmask16 first = avx512_lanes(g->tw - tx0);
    tile_row_v(t, plane, h, w, ty0, tx0);
    #pragma GCC unroll 16
    for (int xi = 0; xi < 16; xi++) acc[xi] = _mm512_maskz_mov_ps(first, t[xi]);
    for (size_t r = 1, ty = ty0 + 1; r < g->R && ty < g->th; r++, ty++) {
        const __mmask16 m = (__mmask16)(avx512_lanes(g->tw) << (r * g->tw));
        tile_row_v(t, plane, h, w, ty, 0);
        #pragma GCC unroll 16
        for (int xi = 0; xi < 16; xi++) acc[xi] = _mm512_mask_expand_ps(acc[xi], m, t[xi]);
    }
    #pragma GCC unroll 16
    for (int xi = 0; xi < 16; xi++) _mm512_storeu_ps(v + xi * xs, acc[xi]);
}

/* V (16, in, nbs) of vectors [q0, q0 + nv). */
static AVX512 void input_block(float *v, size_t nbs, const wjob *p, const wgeom *g, size_t q0, size_t nv) {
    const size_t xs = p->in * nbs, npix = p->h * p->w;
    for (size_t k = 0; k < p->in; k++)
        for (size_t j = 0; j < nv; j++) {
            float *vk = v + k * nbs + 16 * j;
            const float *plane = p->src + k * npix;
            if (g->n == 4) winograd4_input_vec(vk, xs, plane, p->h, p->w, g, q0 + j);
            else input_vec(vk, xs, plane, p->h, p->w, g, q0 + j);
        }
}

/* ---- the 16 products: M[xi] (mr, 16 nv) = sum over k of U[xi][k][o0 + i] V[xi][k] ----------------------- */

#define P_INIT1(I, J) __m512 a##I##J = _mm512_setzero_ps();
#define P_INIT(I) P_INIT1(I, 0) P_INIT1(I, 1) P_INIT1(I, 2)
#define P_FMA(I)                                                                                              \
    if (mr > I) {                                                                                             \
        const __m512 b = _mm512_set1_ps(uk[I]);                                                               \
        a##I##0 = _mm512_fmadd_ps(b, v0, a##I##0);                                                            \
        if (nv > 1) a##I##1 = _mm512_fmadd_ps(b, v1, a##I##1);                                                \
        if (nv > 2) a##I##2 = _mm512_fmadd_ps(b, v2, a##I##2);                                                \
    }
#define P_STORE1(I, J)                                                                                        \
    if (mr > I && nv > J) _mm512_storeu_ps(m + (I) * nbs + 16 * (J), a##I##J);
#define P_STORE(I) P_STORE1(I, 0) P_STORE1(I, 1) P_STORE1(I, 2)

/* Rows [0, mr) of m (MR rows nbs apart) from v (in, nbs) and u (in, out) at column o0; mr, nv constants. */
static inline __attribute__((always_inline)) AVX512 void prod_tile(size_t mr, size_t nv, float *m, const float *v,
                                                                   const float *u, size_t in, size_t out,
                                                                   size_t nbs) {
    P_INIT(0) P_INIT(1) P_INIT(2) P_INIT(3) P_INIT(4) P_INIT(5) P_INIT(6) P_INIT(7)
    const float *uk = u;
    for (size_t k = 0; k < in; k++, v += nbs, uk += out) {
        const __m512 v0 = _mm512_loadu_ps(v);
        const __m512 v1 = nv > 1 ? _mm512_loadu_ps(v + 16) : v0, v2 = nv > 2 ? _mm512_loadu_ps(v + 32) : v0;
        P_FMA(0) P_FMA(1) P_FMA(2) P_FMA(3) P_FMA(4) P_FMA(5) P_FMA(6) P_FMA(7)
    }
    P_STORE(0) P_STORE(1) P_STORE(2) P_STORE(3) P_STORE(4) P_STORE(5) P_STORE(6) P_STORE(7)
}

#define PROD_NV(R)                                                                                            \
    if (nv == 3) prod_tile(R, 3, m, v, u, in, out, nbs);                                                      \
    else if (nv == 2) prod_tile(R, 2, m, v, u, in, out, nbs);                                                 \
    else prod_tile(R, 1, m, v, u, in, out, nbs);

/* mr rows: a full tile of MR, or the last ones as tiles of 4, 2 and 1. */
static AVX512 void prod_any(size_t mr, size_t nv, float *m, const float *v, const float *u, size_t in, size_t out,
                            size_t nbs) {
    if (mr == MR) {
        PROD_NV(8)
        return;
    }
    if (mr & 4) {
        PROD_NV(4)
        m += 4 * nbs, u += 4;
    }
    if (mr & 2) {
        PROD_NV(2)
        m += 2 * nbs, u += 2;
    }
    if (mr & 1) {
        PROD_NV(1)
    }
}

/* ---- output transform: Y = A^T M A into the output plane ------------------------------------------------- */

/* y[2 a + b] = (A^T M A)[a][b] from m[xi * xs], 16 tiles. */
static inline __attribute__((always_inline)) AVX512 void tile_y(__m512 y[4], const float *m, size_t xs) {
    __m512 s0[4], s1[4];
    for (int i = 0; i < 4; i++) { /* (M A): the columns of each row */
        const float *mi = m + 4 * i * xs;
        const __m512 m0 = _mm512_loadu_ps(mi), m1 = _mm512_loadu_ps(mi + xs);
        const __m512 m2 = _mm512_loadu_ps(mi + 2 * xs), m3 = _mm512_loadu_ps(mi + 3 * xs);
        s0[i] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
        s1[i] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
    }
    y[0] = _mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2]); /* A^T (M A): the rows */
    y[1] = _mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2]);
    y[2] = _mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3]);
    y[3] = _mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3]);
}

/* row[0, ncol) (+)= the interleaving of y0 (even columns) and y1 (odd ones); bias: row = bias + ... */
static inline __attribute__((always_inline)) AVX512 void put_row(float *row, __m512 y0, __m512 y1, size_t ncol,
                                                                 const float *bias) {
    const __m512i ilo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i ihi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __mmask16 mlo = avx512_lanes(ncol), mhi = avx512_lanes(ncol > 16 ? ncol - 16 : 0);
    __m512 lo = _mm512_permutex2var_ps(y0, ilo, y1), hi = _mm512_permutex2var_ps(y0, ihi, y1);
    if (bias) {
        const __m512 b = _mm512_set1_ps(*bias);
        lo = _mm512_add_ps(b, lo), hi = _mm512_add_ps(b, hi);
    } else {
        lo = _mm512_add_ps(_mm512_maskz_loadu_ps(mlo, row), lo);
        if (mhi) hi = _mm512_add_ps(_mm512_maskz_loadu_ps(mhi, row + 16), hi);
    }
    if (mhi == 0xFFFF) { /* plain stores where they can: a masked store into a line not in cache is slow */
        _mm512_storeu_ps(row, lo);
        _mm512_storeu_ps(row + 16, hi);
        return;
    }
    _mm512_mask_storeu_ps(row, mlo, lo);
    if (mhi) _mm512_mask_storeu_ps(row + 16, mhi, hi);
}

/* The outputs of vector q's tiles (m[xi * xs + lane]) into plane out (h, w): one piece of a tile row, or R
 * tile rows, each compressed out of its lanes. */
static AVX512 void output_vec(float *out, const float *m, size_t xs, size_t h, size_t w, const wgeom *g, size_t q,
                              const float *bias) {
    __m512 y[4];
    tile_y(y, m, xs);
    if (g->R == 1) {
        const size_t ty = q / g->per_row, c0 = q % g->per_row * 32, ncol = w - c0 < 32 ? w - c0 : 32;
        put_row(out + 2 * ty * w + c0, y[0], y[1], ncol, bias);
        if (2 * ty + 1 < h) put_row(out + (2 * ty + 1) * w + c0, y[2], y[3], ncol, bias);
        return;
    }
    for (size_t r = 0, ty = q * g->R; r < g->R && ty < g->th; r++, ty++) {
        const __mmask16 m = (__mmask16)(avx512_lanes(g->tw) << (r * g->tw));
        put_row(out + 2 * ty * w, _mm512_maskz_compress_ps(m, y[0]), _mm512_maskz_compress_ps(m, y[1]), w, bias);
        if (2 * ty + 1 < h)
            put_row(out + (2 * ty + 1) * w, _mm512_maskz_compress_ps(m, y[2]), _mm512_maskz_compress_ps(m, y[3]), w,
                    bias);
    }
}

/* Output channels [o0, o0 + mr) of vectors [q0, q0 + nv) from m (16, MR, nbs). */
static AVX512 void output_block(const wjob *p, const float *m, size_t nbs, const wgeom *g, size_t o0, size_t mr,
                                size_t q0, size_t nv) {
    static const float zero = 0.0f; /* a fresh destination starts from a bias of zero */
    const size_t npix = p->h * p->w;
    for (size_t i = 0; i < mr; i++)
        for (size_t j = 0; j < nv; j++) {
            float *out = p->dst + (o0 + i) * npix;
            const float *mi = m + i * nbs + 16 * j, *bias = p->bias ? p->bias + o0 + i : p->fresh ? &zero : NULL;
            if (g->n == 4) winograd4_output_vec(out, mi, MR * nbs, p->h, p->w, g, q0 + j, bias);
            else output_vec(out, mi, MR * nbs, p->h, p->w, g, q0 + j, bias);
        }
}

static void part_barrier(size_t T) {
    if (T > 1) {
        #pragma omp barrier
    }
}

/* Blocks of part t of T, on thread t's own scratch. A plane of fewer blocks than twice the
 * threads (a small image at micro-batch 1) is split by output channels instead, in groups of MR: each thread
 * transforms every block of the input and computes its own channels (blocks split 3 + 1 buy nothing). Either
 * way each output is computed whole by one thread, the same operations in the same order: the same bits. */
static AVX512 void wino_run(const wjob *p, float *scratch, size_t t, size_t T) {
    const size_t tile = p->tile, nxi = xi_count(tile);
    const wgeom g = wgeom_of(p->h, p->w, tile);
    const size_t nvb = block_vecs(p->in, &g), nbs = 16 * nvb, nblocks = (g.nvec + nvb - 1) / nvb;
    size_t lo = 0, hi = nblocks, o_lo = 0, o_hi = p->out;
    float *v = scratch, *m = v + nxi * p->in * nbs;
    if (nblocks >= 2 * T) {
        part_range(nblocks, t, T, &lo, &hi);
    } else {
        const size_t groups = (p->out + MR - 1) / MR;
        o_lo = groups * t / T * MR;
        o_hi = groups * (t + 1) / T * MR < p->out ? groups * (t + 1) / T * MR : p->out;
    }
    for (size_t blk = lo; blk < hi && o_lo < o_hi; blk++) {
        const size_t q0 = blk * nvb, nv = g.nvec - q0 < nvb ? g.nvec - q0 : nvb;
        input_block(v, nbs, p, &g, q0, nv);
        for (size_t o0 = o_lo; o0 < o_hi; o0 += MR) {
            const size_t mr = o_hi - o0 < MR ? o_hi - o0 : MR;
            for (size_t xi = 0; xi < nxi; xi++)
                prod_any(mr, nv, m + xi * MR * nbs, v + xi * p->in * nbs, p->u + xi * p->in * p->out + o0, p->in,
                         p->out, nbs);
            output_block(p, m, nbs, &g, o0, mr, q0, nv);
        }
    }
    part_barrier(T); /* the caller may reuse the scratch next */
}
#endif

void conv3x3_winograd_forward(const conv3x3_shape *s, float *y, const float *x, const float *u, const float *b,
                              float *scratch, size_t t, size_t T) {
#ifdef SNUG_AVX512
    const wjob p = {.in = s->c, .out = s->co, .h = s->h, .w = s->w, .src = x, .u = u, .dst = y, .bias = b,
                    .fresh = !b, .tile = conv3x3_winograd_tile(s, false)};
    wino_run(&p, scratch, t, T);
#else
    (void)s, (void)y, (void)x, (void)u, (void)b, (void)scratch, (void)t, (void)T;
    abort(); /* unreachable: conv3x3_winograd_available() is false in this build */
#endif
}

void conv3x3_winograd_backward_dx(const conv3x3_shape *s, float *dx, const float *dy, const float *u,
                                  float *scratch, bool fresh, size_t t, size_t T) {
#ifdef SNUG_AVX512
    const wjob p = {.in = s->co, .out = s->c, .h = s->h, .w = s->w, .src = dy, .u = u, .dst = dx, .bias = NULL,
                    .fresh = fresh, .tile = conv3x3_winograd_tile(s, true)};
    wino_run(&p, scratch, t, T);
#else
    (void)s, (void)dx, (void)dy, (void)u, (void)scratch, (void)fresh, (void)t, (void)T;
    abort(); /* unreachable: conv3x3_winograd_available() is false in this build */
#endif
}

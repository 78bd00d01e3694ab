/* conv3x3_winograd_dw: the weight gradient of conv3x3_winograd.h's convolution, by the same F(2x2, 3x3).
 *
 * The forward computes each 2x2 output tile as Y = A^T [(G g G^T) .* (B^T d B)] A. Its gradient with respect
 * to the kernel g, for an output-tile gradient dY (2x2), is by the chain rule through those linear maps
 *     dg = G^T [ (A dY A^T) .* (B^T d B) ] G,
 * and because G^T . G is linear, the sum over tiles and samples can run before it, in the transformed domain:
 *     dU[xi][o][i] += sum over the tiles of (A dY_o A^T)[xi] (B^T d_i B)[xi]      (xi: 16 positions)
 *     dW[o][i]     += G^T dU[.][o][i] G                                            (once per call)
 * 16 multiply-adds per tile and channel pair instead of the direct kernel's 36. A^T = [1 1 1 0; 0 1 -1 -1],
 * so A dY A^T maps a row (p, q) to (p, p + q, p - q, -q) and likewise the columns: additions only.
 *
 * Layout: channels in lanes. x and dy are transposed once per sample into (pixels, channels), so that the
 * transforms of one tile read whole channel vectors, and the products dU[xi] (co, c) = sum over a block's tiles
 * of Y[xi][t][o] V[xi][t][i] run as register tiles of 8 output channels x 48 input channels, the tile index
 * the inner dimension (the forward's tiles-in-lanes layout would make it a lane reduction). Every dU element
 * is one chain of multiply-adds over the tiles of the sample in order, and dW one fixed expression of dU, so
 * the bits depend on which samples a call sums (as the direct kernel's do), not on the thread count.
 *
 * Planes with 16 or more 4x4 tiles (13x13 and up) and a small dU take F(4x4, 3x3) the same way
 * (conv3x3_winograd_dw_tile): 6x6 input tiles (B^T d B, the input gradient's transform,
 * conv3x3_winograd_f4.c), A dY A^T from 4x4 output tiles with
 * A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1], 36 products per tile and channel pair (2.25
 * per output pixel instead of 4), dU (36, co, cp), dW += G^T dU G with F(4x4)'s G. Channels in lanes leave no
 * lane idle however small the plane; on 8x8 (4 tiles) the block sums would be too short for their dU updates. */
#include "kernels/conv3x3_winograd.h"

#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "kernels/avx512.h"
#include "kernels/conv3x3_bf16.h"
#include "kernels/dpbf16_pairs.h"
#include "kernels/winograd_tiles.h"
#include "kernels/transpose.h"
#include "kernels/winograd_dw_block.h"


/* Winograd's dW keeps a sample's transposed input and output gradient in the scratch: planes beyond this many
 * floats of both (1 MiB, a UNet's large levels) stay on the direct kernel's banded weight gradient, and so do
 * layers whose dU (16 co c floats per thread) would exceed it. */
#define WDW_MAX_FLOATS ((size_t)1 << 18)

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* F(4x4)'s dU, 36 co cp floats per thread in the workspace, at most this many: 2.25x F(2x2)'s, for a few percent
 * of a step (resnet20 0.957 with every stage's layers on it), which a memory-first plan pays only where it is
 * small (resnet20's layers: 36 and 144 KiB; not the cnn's 64x32 layer, 288 KiB, whose micro-batch-1 workspace
 * would grow by 60%, nor a UNet's deep levels, whose F(4x4) dU would not pass conv3x3_winograd_dw_pays). */
#define DW_F4_MAX_DU ((size_t)1 << 16)

size_t conv3x3_winograd_dw_tile(const conv3x3_shape *s) {
    const size_t tiles = ((s->h + 3) / 4) * ((s->w + 3) / 4);
    return tiles >= 16 && s->co <= DW_F4_MAX_DU / 36 / round16(s->c) ? 4 : 2;
}

static size_t dw_xi(const conv3x3_shape *s) { return conv3x3_winograd_dw_tile(s) == 4 ? 36 : 16; }

/* The floats from one position xi of a block buffer to the next: a cache line more than its nt x ld, since
 * nb x ld is often a multiple of 4 KiB, which would put the 16 rows a tile's transform writes into one L1 set. */
static size_t xi_stride(size_t nb, size_t ld) { return nb * ld + 16; }

/* Tiles per block: the block's transformed input and output gradient (nxi (cp + cq) floats per tile) near
 * 64 KiB, a small part of the workspace, in L2 while every output-channel tile reads them again; at least 16,
 * so that a tile of dU loaded and stored per block costs little beside its multiply-adds. */
static size_t block_tiles(size_t cp, size_t cq, size_t nxi) {
    const size_t nb = ((size_t)1 << 14) / (nxi * (cp + cq));
    return nb < 16 ? 16 : nb > 64 ? 64 : nb;
}

bool conv3x3_winograd_dw_pays(const conv3x3_shape *s) {
    const size_t cp = round16(s->c), cq = round16(s->co);
    size_t px, t;
    if (!size_mul(s->h, s->w, &px) || !size_mul(px, cp + cq, &t) || !size_mul(s->co, cp, &px)) return false;
    return t <= WDW_MAX_FLOATS && px <= WDW_MAX_FLOATS / dw_xi(s);
}

/* A bf16 plan's F(2x2) dU, products on bfloat16 pairs (conv3x3_winograd_dw_accumulate_bf16), at most this many
 * floats per thread (4 MiB): at twice float32's rate of products, 256 and 256 channels on 16x16 (a UNet's
 * bottleneck, whose 1 MiB of transposed planes pass WDW_MAX_FLOATS) measured about twice conv3x3_bf16's
 * weight gradient, zeroing and finishing that dU once per call included (bench/bench_conv_bf16.c). */
#define WDW_BF16_MAX_DU ((size_t)1 << 20)

bool conv3x3_winograd_dw_pays_bf16(const conv3x3_shape *s) {
    const size_t cp = round16(s->c), cq = round16(s->co);
    size_t px, t;
    if (conv3x3_winograd_dw_tile(s) != 2 || !size_mul(s->h, s->w, &px) || !size_mul(px, cp + cq, &t) ||
        !size_mul(s->co, cp, &px))
        return false;
    return t <= WDW_MAX_FLOATS && px <= WDW_BF16_MAX_DU / 16;
}

bool conv3x3_winograd_dw_floats(const conv3x3_shape *s, size_t *n) {
    return size_mul(s->co, round16(s->c), n) && size_mul(*n, dw_xi(s), n);
}

bool conv3x3_winograd_dw_scratch_floats(const conv3x3_shape *s, size_t *n) {
    const size_t cp = round16(s->c), cq = round16(s->co), nxi = dw_xi(s), nb = block_tiles(cp, cq, nxi);
    size_t px;
    return size_mul(s->h, s->w, &px) && size_mul(px, cp + cq, n) &&
           size_add(*n, nxi * (xi_stride(nb, cp) + xi_stride(nb, cq)), n);
}

#ifdef SNUG_AVX512

/* One sample's operands, transposed, and the block buffers. */
typedef struct wdw {
    size_t n, nxi;    /* the tile (2 or 4) and its transformed values per tile (16 or 36) */
    size_t c, co, h, w, cp, cq, th, tw, nb;
    bool paired;      /* the products on bfloat16 pairs of tiles: v and y hold pair words (put) */
    size_t vs, ys;    /* xi_stride of v and y */
    const float *xt;  /* (h w, cp): x transposed, lanes past c zero */
    const float *dyt; /* (h w, cq): dy transposed */
    float *v;         /* (nxi, vs): rows (nb, cp) of B^T d B of the block's tiles, or of 2 nb tiles paired */
    float *y;         /* (nxi, ys): rows (nb, cq) of A dY A^T, or paired */
} wdw;

/* Where tile tl's row of v (ld cp) or y (ld cq) starts: row tl, or paired, the word row of its pair. */
static float *tile_row(const wdw *p, float *base, size_t ld, size_t tl) {
    return base + (p->paired ? tl / 2 : tl) * ld;
}

/* One transformed vector of tile tl: stored as it is, or paired: rounded to bfloat16 (dpbf16_of16) into the
 * low half of its pair's words where tl is even (the high half zero: the partner of an odd count's last tile),
 * into the high half where tl is odd (its even partner, transformed just before it, already in the low half). */
static inline __attribute__((always_inline)) AVX512 void put(const wdw *p, float *at, size_t tl, __m512 val) {
    if (!p->paired) {
        _mm512_storeu_ps(at, val);
        return;
    }
    const __m512i h = dpbf16_of16(val);
    if (tl & 1) _mm512_storeu_si512(at, _mm512_or_si512(_mm512_loadu_si512(at), _mm512_slli_epi32(h, 16)));
    else _mm512_storeu_si512(at, h);
}

/* Channel vector j16.. of pixel (r, q) of a transposed plane, zero outside it. */
static inline __attribute__((always_inline)) AVX512 __m512 px_at(const float *t, size_t ld, size_t h, size_t w,
                                                                 long r, long q, size_t j16) {
    if (r < 0 || q < 0 || r >= (long)h || q >= (long)w) return _mm512_setzero_ps();
    return _mm512_loadu_ps(t + ((size_t)r * w + (size_t)q) * ld + j16);
}

/* v[xi] = (B^T d B)[xi] of tile (ty, tx) for every input channel, the same expressions as the forward's input
 * transform. (The transforms and the products are kept out of line: a profile then shows each one's share.) */
static __attribute__((noinline)) AVX512 void tile_v(const wdw *p, size_t tl, size_t ty, size_t tx) {
    __m512 e[4][4];
    const long r0 = 2 * (long)ty - 1, q0 = 2 * (long)tx - 1;
    for (size_t j16 = 0; j16 < p->cp; j16 += 16) {
        for (int i = 0; i < 4; i++) { /* d B: the columns of each row */
            const __m512 d0 = px_at(p->xt, p->cp, p->h, p->w, r0 + i, q0, j16);
            const __m512 d1 = px_at(p->xt, p->cp, p->h, p->w, r0 + i, q0 + 1, j16);
            const __m512 d2 = px_at(p->xt, p->cp, p->h, p->w, r0 + i, q0 + 2, j16);
            const __m512 d3 = px_at(p->xt, p->cp, p->h, p->w, r0 + i, q0 + 3, j16);
            e[i][0] = _mm512_sub_ps(d0, d2);
            e[i][1] = _mm512_add_ps(d1, d2);
            e[i][2] = _mm512_sub_ps(d2, d1);
            e[i][3] = _mm512_sub_ps(d1, d3);
        }
        float *v = tile_row(p, p->v, p->cp, tl) + j16;
        const size_t xs = p->vs;
        for (int k = 0; k < 4; k++) { /* B^T (d B): the rows */
            put(p, v + (size_t)k * xs, tl, _mm512_sub_ps(e[0][k], e[2][k]));
            put(p, v + (size_t)(4 + k) * xs, tl, _mm512_add_ps(e[1][k], e[2][k]));
            put(p, v + (size_t)(8 + k) * xs, tl, _mm512_sub_ps(e[2][k], e[1][k]));
            put(p, v + (size_t)(12 + k) * xs, tl, _mm512_sub_ps(e[1][k], e[3][k]));
        }
    }
}

/* y[xi] = (A dY A^T)[xi] of tile (ty, tx) for every output channel: dY's rows (p, q) become (p, p + q, p - q,
 * -q), then its columns. Outputs past an odd plane's edge have no gradient: zero. */
static __attribute__((noinline)) AVX512 void tile_y(const wdw *p, size_t tl, size_t ty, size_t tx) {
    const __m512 z = _mm512_setzero_ps();
    const long r0 = 2 * (long)ty, q0 = 2 * (long)tx;
    for (size_t j16 = 0; j16 < p->cq; j16 += 16) {
        const __m512 g00 = px_at(p->dyt, p->cq, p->h, p->w, r0, q0, j16);
        const __m512 g01 = px_at(p->dyt, p->cq, p->h, p->w, r0, q0 + 1, j16);
        const __m512 g10 = px_at(p->dyt, p->cq, p->h, p->w, r0 + 1, q0, j16);
        const __m512 g11 = px_at(p->dyt, p->cq, p->h, p->w, r0 + 1, q0 + 1, j16);
        const __m512 a[4][2] = {{g00, g01},
                                {_mm512_add_ps(g00, g10), _mm512_add_ps(g01, g11)},
                                {_mm512_sub_ps(g00, g10), _mm512_sub_ps(g01, g11)},
                                {_mm512_sub_ps(z, g10), _mm512_sub_ps(z, g11)}};
        float *y = tile_row(p, p->y, p->cq, tl) + j16;
        const size_t xs = p->ys;
        for (int i = 0; i < 4; i++) {
            put(p, y + (size_t)(4 * i) * xs, tl, a[i][0]);
            put(p, y + (size_t)(4 * i + 1) * xs, tl, _mm512_add_ps(a[i][0], a[i][1]));
            put(p, y + (size_t)(4 * i + 2) * xs, tl, _mm512_sub_ps(a[i][0], a[i][1]));
            put(p, y + (size_t)(4 * i + 3) * xs, tl, _mm512_sub_ps(z, a[i][1]));
        }
    }
}

/* F(4x4): v[xi] = (B^T d B)[xi] of tile (ty, tx), d its 6x6 input tile (rows and columns 4 t - 1 ..): down
 * the columns, then along the rows. */
static __attribute__((noinline)) AVX512 void tile_v4(const wdw *p, size_t tl, size_t ty, size_t tx) {
    const long r0 = 4 * (long)ty - 1, q0 = 4 * (long)tx - 1;
    for (size_t j16 = 0; j16 < p->cp; j16 += 16) {
        __m512 e[6][6], d[6], t[6];
        for (int q = 0; q < 6; q++) { /* B^T d: column q */
            for (int r = 0; r < 6; r++) d[r] = px_at(p->xt, p->cp, p->h, p->w, r0 + r, q0 + q, j16);
            bt6(t, d);
            for (int a = 0; a < 6; a++) e[a][q] = t[a];
        }
        float *v = tile_row(p, p->v, p->cp, tl) + j16;
        for (int a = 0; a < 6; a++) { /* (B^T d) B: row a */
            bt6(t, e[a]);
            for (int b = 0; b < 6; b++) put(p, v + (size_t)(6 * a + b) * p->vs, tl, t[b]);
        }
    }
}

/* a = A g for four values (A = (A^T)^T, 6x4): g0, the sum, the alternating sum, g0 + 2g1 + 4g2 + 8g3, its
 * alternating twin, g3. */
static inline __attribute__((always_inline)) AVX512 void a6(__m512 a[6], const __m512 g[4]) {
    const __m512 s02 = _mm512_add_ps(g[0], g[2]), s13 = _mm512_add_ps(g[1], g[3]);
    const __m512 t02 = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), g[2], g[0]);
    const __m512 t13 = _mm512_mul_ps(_mm512_set1_ps(2.0f), _mm512_fmadd_ps(_mm512_set1_ps(4.0f), g[3], g[1]));
    a[0] = g[0];
    a[1] = _mm512_add_ps(s02, s13);
    a[2] = _mm512_sub_ps(s02, s13);
    a[3] = _mm512_add_ps(t02, t13);
    a[4] = _mm512_sub_ps(t02, t13);
    a[5] = g[3];
}

/* F(4x4): y[xi] = (A dY A^T)[xi] of tile (ty, tx), dY its 4x4 output tile (zero past the plane's edge). */
static __attribute__((noinline)) AVX512 void tile_y4(const wdw *p, size_t tl, size_t ty, size_t tx) {
    const long r0 = 4 * (long)ty, q0 = 4 * (long)tx;
    for (size_t j16 = 0; j16 < p->cq; j16 += 16) {
        __m512 e[6][4], g[4], t[6];
        for (int q = 0; q < 4; q++) { /* A dY: column q */
            for (int r = 0; r < 4; r++) g[r] = px_at(p->dyt, p->cq, p->h, p->w, r0 + r, q0 + q, j16);
            a6(t, g);
            for (int a = 0; a < 6; a++) e[a][q] = t[a];
        }
        float *y = tile_row(p, p->y, p->cq, tl) + j16;
        for (int a = 0; a < 6; a++) { /* (A dY) A^T: row a */
            a6(t, e[a]);
            for (int b = 0; b < 6; b++) put(p, y + (size_t)(6 * a + b) * p->ys, tl, t[b]);
        }
    }
}

/* ---- the products: dU[xi] (co, cp) += Y[xi]^T (nt, co) V[xi] (nt, cp) ------------------------------------ */

#define D_INIT1(I, J) __m512 a##I##J = _mm512_setzero_ps();
#define D_INIT(I) D_INIT1(I, 0) D_INIT1(I, 1) D_INIT1(I, 2)
#define D_FMA(I)                                                                                              \
    if (mr > I) {                                                                                             \
        const __m512 b = _mm512_set1_ps(yt[I]);                                                               \
        a##I##0 = _mm512_fmadd_ps(b, v0, a##I##0);                                                            \
        if (nv > 1) a##I##1 = _mm512_fmadd_ps(b, v1, a##I##1);                                                \
        if (nv > 2) a##I##2 = _mm512_fmadd_ps(b, v2, a##I##2);                                                \
    }
#define D_STORE1(I, J)                                                                                        \
    if (mr > I && nv > J) {                                                                                   \
        float *d = du + (I) * cp + 16 * (J);                                                                  \
        _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), a##I##J));                                      \
    }
#define D_STORE(I) D_STORE1(I, 0) D_STORE1(I, 1) D_STORE1(I, 2)

/* Rows [0, mr) of du (cp apart), vectors [0, nv) at its column, over the block's nt tiles; mr, nv constants.
 * The block's sum starts from zero and is added to du once: two levels of summation, whose rounding grows
 * with the tiles of a block plus the blocks, not with all the tiles of every sample (a near-cancelling tap of
 * dW is a difference of dU values larger than itself, so dU's rounding shows there). */
static inline __attribute__((always_inline)) AVX512 void du_tile(size_t mr, size_t nv, float *du, size_t cp,
                                                                 const float *y, size_t cq, const float *v,
                                                                 size_t nt) {
    D_INIT(0) D_INIT(1) D_INIT(2) D_INIT(3) D_INIT(4) D_INIT(5) D_INIT(6) D_INIT(7)
    for (size_t t = 0; t < nt; t++) {
        const float *yt = y + t * cq, *vt = v + t * cp;
        const __m512 v0 = _mm512_loadu_ps(vt);
        const __m512 v1 = nv > 1 ? _mm512_loadu_ps(vt + 16) : v0, v2 = nv > 2 ? _mm512_loadu_ps(vt + 32) : v0;
        D_FMA(0) D_FMA(1) D_FMA(2) D_FMA(3) D_FMA(4) D_FMA(5) D_FMA(6) D_FMA(7)
    }
    D_STORE(0) D_STORE(1) D_STORE(2) D_STORE(3) D_STORE(4) D_STORE(5) D_STORE(6) D_STORE(7)
}

#define DU_NV(R) AVX512_NV_OF_3(nv, du_tile, R, du, cp, y, cq, v, nt)

#define DU_NEXT(K) du += (K) * cp, y += (K);

/* wdw_tile_fn over nt tiles: a full tile of WDW_MR rows, or the last ones as tiles of 4, 2 and 1. */
static AVX512 void du_any(float *du, size_t cp, const float *y, size_t cq, const float *v, size_t mr, size_t nv,
                          size_t nt) {
    AVX512_ROWS_OF_8(mr, DU_NV, DU_NEXT);
}


/* src (rows, npix) transposed into dst (npix, ld), the lanes past rows zero. */
static void transpose_plane(float *dst, size_t ld, const float *src, size_t rows, size_t npix) {
    transpose_floats(dst, ld, src, npix, rows, npix);
    if (rows < ld)
        for (size_t q = 0; q < npix; q++) memset(dst + q * ld + rows, 0, (ld - rows) * sizeof *dst);
}

/* The products of a block: float32's, or on bfloat16 pairs of tiles (winograd_dw_bf16.h; hw: on AVX512_BF16). */
typedef enum wdw_products { WDW_FP32, WDW_BF16_PORTABLE, WDW_BF16 } wdw_products;

static __attribute__((noinline)) void products_of(const wdw *p, float *du, size_t nt, wdw_products how) {
    const wdw_block b = {.v = p->v, .y = p->y, .vs = p->vs, .ys = p->ys, .cp = p->cp, .cq = p->cq, .co = p->co,
                         .nxi = p->nxi, .nt = nt};
    if (how == WDW_FP32) wdw_block_products(&b, du, du_any, nt);
    else wdw_bf16_products(&b, du, how == WDW_BF16);
}

static AVX512 void accumulate_avx512(const conv3x3_shape *s, float *du, const float *dy, const float *x,
                                     float *scratch, wdw_products how) {
    const size_t npix = s->h * s->w, cp = round16(s->c), cq = round16(s->co);
    const size_t n = how == WDW_FP32 ? conv3x3_winograd_dw_tile(s) : 2, nxi = (n + 2) * (n + 2);
    wdw p = {.n = n, .nxi = nxi, .c = s->c, .co = s->co, .h = s->h, .w = s->w, .cp = cp, .cq = cq,
             .th = (s->h + n - 1) / n, .tw = (s->w + n - 1) / n, .nb = block_tiles(cp, cq, nxi)};
    p.vs = xi_stride(p.nb, cp), p.ys = xi_stride(p.nb, cq);
    float *xt = scratch, *dyt = xt + npix * cp;
    p.v = dyt + npix * cq;
    p.y = p.v + nxi * p.vs;
    transpose_plane(xt, cp, x, s->c, npix);
    transpose_plane(dyt, cq, dy, s->co, npix);
    p.xt = xt, p.dyt = dyt;
    const size_t tiles = p.th * p.tw;
    p.paired = how != WDW_FP32;
    const size_t nb = p.paired ? 2 * p.nb : p.nb; /* tiles per block: paired, the same bytes hold twice as many */
    for (size_t t0 = 0; t0 < tiles; t0 += nb) {
        const size_t nt = tiles - t0 < nb ? tiles - t0 : nb;
        for (size_t tl = 0; tl < nt; tl++) {
            const size_t ty = (t0 + tl) / p.tw, tx = (t0 + tl) % p.tw;
            if (n == 4) {
                tile_v4(&p, tl, ty, tx);
                tile_y4(&p, tl, ty, tx);
            } else {
                tile_v(&p, tl, ty, tx);
                tile_y(&p, tl, ty, tx);
            }
        }
        products_of(&p, du, nt, how);
    }
}

/* dW (co, c, 3, 3) += G^T dU[.][o][i] G, G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1], for 16 input channels at
 * a time (their dU rows are contiguous, m[xi * plane]): t[k][l] = tap k of pair l. */
static AVX512 void taps16_f2(float t[9][16], const float *m, size_t plane) {
    const __m512 h = _mm512_set1_ps(0.5f);
    __m512 r[3][4];
    for (int col = 0; col < 4; col++) { /* G^T M: the rows */
        const __m512 m0 = _mm512_loadu_ps(m + (size_t)col * plane);
        const __m512 m1 = _mm512_loadu_ps(m + (size_t)(4 + col) * plane);
        const __m512 m2 = _mm512_loadu_ps(m + (size_t)(8 + col) * plane);
        const __m512 m3 = _mm512_loadu_ps(m + (size_t)(12 + col) * plane);
        const __m512 s12 = _mm512_add_ps(m1, m2);
        r[0][col] = _mm512_fmadd_ps(h, s12, m0);
        r[1][col] = _mm512_mul_ps(h, _mm512_sub_ps(m1, m2));
        r[2][col] = _mm512_fmadd_ps(h, s12, m3);
    }
    for (int a = 0; a < 3; a++) { /* (G^T M) G: the columns */
        const __m512 s12 = _mm512_add_ps(r[a][1], r[a][2]);
        _mm512_storeu_ps(t[3 * a], _mm512_fmadd_ps(h, s12, r[a][0]));
        _mm512_storeu_ps(t[3 * a + 1], _mm512_mul_ps(h, _mm512_sub_ps(r[a][1], r[a][2])));
        _mm512_storeu_ps(t[3 * a + 2], _mm512_fmadd_ps(h, s12, r[a][3]));
    }
}

/* r = G^T m for six values (F(4x4)'s G): m0/4 - (m1 + m2)/6 + (m3 + m4)/24, (m2 - m1)/6 + (m3 - m4)/12,
 * (m3 + m4 - m1 - m2)/6 + m5. */
static inline __attribute__((always_inline)) AVX512 void gt6(__m512 r[3], const __m512 m[6]) {
    const __m512 s12 = _mm512_add_ps(m[1], m[2]), d12 = _mm512_sub_ps(m[2], m[1]);
    const __m512 s34 = _mm512_add_ps(m[3], m[4]), d34 = _mm512_sub_ps(m[3], m[4]);
    const __m512 six = _mm512_set1_ps(1.0f / 6.0f), twelve = _mm512_set1_ps(1.0f / 12.0f);
    r[0] = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 24.0f), s34,
                           _mm512_fnmadd_ps(six, s12, _mm512_mul_ps(_mm512_set1_ps(0.25f), m[0])));
    r[1] = _mm512_fmadd_ps(twelve, d34, _mm512_mul_ps(six, d12));
    r[2] = _mm512_fmadd_ps(six, _mm512_sub_ps(s34, s12), m[5]);
}

/* The same with F(4x4)'s G (dU's 36 positions). */
static AVX512 void taps16_f4(float t[9][16], const float *m, size_t plane) {
    __m512 r[3][6];
    for (int col = 0; col < 6; col++) { /* G^T M: column col */
        __m512 mc[6], rc[3];
        for (int a = 0; a < 6; a++) mc[a] = _mm512_loadu_ps(m + (size_t)(6 * a + col) * plane);
        gt6(rc, mc);
        for (int a = 0; a < 3; a++) r[a][col] = rc[a];
    }
    for (int a = 0; a < 3; a++) { /* (G^T M) G: row a */
        __m512 rc[3];
        gt6(rc, r[a]);
        for (int b = 0; b < 3; b++) _mm512_storeu_ps(t[3 * a + b], rc[b]);
    }
}

/* dW += G^T dU G pair by pair, 16 input channels at a time: the 9 taps of each come out as 9 vectors, and the
 * 16 pairs' taps are 144 consecutive floats of dW. Once per call and thread, but at micro-batch 1 that is once
 * per sample: a scalar version in double would take more of the cnn's step there than dW's products. */
static AVX512 void finish_avx512(const conv3x3_shape *s, float *dw, const float *du, bool f4) {
    const size_t cp = round16(s->c), plane = s->co * cp;
    float t[9][16];
    for (size_t o = 0; o < s->co; o++)
        for (size_t i0 = 0; i0 < s->c; i0 += 16) {
            const size_t nl = s->c - i0 < 16 ? s->c - i0 : 16;
            if (f4) taps16_f4(t, du + o * cp + i0, plane);
            else taps16_f2(t, du + o * cp + i0, plane);
            float *d = dw + (o * s->c + i0) * 9;
            for (size_t l = 0; l < nl; l++)
                for (int k = 0; k < 9; k++) d[9 * l + (size_t)k] += t[k][l];
        }
}
#endif

static void finish(const conv3x3_shape *s, float *dw, const float *du, bool f4) {
#ifdef SNUG_AVX512
    finish_avx512(s, dw, du, f4);
#else
    (void)s, (void)dw, (void)du, (void)f4;
    abort(); /* unreachable: conv3x3_winograd_available() is false in this build */
#endif
}

void conv3x3_winograd_dw_finish(const conv3x3_shape *s, float *dw, const float *du) {
    finish(s, dw, du, conv3x3_winograd_dw_tile(s) == 4);
}

/* The bf16 products take F(2x2) on every plane (conv3x3_winograd.h says why). */
void conv3x3_winograd_dw_finish_bf16(const conv3x3_shape *s, float *dw, const float *du) { finish(s, dw, du, false); }

static void accumulate(const conv3x3_shape *s, float *du, const float *dy, const float *x, float *scratch,
                       wdw_products how) {
#ifdef SNUG_AVX512
    accumulate_avx512(s, du, dy, x, scratch, how);
#else
    (void)s, (void)du, (void)dy, (void)x, (void)scratch, (void)how;
    abort(); /* unreachable: conv3x3_winograd_available() is false in this build */
#endif
}

void conv3x3_winograd_dw_accumulate(const conv3x3_shape *s, float *du, const float *dy, const float *x,
                                    float *scratch) {
    accumulate(s, du, dy, x, scratch, WDW_FP32);
}

void conv3x3_winograd_dw_accumulate_bf16(const conv3x3_shape *s, float *du, const float *dy, const float *x,
                                         float *scratch) {
    accumulate(s, du, dy, x, scratch, conv3x3_bf16_hardware() ? WDW_BF16 : WDW_BF16_PORTABLE);
}

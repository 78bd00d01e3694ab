/* conv3x3_direct: the padded-grid convolution of conv3x3_direct.h. Compiled for AVX-512 through a function
 * attribute (the build has no -march), like gemm_direct; conv3x3_direct_available says whether to call it. */
#include "kernels/conv3x3_direct.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "kernels/avx512.h"
#include "kernels/gemm_direct.h"
#include "kernels/transpose.h"

/* Output planes of one register tile, and its 16-lane vectors along the grid. */
#define MR 8
#define NV 3
/* Output channels of one weight-gradient tile (x 9 taps = 27 accumulators). */
#define MW 3
/* Grid vectors the weight gradient sums before reducing its partial sums: a chunk of every padded plane then
 * stays in L2 while all tiles read it. */
#define WG_CHUNK ((size_t)128)

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool conv3x3_direct_available(void) {
#ifdef SNUG_AVX512
    return gemm_direct_has_avx512();
#else
    return false;
#endif
}

/* The largest grid index a vector reads is (h + 2)(w + 1) + 16 (the last vector's 15 lanes past the grid,
 * plus the tap 2 wp + 2): one float more, rounded to a cache line. Only called once conv3x3_scratch_floats
 * has checked that the sizes fit. */
static size_t conv3x3_plane_floats(size_t h, size_t w) { return round_up((h + 2) * (w + 1) + 17, 16); }

/* Stride 2: one phase plane of an (h, w) input, for the output grid (ho, wo) = ((h + 1) / 2, (w + 1) / 2) on
 * rows of wo + 1. The largest index a vector reads is ho (wo + 1) + 15 plus the tap wp + 1, and the phase
 * split writes ho + 1 rows: (ho + 1)(wo + 1) + 17 floats, rounded to a cache line. */
static size_t conv3x3_phase_floats(size_t h, size_t w) { return round_up(((h + 1) / 2 + 1) * ((w + 1) / 2 + 1) + 17, 16); }

/* The pixels up to which the weight gradient takes the transposed form (wgrad_small_run): measured, the
 * lane reductions of the grid form cost more than the transposition up to 16x16 planes, less from 28x28. */
#define WG_SMALL_NPIX ((size_t)256)

static bool wgrad_small(const conv3x3_shape *s) { return s->h * s->w <= WG_SMALL_NPIX; }

/* Rows a band aims at: its padded copies (of every input and output channel) stay near L2 size for the unet's
 * 16 + 32 channels of 256-wide planes, and the three rows of halo each band pads again (the taps reach two rows
 * down, and a band starts mid-row) cost a few percent of the padding. */
#define BAND_ROWS ((size_t)16)
/* The grid lanes a band is a whole number of: the weight gradient's chunks (so that every dW sum runs over the
 * same chunks in the same order as over whole planes), the forward and input gradient's blocks of NV vectors. */
#define WG_UNIT (16 * WG_CHUNK)
#define DP_UNIT (16 * NV)

/* A band of a plane of width w: at least BAND_ROWS rows of grid lanes, a whole number of `unit`s; the padded
 * rows it reads (from the row its first lane is in, to two rows past its last lane); and the floats of one
 * channel's band copy. */
typedef struct band {
    size_t lanes, rows, floats;
} band;

static band band_of(size_t w, size_t unit) {
    const size_t wp = w + 1;
    band b = {.lanes = unit * ((BAND_ROWS * wp + unit - 1) / unit)};
    /* a lane read is below base + lanes + 3 wp + 2, base = the band's first row, at most wp - 1 before it */
    b.rows = (b.lanes + 2 + wp - 1) / wp + 3;
    b.floats = round_up(b.rows * wp, 16);
    return b;
}

/* Whether a plane goes in bands of rows: not small (wgrad_small: its weight gradient transposes dy whole) and
 * taller than the weight gradient's band (the larger of the two kinds). */
static bool plane_banded(const conv3x3_shape *s) {
    return !wgrad_small(s) && band_of(s->w, WG_UNIT).rows < s->h + 2;
}

bool conv3x3_scratch_floats_for(const conv3x3_shape *s, unsigned uses, size_t *n) {
    size_t plane, rows, chans, dt = 0, fwd = 0, dx = 0, dw = 0;
    if (!size_add(s->h, 2, &rows) || !size_add(s->w, 1, &plane) || !size_mul(rows, plane, &plane) ||
        !size_add(plane, 17 + 15, &plane) || !size_add(s->c, s->co, &chans))
        return false;
    plane = plane / 16 * 16; /* conv3x3_plane_floats, checked */
    if (plane_banded(s)) {
        /* the plane is taller than a band, so a band's rows * (w + 1) fit in size_t */
        const size_t fb = band_of(s->w, DP_UNIT).floats, wb = band_of(s->w, WG_UNIT).floats;
        if (((uses & CONV3X3_FORWARD) && !size_mul(s->c, fb, &fwd)) ||
            ((uses & CONV3X3_DX) && !size_mul(s->co, fb, &dx)) || ((uses & CONV3X3_DW) && !size_mul(chans, wb, &dw)))
            return false;
    } else {
        if (wgrad_small(s) && !size_mul(s->h * s->w, round_up(s->co, 16), &dt)) return false;
        if ((uses & CONV3X3_FORWARD) && !size_mul(s->c, plane, &fwd)) return false;
        if ((uses & (CONV3X3_DX | CONV3X3_DW)) && (!size_mul(chans, plane, &dw) || !size_add(dw, dt, &dw)))
            return false;
    }
    *n = fwd > dx ? fwd : dx;
    if (dw > *n) *n = dw;
    return true;
}

bool conv3x3_scratch_floats(const conv3x3_shape *s, size_t *n) {
    return conv3x3_scratch_floats_for(s, CONV3X3_FORWARD | CONV3X3_DX | CONV3X3_DW, n);
}

#ifdef SNUG_AVX512

/* The contiguous range [*lo, *hi) of n items that part t of T owns. */
static void part_range(size_t n, size_t t, size_t T, size_t *lo, size_t *hi) {
    *lo = n * t / T;
    *hi = n * (t + 1) / T;
}

/* p[0, n) = 0. */
static inline AVX512 void zero_floats(float *p, size_t n) {
    for (size_t i = 0; i < n; i += 16) _mm512_mask_storeu_ps(p + i, avx512_lanes(n - i), _mm512_setzero_ps());
}

/* Padded rows [r0, r0 + rows) of every plane of part t of T of n planes (h, w), into copies `stride` floats
 * apart: row r of the padded plane (zero above and below the plane, a zero column in front of every row) at
 * dst + (r - r0)(w + 1), zeros after the last row. Masked vector copies: rows are short (8 to 32 floats in
 * ResNet-20), too short for a vectorised loop's prologue and epilogue to pay off. */
static AVX512 void conv3x3_pad_rows(float *dst, const float *x, size_t n, size_t h, size_t w, size_t r0,
                                    size_t rows, size_t stride, size_t t, size_t T) {
    const size_t wp = w + 1;
    size_t lo, hi;
    part_range(n, t, T, &lo, &hi);
    for (size_t ch = lo; ch < hi; ch++) {
        float *p = dst + ch * stride;
        for (size_t r = r0; r < r0 + rows; r++, p += wp) {
            p[0] = 0.0f;
            if (r == 0 || r > h) {
                zero_floats(p + 1, w);
                continue;
            }
            const float *src = x + ch * h * w + (r - 1) * w;
            for (size_t i = 0; i < w; i += 16) {
                const __mmask16 m = avx512_lanes(w - i);
                _mm512_mask_storeu_ps(p + 1 + i, m, _mm512_maskz_loadu_ps(m, src + i));
            }
        }
        zero_floats(p, stride - rows * wp);
    }
}

/* pad[ch] = the whole padded plane of channel ch of x (all h + 2 rows, then the tail), for part t of T. */
static AVX512 void conv3x3_pad(float *pad,     // (n, conv3x3_plane_floats(h, w))
                               const float *x, // (n, h, w)
                               size_t n, size_t h, size_t w, size_t t, size_t T) {
    conv3x3_pad_rows(pad, x, n, h, w, 0, h + 2, conv3x3_plane_floats(h, w), t, T);
}

/* Where the vector of grid lanes [q0, q0 + 16) lands in an output plane: its valid lanes (inside the grid and
 * not a row's spare lane x = w) go, in order, to the pixels from pos on. */
typedef struct grid_vec {
    size_t pos;
    __mmask16 valid; /* lanes to keep */
    __mmask16 run;   /* the low popcount(valid) lanes: the contiguous run they compress into */
} grid_vec;

static grid_vec grid_vec_at(size_t q0, size_t h, size_t w) {
    const size_t wp = w + 1, y = q0 / wp, x = q0 % wp, end = h * wp;
    unsigned valid = avx512_lanes(end - q0);
    for (size_t i = w - x; i < 16; i += wp) valid &= ~(1u << i); /* x <= w always: the spare lanes */
    return (grid_vec){.pos = y * w + (x < w ? x : w), .valid = (__mmask16)valid,
                      .run = (__mmask16)((1u << __builtin_popcount(valid)) - 1u)};
}

/* ---- forward and input gradient: out[i] (+)= sum over channels k and taps of w * src[k][q + tap] ---- */

typedef struct dprod {
    size_t planes, chans;  /* output planes, input channels (padded planes of src) */
    size_t h, w, stride;   /* the plane, and the floats between padded planes */
    const float *src;      /* (chans, stride) padded */
    const float *wt;       /* the weights (co, c, 3, 3): forward, planes = co; flipped, planes = c */
    size_t rs;             /* forward: the floats between two output planes' weights (c * 9) */
    bool flip;             /* the input gradient: W^T with every kernel rotated by 180 degrees */
    float *dst;            /* (planes, h, w) */
    const float *bias;     /* (planes) or NULL */
    bool accumulate;       /* dst += (else dst = bias + ...) */
    size_t phase;          /* stride 2 forward: the floats between a channel's phase planes, else 0 */
    /* Stride-2 input gradient, one phase of dx (ntaps > 0): plane I gets sum over channels k and taps j of
     * w[k][o0 + I][tap_w[j]] src[k][q + tap_off[j]] on h rows of wp lanes, all kept (no spare lane). */
    size_t ntaps, tap_w[4], tap_off[4];
    size_t ostride;        /* the floats between output planes: h w, or a phase plane's stride */
    size_t qoff;           /* the grid lane src starts at: 0, or a band's first (dprod_run_banded) */
    bool round;            /* forward: dst rounded to bfloat16 as it is stored (conv3x3_forward_rounded) */
} dprod;

/* The products dtile specialises on: stride-1 forward, stride-1 input gradient (flipped), stride-2 forward
 * (phase planes), and a runtime list of taps (one phase of the stride-2 input gradient). */
enum { DM_FWD, DM_FLIP, DM_S2, DM_TAPS };

/* One tile's accumulators: named variables, not an array (which GCC keeps spilling), for rows [0, mr) and
 * vectors [0, nv); mr and nv are constants at every call site, so the branches fold away. */
#define D_INIT1(I, J)                                                                                         \
    __m512 r##I##J = _mm512_setzero_ps();                                                                     \
    if (mr > I && nv > J) {                                                                                   \
        if (p->bias) r##I##J = _mm512_set1_ps(p->bias[o0 + I]);                                               \
        else if (p->accumulate)                                                                               \
            r##I##J = _mm512_maskz_expand_ps(gv[J].valid,                                                     \
                                             _mm512_maskz_loadu_ps(gv[J].run, dst + I * npix + gv[J].pos));   \
    }
#define D_INIT(I) D_INIT1(I, 0) D_INIT1(I, 1) D_INIT1(I, 2)
#define D_FMA(I, T)                                                                                           \
    if (mr > I) {                                                                                             \
        const __m512 a = _mm512_set1_ps(ak[(I) * rs + (flip ? 8 - (T) : (T))]);                              \
        r##I##0 = _mm512_fmadd_ps(a, b0, r##I##0);                                                            \
        if (nv > 1) r##I##1 = _mm512_fmadd_ps(a, b1, r##I##1);                                                \
        if (nv > 2) r##I##2 = _mm512_fmadd_ps(a, b2, r##I##2);                                                \
    }
#define D_TAP(ROW, OFF, T)                                                                                    \
    {                                                                                                         \
        const __m512 b0 = _mm512_loadu_ps(ROW + OFF);                                                         \
        const __m512 b1 = nv > 1 ? _mm512_loadu_ps(ROW + OFF + 16) : b0;                                      \
        const __m512 b2 = nv > 2 ? _mm512_loadu_ps(ROW + OFF + 32) : b0;                                      \
        D_FMA(0, T) D_FMA(1, T) D_FMA(2, T) D_FMA(3, T) D_FMA(4, T) D_FMA(5, T) D_FMA(6, T) D_FMA(7, T)       \
    }
#define D_STORE1(I, J)                                                                                        \
    if (mr > I && nv > J) {                                                                                   \
        if (mode == DM_FWD && p->round) r##I##J = avx512_bf16_round(r##I##J);                                  \
        _mm512_mask_storeu_ps(dst + I * npix + gv[J].pos, gv[J].run, _mm512_maskz_compress_ps(gv[J].valid, r##I##J)); \
    }
#define D_STORE(I) D_STORE1(I, 0) D_STORE1(I, 1) D_STORE1(I, 2)

/* Planes [o0, o0 + mr) over the grid vectors gv[0..nv) starting at q0. The weights are read in place, as
 * broadcasts at fixed offsets from one pointer per input channel: forward, plane I's tap T of channel k is
 * w[(o0 + I) c 9 + 9 k + T], rows rs = 9 c apart; flipped (the input gradient: plane = input channel i,
 * channel = output channel k, the kernel rotated), it is w[k c 9 + 9 (o0 + I) + 8 - T], rows 9 apart, so
 * every offset is a constant. A list of taps (DM_TAPS) reads the weights as the flipped case, unrotated, and
 * stores every lane (its grid has no spare lane to drop). */
static inline __attribute__((always_inline)) AVX512 void dtile(size_t mr, size_t nv, int mode, const dprod *p,
                                                               size_t o0, size_t q0, const grid_vec *gv) {
    const bool flip = mode == DM_FLIP, s2 = mode == DM_S2, trans = flip || mode == DM_TAPS;
    const size_t npix = p->ostride, wp = p->w + 1, rs = trans ? 9 : p->rs, kstep = trans ? p->planes * 9 : 9;
    float *dst = p->dst + o0 * npix;
    D_INIT(0) D_INIT(1) D_INIT(2) D_INIT(3) D_INIT(4) D_INIT(5) D_INIT(6) D_INIT(7)
    const float *ak = p->wt + o0 * rs;
    const float *r0 = p->src + (q0 - p->qoff);
    for (size_t k = 0; k < p->chans; k++, ak += kstep, r0 += p->stride) {
        if (s2) { /* tap (kh, kw) reads phase (kh % 2, kw % 2) at (kh / 2) wp + kw / 2 */
            const float *p01 = r0 + p->phase, *p10 = p01 + p->phase, *p11 = p10 + p->phase;
            D_TAP(r0, 0, 0) D_TAP(p01, 0, 1) D_TAP(r0, 1, 2)
            D_TAP(p10, 0, 3) D_TAP(p11, 0, 4) D_TAP(p10, 1, 5)
            D_TAP(r0, wp, 6) D_TAP(p01, wp, 7) D_TAP(r0, wp + 1, 8)
            continue;
        }
        if (mode == DM_TAPS) {
            for (size_t j = 0; j < p->ntaps; j++) D_TAP(r0, p->tap_off[j], p->tap_w[j])
            continue;
        }
        const float *r1 = r0 + wp, *r2 = r1 + wp;
        D_TAP(r0, 0, 0) D_TAP(r0, 1, 1) D_TAP(r0, 2, 2)
        D_TAP(r1, 0, 3) D_TAP(r1, 1, 4) D_TAP(r1, 2, 5)
        D_TAP(r2, 0, 6) D_TAP(r2, 1, 7) D_TAP(r2, 2, 8)
    }
    D_STORE(0) D_STORE(1) D_STORE(2) D_STORE(3) D_STORE(4) D_STORE(5) D_STORE(6) D_STORE(7)
}

#define DTILE_NV(R, MODE)                                                                                     \
    if (nv == 3) dtile(R, 3, MODE, p, o0, q0, gv);                                                            \
    else if (nv == 2) dtile(R, 2, MODE, p, o0, q0, gv);                                                       \
    else dtile(R, 1, MODE, p, o0, q0, gv);
#define DTILE_ROWS(R)                                                                                         \
    if (p->flip) {                                                                                            \
        DTILE_NV(R, DM_FLIP)                                                                                  \
    } else if (p->phase) {                                                                                    \
        DTILE_NV(R, DM_S2)                                                                                    \
    } else if (p->ntaps) {                                                                                    \
        DTILE_NV(R, DM_TAPS)                                                                                  \
    } else {                                                                                                  \
        DTILE_NV(R, DM_FWD)                                                                                   \
    }

/* Planes [o0, o0 + mr): a full tile of MR, or the last planes as tiles of 4, 2 and 1 (fewer versions of the
 * kernel than one per count). */
static AVX512 void dtile_any(size_t mr, size_t nv, const dprod *p, size_t o0, size_t q0, const grid_vec *gv) {
    if (mr == MR) {
        DTILE_ROWS(8)
        return;
    }
    if (mr & 4) {
        DTILE_ROWS(4)
        o0 += 4;
    }
    if (mr & 2) {
        DTILE_ROWS(2)
        o0 += 2;
    }
    if (mr & 1) {
        DTILE_ROWS(1)
    }
}

/* Tiles f in part t of T, f = grid block * plane blocks + plane block: the plane blocks of one grid block run
 * one after another while its input rows sit in cache. */
/* The tiles of grid blocks [qb0, qb1) (NV vectors each), part t of T of them. */
static AVX512 void dprod_blocks(const dprod *p, size_t qb0, size_t qb1, size_t t, size_t T) {
    const size_t wp = p->w + 1, nq = (p->h * wp + 15) / 16;
    const size_t nob = (p->planes + MR - 1) / MR;
    size_t lo, hi, cur = SIZE_MAX, nv = 0;
    grid_vec gv[NV];
    part_range((qb1 - qb0) * nob, t, T, &lo, &hi);
    for (size_t f = lo; f < hi; f++) {
        const size_t qb = qb0 + f / nob, o0 = f % nob * MR, q0 = qb * NV * 16;
        if (qb != cur) {
            cur = qb;
            nv = nq - qb * NV < NV ? nq - qb * NV : NV;
            for (size_t j = 0; j < nv; j++)
                gv[j] = p->ntaps ? (grid_vec){.pos = q0 + 16 * j, .valid = 0xFFFF, .run = 0xFFFF}
                                 : grid_vec_at(q0 + 16 * j, p->h, p->w);
        }
        dtile_any(p->planes - o0 < MR ? p->planes - o0 : MR, nv, p, o0, q0, gv);
    }
}

static AVX512 void dprod_run(const dprod *p, size_t t, size_t T) {
    const size_t nq = (p->h * (p->w + 1) + 15) / 16;
    dprod_blocks(p, 0, (nq + NV - 1) / NV, t, T);
}

/* ---- weight gradient: dW[o][k][tap] += sum over q of dy[o][q] * x[k][q + tap] -------------------------- */

#define W_INIT(I, T) __m512 s##I##T = _mm512_setzero_ps();
#define W_STORE(I, T)                                                                                         \
    if (mr > I) dw[I * cstride + T] += _mm512_reduce_add_ps(s##I##T);
#define W_LOADA(I) const __m512 a##I = mr > I ? _mm512_loadu_ps(dy + I * stride + q) : _mm512_setzero_ps();
#define W_TAPS(X, I) X(I, 0) X(I, 1) X(I, 2) X(I, 3) X(I, 4) X(I, 5) X(I, 6) X(I, 7) X(I, 8)
#define W_ALL(X) W_TAPS(X, 0) W_TAPS(X, 1) W_TAPS(X, 2)
/* One tap's input vector, loaded once and used by every row. The empty asm pins it in a register: GCC would
 * otherwise fold the load into each row's multiply-add, tripling the (mostly cache-line-splitting) loads,
 * which then bound the loop. */
#define W_TAP(ROW, OFF, T)                                                                                    \
    {                                                                                                         \
        __m512 b = _mm512_loadu_ps(ROW + OFF);                                                                \
        __asm__("" : "+v"(b));                                                                                \
        s0##T = _mm512_fmadd_ps(a0, b, s0##T);                                                                \
        if (mr > 1) s1##T = _mm512_fmadd_ps(a1, b, s1##T);                                                    \
        if (mr > 2) s2##T = _mm512_fmadd_ps(a2, b, s2##T);                                                    \
    }

/* Where one weight-gradient product finds its operands: dy padded on the output grid (h, w) (planes
 * conv3x3_plane_floats(h, w) apart), and the input channels xstride apart, either padded planes (phase 0) or,
 * for stride 2, each channel's four phase planes `phase` apart (tap (kh, kw) reads phase (kh % 2, kw % 2) at
 * (kh / 2) wp + kw / 2, as the stride-2 forward). */
typedef struct wprod {
    size_t c, co, h, w;
    const float *dypad, *x;
    size_t xstride, phase;
} wprod;

/* One tile: output channels [0, mr) of dy x the 9 taps of one input channel, over grid lanes [q0, q1). dy is
 * read through its padded copy shifted by wp + 1, whose spare lanes are the zero padding, so no lane needs a
 * mask; dw rows are cstride = c * 9 apart. */
static inline __attribute__((always_inline)) AVX512 void
wtile(size_t mr, bool s2, float *dw, size_t cstride, const float *dy, // (mr, stride) padded, shifted to the grid
      const float *x,    // one padded input plane, or (4, phase) its phase planes
      size_t stride, size_t wp, size_t phase, size_t q0, size_t q1) {
    W_ALL(W_INIT)
    for (size_t q = q0; q < q1; q += 16) {
        W_LOADA(0) W_LOADA(1) W_LOADA(2)
        if (s2) {
            const float *x0 = x + q, *p1 = x0 + phase, *p2 = p1 + phase, *p3 = p2 + phase;
            W_TAP(x0, 0, 0) W_TAP(p1, 0, 1) W_TAP(x0, 1, 2)
            W_TAP(p2, 0, 3) W_TAP(p3, 0, 4) W_TAP(p2, 1, 5)
            W_TAP(x0, wp, 6) W_TAP(p1, wp, 7) W_TAP(x0, wp + 1, 8)
            continue;
        }
        const float *x0 = x + q, *x1 = x0 + wp, *x2 = x1 + wp;
        W_TAP(x0, 0, 0) W_TAP(x0, 1, 1) W_TAP(x0, 2, 2)
        W_TAP(x1, 0, 3) W_TAP(x1, 1, 4) W_TAP(x1, 2, 5)
        W_TAP(x2, 0, 6) W_TAP(x2, 1, 7) W_TAP(x2, 2, 8)
    }
    W_ALL(W_STORE)
}

#define WTILE_MR(S2)                                                                                          \
    if (mr == 3) wtile(3, S2, dw, cstride, dy, x, stride, wp, phase, q0, q1);                                 \
    else if (mr == 2) wtile(2, S2, dw, cstride, dy, x, stride, wp, phase, q0, q1);                            \
    else wtile(1, S2, dw, cstride, dy, x, stride, wp, phase, q0, q1);

static AVX512 void wtile_any(size_t mr, float *dw, size_t cstride, const float *dy, const float *x, size_t stride,
                             size_t wp, size_t phase, size_t q0, size_t q1) {
    if (phase) {
        WTILE_MR(true)
    } else {
        WTILE_MR(false)
    }
}

static AVX512 void wgrad_run(const wprod *p, float *dw, size_t t, size_t T) {
    const size_t wp = p->w + 1, stride = conv3x3_plane_floats(p->h, p->w), nq = (p->h * wp + 15) / 16;
    const size_t nob = (p->co + MW - 1) / MW;
    size_t lo, hi;
    part_range(nob * p->c, t, T, &lo, &hi);
    for (size_t v0 = 0; v0 < nq; v0 += WG_CHUNK) {
        const size_t q0 = 16 * v0, q1 = 16 * (nq - v0 < WG_CHUNK ? nq : v0 + WG_CHUNK);
        for (size_t f = lo; f < hi; f++) { /* f = plane block * c + input channel */
            const size_t o0 = f / p->c * MW, k = f % p->c, mr = p->co - o0 < MW ? p->co - o0 : MW;
            wtile_any(mr, dw + (o0 * p->c + k) * 9, p->c * 9, p->dypad + o0 * stride + wp + 1,
                      p->x + k * p->xstride, stride, wp, p->phase, q0, q1);
        }
    }
}

/* The barrier between the parts of a call with T > 1 threads. */
static void part_barrier(size_t T) {
    if (T > 1) {
        #pragma omp barrier
    }
}

/* wgrad_run a band at a time: each band's padded rows of x and dy (all channels, split over the threads), then
 * its chunks, every unit of this thread's part as wgrad_run does them: chunk after chunk, so every dW element
 * gets the same chunk sums in the same order. Grid lane q reads band index q - base. */
static AVX512 void wgrad_run_banded(const conv3x3_shape *s, float *dw, const float *dy, const float *x,
                                    float *scratch, size_t t, size_t T) {
    const band b = band_of(s->w, WG_UNIT);
    const size_t wp = s->w + 1, nq = (s->h * wp + 15) / 16, nob = (s->co + MW - 1) / MW, band_vecs = b.lanes / 16;
    float *xb = scratch, *dyb = scratch + s->c * b.floats;
    size_t lo, hi;
    part_range(nob * s->c, t, T, &lo, &hi);
    for (size_t v0 = 0; v0 < nq; v0 += band_vecs) {
        const size_t r0 = 16 * v0 / wp, base = r0 * wp, v1 = nq - v0 < band_vecs ? nq : v0 + band_vecs;
        conv3x3_pad_rows(xb, x, s->c, s->h, s->w, r0, b.rows, b.floats, t, T);
        conv3x3_pad_rows(dyb, dy, s->co, s->h, s->w, r0, b.rows, b.floats, t, T);
        part_barrier(T);
        for (size_t c0 = v0; c0 < v1; c0 += WG_CHUNK) {
            const size_t q0 = 16 * c0 - base, q1 = 16 * (v1 - c0 < WG_CHUNK ? v1 : c0 + WG_CHUNK) - base;
            for (size_t f = lo; f < hi; f++) { /* f = plane block * c + input channel */
                const size_t o0 = f / s->c * MW, k = f % s->c, mr = s->co - o0 < MW ? s->co - o0 : MW;
                wtile_any(mr, dw + (o0 * s->c + k) * 9, s->c * 9, dyb + o0 * b.floats + wp + 1,
                          xb + k * b.floats, b.floats, wp, 0, q0, q1);
            }
        }
        part_barrier(T); /* the next band overwrites the copies */
    }
}

/* dprod_run a band at a time over the padded rows of src_planes (p's chans planes (h, w), not yet padded): each
 * band's rows of every channel (split over the threads), then its grid blocks' tiles. Every output element is
 * still one tile's sum over the channels and taps in order: the bits of the whole-plane product. */
static AVX512 void dprod_run_banded(dprod p, const float *src_planes, float *scratch, size_t t, size_t T) {
    const band b = band_of(p.w, DP_UNIT);
    const size_t wp = p.w + 1, nq = (p.h * wp + 15) / 16, nqb = (nq + NV - 1) / NV, band_blocks = b.lanes / DP_UNIT;
    p.src = scratch;
    p.stride = b.floats;
    for (size_t qb0 = 0; qb0 < nqb; qb0 += band_blocks) {
        const size_t qb1 = nqb - qb0 < band_blocks ? nqb : qb0 + band_blocks, r0 = qb0 * DP_UNIT / wp;
        p.qoff = r0 * wp;
        conv3x3_pad_rows(scratch, src_planes, p.chans, p.h, p.w, r0, b.rows, b.floats, t, T);
        part_barrier(T);
        dprod_blocks(&p, qb0, qb1, t, T);
        part_barrier(T); /* the next band overwrites the copies */
    }
}

/* ---- weight gradient of small planes: dW^T (c*9, co) += X (c*9, npix) dy^T (npix, co) -------------------
 * With few grid vectors the lane reductions above cost as much as the products. Here the vectors run along the
 * output channels instead: dy transposed once into dt (npix, ldt), a row of X is one tap of one padded input
 * plane (broadcast), and each accumulator is 16 finished sums, added into dW (16 channels apart) at the end. */

#define U_INIT(C, T, J) __m512 u##C##T##J = _mm512_setzero_ps();
#define U_FMA(C, T, J)                                                                                        \
    if (mc > C && nv > J) u##C##T##J = _mm512_fmadd_ps(a, d##J, u##C##T##J);
#define U_TAP(C, T, OFF)                                                                                      \
    if (mc > C) {                                                                                             \
        const __m512 a = _mm512_set1_ps(px[(C) * stride + (OFF)]);                                            \
        U_FMA(C, T, 0) U_FMA(C, T, 1) U_FMA(C, T, 2)                                                          \
    }
#define U_TAPS(C)                                                                                             \
    U_TAP(C, 0, 0) U_TAP(C, 1, 1) U_TAP(C, 2, 2) U_TAP(C, 3, wp) U_TAP(C, 4, wp + 1) U_TAP(C, 5, wp + 2)     \
    U_TAP(C, 6, 2 * wp) U_TAP(C, 7, 2 * wp + 1) U_TAP(C, 8, 2 * wp + 2)
/* Stride 2: tap (kh, kw) of phase (kh % 2, kw % 2), `phase` floats apart, at (kh / 2) wp + kw / 2. */
#define U_TAPS2(C)                                                                                            \
    U_TAP(C, 0, 0) U_TAP(C, 1, phase) U_TAP(C, 2, 1) U_TAP(C, 3, 2 * phase) U_TAP(C, 4, 3 * phase)            \
    U_TAP(C, 5, 2 * phase + 1) U_TAP(C, 6, wp) U_TAP(C, 7, phase + wp) U_TAP(C, 8, wp + 1)
#define U_STORE(C, T, J)                                                                                      \
    if (mc > C && nv > J) {                                                                                   \
        _mm512_storeu_ps(sums, u##C##T##J);                                                                   \
        const size_t n = nco - 16 * (J) < 16 ? nco - 16 * (J) : 16;                                           \
        float *d = dw + (16 * (J)) * cs + (C) * 9 + (T);                                                      \
        for (size_t l = 0; l < n; l++) d[l * cs] += sums[l];                                                  \
    }
#define U_EACH(X, C, J)                                                                                       \
    X(C, 0, J) X(C, 1, J) X(C, 2, J) X(C, 3, J) X(C, 4, J) X(C, 5, J) X(C, 6, J) X(C, 7, J) X(C, 8, J)
#define U_ALL(X) U_EACH(X, 0, 0) U_EACH(X, 0, 1) U_EACH(X, 0, 2) U_EACH(X, 1, 0) U_EACH(X, 1, 1) U_EACH(X, 1, 2)
/* The pixel loop of a tile, TAPS the taps of one input channel. */
#define U_LOOP(TAPS)                                                                                          \
    for (size_t y = 0; y < h; y++)                                                                            \
        for (size_t x = 0; x < w; x++) {                                                                      \
            const float *px = xpad + y * wp + x, *dr = dt + (y * w + x) * ldt;                                \
            const __m512 d0 = _mm512_loadu_ps(dr);                                                            \
            const __m512 d1 = nv > 1 ? _mm512_loadu_ps(dr + 16) : d0;                                         \
            const __m512 d2 = nv > 2 ? _mm512_loadu_ps(dr + 32) : d0;                                         \
            TAPS(0) TAPS(1)                                                                                   \
        }

/* Input channels [0, mc) x 9 taps x output channels [0, nco) (nco <= 16 nv): the pixels in order, each a
 * multiply-add of its 9 mc tap values by nv vectors of its dt row. dw is (nco, cs) at this tile's first row. */
static inline __attribute__((always_inline)) AVX512 void
utile(size_t mc, size_t nv, float *dw, size_t cs, const float *xpad, // (mc, stride) padded input planes
      size_t stride, const float *dt, size_t ldt,                     // (npix, ldt) at this tile's first column
      size_t h, size_t w, size_t nco) {
    const size_t wp = w + 1;
    float sums[16];
    U_ALL(U_INIT)
    U_LOOP(U_TAPS)
    U_ALL(U_STORE)
}

/* The same over the phase planes of stride 2 (stride: between channels; phase: between a channel's phases),
 * on the output grid (h, w). A function of its own: sharing one with the stride-1 tiles, GCC spilled
 * accumulators of those (8x8 planes of 64 channels 6% slower). */
static inline __attribute__((always_inline)) AVX512 void
utile2(size_t mc, size_t nv, float *dw, size_t cs, const float *xpad, size_t stride, size_t phase,
       const float *dt, size_t ldt, size_t h, size_t w, size_t nco) {
    const size_t wp = w + 1;
    float sums[16];
    U_ALL(U_INIT)
    U_LOOP(U_TAPS2)
    U_ALL(U_STORE)
}

static AVX512 void utile_any(size_t mc, size_t nv, float *dw, size_t cs, const float *xpad, size_t stride,
                             const float *dt, size_t ldt, size_t h, size_t w, size_t nco) {
    if (mc == 2) utile(2, 1, dw, cs, xpad, stride, dt, ldt, h, w, nco);
    else if (nv == 3) utile(1, 3, dw, cs, xpad, stride, dt, ldt, h, w, nco);
    else if (nv == 2) utile(1, 2, dw, cs, xpad, stride, dt, ldt, h, w, nco);
    else utile(1, 1, dw, cs, xpad, stride, dt, ldt, h, w, nco);
}

static AVX512 void utile2_any(size_t mc, size_t nv, float *dw, size_t cs, const float *xpad, size_t stride,
                              size_t phase, const float *dt, size_t ldt, size_t h, size_t w, size_t nco) {
    if (mc == 2) utile2(2, 1, dw, cs, xpad, stride, phase, dt, ldt, h, w, nco);
    else if (nv == 3) utile2(1, 3, dw, cs, xpad, stride, phase, dt, ldt, h, w, nco);
    else if (nv == 2) utile2(1, 2, dw, cs, xpad, stride, phase, dt, ldt, h, w, nco);
    else utile2(1, 1, dw, cs, xpad, stride, phase, dt, ldt, h, w, nco);
}

/* Tiles f in part t of T, f = channel block * output blocks + output block. One 16-channel output block
 * (co <= 16) takes two input channels per tile, more take one and up to 48 output channels. The dypad of p
 * is not read: dt is dy transposed. */
static AVX512 void wgrad_small_run(const wprod *p, float *dw, const float *dt, size_t t, size_t T) {
    const size_t ldt = round_up(p->co, 16), cs = p->c * 9;
    const size_t mc = p->co <= 16 ? 2 : 1, ncb = (p->c + mc - 1) / mc, nob = (p->co + 47) / 48;
    size_t lo, hi;
    part_range(ncb * nob, t, T, &lo, &hi);
    for (size_t f = lo; f < hi; f++) {
        const size_t k = f / nob * mc, o0 = f % nob * 48, nco = p->co - o0 < 48 ? p->co - o0 : 48;
        const size_t mck = p->c - k < mc ? p->c - k : mc, nv = (nco + 15) / 16;
        float *d = dw + o0 * cs + k * 9;
        if (p->phase)
            utile2_any(mck, nv, d, cs, p->x + k * p->xstride, p->xstride, p->phase, dt + o0, ldt, p->h, p->w, nco);
        else
            utile_any(mck, nv, d, cs, p->x + k * p->xstride, p->xstride, dt + o0, ldt, p->h, p->w, nco);
    }
}

/* dt (npix, ldt) = dy^T for the pixels of part t of T, in 16 x 16 register blocks (the scalar gather, a plane
 * apart per load, was 4% of the cnn's step at micro-batch 1); columns past co are zero. */
static void transpose_dy(float *dt, const float *dy, size_t co, size_t npix, size_t ldt, size_t t, size_t T) {
    size_t lo, hi;
    part_range(npix, t, T, &lo, &hi);
    if (lo == hi) return;
    transpose_floats(dt + lo * ldt, ldt, dy + lo, npix, co, hi - lo);
    if (co < ldt)
        for (size_t p = lo; p < hi; p++) memset(dt + p * ldt + co, 0, (ldt - co) * sizeof *dt);
}

/* db[o] += the sum of plane o of dy: 16-lane float partial sums over the plane, the lanes in double. */
static AVX512 void bias_run(float *db, const float *dy, size_t co, size_t npix, size_t t, size_t T) {
    size_t lo, hi;
    part_range(co, t, T, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
        const float *plane = dy + o * npix;
        __m512 acc = _mm512_setzero_ps();
        for (size_t i = 0; i < npix; i += 16)
            acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(avx512_lanes(npix - i), plane + i));
        float part[16];
        _mm512_storeu_ps(part, acc);
        double sum = 0.0;
        for (int l = 0; l < 16; l++) sum += part[l];
        db[o] += (float)sum;
    }
}

static AVX512 void forward_avx512(const conv3x3_shape *s, float *y, const float *x, const float *w, const float *b,
                                  bool round, float *scratch, size_t t, size_t T) {
    if (plane_banded(s)) {
        const dprod p = {.planes = s->co, .chans = s->c, .h = s->h, .w = s->w, .wt = w, .rs = s->c * 9,
                         .flip = false, .dst = y, .bias = b, .accumulate = false, .ostride = s->h * s->w,
                         .round = round};
        dprod_run_banded(p, x, scratch, t, T);
        return;
    }
    conv3x3_pad(scratch, x, s->c, s->h, s->w, t, T);
    part_barrier(T);
    const dprod p = {.planes = s->co, .chans = s->c, .h = s->h, .w = s->w, .stride = conv3x3_plane_floats(s->h, s->w),
                     .src = scratch, .wt = w, .rs = s->c * 9, .flip = false, .dst = y, .bias = b,
                     .accumulate = false, .ostride = s->h * s->w, .round = round};
    dprod_run(&p, t, T);
    part_barrier(T); /* the caller may overwrite the scratch next */
}

static AVX512 void backward_avx512(const conv3x3_shape *s, float *dx, float *dw, float *db, const float *dy,
                                   const float *x, const float *w, float *scratch, size_t t, size_t T) {
    const size_t plane = conv3x3_plane_floats(s->h, s->w), npix = s->h * s->w;
    float *xpad = scratch, *dypad = scratch + s->c * plane, *dt = dypad + s->co * plane;
    const bool small = wgrad_small(s);
    if (plane_banded(s)) { /* each product pads its bands in turn: dW's (c + co) channels, then dx's co */
        if (dw) wgrad_run_banded(s, dw, dy, x, scratch, t, T);
        if (db) bias_run(db, dy, s->co, npix, t, T);
        if (dx) {
            const dprod p = {.planes = s->c, .chans = s->co, .h = s->h, .w = s->w, .wt = w, .rs = 9, .flip = true,
                             .dst = dx, .bias = NULL, .accumulate = true, .ostride = npix};
            dprod_run_banded(p, dy, scratch, t, T);
        }
        part_barrier(T);
        return;
    }
    if (dw) conv3x3_pad(xpad, x, s->c, s->h, s->w, t, T);
    if (dx || (dw && !small)) conv3x3_pad(dypad, dy, s->co, s->h, s->w, t, T);
    if (dw && small) transpose_dy(dt, dy, s->co, npix, round_up(s->co, 16), t, T);
    part_barrier(T);
    const wprod wp = {.c = s->c, .co = s->co, .h = s->h, .w = s->w, .dypad = dypad, .x = xpad, .xstride = plane};
    if (dw && small) wgrad_small_run(&wp, dw, dt, t, T);
    else if (dw) wgrad_run(&wp, dw, t, T);
    if (db) bias_run(db, dy, s->co, npix, t, T);
    if (dx) {
        const dprod p = {.planes = s->c, .chans = s->co, .h = s->h, .w = s->w, .stride = plane, .src = dypad,
                         .wt = w, .rs = 9, .flip = true, .dst = dx, .bias = NULL, .accumulate = true,
                         .ostride = npix};
        dprod_run(&p, t, T);
    }
    part_barrier(T);
}

/* ---- stride 2: the polyphase split ----------------------------------------------------------------------- */

/* One row's even and odd elements: even[j] = row[2 j] for 2 j < w, odd[j] = row[2 j + 1] for 2 j + 1 < w, two
 * 16-lane vectors at a time (a permutation of the pair picks each half). */
static AVX512 void deinterleave_row(float *even, float *odd, const float *row, size_t w) {
    const __m512i ie = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i io = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (size_t i = 0; i < w; i += 32) {
        const size_t n = w - i < 32 ? w - i : 32, ne = (n + 1) / 2, no = n / 2;
        const __m512 a = _mm512_maskz_loadu_ps(avx512_lanes(n), row + i);
        const __m512 b = _mm512_maskz_loadu_ps(avx512_lanes(n > 16 ? n - 16 : 0), row + i + 16);
        _mm512_mask_storeu_ps(even + i / 2, avx512_lanes(ne), _mm512_permutex2var_ps(a, ie, b));
        _mm512_mask_storeu_ps(odd + i / 2, avx512_lanes(no), _mm512_permutex2var_ps(a, io, b));
    }
}

/* The four phase planes of every channel of part t of T: channel ch's phase (a, b) at
 * ph + (4 ch + 2 a + b) plane2 is, on rows of wp = wo + 1,
 *     P_ab[i][j] = x[2 i + a - 1][2 j + b - 1] (zero outside x), 0 <= i <= ho, 0 <= j <= wo,
 * and zero after its last row up to plane2. Row i of phase (a, 1) is then the even elements of x's row
 * 2 i + a - 1 and a zero, row i of phase (a, 0) a zero and the odd elements (and a zero when w is odd). */
static AVX512 void conv3x3_phase_split(float *ph, const float *x, size_t n, size_t h, size_t w, size_t t,
                                       size_t T) {
    const size_t ho = (h + 1) / 2, wo = (w + 1) / 2, wp = wo + 1, plane2 = conv3x3_phase_floats(h, w);
    size_t lo, hi;
    part_range(n, t, T, &lo, &hi);
    for (size_t ch = lo; ch < hi; ch++) {
        const float *src = x + ch * h * w;
        for (size_t a = 0; a < 2; a++) {
            float *p0 = ph + (4 * ch + 2 * a) * plane2, *p1 = p0 + plane2; /* phases (a, 0) and (a, 1) */
            for (size_t i = 0; i <= ho; i++) {
                float *r0 = p0 + i * wp, *r1 = p1 + i * wp;
                const size_t r = 2 * i + a; /* x's row r - 1 */
                if (r == 0 || r > h) {
                    zero_floats(r0, wp);
                    zero_floats(r1, wp);
                    continue;
                }
                deinterleave_row(r1, r0 + 1, src + (r - 1) * w, w);
                r0[0] = 0.0f;
                r1[wo] = 0.0f;
                if (w % 2) r0[wo] = 0.0f;
            }
            zero_floats(p0 + (ho + 1) * wp, plane2 - (ho + 1) * wp);
            zero_floats(p1 + (ho + 1) * wp, plane2 - (ho + 1) * wp);
        }
    }
}

static AVX512 void forward_s2_avx512(const conv3x3_shape *s, float *y, const float *x, const float *w,
                                     const float *b, float *scratch, size_t t, size_t T) {
    const size_t plane2 = conv3x3_phase_floats(s->h, s->w);
    conv3x3_phase_split(scratch, x, s->c, s->h, s->w, t, T);
    part_barrier(T);
    const dprod p = {.planes = s->co, .chans = s->c, .h = (s->h + 1) / 2, .w = (s->w + 1) / 2,
                     .stride = 4 * plane2, .src = scratch, .wt = w, .rs = s->c * 9, .flip = false, .dst = y,
                     .bias = b, .accumulate = false, .phase = plane2,
                     .ostride = ((s->h + 1) / 2) * ((s->w + 1) / 2)};
    dprod_run(&p, t, T);
    part_barrier(T);
}

/* ---- stride 2, backward: the weight gradient over the phase planes, the input gradient by phases ---------
 * Phase (a, b) of dx, D_ab[i][j] = dx[2 i + a - 1][2 j + b - 1] on the grid 0 <= i <= ho, 0 <= j <= wo (rows
 * wp = wo + 1, every lane a pixel of D, whose border pixels fall outside dx), receives the taps
 * kh = a + 2 dh, kw = b + 2 dw (dh, dw in {0, 1}, 0 only for an odd phase): dy[i - dh][j - dw], which in dy's
 * padded plane lies at q + (1 - dh) wp + 1 - dw (the zero column in front of a row is the one after the row
 * before, so j - dw = wo and j - dw = -1 both read zero). Four products of 4, 2, 2 and 1 taps, the tiles of
 * the stride-1 kernel, into D planes laid out as the phase planes of x; then one pass interleaves them into dx. */

/* row[0, w) += the interleaving of even[] (the even elements) and odd[] (the odd ones): deinterleave_row's
 * inverse, 32 elements at a time. */
static AVX512 void interleave_add_row(float *row, const float *even, const float *odd, size_t w) {
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (size_t i = 0; i < w; i += 32) {
        const size_t n = w - i < 32 ? w - i : 32;
        const __m512 e = _mm512_maskz_loadu_ps(avx512_lanes((n + 1) / 2), even + i / 2);
        const __m512 o = _mm512_maskz_loadu_ps(avx512_lanes(n / 2), odd + i / 2);
        const __mmask16 m0 = avx512_lanes(n), m1 = avx512_lanes(n > 16 ? n - 16 : 0);
        float *r = row + i;
        _mm512_mask_storeu_ps(r, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, r), _mm512_permutex2var_ps(e, lo, o)));
        _mm512_mask_storeu_ps(r + 16, m1,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m1, r + 16), _mm512_permutex2var_ps(e, hi, o)));
    }
}

/* dx += the phases D_ab of every channel of part t of T (at d + (4 ch + 2 a + b) plane2): row y of dx is row
 * (y + 1) / 2 of phases (a, .), a = 1 for even y; its even elements come from phase (a, 1), from column 0, its
 * odd ones from phase (a, 0), from column 1. */
static AVX512 void conv3x3_phase_merge_add(float *dx, const float *d, size_t n, size_t h, size_t w, size_t t,
                                           size_t T) {
    const size_t wp = (w + 1) / 2 + 1, plane2 = conv3x3_phase_floats(h, w);
    size_t lo, hi;
    part_range(n, t, T, &lo, &hi);
    for (size_t ch = lo; ch < hi; ch++)
        for (size_t y = 0; y < h; y++) {
            const float *a0 = d + (4 * ch + (y % 2 ? 0 : 2)) * plane2 + (y + 1) / 2 * wp; /* phase (a, 0) */
            interleave_add_row(dx + (ch * h + y) * w, a0 + plane2, a0 + 1, w);
        }
}

/* The product of phase (a, b) of dx over the rows of D_ab that fall inside dx: i from 1 - a, h / 2 of them
 * (a = 0) or (h + 1) / 2 (a = 1). */
static dprod dx_phase_prod(const conv3x3_shape *s, size_t a, size_t b, const float *dypad, const float *w,
                           float *d) {
    const size_t ho = (s->h + 1) / 2, wo = (s->w + 1) / 2, wp = wo + 1, plane2 = conv3x3_phase_floats(s->h, s->w);
    const size_t i0 = (1 - a) * wp; /* the first row's offset, in dy's padded plane as in D_ab */
    dprod p = {.planes = s->c, .chans = s->co, .h = (s->h + a) / 2, .w = wo, .stride = conv3x3_plane_floats(ho, wo),
               .src = dypad + i0, .wt = w, .rs = 9, .dst = d + (2 * a + b) * plane2 + i0, .ostride = 4 * plane2};
    for (size_t dh = 0; dh < 2 - a; dh++)
        for (size_t dw = 0; dw < 2 - b; dw++) {
            p.tap_w[p.ntaps] = (a + 2 * dh) * 3 + b + 2 * dw;
            p.tap_off[p.ntaps++] = (1 - dh) * wp + 1 - dw;
        }
    return p;
}

/* Scratch, as conv3x3_s2_scratch_floats: the phase planes of x, later those of dx, then dy padded on the
 * output grid, or first dy transposed (small output planes) and then dy padded in its place. */
static AVX512 void backward_s2_avx512(const conv3x3_shape *s, float *dx, float *dw, float *db, const float *dy,
                                      const float *x, const float *w, float *scratch, size_t t, size_t T) {
    const conv3x3_shape so = {.c = s->c, .co = s->co, .h = (s->h + 1) / 2, .w = (s->w + 1) / 2};
    const size_t plane2 = conv3x3_phase_floats(s->h, s->w), npix = so.h * so.w;
    float *ph = scratch, *dypad = ph + 4 * s->c * plane2, *dt = dypad;
    const bool small = wgrad_small(&so);
    if (dw) conv3x3_phase_split(ph, x, s->c, s->h, s->w, t, T);
    if (dw && small) transpose_dy(dt, dy, s->co, npix, round_up(s->co, 16), t, T);
    else conv3x3_pad(dypad, dy, s->co, so.h, so.w, t, T);
    part_barrier(T);
    const wprod p = {.c = s->c, .co = s->co, .h = so.h, .w = so.w, .dypad = dypad, .x = ph, .xstride = 4 * plane2,
                     .phase = plane2};
    if (dw && small) wgrad_small_run(&p, dw, dt, t, T);
    else if (dw) wgrad_run(&p, dw, t, T);
    if (db) bias_run(db, dy, s->co, npix, t, T);
    if (dx) {
        if (dw) part_barrier(T); /* the phases of dx overwrite those of x, dy padded its transposition */
        if (dw && small) {
            conv3x3_pad(dypad, dy, s->co, so.h, so.w, t, T);
            part_barrier(T);
        }
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 2; b++) {
                const dprod q = dx_phase_prod(s, a, b, dypad, w, ph);
                dprod_run(&q, t, T);
            }
        part_barrier(T);
        conv3x3_phase_merge_add(dx, ph, s->c, s->h, s->w, t, T);
    }
    part_barrier(T);
}
#endif

bool conv3x3_s2_scratch_floats(const conv3x3_shape *s, size_t *n) {
    size_t plane, rows, back;
    /* conv3x3_phase_floats, checked: (ho + 1)(wo + 1) + 17, rounded up to 16 */
    if (!size_add(s->h / 2 + s->h % 2, 1, &rows) || !size_mul(rows, s->w / 2 + s->w % 2 + 1, &plane) ||
        !size_add(plane, 17 + 15, &plane))
        return false;
    plane = plane / 16 * 16;
    /* then dy padded on the output grid, or transposed (the same place, one after the other) */
    const size_t ho = s->h / 2 + s->h % 2, wo = s->w / 2 + s->w % 2;
    const conv3x3_shape so = {.c = 0, .co = s->co, .h = ho, .w = wo};
    size_t dyplane; /* conv3x3_plane_floats(ho, wo), checked */
    if (!size_mul(s->c, 4, n) || !size_mul(*n, plane, n) || !size_mul(ho + 2, wo + 1, &dyplane) ||
        !size_add(dyplane, 17 + 15, &dyplane) || !size_mul(s->co, dyplane / 16 * 16, &back))
        return false;
    size_t dt;
    if (wgrad_small(&so)) {
        if (!size_mul(ho * wo, round_up(s->co, 16), &dt)) return false;
        back = dt > back ? dt : back;
    }
    return size_add(*n, back, n);
}

void conv3x3_s2_backward(const conv3x3_shape *s, float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, float *scratch, size_t t, size_t T) {
#ifdef SNUG_AVX512
    backward_s2_avx512(s, dx, dw, db, dy, x, w, scratch, t, T);
#else
    (void)s, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)scratch, (void)t, (void)T;
    abort(); /* unreachable: conv3x3_direct_available() is false in this build */
#endif
}

void conv3x3_s2_forward(const conv3x3_shape *s, float *y, const float *x, const float *w, const float *b,
                        float *scratch, size_t t, size_t T) {
#ifdef SNUG_AVX512
    forward_s2_avx512(s, y, x, w, b, scratch, t, T);
#else
    (void)s, (void)y, (void)x, (void)w, (void)b, (void)scratch, (void)t, (void)T;
    abort(); /* unreachable: conv3x3_direct_available() is false in this build */
#endif
}

static void forward_of(const conv3x3_shape *s, float *y, const float *x, const float *w, const float *b, bool round,
                       float *scratch, size_t t, size_t T) {
#ifdef SNUG_AVX512
    forward_avx512(s, y, x, w, b, round, scratch, t, T);
#else
    (void)s, (void)y, (void)x, (void)w, (void)b, (void)round, (void)scratch, (void)t, (void)T;
    abort(); /* unreachable: conv3x3_direct_available() is false in this build */
#endif
}

void conv3x3_forward(const conv3x3_shape *s, float *y, const float *x, const float *w, const float *b,
                     float *scratch, size_t t, size_t T) {
    forward_of(s, y, x, w, b, false, scratch, t, T);
}

void conv3x3_forward_rounded(const conv3x3_shape *s, float *y, const float *x, const float *w, const float *b,
                             float *scratch, size_t t, size_t T) {
    forward_of(s, y, x, w, b, true, scratch, t, T);
}

void conv3x3_backward(const conv3x3_shape *s, float *dx, float *dw, float *db, const float *dy, const float *x,
                      const float *w, float *scratch, size_t t, size_t T) {
#ifdef SNUG_AVX512
    backward_avx512(s, dx, dw, db, dy, x, w, scratch, t, T);
#else
    (void)s, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)scratch, (void)t, (void)T;
    abort(); /* unreachable: conv3x3_direct_available() is false in this build */
#endif
}

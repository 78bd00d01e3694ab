/* conv3x3_bf16 (conv3x3_bf16.h): paired padded planes in the scratch, register tiles of vdpbf16ps over them.
 * The AVX512_BF16 code is compiled through a function attribute (the build has no -march) and used only where
 * the CPU has it; the pairing, the weights, the split between threads and a plain-C twin of the tile run on
 * every CPU. */
#include "kernels/conv3x3_bf16.h"

#include <string.h>

#include "core/checked.h"
#include "kernels/avx512.h"
#include "kernels/bf16.h"
#include "kernels/conv3x3_amx.h"
#include "kernels/dpbf16_lane.h"
#include "kernels/dpbf16_pairs.h"
#include "kernels/isa.h"
#include "kernels/transpose.h"

/* Output planes of one register tile, and its 16-lane vectors along the grid (24 accumulators). */
#define MR 8
#define NV 3

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t pairs(size_t n) { return (n + 1) / 2; }

/* Set before any convolution runs (tests), read by every thread afterwards. */
static bool force_portable;

void conv3x3_bf16_force_portable(bool on) { force_portable = on; }

bool conv3x3_bf16_hardware(void) { return !force_portable && kernel_isa_now() >= KERNEL_ISA_AVX512_BF16; }

bool conv3x3_bf16_in_use(void) {
    return force_portable || kernel_bf16_dots_pay() || kernel_isa_now() >= KERNEL_ISA_AMX_BF16;
}

bool conv3x3_bf16_takes(size_t c, size_t co) {
    if (force_portable || kernel_bf16_dots_pay()) return true;
    /* with fewer than 16 channels on either side a tile instruction does a fraction of its work (an RGB input
     * layer ran at half the float32 kernels' rate) */
    return kernel_isa_now() >= KERNEL_ISA_AMX_BF16 && c >= 16 && co >= 16 && conv3x3_amx_takes(c) &&
           conv3x3_amx_takes(co);
}

/* The kernel of a product over `chans` channel pairs (the forward's input channels, the input gradient's
 * output channels; any for the weight gradient, chans 0): AMX tiles where the CPU has them and they take the
 * channels, else vdpbf16ps where the CPU has it, else the portable twin. */
typedef enum { KIND_PORTABLE, KIND_DOTS, KIND_AMX } kernel_kind;

static kernel_kind kind_of(size_t chans) {
    if (force_portable) return KIND_PORTABLE;
    if (kernel_isa_now() >= KERNEL_ISA_AMX_BF16 && (chans == 0 || conv3x3_amx_takes(chans))) return KIND_AMX;
    return kernel_isa_now() >= KERNEL_ISA_AVX512_BF16 ? KIND_DOTS : KIND_PORTABLE;
}

/* Grid blocks (NV vectors each) of one band: a plane with more goes in bands of rows, each paired in turn, so
 * that the scratch holds a band of every channel pair (the float32 kernel's bands, conv3x3_direct.h), not
 * whole planes (a 1408 x 2112 plane would take 12 MiB a pair). */
#define BAND_BLOCKS ((size_t)64)

/* The padded rows a band of grid blocks reads: from the row its first lane is in to two rows past its last
 * lane, at most this many (a block's lanes span the most rows where its vectors skip the spare lanes: w, not
 * w + 1, pixels a row, row_vectors). */
static size_t band_rows(size_t w) { return (BAND_BLOCKS * NV * 16 + 2) / w + 4; }

/* Whether a plane goes in bands: more blocks than two bands. */
static bool banded(size_t h, size_t w) { return h * (w + 1) > 2 * BAND_BLOCKS * NV * 16; }

/* Words of one paired plane or band: the float32 kernel's padded plane (conv3x3_direct.c), whose last vector
 * reads up to (h + 2)(w + 1) + 16, or a band's rows and the same 16 words past them. Only called once
 * conv3x3_bf16_scratch_floats has checked that the sizes fit. */
static size_t plane_words(size_t h, size_t w) {
    return round_up((banded(h, w) ? band_rows(w) : h + 2) * (w + 1) + 17, 16);
}

bool conv3x3_bf16_scratch_floats(const conv3x3_shape *s, size_t *n) {
    size_t plane;
    const size_t most = pairs(s->c > s->co ? s->c : s->co);
    if (!size_add(s->h, 2, &plane) || !size_mul(plane, s->w + 1, &plane) || !size_add(plane, 17 + 15, &plane))
        return false;
    return size_mul(plane_words(s->h, s->w), most, n); /* a word is a float's bytes */
}

bool conv3x3_bf16_weights_floats(const conv3x3_shape *s, bool dx, size_t *n) {
    const size_t planes = dx ? s->c : s->co, chans = dx ? s->co : s->c;
    if (kind_of(chans) == KIND_AMX) return (*n = conv3x3_amx_weights_words(planes, chans)) != SIZE_MAX;
    return size_mul(planes, pairs(chans), n) && size_mul(*n, 9, n);
}

size_t conv3x3_bf16_weights_offset(const conv3x3_shape *s, bool dx, size_t first) {
    return first * pairs(dx ? s->co : s->c) * 9; /* both layouts go plane by plane */
}

/* The contiguous range [*lo, *hi) of n items that part t of T owns. */
static void part_range(size_t n, size_t t, size_t T, size_t *lo, size_t *hi) {
    *lo = n * t / T;
    *hi = n * (t + 1) / T;
}

static void part_barrier(size_t T) {
    if (T > 1) {
        #pragma omp barrier
    }
}

/* ---- pairing ---------------------------------------------------------------------------------------------- */

/* Value i of channel ch as bfloat16 bits (0 past the last channel), from either kind of source. */
static uint32_t src_bits(conv3x3_bf16_src x, size_t n, size_t ch, size_t i) {
    if (ch >= n) return 0;
    return x.f ? dpbf16_of(x.f[i]) : x.h[i];
}

/* Row r of one paired padded plane (row 0 and h + 1 zero, a zero word in front of every row). */
static void pair_row_portable(uint32_t *dst, conv3x3_bf16_src x, size_t n, size_t p, size_t h, size_t w,
                              size_t r) {
    dst[0] = 0;
    const size_t base0 = (2 * p * h + r - 1) * w, base1 = base0 + h * w;
    for (size_t i = 0; i < w; i++)
        dst[1 + i] = r == 0 || r > h ? 0
                                     : src_bits(x, n, 2 * p, base0 + i) | src_bits(x, n, 2 * p + 1, base1 + i) << 16;
}

#ifdef SNUG_AVX512
static inline __attribute__((always_inline)) BF16 void pair_row_bf16(uint32_t *dst, conv3x3_bf16_src x, size_t n, size_t p, size_t h, size_t w,
                               size_t r) {
    dst[0] = 0;
    const bool second = 2 * p + 1 < n, inside = r > 0 && r <= h;
    const size_t base0 = inside ? (2 * p * h + r - 1) * w : 0, base1 = base0 + h * w;
    for (size_t i = 0; i < w; i += 16) {
        const __mmask16 m = avx512_lanes(w - i), m1 = second && inside ? m : 0;
        __m512i v;
        if (!inside) v = _mm512_setzero_si512();
        else if (x.f)
            v = dpbf16_pair_floats(_mm512_maskz_loadu_ps(m, x.f + base0 + i), _mm512_maskz_loadu_ps(m1, x.f + base1 + i));
        else
            v = _mm512_or_si512(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x.h + base0 + i)),
                                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, x.h + base1 + i)),
                                                  16));
        _mm512_mask_storeu_epi32(dst + 1 + i, m, v);
    }
}

/* Pairs [lo, hi) of pair_planes, every row in one function: ResNet-20's rows are 8 to 32 floats, too short to
 * pay for a call each. */
static BF16 void pair_planes_bf16(uint32_t *dst, conv3x3_bf16_src x, size_t n, size_t h, size_t w, size_t r0,
                                  size_t r1, size_t stride, size_t lo, size_t hi) {
    for (size_t p = lo; p < hi; p++)
        for (size_t r = r0; r < r1; r++) pair_row_bf16(dst + p * stride + (r - r0) * (w + 1), x, n, p, h, w, r);
}
#endif

/* Rows [r0, r1) of the paired padded planes of part t of T of the pairs of n channels, `stride` words apart,
 * zeros after them. */
static void pair_planes(uint32_t *dst, conv3x3_bf16_src x, size_t n, size_t h, size_t w, size_t r0, size_t r1,
                        size_t stride, bool hw, size_t t, size_t T) {
    const size_t wp = w + 1;
    size_t lo, hi;
    part_range(pairs(n), t, T, &lo, &hi);
#ifdef SNUG_AVX512
    if (hw) pair_planes_bf16(dst, x, n, h, w, r0, r1, stride, lo, hi);
#endif
    for (size_t p = lo; p < hi; p++) {
        uint32_t *d = dst + p * stride;
        if (!hw)
            for (size_t r = r0; r < r1; r++) pair_row_portable(d + (r - r0) * wp, x, n, p, h, w, r);
        for (size_t i = (r1 - r0) * wp; i < stride; i++) d[i] = 0;
    }
}

/* conv3x3_bf16_weights with planes, channels = co, c (flip false) or c, co. Forward: plane o's channel k is
 * w[o][k]; flipped (the input gradient: plane i, channel k an output channel), w[k][i] rotated. */
static void pack_weights(uint32_t *dst, const float *w, size_t planes, size_t chans, bool flip, size_t t, size_t T) {
    const size_t np = pairs(chans);
    size_t lo, hi;
    part_range(planes, t, T, &lo, &hi);
    for (size_t o = lo; o < hi; o++)
        for (size_t p = 0; p < np; p++)
            for (size_t tap = 0; tap < 9; tap++) {
                uint32_t word = 0;
                for (size_t half = 0; half < 2; half++) {
                    const size_t k = 2 * p + half;
                    if (k >= chans) continue;
                    const float v = flip ? w[(k * planes + o) * 9 + 8 - tap] : w[(o * chans + k) * 9 + tap];
                    word |= dpbf16_of(v) << (16 * half);
                }
                dst[(o * np + p) * 9 + tap] = word;
            }
}

/* ---- the products ----------------------------------------------------------------------------------------- */

/* One product: out[o][q] (+)= sum over channel pairs p and taps of wt[o][p][tap] . src[p][q + tap offset]. */
typedef struct bprod {
    size_t planes, np;    /* output planes, channel pairs */
    size_t h, w, stride;  /* the plane; the words between paired planes */
    size_t qoff;          /* the grid lane src starts at: 0, or a band's first row's */
    const uint32_t *src;  /* (np, stride) */
    const uint32_t *wt;   /* (planes, np, 9) */
    float *dst;           /* (planes, h, w) */
    const float *bias;    /* (planes) or NULL: the start of each output */
    bool accumulate;      /* without a bias: dst += (else dst = 0 + ...) */
    bool round;           /* forward: dst rounded to bfloat16 as it is stored (conv3x3_bf16_forward_rounded) */
} bprod;

/* Where the vector of grid lanes [q, q + 16) lands in an output plane: its valid lanes (inside the grid and
 * not a row's spare lane x = w) go, in order, to the pixels from pos on. */
typedef struct lanes16 {
    size_t q, pos;
    uint32_t valid;
} lanes16;

/* Whether the vectors tile each row exactly (w a multiple of 16): vector v is then 16 pixels of one row, all
 * valid, loaded and stored as they are; else the vectors run through the grid 16 lanes at a time, the spare
 * lanes among them, each vector's valid lanes expanded in and compressed out. Row vectors leave no lane idle
 * (the grid leaves one in w + 1) and need no compress or masked store; an 8-wide plane stays on the grid, where
 * row vectors would leave half of every one idle. */
static bool row_vectors(size_t w) { return w % 16 == 0; }

/* The vectors of the grid. */
static size_t grid_vectors(size_t h, size_t w) { return row_vectors(w) ? h * (w / 16) : (h * (w + 1) + 15) / 16; }

static lanes16 lanes_at(size_t v, size_t h, size_t w) {
    const size_t wp = w + 1;
    if (row_vectors(w)) {
        const size_t y = v / (w / 16), x = v % (w / 16) * 16;
        return (lanes16){.q = y * wp + x, .pos = y * w + x, .valid = 0xFFFFu};
    }
    const size_t q0 = 16 * v, y = q0 / wp, x = q0 % wp, end = h * wp;
    uint32_t valid = end - q0 >= 16 ? 0xFFFFu : (1u << (end - q0)) - 1u;
    for (size_t i = w - x; i < 16; i += wp) valid &= ~(1u << i);
    return (lanes16){.q = q0, .pos = y * w + (x < w ? x : w), .valid = valid};
}

/* The start of an output lane: its bias, its current value, or zero. */
static float start_of(const bprod *p, size_t o, const float *at) {
    return p->bias ? p->bias[o] : p->accumulate ? *at : 0.0f;
}

/* Planes [o0, o0 + mr), grid vectors gv[0..nv), lane by lane. */
static void btile_portable(const bprod *p, size_t mr, size_t nv, size_t o0, const lanes16 *gv) {
    const size_t wp = p->w + 1, npix = p->h * p->w;
    for (size_t i = 0; i < mr; i++)
        for (size_t j = 0; j < nv; j++) {
            size_t rank = 0;
            for (size_t l = 0; l < 16; l++) {
                if (!(gv[j].valid >> l & 1)) continue;
                float *out = p->dst + (o0 + i) * npix + gv[j].pos + rank++;
                float acc = start_of(p, o0 + i, out);
                const uint32_t *wk = p->wt + (o0 + i) * p->np * 9;
                const uint32_t *row = p->src + gv[j].q - p->qoff + l;
                for (size_t c = 0; c < p->np; c++, wk += 9, row += p->stride)
                    for (size_t tap = 0; tap < 9; tap++) acc = dpbf16_lane(acc, wk[tap], row[tap / 3 * wp + tap % 3]);
                *out = p->round ? bf16_round(acc) : acc;
            }
        }
}

#ifdef SNUG_AVX512
/* The accumulators are named variables (an array gets spilled); mr and nv are constants at every call site.
 * The broadcast is spelled broadcastd of a cvtsi32, as in bgemm.c (clang 16 and 17 crash on a set1 fed to
 * vdpbf16ps). */
#define B_INIT1(I, J)                                                                                         \
    __m512 r##I##J = _mm512_setzero_ps();                                                                     \
    if (mr > I && nv > J) {                                                                                   \
        if (p->bias) r##I##J = _mm512_set1_ps(p->bias[o0 + I]);                                               \
        else if (p->accumulate)                                                                               \
            r##I##J = full[J] ? _mm512_loadu_ps(dst + I * npix + gv[J].pos)                                  \
                              : _mm512_maskz_expand_ps(valid[J],                                              \
                                                       _mm512_maskz_loadu_ps(run[J], dst + I * npix + gv[J].pos)); \
    }
#define B_INIT(I) B_INIT1(I, 0) B_INIT1(I, 1) B_INIT1(I, 2)
#define B_DOT(I, T)                                                                                           \
    if (mr > I) {                                                                                             \
        const __m512bh a = (__m512bh)_mm512_broadcastd_epi32(_mm_cvtsi32_si128((int)wk[(I) * wrs + (T)]));   \
        r##I##0 = _mm512_dpbf16_ps(r##I##0, a, b0);                                                           \
        if (nv > 1) r##I##1 = _mm512_dpbf16_ps(r##I##1, a, b1);                                               \
        if (nv > 2) r##I##2 = _mm512_dpbf16_ps(r##I##2, a, b2);                                               \
    }
#define B_TAP(OFF, T)                                                                                         \
    {                                                                                                         \
        /* chosen as integer vectors: clang has no ?: on vectors of __bf16 */                                   \
        const __m512i i0 = _mm512_loadu_si512(row0 + (OFF));                                                  \
        const __m512bh b0 = (__m512bh)i0;                                                                     \
        const __m512bh b1 = (__m512bh)(nv > 1 ? _mm512_loadu_si512(row1 + (OFF)) : i0);                      \
        const __m512bh b2 = (__m512bh)(nv > 2 ? _mm512_loadu_si512(row2 + (OFF)) : i0);                      \
        B_DOT(0, T) B_DOT(1, T) B_DOT(2, T) B_DOT(3, T) B_DOT(4, T) B_DOT(5, T) B_DOT(6, T) B_DOT(7, T)       \
    }
#define B_STORE1(I, J)                                                                                        \
    if (mr > I && nv > J) {                                                                                   \
        if (p->round) r##I##J = avx512_bf16_round(r##I##J);                                                   \
        if (full[J]) _mm512_storeu_ps(dst + I * npix + gv[J].pos, r##I##J);                                  \
        else _mm512_mask_storeu_ps(dst + I * npix + gv[J].pos, run[J], _mm512_maskz_compress_ps(valid[J], r##I##J)); \
    }
#define B_STORE(I) B_STORE1(I, 0) B_STORE1(I, 1) B_STORE1(I, 2)
#define B_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

static inline __attribute__((always_inline)) BF16 void btile(const bprod *p, size_t mr, size_t nv, size_t o0,
                                                              const lanes16 *gv) {
    const size_t wp = p->w + 1, npix = p->h * p->w, wrs = p->np * 9;
    __mmask16 valid[NV], run[NV];
    bool full[NV];
    for (size_t j = 0; j < NV; j++) {
        valid[j] = j < nv ? (__mmask16)gv[j].valid : 0;
        run[j] = (__mmask16)((1u << __builtin_popcount(valid[j])) - 1u);
        full[j] = valid[j] == 0xFFFF;
    }
    float *dst = p->dst + o0 * npix;
    B_ROWS(B_INIT)
    const uint32_t *wk = p->wt + o0 * wrs;
    /* each vector's grid lanes: consecutive, or (row_vectors) a row apart where a vector ends its row */
    const uint32_t *row0 = p->src + gv[0].q - p->qoff;
    const uint32_t *row1 = nv > 1 ? p->src + gv[1].q - p->qoff : row0;
    const uint32_t *row2 = nv > 2 ? p->src + gv[2].q - p->qoff : row0;
    for (size_t c = 0; c < p->np; c++, wk += 9, row0 += p->stride, row1 += p->stride, row2 += p->stride) {
        B_TAP(0, 0) B_TAP(1, 1) B_TAP(2, 2)
        B_TAP(wp, 3) B_TAP(wp + 1, 4) B_TAP(wp + 2, 5)
        B_TAP(2 * wp, 6) B_TAP(2 * wp + 1, 7) B_TAP(2 * wp + 2, 8)
    }
    B_ROWS(B_STORE)
}

#define BTILE_NV(R)                                                                                           \
    if (nv == 3) btile(p, R, 3, o0, gv);                                                                      \
    else if (nv == 2) btile(p, R, 2, o0, gv);                                                                 \
    else btile(p, R, 1, o0, gv);

/* Planes [o0, o0 + mr): a full tile, or the last planes as tiles of 4, 2 and 1. */
static BF16 void btile_bf16(const bprod *p, size_t mr, size_t nv, size_t o0, const lanes16 *gv) {
    if (mr == MR) {
        BTILE_NV(8)
        return;
    }
    if (mr & 4) {
        BTILE_NV(4)
        o0 += 4;
    }
    if (mr & 2) {
        BTILE_NV(2)
        o0 += 2;
    }
    if (mr & 1) {
        BTILE_NV(1)
    }
}
#endif

/* Part t of T of the tiles of grid blocks [qb0, qb1), f = grid block * plane blocks + plane block: the plane
 * blocks of one grid block run one after another while its rows sit in cache. */
static void bprod_run(const bprod *p, bool hw, size_t qb0, size_t qb1, size_t t, size_t T) {
    const size_t nq = grid_vectors(p->h, p->w), nob = (p->planes + MR - 1) / MR;
    size_t lo, hi, cur = SIZE_MAX, nv = 0;
    lanes16 gv[NV];
    part_range((qb1 - qb0) * nob, t, T, &lo, &hi);
    for (size_t f = lo; f < hi; f++) {
        const size_t qb = qb0 + f / nob, o0 = f % nob * MR, mr = min_size(MR, p->planes - o0);
        if (qb != cur) {
            cur = qb;
            nv = min_size(NV, nq - qb * NV);
            for (size_t j = 0; j < nv; j++) gv[j] = lanes_at(qb * NV + j, p->h, p->w);
        }
#ifdef SNUG_AVX512
        if (hw) {
            btile_bf16(p, mr, nv, o0, gv);
            continue;
        }
#endif
        btile_portable(p, mr, nv, o0, gv);
    }
}

#ifdef SNUG_AVX512
/* ---- the grid products on AMX tiles (conv3x3_amx.h) ------------------------------------------------------
 * A call covers two blocks of 16 planes by two vectors of grid lanes, or (wide: at most 16 planes) one block by
 * four, each block's C staged in 16 x 16 floats: started from the bias or the output's current values
 * (expanded to the vector's valid lanes), and its valid lanes compressed out into the planes after. */

/* Stage st of planes [o0, o0 + 16) (zero past the last) at vector gv's lanes. */
static BF16 void amx_stage_in(const bprod *p, float *st, size_t o0, const lanes16 *gv) {
    const size_t npix = p->h * p->w;
    const __mmask16 valid = (__mmask16)gv->valid, run = (__mmask16)((1u << __builtin_popcount(gv->valid)) - 1u);
    for (size_t r = 0; r < 16; r++) {
        const size_t o = o0 + r;
        __m512 v = _mm512_setzero_ps();
        if (o < p->planes && p->bias) v = _mm512_set1_ps(p->bias[o]);
        else if (o < p->planes) v = _mm512_maskz_expand_ps(valid, _mm512_maskz_loadu_ps(run, p->dst + o * npix + gv->pos));
        _mm512_storeu_ps(st + 16 * r, v);
    }
}

static BF16 void amx_stage_out(const bprod *p, const float *st, size_t o0, const lanes16 *gv) {
    const size_t npix = p->h * p->w;
    const __mmask16 valid = (__mmask16)gv->valid, run = (__mmask16)((1u << __builtin_popcount(gv->valid)) - 1u);
    for (size_t r = 0; r < 16 && o0 + r < p->planes; r++) {
        __m512 v = _mm512_loadu_ps(st + 16 * r);
        if (p->round) v = avx512_bf16_round(v);
        float *out = p->dst + (o0 + r) * npix + gv->pos;
        if (valid == 0xFFFF) _mm512_storeu_ps(out, v);
        else _mm512_mask_storeu_ps(out, run, _mm512_maskz_compress_ps(valid, v));
    }
}

/* bprod_run on AMX tiles: part t of T of the calls over grid blocks [qb0, qb1) (their vectors, in calls of 2 or
 * 4), f = vector block * plane blocks + plane block. */
static BF16 void bprod_run_amx(const bprod *p, size_t qb0, size_t qb1, size_t t, size_t T) {
    const size_t v0 = qb0 * NV, v1 = min_size(qb1 * NV, grid_vectors(p->h, p->w));
    const bool wide = p->planes <= 16, from_stage = p->bias || p->accumulate;
    const size_t vw = wide ? 4 : 2, npb = (p->planes + 31) / 32, plane_words = 9 * p->np;
    const conv3x3_amx_grid g = {.np = p->np, .stride = p->stride, .wp = p->w + 1};
    float stage[CONV3X3_AMX_STAGES * 256] __attribute__((aligned(64)));
    size_t lo, hi;
    part_range((v1 - v0 + vw - 1) / vw * npb, t, T, &lo, &hi);
    if (lo == hi) return;
    conv3x3_amx_begin_grid(p->np, wide);
    for (size_t f = lo; f < hi; f++) {
        const size_t va = v0 + f / npb * vw, nv = min_size(vw, v1 - va), o0 = f % npb * 32;
        const size_t nb = wide ? 1 : min_size(2, (p->planes - o0 + 15) / 16);
        lanes16 gv[4];
        const uint32_t *src[4];
        for (size_t j = 0; j < nv; j++) {
            gv[j] = lanes_at(va + j, p->h, p->w);
            src[j] = p->src + gv[j].q - p->qoff;
        }
        for (size_t b = 0; b < nb && from_stage; b++)
            for (size_t j = 0; j < nv; j++) amx_stage_in(p, stage + (b * vw + j) * 256, o0 + 16 * b, &gv[j]);
        conv3x3_amx_grid_block(&g, p->wt + o0 * plane_words, src, nb, nv, wide, stage, from_stage);
        for (size_t b = 0; b < nb; b++)
            for (size_t j = 0; j < nv; j++) amx_stage_out(p, stage + (b * vw + j) * 256, o0 + 16 * b, &gv[j]);
    }
    conv3x3_amx_end();
}
#endif

void conv3x3_bf16_weights(const conv3x3_shape *s, float *u, const float *w, bool dx, size_t t, size_t T) {
    const size_t planes = dx ? s->c : s->co, chans = dx ? s->co : s->c;
    if (kind_of(chans) == KIND_AMX) conv3x3_amx_pack_weights((uint32_t *)(void *)u, w, planes, chans, dx, t, T);
    else pack_weights((uint32_t *)(void *)u, w, planes, chans, dx, t, T);
}

/* Pair the source (split over the threads), then the tiles; band by band where the plane is banded. Every
 * output is computed whole within one band, so the bits are those of whole planes. */
static void conv3x3_bf16_run(const conv3x3_shape *s, bprod *p, conv3x3_bf16_src x, size_t chans, const float *u,
                             float *scratch, size_t t, size_t T) {
    const kernel_kind kind = kind_of(chans);
    const bool hw = kind != KIND_PORTABLE, band = banded(s->h, s->w);
    const size_t wp = s->w + 1, nq = grid_vectors(s->h, s->w), nqb = (nq + NV - 1) / NV;
    uint32_t *planes = (uint32_t *)(void *)scratch;
    p->np = pairs(chans);
    p->h = s->h;
    p->w = s->w;
    p->stride = plane_words(s->h, s->w);
    p->src = planes;
    p->wt = (const uint32_t *)(const void *)u;
    for (size_t qb0 = 0; qb0 < nqb; qb0 += band ? BAND_BLOCKS : nqb) {
        const size_t qb1 = band ? min_size(qb0 + BAND_BLOCKS, nqb) : nqb;
        /* from the row of the band's first lane to two rows past its last lane's (the taps reach 2 wp + 2) */
        const size_t last = lanes_at(min_size(qb1 * NV, nq) - 1, s->h, s->w).q + 15;
        const size_t r0 = lanes_at(qb0 * NV, s->h, s->w).q / wp, r1 = min_size((last + 2 * wp + 2) / wp + 1, s->h + 2);
        p->qoff = r0 * wp;
        pair_planes(planes, x, chans, s->h, s->w, r0, r1, p->stride, hw, t, T);
        part_barrier(T);
#ifdef SNUG_AVX512
        if (kind == KIND_AMX) bprod_run_amx(p, qb0, qb1, t, T);
        else
#endif
            bprod_run(p, hw, qb0, qb1, t, T);
        part_barrier(T); /* the next band (or sample) overwrites these planes */
    }
}

void conv3x3_bf16_forward(const conv3x3_shape *s, float *y, conv3x3_bf16_src x, const float *u, const float *b,
                          float *scratch, size_t t, size_t T) {
    bprod p = {.planes = s->co, .dst = y, .bias = b};
    conv3x3_bf16_run(s, &p, x, s->c, u, scratch, t, T);
}

void conv3x3_bf16_forward_rounded(const conv3x3_shape *s, float *y, conv3x3_bf16_src x, const float *u,
                                  const float *b, float *scratch, size_t t, size_t T) {
    bprod p = {.planes = s->co, .dst = y, .bias = b, .round = true};
    conv3x3_bf16_run(s, &p, x, s->c, u, scratch, t, T);
}

void conv3x3_bf16_backward_dx(const conv3x3_shape *s, float *dx, const float *dy, const float *u, float *scratch,
                              bool fresh, size_t t, size_t T) {
    bprod p = {.planes = s->c, .dst = dx, .accumulate = !fresh};
    conv3x3_bf16_run(s, &p, (conv3x3_bf16_src){.f = dy}, s->co, u, scratch, t, T);
}

/* ---- weight gradient: dW[o][k][tap] += sum over grid q of D[o][q] P[k][q + off(tap)] ----------------------
 * D is dy on the grid (zero at each row's spare lane), P the padded plane of x, off(tap) = kh wp + kw. The
 * pairs run along q: D's word j holds D[o][2j] and D[o][2j + 1]; for x, E's word (j, k) holds P[k][2j] and
 * P[k][2j + 1] and O's P[k][2j + 1] and P[k][2j + 2], so a tap with an even offset reads E at row j + off / 2
 * and one with an odd offset O at the same row. E and O hold 16 channels side by side (lanes along channels:
 * the transposed planes of the float32 kernel's small-plane form), so a tile is 3 output channels x 9 taps of
 * 16-channel vectors, each vdpbf16ps adding two pixels. The grid goes in bands of DW_BAND pairs: each band's
 * E, O and D are made, then every tile adds its band's sums into dW, band after band. A band makes its halo
 * too (the w + 3 rows of E and O the taps reach past it): 2048 pairs keep that to an eighth of a band on
 * unet's 256-wide planes (with 512 a third of the rows made would be halo), while E and O stay in L2.
 *
 * E and O are stored a block of 16 channels at a time (block kb's rows of 64 bytes one after another), and
 * the tiles of one block run one after another: a tile then streams whole cache lines of its block alone,
 * which the block's other tiles find in L2 (rows of all channels side by side made a tile of 64 channels read
 * a quarter of every line it fetched, over a band too large for L2). O is E shifted by one half, made from E
 * in registers rather than by pairing and transposing x a second time. */

#define DW_BAND ((size_t)2048)
#define MW 3
/* Halves of one of D's rows: a band's pairs, and 32 more so that rows are not 8 KiB apart (an AMX tile of 16
 * rows would map them all to one set of L1). */
#define D_ROW (2 * DW_BAND + 32)

/* A band's pairs as the products run them: whole blocks of 16 (the AMX tiles' depth; D is zero past the band,
 * E and O hold values the taps may reach). */
static size_t dw_pairs_run(size_t n) { return round_up(n, 16); }

/* The band's geometry: pairs [j0, j1) of the grid's nj; E and O rows (the taps reach wp + 1 rows further);
 * channels rounded up to the 16 lanes. */
typedef struct dw_band {
    size_t j0, j1, rows, cw;
} dw_band;

static size_t dw_grid_pairs(const conv3x3_shape *s) { return (s->h * (s->w + 1) + 1) / 2; }

static dw_band dw_band_at(const conv3x3_shape *s, size_t j0) {
    const size_t j1 = min_size(j0 + DW_BAND, dw_grid_pairs(s));
    return (dw_band){.j0 = j0, .j1 = j1, .rows = dw_pairs_run(j1 - j0) + s->w + 3, .cw = round_up(s->c, 16)};
}

/* Words of each part of a band's scratch: the band's planes of x (A: c rows of dw_plane_words, one word more
 * than E's rows so that O's last row has E's next), E and O (blocks of 16 channels, dw_plane_words rows of 16
 * words each), D (co rounded up to 16 rows of D_ROW halves). */
static size_t dw_rows_max(const conv3x3_shape *s) {
    return dw_pairs_run(min_size(DW_BAND, dw_grid_pairs(s))) + s->w + 3;
}
static size_t dw_plane_words(const conv3x3_shape *s) { return dw_rows_max(s) + 1; }

bool conv3x3_bf16_dw_scratch_floats(const conv3x3_shape *s, size_t *n) {
    size_t a, eo, d;
    const size_t rows = dw_plane_words(s);
    return size_mul(s->c, rows, &a) && size_mul(rows, round_up(s->c, 16), &eo) && size_mul(eo, 2, &eo) &&
           size_mul(round_up(s->co, 16), D_ROW / 2, &d) && size_add(a, eo, n) && size_add(*n, d, n);
}

/* Padded-plane value i of channel ch (zero on the padding) as bfloat16 bits, from either kind of source. */
static uint32_t padded_bits(conv3x3_bf16_src x, const conv3x3_shape *s, size_t ch, size_t i) {
    const size_t wp = s->w + 1, r = i / wp, col = i % wp;
    if (r == 0 || r > s->h || col == 0) return 0;
    return src_bits(x, s->c, ch, (ch * s->h + r - 1) * s->w + col - 1);
}

/* A band's halves [2 j0 + shift, ...) of one channel's padded plane: `rows` words, a zero past the plane. */
static void dw_plane_portable(uint16_t *dst, conv3x3_bf16_src x, const conv3x3_shape *s, size_t ch, size_t first,
                              size_t n) {
    const size_t end = (s->h + 2) * (s->w + 1);
    for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)(first + i < end ? padded_bits(x, s, ch, first + i) : 0);
}

/* Grid values [2 j0, 2 j1) of dy's plane o, zero at each row's spare lane and past the grid. */
static void dw_dy_portable(uint16_t *dst, const float *dy, const conv3x3_shape *s, size_t o, size_t first,
                           size_t n) {
    const size_t wp = s->w + 1;
    for (size_t i = 0; i < n; i++) {
        const size_t q = first + i, y = q / wp, col = q % wp;
        dst[i] = (uint16_t)(y < s->h && col < s->w ? dpbf16_of(dy[(o * s->h + y) * s->w + col]) : 0);
    }
}

#ifdef SNUG_AVX512
/* n values from src (floats rounded, or bfloat16 bits copied) as bfloat16 at dst. */
static inline __attribute__((always_inline)) BF16 void bf16_run(uint16_t *dst, conv3x3_bf16_src x, size_t at,
                                                                 size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = avx512_lanes(n - i);
        const __m256i v = x.f ? (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x.f + at + i))
                              : _mm256_maskz_loadu_epi16(m, x.h + at + i);
        _mm256_mask_storeu_epi16(dst + i, m, v);
    }
}

/* dw_plane_portable row run by row run: zero everything, then copy each plane row that falls in the range. */
static BF16 void dw_plane_bf16(uint16_t *dst, conv3x3_bf16_src x, const conv3x3_shape *s, size_t ch, size_t first,
                               size_t n) {
    const size_t wp = s->w + 1;
    memset(dst, 0, n * sizeof *dst);
    for (size_t r = first / wp > 0 ? first / wp : 1; r <= s->h && r * wp < first + n; r++) {
        const size_t lo = r * wp + 1 > first ? r * wp + 1 : first, hi = min_size(r * wp + 1 + s->w, first + n);
        if (lo < hi) bf16_run(dst + (lo - first), x, (ch * s->h + r - 1) * s->w + (lo - r * wp - 1), hi - lo);
    }
}

static BF16 void dw_dy_bf16(uint16_t *dst, const float *dy, const conv3x3_shape *s, size_t o, size_t first,
                            size_t n) {
    const size_t wp = s->w + 1;
    memset(dst, 0, n * sizeof *dst);
    for (size_t y = first / wp; y < s->h && y * wp < first + n; y++) {
        const size_t lo = y * wp > first ? y * wp : first, hi = min_size(y * wp + s->w, first + n);
        if (lo < hi) bf16_run(dst + (lo - first), (conv3x3_bf16_src){.f = dy}, (o * s->h + y) * s->w + lo - y * wp,
                              hi - lo);
    }
}

/* O's rows from E's (dw_band_transpose), a row of 16 words a vector. */
static BF16 void dw_odd_rows_bf16(uint32_t *o, const uint32_t *e, size_t rows) {
    for (size_t r = 0; r < rows; r++) {
        const __m512i lo = _mm512_loadu_si512(e + r * 16), hi = _mm512_loadu_si512(e + (r + 1) * 16);
        _mm512_storeu_si512(o + r * 16, _mm512_or_si512(_mm512_srli_epi32(lo, 16), _mm512_slli_epi32(hi, 16)));
    }
}
#endif

/* The word j of halves h (two bfloat16 side by side), read through memcpy: the halves were written as 16-bit
 * values, E and O by the transpose as floats. */
static inline uint32_t word_at(const void *h, size_t j) {
    uint32_t v;
    memcpy(&v, (const char *)h + 4 * j, sizeof v);
    return v;
}

/* One band's operands, as dw_band_run makes them. */
typedef struct wjob {
    const conv3x3_shape *s;
    dw_band b;
    const uint32_t *e, *o; /* (cw / 16, dw_plane_words, 16) */
    const uint16_t *d;     /* (co, D_ROW) halves */
    float *dw;
} wjob;

/* The E or O row pointer a tap starts from, in channel block kb. */
static const uint32_t *tap_base(const wjob *p, size_t tap, size_t kb) {
    const size_t off = tap / 3 * (p->s->w + 1) + tap % 3;
    return (off & 1 ? p->o : p->e) + (kb * dw_plane_words(p->s) + (off >> 1)) * 16;
}

/* Output channels [o0, o0 + mr) x channels [16 kb, 16 kb + 16) x 9 taps over the band, lane by lane. */
static void wtile_portable(const wjob *p, size_t o0, size_t mr, size_t kb) {
    const size_t c = p->s->c, n = p->b.j1 - p->b.j0;
    for (size_t i = 0; i < mr; i++)
        for (size_t tap = 0; tap < 9; tap++) {
            const uint32_t *base = tap_base(p, tap, kb);
            for (size_t l = 0; l < 16 && 16 * kb + l < c; l++) {
                float acc = 0.0f;
                for (size_t j = 0; j < n; j++)
                    acc = dpbf16_lane(acc, word_at(p->d + (o0 + i) * D_ROW, j), word_at(base + l, j * 16));
                p->dw[((o0 + i) * c + 16 * kb + l) * 9 + tap] += acc;
            }
        }
}

#ifdef SNUG_AVX512
/* Element e of a block of 16 channels' 9 taps in dW ((lane, tap): 9 lane + tap) at (tap, lane) in a tile's
 * buffer of its 9 vectors: where wb_add gathers it from. */
static const int32_t wb_index[9 * 16] = {
#define WB_I(E) ((E) % 9 * 16 + (E) / 9)
#define WB_I8(E) WB_I(E), WB_I(E + 1), WB_I(E + 2), WB_I(E + 3), WB_I(E + 4), WB_I(E + 5), WB_I(E + 6), WB_I(E + 7)
    WB_I8(0),  WB_I8(8),  WB_I8(16), WB_I8(24),  WB_I8(32),  WB_I8(40),  WB_I8(48),  WB_I8(56),  WB_I8(64),
    WB_I8(72), WB_I8(80), WB_I8(88), WB_I8(96), WB_I8(104), WB_I8(112), WB_I8(120), WB_I8(128), WB_I8(136),
#undef WB_I8
#undef WB_I
};

/* dw[9 l + tap] += acc[tap][l] for the kn lanes: the kn channels' 9 taps lie in 9 kn consecutive floats of dW,
 * added 16 at a time (each element once, as a lane-by-lane write-back would), not one scalar at a time. */
static inline __attribute__((always_inline)) BF16 void wb_add(float *dw, const float *acc, size_t kn) {
    const size_t n = 9 * kn;
    for (size_t v = 0; v < n; v += 16) {
        const __mmask16 m = avx512_lanes(n - v);
        const __m512i idx = _mm512_maskz_loadu_epi32(m, wb_index + v);
        const __m512 g = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, acc, 4);
        _mm512_mask_storeu_ps(dw + v, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dw + v), g));
    }
}

#define WB_INIT(I, T) __m512 s##I##T = _mm512_setzero_ps();
#define WB_TAPS(X, I) X(I, 0) X(I, 1) X(I, 2) X(I, 3) X(I, 4) X(I, 5) X(I, 6) X(I, 7) X(I, 8)
#define WB_ALL(X) WB_TAPS(X, 0) WB_TAPS(X, 1) WB_TAPS(X, 2)
#define WB_A(I)                                                                                               \
    const __m512bh a##I =                                                                                     \
        (__m512bh)_mm512_broadcastd_epi32(_mm_cvtsi32_si128(mr > I ? (int)word_at(d + I * D_ROW, j) : 0));
#define WB_DOT(I, T)                                                                                          \
    if (mr > I) s##I##T = _mm512_dpbf16_ps(s##I##T, a##I, b);
#define WB_TAP(T)                                                                                             \
    {                                                                                                         \
        __m512i bi = _mm512_loadu_si512(tb[T] + j * 16);                                                     \
        __asm__("" : "+v"(bi)); /* one load for the three rows (see conv3x3_direct.c's W_TAP) */              \
        const __m512bh b = (__m512bh)bi;                                                                      \
        WB_DOT(0, T) WB_DOT(1, T) WB_DOT(2, T)                                                                \
    }
#define WB_STORE(I, T)                                                                                        \
    if (mr > I) _mm512_storeu_ps(acc + (I * 9 + T) * 16, s##I##T);

static inline __attribute__((always_inline)) BF16 void wtile(const wjob *p, size_t mr, size_t o0, size_t kb) {
    const size_t c = p->s->c, n = p->b.j1 - p->b.j0, kn = min_size(16, c - 16 * kb);
    const uint32_t *tb[9];
    for (size_t tap = 0; tap < 9; tap++) tb[tap] = tap_base(p, tap, kb);
    const uint16_t *d = p->d + o0 * D_ROW;
    float *dw = p->dw + (o0 * c + 16 * kb) * 9, acc[MW * 9 * 16];
    /* dW's lines of the tile, fetched while the sums run: where dW outgrows L2 (unet's bottleneck, 2.4 MB) the
     * write-back would otherwise wait for each of them in turn */
    for (size_t i = 0; i < mr; i++)
        for (size_t e = 0; e < 9 * kn; e += 16) _mm_prefetch((const char *)(dw + i * c * 9 + e), _MM_HINT_T0);
    WB_ALL(WB_INIT)
    for (size_t j = 0; j < n; j++) {
        WB_A(0) WB_A(1) WB_A(2)
        WB_TAP(0) WB_TAP(1) WB_TAP(2) WB_TAP(3) WB_TAP(4) WB_TAP(5) WB_TAP(6) WB_TAP(7) WB_TAP(8)
    }
    WB_ALL(WB_STORE)
    for (size_t i = 0; i < mr; i++) wb_add(dw + i * c * 9, acc + i * 9 * 16, kn);
}

static BF16 void wtile_bf16(const wjob *p, size_t mr, size_t o0, size_t kb) {
    if (mr == 3) wtile(p, 3, o0, kb);
    else if (mr == 2) wtile(p, 2, o0, kb);
    else wtile(p, 1, o0, kb);
}

/* Output channels [o0, o0 + 16) (rows of D past co are zero) x channels [16 kb, 16 kb + 16) x 9 taps over the
 * band on AMX tiles (conv3x3_amx_dw_block), added into dW as wtile's are. */
static BF16 void wtile_amx(const wjob *p, size_t o0, size_t kb) {
    const size_t c = p->s->c, kn = min_size(16, c - 16 * kb), mr = min_size(16, p->s->co - o0);
    const uint32_t *tb[9];
    for (size_t tap = 0; tap < 9; tap++) tb[tap] = tap_base(p, tap, kb);
    float acc[16 * 9 * 16] __attribute__((aligned(64)));
    conv3x3_amx_dw_block((const uint32_t *)(const void *)(p->d + o0 * D_ROW), D_ROW / 2, tb,
                         dw_pairs_run(p->b.j1 - p->b.j0), acc);
    float *dw = p->dw + (o0 * c + 16 * kb) * 9;
    for (size_t i = 0; i < mr; i++) wb_add(dw + i * c * 9, acc + i * 9 * 16, kn);
}
#endif

/* x's band as A (its padded planes from half 2 j0, one word past the band's rows) and dy's band as D, part t
 * of T of the channels. */
static void dw_band_operands(const conv3x3_shape *s, const dw_band *b, uint16_t *a, uint16_t *d, const float *dy,
                             conv3x3_bf16_src x, bool hw, size_t t, size_t T) {
    const size_t plane = 2 * dw_plane_words(s), n = 2 * (b->rows + 1);
    size_t lo, hi;
    part_range(s->c, t, T, &lo, &hi);
    for (size_t ch = lo; ch < hi; ch++) {
#ifdef SNUG_AVX512
        if (hw) {
            dw_plane_bf16(a + ch * plane, x, s, ch, 2 * b->j0, n);
            continue;
        }
#endif
        dw_plane_portable(a + ch * plane, x, s, ch, 2 * b->j0, n);
    }
    part_range(s->co, t, T, &lo, &hi);
    for (size_t o = lo; o < hi; o++) {
#ifdef SNUG_AVX512
        if (hw) {
            dw_dy_bf16(d + o * D_ROW, dy, s, o, 2 * b->j0, 2 * (b->j1 - b->j0));
            continue;
        }
#endif
        dw_dy_portable(d + o * D_ROW, dy, s, o, 2 * b->j0, 2 * (b->j1 - b->j0));
    }
    /* zero past the band to the pairs the products run, and in the rows past co to 16 (the AMX tiles') */
    const size_t made = 2 * (b->j1 - b->j0), run = 2 * dw_pairs_run(b->j1 - b->j0);
    for (size_t o = lo; o < hi; o++) memset(d + o * D_ROW + made, 0, (run - made) * sizeof *d);
    if (t + 1 == T)
        for (size_t o = s->co; o < round_up(s->co, 16); o++) memset(d + o * D_ROW, 0, run * sizeof *d);
}

/* E from A: blocks of 16 channels transposed (part t of T of the blocks), the lanes past the last channel
 * zero; then O, each word the high half of E's word and the low half of the next row's. */
static void dw_band_transpose(const conv3x3_shape *s, const dw_band *b, const uint16_t *a, uint32_t *e, uint32_t *o,
                              bool hw, size_t t, size_t T) {
    const size_t words = dw_plane_words(s), rows = b->rows;
    size_t lo, hi;
    part_range(b->cw / 16, t, T, &lo, &hi);
    for (size_t kb = lo; kb < hi; kb++) {
        const size_t kn = min_size(16, s->c - 16 * kb);
        uint32_t *eb = e + kb * words * 16, *ob = o + kb * words * 16;
        transpose_floats((float *)(void *)eb, 16, (const float *)(const void *)(a + 16 * kb * 2 * words), words, kn,
                         rows + 1);
        for (size_t r = 0; kn < 16 && r <= rows; r++) memset(eb + r * 16 + kn, 0, (16 - kn) * sizeof *eb);
#ifdef SNUG_AVX512
        if (hw) {
            dw_odd_rows_bf16(ob, eb, rows);
            continue;
        }
#endif
        for (size_t i = 0; i < rows * 16; i++) ob[i] = eb[i] >> 16 | eb[i + 16] << 16;
    }
}

void conv3x3_bf16_backward_dw(const conv3x3_shape *s, float *dw, const float *dy, conv3x3_bf16_src x, float *scratch,
                              size_t t, size_t T) {
    const kernel_kind kind = kind_of(0);
    const bool hw = kind != KIND_PORTABLE;
    /* output blocks: MW channels a register tile, 16 an AMX tile */
    const size_t mw = kind == KIND_AMX ? 16 : MW;
    const size_t words = dw_plane_words(s), cw = round_up(s->c, 16), nob = (s->co + mw - 1) / mw, nkb = cw / 16;
    uint16_t *a = (uint16_t *)(void *)scratch;
    uint32_t *e = (uint32_t *)(void *)(a + s->c * 2 * words), *o = e + words * cw;
    uint16_t *d = (uint16_t *)(void *)(o + words * cw);
    for (size_t j0 = 0; j0 < dw_grid_pairs(s); j0 += DW_BAND) {
        const wjob p = {.s = s, .b = dw_band_at(s, j0), .e = e, .o = o, .d = d, .dw = dw};
        dw_band_operands(s, &p.b, a, d, dy, x, hw, t, T);
        part_barrier(T);
        dw_band_transpose(s, &p.b, a, e, o, hw, t, T);
        part_barrier(T);
        size_t lo, hi;
        part_range(nob * nkb, t, T, &lo, &hi);
#ifdef SNUG_AVX512
        if (kind == KIND_AMX && lo < hi) {
            conv3x3_amx_begin_dw();
            for (size_t f = lo; f < hi; f++) wtile_amx(&p, f % nob * mw, f / nob);
            conv3x3_amx_end();
            lo = hi;
        }
#endif
        for (size_t f = lo; f < hi; f++) { /* f = channel block * output blocks + output block */
            const size_t o0 = f % nob * MW, kb = f / nob, mr = min_size(MW, s->co - o0);
#ifdef SNUG_AVX512
            if (hw) {
                wtile_bf16(&p, mr, o0, kb);
                continue;
            }
#endif
            wtile_portable(&p, o0, mr, kb);
        }
        part_barrier(T); /* the next band (or sample) overwrites the operands */
    }
}

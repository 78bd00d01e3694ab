/* conv3x3_bf16 (conv3x3_bf16.h): paired padded planes in the scratch, register tiles of vdpbf16ps over them.
 * The AVX512_BF16 code is compiled through a function attribute (the build has no -march) and used only where
 * the CPU has it; the pairing, the weights, the split between threads and a plain-C twin of the tile run on
 * every CPU. */
#include "kernels/conv3x3_bf16.h"

#include "core/checked.h"
#include "kernels/avx512.h"
#include "kernels/dpbf16_lane.h"
#include "kernels/isa.h"

/* Output planes of one register tile, and its 16-lane vectors along the grid (24 accumulators). */
#define MR 8
#define NV 3

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t pairs(size_t n) { return (n + 1) / 2; }

/* Set before any convolution runs (tests), read by every thread afterwards. */
static bool force_portable;

void conv3x3_bf16_force_portable(bool on) { force_portable = on; }

static bool hardware(void) { return !force_portable && kernel_isa_now() >= KERNEL_ISA_AVX512_BF16; }

bool conv3x3_bf16_in_use(void) { return force_portable || kernel_isa_now() >= KERNEL_ISA_AVX512_BF16; }

/* Words of one paired plane: the float32 kernel's padded plane (conv3x3_direct.c), whose last vector reads up
 * to (h + 2)(w + 1) + 16. */
static size_t plane_words(size_t h, size_t w) { return round_up((h + 2) * (w + 1) + 17, 16); }

bool conv3x3_bf16_scratch_floats(const conv3x3_shape *s, size_t *n) {
    size_t plane;
    const size_t most = pairs(s->c > s->co ? s->c : s->co);
    return size_add(s->h, 2, &plane) && size_mul(plane, s->w + 1, &plane) && size_add(plane, 17 + 15, &plane) &&
           size_mul(plane / 16 * 16, most, n); /* plane_words, checked; a word is a float's bytes */
}

bool conv3x3_bf16_weights_floats(const conv3x3_shape *s, bool dx, size_t *n) {
    return size_mul(dx ? s->c : s->co, pairs(dx ? s->co : s->c), n) && size_mul(*n, 9, n);
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
#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* 16 words from the bfloat16 of lo (low halves) and hi (high halves): vcvtne2ps2bf16 writes hi's 16 after lo's,
 * the permute interleaves them (word d takes halves d and 16 + d). */
static inline __attribute__((always_inline)) BF16 __m512i pair_floats(__m512 lo, __m512 hi) {
    uint16_t idx[32];
    for (unsigned d = 0; d < 16; d++) {
        idx[2 * d] = (uint16_t)d;
        idx[2 * d + 1] = (uint16_t)(d + 16);
    }
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(idx), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

static BF16 void pair_row_bf16(uint32_t *dst, conv3x3_bf16_src x, size_t n, size_t p, size_t h, size_t w,
                               size_t r) {
    dst[0] = 0;
    const bool second = 2 * p + 1 < n, inside = r > 0 && r <= h;
    const size_t base0 = inside ? (2 * p * h + r - 1) * w : 0, base1 = base0 + h * w;
    for (size_t i = 0; i < w; i += 16) {
        const __mmask16 m = avx512_lanes(w - i), m1 = second && inside ? m : 0;
        __m512i v;
        if (!inside) v = _mm512_setzero_si512();
        else if (x.f)
            v = pair_floats(_mm512_maskz_loadu_ps(m, x.f + base0 + i), _mm512_maskz_loadu_ps(m1, x.f + base1 + i));
        else
            v = _mm512_or_si512(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x.h + base0 + i)),
                                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, x.h + base1 + i)),
                                                  16));
        _mm512_mask_storeu_epi32(dst + 1 + i, m, v);
    }
}
#endif

/* The paired padded planes of part t of T of the pairs of n channels, `stride` words apart. */
static void pair_planes(uint32_t *dst, conv3x3_bf16_src x, size_t n, size_t h, size_t w, size_t stride, bool hw,
                        size_t t, size_t T) {
    const size_t wp = w + 1;
    size_t lo, hi;
    part_range(pairs(n), t, T, &lo, &hi);
    for (size_t p = lo; p < hi; p++) {
        uint32_t *d = dst + p * stride;
        for (size_t r = 0; r < h + 2; r++) {
#ifdef SNUG_AVX512
            if (hw) {
                pair_row_bf16(d + r * wp, x, n, p, h, w, r);
                continue;
            }
#endif
            (void)hw;
            pair_row_portable(d + r * wp, x, n, p, h, w, r);
        }
        for (size_t i = (h + 2) * wp; i < stride; i++) d[i] = 0;
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
    const uint32_t *src;  /* (np, stride) */
    const uint32_t *wt;   /* (planes, np, 9) */
    float *dst;           /* (planes, h, w) */
    const float *bias;    /* (planes) or NULL: the start of each output */
    bool accumulate;      /* without a bias: dst += (else dst = 0 + ...) */
} bprod;

/* Where the vector of grid lanes [q0, q0 + 16) lands in an output plane: its valid lanes (inside the grid and
 * not a row's spare lane x = w) go, in order, to the pixels from pos on. */
typedef struct lanes16 {
    size_t pos;
    uint32_t valid;
} lanes16;

static lanes16 lanes_at(size_t q0, size_t h, size_t w) {
    const size_t wp = w + 1, y = q0 / wp, x = q0 % wp, end = h * wp;
    uint32_t valid = end - q0 >= 16 ? 0xFFFFu : (1u << (end - q0)) - 1u;
    for (size_t i = w - x; i < 16; i += wp) valid &= ~(1u << i);
    return (lanes16){.pos = y * w + (x < w ? x : w), .valid = valid};
}

/* The start of an output lane: its bias, its current value, or zero. */
static float start_of(const bprod *p, size_t o, const float *at) {
    return p->bias ? p->bias[o] : p->accumulate ? *at : 0.0f;
}

/* Planes [o0, o0 + mr), grid vectors gv[0..nv) from q0, lane by lane. */
static void btile_portable(const bprod *p, size_t mr, size_t nv, size_t o0, size_t q0, const lanes16 *gv) {
    const size_t wp = p->w + 1, npix = p->h * p->w;
    for (size_t i = 0; i < mr; i++)
        for (size_t j = 0; j < nv; j++) {
            size_t rank = 0;
            for (size_t l = 0; l < 16; l++) {
                if (!(gv[j].valid >> l & 1)) continue;
                float *out = p->dst + (o0 + i) * npix + gv[j].pos + rank++;
                float acc = start_of(p, o0 + i, out);
                const uint32_t *wk = p->wt + (o0 + i) * p->np * 9;
                const uint32_t *row = p->src + q0 + 16 * j + l;
                for (size_t c = 0; c < p->np; c++, wk += 9, row += p->stride)
                    for (size_t tap = 0; tap < 9; tap++) acc = dpbf16_lane(acc, wk[tap], row[tap / 3 * wp + tap % 3]);
                *out = acc;
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
            r##I##J = _mm512_maskz_expand_ps(valid[J], _mm512_maskz_loadu_ps(run[J], dst + I * npix + gv[J].pos)); \
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
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(row + (OFF));                                       \
        const __m512bh b1 = nv > 1 ? (__m512bh)_mm512_loadu_si512(row + (OFF) + 16) : b0;                     \
        const __m512bh b2 = nv > 2 ? (__m512bh)_mm512_loadu_si512(row + (OFF) + 32) : b0;                     \
        B_DOT(0, T) B_DOT(1, T) B_DOT(2, T) B_DOT(3, T) B_DOT(4, T) B_DOT(5, T) B_DOT(6, T) B_DOT(7, T)       \
    }
#define B_STORE1(I, J)                                                                                        \
    if (mr > I && nv > J)                                                                                     \
        _mm512_mask_storeu_ps(dst + I * npix + gv[J].pos, run[J], _mm512_maskz_compress_ps(valid[J], r##I##J));
#define B_STORE(I) B_STORE1(I, 0) B_STORE1(I, 1) B_STORE1(I, 2)
#define B_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

static inline __attribute__((always_inline)) BF16 void btile(const bprod *p, size_t mr, size_t nv, size_t o0,
                                                              size_t q0, const lanes16 *gv) {
    const size_t wp = p->w + 1, npix = p->h * p->w, wrs = p->np * 9;
    __mmask16 valid[NV], run[NV];
    for (size_t j = 0; j < NV; j++) {
        valid[j] = j < nv ? (__mmask16)gv[j].valid : 0;
        run[j] = (__mmask16)((1u << __builtin_popcount(valid[j])) - 1u);
    }
    float *dst = p->dst + o0 * npix;
    B_ROWS(B_INIT)
    const uint32_t *wk = p->wt + o0 * wrs;
    const uint32_t *row = p->src + q0;
    for (size_t c = 0; c < p->np; c++, wk += 9, row += p->stride) {
        B_TAP(0, 0) B_TAP(1, 1) B_TAP(2, 2)
        B_TAP(wp, 3) B_TAP(wp + 1, 4) B_TAP(wp + 2, 5)
        B_TAP(2 * wp, 6) B_TAP(2 * wp + 1, 7) B_TAP(2 * wp + 2, 8)
    }
    B_ROWS(B_STORE)
}

#define BTILE_NV(R)                                                                                           \
    if (nv == 3) btile(p, R, 3, o0, q0, gv);                                                                  \
    else if (nv == 2) btile(p, R, 2, o0, q0, gv);                                                             \
    else btile(p, R, 1, o0, q0, gv);

/* Planes [o0, o0 + mr): a full tile, or the last planes as tiles of 4, 2 and 1. */
static BF16 void btile_bf16(const bprod *p, size_t mr, size_t nv, size_t o0, size_t q0, const lanes16 *gv) {
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

/* Part t of T of the tiles, f = grid block * plane blocks + plane block: the plane blocks of one grid block run
 * one after another while its rows sit in cache. */
static void bprod_run(const bprod *p, bool hw, size_t t, size_t T) {
    const size_t nq = (p->h * (p->w + 1) + 15) / 16, nqb = (nq + NV - 1) / NV, nob = (p->planes + MR - 1) / MR;
    size_t lo, hi, cur = SIZE_MAX, nv = 0;
    lanes16 gv[NV];
    part_range(nqb * nob, t, T, &lo, &hi);
    for (size_t f = lo; f < hi; f++) {
        const size_t qb = f / nob, o0 = f % nob * MR, q0 = qb * NV * 16, mr = min_size(MR, p->planes - o0);
        if (qb != cur) {
            cur = qb;
            nv = min_size(NV, nq - qb * NV);
            for (size_t j = 0; j < nv; j++) gv[j] = lanes_at(q0 + 16 * j, p->h, p->w);
        }
#ifdef SNUG_AVX512
        if (hw) {
            btile_bf16(p, mr, nv, o0, q0, gv);
            continue;
        }
#endif
        btile_portable(p, mr, nv, o0, q0, gv);
    }
}

void conv3x3_bf16_weights(const conv3x3_shape *s, float *u, const float *w, bool dx, size_t t, size_t T) {
    pack_weights((uint32_t *)(void *)u, w, dx ? s->c : s->co, dx ? s->co : s->c, dx, t, T);
}

/* Pair the source (split over the threads), then the tiles. */
static void conv3x3_bf16_run(const conv3x3_shape *s, bprod *p, conv3x3_bf16_src x, size_t chans, const float *u,
                             float *scratch, size_t t, size_t T) {
    const bool hw = hardware();
    uint32_t *planes = (uint32_t *)(void *)scratch;
    p->np = pairs(chans);
    p->h = s->h;
    p->w = s->w;
    p->stride = plane_words(s->h, s->w);
    p->src = planes;
    p->wt = (const uint32_t *)(const void *)u;
    pair_planes(planes, x, chans, s->h, s->w, p->stride, hw, t, T);
    part_barrier(T);
    bprod_run(p, hw, t, T);
    part_barrier(T); /* the next sample's pairing overwrites these planes */
}

void conv3x3_bf16_forward(const conv3x3_shape *s, float *y, conv3x3_bf16_src x, const float *u, const float *b,
                          float *scratch, size_t t, size_t T) {
    bprod p = {.planes = s->co, .dst = y, .bias = b};
    conv3x3_bf16_run(s, &p, x, s->c, u, scratch, t, T);
}

void conv3x3_bf16_backward_dx(const conv3x3_shape *s, float *dx, const float *dy, const float *u, float *scratch,
                              size_t t, size_t T) {
    bprod p = {.planes = s->c, .dst = dx, .accumulate = true};
    conv3x3_bf16_run(s, &p, (conv3x3_bf16_src){.f = dy}, s->co, u, scratch, t, T);
}

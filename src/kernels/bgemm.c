/* bgemm (bgemm.h): blocks of A and B staged as float32 in the caller's workspace (the transposes sgemm's
 * packing uses), merged into bf16 pairs along K, an 8 x 32 register tile of vdpbf16ps over the pairs, threads
 * over disjoint parts of C. The AVX512_BF16 code is compiled through a function attribute (the build has no
 * -march) and used only where the CPU has it; everything else (staging, blocking, threading, and a plain-C
 * twin of the two instruction-level steps, the merge into pairs and the tile) runs on every CPU. */
#include "kernels/bgemm.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "core/parallel.h"
#include "kernels/avx512.h"
#include "kernels/bf16.h"
#include "kernels/bgemm_amx.h"
#include "kernels/dpbf16_lane.h"
#include "kernels/isa.h"
#include "kernels/transpose.h"

/* The register tile: MR rows (a packed strip of SR = MR rows) by NR columns (two vectors of 16 lanes), 16
 * accumulators, as sgemm's. */
#define MR 8
#define SR 8
#define NR 32
/* Cache blocks in k (KC, even, so that a block boundary never splits a pair) and rows and columns. The packed
 * blocks take the bytes of sgemm's at twice its depth: an A block (MC x KC bf16, 128 KiB) stays in L2 while the
 * B panels (KC x NR bf16, 32 KiB each) stream through L1. sgemm's footprint is a starting point, not a
 * measurement on a BF16 CPU. */
#define KC 512
#define MC 128
#define NC 512
/* run_part_panels_amx's rows and columns of C at a time and the most blocks of K it packs A for at once, and
 * tiles_amx's pairs of k per pass over a block's rows (see there). */
#define NC_AMX 256
#define MC_AMX 256
#define AMX_CHUNK 256
#define SUPER_BLOCKS 8
/* The k (even, so that no pair is split) that pack_a merges across all strips of a block at a time. */
#define A_K_STEP 16

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }
static size_t round_up(size_t a, size_t to) { return (a + to - 1) / to * to; }

/* The depth of K's blocks: at most KC, as even as the fewest blocks allow (no short remainder block, as in
 * sgemm), and even, so that every pair of k lies in one block; only the last block can be odd (an odd K),
 * its last pair then padded with a zero. On AMX a multiple of a tile's 32 k, so that only the last block is
 * padded to a tile's depth. */
static size_t k_block(size_t K, bool amx) {
    const size_t blocks = (K + KC - 1) / KC;
    return round_up((K + blocks - 1) / blocks, amx ? 2 * BGEMM_AMX_PAIRS : 2);
}

/* The pair words a packed row of A or a panel's column holds for kc values of k: on AMX padded with zeros to a
 * tile's depth. */
static size_t stored_pairs(size_t kc, bool amx) {
    const size_t kp = (kc + 1) / 2;
    return amx ? round_up(kp, BGEMM_AMX_PAIRS) : kp;
}

/* Set before any product runs (tests), read by every thread afterwards. */
static bool force_portable;

void bgemm_force_portable(bool on) { force_portable = on; }

/* The packing's word permutes need AVX512BW, which every CPU with AVX512_BF16 has (kernel_isa asks anyway). */
bool bgemm_enabled(void) { return kernel_isa_now() >= KERNEL_ISA_AVX512_BF16; }

/* Whether products run through AVX512_BF16 now (else the portable twin), and through AMX tiles. */
static bool fast_path(void) { return !force_portable && bgemm_enabled(); }
static bool amx_path(void) { return fast_path() && kernel_isa_now() >= KERNEL_ISA_AMX_BF16; }

/* The rows an A block is packed in: strips of SR rows, or on AMX whole 16-row tiles of a 32-row block. */
static size_t a_rows(size_t rows, bool amx) { return round_up(rows, amx ? BGEMM_AMX_PAIRS : SR); }

/* The workspace of one part of C: its A block and B block packed (pairs, one float's bytes each) and the
 * float32 staging of either operand's block before it is merged into pairs. On AMX the A block has room for
 * MC_AMX rows, and run_part_panels_amx uses all of it (B's panels need none) for A over several blocks of K. */
static size_t part_floats(size_t M, size_t N, size_t K, bool amx) {
    const size_t kc = min_size(K, KC), kp = stored_pairs(kc, amx);
    const size_t ma = min_size(a_rows(M, amx), amx ? MC_AMX : MC), nb = min_size(round_up(N, NR), NC);
    /* on AMX the stage holds the block's rows and, after them, its strips (pack_a_rows) */
    const size_t stage = amx ? max_size(2 * ma * kp, kc * NR) : max_size(ma * kc, kc * NR);
    return ma * kp + kp * nb + stage;
}

size_t bgemm_workspace_floats(size_t M, size_t N, size_t K, int threads) {
    return (size_t)(threads > 1 ? threads : 1) * part_floats(M, N, K, amx_path());
}

/* ---- the portable twin of the two instruction-level steps -------------------------------------------------------- */

/* Pairs of consecutive rows of src (`rows` rows, ld floats apart, `cols` of them read) merged into rows of w
 * pairs: dst[q * w + t] holds the bf16 of src[2q * ld + t] in its low half and of src[(2q + 1) * ld + t] in
 * its high half; zero for t >= cols and for the row past an odd count. */
static void merge_portable(uint32_t *dst, const float *src, size_t ld, size_t w, size_t cols, size_t rows) {
    for (size_t q = 0; 2 * q < rows; q++)
        for (size_t t = 0; t < w; t++) {
            const uint32_t lo = t < cols ? dpbf16_of(src[2 * q * ld + t]) : 0;
            const uint32_t hi = t < cols && 2 * q + 1 < rows ? dpbf16_of(src[(2 * q + 1) * ld + t]) : 0;
            dst[q * w + t] = lo | hi << 16;
        }
}

/* kc consecutive floats (one column of a B stored by columns) as (kc + 1) / 2 pair words, the even k in the
 * low half, zero past kc; written through memcpy because the words lie in float storage (the stage). */
static void column_pairs_portable(float *words, const float *src, size_t kc) {
    for (size_t q = 0; 2 * q < kc; q++) {
        const uint32_t w = dpbf16_of(src[2 * q]) | (2 * q + 1 < kc ? dpbf16_of(src[2 * q + 1]) : 0) << 16;
        memcpy(words + q, &w, sizeof w);
    }
}

/* How a tile starts: from zero, from C, or from its columns' biases. */
enum { START_ZERO, START_C, START_BIAS };

/* C rows [0, mr), columns [0, nr) of one tile, over kp pairs of the packed A (stride SR) and B (stride NR). */
static void tile_portable(size_t kp, const uint32_t *a, const uint32_t *b, float *c, size_t ldc, size_t mr,
                          size_t nr, int start, const float *bias) {
    for (size_t i = 0; i < mr; i++)
        for (size_t j = 0; j < nr; j++) {
            float acc = start == START_C ? c[i * ldc + j] : start == START_BIAS ? bias[j] : 0.0f;
            for (size_t q = 0; q < kp; q++) acc = dpbf16_lane(acc, a[q * SR + i], b[q * NR + j]);
            c[i * ldc + j] = acc;
        }
}

/* ---- the same two steps in AVX512_BF16 --------------------------------------------------------------------------- */

#ifdef SNUG_AVX512
#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* The word permutes that interleave vcvtne2ps2bf16's output (the 16 bf16 of its second operand, then the 16 of
 * its first) into pairs. Rows of 16 (a B panel's half rows): pair d takes words d and 16 + d. Strips of 8 rows
 * (two pairs of A rows per vector): pair d of the 16 takes words 16 (d / 8) + d % 8 and that + 8. */
static inline __attribute__((always_inline)) BF16 __m512i pair_words(size_t row_len) {
    uint16_t idx[32];
    for (size_t d = 0; d < 16; d++) {
        const size_t lo = row_len == 16 ? d : 16 * (d / 8) + d % 8;
        idx[2 * d] = (uint16_t)lo;
        idx[2 * d + 1] = (uint16_t)(lo + row_len);
    }
    return _mm512_loadu_si512(idx);
}

/* The 32 floats of lo (words 0-15 after the conversion) and hi (16-31), rounded to bf16 and permuted by idx. */
static inline __attribute__((always_inline)) BF16 __m512i to_pairs(__m512 lo, __m512 hi, __m512i idx) {
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* merge_portable for w = NR (a B panel): each pair of rows is 32 pairs, two vectors. */
static BF16 void merge_panel_bf16(uint32_t *dst, const float *src, size_t ld, size_t cols, size_t rows) {
    const __m512i idx = pair_words(16);
    const __mmask16 m[2] = {avx512_lanes(cols), avx512_lanes(cols > 16 ? cols - 16 : 0)};
    for (size_t q = 0; 2 * q < rows; q++) {
        const float *lo = src + 2 * q * ld;
        const bool odd_row = 2 * q + 1 < rows;
        for (size_t h = 0; h < NR; h += 16) {
            const __mmask16 mh = m[h / 16];
            const __m512 hi = odd_row ? _mm512_maskz_loadu_ps(mh, lo + ld + h) : _mm512_setzero_ps();
            _mm512_storeu_si512(dst + q * NR + h, to_pairs(_mm512_maskz_loadu_ps(mh, lo + h), hi, idx));
        }
    }
}

/* column_pairs_portable: vcvtne2ps2bf16 turns 32 consecutive floats into 16 pair words in order. */
static BF16 void column_pairs_bf16(float *words, const float *src, size_t kc) {
    size_t k = 0;
    for (; k + 32 <= kc; k += 32) /* whole vectors first: no masks to build */
        _mm512_storeu_si512(words + k / 2,
                            (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + k + 16), _mm512_loadu_ps(src + k)));
    for (; k < kc; k += 32) {
        const size_t n = kc - k < 32 ? kc - k : 32;
        const __m512 lo = _mm512_maskz_loadu_ps(avx512_lanes(n), src + k);
        const __m512 hi = _mm512_maskz_loadu_ps(avx512_lanes(n > 16 ? n - 16 : 0), src + k + 16);
        _mm512_mask_storeu_epi32(words + k / 2, avx512_lanes((n + 1) / 2), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}

/* row_to_tiles's float rows: 32 floats (masked past kc) to a tile row's 16 pair words, as column_pairs_bf16. */
static BF16 void row_to_tiles_bf16(uint32_t *dst, const float *src, size_t kc, size_t lda) {
    _Static_assert(BGEMM_AMX_PAIRS == 16, "a tile row is one vector of pair words");
    size_t g = 0;
    for (; 2 * g + 32 <= kc; g += 16)
        _mm512_storeu_si512(dst + g * 16, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 2 * g + 16),
                                                                        _mm512_loadu_ps(src + 2 * g)));
    for (; g < lda; g += 16) {
        const size_t n = kc > 2 * g ? kc - 2 * g : 0;
        const __m512 lo = _mm512_maskz_loadu_ps(avx512_lanes(n < 16 ? n : 16), src + 2 * g);
        const __m512 hi = _mm512_maskz_loadu_ps(avx512_lanes(n > 16 ? n - 16 : 0), src + 2 * g + 16);
        _mm512_storeu_si512(dst + g * 16, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}

/* Rows r and r + 1 of an A strip's source (8 lanes each, `lanes` of them read) as one vector; the second zero
 * where it lies past the last row. */
static inline __attribute__((always_inline)) BF16 __m512 strip_rows(const float *r, size_t ld, __mmask8 lanes,
                                                                     bool second) {
    const __m256 a = _mm256_maskz_loadu_ps(lanes, r);
    const __m256 b = second ? _mm256_maskz_loadu_ps(lanes, r + ld) : _mm256_setzero_ps();
    return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

/* merge_portable for w = SR (an A strip): a vector holds one pair of rows, so two pairs of rows make 16
 * pairs, then a last pair alone, its odd row zero when the count is odd. */
static BF16 void merge_strip_bf16(uint32_t *dst, const float *src, size_t ld, size_t cols, size_t rows) {
    _Static_assert(SR == 8, "a vector holds one pair of 8-row strip rows");
    const __m512i idx = pair_words(8);
    const __mmask8 lanes = (__mmask8)avx512_lanes(cols);
    size_t q = 0;
    for (; 2 * q + 4 <= rows; q += 2) {
        const float *r = src + 2 * q * ld;
        _mm512_storeu_si512(dst + q * SR, to_pairs(strip_rows(r, ld, lanes, true),
                                                   strip_rows(r + 2 * ld, ld, lanes, true), idx));
    }
    for (; 2 * q < rows; q++) {
        const __m512 v = strip_rows(src + 2 * q * ld, ld, lanes, 2 * q + 1 < rows);
        _mm512_mask_storeu_epi32(dst + q * SR, 0x00FF, to_pairs(v, _mm512_setzero_ps(), idx));
    }
}

/* The tile's accumulators are named variables (an array gets spilled to the stack); rows >= mr are computed
 * from A's zero padding and never loaded or stored. A's pair for row I is broadcast to every lane, each lane
 * of B holds its column's pair: lane j gains A(I, 2q + 1) B(2q + 1, j), then A(I, 2q) B(2q, j). The broadcast
 * is spelled broadcastd of a cvtsi32 because clang 16 and 17 recurse without end (a segfault) on a set1 fed
 * to vdpbf16ps (llvm-project issue 68117), and the fuzzing build compiles this file with clang. */
#define T_START(I)                                                                                            \
    __m512 r##I##a = _mm512_setzero_ps(), r##I##b = _mm512_setzero_ps();                                     \
    if (start == START_BIAS) r##I##a = bias0, r##I##b = bias1;                                                \
    if (start == START_C && mr > I) {                                                                         \
        r##I##a = _mm512_maskz_loadu_ps(m0, c + I * ldc);                                                     \
        r##I##b = _mm512_maskz_loadu_ps(m1, c + I * ldc + 16);                                                \
    }
#define T_DOT(I)                                                                                              \
    {                                                                                                         \
        const __m512bh ai = (__m512bh)_mm512_broadcastd_epi32(_mm_cvtsi32_si128((int)ap[I]));               \
        r##I##a = _mm512_dpbf16_ps(r##I##a, ai, b0);                                                          \
        r##I##b = _mm512_dpbf16_ps(r##I##b, ai, b1);                                                          \
    }
#define T_STORE(I)                                                                                            \
    if (mr > I) {                                                                                             \
        _mm512_mask_storeu_ps(c + I * ldc, m0, r##I##a);                                                      \
        _mm512_mask_storeu_ps(c + I * ldc + 16, m1, r##I##b);                                                 \
    }
#define T_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* tile_portable in AVX512_BF16. */
static inline __attribute__((always_inline)) BF16 void tile(size_t kp, const uint32_t *a, const uint32_t *b,
                                                             float *c, size_t ldc, size_t mr, size_t nr,
                                                             int start, const float *bias) {
    const __mmask16 m0 = avx512_lanes(nr), m1 = avx512_lanes(nr > 16 ? nr - 16 : 0);
    const __m512 bias0 = start == START_BIAS ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    const __m512 bias1 = start == START_BIAS ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    T_ROWS(T_START)
    for (size_t q = 0; q < kp; q++) {
        const uint32_t *ap = a + q * SR;
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + q * NR);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + q * NR + 16);
        T_ROWS(T_DOT)
    }
    T_ROWS(T_STORE)
}

/* The start a constant in each copy of the tile. */
static BF16 void tile_bf16(size_t kp, const uint32_t *a, const uint32_t *b, float *c, size_t ldc, size_t mr,
                           size_t nr, int start, const float *bias) {
    switch (start) {
    case START_ZERO: tile(kp, a, b, c, ldc, mr, nr, START_ZERO, NULL); break;
    case START_C:    tile(kp, a, b, c, ldc, mr, nr, START_C, NULL); break;
    default:         tile(kp, a, b, c, ldc, mr, nr, START_BIAS, bias); break;
    }
}

/* pack_a's A stored by columns whose rows lie side by side (rs 1): the `rows` values at each k (ld apart) are
 * read 16 at a time, two strips' worth, and a pair of k becomes 16 pair words, the first 8 the lower strip's
 * and the rest the next one's (written only where it has rows). merge_strip_bf16's words: the same bits. */
static BF16 void pack_a_cols_bf16(uint32_t *dst, const float *src, size_t ld, size_t rows, size_t kc, size_t kp) {
    const __m512i idx = pair_words(16);
    for (size_t p = 0; p < kc; p += A_K_STEP) {
        const size_t p1 = p + A_K_STEP < kc ? p + A_K_STEP : kc;
        for (size_t r = 0; r < rows; r += 2 * SR) {
            const size_t n = rows - r < 2 * SR ? rows - r : 2 * SR;
            const __mmask16 m = avx512_lanes(n);
            uint32_t *lower = dst + r * kp, *upper = lower + SR * kp;
            for (size_t k = p; k < p1; k += 2) {
                const __m512 lo = _mm512_maskz_loadu_ps(m, src + k * ld + r);
                const __m512 hi = k + 1 < kc ? _mm512_maskz_loadu_ps(m, src + (k + 1) * ld + r) : _mm512_setzero_ps();
                const __m512i w = to_pairs(lo, hi, idx);
                _mm256_storeu_si256((__m256i *)(void *)(lower + k / 2 * SR), _mm512_castsi512_si256(w));
                if (n > SR)
                    _mm256_storeu_si256((__m256i *)(void *)(upper + k / 2 * SR), _mm512_extracti64x4_epi64(w, 1));
            }
        }
    }
}

/* bf16_from_float (bf16.h) of 16 floats, in the low halves of the lanes: the same integer steps (to nearest,
 * ties to even, through the carry of 0x7FFF plus the kept part's lowest bit; NaN selected, quieted). */
static inline __attribute__((always_inline)) BF16 __m512i bf16_of16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                  _mm512_set1_epi32(0x7F800000));
    return _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}

/* A finished tile's rows (mr of them, nr columns) rounded in place and packed where packed is not NULL (rows ld
 * apart in both), while in L1: round_block's bits, the tile at a time. */
static BF16 void round_tile_bf16(float *c, size_t ldc, uint16_t *packed, size_t mr, size_t nr) {
    for (size_t i = 0; i < mr; i++)
        for (size_t h = 0; h < nr; h += 16) {
            const __mmask16 m = avx512_lanes(nr - h < 16 ? nr - h : 16);
            const __m512i r = bf16_of16(_mm512_maskz_loadu_ps(m, c + i * ldc + h));
            _mm512_mask_storeu_ps(c + i * ldc + h, m, _mm512_castsi512_ps(_mm512_slli_epi32(r, 16)));
            if (packed) _mm256_mask_storeu_epi16(packed + i * ldc + h, m, _mm512_cvtepi32_epi16(r));
        }
}

/* pack_b16's rows of a B in bf16 stored by rows: the 16-bit halves of rows lo and hi (zero where NULL)
 * interleaved into NR pair words, the first `cols` of each row read (zero past them). */
static BF16 void interleave_rows16(uint32_t *dst, const uint16_t *lo, const uint16_t *hi, size_t cols) {
    _Static_assert(NR == 32, "a panel row is two vectors of pair words");
    uint16_t idx[32];
    for (unsigned d = 0; d < 32; d++) idx[d] = (uint16_t)(d / 2 + (d % 2 ? 32 : 0));
    const __m512i first = _mm512_loadu_si512(idx), second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
    const __mmask32 m = (__mmask32)(cols >= 32 ? ~0u : (1u << cols) - 1u);
    const __m512i l = _mm512_maskz_loadu_epi16(m, lo);
    const __m512i h = hi ? _mm512_maskz_loadu_epi16(m, hi) : _mm512_setzero_si512();
    _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(l, first, h));
    _mm512_storeu_si512(dst + 16, _mm512_permutex2var_epi16(l, second, h));
}

/* bgemm_round_weights: vcvtneps2bf16 rounds as the packing's vcvtne2ps2bf16 does, 16 floats at a time. */
static BF16 void round_weights_bf16(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = avx512_lanes(n - i < 16 ? n - i : 16);
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
        _mm256_mask_storeu_epi16(dst + i, m, h);
    }
}
#endif

/* ---- packing and blocking, shared by both ------------------------------------------------------------------------ */

/* The part of C in rows [m0, m1) and columns [n0, n1); bf16: through AVX512_BF16, else the portable twin. */
typedef struct bgemm_job {
    size_t K;
    sgemm_mat a, b;
    float *c;
    size_t ldc;
    const float *bias;
    bool accumulate, bf16;
    bool amx;        /* bf16, through AMX tiles: A packed by rows, blocks padded to a tile's depth */
    bgemm_mat16 b16; /* B already in bf16 (bgemm_b16): packed from these bits, b unused; p NULL otherwise */
    const uint32_t *panels; /* B already packed (bgemm_panels): read in place, b unused; NULL otherwise */
    size_t panel_words;     /* the words of one of those panels: its pairs of k times NR */
    bool round;             /* bgemm_rounded: each block of C rounded once final, its bfloat16 into packed */
    uint16_t *packed;       /* NULL: rounded in place only */
    bgemm_mat16 a16;        /* bgemm_a16: A in bf16 stored by rows, packed from these bits, a unused */
} bgemm_job;

/* merge_portable, or its AVX512_BF16 form for the two row lengths the packing has. */
static void merge(const bgemm_job *j, uint32_t *dst, const float *src, size_t ld, size_t w, size_t cols,
                  size_t rows) {
#ifdef SNUG_AVX512
    if (j->bf16) {
        if (w == NR) merge_panel_bf16(dst, src, ld, cols, rows);
        else merge_strip_bf16(dst, src, ld, cols, rows);
        return;
    }
#endif
    (void)j;
    merge_portable(dst, src, ld, w, cols, rows);
}

/* column_pairs_portable, or its AVX512_BF16 form. */
static void column_pairs(const bgemm_job *j, float *words, const float *src, size_t kc) {
#ifdef SNUG_AVX512
    if (j->bf16) {
        column_pairs_bf16(words, src, kc);
        return;
    }
#endif
    (void)j;
    column_pairs_portable(words, src, kc);
}

/* One row of A for AMX tiles (bgemm's pack_a_rows): its pair words for k in [0, kc) in chunks of a tile's 16
 * pairs, chunk t at dst + 256 t (the next tile of its row block), zero past kc up to lda pairs. From bf16 the
 * pairs are the bits as they are (the even k first in memory: the low half); from floats, column_pairs's. */
static void row_to_tiles16(uint32_t *dst, const uint16_t *src, size_t kc, size_t lda) {
    size_t g = 0;
    for (; 2 * g + 2 * BGEMM_AMX_PAIRS <= kc; g += BGEMM_AMX_PAIRS) /* whole chunks: a copy of constant size */
        memcpy(dst + g * 16, src + 2 * g, 2 * BGEMM_AMX_PAIRS * sizeof *src);
    for (; g < lda; g += BGEMM_AMX_PAIRS) {
        const size_t n = kc > 2 * g ? kc - 2 * g : 0;
        char *chunk = (char *)(dst + g * 16);
        memcpy(chunk, src + 2 * g, n * sizeof *src);
        memset(chunk + n * sizeof *src, 0, (2 * BGEMM_AMX_PAIRS - n) * sizeof *src);
    }
}

static void row_to_tiles(const bgemm_job *j, uint32_t *dst, const float *src, size_t kc, size_t lda) {
#ifdef SNUG_AVX512
    if (j->bf16) {
        row_to_tiles_bf16(dst, src, kc, lda);
        return;
    }
#endif
    (void)j;
    for (size_t g = 0; g < lda; g += BGEMM_AMX_PAIRS) {
        float words[BGEMM_AMX_PAIRS] = {0};
        if (kc > 2 * g) column_pairs_portable(words, src + 2 * g, min_size(2 * BGEMM_AMX_PAIRS, kc - 2 * g));
        memcpy(dst + g * 16, words, sizeof words);
    }
}

/* Rows [i0, i0 + rows) of A, k in [p0, p0 + kc), as consecutive strips of SR rows kp * SR pairs apart:
 * dst[s * SR * kp + q * SR + i] = the pair A(r, p0 + 2q), A(r, p0 + 2q + 1) of row r = i0 + s * SR + i, zero
 * for the rows past the last (so that the tile computes padded rows without branching) and for k past kc.
 * A stored by columns (a transposed operand: a strip's rows at one k lie side by side) is merged straight from
 * its floats. A stored by rows holds each pair in two adjacent floats, as a B stored by columns does: each row
 * becomes its pair words in the stage (rows rows of kp words), and the strips' transpose of 32-bit words turns
 * them into strips, half the bytes a float32 transpose before the merge would move. */
static void pack_a_strips(const bgemm_job *j, uint32_t *dst, float *stage, size_t i0, size_t rows, size_t p0,
                          size_t kc);

/* pack_a for AMX tiles, as whole tiles of 16 rows by 16 pairs, each tile's 1 KiB contiguous (a tile loads
 * from consecutive lines): row block b (rows 16 b to 16 b + 15) at tiles + 16 b ld, ld >= stored_pairs(kc) (the
 * stored pairs of a row, of this block of K or of several: run_part_panels_amx), its tile of pairs [g, g + 16)
 * 16 g words on, a row's 16 pairs of it 16 (r % 16) words into the tile; zero past kp and in the rows up to a
 * whole tile. A stored by rows (or in bf16) is written straight into the tiles, 16 pairs at a time; any other A
 * is packed in strips in the stage, each strip turned (a transpose of 32-bit words) into rows in the stage
 * after them, and the rows then copied into the tiles. */
static void rows_to_tiles(const bgemm_job *j, uint32_t *tiles, size_t ld, float *stage_f, size_t i0, size_t rows,
                          size_t p0, size_t kc);

static void pack_a_rows(const bgemm_job *j, uint32_t *tiles, size_t ld, float *stage, size_t i0, size_t rows,
                        size_t p0, size_t kc) {
    const size_t lda = stored_pairs(kc, true), padded = a_rows(rows, true);
    if (j->a16.p || j->a.cs == 1) {
        for (size_t r = 0; r < rows; r++) {
            uint32_t *row = tiles + r / 16 * 16 * ld + r % 16 * 16;
            if (j->a16.p) row_to_tiles16(row, j->a16.p + (i0 + r) * j->a16.rs + p0, kc, lda);
            else row_to_tiles(j, row, j->a.p + (i0 + r) * j->a.rs + p0, kc, lda);
        }
    } else {
        rows_to_tiles(j, tiles, ld, stage, i0, rows, p0, kc);
    }
    for (size_t r = rows; r < padded; r++)
        for (size_t g = 0; g < lda; g += BGEMM_AMX_PAIRS)
            memset(tiles + r / 16 * 16 * ld + g * 16 + r % 16 * 16, 0, 16 * sizeof *tiles);
}

static void rows_to_tiles(const bgemm_job *j, uint32_t *tiles, size_t ld, float *stage_f, size_t i0, size_t rows,
                          size_t p0, size_t kc) {
    const size_t kp = (kc + 1) / 2, lda = stored_pairs(kc, true);
    uint32_t *dst = (uint32_t *)(void *)stage_f;
    float *stage = stage_f + a_rows(rows, true) * lda;
    pack_a_strips(j, (uint32_t *)(void *)stage, NULL, i0, rows, p0, kc);
    for (size_t s = 0; s * SR < rows; s++)
        transpose_floats((float *)(void *)(dst + s * SR * lda), lda, stage + s * SR * kp, SR, kp,
                         min_size(SR, rows - s * SR));
    for (size_t r = 0; r < rows; r++) {
        memset(dst + r * lda + kp, 0, (lda - kp) * sizeof *dst);
        for (size_t g = 0; g < lda; g += BGEMM_AMX_PAIRS)
            memcpy(tiles + r / 16 * 16 * ld + g * 16 + r % 16 * 16, dst + r * lda + g, 16 * sizeof *dst);
    }
}

static void pack_a(const bgemm_job *j, uint32_t *dst, float *stage, size_t i0, size_t rows, size_t p0, size_t kc) {
    if (j->amx) pack_a_rows(j, dst, stored_pairs(kc, true), stage, i0, rows, p0, kc);
    else pack_a_strips(j, dst, stage, i0, rows, p0, kc);
}

/* pack_a in SR-row strips (stage unused where A is stored by columns or with general strides). */
static void pack_a_strips(const bgemm_job *j, uint32_t *dst, float *stage, size_t i0, size_t rows, size_t p0,
                          size_t kc) {
    const sgemm_mat a = j->a;
    const size_t kp = (kc + 1) / 2;
    if (j->a16.p) { /* a row's kc bf16 from p0 (even) are its pair words in memory order */
        for (size_t r = 0; r < rows; r++) {
            char *words = (char *)(stage + r * kp);
            memcpy(words, j->a16.p + (i0 + r) * j->a16.rs + p0, kc * sizeof *j->a16.p);
            if (kc % 2) memset(words + kc * sizeof *j->a16.p, 0, sizeof *j->a16.p); /* the pad of the last pair */
        }
        transpose_to_strips8((float *)(void *)dst, SR * kp, stage, kp, rows, kp); /* the words' bits as they are */
        return;
    }
    if (a.cs == 1) {
        for (size_t r = 0; r < rows; r++) column_pairs(j, stage + r * kp, a.p + (i0 + r) * a.rs + p0, kc);
        transpose_to_strips8((float *)(void *)dst, SR * kp, stage, kp, rows, kp); /* the words' bits as they are */
        return;
    }
    /* A few k at a time across every strip: the rows of A read are then few, each read along its length,
     * where a whole strip at a time would touch a cache line and a page per k for every 8 floats. */
#ifdef SNUG_AVX512
    if (j->bf16 && a.rs == 1) {
        pack_a_cols_bf16(dst, a.p + p0 * a.cs + i0, a.cs, rows, kc, kp);
        return;
    }
#endif
    for (size_t p = 0; p < kc; p += A_K_STEP)
        for (size_t s = 0; s * SR < rows; s++)
            merge(j, dst + s * SR * kp + p / 2 * SR, a.p + (p0 + p) * a.cs + (i0 + s * SR) * a.rs, a.cs, SR,
                  min_size(SR, rows - s * SR), min_size(A_K_STEP, kc - p));
}

/* Panel of `cols` (<= NR) columns of B from column j0, k in [p0, p0 + kc): dst[q * NR + t] = the pair
 * B(p0 + 2q, j0 + t), B(p0 + 2q + 1, j0 + t), zero for t >= cols and for k past kc. B stored by rows is merged
 * straight from its floats. B stored by columns (a transposed operand, as a weight W in x W^T) holds each
 * pair in two adjacent floats: each column becomes its pair words in the stage (cols rows of kp words), and a
 * transpose of 32-bit words turns them into the panel, half the bytes a float32 transpose would move. */
static void pack_b16(const bgemm_job *j, uint32_t *dst, float *stage, size_t j0, size_t cols, size_t p0,
                     size_t kc);

static void pack_b_pairs(const bgemm_job *j, uint32_t *dst, float *stage, size_t j0, size_t cols, size_t p0,
                         size_t kc);

/* pack_b, and on AMX the zero rows to a tile's depth after the kp rows of pairs. */
static void pack_b(const bgemm_job *j, uint32_t *dst, float *stage, size_t j0, size_t cols, size_t p0, size_t kc) {
    pack_b_pairs(j, dst, stage, j0, cols, p0, kc);
    const size_t kp = (kc + 1) / 2, stored = stored_pairs(kc, j->amx);
    memset(dst + kp * NR, 0, (stored - kp) * NR * sizeof *dst);
}

static void pack_b_pairs(const bgemm_job *j, uint32_t *dst, float *stage, size_t j0, size_t cols, size_t p0,
                         size_t kc) {
    const sgemm_mat b = j->b;
    if (j->b16.p) {
        pack_b16(j, dst, stage, j0, cols, p0, kc);
        return;
    }
    if (b.cs == 1) {
        merge(j, dst, b.p + p0 * b.rs + j0, b.rs, NR, cols, kc);
        return;
    }
    const size_t kp = (kc + 1) / 2;
    for (size_t t = 0; t < cols; t++) column_pairs(j, stage + t * kp, b.p + (j0 + t) * b.cs + p0, kc);
    transpose_floats((float *)(void *)dst, NR, stage, kp, cols, kp); /* moves the words' bits as they are */
    if (cols < NR)
        for (size_t q = 0; q < kp; q++) memset(dst + q * NR + cols, 0, (NR - cols) * sizeof *dst);
}

/* pack_b from a B already in bf16: the pairs are its bits as they are. By rows, two rows' halves side by side
 * per word; by columns, a column's kc bf16 from p0 (even) are already its pair words in memory order (the even
 * k in the low half), copied to the stage and transposed as pack_b's. */
static void pack_b16(const bgemm_job *j, uint32_t *dst, float *stage, size_t j0, size_t cols, size_t p0,
                     size_t kc) {
    const bgemm_mat16 b = j->b16;
    const size_t kp = (kc + 1) / 2;
    if (b.cs == 1) {
#ifdef SNUG_AVX512
        if (j->bf16) {
            for (size_t q = 0; q < kp; q++) {
                const uint16_t *lo = b.p + (p0 + 2 * q) * b.rs + j0;
                interleave_rows16(dst + q * NR, lo, 2 * q + 1 < kc ? lo + b.rs : NULL, cols);
            }
            return;
        }
#endif
        for (size_t q = 0; q < kp; q++) {
            const bool odd_row = 2 * q + 1 < kc;
            const uint16_t *lo = b.p + (p0 + 2 * q) * b.rs + j0, *hi = odd_row ? lo + b.rs : lo; /* never past B */
            for (size_t t = 0; t < NR; t++)
                dst[q * NR + t] = t < cols ? (uint32_t)lo[t] | (odd_row ? (uint32_t)hi[t] << 16 : 0) : 0;
        }
        return;
    }
    for (size_t t = 0; t < cols; t++) {
        char *words = (char *)(stage + t * kp);
        memcpy(words, b.p + (j0 + t) * b.cs + p0, kc * sizeof *b.p);
        if (kc % 2) memset(words + kc * sizeof *b.p, 0, sizeof *b.p); /* the pad of the last pair */
    }
    transpose_floats((float *)(void *)dst, NR, stage, kp, cols, kp); /* moves the words' bits as they are */
    if (cols < NR)
        for (size_t q = 0; q < kp; q++) memset(dst + q * NR + cols, 0, (NR - cols) * sizeof *dst);
}

/* A tile that starts from C waits on its rows from memory (C outgrows the caches: a weight gradient) before
 * its first vdpbf16ps: the rows of the next tile down are asked for while this one computes. */
static void prefetch_next(const bgemm_job *j, size_t ic, size_t mc, size_t col, size_t nr, size_t ir) {
    for (size_t i = ir; i < min_size(ir + MR, mc); i++) {
        const float *row = j->c + (ic + i) * j->ldc + col;
        __builtin_prefetch(row, 1);
        __builtin_prefetch(row + nr - 1, 1);
    }
}

/* The tiles of one A block against one B block: every A strip against one B panel at a time, the panel kept in
 * L1 while the strips stream from L2. The block's panels lie panel_step words apart from bbuf on. On the
 * AVX512_BF16 path a bgemm_rounded tile whose last block of K this is (last) is rounded as soon as it is made;
 * the portable path rounds the block after (round_block), the same bits. */
/* The rows of A one tiles_amx call reads: rows [0, direct_rows) (whole 32-row blocks) read where a bfloat16 A
 * lies, the rest from bgemm's packed tiles of them (packed from its first row on); both from the block's first
 * pair of k. */
typedef struct amx_rows {
    bgemm_amx_a direct, packed;
    size_t direct_rows;
} amx_rows;

/* bgemm's packed tiles of rows with kp stored pairs each (pack_a_rows's layout). */
static bgemm_amx_a packed_tiles(const uint32_t *abuf, size_t kp) {
    return (bgemm_amx_a){(const char *)abuf, 16 * sizeof *abuf, 256 * sizeof *abuf, 16 * kp * sizeof *abuf};
}

/* The view a moved by `rows` rows (a multiple of 16) and `pairs` pairs of k (a multiple of a tile's 16). */
static bgemm_amx_a amx_at(bgemm_amx_a a, size_t rows, size_t pairs) {
    a.p += rows / 16 * a.block_bytes + pairs / BGEMM_AMX_PAIRS * a.tile_bytes;
    return a;
}

static void tiles_amx(const bgemm_job *j, const amx_rows *a, const uint32_t *bbuf, size_t panel_step, size_t ic,
                      size_t mc, size_t jc, size_t nc, size_t kp, int start, bool last);

static void tiles(const bgemm_job *j, const uint32_t *abuf, const uint32_t *bbuf, size_t panel_step, size_t ic,
                  size_t mc, size_t jc, size_t nc, size_t kp, int start, bool last) {
    if (j->amx) {
        const amx_rows a = {.packed = packed_tiles(abuf, kp)};
        tiles_amx(j, &a, bbuf, panel_step, ic, mc, jc, nc, kp, start, last);
        return;
    }
    for (size_t jr = 0; jr < nc; jr += NR)
        for (size_t ir = 0; ir < mc; ir += MR) {
            const uint32_t *a = abuf + ir * kp, *b = bbuf + jr / NR * panel_step;
            float *c = j->c + (ic + ir) * j->ldc + jc + jr;
            const size_t mr = min_size(MR, mc - ir), nr = min_size(NR, nc - jr);
            const float *bias = j->bias ? j->bias + jc + jr : NULL;
            prefetch_next(j, ic, mc, jc + jr, nr, ir + MR);
#ifdef SNUG_AVX512
            if (j->bf16) {
                tile_bf16(kp, a, b, c, j->ldc, mr, nr, start, bias);
                if (j->round && last)
                    round_tile_bf16(c, j->ldc, j->packed ? j->packed + (ic + ir) * j->ldc + jc + jr : NULL, mr, nr);
                continue;
            }
#endif
            tile_portable(kp, a, b, c, j->ldc, mr, nr, start, bias);
        }
}

/* tiles on AMX: 32 x 32 blocks of C (two tiles each way), every A row block against one panel at a time; kp is
 * the stored pairs (a multiple of a tile's depth). The pairs go AMX_CHUNK at a time, all row blocks against the
 * panel's chunk before the next chunk, so that the chunk (AMX_CHUNK x 32 pair words, 32 KiB) is read from L1 by
 * every row block after the first (A's tiles pass by it: bgemm_amx.c). Between chunks a block of C waits in
 * cbuf, whose rows lie 32 floats apart: C's own rows may lie a multiple of 4 KiB apart (a 1024-wide C), all in
 * one set of L1, which then keeps none of them. Each element's chain is the same (C's float32 value carried, as
 * between blocks). */
static void tiles_amx(const bgemm_job *j, const amx_rows *a, const uint32_t *bbuf, size_t panel_step, size_t ic,
                      size_t mc, size_t jc, size_t nc, size_t kp, int start, bool last) {
#ifdef SNUG_AVX512
    _Static_assert(NR == BGEMM_AMX_COLS, "a panel is one AMX block's columns");
    const int amx_start = start == START_C ? BGEMM_AMX_C : start == START_BIAS ? BGEMM_AMX_BIAS : BGEMM_AMX_ZERO;
    _Alignas(64) float cbuf[MC_AMX * NR];
    for (size_t jr = 0; jr < nc; jr += NR) {
        const size_t nr = min_size(NR, nc - jr);
        const uint32_t *b = bbuf + jr / NR * panel_step;
        for (size_t q0 = 0; q0 < kp; q0 += AMX_CHUNK) {
            const size_t kq = min_size(AMX_CHUNK, kp - q0);
            const bool first = q0 == 0, final = q0 + kq == kp;
            for (size_t ir = 0; ir < mc; ir += BGEMM_AMX_ROWS) {
                float *c = j->c + (ic + ir) * j->ldc + jc + jr, *cb = cbuf + ir * NR;
                const size_t mr = min_size(BGEMM_AMX_ROWS, mc - ir);
                /* passed by address: a copy on the stack, read back by the call, would wait on the tile
                 * stores to cbuf before it */
                const bgemm_amx_a at = ir < a->direct_rows ? amx_at(a->direct, ir, q0)
                                                           : amx_at(a->packed, ir - a->direct_rows, q0);
                bgemm_amx_block(kq, &at, b + q0 * NR, first ? c : cb, first ? j->ldc : NR, final ? c : cb,
                                final ? j->ldc : NR, mr, nr, first ? amx_start : BGEMM_AMX_C,
                                j->bias ? j->bias + jc + jr : NULL);
                if (j->round && last && final)
                    round_tile_bf16(c, j->ldc, j->packed ? j->packed + (ic + ir) * j->ldc + jc + jr : NULL, mr, nr);
            }
        }
    }
#else
    (void)j, (void)a, (void)bbuf, (void)panel_step, (void)ic, (void)mc, (void)jc, (void)nc, (void)kp;
    (void)start, (void)last;
#endif
}

/* bgemm_rounded: rows [i0, i0 + rows) by columns [j0, j0 + cols) of C, whose last block of K was just added,
 * rounded while they are in this thread's cache (the block's A strips and B panels were its last reads). */
static void round_block(const bgemm_job *j, size_t i0, size_t rows, size_t j0, size_t cols) {
    for (size_t i = i0; i < i0 + rows; i++) {
        float *row = j->c + i * j->ldc + j0;
        if (j->packed) bf16_round_pack(row, j->packed + i * j->ldc + j0, cols);
        else bf16_round_floats(row, row, cols);
    }
}

/* run_part on AMX from packed panels. B is packed for all of K already, so A is packed once per block of rows
 * for as many blocks of K as the workspace holds (a K super-block, up to SUPER_BLOCKS, its blocks side by side
 * in each row's tiles), and the blocks of C then run over the whole super-block (tiles_amx): C goes to and
 * from memory once per super-block instead of once per block of K, and A's tiles are packed once per product
 * where K fits one super-block (not once per block of columns). Every element's chain runs over the same tiles
 * of 16 pairs in the same order as run_part's: the blocks of K start on whole tiles, only the last is padded.
 * A bfloat16 A whose K needs no padding is not packed at all, but for a last partial block of rows. */
static void run_part_panels_amx(const bgemm_job *j, size_t m0, size_t m1, size_t n0, size_t n1, float *work,
                                size_t kb) {
    const size_t ma = min_size(a_rows(m1 - m0, true), MC_AMX), kbp = stored_pairs(kb, true);
    /* only an A neither in bf16 nor stored by rows is staged (rows_to_tiles) */
    const size_t stage_floats = j->a16.p || j->a.cs == 1 ? 0 : max_size(2 * ma * kbp, kb * NR);
    const size_t room = part_floats(m1 - m0, n1 - n0, j->K, true) - stage_floats;
    const size_t per_super = min_size(room / (ma * kbp), SUPER_BLOCKS) * kb; /* >= kb: room holds one block */
    uint32_t *abuf = (uint32_t *)work;
    float *stage = work + room;
    /* A in bfloat16 whose blocks of K are whole tiles: its rows already hold the tiles' pair words (the even k
     * first in memory: the low half), so whole row blocks are read where they lie and only a last partial
     * block (whose tiles would read past the last row) is packed */
    const bool direct = j->a16.p && j->K % (2 * BGEMM_AMX_PAIRS) == 0;
    bgemm_amx_begin();
    for (size_t ic = m0; ic < m1; ic += MC_AMX) {
        const size_t mc = min_size(MC_AMX, m1 - ic);
        for (size_t ps = 0; ps < j->K; ps += per_super) {
            const size_t pe = min_size(ps + per_super, j->K), ksp = stored_pairs(pe - ps, true);
            amx_rows a = {.packed = packed_tiles(abuf, ksp)};
            if (direct) {
                const uint16_t *row = j->a16.p + ic * j->a16.rs + ps;
                const size_t rb = j->a16.rs * sizeof *row;
                a.direct = (bgemm_amx_a){(const char *)row, rb, BGEMM_AMX_PAIRS * 2 * sizeof *row, 16 * rb};
                a.direct_rows = mc / BGEMM_AMX_ROWS * BGEMM_AMX_ROWS;
            }
            /* every block but the last is whole tiles, so block pc's pairs start (pc - ps) / 2 into the rows */
            if (a.direct_rows < mc)
                for (size_t pc = ps; pc < pe; pc += kb)
                    pack_a_rows(j, abuf + (pc - ps) / 2 * 16, ksp, stage, ic + a.direct_rows, mc - a.direct_rows,
                                pc, min_size(kb, pe - pc));
            const int start = ps > 0 || j->accumulate ? START_C : j->bias ? START_BIAS : START_ZERO;
            for (size_t jc = n0; jc < n1; jc += NC_AMX)
                tiles_amx(j, &a, j->panels + jc / NR * j->panel_words + ps / 2 * NR, j->panel_words, ic, mc, jc,
                          min_size(NC_AMX, n1 - jc), ksp, start, pe == j->K);
        }
    }
    bgemm_amx_end();
}

/* One part of C with one thread's workspace, laid out as part_floats counts it. */
static void run_part(const bgemm_job *j, size_t m0, size_t m1, size_t n0, size_t n1, float *work) {
    const size_t kpmax = stored_pairs(min_size(j->K, KC), j->amx);
    uint32_t *abuf = (uint32_t *)work;
    uint32_t *bbuf = abuf + min_size(a_rows(m1 - m0, j->amx), MC) * kpmax;
    float *stage = (float *)(bbuf + kpmax * min_size(round_up(n1 - n0, NR), NC));
    const size_t kb = k_block(j->K, j->amx);
    if (j->amx && j->panels) {
        run_part_panels_amx(j, m0, m1, n0, n1, work, kb);
        return;
    }
    if (j->amx) bgemm_amx_begin();
    for (size_t jc = n0; jc < n1; jc += NC) {
        const size_t nc = min_size(NC, n1 - jc);
        for (size_t pc = 0; pc < j->K; pc += kb) {
            const size_t kc = min_size(kb, j->K - pc), kp = stored_pairs(kc, j->amx);
            const int start = pc > 0 || j->accumulate ? START_C : j->bias ? START_BIAS : START_ZERO;
            /* B's block: packed now, or read where bgemm_pack_panels put it (pc even: pair pc / 2 on) */
            const uint32_t *bblock = j->panels ? j->panels + jc / NR * j->panel_words + pc / 2 * NR : bbuf;
            const size_t panel_step = j->panels ? j->panel_words : kp * NR;
            if (!j->panels)
                for (size_t jr = 0; jr < nc; jr += NR)
                    pack_b(j, bbuf + jr * kp, stage, jc + jr, min_size(NR, nc - jr), pc, kc);
            for (size_t ic = m0; ic < m1; ic += MC) {
                const size_t mc = min_size(MC, m1 - ic);
                pack_a(j, abuf, stage, ic, mc, pc, kc);
                tiles(j, abuf, bblock, panel_step, ic, mc, jc, nc, kp, start, pc + kc == j->K);
                if (j->round && !j->bf16 && pc + kc == j->K) round_block(j, ic, mc, jc, nc);
            }
        }
    }
    if (j->amx) bgemm_amx_end();
}

void bgemm_round_weights(uint16_t *dst, const float *src, size_t n) {
#ifdef SNUG_AVX512
    if (fast_path()) {
        round_weights_bf16(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)dpbf16_of(src[i]);
}

/* The product of job j, C (M, N): on this thread, or split over up to `threads`. */
static void run_job(const bgemm_job *j, size_t M, size_t N, float *work, int threads) {
    if (M == 0 || N == 0) return;
    if (j->K == 0) {
        sgemm_start_only(M, N, j->c, j->ldc, j->bias, j->accumulate);
        if (j->round) round_block(j, 0, M, 0, N);
        return;
    }
    const int T = threads < omp_get_max_threads() ? threads : omp_get_max_threads();
    /* vdpbf16ps does two multiply-adds where sgemm's tile does one; the portable kernel is far slower than
     * either, and the estimate for an FMA tile under-states its work, which only ever keeps it serial. */
    const double serial_ns = (double)M * (double)N * (double)j->K * PAR_NS_PER_MAC / (j->bf16 ? 2.0 : 1.0);
    if (T < 2 || omp_in_parallel() || !par_pays(serial_ns)) {
        run_part(j, 0, M, 0, N, work);
        return;
    }
    /* Each thread packs the whole of the operand along the dimension it does not split: the columns when A is
     * the smaller operand and there are two panels for every thread, else the rows (sgemm's rule without its
     * claimed scheme). Every part is at most M x N, so part_floats(M, N, K) covers it. */
    const bool by_cols = N >= (size_t)T * 2 * NR && M < N;
    const size_t unit = by_cols ? NR : j->amx ? BGEMM_AMX_ROWS : SR, end = by_cols ? N : M;
    const size_t units = (end + unit - 1) / unit, per = part_floats(M, N, j->K, j->amx);
    #pragma omp parallel num_threads(T)
    {
        const size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        const size_t lo = units * t / nt * unit, hi = min_size(units * (t + 1) / nt * unit, end);
        if (lo < hi) {
            if (by_cols) run_part(j, 0, M, lo, hi, work + t * per);
            else run_part(j, lo, hi, 0, N, work + t * per);
        }
    }
}

void bgemm(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc, const float *col_bias,
           bool accumulate, float *work, int threads) {
    const bgemm_job j = {.K = K, .a = a, .b = b, .c = c, .ldc = ldc, .bias = col_bias, .accumulate = accumulate,
                         .bf16 = fast_path(), .amx = amx_path()};
    run_job(&j, M, N, work, threads);
}

void bgemm_rounded(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, bgemm_mat16 b16, float *c, size_t ldc,
                   const float *col_bias, uint16_t *packed, float *work, int threads) {
    const bgemm_job j = {.K = K, .a = a, .b = b, .b16 = b16, .c = c, .ldc = ldc, .bias = col_bias,
                         .bf16 = fast_path(), .amx = amx_path(), .round = true, .packed = packed};
    run_job(&j, M, N, work, threads);
}

void bgemm_a16(size_t M, size_t N, size_t K, bgemm_mat16 a, bgemm_mat16 b, float *c, size_t ldc,
               const float *col_bias, bool round, uint16_t *packed, float *work, int threads) {
    const bgemm_job j = {.K = K, .a16 = a, .b16 = b, .c = c, .ldc = ldc, .bias = col_bias, .bf16 = fast_path(),
                         .amx = amx_path(), .round = round, .packed = round ? packed : NULL};
    run_job(&j, M, N, work, threads);
}

void bgemm_b16(size_t M, size_t N, size_t K, sgemm_mat a, bgemm_mat16 b, float *c, size_t ldc,
               const float *col_bias, bool accumulate, float *work, int threads) {
    const bgemm_job j = {.K = K, .a = a, .b16 = b, .c = c, .ldc = ldc, .bias = col_bias, .accumulate = accumulate,
                         .bf16 = fast_path(), .amx = amx_path()};
    run_job(&j, M, N, work, threads);
}

/* ---- B packed once, read by many products -------------------------------------------------------------------- */

/* The words of one panel: NR columns by the pairs of K rows (on AMX padded to a tile's depth). */
static size_t panel_words(size_t K, bool amx) { return stored_pairs(K, amx) * NR; }

size_t bgemm_panels_words(size_t K, size_t N) { return panel_words(K, amx_path()) * (round_up(N, NR) / NR); }

size_t bgemm_panels_stage_floats(void) { return KC / 2 * NR; }

/* pack_b over all of K, KC at a time (even, so every block starts on a pair), panel by panel: panel t holds
 * the pairs of columns [t NR, t NR + NR) for every k, (K + 1) / 2 rows of NR words. */
void bgemm_pack_panels(uint32_t *dst, size_t K, size_t N, sgemm_mat b, float *stage) {
    const bgemm_job j = {.K = K, .b = b, .bf16 = fast_path(), .amx = amx_path()};
    const size_t words = panel_words(K, j.amx);
    for (size_t j0 = 0; j0 < N; j0 += NR)
        for (size_t p0 = 0; p0 < K; p0 += KC) /* KC is a whole number of tiles: only the last block is padded */
            pack_b(&j, dst + j0 / NR * words + p0 / 2 * NR, stage, j0, min_size(NR, N - j0), p0,
                   min_size(KC, K - p0));
}

void bgemm_pack_panels16(uint32_t *dst, size_t K, size_t N, bgemm_mat16 b, float *stage) {
    const bgemm_job j = {.K = K, .b16 = b, .bf16 = fast_path(), .amx = amx_path()};
    const size_t words = panel_words(K, j.amx);
    for (size_t j0 = 0; j0 < N; j0 += NR)
        for (size_t p0 = 0; p0 < K; p0 += KC)
            pack_b(&j, dst + j0 / NR * words + p0 / 2 * NR, stage, j0, min_size(NR, N - j0), p0,
                   min_size(KC, K - p0));
}

void bgemm_panels_out(size_t M, size_t N, size_t K, sgemm_mat a, bgemm_mat16 a16, bgemm_panels_of b, float *c,
                      size_t ldc, const float *col_bias, bool round, uint16_t *packed, float *work, int threads) {
    const bgemm_job j = {.K = K, .a = a, .a16 = a16, .c = c, .ldc = ldc, .bias = col_bias, .bf16 = fast_path(),
                         .amx = amx_path(), .panels = b.p, .panel_words = panel_words(b.K, amx_path()),
                         .round = round, .packed = round ? packed : NULL};
    run_job(&j, M, N, work, threads);
}

void bgemm_panels(size_t M, size_t N, size_t K, sgemm_mat a, bgemm_panels_of b, float *c, size_t ldc,
                  bool accumulate, float *work, int threads) {
    const bgemm_job j = {.K = K, .a = a, .c = c, .ldc = ldc, .accumulate = accumulate, .bf16 = fast_path(),
                         .amx = amx_path(), .panels = b.p, .panel_words = panel_words(b.K, amx_path())};
    run_job(&j, M, N, work, threads);
}

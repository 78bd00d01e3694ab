/* small_gemm: register tiles of rows x two vectors of C's columns, one loop over K each (a broadcast of A per
 * row, fused multiply-adds into the tile's accumulators), column blocks outer so that a block's rows of B stay in
 * L1 across the row tiles. AVX-512 (8 x 32) and AVX2 + FMA (6 x 16, the most a tile of 16 registers holds beside
 * its two B vectors and a broadcast) through function attributes, chosen at run time (the build has no -march);
 * plain C through fmaf elsewhere. The last columns use masked loads and stores, so any N works without a scalar
 * tail; the tile's row count is a constant at every call site (the switches below), so its branches fold away. */
#include "kernels/small_gemm.h"

#include <math.h>

#include "kernels/avx512.h"
#include "kernels/isa.h"
#include "kernels/gemm_direct.h"
#include "kernels/small_gemm_path.h"

static small_gemm_path forced = SMALL_GEMM_FASTEST; /* tests only (small_gemm_path.h) */

/* Every element in plain C: the reference chain, which the vector paths reproduce lane by lane. */
static void gemm_portable(size_t M, size_t N, size_t K, sgemm_mat a, const float *b, size_t ldb, float *c,
                          size_t ldc, float scale, bool accumulate) {
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            float acc = accumulate ? c[i * ldc + j] : 0.0f;
            for (size_t p = 0; p < K; p++) acc = fmaf(a.p[i * a.rs + p * a.cs], b[p * ldb + j], acc);
            c[i * ldc + j] = scale != 1.0f ? acc * scale : acc;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX2_FMA __attribute__((target("avx2,fma")))
#define A2_MR 6
#define A2_NR 16

/* The lanes [0, n) of an AVX2 vector as a load/store mask: all 8 from n = 8 up. */
static inline AVX2_FMA __m256i avx2_lanes(size_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n >= 8 ? 8 : (int)n), idx);
}

/* Full tiles use plain loads and stores (a masked store costs several times a plain one on AMD cores); the
 * block of the last columns masks both vectors. */
#define A2_LOAD(p, m) (masked ? _mm256_maskload_ps((p), (m)) : _mm256_loadu_ps(p))
#define A2_STORE_V(p, m, v)                                                                                   \
    do {                                                                                                      \
        if (masked) _mm256_maskstore_ps((p), (m), (v));                                                       \
        else _mm256_storeu_ps((p), (v));                                                                      \
    } while (0)
#define A2_INIT(I)                                                                                            \
    __m256 r##I##a = _mm256_setzero_ps(), r##I##b = _mm256_setzero_ps();                                     \
    if (mr > I && accumulate) {                                                                               \
        r##I##a = A2_LOAD(c + I * ldc, m0);                                                                   \
        if (nv == 2) r##I##b = A2_LOAD(c + I * ldc + 8, m1);                                                  \
    }
#define A2_FMA(I)                                                                                             \
    if (mr > I) {                                                                                             \
        const __m256 ai = _mm256_broadcast_ss(ap + I * a_rs);                                                 \
        r##I##a = _mm256_fmadd_ps(ai, b0, r##I##a);                                                           \
        if (nv == 2) r##I##b = _mm256_fmadd_ps(ai, b1, r##I##b);                                              \
    }
#define A2_STORE(I)                                                                                           \
    if (mr > I) {                                                                                             \
        if (scaled) r##I##a = _mm256_mul_ps(r##I##a, s), r##I##b = _mm256_mul_ps(r##I##b, s);                 \
        A2_STORE_V(c + I * ldc, m0, r##I##a);                                                                 \
        if (nv == 2) A2_STORE_V(c + I * ldc + 8, m1, r##I##b);                                                \
    }

/* Rows [0, mr) of C, columns [0, 8 nv), the lanes past nc masked off where `masked`. */
static inline __attribute__((always_inline)) AVX2_FMA void
tile_avx2(size_t mr, size_t nv, bool masked, size_t nc, size_t K, const float *a, size_t a_rs, size_t a_cs,
          const float *b, size_t ldb, float *c, size_t ldc, float scale, bool accumulate) {
    const __m256i m0 = avx2_lanes(nc), m1 = avx2_lanes(nc > 8 ? nc - 8 : 0);
    const bool scaled = scale != 1.0f;
    const __m256 s = _mm256_set1_ps(scale);
    A2_INIT(0) A2_INIT(1) A2_INIT(2) A2_INIT(3) A2_INIT(4) A2_INIT(5)
    for (size_t p = 0; p < K; p++) {
        const float *bp = b + p * ldb, *ap = a + p * a_cs;
        const __m256 b0 = A2_LOAD(bp, m0);
        const __m256 b1 = nv == 2 ? A2_LOAD(bp + 8, m1) : b0;
        A2_FMA(0) A2_FMA(1) A2_FMA(2) A2_FMA(3) A2_FMA(4) A2_FMA(5)
    }
    A2_STORE(0) A2_STORE(1) A2_STORE(2) A2_STORE(3) A2_STORE(4) A2_STORE(5)
}

#define A2_CASE(R)                                                                                            \
    case R:                                                                                                   \
        if (nc == A2_NR) tile_avx2(R, 2, false, nc, K, a, a_rs, a_cs, b, ldb, c, ldc, scale, accumulate);     \
        else if (nc > 8) tile_avx2(R, 2, true, nc, K, a, a_rs, a_cs, b, ldb, c, ldc, scale, accumulate);      \
        else tile_avx2(R, 1, true, nc, K, a, a_rs, a_cs, b, ldb, c, ldc, scale, accumulate);                  \
        break;

/* Rows [0, mr) (mr <= A2_MR) over one block of nc <= A2_NR columns. */
static AVX2_FMA void rows_avx2(size_t mr, size_t nc, size_t K, const float *a, size_t a_rs, size_t a_cs,
                               const float *b, size_t ldb, float *c, size_t ldc, float scale, bool accumulate) {
    switch (mr) {
        A2_CASE(1) A2_CASE(2) A2_CASE(3) A2_CASE(4) A2_CASE(5) A2_CASE(6)
    default: break;
    }
}

/* The rows of the tile starting `left` rows before the end: A2_MR, except that the last two tiles share what
 * is left beyond A2_MR evenly (32 rows as 6, 6, 6, 6, 4, 4 rather than ending on a tile of 2, whose 4
 * accumulators cannot hide the latency of the fused multiply-add). */
static size_t avx2_tile_rows(size_t left) {
    if (left >= 2 * A2_MR || left <= A2_MR) return left < A2_MR ? left : A2_MR;
    return left / 2;
}

static AVX2_FMA void gemm_avx2(size_t M, size_t N, size_t K, sgemm_mat a, const float *b, size_t ldb, float *c,
                               size_t ldc, float scale, bool accumulate) {
    for (size_t j = 0; j < N; j += A2_NR) {
        const size_t nc = N - j < A2_NR ? N - j : A2_NR;
        for (size_t i = 0, mr; i < M; i += mr) {
            mr = avx2_tile_rows(M - i);
            rows_avx2(mr, nc, K, a.p + i * a.rs, a.rs, a.cs, b + j, ldb, c + i * ldc + j, ldc, scale, accumulate);
        }
    }
}
#endif

#ifdef SNUG_AVX512
#define A5_MR 8
#define A5_NR 32

#define A5_INIT(I)                                                                                            \
    __m512 r##I##a = _mm512_setzero_ps(), r##I##b = _mm512_setzero_ps();                                     \
    if (mr > I && accumulate) {                                                                               \
        r##I##a = _mm512_maskz_loadu_ps(m0, c + I * ldc);                                                     \
        if (nv == 2) r##I##b = _mm512_maskz_loadu_ps(m1, c + I * ldc + 16);                                   \
    }
#define A5_FMA(I)                                                                                             \
    if (mr > I) {                                                                                             \
        const __m512 ai = _mm512_set1_ps(ap[I * a_rs]);                                                       \
        r##I##a = _mm512_fmadd_ps(ai, b0, r##I##a);                                                           \
        if (nv == 2) r##I##b = _mm512_fmadd_ps(ai, b1, r##I##b);                                              \
    }
#define A5_STORE(I)                                                                                           \
    if (mr > I) {                                                                                             \
        if (scaled) r##I##a = _mm512_mul_ps(r##I##a, s), r##I##b = _mm512_mul_ps(r##I##b, s);                 \
        _mm512_mask_storeu_ps(c + I * ldc, m0, r##I##a);                                                      \
        if (nv == 2) _mm512_mask_storeu_ps(c + I * ldc + 16, m1, r##I##b);                                    \
    }

/* Rows [0, mr) of C, columns [0, nc) in nv vectors (masked loads and stores cost as much as plain ones here). */
static inline __attribute__((always_inline)) AVX512 void
tile_avx512(size_t mr, size_t nv, size_t nc, size_t K, const float *a, size_t a_rs, size_t a_cs, const float *b,
            size_t ldb, float *c, size_t ldc, float scale, bool accumulate) {
    const __mmask16 m0 = avx512_lanes(nc), m1 = avx512_lanes(nc > 16 ? nc - 16 : 0);
    const bool scaled = scale != 1.0f;
    const __m512 s = _mm512_set1_ps(scale);
    A5_INIT(0) A5_INIT(1) A5_INIT(2) A5_INIT(3) A5_INIT(4) A5_INIT(5) A5_INIT(6) A5_INIT(7)
    for (size_t p = 0; p < K; p++) {
        const float *bp = b + p * ldb, *ap = a + p * a_cs;
        const __m512 b0 = _mm512_maskz_loadu_ps(m0, bp);
        const __m512 b1 = nv == 2 ? _mm512_maskz_loadu_ps(m1, bp + 16) : b0;
        A5_FMA(0) A5_FMA(1) A5_FMA(2) A5_FMA(3) A5_FMA(4) A5_FMA(5) A5_FMA(6) A5_FMA(7)
    }
    A5_STORE(0) A5_STORE(1) A5_STORE(2) A5_STORE(3) A5_STORE(4) A5_STORE(5) A5_STORE(6) A5_STORE(7)
}

#define A5_CASE(R)                                                                                            \
    case R:                                                                                                   \
        if (nc > 16) tile_avx512(R, 2, nc, K, a, a_rs, a_cs, b, ldb, c, ldc, scale, accumulate);              \
        else tile_avx512(R, 1, nc, K, a, a_rs, a_cs, b, ldb, c, ldc, scale, accumulate);                      \
        break;

/* Rows [0, mr) (mr <= A5_MR) over one block of nc <= A5_NR columns. */
static AVX512 void rows_avx512(size_t mr, size_t nc, size_t K, const float *a, size_t a_rs, size_t a_cs,
                               const float *b, size_t ldb, float *c, size_t ldc, float scale, bool accumulate) {
    switch (mr) {
        A5_CASE(1) A5_CASE(2) A5_CASE(3) A5_CASE(4) A5_CASE(5) A5_CASE(6) A5_CASE(7) A5_CASE(8)
    default: break;
    }
}

static AVX512 void gemm_avx512(size_t M, size_t N, size_t K, sgemm_mat a, const float *b, size_t ldb, float *c,
                               size_t ldc, float scale, bool accumulate) {
    for (size_t j = 0; j < N; j += A5_NR) {
        const size_t nc = N - j < A5_NR ? N - j : A5_NR;
        for (size_t i = 0; i < M; i += A5_MR)
            rows_avx512(M - i < A5_MR ? M - i : A5_MR, nc, K, a.p + i * a.rs, a.rs, a.cs, b + j, ldb,
                        c + i * ldc + j, ldc, scale, accumulate);
    }
}
#endif

static bool has_avx2_fma(void) { return kernel_isa_now() >= KERNEL_ISA_AVX2; }

bool small_gemm_path_available(small_gemm_path p) {
    switch (p) {
    case SMALL_GEMM_AVX2: return has_avx2_fma();
    case SMALL_GEMM_AVX512: return gemm_direct_has_avx512();
    default: return true;
    }
}

bool small_gemm_force_path(small_gemm_path p) {
    if (!small_gemm_path_available(p)) return false;
    forced = p;
    return true;
}

/* The path a product takes: the forced one, else the fastest the CPU has. */
static small_gemm_path path_now(void) {
    if (forced != SMALL_GEMM_FASTEST) return forced;
    if (gemm_direct_has_avx512()) return SMALL_GEMM_AVX512;
    return has_avx2_fma() ? SMALL_GEMM_AVX2 : SMALL_GEMM_PORTABLE;
}

void small_gemm(size_t M, size_t N, size_t K, sgemm_mat a, const float *b, size_t ldb, float *c, size_t ldc,
                float scale, bool accumulate) {
    if (M == 0 || N == 0) return;
    switch (path_now()) {
#ifdef SNUG_AVX512
    case SMALL_GEMM_AVX512: gemm_avx512(M, N, K, a, b, ldb, c, ldc, scale, accumulate); return;
#endif
#if defined(__x86_64__) && defined(__GNUC__)
    case SMALL_GEMM_AVX2: gemm_avx2(M, N, K, a, b, ldb, c, ldc, scale, accumulate); return;
#endif
    default: gemm_portable(M, N, K, a, b, ldb, c, ldc, scale, accumulate); return;
    }
}

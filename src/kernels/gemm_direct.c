/* gemm_direct: register tiles of MR rows x 32 columns of C, each a loop over K of two 16-float loads of a B row
 * and MR broadcasts of A, fused multiply-adds into 2 MR accumulators. The last columns use masked loads and
 * stores, so any N works without a scalar tail. Compiled for AVX-512 through a function attribute (the build
 * has no -march) and chosen at run time. */
#include "kernels/gemm_direct.h"

#include <cblas.h>
#include <omp.h>

#include "core/parallel.h"
#include "kernels/avx512.h"
#include "kernels/isa.h"

/* Rows of C in one register tile, and columns (two AVX-512 vectors). */
#define MR 8
#define NR 32
/* Below this many multiply-adds the threads cost more than they save. */
#define GEMM_PAR_MIN ((size_t)1 << 20)

#ifdef SNUG_AVX512

/* One tile: rows [0, mr) of C, columns [0, 16 nv) with the last vector masked by `tail`. mr and nv are
 * constants at every call site (the switch below), so the branches fold away and the accumulators, named
 * variables rather than an array (which GCC keeps spilling to the stack), live in registers. */
#define ROW_INIT(I)                                                                                           \
    __m512 r##I##a = _mm512_setzero_ps(), r##I##b = _mm512_setzero_ps();                                     \
    if (mr > I && bias) r##I##a = r##I##b = _mm512_set1_ps(bias[I]);                                          \
    if (mr > I && accumulate) {                                                                               \
        r##I##a = _mm512_maskz_loadu_ps(m0, c + I * ldc);                                                     \
        if (nv == 2) r##I##b = _mm512_maskz_loadu_ps(m1, c + I * ldc + 16);                                   \
    }
#define ROW_FMA(I)                                                                                            \
    if (mr > I) {                                                                                             \
        const __m512 ai = _mm512_set1_ps(ap[I * a_rs]);                                                       \
        r##I##a = _mm512_fmadd_ps(ai, b0, r##I##a);                                                           \
        if (nv == 2) r##I##b = _mm512_fmadd_ps(ai, b1, r##I##b);                                              \
    }
#define ROW_STORE(I)                                                                                          \
    if (mr > I) {                                                                                             \
        _mm512_mask_storeu_ps(c + I * ldc, m0, r##I##a);                                                      \
        if (nv == 2) _mm512_mask_storeu_ps(c + I * ldc + 16, m1, r##I##b);                                    \
    }

static inline __attribute__((always_inline)) AVX512 void
tile(size_t mr, size_t nv, __mmask16 tail, size_t K, const float *a, size_t a_rs, size_t a_cs, // A (mr, K)
     const float *b, size_t ldb, // (K, 16 nv)
     float *c, size_t ldc,       // (mr, 16 nv)
     const float *bias,          // (mr) or NULL
     bool accumulate) {
    const __mmask16 m0 = nv == 1 ? tail : 0xFFFF, m1 = tail;
    ROW_INIT(0) ROW_INIT(1) ROW_INIT(2) ROW_INIT(3) ROW_INIT(4) ROW_INIT(5) ROW_INIT(6) ROW_INIT(7)
    for (size_t p = 0; p < K; p++) {
        const float *bp = b + p * ldb, *ap = a + p * a_cs;
        const __m512 b0 = _mm512_maskz_loadu_ps(m0, bp);
        const __m512 b1 = nv == 2 ? _mm512_maskz_loadu_ps(m1, bp + 16) : b0;
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5) ROW_FMA(6) ROW_FMA(7)
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5) ROW_STORE(6) ROW_STORE(7)
}

/* The rows [0, mr) (mr <= MR) over one column block of width nc <= NR. */
#define TILE_CASE(R)                                                                                          \
    case R:                                                                                                   \
        if (nv == 2) tile(R, 2, tail, K, a, a_rs, a_cs, b, ldb, c, ldc, bias, accumulate);                          \
        else tile(R, 1, tail, K, a, a_rs, a_cs, b, ldb, c, ldc, bias, accumulate);                            \
        break;

static AVX512 void tile_rows(size_t mr, size_t nc, size_t K, const float *a, size_t a_rs, size_t a_cs,
                             const float *b, size_t ldb, float *c, size_t ldc, const float *bias, bool accumulate) {
    const size_t nv = nc > 16 ? 2 : 1, last = nc - (nv - 1) * 16;
    const __mmask16 tail = (__mmask16)(last == 16 ? 0xFFFFu : (1u << last) - 1u);
    switch (mr) {
        TILE_CASE(1) TILE_CASE(2) TILE_CASE(3) TILE_CASE(4) TILE_CASE(5) TILE_CASE(6) TILE_CASE(7) TILE_CASE(8)
    default: break;
    }
}

/* Column blocks [j0, j1) of NR columns: every row block over one column block while its B panel is in cache. */
static AVX512 void gemm_avx512(size_t M, size_t N, size_t K, const float *a, size_t a_rs, size_t a_cs,
                               const float *b, size_t ldb, float *c, size_t ldc, const float *bias,
                               bool accumulate, size_t j0, size_t j1) {
    for (size_t jb = j0; jb < j1; jb++) {
        const size_t j = jb * NR, nc = N - j < NR ? N - j : NR;
        for (size_t i = 0; i < M; i += MR)
            tile_rows(M - i < MR ? M - i : MR, nc, K, a + i * a_rs, a_rs, a_cs, b + j, ldb, c + i * ldc + j, ldc,
                      bias ? bias + i : NULL, accumulate);
    }
}

/* C += A B^T with both operands read along their rows (the weight gradient: dW += dY col^T, an inner
 * dimension of pixels). A tile of mr x nr dot products, each a 16-lane partial sum over K, reduced across
 * lanes once at the end: a fixed order, so fixed bits. */
#define DOT_INIT(I, J) __m512 d##I##J = _mm512_setzero_ps();
#define DOT_FMA(I, J)                                                                                         \
    if (mr > I && nr > J) d##I##J = _mm512_fmadd_ps(a##I, b##J, d##I##J);
#define DOT_LOAD_A(I) const __m512 a##I = mr > I ? _mm512_maskz_loadu_ps(m, a + I * lda + p) : _mm512_setzero_ps();
#define DOT_LOAD_B(J) const __m512 b##J = nr > J ? _mm512_maskz_loadu_ps(m, b + J * ldb + p) : _mm512_setzero_ps();
#define DOT_STORE(I, J)                                                                                       \
    if (mr > I && nr > J) c[I * ldc + J] += _mm512_reduce_add_ps(d##I##J);
#define DOT_ROW(X, I) X(I, 0) X(I, 1) X(I, 2) X(I, 3)
#define DOT_ALL(X) DOT_ROW(X, 0) DOT_ROW(X, 1) DOT_ROW(X, 2) DOT_ROW(X, 3)

static inline __attribute__((always_inline)) AVX512 void
tile_nt(size_t mr, size_t nr, size_t K, const float *a, size_t lda, // (mr, K)
        const float *b, size_t ldb,                                  // (nr, K)
        float *c, size_t ldc) {                                      // (mr, nr)
    DOT_ALL(DOT_INIT)
    for (size_t p = 0; p < K; p += 16) {
        const __mmask16 m = (__mmask16)(K - p >= 16 ? 0xFFFFu : (1u << (K - p)) - 1u);
        DOT_LOAD_A(0) DOT_LOAD_A(1) DOT_LOAD_A(2) DOT_LOAD_A(3)
        DOT_LOAD_B(0) DOT_LOAD_B(1) DOT_LOAD_B(2) DOT_LOAD_B(3)
        DOT_ALL(DOT_FMA)
    }
    DOT_ALL(DOT_STORE)
}

/* Row blocks of 4 of B in [j0, j1). */
static AVX512 void gemm_nt_avx512(size_t M, size_t N, size_t K, const float *a, size_t lda, const float *b,
                                  size_t ldb, float *c, size_t ldc, size_t j0, size_t j1) {
    for (size_t i = 0; i < M; i += 4) {
        const bool full_m = M - i >= 4;
        for (size_t j = 4 * j0; j < N && j < 4 * j1; j += 4) {
            const bool full_n = N - j >= 4;
            const float *ai = a + i * lda, *bj = b + j * ldb;
            float *cij = c + i * ldc + j;
            if (full_m && full_n) {
                tile_nt(4, 4, K, ai, lda, bj, ldb, cij, ldc);
                continue;
            }
            if (full_n) { /* fewer rows (a micro-batch of 1-3): still 4 chains a row, not one latency-bound one */
                if (M - i == 1) tile_nt(1, 4, K, ai, lda, bj, ldb, cij, ldc);
                else if (M - i == 2) tile_nt(2, 4, K, ai, lda, bj, ldb, cij, ldc);
                else tile_nt(3, 4, K, ai, lda, bj, ldb, cij, ldc);
                continue;
            }
            /* the edges, one dot product at a time */
            for (size_t ii = 0; ii < (full_m ? 4 : M - i); ii++)
                for (size_t jj = 0; jj < (full_n ? 4 : N - j); jj++)
                    tile_nt(1, 1, K, ai + ii * lda, lda, bj + jj * ldb, ldb, cij + ii * ldc + jj, ldc);
        }
    }
}

#endif

bool gemm_direct_has_avx512(void) { return kernel_isa_now() >= KERNEL_ISA_AVX512; }

/* The same product through the BLAS: one of A's strides must be 1 (a row-major A or its transpose). */
static void gemm_blas(size_t M, size_t N, size_t K, const float *a, size_t a_rs, size_t a_cs, const float *b,
                      size_t ldb, float *c, size_t ldc, const float *bias, bool accumulate) {
    const bool rows = a_cs == 1;
    if (bias && !accumulate) {
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) c[i * ldc + j] = bias[i];
    }
    cblas_sgemm(CblasRowMajor, rows ? CblasNoTrans : CblasTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a,
                (int)(rows ? a_rs : a_cs), b, (int)ldb, accumulate || bias ? 1.0f : 0.0f, c, (int)ldc);
}

void gemm_direct(size_t M, size_t N, size_t K, const float *a, size_t a_rs, size_t a_cs, const float *b, size_t ldb,
                 float *c, size_t ldc, const float *bias, bool accumulate) {
    if (M == 0 || N == 0) return;
#ifdef SNUG_AVX512
    if (gemm_direct_has_avx512()) {
        const size_t blocks = (N + NR - 1) / NR;
        const bool par = blocks > 1 && M * N * K >= GEMM_PAR_MIN && par_pays_macs(M * N * K);
        if (!par) {
            gemm_avx512(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, bias, accumulate, 0, blocks);
            return;
        }
        #pragma omp parallel
        {
            const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            gemm_avx512(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, bias, accumulate, blocks * t / T,
                        blocks * (t + 1) / T);
        }
        return;
    }
#endif
    gemm_blas(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, bias, accumulate);
}

void gemm_direct_nt(size_t M, size_t N, size_t K, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                    size_t ldc) {
    if (M == 0 || N == 0 || K == 0) return;
#ifdef SNUG_AVX512
    /* Against OpenBLAS on AVX-512 (docs/performance.md): faster with 16 rows or a long inner dimension (its
     * packing dominates), slower with 32 to 64 rows and a short one (ResNet-20's last stage). */
    if (gemm_direct_has_avx512() && (M <= 16 || K >= 4096)) {
        const size_t blocks = (N + 3) / 4;
        const bool par = blocks > 1 && M * N * K >= GEMM_PAR_MIN && par_pays_macs(M * N * K);
        if (!par) {
            gemm_nt_avx512(M, N, K, a, lda, b, ldb, c, ldc, 0, blocks);
            return;
        }
        /* threads own disjoint columns of C: the same bits as one thread */
        #pragma omp parallel
        {
            const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
            gemm_nt_avx512(M, N, K, a, lda, b, ldb, c, ldc, blocks * t / T, blocks * (t + 1) / T);
        }
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, a, (int)lda, b, (int)ldb,
                1.0f, c, (int)ldc);
}

/* sgemm (sgemm.h): blocks of B and A packed into the caller's workspace, an 8 x 32 register tile of fused
 * multiply-adds, threads over disjoint parts of C; the claimed scheme's tiles prefetch what the next packing
 * and the next tile will read (prefetch_rows). Compiled for AVX-512 through a function attribute (the build
 * has no -march) and used only where the CPU has it. */
#include "kernels/sgemm.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "kernels/avx512.h"
#include "kernels/bf16.h"
#include "kernels/gemm_direct.h"
#include "kernels/transpose.h"

/* The register tile: MR rows (a packed strip of SR = MR rows) by NR columns (two vectors), 16 accumulators.
 * Against 12 and 14 rows and 16-row strips read in halves it measured within the noise at the MLP's and GPT's
 * shapes (docs/performance.md), and 8 divides the usual batch sizes. */
#define MR 8
#define SR 8
#define NR 32
/* Cache blocks: an A block (MC x KC, 128 KiB) stays in L2 while the B panels (KC x NR, 32 KiB each) stream
 * through L1; a B block is KC x NC (512 KiB). */
#define KC 256
#define MC 128
#define NC 512
/* The most packed operand (all of it, all of K) for which two threads claim panels of the other from both
 * ends (run_claimed). */
#define CLAIM_FLOATS ((size_t)256 * 1024)

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }
static size_t round_up(size_t a, size_t to) { return (a + to - 1) / to * to; }

/* The depth of K's blocks: at most KC, and as even as the fewest blocks allow, so that no block is a short
 * remainder (784 = 3 x 256 + 16 left every tile a 16-step pass that loaded and stored its C for little work:
 * 4 x 196 instead). Every element's chain still runs over k in order, carried through C: the same bits. */
static size_t k_block(size_t K) {
    const size_t blocks = (K + KC - 1) / KC;
    return (K + blocks - 1) / blocks;
}

bool sgemm_enabled(void) { return gemm_direct_has_avx512(); }

/* The blocks one thread packs: its A block and its B block. */
static size_t thread_floats(size_t M, size_t N, size_t K) {
    const size_t kc = min_size(K, KC);
    return min_size(round_up(M, SR), MC) * kc + kc * min_size(round_up(N, NR), NC);
}

/* The rows a thread takes from which a product splits rows rather than columns (split_cols). */
#define ROWS_EACH ((size_t)256)

/* Whether N columns give each of T threads two panels. */
static bool cols_enough(size_t N, size_t T) { return N >= T * 2 * NR; }

/* Whether T threads split the columns (each packs all of A) rather than the rows (each packs all of B): when
 * A is the smaller operand and there are panels enough for every thread. A tie splits the rows: each thread
 * then walks C along its rows, where split columns walk C down a 32-column panel, rows ldc apart; at ldc = 1024
 * floats the rows of a tile and of the next one fall into the same L1 sets, and the prefetch of the next
 * tile's C evicted the lines this tile was about to store (the mlp's 1024 x 1024 weight gradient: four
 * 64-row calls took 1.2 times one 256-row call with the columns split, 1.03 times with the rows).
 * From ROWS_EACH rows a thread, where each thread can pack all of B for the claimed scheme, the rows are split
 * whatever the sizes: a linear layer's rows are its samples, which the ops before and after it split between
 * the threads the same way, so each thread packs and writes its own samples' rows, where split columns had
 * each thread pack every row of A (half of them written by the other thread) and write a column range of every
 * row. On a host whose two cores do not share a cache those lines cross between them: the GPT's 512-row
 * micro-batches (4 per step) ran 0.90-0.95 of full batch's speed, 0.95-0.98 with the rows split (6 paired runs
 * with the cores apart; equal sharing a cache), full batch's 2048 rows split them already. */
static bool cols_by_shape(size_t M, size_t N, size_t T) { return cols_enough(N, T) && (M < N || M < T * 2 * SR); }
static bool rows_by_samples(size_t M, size_t T) { return M >= T * ROWS_EACH; }
static bool split_cols(size_t M, size_t N, size_t K, size_t T) {
    if (rows_by_samples(M, T) && round_up(N, NR) * K <= CLAIM_FLOATS) return false;
    return cols_by_shape(M, N, T);
}

/* The claimed scheme (run_claimed) at M rows or fewer: all of one operand packed, one panel of the other.
 * Capped at CLAIM_FLOATS so that the bound stays monotone in every size (the scheme is not used above the
 * cap). B is packed whole only where some call of at most M rows may split the rows (split_cols's two
 * conditions, each monotone in M; without the one on B's size, which would make the bound fall as K grows
 * past it): a weight's din or dW with a few rows never
 * packs the weight whole, and its bound must not say it does (the cnn's 3136x128 layer at 8 rows: 2 MiB of
 * workspace planned for 70 KiB used). */
static size_t claimed_floats(size_t M, size_t N, size_t K) {
    const size_t cols = min_size(round_up(M, SR) * K, CLAIM_FLOATS) + KC * NR;
    const bool rows_possible = !cols_by_shape(M, N, 2) || rows_by_samples(M, 2);
    const size_t rows = rows_possible ? min_size(round_up(N, NR) * K, CLAIM_FLOATS) + KC * SR : 0;
    return cols > rows ? cols : rows;
}

size_t sgemm_workspace_floats(size_t M, size_t N, size_t K, int threads) {
    const size_t per = thread_floats(M, N, K), claimed = threads >= 2 ? claimed_floats(M, N, K) : 0;
    return (size_t)(threads > 1 ? threads : 1) * (per > claimed ? per : claimed);
}

#ifdef SNUG_AVX512

/* How a tile starts: from zero, from C, or from its columns' biases. */
enum { START_ZERO, START_C, START_BIAS };

/* Rows [i0, i0 + rows) of A, columns [p0, p0 + kc), as consecutive strips of SR rows kc * SR floats apart:
 * dst[s * SR * kc + p * SR + i] = A(i0 + s * SR + i, p0 + p), zero for the rows past the last, so that the tile
 * computes padded rows without branching. A row-major A is turned two strips per 16 x 16 register block. */
static AVX512 void pack_a(float *dst, sgemm_mat a, size_t i0, size_t rows, size_t p0, size_t kc) {
    _Static_assert(SR == 8, "transpose_to_strips8 packs strips of 8 rows");
    if (a.cs == 1) {
        transpose_to_strips8(dst, SR * kc, a.p + i0 * a.rs + p0, a.rs, rows, kc);
        return;
    }
    for (size_t s = 0; s * SR < rows; s++) {
        const size_t n = rows - s * SR < SR ? rows - s * SR : SR;
        const __mmask16 m = avx512_lanes(n), strip = avx512_lanes(SR);
        for (size_t p = 0; p < kc; p++)
            _mm512_mask_storeu_ps(dst + s * SR * kc + p * SR, strip,
                                  _mm512_maskz_loadu_ps(m, a.p + (p0 + p) * a.cs + i0 + s * SR));
    }
}

/* Panel of `cols` (<= NR) columns of B from column j0, rows [p0, p0 + kc): dst[p * NR + j] = B(p0 + p, j0 + j),
 * zero for j >= cols. */
static AVX512 void pack_b(float *dst, sgemm_mat b, size_t j0, size_t cols, size_t p0, size_t kc) {
    if (b.cs == 1) {
        const __mmask16 m0 = avx512_lanes(cols), m1 = avx512_lanes(cols > 16 ? cols - 16 : 0);
        for (size_t p = 0; p < kc; p++) {
            const float *src = b.p + (p0 + p) * b.rs + j0;
            _mm512_storeu_ps(dst + p * NR, _mm512_maskz_loadu_ps(m0, src));
            _mm512_storeu_ps(dst + p * NR + 16, _mm512_maskz_loadu_ps(m1, src + 16));
        }
        return;
    }
    transpose_floats(dst, NR, b.p + j0 * b.cs + p0, b.cs, cols, kc);
    if (cols < NR)
        for (size_t p = 0; p < kc; p++) memset(dst + p * NR + cols, 0, (NR - cols) * sizeof *dst);
}

/* The lines of an operand block that the next packing will read, fetched one per step of the tiles before it:
 * that packing then finds them in cache instead of waiting on a miss per row (a weight's rows are a page apart,
 * which the hardware prefetchers do not follow; packing the mlp's 1024 x 1024 weight for a 64-row micro-batch
 * took 21% of its products). rows == 0: nothing (left) to fetch. */
typedef struct prefetch_rows {
    const char *row, *at; /* the current row's first byte, the next line to fetch */
    size_t stride, bytes; /* bytes between rows, bytes of a row */
    size_t rows;          /* rows left, the current one included */
} prefetch_rows;

static prefetch_rows prefetch_block(const float *first, size_t stride, size_t len, size_t rows) {
    const char *row = (const char *)first;
    return (prefetch_rows){.row = row, .at = (const char *)((uintptr_t)row & ~(uintptr_t)63),
                           .stride = stride * sizeof(float), .bytes = len * sizeof(float), .rows = len ? rows : 0};
}

/* The source of pack_a(dst, a, i0, rows, p0, kc) and of pack_b(dst, b, j0, cols, p0, kc). */
static prefetch_rows prefetch_a(sgemm_mat a, size_t i0, size_t rows, size_t p0, size_t kc) {
    return a.cs == 1 ? prefetch_block(a.p + i0 * a.rs + p0, a.rs, kc, rows)
                     : prefetch_block(a.p + p0 * a.cs + i0, a.cs, rows, kc);
}
static prefetch_rows prefetch_b(sgemm_mat b, size_t j0, size_t cols, size_t p0, size_t kc) {
    return b.cs == 1 ? prefetch_block(b.p + p0 * b.rs + j0, b.rs, cols, kc)
                     : prefetch_block(b.p + j0 * b.cs + p0, b.cs, kc, cols);
}

static inline __attribute__((always_inline)) void prefetch_step(prefetch_rows *f) {
    if (!f->rows) return;
    _mm_prefetch(f->at, _MM_HINT_T1);
    f->at += 64;
    if (f->at >= f->row + f->bytes && --f->rows) {
        f->row += f->stride;
        f->at = (const char *)((uintptr_t)f->row & ~(uintptr_t)63);
    }
}

/* The tile's accumulators are named variables (an array gets spilled to the stack); rows >= mr are computed
 * from A's zero padding and never loaded or stored. */
#define T_START(I)                                                                                            \
    __m512 r##I##a = _mm512_setzero_ps(), r##I##b = _mm512_setzero_ps();                                     \
    if (start == START_BIAS) r##I##a = bias0, r##I##b = bias1;                                                \
    if (start == START_C && mr > I) {                                                                         \
        r##I##a = _mm512_maskz_loadu_ps(m0, c + I * ldc);                                                     \
        r##I##b = _mm512_maskz_loadu_ps(m1, c + I * ldc + 16);                                                \
    }
#define T_FMA(I)                                                                                              \
    {                                                                                                         \
        const __m512 ai = _mm512_set1_ps(ap[I]);                                                              \
        r##I##a = _mm512_fmadd_ps(ai, b0, r##I##a);                                                           \
        r##I##b = _mm512_fmadd_ps(ai, b1, r##I##b);                                                           \
    }
#define T_STORE(I)                                                                                            \
    if (mr > I) {                                                                                             \
        _mm512_mask_storeu_ps(c + I * ldc, m0, r##I##a);                                                      \
        _mm512_mask_storeu_ps(c + I * ldc + 16, m1, r##I##b);                                                 \
    }
#define T_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* C rows [0, mr), columns [0, nr) of one tile, over kc steps of the packed A (stride SR) and B (stride NR).
 * Along the way: a line of pf per step, and the first next_rows rows of the next tile's C (at next_c), whose
 * loads would otherwise stall the next tile's start (a weight gradient's rows are a page apart too). */
static inline __attribute__((always_inline)) AVX512 void
tile(size_t kc, const float *a, const float *b, float *c, size_t ldc, size_t mr, size_t nr, int start,
     const float *bias, prefetch_rows *pf, const float *next_c, size_t next_rows) {
    const __mmask16 m0 = avx512_lanes(nr), m1 = avx512_lanes(nr > 16 ? nr - 16 : 0);
    const __m512 bias0 = start == START_BIAS ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    const __m512 bias1 = start == START_BIAS ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    T_ROWS(T_START)
    for (size_t p = 0; p < kc; p++) {
        const float *ap = a + p * SR;
        const __m512 b0 = _mm512_loadu_ps(b + p * NR), b1 = _mm512_loadu_ps(b + p * NR + 16);
        T_ROWS(T_FMA)
        prefetch_step(pf);
        if (p < 2 * next_rows) _mm_prefetch((const char *)(next_c + (p >> 1) * ldc + (p & 1) * 16), _MM_HINT_T0);
    }
    T_ROWS(T_STORE)
}

static AVX512 void tile_start(size_t kc, const float *a, const float *b, float *c, size_t ldc, size_t mr,
                              size_t nr, int start, const float *bias, prefetch_rows *pf, const float *next_c,
                              size_t next_rows) {
    switch (start) {
    case START_ZERO: tile(kc, a, b, c, ldc, mr, nr, START_ZERO, NULL, pf, next_c, next_rows); break;
    case START_C:    tile(kc, a, b, c, ldc, mr, nr, START_C, NULL, pf, next_c, next_rows); break;
    default:         tile(kc, a, b, c, ldc, mr, nr, START_BIAS, bias, pf, next_c, next_rows); break;
    }
}

/* The part of C in rows [m0, m1) and columns [n0, n1), with this thread's packing buffers. */
typedef struct sgemm_job {
    size_t K;
    sgemm_mat a, b;
    float *c;
    size_t ldc;
    const float *bias;
    bool accumulate;
    bool round;        /* sgemm_rounded: each block of C rounded once final, its bfloat16 into packed */
    uint16_t *packed;  /* NULL: rounded in place only */
    const uint16_t *a16; /* sgemm_a16: A in bfloat16, rows a.rs apart (a.p unused) */
    const uint16_t *b16; /* sgemm_b16: B in bfloat16, rows b.rs apart (b.p unused) */
} sgemm_job;

/* pack_a for sgemm_a16's bfloat16 A: 16 rows at a time widened into a stage on the stack (exact), then turned
 * into strips as a float32 A's rows are, so the panels hold the same floats. */
static AVX512 void pack_a16(float *dst, const uint16_t *a, size_t lda, size_t i0, size_t rows, size_t p0, size_t kc) {
    float stage[2 * SR * KC];
    for (size_t g = 0; g < rows; g += 2 * SR) {
        const size_t n = min_size(2 * SR, rows - g);
        for (size_t i = 0; i < n; i++) bf16_unpack(stage + i * kc, a + (i0 + g + i) * lda + p0, kc);
        transpose_to_strips8(dst + g / SR * SR * kc, SR * kc, stage, kc, n, kc);
    }
}

/* The job's A block (pack_a's arguments) from its floats or its bfloat16 values. */
static AVX512 void pack_a_of(const sgemm_job *j, float *dst, size_t i0, size_t rows, size_t p0, size_t kc) {
    if (j->a16) pack_a16(dst, j->a16, j->a.rs, i0, rows, p0, kc);
    else pack_a(dst, j->a, i0, rows, p0, kc);
}

/* pack_b for sgemm_b16's bfloat16 B stored by rows: each row's 32 values widened (exact: a bfloat16 is the top
 * half of its float32) as they are stored, so the panel holds the floats pack_b stores from the widened B. */
static AVX512 void pack_b16(float *dst, const uint16_t *b, size_t ldb, size_t j0, size_t cols, size_t p0, size_t kc) {
    for (size_t p = 0; p < kc; p++) {
        const uint16_t *src = b + (p0 + p) * ldb + j0;
        if (cols < NR) { /* a last, narrow panel: zeros past its columns, as pack_b's */
            for (size_t c = 0; c < NR; c++) dst[p * NR + c] = c < cols ? bf16_to_float(src[c]) : 0.0f;
            continue;
        }
        const __m512i v = _mm512_loadu_si512(src);
        _mm512_storeu_ps(dst + p * NR, avx512_bf16_widen(_mm512_castsi512_si256(v)));
        _mm512_storeu_ps(dst + p * NR + 16, avx512_bf16_widen(_mm512_extracti64x4_epi64(v, 1)));
    }
}

/* The job's B panel (pack_b's arguments) from its floats or its bfloat16 values. */
static AVX512 void pack_b_of(const sgemm_job *j, float *dst, size_t j0, size_t cols, size_t p0, size_t kc) {
    if (j->b16) pack_b16(dst, j->b16, j->b.rs, j0, cols, p0, kc);
    else pack_b(dst, j->b, j0, cols, p0, kc);
}

/* A(i, k) of the job as a float. */
static inline float a_value(const sgemm_job *j, size_t i, size_t k) {
    return j->a16 ? bf16_to_float(j->a16[i * j->a.rs + k]) : j->a.p[i * j->a.rs + k * j->a.cs];
}

/* sgemm_rounded: rows [i0, i0 + rows) by columns [j0, j0 + cols) of C, whose last block of K was just added,
 * rounded while they are in cache. */
static void finish_block(const sgemm_job *j, size_t i0, size_t rows, size_t j0, size_t cols) {
    if (!j->round) return;
    for (size_t i = i0; i < i0 + rows; i++) {
        float *ci = j->c + i * j->ldc + j0;
        if (j->packed) bf16_round_pack(ci, j->packed + i * j->ldc + j0, cols);
        else bf16_round_floats(ci, ci, cols);
    }
}

/* The tiles of one A block against one B block: every A strip against one B panel at a time, the panel kept in
 * L1 while the strips stream from L2. (The short-K weight updates whose C traffic would want rows outer go
 * through small_k instead.) */
static AVX512 void tiles(const sgemm_job *j, const float *abuf, const float *bbuf, size_t ic, size_t mc, size_t jc,
                         size_t nc, size_t kc, int start) {
    prefetch_rows none = {0};
    for (size_t jr = 0; jr < nc; jr += NR)
        for (size_t ir = 0; ir < mc; ir += MR)
            tile_start(kc, abuf + ir * kc, bbuf + jr * kc, j->c + (ic + ir) * j->ldc + jc + jr, j->ldc,
                       min_size(MR, mc - ir), min_size(NR, nc - jr), start, j->bias ? j->bias + jc + jr : NULL,
                       &none, j->c + (ic + ir + MR) * j->ldc + jc + jr, ir + MR < mc ? min_size(MR, mc - ir - MR) : 0);
}

static AVX512 void run_part(const sgemm_job *j, size_t m0, size_t m1, size_t n0, size_t n1, float *work) {
    float *abuf = work, *bbuf = work + min_size(round_up(m1 - m0, SR), MC) * min_size(j->K, KC);
    for (size_t jc = n0; jc < n1; jc += NC) {
        const size_t nc = min_size(NC, n1 - jc);
        const size_t kb = k_block(j->K);
        for (size_t pc = 0; pc < j->K; pc += kb) {
            const size_t kc = min_size(kb, j->K - pc);
            const int start = pc > 0 || j->accumulate ? START_C : j->bias ? START_BIAS : START_ZERO;
            for (size_t jr = 0; jr < nc; jr += NR) pack_b_of(j, bbuf + jr * kc, jc + jr, min_size(NR, nc - jr), pc, kc);
            for (size_t ic = m0; ic < m1; ic += MC) {
                const size_t mc = min_size(MC, m1 - ic);
                pack_a_of(j, abuf, ic, mc, pc, kc);
                tiles(j, abuf, bbuf, ic, mc, jc, nc, kc, start);
                if (pc + kc == j->K) finish_block(j, ic, mc, jc, nc);
            }
        }
    }
}

/* Two threads and one small operand: each thread packs all of that operand (every block of K) once, then claims
 * panels of the other (B's columns, or A's strips of rows) from its own end until the two meet, and computes
 * each claimed panel over all of K (so every tile's chain runs in order without a barrier). A static split
 * leaves the faster of two unequal cores (a virtual machine's vCPUs often are) waiting for the other at the end
 * of every product; claiming keeps each thread's panels contiguous, as the static halves were, and lets the faster one
 * go further. */
static AVX512 void run_claimed(const sgemm_job *j, size_t M, size_t N, bool by_cols, float *work, size_t t,
                               size_t *claimed) {
    const size_t K = j->K, mp = round_up(M, SR), np = round_up(N, NR);
    const size_t units = by_cols ? np / NR : mp / SR;
    float *whole = work, *panel = work + (by_cols ? mp : np) * K;
    const size_t kb = k_block(K);
    for (size_t pc = 0; pc < K; pc += kb) {
        const size_t kc = min_size(kb, K - pc);
        if (by_cols)
            pack_a_of(j, whole + pc * mp, 0, M, pc, kc);
        else
            for (size_t jr = 0; jr < N; jr += NR) pack_b_of(j, whole + pc * np + jr * kc, jr, min_size(NR, N - jr), pc, kc);
    }
    for (size_t mine = 0;; mine++) {
        if (__atomic_fetch_add(claimed, 1, __ATOMIC_RELAXED) >= units) break;
        const size_t u = t == 0 ? mine : units - 1 - mine;
        /* The unit this thread will most likely claim next: the other thread comes from the other end. */
        const bool next_ok = t == 0 ? u + 1 < units : u > 0;
        const size_t next = t == 0 ? u + 1 : u - 1;
        for (size_t pc = 0; pc < K; pc += kb) {
            const size_t kc = min_size(kb, K - pc);
            const int start = pc > 0 || j->accumulate ? START_C : j->bias ? START_BIAS : START_ZERO;
            /* the next block to pack: this unit's next block of K, or the next unit's first */
            const bool last = pc + kb >= K, fetch = !last || next_ok;
            const size_t nu = last ? next : u, npc = last ? 0 : pc + kb, nkc = min_size(kb, K - npc);
            prefetch_rows pf = {0};
            if (by_cols) {
                const size_t jr = u * NR, nr = min_size(NR, N - jr);
                if (fetch && !j->b16) pf = prefetch_b(j->b, nu * NR, min_size(NR, N - nu * NR), npc, nkc);
                pack_b_of(j, panel, jr, nr, pc, kc);
                for (size_t ir = 0; ir < M; ir += MR)
                    tile_start(kc, whole + pc * mp + ir * kc, panel, j->c + ir * j->ldc + jr, j->ldc,
                               min_size(MR, M - ir), nr, start, j->bias ? j->bias + jr : NULL, &pf,
                               j->c + (ir + MR) * j->ldc + jr, ir + MR < M ? min_size(MR, M - ir - MR) : 0);
            } else {
                const size_t ir = u * SR, mr = min_size(SR, M - ir);
                if (fetch && !j->a16) pf = prefetch_a(j->a, nu * SR, min_size(SR, M - nu * SR), npc, nkc);
                pack_a_of(j, panel, ir, mr, pc, kc);
                for (size_t jr = 0; jr < N; jr += NR)
                    tile_start(kc, panel, whole + pc * np + jr * kc, j->c + ir * j->ldc + jr, j->ldc, mr,
                               min_size(NR, N - jr), start, j->bias ? j->bias + jr : NULL, &pf,
                               j->c + ir * j->ldc + jr + NR, jr + NR < N ? mr : 0);
            }
        }
        if (by_cols) finish_block(j, 0, M, u * NR, min_size(NR, N - u * NR));
        else finish_block(j, u * SR, min_size(SR, M - u * SR), 0, N);
    }
}

/* Columns [c0, c0 + 16) of row k of a row-major B (those under m), widened where it is bfloat16. */
static inline __attribute__((always_inline)) AVX512 __m512 b_row16(const sgemm_job *j, size_t k, size_t c0, __mmask16 m) {
    if (!j->b16) return _mm512_maskz_loadu_ps(m, j->b.p + k * j->b.rs + c0);
    const uint16_t *src = j->b16 + k * j->b.rs + c0;
    if (m != (__mmask16)0xFFFF) { /* the row's last, partial 16: read no value past its end */
        float w[16];
        for (int c = 0; c < 16; c++) w[c] = m >> c & 1 ? bf16_to_float(src[c]) : 0.0f;
        return _mm512_loadu_ps(w);
    }
    return avx512_bf16_widen(_mm256_loadu_si256((const __m256i *)(const void *)src));
}

/* Rows [i0, i1) of C for an inner dimension of at most SGEMM_SMALL_K with a row-major B (the weight update of a
 * micro-batch of one to three samples): no packing, each row of C streamed once, its chain over k in order as
 * in the tile, so the bits are the tile's. */
static AVX512 void small_k_rows(const sgemm_job *j, size_t N, size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) {
        float *ci = j->c + i * j->ldc;
        for (size_t c0 = 0; c0 < N; c0 += 16) {
            const __mmask16 m = avx512_lanes(N - c0);
            __m512 acc = j->accumulate ? _mm512_maskz_loadu_ps(m, ci + c0)
                         : j->bias     ? _mm512_maskz_loadu_ps(m, j->bias + c0)
                                       : _mm512_setzero_ps();
            for (size_t k = 0; k < j->K; k++)
                acc = _mm512_fmadd_ps(_mm512_set1_ps(a_value(j, i, k)), b_row16(j, k, c0, m), acc);
            _mm512_mask_storeu_ps(ci + c0, m, acc);
        }
        finish_block(j, i, 1, 0, N);
    }
}

static void small_k(const sgemm_job *j, size_t M, size_t N, int T) {
    if (T < 2 || M < 2 || omp_in_parallel() || !par_pays_floats(2 * M * N)) {
        small_k_rows(j, N, 0, M);
        return;
    }
    #pragma omp parallel num_threads(T)
    {
        const size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        small_k_rows(j, N, M * t / nt, M * (t + 1) / nt);
    }
}

void sgemm_start_only(size_t M, size_t N, float *c, size_t ldc, const float *bias, bool accumulate) {
    if (accumulate) return;
    for (size_t i = 0; i < M; i++) {
        if (bias) memcpy(c + i * ldc, bias, N * sizeof *c);
        else memset(c + i * ldc, 0, N * sizeof *c);
    }
}

static void run(const sgemm_job *job, size_t M, size_t N, float *work, int threads) {
    const sgemm_job j = *job;
    const size_t K = j.K;
    if (M == 0 || N == 0) return;
    if (K == 0) {
        sgemm_start_only(M, N, j.c, j.ldc, j.bias, j.accumulate);
        finish_block(&j, 0, M, 0, N);
        return;
    }
    int T = threads < omp_get_max_threads() ? threads : omp_get_max_threads();
    if (K <= SGEMM_SMALL_K && j.b.cs == 1) {
        small_k(&j, M, N, T);
        return;
    }
    if (T < 2 || omp_in_parallel() || !par_pays_macs(M * N * K)) {
        run_part(&j, 0, M, 0, N, work);
        return;
    }
    /* Each thread packs the whole of the operand along the dimension it does not split: split the columns
     * (every thread packs all of A) when A is the smaller operand and there are panels enough for every
     * thread, else the rows (every thread packs all of B). */
    const bool by_cols = split_cols(M, N, K, (size_t)T);
    const size_t unit = by_cols ? NR : SR, units = ((by_cols ? N : M) + unit - 1) / unit;
    const size_t per = thread_floats(by_cols ? M : min_size(M, (units + T - 1) / T * unit),
                                     by_cols ? min_size(N, (units + T - 1) / T * unit) : N, K);
    if (T == 2 && (by_cols ? round_up(M, SR) : round_up(N, NR)) * K <= CLAIM_FLOATS) {
        size_t claimed = 0;
        const size_t per_claimed = claimed_floats(M, N, K);
        #pragma omp parallel num_threads(T)
        run_claimed(&j, M, N, by_cols, work + (size_t)omp_get_thread_num() * per_claimed,
                    (size_t)omp_get_thread_num(), &claimed);
        return;
    }
    #pragma omp parallel num_threads(T)
    {
        const size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        const size_t lo = units * t / nt * unit, hi = units * (t + 1) / nt * unit;
        const size_t end = by_cols ? N : M;
        if (lo < end) {
            if (by_cols) run_part(&j, 0, M, lo, min_size(hi, N), work + t * per);
            else run_part(&j, lo, min_size(hi, M), 0, N, work + t * per);
        }
    }
}

void sgemm(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc, const float *col_bias,
           bool accumulate, float *work, int threads) {
    const sgemm_job j = {.K = K, .a = a, .b = b, .c = c, .ldc = ldc, .bias = col_bias, .accumulate = accumulate};
    run(&j, M, N, work, threads);
}

void sgemm_rounded(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc,
                   const float *col_bias, uint16_t *packed, float *work, int threads) {
    const sgemm_job j = {.K = K, .a = a, .b = b, .c = c, .ldc = ldc, .bias = col_bias, .round = true,
                         .packed = packed};
    run(&j, M, N, work, threads);
}

void sgemm_a16(size_t M, size_t N, size_t K, const uint16_t *a, size_t lda, sgemm_mat b, float *c, size_t ldc,
               const float *col_bias, bool round, uint16_t *packed, float *work, int threads) {
    const sgemm_job j = {.K = K, .a = {.p = NULL, .rs = lda, .cs = 1}, .b = b, .c = c, .ldc = ldc, .bias = col_bias,
                         .round = round, .packed = round ? packed : NULL, .a16 = a};
    run(&j, M, N, work, threads);
}

void sgemm_b16(size_t M, size_t N, size_t K, sgemm_mat a, const uint16_t *b, size_t ldb, float *c, size_t ldc,
               bool accumulate, float *work, int threads) {
    const sgemm_job j = {.K = K, .a = a, .b = {.p = NULL, .rs = ldb, .cs = 1}, .c = c, .ldc = ldc,
                         .accumulate = accumulate, .b16 = b};
    run(&j, M, N, work, threads);
}

#else

void sgemm(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc, const float *col_bias,
           bool accumulate, float *work, int threads) {
    (void)M, (void)N, (void)K, (void)a, (void)b, (void)c, (void)ldc, (void)col_bias, (void)accumulate;
    (void)work, (void)threads;
    abort(); /* sgemm_enabled() is false without AVX-512: callers take the BLAS */
}

void sgemm_rounded(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc,
                   const float *col_bias, uint16_t *packed, float *work, int threads) {
    (void)M, (void)N, (void)K, (void)a, (void)b, (void)c, (void)ldc, (void)col_bias, (void)packed;
    (void)work, (void)threads;
    abort();
}

void sgemm_a16(size_t M, size_t N, size_t K, const uint16_t *a, size_t lda, sgemm_mat b, float *c, size_t ldc,
               const float *col_bias, bool round, uint16_t *packed, float *work, int threads) {
    (void)M, (void)N, (void)K, (void)a, (void)lda, (void)b, (void)c, (void)ldc, (void)col_bias, (void)round;
    (void)packed, (void)work, (void)threads;
    abort();
}

void sgemm_b16(size_t M, size_t N, size_t K, sgemm_mat a, const uint16_t *b, size_t ldb, float *c, size_t ldc,
               bool accumulate, float *work, int threads) {
    (void)M, (void)N, (void)K, (void)a, (void)b, (void)ldb, (void)c, (void)ldc, (void)accumulate, (void)work;
    (void)threads;
    abort();
}

#endif

/* sgemm against the chain of fused multiply-adds it promises, and a double-precision reference, over shapes
 * that cross every block edge (rows not a multiple of the 8-row tile or the 16-row strip, columns not a
 * multiple of 32, K above one 256-deep block and split into even blocks, M above one 128-row block, N above
 * one 512-column block, square products whose two threads split the rows), every combination of a row-major
 * and a transposed A and B, the three starts (zero, C itself, a bias per column), leading dimensions wider than
 * the rows whose padding must stay untouched; the same bits on 1, 2 and 3 threads; the bits of gemm_direct for
 * the same product (the linear layers mix both and promise that a sample's result does not depend on which one
 * ran); and the workspace bound, by handing sgemm exactly sgemm_workspace_floats surrounded by guard values.
 * sgemm_rounded (a bf16 layer's output rounded block by block) gives the bits of sgemm followed by
 * bf16_round_pack on every shape, K = 0 and 1 to 3 threads, with and without the packed copy; sgemm_a16 (A
 * read from bfloat16) the bits of sgemm and sgemm_rounded over the widened A, and sgemm_b16 (B read from
 * bfloat16) those of sgemm over the widened B, within the same workspace. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/gemm_direct.h"
#include "kernels/sgemm.h"
#include "test_util.h"

#define GUARD 64
#define GUARD_VALUE 12345.0f


static const size_t shapes[][3] = {{1, 1, 1},    {3, 5, 2},     {8, 32, 9},     {9, 33, 16},    {17, 100, 5},
                                   {16, 64, 256}, {33, 65, 257}, {130, 70, 300}, {40, 600, 100}, {256, 10, 784},
                                   {10, 784, 256}, {300, 1030, 33}, {128, 128, 40}, {130, 130, 300}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

enum { START_ZERO, START_C, START_BIAS };

typedef struct problem {
    size_t M, N, K, ldc;
    bool at, bt; /* A, B stored transposed */
    float *a, *b, *c0, *bias;
} problem;

static problem make(size_t M, size_t N, size_t K, bool at, bool bt) {
    problem p = {.M = M, .N = N, .K = K, .ldc = N + 3, .at = at, .bt = bt};
    p.a = malloc(M * K * sizeof *p.a), p.b = malloc(K * N * sizeof *p.b);
    p.c0 = malloc(M * p.ldc * sizeof *p.c0), p.bias = malloc(N * sizeof *p.bias);
    assert_true(p.a && p.b && p.c0 && p.bias);
    test_fill(p.a, M * K, 1), test_fill(p.b, K * N, 2), test_fill(p.c0, M * p.ldc, 3), test_fill(p.bias, N, 4);
    return p;
}

static void drop(problem *p) { free(p->a), free(p->b), free(p->c0), free(p->bias); }

/* A (M, K) and B (K, N) as sgemm reads them: row-major, or the transpose of a stored (K, M) / (N, K). */
static sgemm_mat mat_a(const problem *p) {
    return p->at ? (sgemm_mat){p->a, 1, p->M} : (sgemm_mat){p->a, p->K, 1};
}
static sgemm_mat mat_b(const problem *p) {
    return p->bt ? (sgemm_mat){p->b, 1, p->K} : (sgemm_mat){p->b, p->N, 1};
}
static double at(sgemm_mat m, size_t i, size_t j) { return m.p[i * m.rs + j * m.cs]; }

/* A fresh copy of the problem's C. */
static float *copy_c(const problem *p) {
    float *c = malloc(p->M * p->ldc * sizeof *c);
    assert_non_null(c);
    memcpy(c, p->c0, p->M * p->ldc * sizeof *c);
    return c;
}

/* C after sgemm on `threads` threads from the problem's C, with the workspace exactly as large as promised. */
static float *run(const problem *p, int start, int threads) {
    float *c = copy_c(p);
    const size_t wn = sgemm_workspace_floats(p->M, p->N, p->K, threads);
    float *work = malloc((wn + 2 * GUARD) * sizeof *work);
    assert_non_null(work);
    for (size_t i = 0; i < wn + 2 * GUARD; i++) work[i] = GUARD_VALUE;
    omp_set_num_threads(threads);
    sgemm(p->M, p->N, p->K, mat_a(p), mat_b(p), c, p->ldc, start == START_BIAS ? p->bias : NULL, start == START_C,
          work + GUARD, threads);
    for (size_t i = 0; i < GUARD; i++) {
        assert_true(work[i] == GUARD_VALUE);
        assert_true(work[GUARD + wn + i] == GUARD_VALUE);
    }
    free(work);
    return c;
}

/* Every element is the promised chain, fmaf over k in order from its start (bit for bit), and within float
 * rounding of K sequential additions of the double reference; C's padding is intact. */
static void check_values(const problem *p, const float *c, int start) {
    const sgemm_mat a = mat_a(p), b = mat_b(p);
    for (size_t i = 0; i < p->M; i++) {
        for (size_t j = 0; j < p->N; j++) {
            double s = start == START_C ? p->c0[i * p->ldc + j] : start == START_BIAS ? p->bias[j] : 0.0;
            float chain = (float)s;
            for (size_t k = 0; k < p->K; k++) {
                s += at(a, i, k) * at(b, k, j);
                chain = fmaf(a.p[i * a.rs + k * a.cs], b.p[k * b.rs + j * b.cs], chain);
            }
            const double g = c[i * p->ldc + j];
            if (g != chain || fabs(g - s) > 6e-8 * (double)(p->K + 1) * (1.0 + fabs(s)))
                fail_msg("%zux%zux%zu at=%d bt=%d start %d, element (%zu, %zu): got %.9g, want %.9g (chain %.9g)",
                         p->M, p->N, p->K, p->at, p->bt, start, i, j, g, s, chain);
        }
        for (size_t j = p->N; j < p->ldc; j++) assert_true(c[i * p->ldc + j] == p->c0[i * p->ldc + j]);
    }
}

static void test_values(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int layout = 0; layout < 4; layout++) {
            problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], layout & 1, layout & 2);
            for (int start = START_ZERO; start <= START_BIAS; start++) {
                float *c = run(&p, start, 2);
                check_values(&p, c, start);
                free(c);
            }
            drop(&p);
        }
}

/* sgemm_rounded's C and packed copy (NULL: C alone) against sgemm's C rounded after it; C's padding intact. */
static void expect_rounded(const problem *p, int start, int threads, bool copy) {
    float *want = run(p, start, threads);
    const size_t n = p->M * p->ldc;
    bf16 *want16 = malloc(n * sizeof *want16), *got16 = malloc(n * sizeof *got16);
    assert_true(want16 && got16);
    memset(got16, 0xA5, n * sizeof *got16);
    for (size_t i = 0; i < p->M; i++) bf16_round_pack(want + i * p->ldc, want16 + i * p->ldc, p->N);
    float *c = copy_c(p);
    float *work = malloc((sgemm_workspace_floats(p->M, p->N, p->K, threads) + 1) * sizeof *work);
    assert_non_null(work);
    omp_set_num_threads(threads);
    sgemm_rounded(p->M, p->N, p->K, mat_a(p), mat_b(p), c, p->ldc, start == START_BIAS ? p->bias : NULL,
                  copy ? got16 : NULL, work, threads);
    assert_memory_equal(c, want, n * sizeof *c);
    for (size_t i = 0; copy && i < p->M; i++)
        assert_memory_equal(got16 + i * p->ldc, want16 + i * p->ldc, p->N * sizeof *got16);
    free(work), free(c), free(want), free(want16), free(got16);
}

static void test_rounded_as_sgemm_then_rounding(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    static const size_t more[][3] = {{256, 1024, 300}, {700, 40, 200}, {64, 128, 3136}, {20, 30, 0}, {50, 70, 3}};
    for (size_t s = 0; s < N_SHAPES + 5; s++) {
        const size_t *d = s < N_SHAPES ? shapes[s] : more[s - N_SHAPES];
        problem p = make(d[0], d[1], d[2], s % 2, false); /* B as a linear layer reads W^T, or row-major */
        for (int threads = 1; threads <= 3; threads++)
            for (int start = START_ZERO; start <= START_BIAS; start += 2) /* no accumulating start */
                expect_rounded(&p, start, threads, threads != 2);
        drop(&p);
    }
}

/* sgemm_a16 on p's A rounded to bfloat16 against sgemm (round: sgemm_rounded) on the widened floats, with the
 * workspace exactly as large as sgemm_workspace_floats between guards. */
static void expect_a16(problem *p, int start, int threads, bool round, bool copy) {
    const size_t na = p->M * p->K, n = p->M * p->ldc;
    bf16 *a16 = malloc((na + 1) * sizeof *a16);
    bf16 *want16 = malloc(n * sizeof *want16), *got16 = malloc(n * sizeof *got16);
    assert_true(a16 && want16 && got16);
    bf16_pack(a16, p->a, na);
    bf16_unpack(p->a, a16, na); /* the problem's A now holds the widened values */
    const float *bias = start == START_BIAS ? p->bias : NULL;
    float *want = copy_c(p), *c = copy_c(p);
    const size_t wn = sgemm_workspace_floats(p->M, p->N, p->K, threads);
    float *work = malloc((wn + 2 * GUARD) * sizeof *work);
    assert_non_null(work);
    for (size_t i = 0; i < wn + 2 * GUARD; i++) work[i] = GUARD_VALUE;
    memset(want16, 0x5A, n * sizeof *want16), memset(got16, 0x5A, n * sizeof *got16);
    omp_set_num_threads(threads);
    if (round) sgemm_rounded(p->M, p->N, p->K, mat_a(p), mat_b(p), want, p->ldc, bias, copy ? want16 : NULL,
                             work + GUARD, threads);
    else sgemm(p->M, p->N, p->K, mat_a(p), mat_b(p), want, p->ldc, bias, false, work + GUARD, threads);
    sgemm_a16(p->M, p->N, p->K, a16, p->K, mat_b(p), c, p->ldc, bias, round, copy ? got16 : NULL, work + GUARD,
              threads);
    for (size_t i = 0; i < GUARD; i++) {
        assert_true(work[i] == GUARD_VALUE);
        assert_true(work[GUARD + wn + i] == GUARD_VALUE);
    }
    assert_memory_equal(c, want, n * sizeof *c);
    assert_memory_equal(got16, want16, n * sizeof *got16);
    free(work), free(c), free(want), free(a16), free(want16), free(got16);
}

static void test_a16_as_sgemm_on_widened(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    static const size_t more[][3] = {{2048, 256, 1024}, {256, 1024, 300}, {700, 40, 200}, {20, 30, 0}, {50, 70, 3}};
    for (size_t s = 0; s < N_SHAPES + 5; s++) {
        const size_t *d = s < N_SHAPES ? shapes[s] : more[s - N_SHAPES];
        problem p = make(d[0], d[1], d[2], false, s % 2); /* A row-major (a packed input); B as W^T or row-major */
        for (int threads = 1; threads <= 3; threads++)
            for (int start = START_ZERO; start <= START_BIAS; start += 2) {
                expect_a16(&p, start, threads, false, false);
                expect_a16(&p, start, threads, true, threads != 2);
            }
        drop(&p);
    }
}

/* sgemm_b16 on p's row-major B rounded to bfloat16, its rows ldb > N apart and its buffer ending at its last
 * value (an overread is ASan's to catch), against sgemm on the widened floats, with the workspace exactly as
 * large as sgemm_workspace_floats between guards. */
static void expect_b16(problem *p, bool accumulate, int threads) {
    const size_t ldb = p->N + 5, nb = p->K ? (p->K - 1) * ldb + p->N : 1, n = p->M * p->ldc;
    bf16 *b16 = malloc(nb * sizeof *b16);
    assert_non_null(b16);
    for (size_t k = 0; k < p->K; k++) {
        bf16_pack(b16 + k * ldb, p->b + k * p->N, p->N);
        bf16_unpack(p->b + k * p->N, b16 + k * ldb, p->N); /* the problem's B now holds the widened values */
    }
    float *want = copy_c(p), *c = copy_c(p);
    const size_t wn = sgemm_workspace_floats(p->M, p->N, p->K, threads);
    float *work = malloc((wn + 2 * GUARD) * sizeof *work);
    assert_non_null(work);
    for (size_t i = 0; i < wn + 2 * GUARD; i++) work[i] = GUARD_VALUE;
    omp_set_num_threads(threads);
    sgemm(p->M, p->N, p->K, mat_a(p), mat_b(p), want, p->ldc, NULL, accumulate, work + GUARD, threads);
    sgemm_b16(p->M, p->N, p->K, mat_a(p), b16, ldb, c, p->ldc, accumulate, work + GUARD, threads);
    for (size_t i = 0; i < GUARD; i++) {
        assert_true(work[i] == GUARD_VALUE);
        assert_true(work[GUARD + wn + i] == GUARD_VALUE);
    }
    assert_memory_equal(c, want, n * sizeof *c);
    free(work), free(c), free(want), free(b16);
}

/* A linear layer's weight gradient dy^T x with x kept only packed: A transposed (dy^T) or row-major, B by rows;
 * inner dimensions of 1 to 4 (the unpacked small-K rows) and up, columns not a multiple of 16 or 32. */
static void test_b16_as_sgemm_on_widened(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    static const size_t more[][3] = {{1024, 1024, 256}, {10, 1024, 256}, {128, 3136, 16}, {20, 30, 0},
                                     {50, 70, 3},       {64, 1000, 4},   {100, 47, 6}};
    for (size_t s = 0; s < N_SHAPES + 7; s++) {
        const size_t *d = s < N_SHAPES ? shapes[s] : more[s - N_SHAPES];
        problem p = make(d[0], d[1], d[2], s % 2 == 0, false);
        for (int threads = 1; threads <= 3; threads++) {
            expect_b16(&p, false, threads);
            expect_b16(&p, true, threads);
        }
        drop(&p);
    }
}

/* 1, 2 and 3 threads: the same bits, for products split by columns and by rows (the last: rows because each
 * thread gets 256 or more, though A is the smaller operand). */
static void test_same_bits_any_thread_count(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    static const size_t big[][3] = {{256, 1024, 300}, {700, 40, 200}, {300, 1030, 33}, {520, 770, 256}};
    for (size_t s = 0; s < 4; s++) {
        problem p = make(big[s][0], big[s][1], big[s][2], s == 1, s == 2);
        float *one = run(&p, START_C, 1);
        for (int t = 2; t <= 3; t++) {
            float *more = run(&p, START_C, t);
            assert_memory_equal(one, more, p.M * p.ldc * sizeof *one);
            free(more);
        }
        free(one);
        drop(&p);
    }
}

/* gemm_direct computes the same chain of multiply-adds for every element: C = C + A B (and C = A B) give the
 * same bits through both, for a row-major and a transposed A. */
static void test_same_bits_as_gemm_direct(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int at_ = 0; at_ < 2; at_++)
            for (int start = START_ZERO; start <= START_C; start++) {
                problem p = make(shapes[s][0], shapes[s][1], shapes[s][2], at_, false);
                float *own = run(&p, start, 2);
                float *direct = copy_c(&p);
                const sgemm_mat a = mat_a(&p);
                gemm_direct(p.M, p.N, p.K, a.p, a.rs, a.cs, p.b, p.N, direct, p.ldc, NULL, start == START_C);
                assert_memory_equal(own, direct, p.M * p.ldc * sizeof *own);
                free(own);
                free(direct);
                drop(&p);
            }
}

/* K = 0: C is its start, untouched when accumulating. */
static void test_empty_inner_dimension(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    problem p = make(5, 7, 0, false, false);
    for (int start = START_ZERO; start <= START_BIAS; start++) {
        float *c = run(&p, start, 2);
        check_values(&p, c, start);
        free(c);
    }
    drop(&p);
}

/* The workspace grows with every size, so the largest call's covers every smaller call of a plan. */
static void test_workspace_monotone(void **state) {
    (void)state;
    for (size_t m = 1; m < 600; m += 37)
        for (size_t n = 1; n < 1200; n += 101)
            for (size_t k = 1; k < 700; k += 53) {
                const size_t w = sgemm_workspace_floats(m, n, k, 2);
                assert_true(sgemm_workspace_floats(m + 1, n, k, 2) >= w);
                assert_true(sgemm_workspace_floats(m, n + 1, k, 2) >= w);
                assert_true(sgemm_workspace_floats(m, n, k + 1, 2) >= w);
                assert_true(sgemm_workspace_floats(m, n, k, 3) >= w);
            }
    /* where B grows past what a thread packs whole for a row split of 512+ rows: the split turns to columns, the
     * bound must not fall */
    assert_true(sgemm_workspace_floats(600, 1000, 257, 2) >= sgemm_workspace_floats(600, 1000, 256, 2));
    assert_true(sgemm_workspace_floats(600, 1025, 256, 2) >= sgemm_workspace_floats(600, 1024, 256, 2));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_same_bits_any_thread_count),
        cmocka_unit_test(test_same_bits_as_gemm_direct),
        cmocka_unit_test(test_rounded_as_sgemm_then_rounding),
        cmocka_unit_test(test_a16_as_sgemm_on_widened),
        cmocka_unit_test(test_b16_as_sgemm_on_widened),
        cmocka_unit_test(test_empty_inner_dimension),
        cmocka_unit_test(test_workspace_monotone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* small_gemm against a double-precision reference, in the layouts attention uses (A row-major or transposed,
 * B row-major, a transposed B copied by transpose_floats first), over sizes that hit every tile edge (1, 3, 17,
 * 31, 33, 65 rows, columns and k), rows wider than the matrices, overwriting and accumulating, with and without
 * a scale; and that every path the CPU can run (portable, AVX2 + FMA, AVX-512) gives the same bits, which the
 * engine's split and packing invariance in bf16 relies on. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/small_gemm.h"
#include "kernels/small_gemm_path.h"
#include "kernels/transpose.h"
#include "test_util.h"

static const size_t sizes[] = {1, 3, 17, 31, 33, 65};
#define N_SIZES (sizeof sizes / sizeof sizes[0])
/* Padding of every row beyond the matrix: strides wider than the rows, and cells that must stay untouched. */
#define PAD 5


/* One product's operands: A (M, K) stored row-major or as its transpose (K, M), B (K, N) row-major or as its
 * transpose (N, K), C (M, N); every row PAD floats wider than its matrix. */
typedef struct problem {
    size_t M, N, K;
    bool a_t, b_t, accumulate;
    float scale;
    float *a, *b, *c0; /* c0: C before the product */
} problem;

static size_t lda_of(const problem *p) { return (p->a_t ? p->M : p->K) + PAD; }
static size_t ldb_of(const problem *p) { return (p->b_t ? p->K : p->N) + PAD; }
static size_t ldc_of(const problem *p) { return p->N + PAD; }
static double a_at(const problem *p, size_t i, size_t k) {
    return p->a_t ? p->a[k * lda_of(p) + i] : p->a[i * lda_of(p) + k];
}
static double b_at(const problem *p, size_t k, size_t j) {
    return p->b_t ? p->b[j * ldb_of(p) + k] : p->b[k * ldb_of(p) + j];
}

static problem problem_new(size_t M, size_t N, size_t K, bool a_t, bool b_t, bool accumulate, float scale) {
    problem p = {M, N, K, a_t, b_t, accumulate, scale, NULL, NULL, NULL};
    const size_t na = (a_t ? K : M) * lda_of(&p), nb = (b_t ? N : K) * ldb_of(&p), nc = M * ldc_of(&p);
    p.a = malloc((na + 1) * sizeof *p.a), p.b = malloc((nb + 1) * sizeof *p.b), p.c0 = malloc(nc * sizeof *p.c0);
    assert_true(p.a && p.b && p.c0);
    test_fill(p.a, na, (uint32_t)(M * 7 + K)), test_fill(p.b, nb, (uint32_t)(N * 11 + K));
    test_fill(p.c0, nc, (uint32_t)M);
    return p;
}

static void problem_free(problem *p) { free(p->a), free(p->b), free(p->c0); }

/* C as small_gemm computes it through the current path: a transposed B copied row-major first, as attention
 * copies its keys and values. */
static float *run(const problem *p) {
    const size_t ldc = ldc_of(p), ldbt = p->N + 2;
    float *c = malloc(p->M * ldc * sizeof *c), *bt = malloc((p->K * ldbt + 1) * sizeof *bt);
    assert_true(c && bt);
    memcpy(c, p->c0, p->M * ldc * sizeof *c);
    const float *b = p->b;
    size_t ldb = ldb_of(p);
    if (p->b_t) transpose_floats(bt, ldbt, p->b, ldb, p->N, p->K), b = bt, ldb = ldbt;
    const size_t lda = lda_of(p);
    const sgemm_mat a = p->a_t ? (sgemm_mat){p->a, 1, lda} : (sgemm_mat){p->a, lda, 1};
    small_gemm(p->M, p->N, p->K, a, b, ldb, c, ldc, p->scale, p->accumulate);
    free(bt);
    return c;
}

/* Every element within float32 rounding of the double product (|error| <= 4 K eps times the sum of the terms'
 * magnitudes, plus the start's), and the padding untouched. */
static void check_against_reference(const problem *p, const float *c) {
    const size_t ldc = ldc_of(p);
    for (size_t i = 0; i < p->M; i++) {
        for (size_t j = 0; j < p->N; j++) {
            const double start = p->accumulate ? p->c0[i * ldc + j] : 0.0;
            double s = start, mag = fabs(start);
            for (size_t k = 0; k < p->K; k++) {
                s += a_at(p, i, k) * b_at(p, k, j);
                mag += fabs(a_at(p, i, k) * b_at(p, k, j));
            }
            const double want = s * p->scale, tol = 4.0 * (double)(p->K + 1) * 0x1p-24 * mag * fabs(p->scale);
            if (fabs(c[i * ldc + j] - want) > tol + 1e-30)
                fail_msg("%zu x %zu x %zu (A%s, B%s, %s): element (%zu, %zu) got %.9g, want %.9g", p->M, p->N, p->K,
                         p->a_t ? "^T" : "", p->b_t ? "^T" : "", p->accumulate ? "+=" : "=", i, j, c[i * ldc + j],
                         want);
        }
        for (size_t j = p->N; j < ldc; j++) assert_true(c[i * ldc + j] == p->c0[i * ldc + j]);
    }
}

/* Every layout, both starts, every pair of sizes from `sizes` (and K from it too), on the path in force. */
static void check_all_layouts(void) {
    for (int layout = 0; layout < 4; layout++)
        for (size_t x = 0; x < N_SIZES * N_SIZES * N_SIZES; x++) {
            const size_t M = sizes[x % N_SIZES], N = sizes[x / N_SIZES % N_SIZES], K = sizes[x / N_SIZES / N_SIZES];
            const bool accumulate = (x + (size_t)layout) % 2 == 1;
            const float scale = x % 3 == 0 ? 0.125f : x % 3 == 1 ? 1.0f : 0.3f;
            problem p = problem_new(M, N, K, layout & 1, layout & 2, accumulate, scale);
            float *c = run(&p);
            check_against_reference(&p, c);
            free(c);
            problem_free(&p);
        }
}

static void portable_matches_reference(void **state) {
    (void)state;
    assert_true(small_gemm_force_path(SMALL_GEMM_PORTABLE));
    check_all_layouts();
    assert_true(small_gemm_force_path(SMALL_GEMM_FASTEST));
}

static void fastest_matches_reference(void **state) {
    (void)state;
    check_all_layouts();
}

/* The same bits from every path the CPU has, for every layout and size; the paths not available are named. */
static void paths_agree_bitwise(void **state) {
    (void)state;
    static const small_gemm_path paths[] = {SMALL_GEMM_AVX2, SMALL_GEMM_AVX512};
    static const char *const names[] = {"AVX2 + FMA", "AVX-512"};
    size_t compared = 0;
    for (size_t k = 0; k < 2; k++) {
        if (!small_gemm_path_available(paths[k])) {
            printf("# %s: not on this CPU, not compared\n", names[k]);
            continue;
        }
        for (int layout = 0; layout < 4; layout++)
            for (size_t x = 0; x < N_SIZES * N_SIZES * N_SIZES; x++) {
                const size_t M = sizes[x % N_SIZES], N = sizes[x / N_SIZES % N_SIZES];
                problem p = problem_new(M, N, sizes[x / N_SIZES / N_SIZES], layout & 1, layout & 2, x % 2 == 0,
                                        x % 3 == 0 ? 0.125f : 0.3f);
                assert_true(small_gemm_force_path(SMALL_GEMM_PORTABLE));
                float *want = run(&p);
                assert_true(small_gemm_force_path(paths[k]));
                float *got = run(&p);
                assert_memory_equal(got, want, M * ldc_of(&p) * sizeof *got);
                compared++;
                free(want), free(got);
                problem_free(&p);
            }
        printf("# %s: the portable path's bits\n", names[k]);
    }
    assert_true(small_gemm_force_path(SMALL_GEMM_FASTEST));
    printf("# %zu products compared\n", compared);
}

/* A chain is what the kernel promises, not merely a close sum, in every lane of full and partial tiles (7 rows,
 * 40 columns): each step fused (a^2 - its rounding leaves the rounding error, 2^-24, where separate roundings
 * leave 0), and the steps in increasing k (1 + 1e8 - 1e8 is 0 that way, 1 the other way round). */
static void one_chain_in_order(void **state) {
    (void)state;
    enum { M = 7, N = 40 };
    const float x = 1.0f + 0x1p-12f, fused_a[1] = {x}, order_a[3] = {1.0f, 1e8f, -1e8f};
    float fused_b[N], order_b[3 * N], c[M * N];
    for (size_t j = 0; j < N; j++) fused_b[j] = x, order_b[j] = order_b[N + j] = 1.0f, order_b[2 * N + j] = 1.0f;
    static const small_gemm_path paths[] = {SMALL_GEMM_PORTABLE, SMALL_GEMM_AVX2, SMALL_GEMM_AVX512};
    for (size_t k = 0; k < 3; k++) {
        if (!small_gemm_force_path(paths[k])) continue;
        for (size_t i = 0; i < M * N; i++) c[i] = -(1.0f + 0x1p-11f);
        small_gemm(M, N, 1, (sgemm_mat){fused_a, 0, 1}, fused_b, N, c, N, 1.0f, true);
        for (size_t i = 0; i < M * N; i++) assert_true(c[i] == 0x1p-24f);
        small_gemm(M, N, 3, (sgemm_mat){order_a, 0, 1}, order_b, N, c, N, 1.0f, false);
        for (size_t i = 0; i < M * N; i++) assert_true(c[i] == 0.0f);
    }
    assert_true(small_gemm_force_path(SMALL_GEMM_FASTEST));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(portable_matches_reference),
        cmocka_unit_test(fastest_matches_reference),
        cmocka_unit_test(paths_agree_bitwise),
        cmocka_unit_test(one_chain_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

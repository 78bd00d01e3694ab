/* gemm_direct and gemm_direct_nt against a double-precision reference, over shapes that hit every tile edge
 * (rows not a multiple of 8 or 4, columns not a multiple of 32 or 16, K below one vector), a transposed A read
 * through strides, leading dimensions wider than the rows, the bias and the accumulating forms; and the same
 * bits whatever the thread count, which the engine's run-to-run determinism relies on. */
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

#include "kernels/gemm_direct.h"
#include "test_util.h"

/* Every element of got within a relative 1e-5 of want (K <= 700 products of values below 1). */
static void assert_close(const float *got, const double *want, size_t rows, size_t cols, size_t ld) {
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            const double w = want[i * cols + j], g = got[i * ld + j];
            if (fabs(g - w) > 1e-5 * (1.0 + fabs(w)))
                fail_msg("element (%zu, %zu): got %.9g, want %.9g", i, j, g, w);
        }
}

static const size_t shapes[][3] = {{1, 1, 1},   {3, 5, 2},    {8, 32, 9},   {9, 33, 16},  {16, 1024, 144},
                                   {7, 47, 17}, {17, 100, 5}, {64, 64, 576}, {32, 196, 288}, {5, 16, 700}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* C = bias + A B, C += A B and C = A B for A row-major and A transposed (read through strides), with C rows
 * padded by 3 floats that must stay untouched. */
static void check_nn(size_t M, size_t N, size_t K, bool transposed, int mode) {
    const size_t ldb = N + 2, ldc = N + 3;
    float *a = malloc(M * K * sizeof *a), *b = malloc(K * ldb * sizeof *b), *c = malloc(M * ldc * sizeof *c);
    float *bias = malloc(M * sizeof *bias);
    double *want = calloc(M * N, sizeof *want); /* calloc: GCC -O1 cannot see the loops fill it */
    assert_true(a && b && c && bias && want);
    test_fill(a, M * K, 1), test_fill(b, K * ldb, 2), test_fill(c, M * ldc, 3), test_fill(bias, M, 4);
    /* A(i, p): row-major a[i K + p], or the transpose of a (K, M) matrix, a[p M + i] */
    const size_t a_rs = transposed ? 1 : K, a_cs = transposed ? M : 1;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = mode == 1 ? c[i * ldc + j] : mode == 0 ? bias[i] : 0.0;
            for (size_t p = 0; p < K; p++) s += (double)a[i * a_rs + p * a_cs] * b[p * ldb + j];
            want[i * N + j] = s;
        }
    float pad[64];
    for (size_t i = 0; i < M && i < 64; i++) pad[i] = c[i * ldc + N];
    gemm_direct(M, N, K, a, a_rs, a_cs, b, ldb, c, ldc, mode == 0 ? bias : NULL, mode == 1);
    assert_close(c, want, M, N, ldc);
    for (size_t i = 0; i < M && i < 64; i++) assert_true(c[i * ldc + N] == pad[i]);
    free(a), free(b), free(c), free(bias), free(want);
}

static void test_nn_matches_reference(void **state) {
    (void)state;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int mode = 0; mode < 3; mode++) {
            check_nn(shapes[s][0], shapes[s][1], shapes[s][2], false, mode);
            check_nn(shapes[s][0], shapes[s][1], shapes[s][2], true, mode);
        }
}

/* C += A B^T with lda, ldb wider than K. */
static void check_nt(size_t M, size_t N, size_t K) {
    const size_t lda = K + 1, ldb = K + 5, ldc = N + 2;
    float *a = malloc(M * lda * sizeof *a), *b = malloc(N * ldb * sizeof *b), *c = malloc(M * ldc * sizeof *c);
    double *want = calloc(M * N, sizeof *want); /* calloc: GCC -O1 cannot see the loops fill it */
    assert_true(a && b && c && want);
    test_fill(a, M * lda, 5), test_fill(b, N * ldb, 6), test_fill(c, M * ldc, 7);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = c[i * ldc + j];
            for (size_t p = 0; p < K; p++) s += (double)a[i * lda + p] * b[j * ldb + p];
            want[i * N + j] = s;
        }
    gemm_direct_nt(M, N, K, a, lda, b, ldb, c, ldc);
    assert_close(c, want, M, N, ldc);
    free(a), free(b), free(c), free(want);
}

static void test_nt_matches_reference(void **state) {
    (void)state;
    for (size_t s = 0; s < N_SHAPES; s++) {
        check_nt(shapes[s][0], shapes[s][1], shapes[s][2]); /* M <= 16 or not: both kernels */
        check_nt(shapes[s][0], shapes[s][2], shapes[s][1]);
    }
    check_nt(16, 9, 5000); /* a long inner dimension, split over threads */
}

/* Large enough to be split over the threads outside a parallel region: 1, 2 and 3 threads give one result. */
static void test_same_bits_any_thread_count(void **state) {
    (void)state;
    SKIP_UNLESS(gemm_direct_has_avx512(), "AVX-512 (the direct product)"); /* the cblas fallback promises no thread-independent bits */
    const size_t M = 16, N = 4096, K = 144;
    float *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b), *bias = malloc(M * sizeof *bias);
    float *c[3], *d[3];
    assert_true(a && b && bias);
    test_fill(a, M * K, 8), test_fill(b, K * N, 9), test_fill(bias, M, 10);
    const int saved = omp_get_max_threads();
    for (int t = 0; t < 3; t++) {
        c[t] = malloc(M * N * sizeof *c[t]);
        d[t] = calloc(M * K, sizeof *d[t]);
        assert_true(c[t] && d[t]);
        omp_set_num_threads(t + 1);
        gemm_direct(M, N, K, a, K, 1, b, N, c[t], N, bias, false);
        gemm_direct_nt(M, K, N, c[t], N, b, N, d[t], K);
    }
    omp_set_num_threads(saved);
    for (int t = 1; t < 3; t++) {
        assert_memory_equal(c[t], c[0], M * N * sizeof(float));
        assert_memory_equal(d[t], d[0], M * K * sizeof(float));
    }
    for (int t = 0; t < 3; t++) free(c[t]), free(d[t]);
    free(a), free(b), free(bias);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nn_matches_reference),
        cmocka_unit_test(test_nt_matches_reference),
        cmocka_unit_test(test_same_bits_any_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

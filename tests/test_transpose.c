/* transpose_floats: every shape class (full 16 x 16 blocks, partial rows and columns, a single row or column,
 * rows wider than the matrix) gives the exact transpose and writes nothing outside the destination's rows (guard
 * values around them). transpose_to_strips8: every
 * strip exact, the rows past the last zero, nothing written between or after the strips. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "kernels/transpose.h"

#define GUARD -7.0f

/* src (r, c) rows lds apart, transposed into dst rows ldd apart, checked element by element and outside. */
static void check_shape(size_t r, size_t c, size_t lds, size_t ldd) {
    float *src = malloc(r * lds * sizeof *src), *dst = malloc((c * ldd + 16) * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < r * lds; i++) src[i] = (float)i * 0.5f + 1.0f;
    for (size_t i = 0; i < c * ldd + 16; i++) dst[i] = GUARD;
    transpose_floats(dst, ldd, src, lds, r, c);
    for (size_t j = 0; j < c; j++)
        for (size_t i = 0; i < ldd; i++) {
            const float want = i < r ? src[i * lds + j] : GUARD;
            if (dst[j * ldd + i] != want)
                fail_msg("r %zu c %zu lds %zu ldd %zu: dst[%zu][%zu] = %g, want %g", r, c, lds, ldd, j, i,
                         (double)dst[j * ldd + i], (double)want);
        }
    for (size_t i = c * ldd; i < c * ldd + 16; i++) assert_true(dst[i] == GUARD);
    free(src);
    free(dst);
}

static void test_shapes(void **state) {
    (void)state;
    const size_t shapes[][4] = {{1, 1, 1, 1},     {16, 16, 16, 16},   {17, 33, 33, 17},  {64, 784, 784, 64},
                                {1024, 64, 64, 1024}, {5, 3, 7, 9},   {3, 40, 41, 3},    {40, 1, 1, 40},
                                {1, 40, 40, 1},   {31, 47, 50, 35},   {200, 300, 300, 200}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        check_shape(shapes[k][0], shapes[k][1], shapes[k][2], shapes[k][3]);
}

/* src (r, c) as strips of 8 rows sstride floats apart; the gap after each strip's 8 c floats keeps its guards. */
static void check_strips(size_t r, size_t c, size_t lds) {
    const size_t strips = (r + 7) / 8, sstride = 8 * c + 5, n = strips * sstride + 16;
    float *src = malloc(r * lds * sizeof *src), *dst = malloc(n * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < r * lds; i++) src[i] = (float)i * 0.25f + 2.0f;
    for (size_t i = 0; i < n; i++) dst[i] = GUARD;
    transpose_to_strips8(dst, sstride, src, lds, r, c);
    for (size_t s = 0; s < strips; s++) {
        for (size_t p = 0; p < c; p++)
            for (size_t i = 0; i < 8; i++) {
                const size_t row = 8 * s + i;
                const float want = row < r ? src[row * lds + p] : 0.0f;
                if (dst[s * sstride + p * 8 + i] != want)
                    fail_msg("r %zu c %zu lds %zu: strip %zu column %zu row %zu = %g, want %g", r, c, lds, s, p, i,
                             (double)dst[s * sstride + p * 8 + i], (double)want);
            }
        for (size_t g = 8 * c; g < sstride; g++) assert_true(dst[s * sstride + g] == GUARD);
    }
    for (size_t i = strips * sstride; i < n; i++) assert_true(dst[i] == GUARD);
    free(src);
    free(dst);
}

static void test_strips(void **state) {
    (void)state;
    const size_t shapes[][3] = {{1, 1, 1},    {8, 16, 16},  {16, 16, 16},   {9, 17, 20},   {15, 3, 3},
                                {24, 40, 41}, {33, 256, 784}, {256, 100, 1024}, {7, 1, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) check_strips(shapes[k][0], shapes[k][1], shapes[k][2]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shapes), cmocka_unit_test(test_strips)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Winograd (kernels/conv3x3_winograd.h) against a double-precision reference: the forward (F(2x2, 3x3)) and the
 * input gradient (F(4x4, 3x3) on planes of 12x12 and up, else F(2x2)) over shapes that hit every edge: planes of one pixel, row or column, odd planes (a last tile row or
 * column half outside), narrow planes whose vectors hold several tile rows (8x8, 13x13, 14x14; with F(4x4) 2 to
 * 7 tiles across) and wide ones whose tile rows take several vectors (with F(4x4) a last piece of one tile), c != co, channel counts that leave partial register tiles (not a
 * multiple of 8) and blocks (more vectors than one block). The input gradient must ADD to what dx held. The
 * scratch starts full of NaN, so a read of anything the kernels did not write shows; 1, 2 and 3 threads give
 * the same bits. Skipped on CPUs without AVX-512. */
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

#include "op_test_util.h"
#include "kernels/conv3x3_winograd.h"
#include "test_util.h"

/* c, co, h, w */
static const size_t shapes[][4] = {
    {1, 1, 1, 1},   {1, 3, 5, 7},     {2, 5, 3, 17},   {3, 8, 9, 16},   {16, 16, 8, 8},  {5, 17, 13, 13},
    {32, 64, 14, 14}, {7, 20, 4, 40}, {9, 50, 16, 16}, {11, 12, 7, 7},  {4, 9, 33, 15},  {2, 3, 2, 100},
    {3, 64, 6, 6},  {8, 49, 10, 10},  {1, 2, 17, 1},   {70, 9, 12, 12}, {130, 10, 9, 35}, {6, 7, 1, 40},
    {16, 16, 32, 32}, {12, 24, 25, 25}, {32, 32, 16, 16}, {3, 5, 20, 130}, {8, 8, 64, 8}, {5, 6, 20, 18},
    {4, 4, 24, 28},   {40, 40, 64, 64},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static conv3x3_shape shape_at(size_t i) {
    return (conv3x3_shape){.c = shapes[i][0], .co = shapes[i][1], .h = shapes[i][2], .w = shapes[i][3]};
}

/* x[ch][i][j] with zero padding. */
static double at(const float *x, size_t h, size_t w, size_t ch, long i, long j) {
    if (i < 0 || j < 0 || i >= (long)h || j >= (long)w) return 0.0;
    return x[(ch * h + (size_t)i) * w + (size_t)j];
}

/* The largest error seen, relative to the sum of the terms' magnitudes: [2] and [4] the forward and input
 * gradient by that tile, [0] and [1] the weight gradient by F(2x2) and F(4x4). */
static double worst[5];

/* got within 5e-7 (F(2x2)), 1e-5 (F(4x4)), 2e-6 (F(2x2)'s weight gradient, longer sums) or 1e-5 (F(4x4)'s) of
 * the sum of the terms' magnitudes (a misplaced term is off by a whole term, 1e-3 of the sum or more here). */
static void expect(float got, double want, double mag, size_t kind, const char *what, size_t i) {
    const double e = fabs((double)got - want) / (1.0 + mag);
    if (!(e <= (kind == 4 || kind == 1 ? 1e-5 : kind == 2 ? 5e-7 : 2e-6)))
        fail_msg("%s[%zu]: got %.9g, want %.9g (error %.3g of the terms)", what, i, (double)got, want, e);
    if (e > worst[kind]) worst[kind] = e;
}

static void check_forward(const conv3x3_shape *s, const float *y, const float *x, const float *w, const float *b) {
    for (size_t o = 0; o < s->co; o++)
        for (size_t i = 0; i < s->h; i++)
            for (size_t j = 0; j < s->w; j++) {
                double sum = b[o], mag = fabs(sum);
                for (size_t c = 0; c < s->c; c++)
                    for (long a = 0; a < 3; a++)
                        for (long e = 0; e < 3; e++) {
                            const double v = w[(o * s->c + c) * 9 + (size_t)(a * 3 + e)] *
                                             at(x, s->h, s->w, c, (long)i + a - 1, (long)j + e - 1);
                            sum += v, mag += fabs(v);
                        }
                const size_t k = (o * s->h + i) * s->w + j;
                expect(y[k], sum, mag, conv3x3_winograd_tile(s, false), "y", k);
            }
}

/* dx[c][i][j] = dx0 + sum of w[o][c][a][e] dy[o][i - a + 1][j - e + 1] */
static void check_dx(const conv3x3_shape *s, const float *dx, const float *dx0, const float *dy, const float *w) {
    for (size_t c = 0; c < s->c; c++)
        for (size_t i = 0; i < s->h; i++)
            for (size_t j = 0; j < s->w; j++) {
                const size_t k = (c * s->h + i) * s->w + j;
                double sum = dx0[k], mag = fabs(sum);
                for (size_t o = 0; o < s->co; o++)
                    for (long a = 0; a < 3; a++)
                        for (long e = 0; e < 3; e++) {
                            const double v = w[(o * s->c + c) * 9 + (size_t)(a * 3 + e)] *
                                             at(dy, s->h, s->w, o, (long)i - a + 1, (long)j - e + 1);
                            sum += v, mag += fabs(v);
                        }
                expect(dx[k], sum, mag, conv3x3_winograd_tile(s, true), "dx", k);
            }
}

/* Thread t's scratch of one direction: the blocks side by side. */
static float *part(const conv3x3_shape *s, float *scratch, bool dx, size_t t) {
    size_t per;
    assert_true(conv3x3_winograd_scratch_floats(s, dx, 1, &per));
    return scratch + t * per;
}

/* Weights, forward and input gradient of one shape on T threads of one parallel region, from NaN scratch. */
static void run(const conv3x3_shape *s, int T, float *y, float *dx, const float *x, const float *dy,
                const float *w, const float *b, float *u, size_t un, float *scratch, size_t sn) {
    for (size_t i = 0; i < un; i++) u[i] = NAN;
    for (size_t i = 0; i < sn; i++) scratch[i] = NAN;
    #pragma omp parallel num_threads(T)
    {
        const size_t t = (size_t)omp_get_thread_num(), n = (size_t)omp_get_num_threads();
        conv3x3_winograd_weights(s, u, w, false, t, n);
        #pragma omp barrier
        conv3x3_winograd_forward(s, y, x, u, b, part(s, scratch, false, t), t, n);
        conv3x3_winograd_weights(s, u, w, true, t, n);
        #pragma omp barrier
        conv3x3_winograd_backward_dx(s, dx, dy, u, part(s, scratch, true, t), false, t, n);
    }
}

static void test_matches_reference_any_threads(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available(), "AVX-512 (the Winograd convolution)");
    for (size_t i = 0; i < N_SHAPES; i++) {
        const conv3x3_shape s = shape_at(i);
        const size_t xn = s.c * s.h * s.w, yn = s.co * s.h * s.w, wn = s.c * s.co * 9;
        size_t un, un2, sn, sn2;
        assert_true(conv3x3_winograd_weights_floats(&s, false, &un));
        assert_true(conv3x3_winograd_weights_floats(&s, true, &un2));
        assert_true(conv3x3_winograd_scratch_floats(&s, false, 3, &sn));
        assert_true(conv3x3_winograd_scratch_floats(&s, true, 3, &sn2));
        un = un > un2 ? un : un2;
        sn = sn > sn2 ? sn : sn2;
        uint64_t seed = 17 + i;
        float *x = op_test_xmalloc(xn * sizeof(float)), *dy = op_test_xmalloc(yn * sizeof(float));
        float *w = op_test_xmalloc(wn * sizeof(float)), *b = op_test_xmalloc(s.co * sizeof(float));
        float *dx0 = op_test_xmalloc(xn * sizeof(float)), *dx = op_test_xmalloc(xn * sizeof(float));
        float *y = op_test_xmalloc(yn * sizeof(float)), *y1 = op_test_xmalloc(yn * sizeof(float));
        float *dx1 = op_test_xmalloc(xn * sizeof(float));
        float *u = op_test_xmalloc(un * sizeof(float)), *scratch = op_test_xmalloc(sn * sizeof(float));
        op_test_fill_sym(x, xn, &seed), op_test_fill_sym(dy, yn, &seed), op_test_fill_sym(w, wn, &seed);
        op_test_fill_sym(b, s.co, &seed), op_test_fill_sym(dx0, xn, &seed);
        for (int T = 1; T <= 3; T++) {
            memcpy(dx, dx0, xn * sizeof(float));
            run(&s, T, y, dx, x, dy, w, b, u, un, scratch, sn);
            if (T == 1) {
                check_forward(&s, y, x, w, b);
                check_dx(&s, dx, dx0, dy, w);
                memcpy(y1, y, yn * sizeof(float));
                memcpy(dx1, dx, xn * sizeof(float));
            } else {
                assert_memory_equal(y, y1, yn * sizeof(float));
                assert_memory_equal(dx, dx1, xn * sizeof(float));
            }
        }
        free(x), free(dy), free(w), free(b), free(dx0), free(dx), free(y), free(y1), free(dx1), free(u);
        free(scratch);
    }
    print_message("# largest error relative to the terms' magnitudes: F(2x2) %.2g, F(4x4) %.2g\n", worst[2], worst[4]);
}

/* A fresh input gradient (stale NaN memory, written whole) has the bits of one added into zeros, on 1-3
 * threads. */
static void test_dx_fresh_same_bits_as_added_into_zeros(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available(), "AVX-512 (the Winograd convolution)");
    for (size_t i = 0; i < N_SHAPES; i++) {
        const conv3x3_shape s = shape_at(i);
        const size_t xn = s.c * s.h * s.w, yn = s.co * s.h * s.w, wn = s.c * s.co * 9;
        size_t un, sn;
        assert_true(conv3x3_winograd_weights_floats(&s, true, &un));
        assert_true(conv3x3_winograd_scratch_floats(&s, true, 3, &sn));
        uint64_t seed = 91 + i;
        float *dy = op_test_xmalloc(yn * sizeof(float)), *w = op_test_xmalloc(wn * sizeof(float));
        float *u = op_test_xmalloc(un * sizeof(float)), *scratch = op_test_xmalloc(sn * sizeof(float));
        float *added = op_test_xmalloc(xn * sizeof(float)), *fresh = op_test_xmalloc(xn * sizeof(float));
        op_test_fill_sym(dy, yn, &seed), op_test_fill_sym(w, wn, &seed);
        conv3x3_winograd_weights(&s, u, w, true, 0, 1);
        memset(added, 0, xn * sizeof(float));
        conv3x3_winograd_backward_dx(&s, added, dy, u, scratch, false, 0, 1);
        for (int T = 1; T <= 3; T++) {
            for (size_t k = 0; k < xn; k++) fresh[k] = NAN;
            #pragma omp parallel num_threads(T)
            conv3x3_winograd_backward_dx(&s, fresh, dy, u, part(&s, scratch, true, (size_t)omp_get_thread_num()),
                                         true, (size_t)omp_get_thread_num(), (size_t)omp_get_num_threads());
            assert_memory_equal(fresh, added, xn * sizeof(float));
        }
        free(dy), free(w), free(u), free(scratch), free(added), free(fresh);
    }
}

/* dw[o][c][a][e] = dw0 + the sum over samples and pixels of dy[o][i][j] x[c][i + a - 1][j + e - 1] */
static void check_dw(const conv3x3_shape *s, const float *dw, const float *dw0, const float *const dy[2],
                     const float *const x[2]) {
    for (size_t o = 0; o < s->co; o++)
        for (size_t c = 0; c < s->c; c++)
            for (long a = 0; a < 3; a++)
                for (long e = 0; e < 3; e++) {
                    const size_t k = (o * s->c + c) * 9 + (size_t)(a * 3 + e);
                    double sum = dw0[k], mag = fabs(sum);
                    for (int n = 0; n < 2; n++)
                        for (size_t i = 0; i < s->h; i++)
                            for (size_t j = 0; j < s->w; j++) {
                                const double v = dy[n][(o * s->h + i) * s->w + j] *
                                                 at(x[n], s->h, s->w, c, (long)i + a - 1, (long)j + e - 1);
                                sum += v, mag += fabs(v);
                            }
                    expect(dw[k], sum, mag, conv3x3_winograd_dw_tile(s) == 4 ? 1 : 0, "dw", k);
                }
}

/* The weight gradient of two samples summed in dU, then added to what dw held, against the double reference,
 * over every shape (the kernels take any; conv2d calls them where conv3x3_winograd_dw_pays), from NaN scratch. */
static void test_dw_matches_reference(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available(), "AVX-512 (the Winograd convolution)");
    for (size_t i = 0; i < N_SHAPES; i++) {
        const conv3x3_shape s = shape_at(i);
        const size_t xn = s.c * s.h * s.w, yn = s.co * s.h * s.w, wn = s.c * s.co * 9;
        size_t dun, sn;
        assert_true(conv3x3_winograd_dw_floats(&s, &dun));
        assert_true(conv3x3_winograd_dw_scratch_floats(&s, &sn));
        uint64_t seed = 71 + i;
        float *x[2], *dy[2];
        for (int n = 0; n < 2; n++) {
            x[n] = op_test_xmalloc(xn * sizeof(float)), dy[n] = op_test_xmalloc(yn * sizeof(float));
            op_test_fill_sym(x[n], xn, &seed), op_test_fill_sym(dy[n], yn, &seed);
        }
        float *dw0 = op_test_xmalloc(wn * sizeof(float)), *dw = op_test_xmalloc(wn * sizeof(float));
        float *du = op_test_xmalloc(dun * sizeof(float)), *scratch = op_test_xmalloc(sn * sizeof(float));
        op_test_fill_sym(dw0, wn, &seed);
        memcpy(dw, dw0, wn * sizeof(float));
        memset(du, 0, dun * sizeof(float));
        for (size_t k = 0; k < sn; k++) scratch[k] = NAN;
        for (int n = 0; n < 2; n++) conv3x3_winograd_dw_accumulate(&s, du, dy[n], x[n], scratch);
        conv3x3_winograd_dw_finish(&s, dw, du);
        check_dw(&s, dw, dw0, (const float *const *)dy, (const float *const *)x);
        for (int n = 0; n < 2; n++) free(x[n]), free(dy[n]);
        free(dw0), free(dw), free(du), free(scratch);
    }
    print_message("# weight gradient: largest error F(2x2) %.2g, F(4x4) %.2g of the terms' magnitudes\n", worst[0],
                  worst[1]);
}

/* Where it pays: ResNet-20's and the cnn's layers, not a UNet's 256x256 planes nor a dU above 1 MiB (4 MiB
 * on bfloat16 pairs); which tile. */
static void test_dw_pays(void **state) {
    (void)state;
    const conv3x3_shape r1 = {.c = 16, .co = 16, .h = 32, .w = 32}, r3 = {.c = 64, .co = 64, .h = 8, .w = 8};
    const conv3x3_shape cnn = {.c = 32, .co = 64, .h = 14, .w = 14}, unet = {.c = 16, .co = 16, .h = 256, .w = 256};
    const conv3x3_shape huge = {.c = SIZE_MAX / 8, .co = 16, .h = 8, .w = 8};
    /* whether float32's pays and whether bf16's products on pairs do: those also on a UNet's bottleneck (dU 4
     * MiB), F(2x2) planes only, not a UNet's large planes nor a dU past 4 MiB */
    const struct {
        conv3x3_shape s;
        bool fp32, bf16;
    } rows[] = {
        {r1, true, false},
        {r3, true, true},
        {cnn, true, true},
        {unet, false, false},
        {{.c = 256, .co = 256, .h = 4, .w = 4}, false, true},
        {{.c = 256, .co = 256, .h = 16, .w = 16}, false, true},
        {{.c = 512, .co = 512, .h = 8, .w = 8}, false, false},
        {huge, false, false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(conv3x3_winograd_dw_pays(&rows[i].s), rows[i].fp32);
        assert_int_equal(conv3x3_winograd_dw_pays_bf16(&rows[i].s), rows[i].bf16);
    }
    /* F(4x4) for resnet20's first two stages (dU 36 and 144 KiB), not its 8x8 stage (4 tiles), the cnn's 64x32
     * layer (288 KiB) or a strip of few tiles */
    const conv3x3_shape r2 = {.c = 32, .co = 32, .h = 16, .w = 16}, strip = {.c = 16, .co = 16, .h = 4, .w = 40};
    assert_int_equal(conv3x3_winograd_dw_tile(&r1), 4);
    assert_int_equal(conv3x3_winograd_dw_tile(&r2), 4);
    assert_int_equal(conv3x3_winograd_dw_tile(&r3), 2);
    assert_int_equal(conv3x3_winograd_dw_tile(&cnn), 2);
    assert_int_equal(conv3x3_winograd_dw_tile(&strip), 2);
    size_t f2, f4;
    assert_true(conv3x3_winograd_dw_floats(&r3, &f2) && conv3x3_winograd_dw_floats(&r2, &f4));
    assert_int_equal(f2, 16 * 64 * 64);
    assert_int_equal(f4, 36 * 32 * 32);
    size_t n;
    assert_false(conv3x3_winograd_dw_floats(&huge, &n));
    assert_false(conv3x3_winograd_dw_scratch_floats(&huge, &n));
    assert_true(conv3x3_winograd_dw_floats(&r3, &n));
    assert_int_equal(n, 16 * 64 * 64);
}

/* The sizes grow with the threads and report overflow instead of wrapping. */
static void test_sizes(void **state) {
    (void)state;
    const conv3x3_shape s = {.c = 64, .co = 32, .h = 8, .w = 8};
    size_t one, two, n;
    assert_true(conv3x3_winograd_scratch_floats(&s, false, 1, &one));
    assert_true(conv3x3_winograd_scratch_floats(&s, false, 2, &two));
    assert_int_equal(two, 2 * one);
    assert_true(conv3x3_winograd_weights_floats(&s, true, &n));
    assert_int_equal(n, 16 * 64 * 32);
    const conv3x3_shape big = {.c = SIZE_MAX / 8, .co = 16, .h = 8, .w = 8};
    assert_false(conv3x3_winograd_weights_floats(&big, true, &n));
    assert_false(conv3x3_winograd_scratch_floats(&big, false, 1, &n));
}

/* The forward keeps F(2x2); the input gradient takes F(4x4) where it saves a quarter of the products (one
 * vector of 16 tiles for a 16x16 or 14x14 plane instead of four), not on 8x8 (one vector either way), 10x10 or
 * a short wide strip; its weights and blocks grow to 36 transformed values, and a block never holds more
 * vectors than the plane has. */
static void test_tile_choice(void **state) {
    (void)state;
    static const size_t cases[][3] = {{8, 8, 2},   {10, 10, 2}, {12, 12, 4}, {14, 14, 4}, {16, 16, 4},
                                      {32, 32, 4}, {256, 256, 4}, {2, 100, 2}, {64, 8, 4}, {1, 40, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv3x3_shape s = {.c = 16, .co = 32, .h = cases[i][0], .w = cases[i][1]};
        assert_int_equal(conv3x3_winograd_tile(&s, false), 2);
        assert_int_equal(conv3x3_winograd_tile(&s, true), cases[i][2]);
    }
    const conv3x3_shape s = {.c = 16, .co = 32, .h = 16, .w = 16};
    size_t fwd, dx, n;
    assert_true(conv3x3_winograd_weights_floats(&s, false, &fwd) && conv3x3_winograd_weights_floats(&s, true, &dx));
    assert_int_equal(fwd, 16 * 16 * 32);
    assert_int_equal(dx, 36 * 16 * 32);
    assert_true(conv3x3_winograd_scratch_floats(&s, true, 1, &n));
    assert_int_equal(n, 36 * (32 + 8) * 16); /* V and M of the plane's one vector, 32 input channels (co) */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference_any_threads),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_tile_choice),
        cmocka_unit_test(test_dx_fresh_same_bits_as_added_into_zeros),
        cmocka_unit_test(test_dw_matches_reference),
        cmocka_unit_test(test_dw_pays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

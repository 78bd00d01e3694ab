/* The direct 3x3 convolution (kernels/conv3x3_direct.h) against a double-precision reference, over shapes that hit
 * every edge: one channel, odd widths and widths that are no multiple of 16 (so grid vectors span rows and end
 * inside one), planes smaller than a vector, the small-plane and the large-plane weight gradient, channel
 * counts that leave partial register tiles (output planes not a multiple of 8, 3 or 48). Backward must ADD to
 * what the gradients held, and skip what is NULL. The scratch starts full of NaN, so a read of anything the
 * kernels did not write shows. And the same bits whatever the thread count, which run-to-run determinism needs;
 * the same for stride 2 (forward, and backward over the phase planes); then the conv2d op on the direct path: the same bits at micro-batch 1 for 1, 2 and 3 threads, and a
 * workspace smaller than the column buffer it replaces. Skipped on CPUs without AVX-512 (the op lowers there,
 * and the op tests cover that). */
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
#include "kernels/bf16.h"
#include "kernels/conv3x3_direct.h"
#include "kernels/conv3x3_winograd.h"
#include "ops/op.h"
#include "snug.h"
#include "test_util.h"

/* c, co, h, w */
static const size_t shapes[][4] = {
    {1, 1, 1, 1},    {1, 3, 5, 7},    {2, 5, 3, 17},   {3, 8, 9, 16},   {16, 16, 8, 8},  {5, 17, 13, 31},
    {1, 32, 28, 28}, {7, 20, 4, 40},  {9, 50, 16, 16}, {11, 12, 14, 14}, {4, 9, 33, 15}, {2, 3, 2, 100},
    {3, 64, 6, 6},   {8, 49, 10, 10}, {1, 2, 17, 1},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* Everything one check needs: inputs, the gradients before and after, and the reference. */
typedef struct conv_data {
    conv3x3_shape s;
    size_t xn, yn, wn;
    float *x, *w, *b, *dy;       /* inputs */
    float *y, *dx, *dw, *db;     /* outputs (the gradients start from dx0, dw0, db0) */
    float *dx0, *dw0, *db0;
    float *scratch;
    size_t scratch_n;
} conv_data;

static void data_init(conv_data *d, const size_t *sh, uint64_t seed) {
    d->s = (conv3x3_shape){.c = sh[0], .co = sh[1], .h = sh[2], .w = sh[3]};
    d->xn = d->s.c * d->s.h * d->s.w, d->yn = d->s.co * d->s.h * d->s.w, d->wn = d->s.co * d->s.c * 9;
    float **bufs[] = {&d->x, &d->dx, &d->dx0, &d->y, &d->dy, &d->w, &d->dw, &d->dw0, &d->b, &d->db, &d->db0};
    const size_t lens[] = {d->xn, d->xn, d->xn, d->yn, d->yn, d->wn, d->wn, d->wn, d->s.co, d->s.co, d->s.co};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        *bufs[i] = op_test_xmalloc(lens[i] * sizeof(float));
        op_test_fill_sym(*bufs[i], lens[i], &seed);
    }
    assert_true(conv3x3_scratch_floats(&d->s, &d->scratch_n));
    d->scratch = op_test_xmalloc(d->scratch_n * sizeof(float));
}

static void data_free(conv_data *d) {
    float *bufs[] = {d->x, d->dx, d->dx0, d->y, d->dy, d->w, d->dw, d->dw0, d->b, d->db, d->db0,
                     d->scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

/* The gradients back to their starting values, the scratch to NaN. */
static void data_reset(conv_data *d) {
    memcpy(d->dx, d->dx0, d->xn * sizeof(float));
    memcpy(d->dw, d->dw0, d->wn * sizeof(float));
    memcpy(d->db, d->db0, d->s.co * sizeof(float));
    for (size_t i = 0; i < d->scratch_n; i++) d->scratch[i] = NAN;
}

/* x[ch][i][j] with zero padding. */
static double at(const float *x, const conv3x3_shape *s, size_t ch, long i, long j) {
    if (i < 0 || j < 0 || i >= (long)s->h || j >= (long)s->w) return 0.0;
    return x[(ch * s->h + (size_t)i) * s->w + (size_t)j];
}

/* got within 2e-6 of the sum of the terms' magnitudes (a misplaced term is off by a whole term). */
static void expect(float got, double want, double mag, const char *what, size_t i) {
    if (!(fabs((double)got - want) <= 2e-6 * (1.0 + mag)))
        fail_msg("%s[%zu]: got %.9g, want %.9g", what, i, (double)got, want);
}

static void check_forward(const conv_data *d) {
    const conv3x3_shape *s = &d->s;
    for (size_t o = 0; o < s->co; o++)
        for (size_t i = 0; i < s->h; i++)
            for (size_t j = 0; j < s->w; j++) {
                double sum = d->b[o], mag = fabs(sum);
                for (size_t c = 0; c < s->c; c++)
                    for (long a = 0; a < 3; a++)
                        for (long b = 0; b < 3; b++) {
                            const double v = d->w[(o * s->c + c) * 9 + (size_t)(a * 3 + b)] *
                                             at(d->x, s, c, (long)i + a - 1, (long)j + b - 1);
                            sum += v, mag += fabs(v);
                        }
                const size_t k = (o * s->h + i) * s->w + j;
                expect(d->y[k], sum, mag, "y", k);
            }
}

static void check_backward(const conv_data *d) {
    const conv3x3_shape *s = &d->s;
    for (size_t c = 0; c < s->c; c++) /* dx[c][i][j] = sum of w[o][c][a][b] dy[o][i - a + 1][j - b + 1] */
        for (size_t i = 0; i < s->h; i++)
            for (size_t j = 0; j < s->w; j++) {
                const size_t k = (c * s->h + i) * s->w + j;
                double sum = d->dx0[k], mag = fabs(sum);
                for (size_t o = 0; o < s->co; o++)
                    for (long a = 0; a < 3; a++)
                        for (long b = 0; b < 3; b++) {
                            const double v = d->w[(o * s->c + c) * 9 + (size_t)(a * 3 + b)] *
                                             at(d->dy, s, o, (long)i - a + 1, (long)j - b + 1);
                            sum += v, mag += fabs(v);
                        }
                expect(d->dx[k], sum, mag, "dx", k);
            }
    for (size_t o = 0; o < s->co; o++) {
        for (size_t c = 0; c < s->c; c++)
            for (long a = 0; a < 3; a++)
                for (long b = 0; b < 3; b++) {
                    const size_t k = (o * s->c + c) * 9 + (size_t)(a * 3 + b);
                    double sum = d->dw0[k], mag = fabs(sum);
                    for (size_t i = 0; i < s->h; i++)
                        for (size_t j = 0; j < s->w; j++) {
                            const double v = d->dy[(o * s->h + i) * s->w + j] *
                                             at(d->x, s, c, (long)i + a - 1, (long)j + b - 1);
                            sum += v, mag += fabs(v);
                        }
                    expect(d->dw[k], sum, mag, "dw", k);
                }
        const float *plane = d->dy + o * s->h * s->w;
        double sum = d->db0[o], mag = fabs(sum);
        for (size_t p = 0; p < s->h * s->w; p++) sum += plane[p], mag += fabs(plane[p]);
        expect(d->db[o], sum, mag, "db", o);
    }
}

/* Forward and backward on T threads of one parallel region (T = 1: no region). */
static void run(conv_data *d, int T, bool dx, bool dw, bool db) {
    data_reset(d);
    if (T == 1) {
        conv3x3_forward(&d->s, d->y, d->x, d->w, d->b, d->scratch, 0, 1);
        conv3x3_backward(&d->s, dx ? d->dx : NULL, dw ? d->dw : NULL, db ? d->db : NULL, d->dy, d->x, d->w,
                         d->scratch, 0, 1);
        return;
    }
    #pragma omp parallel num_threads(T)
    {
        const size_t t = (size_t)omp_get_thread_num(), n = (size_t)omp_get_num_threads();
        conv3x3_forward(&d->s, d->y, d->x, d->w, d->b, d->scratch, t, n);
        conv3x3_backward(&d->s, dx ? d->dx : NULL, dw ? d->dw : NULL, db ? d->db : NULL, d->dy, d->x, d->w,
                         d->scratch, t, n);
    }
}

static void test_matches_reference(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    for (size_t i = 0; i < N_SHAPES; i++) {
        conv_data d;
        data_init(&d, shapes[i], 11 + i);
        run(&d, 1, true, true, true);
        check_forward(&d);
        check_backward(&d);
        data_free(&d);
    }
}

/* A NULL gradient is left alone and does not disturb the others. */
static void test_null_gradients_skipped(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    const size_t sh[][4] = {{5, 17, 13, 31}, {9, 50, 16, 16}};
    for (size_t i = 0; i < 2; i++) {
        conv_data d;
        data_init(&d, sh[i], 5 + i);
        float *full_dx = op_test_xmalloc(d.xn * sizeof(float)), *full_dw = op_test_xmalloc(d.wn * sizeof(float));
        run(&d, 1, true, true, true);
        memcpy(full_dx, d.dx, d.xn * sizeof(float));
        memcpy(full_dw, d.dw, d.wn * sizeof(float));
        run(&d, 1, true, false, false);
        assert_memory_equal(d.dx, full_dx, d.xn * sizeof(float));
        assert_memory_equal(d.dw, d.dw0, d.wn * sizeof(float));
        assert_memory_equal(d.db, d.db0, d.s.co * sizeof(float));
        run(&d, 1, false, true, false);
        assert_memory_equal(d.dw, full_dw, d.wn * sizeof(float));
        assert_memory_equal(d.dx, d.dx0, d.xn * sizeof(float));
        free(full_dx), free(full_dw);
        data_free(&d);
    }
}

/* After a run on one thread: runs on 2 and 3 threads give the same output and gradients, bit for bit. */
static void expect_same_bits_on_2_and_3_threads(conv_data *d) {
    float *y = op_test_xmalloc(d->yn * sizeof(float)), *dx = op_test_xmalloc(d->xn * sizeof(float));
    float *dw = op_test_xmalloc(d->wn * sizeof(float)), *db = op_test_xmalloc(d->s.co * sizeof(float));
    memcpy(y, d->y, d->yn * sizeof(float)), memcpy(dx, d->dx, d->xn * sizeof(float));
    memcpy(dw, d->dw, d->wn * sizeof(float)), memcpy(db, d->db, d->s.co * sizeof(float));
    for (int T = 2; T <= 3; T++) {
        run(d, T, true, true, true);
        assert_memory_equal(d->y, y, d->yn * sizeof(float));
        assert_memory_equal(d->dx, dx, d->xn * sizeof(float));
        assert_memory_equal(d->dw, dw, d->wn * sizeof(float));
        assert_memory_equal(d->db, db, d->s.co * sizeof(float));
    }
    free(y), free(dx), free(dw), free(db);
}

/* 1, 2 and 3 threads on one sample: the same bits. */
static void test_same_bits_any_thread_count(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    for (size_t i = 0; i < N_SHAPES; i++) {
        conv_data d;
        data_init(&d, shapes[i], 40 + i);
        run(&d, 1, true, true, true);
        expect_same_bits_on_2_and_3_threads(&d);
        data_free(&d);
    }
}

/* Tall planes go in bands of rows: the forward, the input gradient and the weight gradient each pad a band at
 * a time, in the scratch that conv3x3_scratch_floats sizes (far less than the padded planes: allocated exactly
 * and filled with NaN by data_reset, so an overrun or a read of an unwritten float shows). Against the
 * double-precision reference, and the same bits on 1, 2 and 3 threads. Widths below, near and above a chunk of
 * the grid (2048 lanes) and not a multiple of 16; heights that leave a short last band. */
static void test_tall_planes_in_bands(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    const size_t sh[][4] = {{3, 5, 300, 20}, {2, 4, 200, 130}, {1, 7, 60, 2500}, {4, 3, 151, 47}};
    for (size_t i = 0; i < 4; i++) {
        conv_data d;
        data_init(&d, sh[i], 70 + i);
        const size_t planes = (d.s.c + d.s.co) * (d.s.h + 2) * (d.s.w + 1);
        assert_true(d.scratch_n < planes / 2);
        run(&d, 1, true, true, true);
        check_forward(&d);
        check_backward(&d);
        expect_same_bits_on_2_and_3_threads(&d);
        data_free(&d);
    }
}

/* conv3x3_forward_rounded on T threads of one parallel region (T = 1: no region). */
static void forward_rounded_on(conv_data *d, int T) {
    data_reset(d);
    #pragma omp parallel num_threads(T) if (T > 1)
    {
        const size_t t = (size_t)omp_get_thread_num(), n = (size_t)omp_get_num_threads();
        conv3x3_forward_rounded(&d->s, d->y, d->x, d->w, d->b, d->scratch, t, n);
    }
}

/* The forward that rounds its output to bfloat16 as it stores it gives the bits of the forward followed by
 * bf16_round_floats (which test_matches_reference's float64 check covers before the rounding), on 1, 2 and 3
 * threads, whole planes and bands, and with NaN and infinity among the inputs (quieted NaN as the pass does). */
static void test_rounded_forward_same_bits(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    const size_t tall[][4] = {{3, 5, 300, 20}, {1, 7, 60, 2500}};
    for (size_t i = 0; i < N_SHAPES + 2; i++) {
        conv_data d;
        data_init(&d, i < N_SHAPES ? shapes[i] : tall[i - N_SHAPES], 90 + i);
        if (i % 3 == 2) d.x[d.xn / 2] = NAN, d.x[0] = INFINITY;
        float *want = op_test_xmalloc(d.yn * sizeof(float));
        data_reset(&d);
        conv3x3_forward(&d.s, want, d.x, d.w, d.b, d.scratch, 0, 1);
        bf16_round_floats(want, want, d.yn);
        for (int T = 1; T <= 3; T++) {
            forward_rounded_on(&d, T);
            assert_memory_equal(d.y, want, d.yn * sizeof(float));
        }
        free(want);
        data_free(&d);
    }
}

/* Stride 2 (conv3x3_s2_forward): against the double-precision reference over odd and even planes, planes of
 * one row or column, channel counts that leave partial tiles; the scratch starts full of NaN; 1, 2 and 3
 * threads give the same bits. */
static void test_s2_forward_matches_reference(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    const size_t sh[][4] = {{1, 1, 1, 1},  {1, 3, 5, 7},   {2, 5, 3, 17},  {3, 8, 9, 16}, {16, 32, 32, 32},
                            {5, 17, 13, 31}, {32, 64, 16, 16}, {7, 20, 4, 40}, {3, 9, 33, 15}, {2, 1, 2, 100},
                            {4, 12, 1, 9}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        const conv3x3_shape s = {.c = sh[i][0], .co = sh[i][1], .h = sh[i][2], .w = sh[i][3]};
        const size_t ho = (s.h + 1) / 2, wo = (s.w + 1) / 2, xn = s.c * s.h * s.w, yn = s.co * ho * wo;
        size_t sn;
        assert_true(conv3x3_s2_scratch_floats(&s, &sn));
        uint64_t seed = 70 + i;
        float *x = op_test_xmalloc(xn * sizeof(float)), *w = op_test_xmalloc(s.co * s.c * 9 * sizeof(float));
        float *b = op_test_xmalloc(s.co * sizeof(float)), *y = op_test_xmalloc(yn * sizeof(float));
        float *y1 = op_test_xmalloc(yn * sizeof(float)), *scratch = op_test_xmalloc(sn * sizeof(float));
        op_test_fill_sym(x, xn, &seed), op_test_fill_sym(w, s.co * s.c * 9, &seed), op_test_fill_sym(b, s.co, &seed);
        for (int T = 1; T <= 3; T++) {
            for (size_t k = 0; k < sn; k++) scratch[k] = NAN;
            #pragma omp parallel num_threads(T)
            conv3x3_s2_forward(&s, y, x, w, b, scratch, (size_t)omp_get_thread_num(),
                               (size_t)omp_get_num_threads());
            if (T > 1) {
                assert_memory_equal(y, y1, yn * sizeof(float));
                continue;
            }
            memcpy(y1, y, yn * sizeof(float));
            for (size_t o = 0; o < s.co; o++)
                for (size_t r = 0; r < ho; r++)
                    for (size_t q = 0; q < wo; q++) {
                        double sum = b[o], mag = fabs(sum);
                        for (size_t c = 0; c < s.c; c++)
                            for (long a = 0; a < 3; a++)
                                for (long e = 0; e < 3; e++) {
                                    const double v = w[(o * s.c + c) * 9 + (size_t)(a * 3 + e)] *
                                                     at(x, &s, c, 2 * (long)r + a - 1, 2 * (long)q + e - 1);
                                    sum += v, mag += fabs(v);
                                }
                        const size_t k = (o * ho + r) * wo + q;
                        expect(y[k], sum, mag, "y (stride 2)", k);
                    }
        }
        free(x), free(w), free(b), free(y), free(y1), free(scratch);
    }
}

/* Stride-2 backward (conv3x3_s2_backward): dx, dW and db against the double-precision reference, added to
 * what they held, over odd and even planes, planes of one row or column, output planes on both sides of the
 * small-plane weight gradient, channel counts that leave partial tiles; the scratch starts full of NaN; a
 * NULL gradient is skipped; 1, 2 and 3 threads give the same bits. */
static void s2_backward_run(const conv3x3_shape *s, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, float *scratch, size_t sn, int T) {
    for (size_t k = 0; k < sn; k++) scratch[k] = NAN;
    #pragma omp parallel num_threads(T)
    conv3x3_s2_backward(s, dx, dw, db, dy, x, w, scratch, (size_t)omp_get_thread_num(),
                        (size_t)omp_get_num_threads());
}

static void s2_backward_check(const conv3x3_shape *s, const float *dx, const float *dw, const float *db,
                              const float *dx0, const float *dw0, const float *db0, const float *dy,
                              const float *x, const float *w) {
    const long ho = (long)(s->h + 1) / 2, wo = (long)(s->w + 1) / 2;
    for (size_t c = 0; c < s->c; c++) /* dx[c][i][j] = sum of w[o][c][a][e] dy[o][r][q], 2 r + a - 1 = i, ... */
        for (long i = 0; i < (long)s->h; i++)
            for (long j = 0; j < (long)s->w; j++) {
                const size_t k = (c * s->h + (size_t)i) * s->w + (size_t)j;
                double sum = dx0[k], mag = fabs(sum);
                for (size_t o = 0; o < s->co; o++)
                    for (long a = 0; a < 3; a++)
                        for (long e = 0; e < 3; e++) {
                            const long r2 = i + 1 - a, q2 = j + 1 - e;
                            if (r2 % 2 || q2 % 2 || r2 < 0 || q2 < 0 || r2 / 2 >= ho || q2 / 2 >= wo) continue;
                            const double v = w[(o * s->c + c) * 9 + (size_t)(a * 3 + e)] *
                                             dy[((long)o * ho + r2 / 2) * wo + q2 / 2];
                            sum += v, mag += fabs(v);
                        }
                expect(dx[k], sum, mag, "dx (stride 2)", k);
            }
    for (size_t o = 0; o < s->co; o++) {
        for (size_t c = 0; c < s->c; c++)
            for (long a = 0; a < 3; a++)
                for (long e = 0; e < 3; e++) {
                    const size_t k = (o * s->c + c) * 9 + (size_t)(a * 3 + e);
                    double sum = dw0[k], mag = fabs(sum);
                    for (long r = 0; r < ho; r++)
                        for (long q = 0; q < wo; q++) {
                            const double v = dy[((long)o * ho + r) * wo + q] * at(x, s, c, 2 * r + a - 1, 2 * q + e - 1);
                            sum += v, mag += fabs(v);
                        }
                    expect(dw[k], sum, mag, "dw (stride 2)", k);
                }
        double sum = db0[o], mag = fabs(sum);
        for (long p = 0; p < ho * wo; p++) sum += dy[(long)o * ho * wo + p], mag += fabs(dy[(long)o * ho * wo + p]);
        expect(db[o], sum, mag, "db (stride 2)", o);
    }
}

static void test_s2_backward_matches_reference(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    const size_t sh[][4] = {{1, 1, 1, 1},   {1, 3, 5, 7},    {2, 5, 3, 17},   {3, 8, 9, 16},  {16, 32, 32, 32},
                            {5, 17, 13, 31}, {32, 64, 16, 16}, {7, 20, 4, 40},  {3, 9, 33, 15}, {2, 1, 2, 100},
                            {4, 12, 1, 9},   {9, 50, 41, 37},  {11, 2, 36, 36}, {1, 16, 7, 1}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        const conv3x3_shape s = {.c = sh[i][0], .co = sh[i][1], .h = sh[i][2], .w = sh[i][3]};
        const size_t xn = s.c * s.h * s.w, yn = s.co * ((s.h + 1) / 2) * ((s.w + 1) / 2), wn = s.co * s.c * 9;
        size_t sn;
        assert_true(conv3x3_s2_scratch_floats(&s, &sn));
        uint64_t seed = 90 + i;
        float *x = op_test_xmalloc(xn * sizeof(float)), *w = op_test_xmalloc(wn * sizeof(float));
        float *dy = op_test_xmalloc(yn * sizeof(float)), *scratch = op_test_xmalloc(sn * sizeof(float));
        float *g0 = op_test_xmalloc((xn + wn + s.co) * sizeof(float)), *g = op_test_xmalloc((xn + wn + s.co) * sizeof(float));
        float *g1 = op_test_xmalloc((xn + wn + s.co) * sizeof(float));
        op_test_fill_sym(x, xn, &seed), op_test_fill_sym(w, wn, &seed), op_test_fill_sym(dy, yn, &seed);
        op_test_fill_sym(g0, xn + wn + s.co, &seed);
        const size_t gn = (xn + wn + s.co) * sizeof(float);
        for (int T = 1; T <= 3; T++) {
            memcpy(g, g0, gn);
            s2_backward_run(&s, g, g + xn, g + xn + wn, dy, x, w, scratch, sn, T);
            if (T == 1) {
                s2_backward_check(&s, g, g + xn, g + xn + wn, g0, g0 + xn, g0 + xn + wn, dy, x, w);
                memcpy(g1, g, gn);
            } else {
                assert_memory_equal(g, g1, gn);
            }
        }
        memcpy(g, g0, gn); /* dx alone, then dW alone: the same bits, the others untouched */
        s2_backward_run(&s, g, NULL, NULL, dy, x, w, scratch, sn, 1);
        assert_memory_equal(g, g1, xn * sizeof(float));
        assert_memory_equal(g + xn, g0 + xn, (wn + s.co) * sizeof(float));
        memcpy(g, g0, gn);
        s2_backward_run(&s, NULL, g + xn, NULL, dy, x, w, scratch, sn, 2);
        assert_memory_equal(g + xn, g1 + xn, wn * sizeof(float));
        assert_memory_equal(g, g0, xn * sizeof(float));
        free(x), free(w), free(dy), free(scratch), free(g0), free(g), free(g1);
    }
}

static snug_graph *conv_graph(size_t c, size_t h, size_t w, size_t co) {
    snug_graph *g = snug_graph_new("t");
    snug_conv2d(g, "conv", snug_input(g, "x", c, h, w), co, 3, 1, 1);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_graph *conv_graph_s2(size_t c, size_t h, size_t w, size_t co) {
    snug_graph *g = snug_graph_new("t");
    snug_conv2d(g, "conv", snug_input(g, "x", c, h, w), co, 3, 2, 1);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* The op at micro-batch 1 on 1, 2 and 3 threads: the bits of the output and of every gradient do not depend
 * on how many. Three ways to use the threads: a small sample runs its input gradient beside its weight
 * gradient (two slots of workspace), at stride 1 (Winograd's input gradient where it
 * pays) and 2; a large one splits every product's tiles over all threads (one slot). */
static void test_op_micro_batch_one_same_bits(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    for (int shape = 0; shape < 3; shape++) {
        op_fixture f[3];
        for (int t = 0; t < 3; t++) {
            snug_graph *g = shape == 0 ? conv_graph(24, 20, 21, 40)
                            : shape == 1 ? conv_graph_s2(24, 20, 21, 40)
                                         : conv_graph(32, 24, 24, 48);
            const size_t one = op_conv2d.workspace_bytes(&g->nodes[1], 1, 1);
            if (shape < 2) assert_true(op_conv2d.workspace_bytes(&g->nodes[1], 1, 2) > one); /* a second slot */
            op_fixture_init(&f[t], g, 1, 1, t + 1, FILL_PLAIN, 3 + shape);
            op_fixture_analytic(&f[t]);
        }
        for (int t = 1; t < 3; t++) op_expect_same_results(&f[0], &f[t]);
        for (int t = 0; t < 3; t++) op_fixture_free(&f[t]);
    }
}

static snug_graph *large_s2_graph(void) { return conv_graph_s2(1, 2048, 2048, 16); }

/* A sample whose scratch exceeds LOWERING_SLOT_MAX (64 MiB: a stride-2 conv's phase planes of a 2048 x 2048
 * input and padded 16 x 1024 x 1024 output gradient) is shared by the threads even when there are samples for
 * each: one slot of workspace at m = 2 as at m = 1, where a small sample gets a slot per thread. Sharing
 * computes every output and gradient as one thread does, so 2 threads give the bits of 1; per-thread partial
 * weight gradients would not. A stride-1 plane that large goes in bands instead (a few MiB). */
static void test_op_large_sample_shares_threads(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    snug_graph *g1 = conv_graph(1, 1024, 1024, 16);
    assert_true(op_conv2d.workspace_bytes(&g1->nodes[1], 1, 2) < ((size_t)8 << 20));
    snug_graph_free(g1);
    g1 = conv_graph(16, 32, 32, 16); /* small: a slot per sample thread (the transformed weights shared) */
    assert_true(op_conv2d.workspace_bytes(&g1->nodes[1], 2, 2) >
                3 * op_conv2d.workspace_bytes(&g1->nodes[1], 1, 1) / 2);
    snug_graph_free(g1);
    op_expect_large_sample_one_slot(large_s2_graph, 17);
}

/* Winograd's share of a conv's workspace with T sample threads: its transformed weights, and per thread the
 * tile blocks of both directions and, where its weight gradient runs, that one's scratch and dU (a loose bound:
 * a thread needs the largest of the scratches, plus alignment). */
static size_t wino_bytes(size_t c, size_t h, size_t w, size_t co, size_t T) {
    const conv3x3_shape s = {.c = c, .co = co, .h = h, .w = w};
    size_t u = 0, fwd = 0, dx = 0, dws = 0, du = 0;
    if (!conv3x3_winograd_available()) return 0;
    assert_true(conv3x3_winograd_weights_floats(&s, true, &u) && conv3x3_winograd_scratch_floats(&s, false, 1, &fwd) &&
                conv3x3_winograd_scratch_floats(&s, true, 1, &dx));
    if (conv3x3_winograd_dw_pays(&s))
        assert_true(conv3x3_winograd_dw_scratch_floats(&s, &dws) && conv3x3_winograd_dw_floats(&s, &du));
    return (u + T * (fwd + dx + dws + du)) * sizeof(float) + 64 * (T + 1);
}

/* The direct path needs the padded planes, not the column matrix: less workspace (one thread, and two with
 * their partial dW and db), Winograd's share aside where it runs (8x8 with 64 channels: its 256 KiB of
 * transformed weights are more than that layer's column matrix). */
static void test_op_workspace_below_lowering(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_direct_available(), "AVX-512 (the direct 3x3 convolution)");
    const size_t sh[][4] = {{16, 32, 32, 16}, {32, 16, 16, 32}, {64, 8, 8, 64}, {16, 256, 256, 16}};
    for (size_t i = 0; i < 4; i++) {
        snug_graph *g = conv_graph(sh[i][0], sh[i][1], sh[i][2], sh[i][3]);
        const size_t cols = sh[i][0] * 9 * sh[i][1] * sh[i][2] * sizeof(float);
        const size_t part = (sh[i][3] * sh[i][0] * 9 + sh[i][3]) * sizeof(float); /* dW and db */
        const size_t one = op_conv2d.workspace_bytes(&g->nodes[1], 1, 1);
        const size_t two = op_conv2d.workspace_bytes(&g->nodes[1], 8, 2);
        const size_t w1 = wino_bytes(sh[i][0], sh[i][1], sh[i][2], sh[i][3], 1);
        const size_t w2 = wino_bytes(sh[i][0], sh[i][1], sh[i][2], sh[i][3], 2);
        if (one >= cols + w1 || two >= 2 * (cols + part) + w2)
            fail_msg("shape %zu: %zu and %zu bytes, lowering %zu and %zu", i, one, two, cols, 2 * (cols + part));
        snug_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_null_gradients_skipped),
        cmocka_unit_test(test_same_bits_any_thread_count),
        cmocka_unit_test(test_tall_planes_in_bands),
        cmocka_unit_test(test_rounded_forward_same_bits),
        cmocka_unit_test(test_s2_forward_matches_reference),
        cmocka_unit_test(test_s2_backward_matches_reference),
        cmocka_unit_test(test_op_micro_batch_one_same_bits),
        cmocka_unit_test(test_op_workspace_below_lowering),
        cmocka_unit_test(test_op_large_sample_shares_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

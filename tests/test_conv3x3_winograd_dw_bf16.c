/* Winograd's weight gradient with its products on bfloat16 pairs (conv3x3_winograd_dw_accumulate_bf16) against
 * a double-precision reference of the same bfloat16 operands, through the portable twin on every AVX-512 CPU and
 * the AVX512_BF16 kernel where the CPU has it.
 *
 * It is F(2x2, 3x3) on every plane. The bound is derived from the transforms' coefficients. Per tile, a
 * transformed value V = B^T d B (or Y = A dY A^T) is computed in float32 2 roundings deep, each within u = 2^-24
 * of the sum of its terms' magnitudes S_V = |B^T| |d| |B|, then rounded to bfloat16 (2^-9 relative):
 * |V' - V| <= e S_V with e = 2^-9 + (1 + 2^-9) 2u, and the same for Y. Their product is exact in float32, so a
 * tile's term of dU is within (1 + e)^2 - 1 of S_Y S_V; the float32 chain over the tiles and blocks adds K u of
 * the sum of those (K the additions: tiles plus blocks, per sample), and dW = G^T dU G (G's halves exact) at
 * most 5 roundings, the add into dW0 included, of sum |G^T| M |G|, M[xi] = the sum over tiles of S_Y S_V. So
 * per element |dW - reference| <= ((1 + e)^2 (1 + K u)(1 + 5 u) - 1) sum |G^T| M |G| + 2u |dW0|.
 * Planted errors must fail it: a lost last tile (an odd tile count's unpaired tile) and the halves of the pairs
 * swapped between the operands (x paired with the wrong tile of dy). And bit for bit: the AVX512_BF16 kernel and
 * the twin, two samples summed by two threads (each its own dU) and by one. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/conv3x3_bf16.h"
#include "kernels/conv3x3_winograd.h"
#include "kernels/dpbf16_lane.h"
#include "kernels/dpbf16_pairs.h"
#include "kernels/isa.h"
#include "kernels/vmath.h"
#include "op_test_util.h"
#include "test_util.h"

/* c, co, h, w: planes where float32 takes F(2x2) and F(4x4) (conv3x3_winograd_dw_tile: the scratch and dU are
 * sized for it), odd tile counts (6x6: 9 tiles; 13x31: 112), channel counts past a vector (17, 33) and short of a
 * register tile (5), resnet20's stages, blocks of tiles that do not divide the plane's (32x32 with 16 + 32
 * channels). */
static const size_t shapes[][4] = {
    {1, 1, 1, 1},    {3, 5, 6, 6},     {16, 16, 8, 8}, {5, 17, 13, 31}, {32, 64, 14, 14}, {2, 3, 2, 100},
    {17, 5, 40, 41}, {16, 16, 32, 32}, {3, 16, 32, 32}, {33, 9, 10, 10}, {16, 32, 32, 32}, {64, 64, 8, 8},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])
#define SAMPLES 2

static const double BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const double A2[4][2] = {{1, 0}, {1, 1}, {1, -1}, {0, -1}};
static const double GT2[3][4] = {{1, .5, .5, 0}, {0, .5, -.5, 0}, {0, .5, .5, 1}};


/* plane[ch][i][j], zero outside. */
static double at(const float *p, size_t h, size_t w, size_t ch, long i, long j) {
    if (i < 0 || j < 0 || i >= (long)h || j >= (long)w) return 0.0;
    return p[(ch * h + (size_t)i) * w + (size_t)j];
}

/* The sums of the magnitudes of one tile's transformed terms, for every position xi = (a, b): |B^T| |d| |B| of
 * channel ch of x (input rows and columns from 2 t - 1) into sv[xi], |A| |dY| |A^T| of dy into sy[xi]. */
static void tile_magnitudes(const conv3x3_shape *s, const float *x, const float *dy, size_t i, size_t o, size_t ty,
                            size_t tx, double sv[16], double sy[16]) {
    const long r0 = 2 * (long)ty, q0 = 2 * (long)tx;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            double v = 0.0, y = 0.0;
            for (size_t r = 0; r < 4; r++)
                for (size_t q = 0; q < 4; q++)
                    v += fabs(BT2[a][r] * BT2[b][q] * at(x, s->h, s->w, i, r0 - 1 + (long)r, q0 - 1 + (long)q));
            for (size_t r = 0; r < 2; r++)
                for (size_t q = 0; q < 2; q++)
                    y += fabs(A2[a][r] * A2[b][q] * at(dy, s->h, s->w, o, r0 + (long)r, q0 + (long)q));
            sv[a * 4 + b] = v, sy[a * 4 + b] = y;
        }
}

typedef struct wdata {
    conv3x3_shape s;
    size_t xn, yn, wn, dun, sn;
    float *x[SAMPLES], *dy[SAMPLES]; /* bfloat16 values */
    float *dw0;
} wdata;

static void wdata_init(wdata *d, const size_t *sh, uint64_t seed) {
    d->s = (conv3x3_shape){.c = sh[0], .co = sh[1], .h = sh[2], .w = sh[3]};
    d->xn = d->s.c * d->s.h * d->s.w, d->yn = d->s.co * d->s.h * d->s.w, d->wn = d->s.co * d->s.c * 9;
    assert_true(conv3x3_winograd_dw_floats(&d->s, &d->dun) && conv3x3_winograd_dw_scratch_floats(&d->s, &d->sn));
    for (int n = 0; n < SAMPLES; n++)
        d->x[n] = op_test_bf16_filled(d->xn, &seed), d->dy[n] = op_test_bf16_filled(d->yn, &seed);
    d->dw0 = op_test_bf16_filled(d->wn, &seed);
}

static void wdata_free(wdata *d) {
    for (int n = 0; n < SAMPLES; n++) free(d->x[n]), free(d->dy[n]);
    free(d->dw0);
}

/* dw = dw0 + the weight gradient of samples [n0, n1) summed in one dU (scratch NaN: a read of anything unwritten
 * shows). */
static void run(const wdata *d, float *dw, const float *const *dy, int n0, int n1) {
    float *du = op_test_xmalloc(d->dun * sizeof(float)), *scratch = op_test_xmalloc(d->sn * sizeof(float));
    memset(du, 0, d->dun * sizeof(float));
    for (size_t k = 0; k < d->sn; k++) scratch[k] = NAN;
    for (int n = n0; n < n1; n++) conv3x3_winograd_dw_accumulate_bf16(&d->s, du, dy[n], d->x[n], scratch);
    memcpy(dw, d->dw0, d->wn * sizeof(float));
    conv3x3_winograd_dw_finish_bf16(&d->s, dw, du);
    free(du), free(scratch);
}

/* The elements of dw outside the derived bound around the reference of d's operands (see the top). */
static size_t violations(const wdata *d, const float *dw, double *worst) {
    const conv3x3_shape *s = &d->s;
    const size_t th = (s->h + 1) / 2, tw = (s->w + 1) / 2;
    const double u = ldexp(1.0, -24), e = ldexp(1.0, -9) + (1 + ldexp(1.0, -9)) * 2 * u;
    const double K = SAMPLES * 2.0 * (double)(th * tw) + 2, C = (1 + e) * (1 + e) * (1 + K * u) * (1 + 5 * u) - 1;
    double sv[16], sy[16], M[16];
    size_t bad = 0;
    for (size_t o = 0; o < s->co; o++)
        for (size_t i = 0; i < s->c; i++) {
            memset(M, 0, sizeof M);
            for (int n = 0; n < SAMPLES; n++)
                for (size_t ty = 0; ty < th; ty++)
                    for (size_t tx = 0; tx < tw; tx++) {
                        tile_magnitudes(s, d->x[n], d->dy[n], i, o, ty, tx, sv, sy);
                        for (size_t xi = 0; xi < 16; xi++) M[xi] += sy[xi] * sv[xi];
                    }
            for (size_t tap = 0; tap < 9; tap++) {
                double sum = 0.0, gm = 0.0;
                for (int n = 0; n < SAMPLES; n++)
                    for (size_t y = 0; y < s->h; y++)
                        for (size_t x = 0; x < s->w; x++)
                            sum += (double)d->dy[n][(o * s->h + y) * s->w + x] *
                                   at(d->x[n], s->h, s->w, i, (long)(y + tap / 3) - 1, (long)(x + tap % 3) - 1);
                for (size_t a = 0; a < 4; a++)
                    for (size_t b = 0; b < 4; b++) gm += fabs(GT2[tap / 3][a] * GT2[tap % 3][b]) * M[a * 4 + b];
                const size_t k = (o * s->c + i) * 9 + tap;
                const double want = d->dw0[k] + sum, bound = C * gm + 2 * u * fabs(d->dw0[k]) + 1e-30;
                const double err = fabs(dw[k] - want);
                if (err > bound) bad++;
                if (worst && err / bound > *worst) *worst = err / bound;
            }
        }
    return bad;
}

static void check_path(bool portable) {
    conv3x3_bf16_force_portable(portable);
    double worst = 0.0;
    for (size_t i = 0; i < N_SHAPES; i++) {
        wdata d;
        wdata_init(&d, shapes[i], 300 + i);
        float *dw = op_test_xmalloc(d.wn * sizeof(float));
        run(&d, dw, (const float *const *)d.dy, 0, SAMPLES);
        const size_t bad = violations(&d, dw, &worst);
        if (bad)
            fail_msg("(%zu, %zu, %zu, %zu): %zu elements outside the bound", d.s.c, d.s.co, d.s.h, d.s.w, bad);
        free(dw);
        wdata_free(&d);
    }
    conv3x3_bf16_force_portable(false);
    printf("# %s: largest error %.3f of the derived bound\n", portable ? "portable twin" : "AVX512_BF16", worst);
}

static void test_portable_matches_reference(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available(), "AVX-512 (the Winograd convolution)");
    check_path(true);
}

static void test_avx512_bf16_matches_reference(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available() && kernel_isa_now() >= KERNEL_ISA_AVX512_BF16, "AVX512_BF16");
    check_path(false);
}

/* The bound catches what a pairing bug would do: the last tile of dy lost (an odd count's unpaired tile) and
 * dy's tiles taken in the wrong pairs (rows of 2 x 2 tiles swapped, as halves swapped between operands would). */
static void test_planted_errors_fail(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available(), "AVX-512 (the Winograd convolution)");
    const size_t sh[][4] = {{3, 5, 6, 6}, {16, 16, 8, 8}};
    for (size_t i = 0; i < 2; i++) {
        wdata d;
        wdata_init(&d, sh[i], 400 + i);
        float *dw = op_test_xmalloc(d.wn * sizeof(float)), *bent[SAMPLES];
        for (int n = 0; n < SAMPLES; n++) {
            bent[n] = op_test_xmalloc(d.yn * sizeof(float));
            memcpy(bent[n], d.dy[n], d.yn * sizeof(float));
        }
        for (size_t o = 0; o < d.s.co; o++) /* the last 2x2 output tile of every plane of sample 0 */
            for (size_t y = d.s.h - 2; y < d.s.h; y++)
                for (size_t x = d.s.w - 2; x < d.s.w; x++) bent[0][(o * d.s.h + y) * d.s.w + x] = 0.0f;
        run(&d, dw, (const float *const *)bent, 0, SAMPLES);
        assert_true(violations(&d, dw, NULL) > 0);
        for (size_t o = 0; o < d.s.co; o++) /* the first two tile columns of sample 1 swapped */
            for (size_t y = 0; y < d.s.h; y++)
                for (size_t x = 0; x < 2; x++) {
                    float *row = bent[1] + (o * d.s.h + y) * d.s.w;
                    const float t = row[x];
                    row[x] = row[x + 2], row[x + 2] = t;
                }
        memcpy(bent[0], d.dy[0], d.yn * sizeof(float));
        run(&d, dw, (const float *const *)bent, 0, SAMPLES);
        assert_true(violations(&d, dw, NULL) > 0);
        run(&d, dw, (const float *const *)d.dy, 0, SAMPLES); /* and the unbent operands pass */
        assert_int_equal(violations(&d, dw, NULL), 0);
        for (int n = 0; n < SAMPLES; n++) free(bent[n]);
        free(dw);
        wdata_free(&d);
    }
}

/* The same bits from the AVX512_BF16 kernel and the twin, and from the samples summed by two threads into dUs of
 * their own (as conv2d's sample threads do, finished in thread order) and by one thread into two dUs. */
static void test_same_bits_every_way(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available(), "AVX-512 (the Winograd convolution)");
    const bool hw = kernel_isa_now() >= KERNEL_ISA_AVX512_BF16;
    for (size_t i = 0; i < N_SHAPES; i++) {
        wdata d;
        wdata_init(&d, shapes[i], 500 + i);
        float *one = op_test_xmalloc(d.wn * sizeof(float)), *two = op_test_xmalloc(d.wn * sizeof(float));
        float *du[SAMPLES], *scratch[SAMPLES];
        for (int n = 0; n < SAMPLES; n++) {
            du[n] = op_test_xmalloc(d.dun * sizeof(float)), scratch[n] = op_test_xmalloc(d.sn * sizeof(float));
            memset(du[n], 0, d.dun * sizeof(float));
            conv3x3_winograd_dw_accumulate_bf16(&d.s, du[n], d.dy[n], d.x[n], scratch[n]);
        }
        memcpy(one, d.dw0, d.wn * sizeof(float));
        for (int n = 0; n < SAMPLES; n++) conv3x3_winograd_dw_finish_bf16(&d.s, one, du[n]);
        #pragma omp parallel num_threads(SAMPLES)
        {
            const int t = omp_get_thread_num();
            memset(du[t], 0, d.dun * sizeof(float));
            conv3x3_winograd_dw_accumulate_bf16(&d.s, du[t], d.dy[t], d.x[t], scratch[t]);
        }
        memcpy(two, d.dw0, d.wn * sizeof(float));
        for (int n = 0; n < SAMPLES; n++) conv3x3_winograd_dw_finish_bf16(&d.s, two, du[n]);
        assert_memory_equal(one, two, d.wn * sizeof(float));
        if (hw) {
            run(&d, one, (const float *const *)d.dy, 0, SAMPLES);
            conv3x3_bf16_force_portable(true);
            run(&d, two, (const float *const *)d.dy, 0, SAMPLES);
            conv3x3_bf16_force_portable(false);
            assert_memory_equal(one, two, d.wn * sizeof(float));
        }
        for (int n = 0; n < SAMPLES; n++) free(du[n]), free(scratch[n]);
        free(one), free(two);
        wdata_free(&d);
    }
}

#ifdef SNUG_AVX512
static AVX512 void round16(uint32_t out[16], const float in[16]) {
    _mm512_storeu_si512(out, dpbf16_of16(_mm512_loadu_ps(in)));
}
#endif

/* The transforms round with dpbf16_of16 (AVX-512F): the bits of dpbf16_of, vcvtne2ps2bf16's, on the values where
 * rounding has cases: zeros, denormals, the smallest normals, ties either way, a carry into the exponent, the
 * largest finite values (to infinity), infinities, quiet and signalling NaNs; and on random patterns. */
static void test_rounding_is_dpbf16_of(void **state) {
    (void)state;
    SKIP_UNLESS(conv3x3_winograd_available(), "AVX-512 (the Winograd convolution)");
#ifdef SNUG_AVX512
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x80800000u,
                                0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x3FFFFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFF812345u, 0x3F808001u};
    uint64_t seed = 9;
    for (int round = 0; round < 4096; round++) {
        float in[16];
        uint32_t out[16];
        for (int l = 0; l < 16; l++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            const uint32_t bits = round == 0 && (size_t)l < sizeof special / sizeof special[0]   ? special[l]
                                  : round == 1 && (size_t)l + 16 < sizeof special / sizeof special[0] ? special[l + 16]
                                                                                                     : (uint32_t)(seed >> 32);
            in[l] = vm_from_bits(bits);
        }
        round16(out, in);
        for (int l = 0; l < 16; l++)
            if (out[l] != dpbf16_of(in[l]))
                fail_msg("0x%08x: 0x%04x, dpbf16_of 0x%04x", vm_to_bits(in[l]), out[l], dpbf16_of(in[l]));
    }
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_is_dpbf16_of),
        cmocka_unit_test(test_portable_matches_reference),
        cmocka_unit_test(test_avx512_bf16_matches_reference),
        cmocka_unit_test(test_planted_errors_fail),
        cmocka_unit_test(test_same_bits_every_way),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

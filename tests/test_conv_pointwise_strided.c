/* The strided 1x1 convolution (a ResNet's downsampling shortcut): its column matrix is x subsampled and its
 * input gradient a scatter (kernels/im2col.c, subsample_plane and scatter_plane_add). The conv2d op against a
 * double-precision reference for the output and every gradient, over odd planes, planes of one row or one
 * column, one channel, channel counts that leave partial GEMM tiles, strides 2 and 3; the workspace starts
 * full of NaN; the output and the input gradient (per sample, whatever the threads) have the same bits on 1, 2
 * and 3 threads. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

typedef struct pw_case { size_t c, h, w, co, s; } pw_case;

static const pw_case cases[] = {
    {1, 1, 1, 1, 2}, {3, 7, 5, 4, 2}, {2, 1, 9, 3, 2},  {5, 8, 8, 17, 2},  {4, 9, 3, 2, 3},
    {1, 5, 1, 1, 2}, {7, 33, 31, 9, 2}, {16, 32, 32, 32, 2}, {6, 10, 11, 5, 3},
};

#define M 4 /* samples: at least the threads, so that the op runs samples on threads */

static void expect(float got, double want, double mag, const char *what, size_t i) {
    if (!(fabs((double)got - want) <= 2e-6 * (1.0 + mag)))
        fail_msg("%s[%zu]: got %.9g, want %.9g", what, i, (double)got, want);
}

/* f after forward and backward (dout = f->r) against the reference. */
static void check_reference(const op_fixture *f, const pw_case *k) {
    const size_t ho = (k->h - 1) / k->s + 1, wo = (k->w - 1) / k->s + 1, npix = ho * wo;
    const size_t xn = k->c * k->h * k->w, yn = k->co * npix;
    const float *W = f->w[0], *b = f->w[1];
    for (size_t n = 0; n < M; n++) {
        const float *x = f->x[0] + n * xn, *r = f->r + n * yn;
        for (size_t o = 0; o < k->co; o++)
            for (size_t p = 0; p < npix; p++) {
                double sum = b[o], mag = fabs(sum);
                for (size_t c = 0; c < k->c; c++) {
                    const double v = (double)W[o * k->c + c] * x[(c * k->h + p / wo * k->s) * k->w + p % wo * k->s];
                    sum += v, mag += fabs(v);
                }
                expect(f->y[n * yn + o * npix + p], sum, mag, "y", n * yn + o * npix + p);
            }
        for (size_t c = 0; c < k->c; c++)
            for (size_t i = 0; i < k->h; i++)
                for (size_t j = 0; j < k->w; j++) {
                    double sum = 0.0, mag = 0.0;
                    if (i % k->s == 0 && j % k->s == 0)
                        for (size_t o = 0; o < k->co; o++) {
                            const double v = (double)W[o * k->c + c] * r[o * npix + i / k->s * wo + j / k->s];
                            sum += v, mag += fabs(v);
                        }
                    const size_t at = n * xn + (c * k->h + i) * k->w + j;
                    expect(f->dx[0][at], sum, mag, "dx", at);
                }
    }
    for (size_t o = 0; o < k->co; o++) {
        for (size_t c = 0; c < k->c; c++) {
            double sum = 0.0, mag = 0.0;
            for (size_t n = 0; n < M; n++)
                for (size_t p = 0; p < npix; p++) {
                    const double v = (double)f->r[n * yn + o * npix + p] *
                                     f->x[0][n * xn + (c * k->h + p / wo * k->s) * k->w + p % wo * k->s];
                    sum += v, mag += fabs(v);
                }
            expect(f->dw[0][o * k->c + c], sum, mag, "dW", o * k->c + c);
        }
        double sum = 0.0, mag = 0.0;
        for (size_t n = 0; n < M; n++)
            for (size_t p = 0; p < npix; p++) sum += f->r[n * yn + o * npix + p], mag += fabs(f->r[n * yn + o * npix + p]);
        expect(f->dw[1][o], sum, mag, "db", o);
    }
}

static void test_matches_reference_and_threads(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pw_case *k = &cases[i];
        op_fixture f[3];
        for (int t = 0; t < 3; t++) {
            snug_graph *g = snug_graph_new("t");
            snug_conv2d(g, "conv", snug_input(g, "x", k->c, k->h, k->w), k->co, 1, k->s, 0);
            assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
            op_fixture_init(&f[t], g, 1, M, t + 1, FILL_PLAIN, 21 + i);
            const size_t wb = f[t].op->workspace_bytes(f[t].node, M, t + 1);
            for (size_t b = 0; b < wb / sizeof(float); b++) ((float *)f[t].work)[b] = NAN;
            op_fixture_analytic(&f[t]);
        }
        check_reference(&f[0], k);
        for (int t = 1; t < 3; t++) {
            assert_memory_equal(f[t].y, f[0].y, M * f[0].out_n * sizeof(float));
            assert_memory_equal(f[t].dx[0], f[0].dx[0], M * f[0].in_n[0] * sizeof(float));
            check_reference(&f[t], k);
        }
        for (int t = 0; t < 3; t++) op_fixture_free(&f[t]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference_and_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

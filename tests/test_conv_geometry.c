/* conv2d's geometries beyond one square kernel, stride and padding: dilation (PyTorch's: taps d pixels apart, a
 * window spanning d (k - 1) + 1) and a kernel, stride and padding per axis (kh x kw). The forward against a
 * float64 direct convolution, every gradient against central differences, the output shape and the plan's
 * workspace derived from the geometry, 1 and 2 threads giving the same bits, and the errors. Such kernels take
 * the lowering (im2col), never the 3x3 direct or Winograd kernels. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/gemm_direct.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

/* kw, sw, pw: the width axis's kernel, stride and padding where kw is set, else the height's (k, s, p). */
typedef struct dil_case { size_t c, h, w, co, k, s, p, d, groups; bool no_bias; size_t kw, sw, pw; } dil_case;

static const dil_case cases[] = {
    {3, 9, 8, 4, 3, 1, 2, 2, 1, false, 0, 0, 0},  /* DeepLab's atrous 3x3: dilation 2, padding 2 keeps the plane */
    {2, 11, 9, 3, 3, 2, 1, 2, 1, false, 0, 0, 0}, /* strided and dilated: some inputs get no gradient */
    {4, 10, 10, 4, 3, 1, 1, 3, 2, true, 0, 0, 0}, /* grouped, no bias, padding narrower than the span's half */
    {2, 9, 7, 2, 2, 1, 0, 3, 1, false, 0, 0, 0},  /* an even kernel, no padding */
    {4, 7, 8, 6, 3, 2, 3, 2, 2, false, 0, 0, 0},  /* padding beyond the span's half: border outputs see only zeros */
    {3, 5, 6, 4, 1, 1, 0, 4, 1, false, 0, 0, 0},  /* 1x1: dilation changes nothing (the pointwise path) */
    {2, 13, 12, 2, 5, 3, 4, 2, 1, true, 0, 0, 0}, /* a 5x5 kernel over 9x9 pixels */
    {3, 7, 9, 4, 1, 1, 0, 1, 1, false, 3, 1, 1},  /* 1x3, padded along the width only */
    {2, 9, 6, 3, 3, 2, 1, 1, 1, true, 1, 1, 0},   /* 3x1, strided along the height only */
    {4, 8, 11, 4, 2, 1, 1, 2, 2, false, 3, 2, 2}, /* 2x3 dilated, grouped, a stride and padding per axis */
    {2, 6, 7, 2, 3, 2, 0, 1, 1, false, 1, 3, 0},  /* 3x1 with stride 2x3: some inputs get no gradient */
};

static size_t kw_of(const dil_case *k) { return k->kw ? k->kw : k->k; }
static size_t sw_of(const dil_case *k) { return k->kw ? k->sw : k->s; }
static size_t pw_of(const dil_case *k) { return k->kw ? k->pw : k->p; }

static snug_graph *dil_graph(const dil_case *k) {
    snug_graph *g = snug_graph_new("t");
    const snug_conv2d_spec s = {.out_channels = k->co, .kernel = k->k, .stride = k->s, .padding = k->p,
                                .dilation = k->d, .groups = k->groups, .no_bias = k->no_bias, .kernel_w = k->kw,
                                .stride_w = k->sw, .padding_w = k->pw};
    snug_conv2d_ex(g, "conv", snug_input(g, "x", k->c, k->h, k->w), &s);
    return g; /* node 1 */
}

/* The output side PyTorch gives: floor((n + 2p - d (k - 1) - 1) / s) + 1, for the axis's k, s, p. */
static size_t out_side(size_t n, size_t k, size_t s, size_t p, size_t d) {
    return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}
static size_t out_h(const dil_case *k) { return out_side(k->h, k->k, k->s, k->p, k->d); }
static size_t out_w(const dil_case *k) { return out_side(k->w, kw_of(k), sw_of(k), pw_of(k), k->d); }

/* out[n][o][i][j] in double, from the definition: group o / (co / G) sees its C / G input channels, tap (a, b)
 * reads input (i s + a d - p, j sw + b d - pw). */
/* *mag: the sum of the terms' magnitudes, bias included (float32 summation's error bound scales with it). */
static double conv_ref(const op_fixture *f, const dil_case *k, size_t n, size_t o, size_t i, size_t j, double *mag) {
    const size_t cg = k->c / k->groups, g0 = o / (k->co / k->groups) * cg, kw = kw_of(k);
    double acc = f->w[1] ? f->w[1][o] : 0.0;
    *mag = fabs(acc);
    for (size_t c = 0; c < cg; c++)
        for (size_t a = 0; a < k->k; a++)
            for (size_t b = 0; b < kw; b++) {
                const long ih = (long)(i * k->s + a * k->d) - (long)k->p;
                const long iw = (long)(j * sw_of(k) + b * k->d) - (long)pw_of(k);
                if (ih < 0 || iw < 0 || ih >= (long)k->h || iw >= (long)k->w) continue;
                const double t = (double)f->w[0][((o * cg + c) * k->k + a) * kw + b] *
                                 f->x[0][((n * k->c + g0 + c) * k->h + (size_t)ih) * k->w + (size_t)iw];
                acc += t;
                *mag += fabs(t);
            }
    return acc;
}

static void check_forward(op_fixture *f, const dil_case *k, size_t m) {
    f->c.m = m;
    f->op->forward(&f->c);
    const size_t ho = out_h(k), wo = out_w(k);
    for (size_t n = 0; n < m; n++)
        for (size_t o = 0; o < k->co; o++)
            for (size_t i = 0; i < ho; i++)
                for (size_t j = 0; j < wo; j++) {
                    /* float32 products and sums of the C/G kh kw terms and the bias, in any order: each result
                     * within (terms + 2) u of the magnitudes' sum, u = 2^-24 */
                    double mag = 0.0;
                    const double want = conv_ref(f, k, n, o, i, j, &mag);
                    const double terms = (double)(k->c / k->groups * k->k * kw_of(k));
                    assert_float_equal(f->y[((n * k->co + o) * ho + i) * wo + j], want,
                                       (terms + 2.0) * 0x1p-24 * mag + DBL_MIN);
                }
}

static void test_dilated_gradients(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            op_fixture_init(&f, dil_graph(&cases[i]), 1, m, 2, FILL_PLAIN, 4100 + 10 * i + m);
            check_forward(&f, &cases[i], m);
            op_check_all(&f, m, 1e-2f, 2e-4); /* linear: float rounding only (test_op_gradients.c) */
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
}

/* The shape PyTorch gives; the weight (co, C/G, kh, kw) and its fan_in; the workspace of one thread is the column
 * matrix (C kh kw, Ho Wo) floats rounded up to 64 bytes (none for an unpadded 1x1 at stride 1). */
static void test_dilated_shape_and_workspace(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const dil_case *k = &cases[i];
        snug_graph *g = dil_graph(k);
        assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
        const graph_node *n = &g->nodes[1];
        const snug_shape *out = &g->tensors[n->output].shape;
        assert_int_equal(out->dims[0], k->co);
        assert_int_equal(out->dims[1], out_h(k));
        assert_int_equal(out->dims[2], out_w(k));
        const graph_param *w = &g->params[n->params[0]];
        assert_int_equal(w->shape.dims[2], k->k);
        assert_int_equal(w->shape.dims[3], kw_of(k));
        assert_int_equal(w->numel, k->co * k->c / k->groups * k->k * kw_of(k));
        assert_int_equal(w->fan_in, k->c / k->groups * k->k * kw_of(k));
        assert_int_equal(n->n_params, k->no_bias ? 1 : 2);
        size_t col = k->c * k->k * kw_of(k) * out->dims[1] * out->dims[2] * sizeof(float);
        if (k->k == 1 && kw_of(k) == 1 && k->s == 1 && sw_of(k) == 1 && k->p == 0 && pw_of(k) == 0) col = 0;
        assert_int_equal(op_conv2d.workspace_bytes(n, 1, 1), (col + 63) / 64 * 64);
        snug_graph_free(g);
    }
}

/* Dilation 1 and a width axis like the height's through the spec are snug_conv2d_grouped: the same bits. */
static void test_dilation_one_is_plain(void **state) {
    (void)state;
    const dil_case k = {4, 9, 9, 4, 3, 1, 1, 1, 1, false, 3, 1, 1};
    snug_graph *plain = snug_graph_new("t");
    snug_conv2d_grouped(plain, "conv", snug_input(plain, "x", 4, 9, 9), 4, 3, 1, 1, 1);
    op_fixture a, b;
    op_fixture_init(&a, plain, 1, 2, 2, FILL_PLAIN, 4300);
    op_fixture_init(&b, dil_graph(&k), 1, 2, 2, FILL_PLAIN, 4300);
    op_fixture_analytic(&a);
    op_fixture_analytic(&b);
    op_expect_same_results(&a, &b);
    op_fixture_free(&a);
    op_fixture_free(&b);
}

/* One sample on 1 and on 2 threads (the threads share its im2col and GEMMs, each output written by one), and
 * outputs and input gradients of 4 samples (one per thread at a time): the same bits. That holds where the
 * GEMMs are gemm_direct's (AVX-512), whose sums never depend on the split; elsewhere they are the BLAS's, whose
 * bits may change with its thread count, and the promise is the same bits for the same thread count. */
static void test_dilated_threads_same_bits(void **state) {
    (void)state;
    const dil_case k = {16, 24, 24, 16, 3, 1, 2, 2, 1, false, 5, 2, 1};
    const int first = gemm_direct_has_avx512() ? 1 : 2;
    for (size_t m = 1; m <= 4; m += 3) {
        op_fixture one, two;
        op_fixture_init(&one, dil_graph(&k), 1, m, first, FILL_PLAIN, 4400 + m);
        op_fixture_init(&two, dil_graph(&k), 1, m, 2, FILL_PLAIN, 4400 + m);
        op_fixture_analytic(&one);
        op_fixture_analytic(&two);
        const size_t xn = m * one.in_n[0], yn = m * one.out_n;
        assert_memory_equal(one.y, two.y, yn * sizeof(float));
        assert_memory_equal(one.dx[0], two.dx[0], xn * sizeof(float));
        if (m == 1 || first == 2)
            for (int p = 0; p < one.n_w; p++) assert_memory_equal(one.dw[p], two.dw[p], one.wn[p] * sizeof(float));
        op_fixture_free(&one);
        op_fixture_free(&two);
    }
}

static void test_dilation_errors(void **state) {
    (void)state;
    /* 3x3 at dilation 3 spans 7 pixels: more than 4 + 2 padded */
    const dil_case big = {1, 4, 4, 2, 3, 1, 1, 3, 1, false, 0, 0, 0};
    op_expect_error(dil_graph(&big), SNUG_E_SHAPE,
                    (const char *const[]){"conv2d", "'conv'", "dilation 3", "spanning 7x7", "(1, 4, 4)", NULL});
    const dil_case huge = {1, 4, 4, 2, 3, 1, 1, SIZE_MAX / 2 + 1, 1, false, 0, 0, 0}; /* 2 (d - 1) + 1 > SIZE_MAX */
    /* 1x5 over a width of 3 padded by 0 */
    const dil_case wide = {1, 4, 3, 2, 1, 1, 0, 1, 1, false, 5, 1, 0};
    op_expect_error(dil_graph(&wide), SNUG_E_SHAPE,
                    (const char *const[]){"conv2d", "'conv'", "kernel 1x5", "spanning 1x5", "(1, 4, 3)", NULL});
    const dil_case zero = {1, 4, 4, 2, 1, 1, 0, 1, 1, false, 3, 0, 0}; /* stride_w 0 reads as stride: 1 */
    snug_graph *zg = dil_graph(&zero);
    assert_int_equal(snug_graph_check(zg, NULL), SNUG_OK);
    assert_int_equal(zg->nodes[1].p.conv2d.stride_w, 1);
    snug_graph_free(zg);
    op_expect_error(dil_graph(&huge), SNUG_E_ARG, (const char *const[]){"conv2d", "'conv'", "dilation", NULL});
    snug_graph *g = snug_graph_new("t");
    snug_conv2d_ex(g, "conv", snug_input(g, "x", 1, 4, 4), NULL);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"'conv'", "snug_conv2d_spec", NULL});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dilated_gradients),
        cmocka_unit_test(test_dilated_shape_and_workspace),
        cmocka_unit_test(test_dilation_one_is_plain),
        cmocka_unit_test(test_dilated_threads_same_bits),
        cmocka_unit_test(test_dilation_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

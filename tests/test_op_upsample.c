/* upsample_nearest2d (snug_upsample_nearest2d, ONNX's Resize in nearest mode): forward values against the
 * definition y[c, i, j] = x[c, i / s, j / s], gradients against central finite differences (m = 1 and 3, odd
 * planes, factors 1, 2 and 3), backward adding and writing fresh gradients with the bits of adding, the parallel
 * path agreeing with one thread, and the errors the builder reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

#define TOL_LINEAR 2e-4 /* a copy: central differences differ from it by float rounding only */

static snug_graph *upsample_graph(size_t c, size_t h, size_t w, size_t scale) {
    snug_graph *g = snug_graph_new("t");
    snug_upsample_nearest2d(g, "up", snug_input(g, "x", c, h, w), scale);
    return g;
}

static void expect_nearest(const op_fixture *f, size_t m, size_t c, size_t h, size_t w, size_t s) {
    for (size_t p = 0; p < m * c; p++)
        for (size_t i = 0; i < h * s; i++)
            for (size_t j = 0; j < w * s; j++)
                assert_true(f->y[(p * h * s + i) * w * s + j] == f->x[0][(p * h + i / s) * w + j / s]);
}

static void test_values_and_gradients(void **state) {
    (void)state;
    const size_t scales[] = {1, 2, 3};
    for (size_t k = 0; k < 3; k++)
        for (size_t m = 1; m <= 3; m += 2) {
            const size_t s = scales[k];
            snug_graph *g = upsample_graph(3, 5, 7, s);
            const snug_shape out = snug_tensor_shape(g, 1);
            assert_int_equal(out.rank, 3);
            assert_int_equal(out.dims[1], 5 * s);
            assert_int_equal(out.dims[2], 7 * s);
            op_fixture f;
            op_fixture_init(&f, g, 1, m, 1, FILL_PLAIN, 700 + 10 * s + m);
            assert_int_equal(f.op->saved_bytes(f.node), 0);
            f.op->forward(&f.c);
            expect_nearest(&f, m, 3, 5, 7, s);
            op_check_all(&f, m, 1e-2f, TOL_LINEAR);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
}

/* 64 planes of 32x32 up-sampled twice: the parallel loops give the bits of one thread. */
static void test_threads_agree(void **state) {
    (void)state;
    op_fixture one, many;
    op_fixture_init(&one, upsample_graph(16, 32, 32, 2), 1, 4, 1, FILL_PLAIN, 19);
    op_fixture_init(&many, upsample_graph(16, 32, 32, 2), 1, 4, 4, FILL_PLAIN, 19);
    op_fixture_analytic(&one);
    op_fixture_analytic(&many);
    expect_nearest(&many, 4, 16, 32, 32, 2);
    op_expect_same_results(&one, &many);
    op_fixture_free(&one);
    op_fixture_free(&many);
}

static void test_errors(void **state) {
    (void)state;
    op_expect_error(upsample_graph(2, 3, 3, 0), SNUG_E_ARG, (const char *const[]){"'up'", "scale 0", NULL});
    op_expect_error(upsample_graph(2, 3, 3, 65), SNUG_E_ARG, (const char *const[]){"scale 65", NULL});
    snug_graph *g = snug_graph_new("t");
    snug_upsample_nearest2d(g, "up", snug_flatten(g, "f", snug_input(g, "x", 2, 3, 3)), 2);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"'up'", "(18)", NULL});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_gradients),
        cmocka_unit_test(test_threads_agree),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

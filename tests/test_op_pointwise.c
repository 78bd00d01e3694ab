/* The point-wise ops without parameters beside relu and gelu: sigmoid, tanh (snug_sigmoid, snug_tanh; ONNX's
 * Sigmoid and Tanh) and scale_shift (snug_scale_shift; ONNX's Mul, Div, Add and Sub by a constant scalar):
 * forward values against the float64 definitions, gradients against central finite differences (m = 1 and 3),
 * backward adding and writing fresh gradients with the bits of adding, sigmoid's and tanh's saturation far from
 * zero without NaN, the parallel path agreeing with one thread, and the model-file layers. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

/* Central differences of a smooth function with |slope| <= 1 differ from it by float rounding of L over the step
 * and by the curvature times the step squared. */
#define TOL_SMOOTH 2e-3

typedef snug_tensor (*builder)(snug_graph *, const char *, snug_tensor);

static double sigmoid64(double x) { return 1.0 / (1.0 + exp(-x)); }

static snug_graph *squash_graph(builder b, size_t c, size_t h, size_t w) {
    snug_graph *g = snug_graph_new("t");
    b(g, "act", snug_input(g, "x", c, h, w));
    return g;
}

/* Every output within 8 float32 epsilons of the float64 definition, relative: e^x is within 1 ulp, and a
 * divide, an add and a subtract round after it (tanh's series below |x| = 0.3 keeps its cancellation away). */
static void expect_values(const op_fixture *f, size_t n, double (*def)(double)) {
    for (size_t i = 0; i < n; i++) {
        const double want = def(f->x[0][i]);
        assert_true(fabs(f->y[i] - want) <= 8 * FLT_EPSILON * fabs(want));
    }
}

static void check_op(builder b, double (*def)(double), const op_desc *op) {
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        op_fixture_init(&f, squash_graph(b, 3, 5, 7), 1, m, 1, FILL_PLAIN, 900 + m);
        assert_ptr_equal(f.op, op);
        assert_int_equal(f.op->saved_bytes(f.node), 0);
        assert_true(f.op->flags & OP_KEEPS_OUTPUT);
        f.op->forward(&f.c);
        expect_values(&f, m * 3 * 5 * 7, def);
        op_check_all(&f, m, 1e-2f, TOL_SMOOTH);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

static void test_sigmoid(void **state) { (void)state, check_op(snug_sigmoid, sigmoid64, &op_sigmoid); }
static void test_tanh(void **state) { (void)state, check_op(snug_tanh, tanh, &op_tanh); }

/* Far from zero both saturate: e^x overflowing or underflowing gives the limits, never NaN. */
static void test_saturation(void **state) {
    (void)state;
    const float x[] = {-1e30f, -200.0f, -90.0f, 90.0f, 200.0f, 1e30f};
    const builder bs[] = {snug_sigmoid, snug_tanh};
    for (int k = 0; k < 2; k++) {
        op_fixture f;
        op_fixture_init(&f, squash_graph(bs[k], 6, 1, 1), 1, 1, 1, FILL_PLAIN, 5);
        for (int i = 0; i < 6; i++) f.x[0][i] = x[i];
        f.op->forward(&f.c);
        for (int i = 0; i < 6; i++) {
            const float low = k == 0 ? 0.0f : -1.0f;
            assert_true(f.y[i] == (x[i] < 0 ? low : 1.0f));
        }
        op_fixture_free(&f);
    }
}

/* 16 planes of 32x32 at m = 4: the parallel loops give the bits of one thread. */
static void test_threads_agree(void **state) {
    (void)state;
    const builder bs[] = {snug_sigmoid, snug_tanh};
    for (int k = 0; k < 2; k++) {
        op_fixture one, many;
        op_fixture_init(&one, squash_graph(bs[k], 16, 32, 32), 1, 4, 1, FILL_PLAIN, 23);
        op_fixture_init(&many, squash_graph(bs[k], 16, 32, 32), 1, 4, 4, FILL_PLAIN, 23);
        op_fixture_analytic(&one);
        op_fixture_analytic(&many);
        op_expect_same_results(&one, &many);
        op_fixture_free(&one);
        op_fixture_free(&many);
    }
}

static snug_graph *scale_shift_graph(size_t c, size_t h, size_t w, float scale, float shift) {
    snug_graph *g = snug_graph_new("t");
    snug_scale_shift(g, "affine", snug_input(g, "x", c, h, w), scale, shift);
    return g;
}

/* y = scale x + shift to float32 rounding of the product and the sum; the gradient is exact up to rounding. */
static void test_scale_shift(void **state) {
    (void)state;
    const float scales[] = {0.5f, -1.0f, 3.0f}, shifts[] = {0.0f, 1.0f, -0.25f};
    for (int k = 0; k < 3; k++)
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            op_fixture_init(&f, scale_shift_graph(2, 3, 5, scales[k], shifts[k]), 1, m, 1, FILL_PLAIN, 40 + k);
            assert_ptr_equal(f.op, &op_scale_shift);
            assert_false(f.op->flags & (OP_KEEPS_INPUT | OP_KEEPS_OUTPUT));
            f.op->forward(&f.c);
            for (size_t i = 0; i < m * 30; i++) {
                const double want = (double)scales[k] * f.x[0][i] + shifts[k];
                assert_true(fabs(f.y[i] - want) <= 2 * FLT_EPSILON * (fabs(want) + fabs(shifts[k])));
            }
            op_check_all(&f, m, 1e-2f, TOL_SMOOTH);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    op_fixture one, many;
    op_fixture_init(&one, scale_shift_graph(16, 64, 64, 0.5f, 1.0f), 1, 4, 1, FILL_PLAIN, 29);
    op_fixture_init(&many, scale_shift_graph(16, 64, 64, 0.5f, 1.0f), 1, 4, 4, FILL_PLAIN, 29);
    op_fixture_analytic(&one);
    op_fixture_analytic(&many);
    op_expect_same_results(&one, &many);
    op_fixture_free(&one);
    op_fixture_free(&many);
    op_expect_error(scale_shift_graph(2, 3, 3, INFINITY, 0.0f), SNUG_E_ARG,
                    (const char *const[]){"'affine'", "finite", NULL});
}

/* `type = sigmoid`, `type = tanh` and `type = scale_shift` in a model file build the ops. */
static void test_model_file_layers(void **state) {
    (void)state;
    static const char text[] = "[model]\ninput = image 1 4 4\n[s]\ntype = sigmoid\n[t]\ntype = tanh\n"
                               "[a]\ntype = scale_shift\nscale = 0.5\nshift = 1\n"
                               "[f]\ntype = flatten\n[fc]\ntype = linear\nout = 2\n[loss]\ntype = softmax_cross_entropy\n";
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_model_parse(text, "t.ini", &g, &err) != SNUG_OK) fail_msg("%s", err.message);
    assert_ptr_equal(g->nodes[graph_find_node(g, "s")].op, &op_sigmoid);
    assert_ptr_equal(g->nodes[graph_find_node(g, "t")].op, &op_tanh);
    const graph_node *a = &g->nodes[graph_find_node(g, "a")];
    assert_ptr_equal(a->op, &op_scale_shift);
    assert_true(a->p.scale_shift.scale == 0.5f && a->p.scale_shift.shift == 1.0f);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigmoid),
        cmocka_unit_test(test_tanh),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_threads_agree),
        cmocka_unit_test(test_scale_shift),
        cmocka_unit_test(test_model_file_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

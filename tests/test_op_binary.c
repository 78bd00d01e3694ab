/* The broadcasting element-wise arithmetic (ops/binary.c: snug_binary, snug_binary_viewed, snug_binary_const):
 * forward values against the float64 definition for every op and broadcast pattern, gradients of every computed
 * operand against central finite differences (m = 1 and 3), backward adding, the same tensor as both operands
 * (x * x), constant operands (a per-channel normalisation), the parallel path agreeing with one thread, what the
 * plan keeps (mul and div their inputs), refusals, and the model-file layers. */
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

/* Operands are drawn away from zero (|v| >= 0.1), so a divisor's 1 / b^2 is at most 100 and a step of 1e-3 in it
 * moves b by at most 1%: central differences then differ from the slope by the curvature's 1e-4 relative, plus
 * float rounding of the loss over the step. */
#define STEP 1e-3f
#define TOL 2e-2

static const snug_binary_op all_ops[] = {SNUG_BINARY_ADD, SNUG_BINARY_SUB, SNUG_BINARY_MUL, SNUG_BINARY_DIV};

static double apply64(snug_binary_op op, double a, double b) {
    switch (op) {
    case SNUG_BINARY_ADD: return a + b;
    case SNUG_BINARY_SUB: return a - b;
    case SNUG_BINARY_MUL: return a * b;
    case SNUG_BINARY_DIV: return a / b;
    }
    return NAN;
}

static snug_shape shape_of(int rank, size_t d0, size_t d1, size_t d2) {
    snug_shape s = {.rank = rank, .dims = {d0, d1, d2}};
    return s;
}

static size_t count(const snug_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

/* A computed tensor of shape s: a linear layer's output of s's element count over the flattened image x, read
 * as s by the op (the fixture fills the op's inputs itself, so only the shapes matter). */
static snug_tensor operand_of(snug_graph *g, const char *name, snug_tensor flat, const snug_shape *s) {
    return snug_linear(g, name, flat, count(s));
}

/* a (as sa) op b (as sb), both computed, over a (2, 3, 4) image input. */
static snug_graph *binary_graph(snug_binary_op op, const snug_shape *sa, const snug_shape *sb) {
    snug_graph *g = snug_graph_new("t");
    const snug_tensor flat = snug_flatten(g, "flat", snug_input(g, "x", 2, 3, 4));
    const snug_tensor a = operand_of(g, "a", flat, sa), b = operand_of(g, "b", flat, sb);
    snug_binary_viewed(g, "op", op, a, sa, b, sb);
    return g;
}

/* Element (s, i) of the output from the operands' own indices, numpy's way, in float64. */
static double expected(const op_fixture *f, snug_binary_op op, const snug_shape *sa, const snug_shape *sb,
                       const snug_shape *out, size_t s, size_t i) {
    size_t ia = 0, ib = 0, sta = 1, stb = 1, rest = i;
    for (int k = out->rank - 1; k >= 0; k--) {
        const size_t pos = rest % out->dims[k];
        rest /= out->dims[k];
        const int ja = sa->rank - out->rank + k, jb = sb->rank - out->rank + k;
        if (ja >= 0) ia += (sa->dims[ja] == 1 ? 0 : pos) * sta, sta *= sa->dims[ja];
        if (jb >= 0) ib += (sb->dims[jb] == 1 ? 0 : pos) * stb, stb *= sb->dims[jb];
    }
    const float *b = f->x[f->owner[1]];
    return apply64(op, f->x[0][s * f->in_n[0] + ia], b[s * f->in_n[1] + ib]);
}

/* One rounding of the float64 result. */
static void expect_values(const op_fixture *f, snug_binary_op op, const snug_shape *sa, const snug_shape *sb,
                          size_t m) {
    const snug_shape *out = &f->node->out_shape;
    for (size_t s = 0; s < m; s++)
        for (size_t i = 0; i < f->out_n; i++) {
            const double want = expected(f, op, sa, sb, out, s, i);
            assert_true(fabs(f->y[s * f->out_n + i] - want) <= FLT_EPSILON * fabs(want));
        }
}

static void check_pattern(const snug_shape *sa, const snug_shape *sb) {
    for (size_t k = 0; k < 4; k++)
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            op_fixture_init(&f, binary_graph(all_ops[k], sa, sb), 4, m, 1, FILL_AWAY_ZERO, 70 + 4 * m + k);
            f.op->forward(&f.c);
            expect_values(&f, all_ops[k], sa, sb, m);
            op_check_all(&f, m, STEP, TOL);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
}

/* Same shapes; per-channel (squeeze-excitation's (C, 1, 1)); a row over a sequence ((T, D) + (D)); one operand
 * broadcast on the left; both operands broadcast ((C, 1, W) with (H, 1)); a scalar per sample. */
static void test_same_shape(void **state) {
    (void)state;
    const snug_shape s = shape_of(3, 2, 3, 4);
    check_pattern(&s, &s);
}
static void test_per_channel(void **state) {
    (void)state;
    const snug_shape x = shape_of(3, 2, 3, 4), c = shape_of(3, 2, 1, 1);
    check_pattern(&x, &c);
    check_pattern(&c, &x);
}
static void test_rows(void **state) {
    (void)state;
    const snug_shape x = shape_of(2, 3, 4, 0), r = shape_of(1, 4, 0, 0);
    check_pattern(&x, &r);
    check_pattern(&r, &x);
}
static void test_both_broadcast(void **state) {
    (void)state;
    const snug_shape a = shape_of(3, 2, 1, 4), b = shape_of(2, 3, 1, 0);
    check_pattern(&a, &b);
}
static void test_scalar_per_sample(void **state) {
    (void)state;
    const snug_shape x = shape_of(3, 2, 3, 4), one = shape_of(3, 1, 1, 1);
    check_pattern(&x, &one);
}

/* x op x: one tensor as both operands, one gradient buffer that both terms land in (x * x: 2 x dy). x / x is 1,
 * whose gradient dy / x - dy x / x^2 is 0 but for the rounding of its two terms (each within an ulp of dy / x),
 * which no relative comparison with finite differences can hold: it is held to those two ulps instead. */
static void test_same_tensor(void **state) {
    (void)state;
    for (size_t k = 0; k < 4; k++) {
        snug_graph *g = snug_graph_new("t");
        snug_tensor x = snug_linear(g, "a", snug_flatten(g, "flat", snug_input(g, "x", 1, 2, 3)), 6);
        snug_binary(g, "op", all_ops[k], x, x);
        op_fixture f;
        op_fixture_init(&f, g, 3, 3, 1, FILL_AWAY_ZERO, 90 + k);
        assert_int_equal(f.owner[1], 0);
        if (all_ops[k] != SNUG_BINARY_DIV) {
            op_check_all(&f, 3, STEP, TOL);
        } else {
            op_fixture_analytic(&f);
            for (size_t i = 0; i < 3 * 6; i++)
                assert_true(fabsf(f.dx[0][i]) <= 2 * FLT_EPSILON * fabsf(f.r[i] / f.x[0][i]));
        }
        op_fixture_free(&f);
    }
}

/* (x - mean) / std with per-channel constants, and c / x, c - x with the constant first: values against float64,
 * the gradient of x against finite differences; the constants are no parameter. */
static snug_graph *const_graph(snug_binary_op op, bool c_first) {
    static const float c[3] = {0.5f, -2.0f, 0.25f};
    const snug_shape cs = shape_of(3, 3, 1, 1);
    snug_graph *g = snug_graph_new("t");
    snug_binary_const(g, "op", op, snug_input(g, "x", 3, 2, 2), NULL, c, &cs, c_first);
    return g;
}

static void test_constant(void **state) {
    (void)state;
    static const double c[3] = {0.5, -2.0, 0.25};
    for (size_t k = 0; k < 4; k++)
        for (int first = 0; first < 2; first++) {
            op_fixture f;
            op_fixture_init(&f, const_graph(all_ops[k], first), 1, 3, 1, FILL_AWAY_ZERO, 110 + 2 * k + first);
            assert_int_equal(f.g->n_params, 0);
            assert_int_equal(f.n_in, 1);
            /* only c / x reads x in backward */
            assert_int_equal(!!(f.op->flags & OP_KEEPS_INPUT), all_ops[k] == SNUG_BINARY_DIV && first);
            f.op->forward(&f.c);
            for (size_t i = 0; i < 3 * 12; i++) {
                const double x = f.x[0][i], cc = c[(i % 12) / 4];
                const double want = first ? apply64(all_ops[k], cc, x) : apply64(all_ops[k], x, cc);
                assert_true(fabs(f.y[i] - want) <= FLT_EPSILON * fabs(want));
            }
            op_check_all(&f, 3, STEP, TOL);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    const float bad[3] = {1.0f, INFINITY, 1.0f};
    const snug_shape cs = shape_of(3, 3, 1, 1);
    snug_graph *g = snug_graph_new("t");
    snug_binary_const(g, "norm", SNUG_BINARY_SUB, snug_input(g, "x", 3, 2, 2), NULL, bad, &cs, false);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"'norm'", "finite", NULL});
    const float zero[3] = {1.0f, 0.0f, 1.0f};
    g = snug_graph_new("t");
    snug_binary_const(g, "scale", SNUG_BINARY_DIV, snug_input(g, "x", 3, 2, 2), NULL, zero, &cs, false);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"'scale'", "divisor not 0", NULL});
}

/* Squeeze-excitation's product at 16 channels of 32x32, m = 4: 4 threads give the bits of 1, forward and
 * backward (a gradient reduced over the plane sums in one order whatever the threads). */
static void test_threads_agree(void **state) {
    (void)state;
    const snug_shape x = shape_of(3, 16, 32, 32), s = shape_of(3, 16, 1, 1);
    for (size_t k = 0; k < 4; k++) {
        op_fixture one, many;
        op_fixture_init(&one, binary_graph(all_ops[k], &x, &s), 4, 4, 1, FILL_AWAY_ZERO, 130 + k);
        op_fixture_init(&many, binary_graph(all_ops[k], &x, &s), 4, 4, 4, FILL_AWAY_ZERO, 130 + k);
        op_fixture_analytic(&one);
        op_fixture_analytic(&many);
        op_expect_same_results(&one, &many);
        op_fixture_free(&one);
        op_fixture_free(&many);
    }
}

/* mul and div keep both operands for backward, add and sub neither (by a constant, test_constant says which);
 * nothing is saved beside them. */
static void test_kept(void **state) {
    (void)state;
    assert_true(op_mul.flags & OP_KEEPS_INPUT);
    assert_true(op_div.flags & OP_KEEPS_INPUT);
    assert_false(op_sub.flags & (OP_KEEPS_INPUT | OP_KEEPS_OUTPUT));
    assert_false(op_add_broadcast.flags & (OP_KEEPS_INPUT | OP_KEEPS_OUTPUT));
    const snug_shape x = shape_of(3, 2, 3, 4);
    snug_graph *g = binary_graph(SNUG_BINARY_MUL, &x, &x);
    const graph_node *n = &g->nodes[graph_find_node(g, "op")];
    assert_int_equal(n->op->saved_bytes(n), 0);
    assert_int_equal(n->op->workspace_bytes(n, 8, 2), 0);
    snug_graph_free(g);
}

static void test_refusals(void **state) {
    (void)state;
    const snug_shape a = shape_of(3, 2, 3, 4), b = shape_of(2, 2, 3, 0), wrong = shape_of(1, 5, 0, 0);
    op_expect_error(binary_graph(SNUG_BINARY_MUL, &a, &b), SNUG_E_SHAPE,
                    (const char *const[]){"'op'", "(2, 3, 4)", "(2, 3)", "broadcast", NULL});
    snug_graph *g = snug_graph_new("t");
    const snug_tensor flat = snug_flatten(g, "flat", snug_input(g, "x", 2, 3, 4));
    snug_binary_viewed(g, "op", SNUG_BINARY_ADD, flat, &wrong, flat, NULL);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"'op'", "element count", NULL});
    g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", 2, 3, 4);
    snug_binary(g, "op", (snug_binary_op)7, x, x);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"'op'", "snug_binary_op", NULL});
}

/* `type = sub`, `mul` and `div` with `inputs = A, B` build the ops; `mul` of one layer twice is x * x. */
static void test_model_file_layers(void **state) {
    (void)state;
    static const char text[] = "[model]\ninput = image 2 4 4\n[g]\ntype = global_avgpool\n[r]\ntype = relu\n"
                               "input = input\n[s]\ntype = sigmoid\n[silu]\ntype = mul\ninputs = r, s\n"
                               "[sq]\ntype = mul\ninputs = silu, silu\n[d]\ntype = div\ninputs = sq, s\n"
                               "[e]\ntype = sub\ninputs = d, r\n[f]\ntype = flatten\n[fc]\ntype = linear\n"
                               "out = 2\n[fc2]\ntype = linear\ninput = g\nout = 2\n[sum]\ntype = sub\n"
                               "inputs = fc, fc2\n[loss]\ntype = softmax_cross_entropy\n";
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_model_parse(text, "t.ini", &g, &err) != SNUG_OK) fail_msg("%s", err.message);
    assert_ptr_equal(g->nodes[graph_find_node(g, "silu")].op, &op_mul);
    assert_ptr_equal(g->nodes[graph_find_node(g, "d")].op, &op_div);
    assert_ptr_equal(g->nodes[graph_find_node(g, "e")].op, &op_sub);
    assert_int_equal(g->nodes[graph_find_node(g, "sq")].inputs[0], g->nodes[graph_find_node(g, "sq")].inputs[1]);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_shape),
        cmocka_unit_test(test_per_channel),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_both_broadcast),
        cmocka_unit_test(test_scalar_per_sample),
        cmocka_unit_test(test_same_tensor),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_threads_agree),
        cmocka_unit_test(test_kept),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_model_file_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

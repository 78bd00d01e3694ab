/* The layout ops and products between activations: permute, slice, reshape, softmax along an axis and matmul
 * with broadcasting. For each: forward against a reference computed here (exact copies for the layout ops,
 * double precision for softmax and matmul), finite-difference gradients on odd shapes (m = 1 and 3), backward
 * adds, a micro-batch smaller than the planned one, results that do not depend on the thread count, and the
 * errors the builders report. Nodes are bound by hand as in test_op_gradients.c (op_test_util.h: buffers sized
 * exactly from the op table, so ASan catches an op that overruns them). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

/* Relative tolerances of the finite-difference checks (see op_check_fd): the layout ops and matmul are linear
 * in each input, softmax is curved (an O(h^2) truncation error besides float rounding). */
#define TOL_LINEAR 2e-4
#define TOL_CURVED 3e-3

static int threads(void) { return omp_get_max_threads(); }

/* A graph input of any per-sample shape (snug_input makes (C, H, W); the test gives it the shape under test). */
static snug_tensor shaped_input(snug_graph *g, const char *name, snug_shape s) {
    size_t numel = 1;
    for (int i = 0; i < s.rank; i++) numel *= s.dims[i];
    snug_tensor x = snug_input(g, name, numel, 1, 1);
    if (x >= 0) g->tensors[x].shape = s;
    return x;
}

/* Row-major strides of s. */
static void strides_of(const snug_shape *s, size_t *st) {
    size_t k = 1;
    for (int i = s->rank - 1; i >= 0; i--) st[i] = k, k *= s->dims[i];
}

/* Runs m samples forward and the gradient checks of every input. */
static void check_grads(op_fixture *f, size_t m, float h, double tol) {
    op_check_all(f, m, h, tol);
    op_check_backward_adds(f);
}

/* One case: node `node` of g at m samples (1 thread for m = 1, every thread else), inputs times `gain`; forward
 * against expect(f, want, m), then the gradients. */
typedef void (*expect_fn)(const op_fixture *f, const void *want, size_t m);
static void check_case(snug_graph *g, int node, size_t m, uint64_t seed, float gain, expect_fn expect,
                       const void *want, float h, double tol) {
    op_fixture f;
    op_fixture_init(&f, g, node, m, m == 1 ? 1 : threads(), FILL_PLAIN, seed);
    for (int i = 0; i < f.n_in; i++)
        for (size_t j = 0; f.owner[i] == i && j < m * f.in_n[i]; j++) f.x[i][j] *= gain;
    f.op->forward(&f.c);
    expect(&f, want, m);
    check_grads(&f, m, h, tol);
    op_fixture_free(&f);
}

/* ---- permute ----------------------------------------------------------------------------------------------- */

static snug_graph *permute_graph(snug_shape s, const int *perm) {
    snug_graph *g = snug_graph_new("t");
    snug_permute(g, "perm", shaped_input(g, "x", s), perm);
    return g;
}

typedef struct permute_case { snug_shape s; int perm[SNUG_MAX_DIMS]; } permute_case;

/* y[i0, i1, ...] = x[the same indices, in input order]: each output element read back through perm. */
static void permute_expect(const op_fixture *f, const void *want, size_t m) {
    const snug_shape in = ((const permute_case *)want)->s;
    const int *perm = ((const permute_case *)want)->perm;
    assert_ptr_equal(f->op, &op_permute);
    assert_int_equal(f->op->flags & (OP_KEEPS_INPUT | OP_KEEPS_OUTPUT), 0);
    size_t ist[SNUG_MAX_DIMS], ost[SNUG_MAX_DIMS];
    const snug_shape out = f->node->out_shape;
    strides_of(&in, ist), strides_of(&out, ost);
    for (size_t s = 0; s < m; s++)
        for (size_t o = 0; o < f->out_n; o++) {
            size_t src = 0;
            for (int i = 0; i < out.rank; i++) src += (o / ost[i] % out.dims[i]) * ist[perm[i]];
            if (f->y[s * f->out_n + o] != f->x[0][s * f->out_n + src]) fail_msg("permute output %zu of sample %zu", o, s);
        }
}

static void test_permute(void **state) {
    (void)state;
    const permute_case cases[] = {
        {{2, {3, 5}}, {1, 0}},
        {{3, {2, 3, 4}}, {2, 0, 1}},
        {{4, {2, 3, 2, 5}}, {0, 2, 1, 3}},
        {{4, {2, 3, 2, 5}}, {3, 1, 0, 2}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t m = 1; m <= 3; m += 2)
            check_case(permute_graph(cases[k].s, cases[k].perm), 1, m, 700 + 10 * k + m, 1.0f, permute_expect,
                       &cases[k], 1e-2f, TOL_LINEAR);
}

/* ---- slice ------------------------------------------------------------------------------------------------- */

static snug_graph *slice_graph(snug_shape s, int axis, size_t start, size_t len, size_t step) {
    snug_graph *g = snug_graph_new("t");
    snug_slice(g, "slice", shaped_input(g, "x", s), axis, start, len, step);
    return g;
}

typedef struct slice_case { snug_shape s; int axis; size_t start, len, step; } slice_case;

/* Every output element is the input element at the sliced index. */
static void slice_expect(const op_fixture *f, const void *want, size_t m) {
    const slice_case *c = want;
    size_t ist[SNUG_MAX_DIMS], ost[SNUG_MAX_DIMS];
    const snug_shape out = f->node->out_shape;
    assert_int_equal(out.dims[c->axis], c->len);
    strides_of(&c->s, ist), strides_of(&out, ost);
    for (size_t s = 0; s < m; s++)
        for (size_t o = 0; o < f->out_n; o++) {
            size_t src = 0;
            for (int i = 0; i < out.rank; i++) {
                const size_t j = o / ost[i] % out.dims[i];
                src += (i == c->axis ? c->start + j * c->step : j) * ist[i];
            }
            assert_true(f->y[s * f->out_n + o] == f->x[0][s * f->in_n[0] + src]);
        }
}

static void test_slice(void **state) {
    (void)state;
    const slice_case cases[] = {
        {{2, {3, 7}}, 1, 1, 3, 2},
        {{2, {5, 4}}, 0, 2, 3, 1},
        {{3, {2, 6, 3}}, 1, 0, 2, 5},
        {{4, {2, 3, 4, 5}}, 3, 4, 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t m = 1; m <= 3; m += 2)
            check_case(slice_graph(cases[k].s, cases[k].axis, cases[k].start, cases[k].len, cases[k].step), 1, m,
                       800 + 10 * k + m, 1.0f, slice_expect, &cases[k], 1e-2f, TOL_LINEAR);
}

/* ---- reshape ----------------------------------------------------------------------------------------------- */

static void test_reshape_is_a_view(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    const snug_shape to = {3, {2, 3, 4}};
    snug_tensor y = snug_reshape(g, "view", shaped_input(g, "x", (snug_shape){2, {6, 4}}), to);
    assert_true(y >= 0);
    const graph_node *n = &g->nodes[1];
    assert_ptr_equal(n->op, &op_reshape);
    assert_true(n->op->flags & OP_IS_VIEW);
    assert_int_equal(n->out_shape.rank, 3);
    assert_int_equal(n->out_shape.dims[2], 4);
    snug_graph_free(g);
}

/* ---- softmax ----------------------------------------------------------------------------------------------- */

static snug_graph *softmax_graph(snug_shape s, int axis) {
    snug_graph *g = snug_graph_new("t");
    snug_softmax(g, "softmax", shaped_input(g, "x", s), axis);
    return g;
}

typedef struct softmax_case { snug_shape s; int axis; } softmax_case;

/* Each line along axis against its softmax in double. */
static void softmax_expect(const op_fixture *f, const void *want, size_t m) {
    const snug_shape s = ((const softmax_case *)want)->s;
    const int axis = ((const softmax_case *)want)->axis;
    assert_true(f->op->flags & OP_KEEPS_OUTPUT);
    size_t st[SNUG_MAX_DIMS];
    strides_of(&s, st);
    const size_t len = s.dims[axis], inner = st[axis];
    for (size_t o = 0; o < m * f->out_n; o++) {
        const size_t base = o - (o / inner % len) * inner; /* the line's first element */
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < len; j++) mx = fmax(mx, f->x[0][base + j * inner]);
        for (size_t j = 0; j < len; j++) sum += exp(f->x[0][base + j * inner] - mx);
        const double want = exp(f->x[0][o] - mx) / sum;
        if (fabs(f->y[o] - want) > 1e-6 * (1 + want)) fail_msg("softmax[%zu]: got %.8g, want %.8g", o, f->y[o], want);
    }
}

static void test_softmax(void **state) {
    (void)state;
    const softmax_case cases[] = {
        {{1, {7}}, 0}, {{2, {3, 5}}, 0}, {{3, {3, 4, 5}}, 1}, {{3, {3, 4, 5}}, 2}, {{4, {2, 3, 2, 3}}, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t m = 1; m <= 3; m += 2) /* inputs times 3: peakier */
            check_case(softmax_graph(cases[k].s, cases[k].axis), 1, m, 900 + 10 * k + m, 3.0f, softmax_expect,
                       &cases[k], 1e-3f, TOL_CURVED);
    op_fixture f;
    op_fixture_init(&f, softmax_graph((snug_shape){3, {3, 4, 5}}, 1), 1, 4, threads(), FILL_PLAIN, 990);
    op_check_all(&f, 3, 1e-3f, TOL_CURVED); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

/* ---- matmul ------------------------------------------------------------------------------------------------ */

/* A graph has one input: a and b are two slices of it, reshaped; matmul is node MM_NODE. */
enum { MM_NODE = 5 };
static snug_graph *matmul_graph(snug_shape a, snug_shape b) {
    snug_graph *g = snug_graph_new("t");
    size_t an = 1, bn = 1;
    for (int i = 0; i < a.rank; i++) an *= a.dims[i];
    for (int i = 0; i < b.rank; i++) bn *= b.dims[i];
    const snug_tensor x = shaped_input(g, "x", (snug_shape){1, {an + bn}});
    const snug_tensor ta = snug_reshape(g, "a", snug_slice(g, "a_part", x, 0, 0, an, 1), a);
    const snug_tensor tb = snug_reshape(g, "b", snug_slice(g, "b_part", x, 0, an, bn, 1), b);
    snug_matmul(g, "mm", ta, tb);
    return g;
}

/* Index of matrix `bi` of the output's leading axes in an operand whose leading axes are broadcast to it. */
static size_t operand_matrix(const snug_shape *op, const snug_shape *out, size_t bi) {
    size_t idx = 0, stride = 1;
    for (int i = out->rank - 3, j = op->rank - 3; i >= 0; i--, j--) {
        const size_t k = bi % out->dims[i];
        bi /= out->dims[i];
        if (j >= 0) {
            if (op->dims[j] != 1) idx += k * stride;
            stride *= op->dims[j];
        }
    }
    return idx;
}

typedef struct matmul_case { snug_shape a, b; int out_rank; } matmul_case;

static void matmul_expect(const op_fixture *f, const void *want, size_t m) {
    const snug_shape a = ((const matmul_case *)want)->a, b = ((const matmul_case *)want)->b;
    const snug_shape out = f->node->out_shape;
    assert_int_equal(out.rank, ((const matmul_case *)want)->out_rank);
    assert_true(f->op->flags & OP_KEEPS_INPUT);
    const size_t M = a.dims[a.rank - 2], K = a.dims[a.rank - 1], N = b.dims[b.rank - 1];
    const size_t batches = f->out_n / (M * N);
    for (size_t s = 0; s < m; s++)
        for (size_t bi = 0; bi < batches; bi++) {
            const float *x = f->x[0] + s * f->in_n[0] + operand_matrix(&a, &out, bi) * M * K;
            const float *y = f->x[1] + s * f->in_n[1] + operand_matrix(&b, &out, bi) * K * N;
            for (size_t i = 0; i < M; i++)
                for (size_t j = 0; j < N; j++) {
                    double want = 0;
                    for (size_t p = 0; p < K; p++) want += (double)x[i * K + p] * y[p * N + j];
                    const double got = f->y[s * f->out_n + (bi * M + i) * N + j];
                    if (fabs(got - want) > 1e-5 * (1 + fabs(want))) fail_msg("matmul: got %.8g, want %.8g", got, want);
                }
        }
}

static void test_matmul(void **state) {
    (void)state;
    const matmul_case cases[] = {
        {{2, {3, 4}}, {2, {4, 5}}, 2},
        {{3, {2, 3, 4}}, {3, {2, 4, 5}}, 3},          /* heads */
        {{3, {1, 3, 4}}, {3, {3, 4, 2}}, 3},          /* a broadcast over the leading axis */
        {{2, {3, 4}}, {4, {2, 3, 4, 5}}, 4},          /* a missing leading axes */
        {{4, {2, 1, 3, 4}}, {3, {3, 4, 2}}, 4},       /* both broadcast */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t m = 1; m <= 3; m += 2)
            check_case(matmul_graph(cases[k].a, cases[k].b), MM_NODE, m, 1000 + 10 * k + m, 1.0f, matmul_expect,
                       &cases[k], 1e-2f, TOL_LINEAR);
    op_fixture f;
    op_fixture_init(&f, matmul_graph((snug_shape){3, {2, 3, 4}}, (snug_shape){3, {2, 4, 5}}), MM_NODE, 4, threads(),
                    FILL_PLAIN, 1090);
    op_check_all(&f, 3, 1e-2f, TOL_LINEAR); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

/* x @ x: one tensor on both sides, both gradients into its one buffer. */
static void test_matmul_of_one_tensor(void **state) {
    (void)state;
    const matmul_case square = {{3, {2, 4, 4}}, {3, {2, 4, 4}}, 3};
    snug_graph *g = snug_graph_new("t");
    const snug_tensor x = shaped_input(g, "x", square.a);
    snug_matmul(g, "mm", x, x);
    check_case(g, 1, 3, 1100, 1.0f, matmul_expect, &square, 1e-2f, TOL_LINEAR);
}

/* Node `node` of two copies of a graph, on 1 thread and on every thread at m = 6: the same bits, forward and
 * backward. */
static void expect_threads_agree(snug_graph *one, snug_graph *all, int node, uint64_t seed) {
    op_fixture a, b;
    op_fixture_init(&a, one, node, 6, 1, FILL_PLAIN, seed);
    op_fixture_init(&b, all, node, 6, threads(), FILL_PLAIN, seed);
    op_fixture_analytic(&a), op_fixture_analytic(&b);
    op_expect_same_results(&a, &b);
    op_fixture_free(&a), op_fixture_free(&b);
}

static void test_threads_agree(void **state) {
    (void)state;
    const snug_shape a = {3, {4, 6, 8}}, b = {3, {4, 8, 6}};
    expect_threads_agree(matmul_graph(a, b), matmul_graph(a, b), MM_NODE, 1200);
    const snug_shape shared = {3, {1, 6, 8}}; /* broadcast over the leading axis: its gradient a sum in one order */
    expect_threads_agree(matmul_graph(shared, b), matmul_graph(shared, b), MM_NODE, 1203);
    expect_threads_agree(softmax_graph(a, 1), softmax_graph(a, 1), 1, 1201);
    expect_threads_agree(permute_graph(a, (const int[]){2, 0, 1}), permute_graph(a, (const int[]){2, 0, 1}), 1, 1202);
}

/* ---- errors ------------------------------------------------------------------------------------------------ */

static void test_errors(void **state) {
    (void)state;
    const snug_shape s = {3, {2, 3, 4}};
    op_expect_error(permute_graph(s, (const int[]){0, 0, 1}), SNUG_E_ARG,
                    (const char *const[]){"permute", "'perm'", "each of the 3 axes", "(2, 3, 4)", NULL});
    op_expect_error(slice_graph(s, 3, 0, 1, 1), SNUG_E_ARG, (const char *const[]){"slice", "axis 3", NULL});
    op_expect_error(slice_graph(s, 2, 1, 2, 3), SNUG_E_SHAPE,
                    (const char *const[]){"slice", "run past the 4 of axis 2", NULL});
    op_expect_error(slice_graph(s, 1, 0, 1, 0), SNUG_E_ARG, (const char *const[]){"step of at least 1", NULL});
    op_expect_error(softmax_graph(s, 3), SNUG_E_ARG, (const char *const[]){"softmax", "axis 3", NULL});
    op_expect_error(matmul_graph(s, (snug_shape){3, {2, 3, 4}}), SNUG_E_SHAPE,
                    (const char *const[]){"matmul", "'mm'", "(2, 3, 4)", "do not multiply", NULL});
    op_expect_error(matmul_graph(s, (snug_shape){3, {3, 4, 4}}), SNUG_E_SHAPE,
                    (const char *const[]){"do not multiply", NULL});
    snug_graph *g = snug_graph_new("t");
    snug_reshape(g, "view", shaped_input(g, "x", s), (snug_shape){2, {5, 5}});
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"reshape", "(2, 3, 4)", "(5, 5)", NULL});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permute),          cmocka_unit_test(test_slice),
        cmocka_unit_test(test_reshape_is_a_view), cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_matmul),           cmocka_unit_test(test_matmul_of_one_tensor),
        cmocka_unit_test(test_threads_agree),    cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

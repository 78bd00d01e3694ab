/* core/parallel.h: the measured cost of an OpenMP team and the decision it drives, and the promise that makes
 * the decision safe: every op that asks gives the same bits on one thread and on several. The ops run on
 * tensors large enough (millions of values) that they split over the threads whatever the wait policy, and
 * once more on one thread; forward outputs and every gradient must agree bit for bit. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "graph/graph.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "kernels/sgemm.h"
#include "snug.h"
#include "test_util.h"

static void test_team_cost(void **state) {
    (void)state;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_true(par_team_ns() == 0.0);
    assert_false(par_pays(1e9)); /* one thread: never */
    omp_set_num_threads(2);
    const double ns = par_team_ns();
    print_message("a team of 2 threads costs %.1f us here\n", ns / 1e3);
    assert_true(ns > 0.0 && ns < 1e8);
    assert_false(par_pays(0.0));
    assert_true(par_pays(1e9)); /* a second of work */
    int inside = -1;
    #pragma omp parallel num_threads(2)
    {
        #pragma omp single
        inside = par_pays(1e9); /* already in a team: the op runs on its thread */
    }
    assert_int_equal(inside, 0);
    omp_set_num_threads(saved);
}

/* The graphs, each of one op on about 2M values per micro-batch of the test (node 1 unless stated). */
static snug_graph *relu_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_relu(g, "op", snug_input(g, "x", 32, 64, 64));
    return g;
}

static snug_graph *pool_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d(g, "op", snug_input(g, "x", 32, 64, 64), 2, 2);
    return g;
}

static snug_graph *batchnorm_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_batchnorm2d(g, "op", snug_input(g, "x", 32, 64, 64), 1e-5f, 0.1f);
    return g;
}

static snug_graph *groupnorm_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_groupnorm(g, "op", snug_input(g, "x", 32, 64, 64), 8, 1e-5f);
    return g;
}

static snug_graph *layernorm_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_layernorm(g, "op", snug_flatten(g, "f", snug_input(g, "x", 4096, 1, 1)), 1e-5f);
    return g; /* node 2 */
}

static snug_graph *linear_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_linear(g, "op", snug_flatten(g, "f", snug_input(g, "x", 1024, 1, 1)), 1024);
    return g; /* node 2 */
}

static snug_graph *add_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", 32, 64, 64);
    snug_tensor y = snug_relu(g, "r", x);
    snug_add(g, "op", x, y);
    return g; /* node 2 */
}

static snug_graph *xent_graph(void) {
    snug_graph *g = snug_graph_new("t");
    snug_softmax_cross_entropy(g, "op", snug_flatten(g, "f", snug_input(g, "x", 1000, 1, 1)));
    return g; /* node 2 */
}

typedef struct grads {
    float *y, *dx, *dw[NODE_MAX_PARAMS];
} grads;

static float *copy_of(const float *v, size_t n) {
    float *c = op_test_xmalloc(n * sizeof *c);
    memcpy(c, v, n * sizeof *c);
    return c;
}

/* Forward and backward with `threads` OpenMP threads, from the fixture's fixed inputs; copies of the results. */
static grads run_with(op_fixture *f, size_t m, int threads) {
    omp_set_num_threads(threads);
    op_fixture_analytic(f);
    grads r = {.y = copy_of(f->y, m * f->out_n), .dx = copy_of(f->dx[0], m * f->in_n[0])};
    for (int i = 0; i < f->n_w; i++) r.dw[i] = f->c.dw[i] ? copy_of(f->dw[i], f->wn[i]) : NULL; /* state: none */
    return r;
}

static void grads_free(grads *r, int n_w) {
    free(r->y), free(r->dx);
    for (int i = 0; i < n_w; i++) free(r->dw[i]);
}

/* As a training step runs the op: training mode, room for per-batch saved bytes (BatchNorm's statistics), and
 * the parameters from `buffers` on as non-trainable state (BatchNorm's running statistics: no gradient). */
static void training_mode(op_fixture *f, int buffers) {
    if (f->op->saved_batch_bytes) {
        free(f->saved);
        f->saved = op_test_xmalloc(f->op->saved_bytes(f->node) * f->m_plan +
                                   f->op->saved_batch_bytes(f->node));
        f->c.saved = f->saved;
    }
    for (int i = buffers; i < f->n_w; i++) {
        f->c.state[i] = f->w[i];
        f->c.dw[i] = NULL;
    }
    f->c.training = true;
}

/* buffers: the index of the op's first non-trainable parameter (NO_BUFFERS: none). */
#define NO_BUFFERS NODE_MAX_PARAMS
static void check_same_bits(snug_graph *g, int node, size_t m, int buffers, const char *what) {
    const int saved = omp_get_max_threads();
    op_fixture f;
    op_fixture_init(&f, g, node, m, 2, FILL_AWAY_ZERO, 7);
    training_mode(&f, buffers < f.n_w ? buffers : f.n_w);
    grads one = run_with(&f, m, 1), two = run_with(&f, m, 2);
    print_message("%s: %zu outputs, one thread and two\n", what, m * f.out_n);
    assert_memory_equal(one.y, two.y, m * f.out_n * sizeof(float));
    assert_memory_equal(one.dx, two.dx, m * f.in_n[0] * sizeof(float));
    for (int i = 0; i < f.n_w; i++)
        if (one.dw[i]) assert_memory_equal(one.dw[i], two.dw[i], f.wn[i] * sizeof(float));
    grads_free(&one, f.n_w), grads_free(&two, f.n_w);
    op_fixture_free(&f);
    omp_set_num_threads(saved);
}

static void test_relu(void **state) { (void)state, check_same_bits(relu_graph(), 1, 16, NO_BUFFERS, "relu"); }
static void test_maxpool(void **state) { (void)state, check_same_bits(pool_graph(), 1, 16, NO_BUFFERS, "maxpool2d"); }
static void test_batchnorm(void **state) { (void)state, check_same_bits(batchnorm_graph(), 1, 16, 2, "batchnorm2d"); }
static void test_groupnorm(void **state) {
    (void)state;
    check_same_bits(groupnorm_graph(), 1, 16, NO_BUFFERS, "groupnorm");
}
static void test_layernorm(void **state) {
    (void)state;
    check_same_bits(layernorm_graph(), 2, 512, NO_BUFFERS, "layernorm");
}
/* Only snug's own product promises thread-independent bits; the BLAS it falls back to without AVX-512 does not. */
static void test_linear(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)");
    check_same_bits(linear_graph(), 2, 512, NO_BUFFERS, "linear");
}
static void test_add(void **state) { (void)state, check_same_bits(add_graph(), 2, 16, NO_BUFFERS, "add"); }
static void test_xent(void **state) { (void)state, check_same_bits(xent_graph(), 2, 4096, NO_BUFFERS, "softmax_xent"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_team_cost), cmocka_unit_test(test_relu),      cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_batchnorm), cmocka_unit_test(test_groupnorm), cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_linear),    cmocka_unit_test(test_add),       cmocka_unit_test(test_xent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

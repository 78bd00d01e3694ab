/* The vectorised paths of maxpool2d (2x2 stride 2) and relu against plain reference loops, bit for bit, on
 * shapes the finite-difference tests do not reach: rows of more than 16 outputs with a partial last vector, odd
 * heights and widths, inputs with many ties, NaN, infinities and signed zeros, micro-batches above and below
 * the parallel threshold, and results that must not depend on the thread count. */
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

static snug_graph *pool_graph(size_t c, size_t h, size_t w) {
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d(g, "pool", snug_input(g, "x", c, h, w), 2, 2);
    return g; /* node 1 */
}

static snug_graph *relu_graph(size_t c, size_t h, size_t w) {
    snug_graph *g = snug_graph_new("t");
    snug_relu(g, "relu", snug_input(g, "x", c, h, w));
    return g; /* node 1 */
}

/* Values from a set of 5 (many ties within a window), with a NaN, an infinity or a -0 now and then. */
static void fill_tricky(float *v, size_t n, uint64_t seed) {
    static const float pick[] = {-1.0f, 0.0f, 0.5f, 0.5f, 2.0f, NAN, INFINITY, -INFINITY, -0.0f};
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = op_test_rng_next(&seed);
        v[i] = pick[r % 40 < 35 ? r % 5 : 5 + r % 4];
    }
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The window loop the op documents: row-major, first maximum, the first NaN wins. */
static void pool_reference(float *y, int32_t *arg, const float *x, size_t planes, size_t c, size_t h, size_t w) {
    const size_t ho = (h - 2) / 2 + 1, wo = (w - 2) / 2 + 1;
    for (size_t pl = 0; pl < planes; pl++)
        for (size_t i = 0; i < ho; i++)
            for (size_t j = 0; j < wo; j++) {
                const float *xp = x + pl * h * w;
                size_t bi = 2 * i * w + 2 * j;
                for (size_t a = 0; a < 2; a++)
                    for (size_t b = 0; b < 2; b++) {
                        const size_t k = (2 * i + a) * w + 2 * j + b;
                        if (xp[k] > xp[bi] || (isnan(xp[k]) && !isnan(xp[bi]))) bi = k;
                    }
                const size_t o = (pl * ho + i) * wo + j;
                y[o] = xp[bi];
                arg[o] = (int32_t)((pl % c) * h * w + bi);
            }
}

static void check_pool(size_t c, size_t h, size_t w, size_t m, int threads, uint64_t seed) {
    op_fixture f;
    op_fixture_init(&f, pool_graph(c, h, w), 1, m, threads, FILL_PLAIN, seed);
    const size_t in_n = c * h * w, n_out = m * f.out_n;
    fill_tricky(f.x[0], m * in_n, seed);
    float *want = op_test_xmalloc(n_out * sizeof(float));
    int32_t *warg = op_test_xmalloc(n_out * sizeof(int32_t));
    pool_reference(want, warg, f.x[0], m * c, c, h, w);
    omp_set_num_threads(threads);
    f.op->forward(&f.c);
    const int32_t *arg = f.saved;
    for (size_t o = 0; o < n_out; o++) {
        assert_true(same_bits(f.y[o], want[o]));
        assert_int_equal(arg[o], warg[o]);
    }
    /* Backward: dx = dy at each argmax (windows do not overlap), added to what dx held. */
    op_test_fill_sym(f.r, n_out, &seed);
    for (size_t i = 0; i < m * in_n; i++) f.dx[0][i] = 1.0f;
    f.c.dout = f.r;
    f.op->backward(&f.c);
    float *dwant = op_test_xmalloc(m * in_n * sizeof(float));
    for (size_t i = 0; i < m * in_n; i++) dwant[i] = 1.0f;
    for (size_t o = 0; o < n_out; o++) dwant[o / f.out_n * in_n + (size_t)warg[o]] += f.r[o];
    for (size_t i = 0; i < m * in_n; i++) assert_true(same_bits(f.dx[0][i], dwant[i]));
    free(dwant);
    free(warg);
    free(want);
    op_fixture_free(&f);
}

static void test_pool_matches_reference(void **state) {
    (void)state;
    const int maxt = omp_get_max_threads();
    /* (c, h, w, m): 35 outputs per row (two full vectors and 3), odd sizes, the MNIST CNN's two pools at
     * m = 1 (serial) and m = 8 (parallel: 8 * 32 * 14 * 14 outputs), a width of 2 (one output per row). */
    const size_t cases[][4] = {{3, 9, 70, 2}, {2, 7, 33, 3}, {1, 5, 31, 1}, {32, 28, 28, 1}, {64, 14, 14, 1},
                               {32, 28, 28, 8}, {4, 2, 2, 3}, {2, 3, 34, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 1; t <= maxt; t++)
            check_pool(cases[i][0], cases[i][1], cases[i][2], cases[i][3], t, 100 + i);
    omp_set_num_threads(maxt);
}

static void check_relu(size_t c, size_t h, size_t w, size_t m, int threads, bool in_place, uint64_t seed) {
    op_fixture f;
    op_fixture_init(&f, relu_graph(c, h, w), 1, m, threads, FILL_PLAIN, seed);
    const size_t n = m * c * h * w;
    fill_tricky(f.x[0], n, seed);
    float *x0 = op_test_xmalloc(n * sizeof(float));
    memcpy(x0, f.x[0], n * sizeof(float));
    omp_set_num_threads(threads);
    if (in_place) f.c.out = f.x[0];
    f.op->forward(&f.c);
    for (size_t i = 0; i < n; i++) assert_true(same_bits(f.c.out[i], x0[i] < 0.0f ? 0.0f : x0[i]));
    op_test_fill_sym(f.r, n, &seed);
    for (size_t i = 0; i < n; i++) f.dx[0][i] = 0.25f;
    f.c.dout = f.r;
    f.op->backward(&f.c);
    for (size_t i = 0; i < n; i++) {
        const float want = f.c.out[i] > 0.0f ? 0.25f + f.r[i] : 0.25f + 0.0f;
        assert_true(same_bits(f.dx[0][i], want));
    }
    free(x0);
    op_fixture_free(&f);
}

static void test_relu_matches_reference(void **state) {
    (void)state;
    const int maxt = omp_get_max_threads();
    for (int t = 1; t <= maxt; t++)
        for (int in_place = 0; in_place <= 1; in_place++) {
            check_relu(3, 5, 7, 1, t, in_place, 7);            /* a short tail only */
            check_relu(32, 28, 28, 1, t, in_place, 8);         /* serial */
            check_relu(32, 28, 28, 3, t, in_place, 9);         /* parallel, spans with a partial last one */
        }
    omp_set_num_threads(maxt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_matches_reference),
        cmocka_unit_test(test_relu_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

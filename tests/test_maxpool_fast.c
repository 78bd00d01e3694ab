/* The vectorised paths of maxpool2d (2x2 stride 2) and relu against plain reference loops, bit for bit, on
 * shapes the finite-difference tests do not reach: rows of more than 16 outputs with a partial last vector, odd
 * heights and widths, inputs with many ties, NaN, infinities and signed zeros, micro-batches above and below
 * the parallel threshold, and results that must not depend on the thread count. The pool's backward both adds
 * and writes a fresh dx whole. The max-pool with the ReLU before it folded in (op_maxpool2d_relu) gives the
 * bits of the two ops apart, and folds only where graph/fuse.c says. In a bf16 plan the pool reads an input
 * kept only packed and writes its output only packed, or beside the float32 one its packed copy: the bits of
 * the float32 path and of packing its output, on the AVX-512 path and its portable twin. */
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
#include "kernels/bf16.h"
#include "kernels/isa.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

static snug_graph *pool_graph(size_t c, size_t h, size_t w) {
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d(g, "pool", snug_input(g, "x", c, h, w), 2, 2);
    return g; /* node 1 */
}

/* input -> relu -> k x k max-pool, stride k: node 2 is the pool, folded when k tiles the input. */
static snug_graph *relu_pool_graph(size_t c, size_t h, size_t w, size_t k) {
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d(g, "pool", snug_relu(g, "relu", snug_input(g, "x", c, h, w)), k, k);
    return g;
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

/* The window loop the op documents (k x k windows, stride k): row-major, first maximum, the first NaN wins.
 * arg: the maximum's index within the sample (for the gradient's reference); pos: its position within the
 * window, a*kw + b, as the op keeps it. */
static void pool_reference_k(float *y, int32_t *arg, uint8_t *pos, const float *x, size_t planes, size_t c,
                             size_t h, size_t w, size_t kw) {
    const size_t ho = (h - kw) / kw + 1, wo = (w - kw) / kw + 1;
    for (size_t pl = 0; pl < planes; pl++)
        for (size_t i = 0; i < ho; i++)
            for (size_t j = 0; j < wo; j++) {
                const float *xp = x + pl * h * w;
                size_t bi = kw * i * w + kw * j, bp = 0;
                for (size_t a = 0; a < kw; a++)
                    for (size_t b = 0; b < kw; b++) {
                        const size_t k = (kw * i + a) * w + kw * j + b;
                        if (xp[k] > xp[bi] || (isnan(xp[k]) && !isnan(xp[bi]))) bi = k, bp = a * kw + b;
                    }
                const size_t o = (pl * ho + i) * wo + j;
                y[o] = xp[bi];
                arg[o] = (int32_t)((pl % c) * h * w + bi);
                pos[o] = (uint8_t)bp;
            }
}

static void pool_reference(float *y, int32_t *arg, uint8_t *pos, const float *x, size_t planes, size_t c, size_t h,
                           size_t w) {
    pool_reference_k(y, arg, pos, x, planes, c, h, w, 2);
}

/* Runs f's backward into a fresh dx (din_fresh, stale NaN memory) and expects the bits of adding into zeros. */
static void expect_fresh_backward(op_fixture *f, size_t in_total) {
    float *added = op_test_xmalloc(in_total * sizeof(float));
    memset(f->dx[0], 0, in_total * sizeof(float));
    f->c.din_fresh = 0;
    f->op->backward(&f->c);
    memcpy(added, f->dx[0], in_total * sizeof(float));
    for (size_t i = 0; i < in_total; i++) f->dx[0][i] = NAN;
    f->c.din_fresh = 1;
    f->op->backward(&f->c);
    f->c.din_fresh = 0;
    for (size_t i = 0; i < in_total; i++) assert_true(same_bits(f->dx[0][i], added[i]));
    free(added);
}

/* f's forward against the reference's outputs and argmax positions, bit for bit. */
static void expect_pool_forward(op_fixture *f, const float *want, const uint8_t *wpos, size_t n_out) {
    f->op->forward(&f->c);
    const uint8_t *pos = f->saved;
    for (size_t o = 0; o < n_out; o++) {
        assert_true(same_bits(f->y[o], want[o]));
        assert_int_equal(pos[o], wpos[o]);
    }
}

static void check_pool(size_t c, size_t h, size_t w, size_t m, int threads, uint64_t seed) {
    op_fixture f;
    op_fixture_init(&f, pool_graph(c, h, w), 1, m, threads, FILL_PLAIN, seed);
    const size_t in_n = c * h * w, n_out = m * f.out_n;
    fill_tricky(f.x[0], m * in_n, seed);
    float *want = op_test_xmalloc(n_out * sizeof(float));
    int32_t *warg = op_test_xmalloc(n_out * sizeof(int32_t));
    uint8_t *wpos = op_test_xmalloc(n_out);
    pool_reference(want, warg, wpos, f.x[0], m * c, c, h, w);
    omp_set_num_threads(threads);
    expect_pool_forward(&f, want, wpos, n_out);
    /* Backward: dx = dy at each argmax (windows do not overlap), added to what dx held. */
    op_test_fill_sym(f.r, n_out, &seed);
    for (size_t i = 0; i < m * in_n; i++) f.dx[0][i] = 1.0f;
    f.c.dout = f.r;
    f.op->backward(&f.c);
    float *dwant = op_test_xmalloc(m * in_n * sizeof(float));
    for (size_t i = 0; i < m * in_n; i++) dwant[i] = 1.0f;
    for (size_t o = 0; o < n_out; o++) dwant[o / f.out_n * in_n + (size_t)warg[o]] += f.r[o];
    for (size_t i = 0; i < m * in_n; i++) assert_true(same_bits(f.dx[0][i], dwant[i]));
    expect_fresh_backward(&f, m * in_n);
    free(dwant);
    free(warg);
    free(wpos);
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

/* The pool with the ReLU folded in against ReLU then pool (the reference loops): the same output and argmax
 * bits, and the gradient ReLU's backward makes of the pool's scatter (0 + dy at the argmax of a fresh buffer,
 * masked by the ReLU's output), added to what dx held and written fresh. */
static void check_relu_pool(size_t c, size_t h, size_t w, size_t k, size_t m, int threads, uint64_t seed) {
    op_fixture f;
    op_fixture_init(&f, relu_pool_graph(c, h, w, k), 2, m, threads, FILL_PLAIN, seed);
    assert_ptr_equal(f.op, &op_maxpool2d_relu);
    const size_t in_n = c * h * w, n_in = m * in_n, n_out = m * f.out_n;
    fill_tricky(f.x[0], n_in, seed);
    float *rx = op_test_xmalloc(n_in * sizeof(float)), *want = op_test_xmalloc(n_out * sizeof(float));
    int32_t *warg = op_test_xmalloc(n_out * sizeof(int32_t));
    uint8_t *wpos = op_test_xmalloc(n_out);
    for (size_t i = 0; i < n_in; i++) rx[i] = f.x[0][i] < 0.0f ? 0.0f : f.x[0][i];
    pool_reference_k(want, warg, wpos, rx, m * c, c, h, w, k);
    omp_set_num_threads(threads);
    expect_pool_forward(&f, want, wpos, n_out);
    op_test_fill_sym(f.r, n_out, &seed);
    f.c.dout = f.r;
    float *scatter = op_test_xmalloc(n_in * sizeof(float)), *dwant = op_test_xmalloc(n_in * sizeof(float));
    memset(scatter, 0, n_in * sizeof(float));
    for (size_t o = 0; o < n_out; o++) scatter[o / f.out_n * in_n + (size_t)warg[o]] += f.r[o];
    for (size_t i = 0; i < n_in; i++) {
        f.dx[0][i] = 0.25f;
        dwant[i] = 0.25f + (rx[i] > 0.0f ? scatter[i] : 0.0f);
    }
    f.op->backward(&f.c);
    for (size_t i = 0; i < n_in; i++) assert_true(same_bits(f.dx[0][i], dwant[i]));
    expect_fresh_backward(&f, n_in);
    free(rx), free(want), free(warg), free(wpos), free(scatter), free(dwant);
    op_fixture_free(&f);
}

static void test_relu_pool_folded_matches_reference(void **state) {
    (void)state;
    const int maxt = omp_get_max_threads();
    /* (c, h, w, k, m): the MNIST CNN's pools serial and parallel, 35 outputs per row, one output, 3x3 windows
     * (the generic loops) */
    const size_t cases[][5] = {{32, 28, 28, 2, 1}, {64, 14, 14, 2, 8}, {3, 10, 70, 2, 2}, {4, 2, 2, 2, 3},
                               {2, 9, 12, 3, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 1; t <= maxt; t++)
            check_relu_pool(cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], t, 300 + i);
    omp_set_num_threads(maxt);
}

/* The fold as the graph grows: a ReLU that only a max-pool reads folds into it (the ReLU a view); a later
 * reader of the ReLU's output undoes it; windows that do not tile the input, a ReLU read before the pool, or a
 * ReLU already folded into a BatchNorm never fold. */
static void test_relu_pool_fold_rules(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("fold");
    snug_tensor r = snug_relu(g, "relu", snug_input(g, "x", 2, 4, 6)), p = snug_maxpool2d(g, "pool", r, 2, 2);
    const graph_node *relu = &g->nodes[g->tensors[r].producer], *pool = &g->nodes[g->tensors[p].producer];
    assert_ptr_equal(relu->op, &op_relu_pooled);
    assert_true(relu->op->flags & OP_IS_VIEW);
    assert_ptr_equal(pool->op, &op_maxpool2d_relu);
    snug_flatten(g, "flat", r); /* a second reader of the ReLU's output */
    assert_ptr_equal(g->nodes[g->tensors[r].producer].op, &op_relu);
    assert_ptr_equal(g->nodes[g->tensors[p].producer].op, &op_maxpool2d);
    snug_graph_free(g);

    g = snug_graph_new("odd"); /* a 5x6 input: the last row is in no window */
    p = snug_maxpool2d(g, "pool", snug_relu(g, "relu", snug_input(g, "x", 2, 5, 6)), 2, 2);
    assert_ptr_equal(g->nodes[g->tensors[p].producer].op, &op_maxpool2d);
    snug_graph_free(g);

    g = snug_graph_new("overlap"); /* 3x3 windows, stride 2 */
    p = snug_maxpool2d(g, "pool", snug_relu(g, "relu", snug_input(g, "x", 2, 7, 7)), 3, 2);
    assert_ptr_equal(g->nodes[g->tensors[p].producer].op, &op_maxpool2d);
    snug_graph_free(g);

    g = snug_graph_new("read before");
    r = snug_relu(g, "relu", snug_input(g, "x", 2, 4, 4));
    snug_flatten(g, "flat", r);
    p = snug_maxpool2d(g, "pool", r, 2, 2);
    assert_ptr_equal(g->nodes[g->tensors[p].producer].op, &op_maxpool2d);
    assert_ptr_equal(g->nodes[g->tensors[r].producer].op, &op_relu);
    snug_graph_free(g);

    g = snug_graph_new("bn");
    r = snug_relu(g, "relu", snug_batchnorm2d(g, "bn", snug_input(g, "x", 2, 4, 4), 1e-5f, 0.1f));
    p = snug_maxpool2d(g, "pool", r, 2, 2);
    assert_ptr_equal(g->nodes[g->tensors[r].producer].op, &op_relu_folded);
    assert_ptr_equal(g->nodes[g->tensors[p].producer].op, &op_maxpool2d);
    snug_graph_free(g);
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

/* The bf16 plan's forward of f (its input already rounded to bfloat16 values) in its three forms against the
 * float32 forward: input and output packed only (op_call.packed.in, packed.out), and float32 input and output
 * with the packed copy written beside (packed.round, packed.copy). The same outputs, their bf16_pack, and the
 * same argmax bytes. */
static void expect_packed_forward(op_fixture *f, size_t n_in, size_t n_out) {
    float *want = op_test_xmalloc(n_out * sizeof(float));
    uint8_t *wpos = op_test_xmalloc(n_out), *pos = f->saved;
    bf16 *xh = op_test_xmalloc(n_in * sizeof(bf16)), *yh = op_test_xmalloc(n_out * sizeof(bf16));
    bf16 *wh = op_test_xmalloc(n_out * sizeof(bf16));
    f->op->forward(&f->c);
    memcpy(want, f->y, n_out * sizeof(float));
    memcpy(wpos, pos, n_out);
    bf16_pack(wh, want, n_out);
    bf16_pack(xh, f->x[0], n_in);
    op_call c = f->c;
    c.bf16 = true;
    c.in[0] = NULL, c.out = NULL, c.packed.in[0] = xh, c.packed.out = yh;
    memset(pos, 0x5A, n_out);
    f->op->forward(&c);
    for (size_t o = 0; o < n_out; o++) assert_true(yh[o] == wh[o] && pos[o] == wpos[o]);
    c = f->c;
    c.bf16 = true;
    c.packed.round = true, c.packed.copy = yh;
    memset(yh, 0, n_out * sizeof(bf16));
    memset(f->y, 0, n_out * sizeof(float));
    f->op->forward(&c);
    for (size_t o = 0; o < n_out; o++)
        assert_true(same_bits(f->y[o], want[o]) && yh[o] == wh[o] && pos[o] == wpos[o]);
    free(want), free(wpos), free(xh), free(yh), free(wh);
}

static void check_packed_pool(bool relu, size_t c, size_t h, size_t w, size_t k, size_t m, int threads,
                              uint64_t seed) {
    op_fixture f;
    op_fixture_init(&f, relu ? relu_pool_graph(c, h, w, k) : pool_graph(c, h, w), relu ? 2 : 1, m, threads,
                    FILL_PLAIN, seed);
    const size_t n_in = m * c * h * w, n_out = m * f.out_n;
    fill_tricky(f.x[0], n_in, seed);
    for (size_t i = 0; i < n_in; i++) f.x[0][i] = bf16_round(f.x[0][i] * 1.3f); /* values off the set's grid */
    omp_set_num_threads(threads);
    expect_packed_forward(&f, n_in, n_out);
    op_fixture_free(&f);
}

static void test_pool_packed_io_same_bits(void **state) {
    (void)state;
    const int maxt = omp_get_max_threads();
    /* (c, h, w, m): the cnn's two pools serial and parallel, rows of 35 outputs, an odd plane; then 3x3
     * windows (the generic loop) with the ReLU folded in */
    const size_t cases[][4] = {{32, 28, 28, 1}, {64, 14, 14, 8}, {3, 9, 70, 2}, {2, 7, 33, 3}};
    const kernel_isa isas[] = {kernel_isa_now(), KERNEL_ISA_PORTABLE};
    for (size_t a = 0; a < sizeof isas / sizeof isas[0]; a++) {
        kernel_isa_cap(isas[a]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int t = 1; t <= maxt; t++) {
                check_packed_pool(false, cases[i][0], cases[i][1], cases[i][2], 2, cases[i][3], t, 500 + i);
                if (cases[i][1] % 2 == 0 && cases[i][2] % 2 == 0)
                    check_packed_pool(true, cases[i][0], cases[i][1], cases[i][2], 2, cases[i][3], t, 600 + i);
            }
        check_packed_pool(true, 2, 9, 12, 3, 2, 1, 700);
    }
    kernel_isa_cap(isas[0]);
    omp_set_num_threads(maxt);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_matches_reference),
        cmocka_unit_test(test_relu_matches_reference),
        cmocka_unit_test(test_relu_pool_folded_matches_reference),
        cmocka_unit_test(test_relu_pool_fold_rules),
        cmocka_unit_test(test_pool_packed_io_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

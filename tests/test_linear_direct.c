/* linear's unpacked products (a forward of at most 16 rows, din and dW of at most 6, with 32 or more outputs, on
 * AVX-512; sgemm above): gradients against finite differences on shapes that take them (weight-row blocks of 64
 * with a remainder, widths that are not a multiple of 4) and shorter last micro-batches of a larger plan; every
 * sample's output and input gradient are the same bits whatever the micro-batch it is part of, within each
 * forward range (so splitting a batch differently, over ranks or micro-batches, changes only the order in which
 * dW and db are summed), din across all of them; and the same bits for any thread count. Without AVX-512 the
 * products are the BLAS's, which promises neither (OpenBLAS splits its sums by thread and by shape): the two
 * bitwise checks are skipped there, and the gradient checks still hold. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "kernels/isa.h"
#include "kernels/sgemm.h"
#include "plan/plan.h"
#include "snug.h"
#include "test_util.h"

/* See test_op_gradients.c: linear ops differ from central differences by float rounding only. */
#define TOL_LINEAR 2e-4

static snug_graph *linear_graph(size_t in, size_t out) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", in, 1, 1);
    snug_linear(g, "fc", snug_flatten(g, "flat", x), out);
    return g; /* node 2 */
}

static int threads(void) { return omp_get_max_threads(); }

static void test_direct_gradients(void **state) {
    (void)state;
    const size_t shapes[][3] = {{1, 5, 40}, {6, 5, 40}, {13, 7, 70}, {17, 5, 40}, {40, 33, 70}, {64, 20, 48}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const size_t m = shapes[k][0], in = shapes[k][1], out = shapes[k][2];
        op_fixture f;
        op_fixture_init(&f, linear_graph(in, out), 2, m, threads(), FILL_PLAIN, 31 + k);
        f.op->forward(&f.c);
        for (size_t i = 0; i < m; i++)
            for (size_t o = 0; o < out; o++) {
                double want = f.w[1][o];
                for (size_t j = 0; j < in; j++) want += (double)f.w[0][o * in + j] * f.x[0][i * in + j];
                assert_float_equal(f.y[i * out + o], want, 1e-5);
            }
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

/* A plan for 100 rows runs shorter last micro-batches of 17 to 65 rows through sgemm, inside the workspace
 * planned for the largest (ASan checks the bounds), with the gradients right. */
static void test_short_rows_in_a_larger_plan(void **state) {
    (void)state;
    const size_t in = 37, out = 90, runs[] = {17, 50, 64, 65};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        op_fixture f;
        op_fixture_init(&f, linear_graph(in, out), 2, 100, threads(), FILL_PLAIN, 11 + k);
        f.c.m = runs[k];
        f.op->forward(&f.c);
        for (size_t i = 0; i < runs[k]; i++)
            for (size_t o = 0; o < out; o++) {
                double want = f.w[1][o];
                for (size_t j = 0; j < in; j++) want += (double)f.w[0][o * in + j] * f.x[0][i * in + j];
                assert_float_equal(f.y[i * out + o], want, 1e-5);
            }
        op_check_all(&f, runs[k], 1e-2f, TOL_LINEAR);
        op_fixture_free(&f);
    }
}

/* Forward and backward of the first m rows; copies of y and din's first m rows. */
static void run_rows(op_fixture *f, size_t m, size_t in, size_t out, float *y, float *dx) {
    f->c.m = m;
    op_fixture_analytic(f);
    memcpy(y, f->y, m * out * sizeof *y);
    memcpy(dx, f->dx[0], m * in * sizeof *dx);
}

/* The first rows of M-row calls split into parts: the same output and input-gradient bits. */
static void check_parts(size_t M, const size_t *parts, size_t n_parts) {
    const size_t in = 330, out = 250; /* 16 * 330 * 250 multiply-adds: the threaded forward */
    op_fixture f;
    op_fixture_init(&f, linear_graph(in, out), 2, M, threads(), FILL_PLAIN, 7);
    float *y = op_test_xmalloc(M * out * sizeof *y), *dx = op_test_xmalloc(M * in * sizeof *dx);
    float *y1 = op_test_xmalloc(M * out * sizeof *y1), *dx1 = op_test_xmalloc(M * in * sizeof *dx1);
    run_rows(&f, M, in, out, y, dx);
    for (size_t k = 0; k < n_parts; k++) {
        run_rows(&f, parts[k], in, out, y1, dx1);
        assert_memory_equal(y1, y, parts[k] * out * sizeof *y);
        assert_memory_equal(dx1, dx, parts[k] * in * sizeof *dx);
    }
    free(y), free(dx), free(y1), free(dx1);
    op_fixture_free(&f);
}

/* A sample's output and input-gradient bits do not depend on how many samples share its micro-batch: up to 16
 * rows (din and dW on both sides of their 6-row switch to sgemm), and from 17 on (all through sgemm). */
static void test_rows_same_bits_in_any_micro_batch(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)"); /* the BLAS's products: no promise of split-independent bits */
    static const size_t small[] = {1, 2, 3, 5, 6, 7, 8, 15}, large[] = {17, 30, 47};
    check_parts(16, small, sizeof small / sizeof small[0]);
    check_parts(48, large, sizeof large / sizeof large[0]);
}

/* Every output and gradient is the same bits with one thread as with several. */
static void test_same_bits_any_thread_count(void **state) {
    (void)state;
    SKIP_UNLESS(sgemm_enabled(), "AVX-512 (snug's own product)"); /* the BLAS's products: no promise of thread-independent bits */
    /* 16 and 64 rows: every product threaded; one row of a wide layer (the last case): its forward and din
     * split between the threads, din's columns not a multiple of 16 per thread */
    const size_t ms[] = {4, 16, 64, 1}, ins[] = {400, 400, 400, 2008}, outs[] = {180, 180, 180, 400};
    for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) {
        const size_t in = ins[k], out = outs[k];
        op_fixture a, b;
        op_fixture_init(&a, linear_graph(in, out), 2, ms[k], threads(), FILL_PLAIN, 3);
        op_fixture_init(&b, linear_graph(in, out), 2, ms[k], 1, FILL_PLAIN, 3);
        const int saved = omp_get_max_threads();
        op_fixture_analytic(&a);
        omp_set_num_threads(1);
        op_fixture_analytic(&b);
        omp_set_num_threads(saved);
        assert_memory_equal(a.y, b.y, ms[k] * out * sizeof(float));
        assert_memory_equal(a.dx[0], b.dx[0], ms[k] * in * sizeof(float));
        for (int p = 0; p < a.n_w; p++) assert_memory_equal(a.dw[p], b.dw[p], a.wn[p] * sizeof(float));
        op_fixture_free(&a);
        op_fixture_free(&b);
    }
}

/* calls backward calls of `rows` rows each, with fresh x and dy every call (the same sequence for every fixture
 * seeded alike); with a pending block, then the window's flush. */
static void run_calls(op_fixture *f, size_t rows, size_t calls, void *pending) {
    const size_t in = f->in_n[0], out = f->out_n;
    uint64_t seed = 99;
    f->c.m = rows;
    f->c.pending = pending;
    op_fixture_zero_grads(f);
    for (size_t k = 0; k < calls; k++) {
        op_test_fill_sym(f->x[0], rows * in, &seed);
        op_test_fill_sym(f->r, rows * out, &seed);
        f->op->backward(&f->c);
    }
    if (pending) f->op->flush(&f->c);
}

/* Pending rows (AVX-512 CPUs, where sgemm takes the products): single-row calls (a block of 16: flushes inside at 16 rows), 3-row calls (a block of 48: at 48
 * + 3) or 16-row calls (64: at 64 + 16), then the window's flush, leave dW with the bits of immediate updates,
 * db and din unchanged; the block is planned for 64 rows at 16 rows a call, 16 at one row, none past 16 rows a
 * call; at micro-batch 1 it is planned for layers of one row per sample, none for 256 (the GPT's). */
static size_t pending_in(const graph_node *n, size_t m, snug_precision precision, snug_products products) {
    plan_variant v = {0};
    plan_variant_compute(&v, plan_compute_of(precision, products));
    return plan_op_pending(n, &v, m);
}

static size_t pending_of(const graph_node *n, size_t m) {
    return pending_in(n, m, SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO);
}

static void test_pending_rows_same_bits(void **state) {
    (void)state;
    const size_t in = 400, out = 100; /* 16 rows defer: 400 x 100 / 4 >= 16 x 500 */
    op_fixture a, b;
    op_fixture_init(&a, linear_graph(in, out), 2, 16, threads(), FILL_PLAIN, 5);
    op_fixture_init(&b, linear_graph(in, out), 2, 16, threads(), FILL_PLAIN, 5);
    const size_t bytes = pending_of(a.node, 16);
    if (bytes == 0) { /* no AVX-512: the products are the BLAS's, nothing is deferred */
        op_fixture_free(&a);
        op_fixture_free(&b);
        return;
    }
    assert_int_equal(pending_of(a.node, 17), 0);
    assert_int_equal(bytes - pending_of(a.node, 1), 48 * (in + out) * sizeof(float));
    const kernel_isa cpu = kernel_isa_now();
    kernel_isa_cap(KERNEL_ISA_AVX512); /* no AVX512_BF16: bf16 keeps float32 products, the same pending rows */
    assert_int_equal(pending_in(a.node, 16, SNUG_PRECISION_BF16, SNUG_PRODUCTS_AUTO), bytes);
    kernel_isa_cap(cpu);
    /* through bgemm (asked for, on any CPU) or the BLAS: nothing deferred, none planned */
    assert_int_equal(pending_in(a.node, 16, SNUG_PRECISION_BF16, SNUG_PRODUCTS_SNUG), 0);
    assert_int_equal(pending_in(a.node, 16, SNUG_PRECISION_FP32, SNUG_PRODUCTS_BLAS), 0);
    static const size_t rows[] = {1, 3, 16}, calls[] = {70, 23, 5};
    for (int k = 0; k < 3; k++) {
        /* each run in a block of exactly what a plan of its rows holds: a capacity beyond it is an overflow
         * (ASan) */
        const size_t need = pending_of(a.node, rows[k]);
        void *pending = op_test_xmalloc(need);
        memset(pending, 0, need);
        run_calls(&a, rows[k], calls[k], pending);
        free(pending);
        run_calls(&b, rows[k], calls[k], NULL);
        assert_memory_equal(a.dw[0], b.dw[0], a.wn[0] * sizeof(float));
        assert_memory_equal(a.dw[1], b.dw[1], a.wn[1] * sizeof(float));
        assert_memory_equal(a.dx[0], b.dx[0], rows[k] * in * sizeof(float));
        float nonzero = 0;
        for (size_t i = 0; i < a.wn[0]; i++) nonzero += a.dw[0][i] != 0.0f;
        assert_true(nonzero > 0);
    }
    op_fixture_free(&a);
    op_fixture_free(&b);
    /* At one row per call the mlp's three layers defer (its head's 1024 x 10 weight too: 2560 floats a quarter
     * against 1034 a row); the GPT's layers see 256 rows per sample and never defer. */
    static const char *const models[] = {"mlp", "gpt"};
    static const int deferring[] = {3, 0};
    for (int i = 0; i < 2; i++) {
        snug_graph *g = model_named(models[i], NULL);
        assert_non_null(g);
        int n = 0;
        for (int k = 0; k < g->n_nodes; k++)
            n += pending_of(&g->nodes[k], 1) > 0;
        assert_int_equal(n, deferring[i]);
        snug_graph_free(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_gradients),
        cmocka_unit_test(test_short_rows_in_a_larger_plan),
        cmocka_unit_test(test_rows_same_bits_in_any_micro_batch),
        cmocka_unit_test(test_same_bits_any_thread_count),
        cmocka_unit_test(test_pending_rows_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

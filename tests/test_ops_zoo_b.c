/* The model-zoo ops of family B: batchnorm2d, groupnorm, layernorm, (causal) self-attention, and softmax
 * cross-entropy over tokens and pixels. For each: forward against a double-precision reference computed here,
 * finite-difference gradients on odd shapes (m = 1 and 3), backward adds, a micro-batch smaller than the planned
 * one; BatchNorm's running statistics (updated once per training forward, never by a recompute, used in
 * evaluation); results that do not depend on the thread count; ignored targets; the shape errors the builders
 * report.
 *
 * Nodes are bound by hand as in test_op_gradients.c (op_test_util.h: buffers sized exactly from the op table,
 * so ASan catches an op that overruns them). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kernels/bf16.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"

/* Relative tolerances of the finite-difference checks (see op_check_fd). The normalisations, softmax and
 * attention are curved: central differences carry an O(h^2) truncation error besides float rounding. */
#define TOL_CURVED 3e-3
#define FD_STEP 1e-3f

static int threads(void) { return omp_get_max_threads(); }

/* A graph input of any per-sample shape. snug_input makes (C, H, W); the test makes one with the same element
 * count and gives it the shape the op under test takes (in models an embedding or a linear layer makes the
 * (T, C) tensors). */
static snug_tensor shaped_input(snug_graph *g, int rank, const size_t *dims) {
    size_t numel = 1;
    for (int i = 0; i < rank; i++) numel *= dims[i];
    snug_tensor x = snug_input(g, "x", numel, 1, 1);
    if (x < 0) return x;
    snug_shape s = {.rank = rank};
    for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
    g->tensors[x].shape = s;
    return x;
}

/* Copies of n floats, and bitwise comparison. */
static float *dup_floats(const float *v, size_t n) {
    float *c = op_test_xmalloc(n * sizeof *c);
    memcpy(c, v, n * sizeof *c);
    return c;
}

static void expect_close(double got, double want, double tol, const char *what, size_t i) {
    if (fabs(got - want) > tol * (1.0 + fabs(want))) fail_msg("%s[%zu]: got %.8g, want %.8g", what, i, got, want);
}

/* ---- batchnorm2d ----------------------------------------------------------------------------------------- */

enum { BN_GAMMA, BN_BETA, BN_RMEAN, BN_RVAR };

/* Binds batchnorm2d over (C, H, W) for m samples: its per-batch saved bytes, its buffers as state (no
 * gradient), a positive running variance, training mode. With relu, a ReLU reads its output, so the node is
 * the folded op_batchnorm2d_relu. */
static void bn_bind_with(op_fixture *f, size_t C, size_t H, size_t W, size_t m, int nthreads, uint64_t seed,
                         bool relu) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor y = snug_batchnorm2d(g, "bn", snug_input(g, "x", C, H, W), 1e-5f, 0.1f);
    if (relu) snug_relu(g, "relu", y);
    op_fixture_init(f, g, 1, m, nthreads, FILL_PLAIN, seed);
    free(f->saved);
    f->saved = op_test_xmalloc(f->op->saved_bytes(f->node) * m + f->op->saved_batch_bytes(f->node));
    f->c.saved = f->saved;
    for (int i = BN_RMEAN; i <= BN_RVAR; i++) {
        f->c.state[i] = f->w[i];
        f->c.dw[i] = NULL;
    }
    for (size_t c = 0; c < C; c++) f->w[BN_RVAR][c] = 0.5f + fabsf(f->w[BN_RVAR][c]);
    f->c.training = true;
}

static void bn_bind(op_fixture *f, size_t C, size_t H, size_t W, size_t m, int nthreads, uint64_t seed) {
    bn_bind_with(f, C, H, W, m, nthreads, seed, false);
}

/* Per-channel batch mean and biased variance over the first m samples, in double. */
static void bn_ref_stats(const op_fixture *f, size_t m, size_t C, size_t hw, double *mean, double *var) {
    for (size_t c = 0; c < C; c++) {
        double s = 0.0, s2 = 0.0;
        for (size_t i = 0; i < m; i++)
            for (size_t k = 0; k < hw; k++) s += f->x[0][(i * C + c) * hw + k];
        mean[c] = s / (double)(m * hw);
        for (size_t i = 0; i < m; i++)
            for (size_t k = 0; k < hw; k++) s2 += pow(f->x[0][(i * C + c) * hw + k] - mean[c], 2);
        var[c] = s2 / (double)(m * hw);
    }
}

/* y against (x - mean) / sqrt(var + eps) * gamma + beta with the given statistics. */
static void bn_expect_output(const op_fixture *f, size_t m, size_t C, size_t hw, const double *mean,
                             const double *var) {
    for (size_t i = 0; i < m; i++)
        for (size_t c = 0; c < C; c++)
            for (size_t k = 0; k < hw; k++) {
                const size_t j = (i * C + c) * hw + k;
                double want = (f->x[0][j] - mean[c]) / sqrt(var[c] + 1e-5) * f->w[BN_GAMMA][c] + f->w[BN_BETA][c];
                expect_close(f->y[j], want, 1e-5, "batchnorm2d output", j);
            }
}

static void test_batchnorm_table_and_forward(void **state) {
    (void)state;
    const size_t C = 3, H = 3, W = 5, hw = 15, m = 3;
    op_fixture f;
    bn_bind(&f, C, H, W, m, threads(), 101);
    const graph_param *p = f.g->params;
    assert_int_equal(f.node->n_params, 4);
    assert_string_equal(p[f.node->params[BN_GAMMA]].name, "bn.weight");
    assert_string_equal(p[f.node->params[BN_RVAR]].name, "bn.running_var");
    assert_true(p[f.node->params[BN_GAMMA]].init == INIT_ONES && !p[f.node->params[BN_GAMMA]].buffer);
    assert_true(p[f.node->params[BN_BETA]].init == INIT_ZEROS && !p[f.node->params[BN_BETA]].buffer);
    assert_true(p[f.node->params[BN_RMEAN]].init == INIT_ZEROS && p[f.node->params[BN_RMEAN]].buffer);
    assert_true(p[f.node->params[BN_RVAR]].init == INIT_ONES && p[f.node->params[BN_RVAR]].buffer);
    assert_int_equal(f.g->param_numel, 2 * C);
    assert_int_equal(f.g->state_numel, 2 * C);
    assert_int_equal(f.op->saved_bytes(f.node), 0);
    assert_int_equal(f.op->saved_batch_bytes(f.node), 2 * C * sizeof(float));
    assert_true(f.op->flags & OP_KEEPS_INPUT);
    /* a large offset: the statistics must not cancel */
    for (size_t j = 0; j < m * C * hw; j++) f.x[0][j] += 100.0f;
    float *rm0 = dup_floats(f.w[BN_RMEAN], C), *rv0 = dup_floats(f.w[BN_RVAR], C);
    f.op->forward(&f.c);
    double mean[3], var[3];
    bn_ref_stats(&f, m, C, hw, mean, var);
    bn_expect_output(&f, m, C, hw, mean, var);
    const float *saved = f.saved;
    for (size_t c = 0; c < C; c++) {
        expect_close(saved[c], mean[c], 1e-6, "saved mean", c);
        expect_close(saved[C + c], 1.0 / sqrt(var[c] + 1e-5), 1e-5, "saved invstd", c);
        /* PyTorch: running = 0.9 running + 0.1 batch, the variance unbiased */
        expect_close(f.w[BN_RMEAN][c], 0.9 * rm0[c] + 0.1 * mean[c], 1e-6, "running_mean", c);
        expect_close(f.w[BN_RVAR][c], 0.9 * rv0[c] + 0.1 * var[c] * 45.0 / 44.0, 1e-6, "running_var", c);
    }
    free(rm0), free(rv0);
    op_fixture_free(&f);
}

static void test_batchnorm_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        bn_bind(&f, 3, 3, 5, m, threads(), 110 + m);
        op_check_all(&f, m, FD_STEP, TOL_CURVED);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
    op_fixture f; /* one pixel per channel: statistics over the samples alone */
    bn_bind(&f, 2, 1, 1, 3, threads(), 115);
    op_check_all(&f, 3, FD_STEP, TOL_CURVED);
    op_fixture_free(&f);
    bn_bind(&f, 3, 3, 5, 4, threads(), 116);
    op_check_all(&f, 3, FD_STEP, TOL_CURVED); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

/* Once per training forward; a recompute writes the same bits from the saved statistics and leaves the running
 * ones alone; its backward is the backward of the first forward. */
static void test_batchnorm_running_stats_and_recompute(void **state) {
    (void)state;
    const size_t C = 3, n = 3 * 3 * 15;
    op_fixture f;
    bn_bind(&f, C, 3, 5, 3, threads(), 120);
    float *rm0 = dup_floats(f.w[BN_RMEAN], C), *rv0 = dup_floats(f.w[BN_RVAR], C);
    f.op->forward(&f.c);
    float *y1 = dup_floats(f.y, n), *rm1 = dup_floats(f.w[BN_RMEAN], C), *rv1 = dup_floats(f.w[BN_RVAR], C);
    for (size_t c = 0; c < C; c++) assert_true(rm1[c] != rm0[c] && rv1[c] != rv0[c]);
    op_fixture_zero_grads(&f);
    f.op->backward(&f.c);
    float *dx1 = dup_floats(f.dx[0], n), *dg1 = dup_floats(f.dw[BN_GAMMA], C);

    memset(f.y, 0, n * sizeof(float));
    f.c.recompute = true;
    f.op->forward(&f.c);
    assert_memory_equal(f.y, y1, n * sizeof(float));
    assert_memory_equal(f.w[BN_RMEAN], rm1, C * sizeof(float));
    assert_memory_equal(f.w[BN_RVAR], rv1, C * sizeof(float));
    op_fixture_zero_grads(&f);
    f.op->backward(&f.c);
    assert_memory_equal(f.dx[0], dx1, n * sizeof(float));
    assert_memory_equal(f.dw[BN_GAMMA], dg1, C * sizeof(float));

    /* A second (non-recompute) forward updates them once more: the same batch, so the same step again. */
    f.c.recompute = false;
    f.op->forward(&f.c);
    for (size_t c = 0; c < C; c++) {
        expect_close(f.w[BN_RMEAN][c], 0.9 * rm1[c] + (rm1[c] - 0.9 * rm0[c]), 1e-6, "running_mean", c);
        expect_close(f.w[BN_RVAR][c], 0.9 * rv1[c] + (rv1[c] - 0.9 * rv0[c]), 1e-6, "running_var", c);
    }
    free(rm0), free(rv0), free(y1), free(rm1), free(rv1), free(dx1), free(dg1);
    op_fixture_free(&f);
}

/* f, a layer with the ReLU after it folded in, against p, the same one plain (same shapes and seed): f's
 * output is relu of p's, bit for bit; with p given the ReLU's gradient of f's output weighting (0 + R where
 * y > 0), every input and parameter gradient has p's bits, and f's backward adds (and writes a fresh dx as
 * added into zeros). n: elements of the output. */
static void expect_fold_same_bits(op_fixture *p, op_fixture *f, size_t n, bool backward) {
    p->op->forward(&p->c);
    f->op->forward(&f->c);
    for (size_t i = 0; i < n; i++) {
        const float want = p->y[i] < 0.0f ? 0.0f : p->y[i];
        assert_memory_equal(&f->y[i], &want, sizeof want);
        p->r[i] = 0.0f + (p->y[i] > 0.0f ? f->r[i] : 0.0f);
    }
    if (!backward) return;
    op_fixture_zero_grads(p), op_fixture_zero_grads(f);
    p->op->backward(&p->c);
    f->op->backward(&f->c);
    for (int i = 0; i < f->n_in; i++)
        if (f->owner[i] == i) assert_memory_equal(f->dx[i], p->dx[i], f->c.m * f->in_n[i] * sizeof(float));
    for (int i = 0; i < f->n_w; i++)
        if (f->c.dw[i]) assert_memory_equal(f->dw[i], p->dw[i], f->wn[i] * sizeof(float));
    op_check_backward_adds(f);
}

/* Backward with x read from its packed copy (op_call.in_packed, in[0] NULL: a bf16 plan that keeps the input
 * only packed) gives the bits of reading the float32 instance of the same bfloat16 values: adding into dx and
 * writing it fresh, with and without a folded ReLU, planes whose size is no multiple of the lanes (10 x 13)
 * and planes over the sums' blocks (40 x 40); and a regeneration from it, the bits of the rounded forward. */
static void test_batchnorm_packed_input_same_bits(void **state) {
    (void)state;
    const size_t sh[][3] = {{5, 10, 13}, {3, 40, 40}};
    for (size_t k = 0; k < 4; k++) {
        const size_t C = sh[k % 2][0], H = sh[k % 2][1], W = sh[k % 2][2], m = 3, n = m * C * H * W;
        op_fixture f;
        bn_bind_with(&f, C, H, W, m, threads(), 140 + k, k >= 2);
        for (size_t j = 0; j < n; j++) f.x[0][j] = bf16_round(f.x[0][j]);
        bf16 *packed = op_test_xmalloc(n * sizeof *packed);
        bf16_pack(packed, f.x[0], n);
        float *want = op_test_xmalloc(n * sizeof *want), *got = op_test_xmalloc(n * sizeof *got);
        f.op->forward(&f.c);
        op_expect_packed_input_same_bits(&f, packed, want, got, n, 0.5f);
        op_expect_packed_regen_same_bits(&f, packed, want, got);
        free(packed), free(want), free(got);
        op_fixture_free(&f);
    }
}

/* BatchNorm with the ReLU after it folded in computes, bit for bit, what BatchNorm and ReLU compute apart,
 * over planes with and without a 16-lane tail, in training and in evaluation, on this machine's threads. */
static void test_batchnorm_relu_folded_same_bits(void **state) {
    (void)state;
    static const size_t shapes[][4] = {{3, 3, 5, 3}, {5, 5, 7, 4}, {2, 1, 1, 3}}; /* C, H, W, m */
    for (int k = 0; k < 3; k++) {
        for (int training = 0; training <= 1; training++) {
            const size_t C = shapes[k][0], hw = shapes[k][1] * shapes[k][2], m = shapes[k][3], n = m * C * hw;
            op_fixture p, f;
            bn_bind_with(&p, C, shapes[k][1], shapes[k][2], m, threads(), 140 + k, false);
            bn_bind_with(&f, C, shapes[k][1], shapes[k][2], m, threads(), 140 + k, true);
            assert_ptr_equal(f.op, &op_batchnorm2d_relu);
            p.c.training = f.c.training = training;
            expect_fold_same_bits(&p, &f, n, training);
            op_fixture_free(&p), op_fixture_free(&f);
        }
    }
}

/* The fold as the graph grows: BatchNorm then ReLU fold (the ReLU a view), a second reader of the BatchNorm's
 * own output undoes it, a ReLU after another op or a second ReLU never folds. */
static void test_batchnorm_relu_fold_rules(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("fold");
    snug_tensor x = snug_input(g, "x", 2, 3, 3), y = snug_batchnorm2d(g, "bn", x, 1e-5f, 0.1f);
    snug_tensor r = snug_relu(g, "relu", y);
    const graph_node *bn = &g->nodes[g->tensors[y].producer], *relu = &g->nodes[g->tensors[r].producer];
    assert_ptr_equal(bn->op, &op_batchnorm2d_relu);
    assert_ptr_equal(relu->op, &op_relu_folded);
    assert_true(relu->op->flags & OP_IS_VIEW);
    snug_add(g, "sum", r, y); /* reads the values before the ReLU */
    bn = &g->nodes[g->tensors[y].producer], relu = &g->nodes[g->tensors[r].producer];
    assert_ptr_equal(bn->op, &op_batchnorm2d);
    assert_ptr_equal(relu->op, &op_relu);
    snug_graph_free(g);

    g = snug_graph_new("twice");
    y = snug_batchnorm2d(g, "bn", snug_input(g, "x", 2, 3, 3), 1e-5f, 0.1f);
    r = snug_relu(g, "relu1", y);
    snug_tensor r2 = snug_relu(g, "relu2", y);
    assert_ptr_equal(g->nodes[g->tensors[y].producer].op, &op_batchnorm2d);
    assert_ptr_equal(g->nodes[g->tensors[r].producer].op, &op_relu);
    assert_ptr_equal(g->nodes[g->tensors[r2].producer].op, &op_relu);
    snug_graph_free(g);

    g = snug_graph_new("dropout");
    y = snug_dropout(g, "drop", snug_input(g, "x", 2, 3, 3), 0.5f);
    r = snug_relu(g, "relu", y);
    assert_ptr_equal(g->nodes[g->tensors[r].producer].op, &op_relu);
    snug_graph_free(g);
}

/* x and relu(x) added (node 2), with a ReLU after the add (folded into it) or not. */
static snug_graph *add_relu_graph(size_t c, size_t h, size_t w, bool relu) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", c, h, w), y = snug_add(g, "sum", x, snug_relu(g, "act", x));
    if (relu) snug_relu(g, "relu", y);
    return g;
}

/* The add with the ReLU after it folded in: the bits of add and ReLU apart, into gradients of their own and
 * with din[0] on dout's memory (the planner's pass-through: masked there in place, din[1] taken from it). */
static void test_add_relu_folded_same_bits(void **state) {
    (void)state;
    static const size_t shapes[][4] = {{3, 5, 7, 2}, {16, 32, 32, 3}, {1, 1, 1, 1}}; /* c, h, w, m */
    for (int k = 0; k < 3; k++) {
        const size_t n = shapes[k][0] * shapes[k][1] * shapes[k][2] * shapes[k][3];
        op_fixture p, f;
        op_fixture_init(&p, add_relu_graph(shapes[k][0], shapes[k][1], shapes[k][2], false), 2, shapes[k][3],
                        threads(), FILL_PLAIN, 150 + k);
        op_fixture_init(&f, add_relu_graph(shapes[k][0], shapes[k][1], shapes[k][2], true), 2, shapes[k][3],
                        threads(), FILL_PLAIN, 150 + k);
        assert_ptr_equal(f.op, &op_add_relu);
        expect_fold_same_bits(&p, &f, n, true);
        memcpy(f.dx[0], f.r, n * sizeof(float));
        memset(f.dx[1], 0, n * sizeof(float));
        f.c.dout = f.dx[0]; /* din[0] continues dout's memory */
        f.op->backward(&f.c);
        assert_memory_equal(f.dx[0], p.dx[0], n * sizeof(float));
        assert_memory_equal(f.dx[1], p.dx[1], n * sizeof(float));
        f.c.dout = f.r;
        op_fixture_free(&p), op_fixture_free(&f);
    }
}

/* A ReLU after an add folds into it; a later reader of the add's own output undoes that. */
static void test_add_relu_fold_rules(void **state) {
    (void)state;
    snug_graph *g = add_relu_graph(2, 3, 3, true);
    const snug_tensor sum = g->nodes[2].output, r = g->nodes[3].output;
    assert_ptr_equal(g->nodes[2].op, &op_add_relu);
    assert_ptr_equal(g->nodes[3].op, &op_relu_folded);
    snug_add(g, "again", r, sum); /* reads the values before the ReLU */
    assert_ptr_equal(g->nodes[2].op, &op_add);
    assert_ptr_equal(g->nodes[3].op, &op_relu);
    snug_graph_free(g);
}

/* Evaluation normalises with the running statistics and changes neither them nor the saved bytes. */
static void test_batchnorm_evaluation(void **state) {
    (void)state;
    const size_t C = 4, hw = 6, m = 3;
    op_fixture f;
    bn_bind(&f, C, 2, 3, m, threads(), 130);
    f.op->forward(&f.c); /* training: fills saved and moves the running statistics */
    const size_t sb = f.op->saved_batch_bytes(f.node);
    void *saved = op_test_xmalloc(sb);
    memcpy(saved, f.saved, sb);
    float *rm = dup_floats(f.w[BN_RMEAN], C), *rv = dup_floats(f.w[BN_RVAR], C);
    f.c.training = false;
    f.op->forward(&f.c);
    double mean[4], var[4];
    for (size_t c = 0; c < C; c++) mean[c] = rm[c], var[c] = rv[c];
    bn_expect_output(&f, m, C, hw, mean, var);
    assert_memory_equal(f.saved, saved, sb);
    assert_memory_equal(f.w[BN_RMEAN], rm, C * sizeof(float));
    assert_memory_equal(f.w[BN_RVAR], rv, C * sizeof(float));
    /* One sample alone gives the same outputs in evaluation: nothing depends on the batch. */
    float *y = dup_floats(f.y, m * C * hw);
    f.c.m = 1;
    memset(f.y, 0, m * C * hw * sizeof(float));
    f.op->forward(&f.c);
    assert_memory_equal(f.y, y, C * hw * sizeof(float));
    free(saved), free(rm), free(rv), free(y);
    op_fixture_free(&f);
}

/* ---- groupnorm ------------------------------------------------------------------------------------------- */

/* GroupNorm over (C, H, W); with relu, a ReLU reads its output, so the node is op_groupnorm_relu. */
static void gn_bind_with(op_fixture *f, size_t C, size_t H, size_t W, size_t groups, size_t m, uint64_t seed,
                         bool relu) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor y = snug_groupnorm(g, "gn", snug_input(g, "x", C, H, W), groups, 1e-5f);
    if (relu) snug_relu(g, "relu", y);
    op_fixture_init(f, g, 1, m, threads(), FILL_PLAIN, seed);
}

static void gn_bind(op_fixture *f, size_t C, size_t H, size_t W, size_t groups, size_t m, uint64_t seed) {
    gn_bind_with(f, C, H, W, groups, m, seed, false);
}

/* y against the per-(sample, group) statistics in double. */
static void gn_expect_output(const op_fixture *f, size_t m, size_t C, size_t hw, size_t G) {
    const size_t K = C / G * hw;
    for (size_t b = 0; b < m * G; b++) {
        const float *x = f->x[0] + b * K;
        double s = 0.0, s2 = 0.0;
        for (size_t k = 0; k < K; k++) s += x[k];
        const double mean = s / (double)K;
        for (size_t k = 0; k < K; k++) s2 += pow(x[k] - mean, 2);
        const double invstd = 1.0 / sqrt(s2 / (double)K + 1e-5);
        for (size_t k = 0; k < K; k++) {
            const size_t c = (b % G) * (C / G) + k / hw;
            const double want = (x[k] - mean) * invstd * f->w[0][c] + f->w[1][c];
            expect_close(f->y[b * K + k], want, 1e-5, "groupnorm output", b * K + k);
        }
        expect_close(((const float *)f->saved)[2 * b], mean, 1e-6, "saved mean", b);
        expect_close(((const float *)f->saved)[2 * b + 1], invstd, 1e-5, "saved invstd", b);
    }
}

static void test_groupnorm(void **state) {
    (void)state;
    static const size_t groups[] = {1, 2, 3, 6};
    for (size_t gi = 0; gi < 4; gi++)
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            gn_bind(&f, 6, 3, 5, groups[gi], m, 200 + 10 * gi + m);
            assert_int_equal(f.op->saved_bytes(f.node), 2 * groups[gi] * sizeof(float));
            assert_int_equal(f.node->n_params, 2);
            assert_string_equal(f.g->params[f.node->params[0]].name, "gn.weight");
            for (size_t j = 0; j < m * 90; j++) f.x[0][j] += 50.0f; /* a large offset must not cancel */
            f.op->forward(&f.c);
            gn_expect_output(&f, m, 6, 15, groups[gi]);
            for (size_t j = 0; j < m * 90; j++) f.x[0][j] -= 50.0f;
            op_check_all(&f, m, FD_STEP, TOL_CURVED);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    op_fixture f;
    gn_bind(&f, 6, 3, 5, 2, 5, 250);
    op_check_all(&f, 2, FD_STEP, TOL_CURVED); /* planned 5, runs 2 */
    op_fixture_free(&f);
}

/* GroupNorm with the ReLU after it folded in: the bits of the two ops, as for BatchNorm. */
static void test_groupnorm_relu_folded_same_bits(void **state) {
    (void)state;
    static const size_t shapes[][5] = {{6, 3, 5, 2, 3}, {4, 5, 7, 4, 2}, {3, 1, 1, 1, 3}}; /* C, H, W, G, m */
    for (int k = 0; k < 3; k++) {
        const size_t *d = shapes[k];
        op_fixture p, f;
        gn_bind_with(&p, d[0], d[1], d[2], d[3], d[4], 260 + k, false);
        gn_bind_with(&f, d[0], d[1], d[2], d[3], d[4], 260 + k, true);
        assert_ptr_equal(f.op, &op_groupnorm_relu);
        expect_fold_same_bits(&p, &f, d[4] * d[0] * d[1] * d[2], true);
        op_fixture_free(&p), op_fixture_free(&f);
    }
}

/* ---- layernorm ------------------------------------------------------------------------------------------- */

static void ln_bind(op_fixture *f, int rank, const size_t *dims, size_t m, uint64_t seed) {
    snug_graph *g = snug_graph_new("t");
    snug_layernorm(g, "ln", shaped_input(g, rank, dims), 1e-5f);
    op_fixture_init(f, g, 1, m, threads(), FILL_PLAIN, seed);
}

static void ln_expect_output(const op_fixture *f, size_t rows, size_t C) {
    for (size_t r = 0; r < rows; r++) {
        const float *x = f->x[0] + r * C;
        double s = 0.0, s2 = 0.0;
        for (size_t j = 0; j < C; j++) s += x[j];
        const double mean = s / (double)C;
        for (size_t j = 0; j < C; j++) s2 += pow(x[j] - mean, 2);
        const double invstd = 1.0 / sqrt(s2 / (double)C + 1e-5);
        for (size_t j = 0; j < C; j++)
            expect_close(f->y[r * C + j], (x[j] - mean) * invstd * f->w[0][j] + f->w[1][j], 1e-5, "layernorm", j);
    }
}

static void test_layernorm(void **state) {
    (void)state;
    static const size_t seq[2] = {5, 7}, vec[1] = {7};
    for (size_t m = 1; m <= 3; m += 2)
        for (int rank = 1; rank <= 2; rank++) {
            op_fixture f;
            ln_bind(&f, rank, rank == 2 ? seq : vec, m, 300 + 10 * (size_t)rank + m);
            const size_t rows = m * (rank == 2 ? 5 : 1);
            assert_int_equal(f.op->saved_bytes(f.node), (rank == 2 ? 5 : 1) * 2 * sizeof(float));
            assert_int_equal(f.g->params[f.node->params[0]].numel, 7);
            snug_shape out = snug_tensor_shape(f.g, f.node->output);
            assert_int_equal(out.rank, rank);
            assert_int_equal(out.dims[rank - 1], 7);
            for (size_t j = 0; j < rows * 7; j++) f.x[0][j] -= 30.0f;
            f.op->forward(&f.c);
            ln_expect_output(&f, rows, 7);
            for (size_t j = 0; j < rows * 7; j++) f.x[0][j] += 30.0f;
            op_check_all(&f, m, FD_STEP, TOL_CURVED);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    op_fixture f;
    ln_bind(&f, 2, seq, 4, 350);
    op_check_all(&f, 3, FD_STEP, TOL_CURVED); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

/* Large enough for the parallel loops (and several row blocks): the same bits with one thread and with all. */
static void expect_same_bits_any_threads(op_fixture *f) {
    const int all = omp_get_max_threads();
    omp_set_num_threads(1);
    op_fixture_analytic(f);
    const size_t n = f->c.m * f->out_n, nx = f->c.m * f->in_n[0];
    float *y = dup_floats(f->y, n), *dx = dup_floats(f->dx[0], nx);
    float *dw0 = dup_floats(f->dw[0], f->wn[0]), *dw1 = dup_floats(f->dw[1], f->wn[1]);
    omp_set_num_threads(all > 1 ? all : 4);
    op_fixture_analytic(f);
    omp_set_num_threads(all);
    assert_memory_equal(f->y, y, n * sizeof(float));
    assert_memory_equal(f->dx[0], dx, nx * sizeof(float));
    assert_memory_equal(f->dw[0], dw0, f->wn[0] * sizeof(float));
    assert_memory_equal(f->dw[1], dw1, f->wn[1] * sizeof(float));
    free(y), free(dx), free(dw0), free(dw1);
}

static void test_norms_deterministic(void **state) {
    (void)state;
    static const size_t seq[2] = {100, 96};
    op_fixture f;
    ln_bind(&f, 2, seq, 5, 360);
    expect_same_bits_any_threads(&f);
    ln_expect_output(&f, 500, 96);
    op_fixture_free(&f);
    gn_bind(&f, 16, 24, 24, 4, 4, 361);
    expect_same_bits_any_threads(&f);
    gn_expect_output(&f, 4, 16, 576, 4);
    op_fixture_free(&f);
    bn_bind(&f, 8, 24, 24, 8, threads(), 362);
    expect_same_bits_any_threads(&f);
    op_fixture_free(&f);
}

/* ---- attention ------------------------------------------------------------------------------------------- */

static void attn_bind(op_fixture *f, size_t T, size_t C, size_t H, bool causal, size_t m, int nthreads,
                      uint64_t seed) {
    snug_graph *g = snug_graph_new("t");
    const size_t dims[2] = {T, 3 * C};
    snug_self_attention(g, "attn", shaped_input(g, 2, dims), H, causal);
    op_fixture_init(f, g, 1, m, nthreads, FILL_PLAIN, seed);
}

/* Naive attention of one sample in double: out (T, C), probs (H, T, T). */
static void attn_ref_forward(const float *qkv, size_t T, size_t C, size_t H, bool causal, double *out,
                             double *probs) {
    const size_t D = C / H;
    for (size_t h = 0; h < H; h++)
        for (size_t t = 0; t < T; t++) {
            double *p = probs + (h * T + t) * T, mx = -INFINITY, sum = 0.0;
            for (size_t s = 0; s < T; s++) {
                double dot = 0.0;
                const float *q = qkv + t * 3 * C + h * D, *k = qkv + s * 3 * C + C + h * D;
                for (size_t d = 0; d < D; d++) dot += (double)q[d] * k[d];
                p[s] = causal && s > t ? -INFINITY : dot / sqrt((double)D);
                mx = p[s] > mx ? p[s] : mx;
            }
            for (size_t s = 0; s < T; s++) sum += p[s] = exp(p[s] - mx);
            for (size_t s = 0; s < T; s++) p[s] /= sum;
            for (size_t d = 0; d < D; d++) {
                double o = 0.0;
                for (size_t s = 0; s < T; s++) o += p[s] * qkv[s * 3 * C + 2 * C + h * D + d];
                out[t * C + h * D + d] = o;
            }
        }
}

/* Naive backward of one sample in double: dqkv (T, 3C) from dout (T, C) and the reference probabilities. */
static void attn_ref_backward(const float *qkv, const float *dout, const double *probs, size_t T, size_t C, size_t H,
                              double *dqkv) {
    const size_t D = C / H;
    const double sc = 1.0 / sqrt((double)D);
    double *ds = op_test_xmalloc(T * T * sizeof *ds);
    memset(dqkv, 0, T * 3 * C * sizeof *dqkv);
    for (size_t h = 0; h < H; h++) {
        const double *p = probs + h * T * T;
        for (size_t t = 0; t < T; t++) {
            double dot = 0.0;
            for (size_t s = 0; s < T; s++) {
                double dp = 0.0;
                const float *dO = dout + t * C + h * D, *v = qkv + s * 3 * C + 2 * C + h * D;
                for (size_t d = 0; d < D; d++) dp += (double)dO[d] * v[d];
                ds[t * T + s] = dp;
                dot += p[t * T + s] * dp;
            }
            for (size_t s = 0; s < T; s++) ds[t * T + s] = p[t * T + s] * (ds[t * T + s] - dot) * sc;
        }
        for (size_t t = 0; t < T; t++)
            for (size_t s = 0; s < T; s++)
                for (size_t d = 0; d < D; d++) {
                    const size_t hd = h * D + d;
                    dqkv[t * 3 * C + hd] += ds[t * T + s] * qkv[s * 3 * C + C + hd];
                    dqkv[s * 3 * C + C + hd] += ds[t * T + s] * qkv[t * 3 * C + hd];
                    dqkv[s * 3 * C + 2 * C + hd] += p[t * T + s] * dout[t * C + hd];
                }
    }
    free(ds);
}

/* Forward and backward (which rebuilds the probabilities forward did not keep) against the naive reference,
 * sample by sample. */
static void attn_expect_reference(op_fixture *f, size_t T, size_t C, size_t H, bool causal, double tol) {
    double *out = op_test_xmalloc(T * C * sizeof *out), *probs = op_test_xmalloc(H * T * T * sizeof *probs);
    double *dqkv = op_test_xmalloc(T * 3 * C * sizeof *dqkv);
    op_fixture_analytic(f);
    for (size_t n = 0; n < f->c.m; n++) {
        const float *x = f->x[0] + n * T * 3 * C;
        attn_ref_forward(x, T, C, H, causal, out, probs);
        for (size_t i = 0; i < T * C; i++) expect_close(f->y[n * T * C + i], out[i], tol, "attention output", i);
        attn_ref_backward(x, f->r + n * T * C, probs, T, C, H, dqkv);
        for (size_t i = 0; i < T * 3 * C; i++)
            expect_close(f->dx[0][n * T * 3 * C + i], dqkv[i], 10 * tol, "attention input gradient", i);
    }
    free(out), free(probs), free(dqkv);
}

static void test_attention_table(void **state) {
    (void)state;
    op_fixture f;
    attn_bind(&f, 5, 6, 3, true, 3, 4, 400);
    snug_shape out = snug_tensor_shape(f.g, f.node->output);
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.dims[0], 5);
    assert_int_equal(out.dims[1], 6);
    assert_int_equal(f.node->n_params, 0);
    assert_true(f.op->flags & OP_KEEPS_INPUT);
    /* nothing kept beyond the input: backward rebuilds the probabilities */
    assert_null(f.op->saved_bytes);
    /* two (T, T) blocks, P and dS, and the head's keys and values transposed, (D, T) each, per thread that can
     * have a task: min(threads, m * heads) */
    const size_t per_thread = 2 * 25 + 2 * 2 * 5;
    assert_int_equal(f.op->workspace_bytes(f.node, 3, 4), 4 * per_thread * sizeof(float));
    assert_int_equal(f.op->workspace_bytes(f.node, 1, 16), 3 * per_thread * sizeof(float));
    assert_int_equal(f.op->workspace_bytes(f.node, 1, 1), per_thread * sizeof(float));
    assert_true(f.op->flops(f.node) == 4.0 * 25 * 6 + 5.0 * 25 * 3);
    op_fixture_free(&f);
    /* the causal builder is the causal attention */
    snug_graph *g = snug_graph_new("t");
    const size_t dims[2] = {4, 12};
    snug_causal_self_attention(g, "attn", shaped_input(g, 2, dims), 2);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    const graph_node *nd = &g->nodes[1];
    assert_true(nd->op == &op_attention && nd->p.attention.causal && nd->p.attention.heads == 2);
    snug_graph_free(g);
}

static void test_attention_gradients(void **state) {
    (void)state;
    for (size_t H = 2; H <= 3; H++)
        for (int causal = 0; causal <= 1; causal++)
            for (size_t m = 1; m <= 3; m += 2) {
                op_fixture f;
                attn_bind(&f, 5, 6, H, causal, m, m == 1 ? 1 : threads(), 410 + 10 * H + 2 * (size_t)causal + m);
                for (size_t i = 0; i < m * 5 * 18; i++) f.x[0][i] *= 2.0f; /* peakier softmax */
                attn_expect_reference(&f, 5, 6, H, causal, 1e-5);
                op_check_all(&f, m, FD_STEP, TOL_CURVED);
                op_check_backward_adds(&f);
                op_fixture_free(&f);
            }
    op_fixture f;
    attn_bind(&f, 5, 6, 2, true, 4, 3, 450);
    op_check_all(&f, 3, FD_STEP, TOL_CURVED); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

/* Causality: changing the last position changes no earlier output row. */
static void test_attention_causal_mask(void **state) {
    (void)state;
    op_fixture f;
    attn_bind(&f, 7, 8, 2, true, 1, 1, 460);
    f.op->forward(&f.c);
    float *y = dup_floats(f.y, 7 * 8);
    for (size_t j = 0; j < 24; j++) f.x[0][6 * 24 + j] += 3.0f;
    f.op->forward(&f.c);
    assert_memory_equal(f.y, y, 6 * 8 * sizeof(float));
    assert_memory_not_equal(f.y + 6 * 8, y + 6 * 8, 8 * sizeof(float));
    free(y);
    op_fixture_free(&f);
}

/* Backward rebuilds P and must see forward's P bit for bit. One head with V = identity makes the output row t
 * P's row t (O = P V, every other term an exact 0), and dO = identity makes dV's column d P's row d (dV = P^T dO):
 * both exact, so they must match bitwise. T = 40 spans two blocks of rows; three samples run in parallel. */
static void test_attention_backward_rebuilds_forward_probs(void **state) {
    (void)state;
    const size_t T = 40, C = 48;
    for (int causal = 0; causal <= 1; causal++) {
        op_fixture f;
        attn_bind(&f, T, C, 1, causal, 3, threads(), 480 + (uint64_t)causal);
        for (size_t n = 0; n < 3; n++)
            for (size_t t = 0; t < T; t++)
                for (size_t d = 0; d < C; d++) {
                    float *row = f.x[0] + (n * T + t) * 3 * C;
                    row[d] *= 3.0f, row[C + d] *= 3.0f; /* peaky, unequal probabilities */
                    row[2 * C + d] = t == d ? 1.0f : 0.0f;
                    f.r[(n * T + t) * C + d] = t == d ? 1.0f : 0.0f;
                }
        op_fixture_analytic(&f);
        size_t differ = 0, nonzero = 0;
        for (size_t n = 0; n < 3; n++)
            for (size_t t = 0; t < T; t++)
                for (size_t s = 0; s < T; s++) {
                    const float fwd = f.y[(n * T + t) * C + s], bwd = f.dx[0][(n * T + s) * 3 * C + 2 * C + t];
                    differ += memcmp(&fwd, &bwd, sizeof fwd) != 0;
                    nonzero += fwd != 0.0f;
                }
        assert_int_equal(differ, 0);
        assert_true(nonzero >= (causal ? 3 * T * (T + 1) / 2 : 3 * T * T) - 3); /* P itself, not zeros */
        op_fixture_free(&f);
    }
}

/* Large enough for the parallel loop over (sample, head) and for the BLAS to block: against the reference. */
static void test_attention_large(void **state) {
    (void)state;
    op_fixture f;
    attn_bind(&f, 40, 48, 4, true, 3, threads(), 470);
    attn_expect_reference(&f, 40, 48, 4, true, 1e-4);
    op_fixture_free(&f);
    attn_bind(&f, 33, 48, 3, false, 2, threads(), 471);
    attn_expect_reference(&f, 33, 48, 3, false, 1e-4);
    op_fixture_free(&f);
}

/* ---- softmax cross-entropy over tokens and pixels -------------------------------------------------------- */

/* Binds the loss over logits of the given per-sample shape for m samples, with one target per item: mostly
 * valid classes, every fifth ignored, every seventh out of range (ignored too); loss_scale 1/4. */
static void xent_bind(op_fixture *f, int rank, const size_t *dims, size_t m, uint64_t seed) {
    snug_graph *g = snug_graph_new("t");
    snug_softmax_cross_entropy(g, "loss", shaped_input(g, rank, dims));
    op_fixture_init(f, g, 1, m, threads(), FILL_PLAIN, seed);
    const size_t classes = rank == 2 ? dims[1] : dims[0], items = m * f->out_n;
    free(f->targets);
    f->targets = op_test_xmalloc(items * sizeof(int32_t));
    f->c.targets = f->targets;
    uint64_t s = seed;
    for (size_t i = 0; i < items; i++)
        f->targets[i] = i % 5 == 1 ? SNUG_IGNORE_TARGET
                        : i % 7 == 3 ? (int32_t)classes
                                     : (int32_t)(op_test_rng_next(&s) % classes);
    for (size_t i = 0; i < m * f->in_n[0]; i++) f->x[0][i] *= 3.0f;
    f->c.loss_scale = 0.25f;
}

/* Loss values, and the gradient of one backward with loss_scale 1/4: (p - onehot) / 4 for counted items, 0 for
 * ignored ones; in double, item by item, with the classes `inner` apart. */
static void xent_expect_reference(op_fixture *f, size_t outer, size_t classes, size_t inner) {
    op_fixture_analytic(f);
    const size_t per = outer * inner;
    for (size_t i = 0; i < f->c.m * per; i++) {
        const float *x = f->x[0] + (i / inner) * classes * inner + i % inner;
        const float *dx = f->dx[0] + (i / inner) * classes * inner + i % inner;
        const int32_t t = f->targets[i];
        const bool count = t >= 0 && (size_t)t < classes;
        double mx = x[0], sum = 0.0;
        for (size_t j = 1; j < classes; j++) mx = x[j * inner] > mx ? x[j * inner] : mx;
        for (size_t j = 0; j < classes; j++) sum += exp((double)x[j * inner] - mx);
        expect_close(f->y[i], count ? log(sum) - ((double)x[(size_t)t * inner] - mx) : 0.0, 1e-5, "item loss", i);
        for (size_t j = 0; j < classes; j++) {
            const double p = exp((double)x[j * inner] - mx) / sum;
            expect_close(dx[j * inner], count ? (p - (j == (size_t)t)) * 0.25 : 0.0, 1e-5, "logit gradient", i);
        }
    }
}

static void test_xent_tokens(void **state) {
    (void)state;
    static const size_t dims[2] = {5, 4};
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        xent_bind(&f, 2, dims, m, 500 + m);
        snug_shape out = snug_tensor_shape(f.g, f.node->output);
        assert_int_equal(out.rank, 1);
        assert_int_equal(out.dims[0], 5); /* one loss per token: the targets' shape */
        assert_int_equal(f.op->saved_bytes(f.node), 20 * sizeof(float));
        xent_expect_reference(&f, 5, 4, 1);
        op_check_all(&f, m, FD_STEP, TOL_CURVED);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
    op_fixture f;
    xent_bind(&f, 2, dims, 4, 510);
    op_check_all(&f, 3, FD_STEP, TOL_CURVED); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

static void test_xent_pixels(void **state) {
    (void)state;
    static const size_t small[3] = {3, 3, 5}, blocks[3] = {2, 9, 11}, wide[3] = {5, 1, 130};
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        xent_bind(&f, 3, small, m, 520 + m);
        snug_shape out = snug_tensor_shape(f.g, f.node->output);
        assert_int_equal(out.rank, 2);
        assert_int_equal(out.dims[0], 3);
        assert_int_equal(out.dims[1], 5);
        xent_expect_reference(&f, 1, 3, 15);
        op_check_all(&f, m, FD_STEP, TOL_CURVED);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
    op_fixture f; /* 99 and 130 pixels: full and partial blocks */
    xent_bind(&f, 3, blocks, 3, 530);
    xent_expect_reference(&f, 1, 2, 99);
    op_fixture_free(&f);
    xent_bind(&f, 3, wide, 2, 531);
    for (size_t k = 0; k < 130; k++) f.x[0][k] += 500.0f; /* class 0 of sample 0: would overflow a naive exp */
    xent_expect_reference(&f, 1, 5, 130);
    op_fixture_free(&f);
}

/* The per-sample classification keeps its shape and values: (classes) -> (1). */
static void test_xent_per_sample_unchanged(void **state) {
    (void)state;
    static const size_t dims[1] = {7};
    op_fixture f;
    xent_bind(&f, 1, dims, 3, 540);
    snug_shape out = snug_tensor_shape(f.g, f.node->output);
    assert_int_equal(out.rank, 1);
    assert_int_equal(out.dims[0], 1);
    xent_expect_reference(&f, 1, 7, 1);
    op_fixture_free(&f);
}

/* ---- shape errors through the builders ------------------------------------------------------------------- */

static void test_shape_errors(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_batchnorm2d(g, "bn1", snug_flatten(g, "flat", snug_input(g, "x", 2, 3, 4)), 1e-5f, 0.1f);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"batchnorm2d", "'bn1'", "(24)", "(C, H, W)", NULL});

    g = snug_graph_new("t");
    snug_batchnorm2d(g, "bn2", snug_input(g, "x", 2, 3, 4), 0.0f, 0.1f);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"batchnorm2d", "'bn2'", "eps", NULL});

    g = snug_graph_new("t");
    snug_batchnorm2d(g, "bn3", snug_input(g, "x", 2, 3, 4), 1e-5f, 1.5f);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"batchnorm2d", "'bn3'", "momentum", "1.5", NULL});

    g = snug_graph_new("t");
    snug_groupnorm(g, "gn1", snug_input(g, "x", 6, 3, 5), 4, 1e-5f);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"groupnorm", "'gn1'", "4 groups", "(6, 3, 5)", NULL});

    g = snug_graph_new("t");
    snug_groupnorm(g, "gn2", snug_input(g, "x", 6, 3, 5), 0, 1e-5f);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"groupnorm", "'gn2'", "0 groups", NULL});

    g = snug_graph_new("t");
    snug_layernorm(g, "ln1", snug_input(g, "x", 2, 3, 4), 1e-5f);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"layernorm", "'ln1'", "(2, 3, 4)", "(T, C)", NULL});

    g = snug_graph_new("t");
    snug_layernorm(g, "ln2", snug_flatten(g, "flat", snug_input(g, "x", 2, 3, 4)), -1.0f);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"layernorm", "'ln2'", "eps", NULL});

    static const size_t bad_width[2] = {5, 16}, qkv[2] = {5, 18};
    g = snug_graph_new("t");
    snug_causal_self_attention(g, "attn1", shaped_input(g, 2, bad_width), 2);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"attention", "'attn1'", "(5, 16)", "3C", NULL});

    g = snug_graph_new("t");
    snug_causal_self_attention(g, "attn2", shaped_input(g, 2, qkv), 4);
    op_expect_error(g, SNUG_E_SHAPE,
                    (const char *const[]){"attention", "'attn2'", "4 heads", "C = 6", "(5, 18)", NULL});

    g = snug_graph_new("t");
    snug_causal_self_attention(g, "attn3", snug_input(g, "x", 5, 18, 1), 2);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"attention", "'attn3'", "(5, 18, 1)", NULL});

    g = snug_graph_new("t");
    snug_causal_self_attention(g, "attn4", shaped_input(g, 2, qkv), 0);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"attention", "'attn4'", "heads", "at least 1", NULL});

    g = snug_graph_new("t"); /* a forgotten flatten is not a 1x1 image */
    snug_softmax_cross_entropy(g, "loss", snug_input(g, "x", 10, 1, 1));
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"softmax", "'loss'", "(10, 1, 1)", "flatten", NULL});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batchnorm_table_and_forward),
        cmocka_unit_test(test_batchnorm_gradients),
        cmocka_unit_test(test_batchnorm_running_stats_and_recompute),
        cmocka_unit_test(test_batchnorm_evaluation),
        cmocka_unit_test(test_batchnorm_relu_folded_same_bits),
        cmocka_unit_test(test_batchnorm_packed_input_same_bits),
        cmocka_unit_test(test_batchnorm_relu_fold_rules),
        cmocka_unit_test(test_add_relu_folded_same_bits),
        cmocka_unit_test(test_add_relu_fold_rules),
        cmocka_unit_test(test_groupnorm_relu_folded_same_bits),
        cmocka_unit_test(test_groupnorm),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_norms_deterministic),
        cmocka_unit_test(test_attention_table),
        cmocka_unit_test(test_attention_gradients),
        cmocka_unit_test(test_attention_causal_mask),
        cmocka_unit_test(test_attention_large),
        cmocka_unit_test(test_attention_backward_rebuilds_forward_probs),
        cmocka_unit_test(test_xent_tokens),
        cmocka_unit_test(test_xent_pixels),
        cmocka_unit_test(test_xent_per_sample_unchanged),
        cmocka_unit_test(test_shape_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

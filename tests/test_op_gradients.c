/* Finite-difference gradient checks for every op, on odd shapes, plus: backward adds, a micro-batch smaller
 * than the planned one, deterministic conv2d reductions, the loss value, max-pool ties and NaN, and the shape
 * errors the builder reports.
 *
 * Each check builds a tiny graph with the public builder, binds the node under test by hand (op_test_util.h:
 * buffers sized exactly from saved_bytes and workspace_bytes, so ASan catches an op that overruns them), and
 * compares the analytic gradient of L = sum(out * R) (the loss op: L = loss_scale * sum(out)) with central
 * differences. */
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
#include "op_test_util.h"
#include "kernels/conv3x3_direct.h"
#include "ops/op.h"
#include "snug.h"

/* ---- graphs ---------------------------------------------------------------------------------------------- */

static snug_graph *linear_graph(size_t in, size_t out) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", in, 1, 1);
    snug_linear(g, "fc", snug_flatten(g, "flat", x), out);
    return g; /* node 2 */
}

static snug_graph *conv_graph(size_t c, size_t h, size_t w, size_t co, size_t k, size_t s, size_t p) {
    snug_graph *g = snug_graph_new("t");
    snug_conv2d(g, "conv", snug_input(g, "x", c, h, w), co, k, s, p);
    return g; /* node 1 */
}

static snug_graph *pool_graph_padded(size_t c, size_t h, size_t w, size_t k, size_t s, size_t pad) {
    snug_graph *g = snug_graph_new("t");
    snug_maxpool2d_padded(g, "pool", snug_input(g, "x", c, h, w), k, s, pad);
    return g; /* node 1 */
}

static snug_graph *pool_graph(size_t c, size_t h, size_t w, size_t k, size_t s) {
    return pool_graph_padded(c, h, w, k, s, 0);
}

static snug_graph *xent_graph(size_t classes) {
    snug_graph *g = snug_graph_new("t");
    snug_softmax_cross_entropy(g, "loss", snug_flatten(g, "flat", snug_input(g, "x", classes, 1, 1)));
    return g; /* node 2 */
}

static int threads(void) { return omp_get_max_threads(); }

/* Tolerances, relative (see check_fd). Ops linear in what is perturbed (linear, conv2d, and relu and max-pool
 * away from their kinks) differ from central differences only by float rounding: about 3e-5 is observed.
 * Softmax's curvature adds the O(h^2) truncation error: about 2e-4 observed at h = 1e-3. */
#define TOL_LINEAR 2e-4
#define TOL_SOFTMAX 2e-3

/* ---- linear ---------------------------------------------------------------------------------------------- */

static void test_linear_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        op_fixture_init(&f, linear_graph(5, 7), 2, m, threads(), FILL_PLAIN, 11 + m);
        assert_int_equal(f.g->tensors[f.node->output].shape.dims[0], 7);
        assert_int_equal(f.g->params[f.node->params[0]].shape.dims[0], 7);
        assert_int_equal(f.g->params[f.node->params[0]].shape.dims[1], 5);
        assert_int_equal(f.g->params[f.node->params[0]].fan_in, 5);
        assert_int_equal(f.g->params[f.node->params[1]].init, INIT_BIAS_UNIFORM);
        assert_true(f.op->flops(f.node) == 70.0);
        f.op->forward(&f.c);
        for (size_t i = 0; i < m; i++)
            for (size_t o = 0; o < 7; o++) {
                double want = f.w[1][o];
                for (size_t j = 0; j < 5; j++) want += (double)f.w[0][o * 5 + j] * f.x[0][i * 5 + j];
                assert_float_equal(f.y[i * 7 + o], want, 1e-5);
            }
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

static void test_linear_smaller_micro_batch(void **state) {
    (void)state;
    op_fixture f;
    op_fixture_init(&f, linear_graph(9, 4), 2, 6, threads(), FILL_PLAIN, 5);
    op_check_all(&f, 2, 1e-2f, TOL_LINEAR);
    op_fixture_free(&f);
}

/* din may be NULL (the first layer): parameter gradients are still computed. */
static void test_linear_without_input_gradient(void **state) {
    (void)state;
    op_fixture f, ref;
    op_fixture_init(&f, linear_graph(5, 7), 2, 3, threads(), FILL_PLAIN, 21);
    op_fixture_init(&ref, linear_graph(5, 7), 2, 3, threads(), FILL_PLAIN, 21);
    f.c.din[0] = NULL;
    op_fixture_analytic(&f);
    op_fixture_analytic(&ref);
    for (int p = 0; p < f.n_w; p++) assert_memory_equal(f.dw[p], ref.dw[p], f.wn[p] * sizeof(float));
    op_fixture_free(&f);
    op_fixture_free(&ref);
}

/* ---- conv2d ---------------------------------------------------------------------------------------------- */

/* A direct convolution in double: out[n][o][i][j] at one point. */
static double conv_direct(const op_fixture *f, size_t n, size_t o, size_t i, size_t j) {
    const conv2d_params *p = &f->node->p.conv2d;
    const snug_shape *in = &f->g->tensors[f->node->inputs[0]].shape;
    const size_t C = in->dims[0], H = in->dims[1], W = in->dims[2], k = p->kernel;
    double acc = f->w[1] ? f->w[1][o] : 0.0; /* no bias: the convolution alone */
    for (size_t c = 0; c < C; c++)
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++) {
                long ih = (long)(i * p->stride + a) - (long)p->padding;
                long iw = (long)(j * p->stride + b) - (long)p->padding;
                if (ih < 0 || iw < 0 || ih >= (long)H || iw >= (long)W) continue;
                acc += (double)f->w[0][((o * C + c) * k + a) * k + b] *
                       f->x[0][((n * C + c) * H + (size_t)ih) * W + (size_t)iw];
            }
    return acc;
}

/* The forward values of the first m samples against the direct convolution. */
static void check_conv_forward(op_fixture *f, size_t m) {
    f->c.m = m;
    f->op->forward(&f->c);
    const snug_shape *out = &f->g->tensors[f->node->output].shape;
    for (size_t n = 0; n < m; n++)
        for (size_t o = 0; o < out->dims[0]; o++)
            for (size_t i = 0; i < out->dims[1]; i++)
                for (size_t j = 0; j < out->dims[2]; j++) {
                    size_t at = ((n * out->dims[0] + o) * out->dims[1] + i) * out->dims[2] + j;
                    assert_float_equal(f->y[at], conv_direct(f, n, o, i, j), 1e-4);
                }
}

typedef struct conv_case { size_t c, h, w, co, k, s, p; } conv_case;

static const conv_case conv_cases[] = {
    {3, 7, 5, 4, 3, 2, 1}, /* the odd case: stride 2, padding 1 */
    {2, 6, 6, 3, 3, 1, 1}, /* same padding */
    {3, 4, 5, 2, 1, 1, 0}, /* pointwise: no column buffer */
    {2, 5, 4, 3, 2, 3, 0}, /* stride larger than the kernel: some inputs get no gradient */
    {1, 3, 4, 2, 3, 1, 2}, /* padding wider than half the kernel: border outputs see only padding rows */
};

static void test_conv2d_gradients(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
        const conv_case *k = &conv_cases[i];
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            op_fixture_init(&f, conv_graph(k->c, k->h, k->w, k->co, k->k, k->s, k->p), 1, m, threads(),
                            FILL_PLAIN, 100 * i + m);
            check_conv_forward(&f, m);
            op_check_all(&f, m, 1e-2f, TOL_LINEAR);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    }
}

/* Without a bias (torch's bias=False, before a BatchNorm): one parameter, the same products from zero. The
 * planes of resnet18's last stages (2x2, 1x1) are among them, on the direct and Winograd paths. */
static void test_conv2d_no_bias_gradients(void **state) {
    (void)state;
    const conv_case cases[] = {{3, 5, 5, 4, 3, 1, 1}, {16, 2, 2, 16, 3, 1, 1}, {8, 4, 4, 8, 3, 2, 1},
                               {16, 1, 1, 8, 3, 1, 1}, {4, 6, 6, 8, 1, 2, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case *k = &cases[i];
        for (size_t m = 1; m <= 3; m += 2) {
            snug_graph *g = snug_graph_new("t");
            snug_conv2d_no_bias(g, "conv", snug_input(g, "x", k->c, k->h, k->w), k->co, k->k, k->s, k->p, 1);
            assert_int_equal(g->nodes[1].n_params, 1);
            op_fixture f;
            op_fixture_init(&f, g, 1, m, threads(), FILL_PLAIN, 700 + 10 * i + m);
            check_conv_forward(&f, m);
            op_check_all(&f, m, 1e-2f, TOL_LINEAR);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    }
}

static void test_conv2d_shapes_and_costs(void **state) {
    (void)state;
    snug_graph *g = conv_graph(3, 7, 5, 4, 3, 2, 1);
    const graph_node *n = &g->nodes[1];
    const snug_shape *out = &g->tensors[n->output].shape;
    assert_int_equal(out->rank, 3);
    assert_int_equal(out->dims[0], 4);
    assert_int_equal(out->dims[1], 4); /* (7 + 2 - 3) / 2 + 1 */
    assert_int_equal(out->dims[2], 3); /* (5 + 2 - 3) / 2 + 1 */
    const graph_param *w = &g->params[n->params[0]];
    assert_int_equal(w->shape.rank, 4);
    assert_int_equal(w->numel, 4 * 3 * 3 * 3);
    assert_int_equal(w->fan_in, 27);
    assert_int_equal(w->init, INIT_KAIMING_UNIFORM);
    assert_int_equal(g->params[n->params[1]].fan_in, 27);
    assert_true(op_conv2d.flops(n) == 2.0 * 27 * 4 * 12);
    /* One thread: one column buffer (27 x 12 floats, rounded to 64 bytes); four threads and enough samples:
     * four of them plus four partial dW + db (4 x 27 + 4 floats, rounded). On AVX-512 the stride-2 direct
     * path's scratch is larger here: 3 channels x 4 phases x 48 floats (5 rows of 4, + 17, rounded to 16),
     * then dy padded on the 4x3 output grid, 4 planes of 48 floats (6 rows of 4, + 17, rounded); with fewer
     * samples than threads it runs dx and dW side by side, on two of those. */
    const bool direct = conv3x3_direct_available();
    const size_t slot = direct ? (3 * 4 * 48 + 4 * 48) * sizeof(float) : 1344;
    assert_int_equal(op_conv2d.workspace_bytes(n, 3, 1), slot);
    assert_int_equal(op_conv2d.workspace_bytes(n, 3, 4), direct ? 2 * slot : slot);
    assert_int_equal(op_conv2d.workspace_bytes(n, 8, 4), 4 * (slot + 448));
    snug_graph_free(g);
    g = conv_graph(3, 4, 5, 2, 1, 1, 0);
    assert_int_equal(op_conv2d.workspace_bytes(&g->nodes[1], 4, 1), 0); /* pointwise */
    snug_graph_free(g);
}

/* The plan sized for 5 samples and 3 threads (per-thread partials), the call runs 2 then 4 samples. */
static void test_conv2d_smaller_micro_batch_and_threads(void **state) {
    (void)state;
    for (size_t m_run = 2; m_run <= 4; m_run += 2) {
        op_fixture f;
        op_fixture_init(&f, conv_graph(3, 7, 5, 4, 3, 2, 1), 1, 5, 3, FILL_PLAIN, 40 + m_run);
        op_check_all(&f, m_run, 1e-2f, TOL_LINEAR);
        op_fixture_free(&f);
    }
}

/* Per-thread partial sums reduced in thread order: the same thread count gives the same bits. */
static void test_conv2d_deterministic(void **state) {
    (void)state;
    op_fixture f;
    op_fixture_init(&f, conv_graph(4, 9, 9, 8, 3, 1, 1), 1, 8, 4, FILL_PLAIN, 77);
    op_fixture_analytic(&f);
    float *first = op_test_xmalloc(f.wn[0] * sizeof(float));
    memcpy(first, f.dw[0], f.wn[0] * sizeof(float));
    for (int rep = 0; rep < 3; rep++) {
        op_fixture_analytic(&f);
        assert_memory_equal(first, f.dw[0], f.wn[0] * sizeof(float));
    }
    free(first);
    op_fixture_free(&f);
}

/* Large enough that the plain loop lowers with parallel im2col/col2im and the sample-parallel path with serial
 * ones: both agree with each other and with a direct convolution. */
static void test_conv2d_paths_agree(void **state) {
    (void)state;
    op_fixture par, seq;
    op_fixture_init(&par, conv_graph(8, 24, 23, 5, 3, 1, 1), 1, 4, 4, FILL_PLAIN, 9);
    op_fixture_init(&seq, conv_graph(8, 24, 23, 5, 3, 1, 1), 1, 4, 1, FILL_PLAIN, 9);
    check_conv_forward(&seq, 4);
    op_fixture_analytic(&par);
    op_fixture_analytic(&seq);
    for (size_t i = 0; i < 4 * par.out_n; i++) assert_float_equal(par.y[i], seq.y[i], 1e-5f);
    for (size_t i = 0; i < 4 * par.in_n[0]; i++) assert_float_equal(par.dx[0][i], seq.dx[0][i], 1e-5f);
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < par.wn[p]; i++)
            assert_float_equal(par.dw[p][i], seq.dw[p][i], 1e-4f * (1.0f + fabsf(seq.dw[p][i])));
    op_fixture_free(&par);
    op_fixture_free(&seq);
}

/* ---- relu ------------------------------------------------------------------------------------------------ */

static void test_relu_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_graph *g = snug_graph_new("t");
        snug_relu(g, "act", snug_input(g, "x", 2, 3, 5));
        op_fixture f;
        op_fixture_init(&f, g, 1, m, threads(), FILL_AWAY_ZERO, 300 + m);
        assert_true(f.op->flags & OP_KEEPS_OUTPUT);
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

/* Large enough for the parallel loops; NaN passes through forward and stops the gradient. */
static void test_relu_large_and_nan(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_relu(g, "act", snug_input(g, "x", 8, 64, 64));
    op_fixture f;
    op_fixture_init(&f, g, 1, 3, threads(), FILL_PLAIN, 5);
    f.x[0][7] = NAN;
    op_fixture_analytic(&f);
    for (size_t i = 0; i < 3 * f.in_n[0]; i++) {
        if (i == 7) {
            assert_true(isnan(f.y[i]));
            assert_true(f.dx[0][i] == 0.0f);
        } else {
            assert_true(f.y[i] == (f.x[0][i] > 0 ? f.x[0][i] : 0.0f));
            assert_true(f.dx[0][i] == (f.x[0][i] > 0 ? f.r[i] : 0.0f));
        }
    }
    op_fixture_free(&f);
}

/* ---- maxpool2d ------------------------------------------------------------------------------------------- */

/* The forward values of the first m samples against a direct maximum over each window, whose padded positions
 * are -inf. */
static void check_pool_forward(op_fixture *f, size_t m) {
    f->c.m = m;
    f->op->forward(&f->c);
    const snug_shape *in = &f->g->tensors[f->node->inputs[0]].shape, *out = &f->g->tensors[f->node->output].shape;
    const size_t k = f->node->p.pool2d.kernel, st = f->node->p.pool2d.stride, H = in->dims[1], W = in->dims[2];
    const ptrdiff_t pad = (ptrdiff_t)f->node->p.pool2d.padding;
    for (size_t pl = 0; pl < m * in->dims[0]; pl++)
        for (size_t i = 0; i < out->dims[1]; i++)
            for (size_t j = 0; j < out->dims[2]; j++) {
                float mx = -INFINITY;
                for (size_t a = 0; a < k; a++)
                    for (size_t b = 0; b < k; b++) {
                        const ptrdiff_t r = (ptrdiff_t)(i * st + a) - pad, c = (ptrdiff_t)(j * st + b) - pad;
                        if (r >= 0 && r < (ptrdiff_t)H && c >= 0 && c < (ptrdiff_t)W)
                            mx = fmaxf(mx, f->x[0][(pl * H + (size_t)r) * W + (size_t)c]);
                    }
                assert_true(f->y[(pl * out->dims[1] + i) * out->dims[2] + j] == mx);
            }
}

static void test_maxpool2d_gradients(void **state) {
    (void)state;
    /* c, h, w, kernel, stride, padding: the last three padded, resnet18's stem pool (3, 2, 1) among them, and
     * windows of one input element at the corners (2, 2, 1) */
    const size_t cases[][6] = {{2, 7, 5, 2, 2, 0}, {3, 6, 5, 3, 2, 0}, {1, 4, 4, 2, 1, 0},
                               {2, 8, 7, 3, 2, 1}, {3, 5, 6, 2, 2, 1}, {1, 6, 6, 5, 1, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            op_fixture_init(&f, pool_graph_padded(cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4],
                                                  cases[i][5]),
                            1, m, threads(), FILL_DISTINCT, 500 + 10 * i + m);
            assert_int_equal(f.op->saved_bytes(f.node), f.out_n); /* a byte per output: its window position */
            check_pool_forward(&f, m);
            op_check_all(&f, m, 1e-2f, TOL_LINEAR);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    }
    op_fixture f;
    op_fixture_init(&f, pool_graph(2, 7, 5, 2, 2), 1, 5, threads(), FILL_DISTINCT, 3);
    const snug_shape *out = &f.g->tensors[f.node->output].shape;
    assert_int_equal(out->dims[1], 3); /* floor((7 - 2) / 2) + 1 */
    assert_int_equal(out->dims[2], 2);
    op_check_all(&f, 2, 1e-2f, TOL_LINEAR); /* planned 5, runs 2 */
    op_fixture_free(&f);
}

/* Ties go to the first maximum; a NaN wins its window and propagates. */
static void test_maxpool2d_ties_and_nan(void **state) {
    (void)state;
    op_fixture f;
    op_fixture_init(&f, pool_graph(1, 2, 4, 2, 2), 1, 1, threads(), FILL_PLAIN, 1);
    const float x[8] = {1, 3, 5, 0, 3, 2, NAN, 5};
    memcpy(f.x[0], x, sizeof x);
    f.r[0] = 1.0f, f.r[1] = 2.0f;
    op_fixture_analytic(&f);
    assert_true(f.y[0] == 3.0f);
    assert_true(isnan(f.y[1]));
    const float want[8] = {0, 1, 0, 0, 0, 0, 2, 0};
    for (int i = 0; i < 8; i++) assert_true(f.dx[0][i] == want[i]);
    op_fixture_free(&f);
}

/* ---- softmax cross-entropy ------------------------------------------------------------------------------- */

/* Four items, one ignored and one with an out-of-range target (treated as ignored): N = 2. */
static void xent_targets(op_fixture *f) {
    const int32_t t[4] = {3, SNUG_IGNORE_TARGET, 0, 9};
    memcpy(f->targets, t, sizeof t);
    f->c.loss_scale = 0.5f;
}

static void test_softmax_xent_gradients(void **state) {
    (void)state;
    op_fixture f;
    op_fixture_init(&f, xent_graph(6), 2, 4, threads(), FILL_PLAIN, 900);
    for (size_t i = 0; i < 4 * 6; i++) f.x[0][i] *= 3.0f;
    xent_targets(&f);
    assert_int_equal(f.g->tensors[f.node->output].shape.dims[0], 1);
    assert_int_equal(f.op->saved_bytes(f.node), 6 * 4);
    op_check_all(&f, 4, 1e-3f, TOL_SOFTMAX);
    op_check_backward_adds(&f);
    /* Ignored items get no gradient at all. */
    op_fixture_analytic(&f);
    for (size_t j = 0; j < 6; j++) assert_true(f.dx[0][6 + j] == 0.0f && f.dx[0][18 + j] == 0.0f);
    op_check_all(&f, 3, 1e-3f, TOL_SOFTMAX); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

/* The loss value against a double-precision reference, also for logits that overflow a naive exp. */
static void test_softmax_xent_value(void **state) {
    (void)state;
    op_fixture f;
    op_fixture_init(&f, xent_graph(6), 2, 4, threads(), FILL_PLAIN, 901);
    xent_targets(&f);
    for (size_t j = 0; j < 6; j++) f.x[0][12 + j] += 1000.0f; /* item 2: large logits */
    f.op->forward(&f.c);
    for (size_t i = 0; i < 4; i++) {
        if (i == 1 || i == 3) {
            assert_true(f.y[i] == 0.0f);
            continue;
        }
        const float *x = f.x[0] + i * 6;
        double mx = x[0], sum = 0.0;
        for (int j = 1; j < 6; j++) mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < 6; j++) sum += exp((double)x[j] - mx);
        double want = log(sum) - ((double)x[f.targets[i]] - mx);
        assert_true(isfinite(f.y[i]));
        assert_float_equal(f.y[i], want, 1e-5 * (1.0 + want));
    }
    /* The saved probabilities of every item sum to one. */
    for (size_t i = 0; i < 4; i++) {
        double s = 0.0;
        for (size_t j = 0; j < 6; j++) s += ((const float *)f.saved)[i * 6 + j];
        assert_float_equal(s, 1.0, 1e-5);
    }
    op_fixture_free(&f);
}

/* ---- flatten and input ----------------------------------------------------------------------------------- */

static void test_flatten_and_input(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", 3, 7, 5);
    snug_tensor f = snug_flatten(g, "flat", x);
    snug_error err;
    assert_int_equal(snug_graph_check(g, &err), SNUG_OK);
    snug_shape s = snug_tensor_shape(g, f);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.dims[0], 105);
    assert_true(op_flatten.flags & OP_IS_VIEW);
    assert_null(op_flatten.forward);
    assert_null(op_flatten.backward);
    assert_true(op_input.flags & OP_IS_INPUT);
    /* The input op checks a declared shape. */
    snug_shape in = {.rank = 3, .dims = {1, 28, 28}}, out = {0};
    param_decl decl[NODE_MAX_PARAMS];
    int n_decl = -1;
    char msg[256] = "";
    assert_int_equal(op_input.infer(&g->nodes[0], &in, 1, &out, decl, &n_decl, msg, sizeof msg), SNUG_OK);
    assert_int_equal(out.dims[2], 28);
    assert_int_equal(n_decl, 0);
    out = (snug_shape){.rank = 3, .dims = {1, 0, 28}};
    assert_int_equal(op_input.infer(&g->nodes[0], NULL, 0, &out, decl, &n_decl, msg, sizeof msg), SNUG_E_SHAPE);
    assert_non_null(strstr(msg, "(1, 0, 28)"));
    snug_graph_free(g);
}

/* ---- shape errors through the builder -------------------------------------------------------------------- */

static void test_shape_errors(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_conv2d(g, "c1", snug_input(g, "x", 1, 3, 3), 4, 5, 1, 0);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"conv2d", "'c1'", "(1, 3, 3)", "5x5", NULL});

    g = snug_graph_new("t");
    snug_conv2d(g, "c1", snug_input(g, "x", 1, 3, 3), 4, 3, 0, 0);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"conv2d", "'c1'", "stride 0", NULL});

    g = snug_graph_new("t");
    snug_conv2d(g, "c2", snug_flatten(g, "f", snug_input(g, "x", 1, 3, 3)), 4, 1, 1, 0);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"conv2d", "'c2'", "(9)", NULL});

    g = snug_graph_new("t");
    snug_linear(g, "fc1", snug_input(g, "x", 32, 7, 7), 10);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"linear", "'fc1'", "(32, 7, 7)", "flatten", NULL});

    g = snug_graph_new("t");
    snug_maxpool2d(g, "p1", snug_input(g, "x", 2, 3, 5), 4, 2);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"maxpool2d", "'p1'", "(2, 3, 5)", "4x4", NULL});

    /* a value out of its range is a bad argument, not a shape mismatch */
    g = snug_graph_new("t");
    snug_maxpool2d(g, "p1", snug_input(g, "x", 2, 4, 4), 2, 0);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"maxpool2d", "'p1'", "stride 0", NULL});

    g = snug_graph_new("t");
    snug_linear(g, "fc1", snug_flatten(g, "f", snug_input(g, "x", 2, 4, 4)), 0);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"linear", "'fc1'", "out_features 0", NULL});

    g = snug_graph_new("t");
    snug_input(g, "x", 2, 0, 4);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"input", "'x'", "at least 1", NULL});

    g = snug_graph_new("t");
    snug_softmax_cross_entropy(g, "loss", snug_input(g, "x", 10, 1, 1));
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"softmax", "'loss'", "(10, 1, 1)", "flatten", NULL});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_gradients),
        cmocka_unit_test(test_linear_smaller_micro_batch),
        cmocka_unit_test(test_linear_without_input_gradient),
        cmocka_unit_test(test_conv2d_gradients),
        cmocka_unit_test(test_conv2d_no_bias_gradients),
        cmocka_unit_test(test_conv2d_shapes_and_costs),
        cmocka_unit_test(test_conv2d_smaller_micro_batch_and_threads),
        cmocka_unit_test(test_conv2d_deterministic),
        cmocka_unit_test(test_conv2d_paths_agree),
        cmocka_unit_test(test_relu_gradients),
        cmocka_unit_test(test_relu_large_and_nan),
        cmocka_unit_test(test_maxpool2d_gradients),
        cmocka_unit_test(test_maxpool2d_ties_and_nan),
        cmocka_unit_test(test_softmax_xent_gradients),
        cmocka_unit_test(test_softmax_xent_value),
        cmocka_unit_test(test_flatten_and_input),
        cmocka_unit_test(test_shape_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

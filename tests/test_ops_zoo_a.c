/* The model-zoo ops of the convolution family, pooling, concatenation, element-wise and embeddings: grouped
 * conv2d, conv_transpose2d, concat, global_avgpool, gelu, linear over (tokens, features), embedding, position
 * embedding and the tied linear head.
 *
 * For each: finite-difference gradients on odd shapes (m = 1 and 3), forward values against a direct reference
 * (grouped conv against per-group plain convs, transposed conv against a scatter loop), backward adds, the
 * thread paths agreeing, and the shape errors the builders report. Then the ops inside real graphs through the
 * trainer: gradients against finite differences of the trainer's loss, and accumulation over micro-batches
 * (exact up to rounding), with the tied head's gradient landing in the embedding's. */
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
#include "kernels/vmath.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"
#include "test_util.h"

static int threads(void) { return omp_get_max_threads(); }

/* Tolerances, relative (see op_check_fd). Ops linear in what is perturbed differ from central differences only
 * by float rounding; GELU's curvature adds the O(h^2) truncation error. */
#define TOL_LINEAR 2e-4
#define TOL_CURVED 2e-3

/* ---- graphs ---------------------------------------------------------------------------------------------- */

static snug_graph *conv_g_graph(size_t c, size_t h, size_t w, size_t co, size_t k, size_t s, size_t p,
                                size_t groups) {
    snug_graph *g = snug_graph_new("t");
    snug_conv2d_grouped(g, "conv", snug_input(g, "x", c, h, w), co, k, s, p, groups);
    return g; /* node 1 */
}

static snug_graph *convt_graph(size_t c, size_t h, size_t w, size_t co, size_t k, size_t s, size_t p) {
    snug_graph *g = snug_graph_new("t");
    snug_conv_transpose2d(g, "up", snug_input(g, "x", c, h, w), co, k, s, p);
    return g; /* node 1 */
}

/* tokens (T) -> embedding "wte" (T, dim): nodes input 0, flatten 1, embedding 2. */
static snug_graph *token_graph(size_t t, size_t vocab, size_t dim, snug_tensor *out) {
    snug_graph *g = snug_graph_new("t");
    *out = snug_embedding(g, "wte", snug_flatten(g, "flat", snug_input(g, "tokens", t, 1, 1)), vocab, dim);
    return g;
}

/* out[i] - ref[i] within tol (relative to 1 + |ref|) for n values. */
static void expect_close(const float *out, const double *ref, size_t n, double tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (fabs((double)out[i] - ref[i]) > tol * (1.0 + fabs(ref[i])))
            fail_msg("%s[%zu]: %.7g, expected %.7g", what, i, (double)out[i], ref[i]);
}

/* Fills the first m_plan * t inputs of f with token ids in [0, vocab), repeats included. */
static void fill_ids(op_fixture *f, size_t vocab, uint64_t seed) {
    for (size_t i = 0; i < f->m_plan * f->in_n[0]; i++) f->x[0][i] = (float)(op_test_rng_next(&seed) % vocab);
}

/* ---- grouped conv2d --------------------------------------------------------------------------------------- */

typedef struct conv_case { size_t c, h, w, co, k, s, p, groups; } conv_case;

static const conv_case grouped_cases[] = {
    {4, 5, 6, 6, 3, 1, 1, 2},  /* two groups, same padding */
    {6, 7, 5, 3, 3, 2, 1, 3},  /* one output channel per group, stride 2 */
    {4, 4, 5, 4, 1, 1, 0, 4},  /* depthwise pointwise: no column buffer */
    {3, 6, 6, 6, 3, 1, 0, 3},  /* depthwise with a channel multiplier of 2 */
    {4, 6, 8, 4, 2, 2, 0, 2},  /* patches tile the input (kernel = stride): the tiled im2col path */
    {2, 7, 5, 4, 2, 2, 0, 1},  /* kernel = stride on odd sides: the last row and column fall off, general path */
};

/* The grouped convolution by its definition, in double, against the op's forward. */
static void check_grouped_direct(op_fixture *f, const conv_case *k, size_t m) {
    const snug_shape *out = &f->g->tensors[f->node->output].shape;
    const size_t cg = k->c / k->groups, og = k->co / k->groups, Ho = out->dims[1], Wo = out->dims[2];
    double *want = op_test_xmalloc(m * f->out_n * sizeof(double));
    f->c.m = m;
    f->op->forward(&f->c);
    for (size_t n = 0; n < m; n++)
        for (size_t o = 0; o < k->co; o++)
            for (size_t i = 0; i < Ho; i++)
                for (size_t j = 0; j < Wo; j++) {
                    double acc = f->w[1][o];
                    for (size_t c = 0; c < cg; c++)
                        for (size_t a = 0; a < k->k; a++)
                            for (size_t b = 0; b < k->k; b++) {
                                long ih = (long)(i * k->s + a) - (long)k->p, iw = (long)(j * k->s + b) - (long)k->p;
                                if (ih < 0 || iw < 0 || ih >= (long)k->h || iw >= (long)k->w) continue;
                                const size_t ci = o / og * cg + c; /* the input channel in o's group */
                                acc += (double)f->w[0][((o * cg + c) * k->k + a) * k->k + b] *
                                       f->x[0][((n * k->c + ci) * k->h + (size_t)ih) * k->w + (size_t)iw];
                            }
                    want[((n * k->co + o) * Ho + i) * Wo + j] = acc;
                }
    expect_close(f->y, want, m * f->out_n, 1e-5, "grouped conv2d output");
    free(want);
}

/* Group j of the grouped conv in f equals a plain conv of its input and output channel blocks: forward, input
 * gradient and both parameter gradients. */
static void check_against_groups(op_fixture *f, const conv_case *k, size_t m) {
    const size_t cg = k->c / k->groups, og = k->co / k->groups, hw = k->h * k->w;
    const size_t opix = f->out_n / k->co, wg = og * cg * k->k * k->k;
    f->c.m = m;
    op_fixture_analytic(f);
    for (size_t j = 0; j < k->groups; j++) {
        op_fixture r;
        op_fixture_init(&r, conv_g_graph(cg, k->h, k->w, og, k->k, k->s, k->p, 1), 1, m, 1, FILL_PLAIN, 5);
        for (size_t n = 0; n < m; n++) {
            memcpy(r.x[0] + n * cg * hw, f->x[0] + (n * k->c + j * cg) * hw, cg * hw * sizeof(float));
            memcpy(r.r + n * og * opix, f->r + (n * k->co + j * og) * opix, og * opix * sizeof(float));
        }
        memcpy(r.w[0], f->w[0] + j * wg, wg * sizeof(float));
        memcpy(r.w[1], f->w[1] + j * og, og * sizeof(float));
        op_fixture_analytic(&r);
        for (size_t n = 0; n < m; n++) {
            for (size_t i = 0; i < og * opix; i++)
                assert_float_equal(f->y[(n * k->co + j * og) * opix + i], r.y[n * og * opix + i], 1e-5f);
            for (size_t i = 0; i < cg * hw; i++)
                assert_float_equal(f->dx[0][(n * k->c + j * cg) * hw + i], r.dx[0][n * cg * hw + i], 1e-5f);
        }
        for (size_t i = 0; i < wg; i++) assert_float_equal(f->dw[0][j * wg + i], r.dw[0][i], 1e-4f);
        for (size_t i = 0; i < og; i++) assert_float_equal(f->dw[1][j * og + i], r.dw[1][i], 1e-4f);
        op_fixture_free(&r);
    }
}

static void test_conv2d_grouped_gradients(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof grouped_cases / sizeof grouped_cases[0]; i++) {
        const conv_case *k = &grouped_cases[i];
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            op_fixture_init(&f, conv_g_graph(k->c, k->h, k->w, k->co, k->k, k->s, k->p, k->groups), 1, m,
                            threads(), FILL_PLAIN, 100 * i + m);
            check_grouped_direct(&f, k, m);
            check_against_groups(&f, k, m);
            op_check_all(&f, m, 1e-2f, TOL_LINEAR);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    }
}

static void test_conv2d_grouped_shapes_and_costs(void **state) {
    (void)state;
    snug_graph *g = conv_g_graph(6, 7, 5, 4, 3, 2, 1, 2);
    const graph_node *n = &g->nodes[1];
    assert_int_equal(n->p.conv2d.groups, 2);
    const graph_param *w = &g->params[n->params[0]];
    assert_int_equal(w->shape.rank, 4);
    assert_int_equal(w->shape.dims[0], 4);
    assert_int_equal(w->shape.dims[1], 3); /* C / groups */
    assert_int_equal(w->fan_in, 27);       /* PyTorch: weight.size(1) * k * k */
    assert_int_equal(g->params[n->params[1]].fan_in, 27);
    assert_true(op_conv2d.flops(n) == 2.0 * 27 * 4 * 12); /* half the ungrouped convolution's */
    /* One column buffer for all groups (6*9 rows x 12 pixels, rounded to 64 bytes); partials of the grouped
     * weight (4 x 27) + bias (4), rounded, per thread. */
    assert_int_equal(op_conv2d.workspace_bytes(n, 3, 1), 2624);
    assert_int_equal(op_conv2d.workspace_bytes(n, 8, 4), 4 * (2624 + 448));
    snug_graph_free(g);
    /* groups = 1 is the plain convolution, node for node */
    g = conv_g_graph(3, 7, 5, 4, 3, 2, 1, 1);
    snug_graph *plain = snug_graph_new("t");
    snug_conv2d(plain, "conv", snug_input(plain, "x", 3, 7, 5), 4, 3, 2, 1);
    assert_memory_equal(&g->nodes[1].p.conv2d, &plain->nodes[1].p.conv2d, sizeof(conv2d_params));
    assert_int_equal(op_conv2d.workspace_bytes(&g->nodes[1], 8, 4),
                     op_conv2d.workspace_bytes(&plain->nodes[1], 8, 4));
    snug_graph_free(g);
    snug_graph_free(plain);
}

/* The sample-parallel path (per-thread partials) and the plain loop agree on a grouped convolution. */
static void test_conv2d_grouped_paths_agree(void **state) {
    (void)state;
    op_fixture par, seq;
    op_fixture_init(&par, conv_g_graph(8, 12, 11, 6, 3, 1, 1, 2), 1, 5, 3, FILL_PLAIN, 9);
    op_fixture_init(&seq, conv_g_graph(8, 12, 11, 6, 3, 1, 1, 2), 1, 5, 1, FILL_PLAIN, 9);
    op_fixture_analytic(&par);
    op_fixture_analytic(&seq);
    for (size_t i = 0; i < 5 * par.out_n; i++) assert_float_equal(par.y[i], seq.y[i], 1e-5f);
    for (size_t i = 0; i < 5 * par.in_n[0]; i++) assert_float_equal(par.dx[0][i], seq.dx[0][i], 1e-5f);
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < par.wn[p]; i++)
            assert_float_equal(par.dw[p][i], seq.dw[p][i], 1e-4f * (1.0f + fabsf(seq.dw[p][i])));
    op_fixture_free(&par);
    op_fixture_free(&seq);
}

/* ---- conv_transpose2d ------------------------------------------------------------------------------------ */

/* The transposed convolution by its definition, in double: every input pixel scatters its weighted kernel
 * into y; where dx is not NULL, the same pairs give the gradients of L = sum(y R): dx, dw (C, Co, k, k) and
 * db (Co) from the fixture's output weighting R. */
static void convt_direct_grads(const op_fixture *f, size_t m, double *y, double *dx, double *dw, double *db) {
    const conv2d_params *p = &f->node->p.conv2d;
    const snug_shape *in = &f->g->tensors[f->node->inputs[0]].shape, *out = &f->g->tensors[f->node->output].shape;
    const size_t C = in->dims[0], H = in->dims[1], W = in->dims[2], k = p->kernel;
    const size_t Co = out->dims[0], Ho = out->dims[1], Wo = out->dims[2];
    for (size_t n = 0; n < m; n++)
        for (size_t o = 0; o < Co; o++)
            for (size_t i = 0; i < Ho * Wo; i++) y[(n * Co + o) * Ho * Wo + i] = f->w[1][o];
    if (dx) {
        memset(dx, 0, m * C * H * W * sizeof *dx), memset(dw, 0, C * Co * k * k * sizeof *dw);
        memset(db, 0, Co * sizeof *db);
        for (size_t i = 0; i < m * Co * Ho * Wo; i++) db[i / (Ho * Wo) % Co] += f->r[i];
    }
    for (size_t n = 0; n < m; n++)
        for (size_t c = 0; c < C; c++)
            for (size_t i = 0; i < H; i++)
                for (size_t j = 0; j < W; j++)
                    for (size_t o = 0; o < Co; o++)
                        for (size_t a = 0; a < k; a++)
                            for (size_t b = 0; b < k; b++) {
                                long oy = (long)(i * p->stride + a) - (long)p->padding;
                                long ox = (long)(j * p->stride + b) - (long)p->padding;
                                if (oy < 0 || ox < 0 || oy >= (long)Ho || ox >= (long)Wo) continue;
                                const size_t yi = ((n * Co + o) * Ho + (size_t)oy) * Wo + (size_t)ox;
                                const size_t xi = ((n * C + c) * H + i) * W + j, wi = ((c * Co + o) * k + a) * k + b;
                                y[yi] += (double)f->x[0][xi] * f->w[0][wi];
                                if (dx) dx[xi] += (double)f->w[0][wi] * f->r[yi], dw[wi] += (double)f->x[0][xi] * f->r[yi];
                            }
}

static void convt_direct(const op_fixture *f, size_t m, double *y) { convt_direct_grads(f, m, y, NULL, NULL, NULL); }

static void check_convt_forward(op_fixture *f, size_t m) {
    double *want = op_test_xmalloc(m * f->out_n * sizeof(double));
    f->c.m = m;
    f->op->forward(&f->c);
    convt_direct(f, m, want);
    expect_close(f->y, want, m * f->out_n, 1e-5, "conv_transpose2d output");
    free(want);
}

typedef struct convt_case { size_t c, h, w, co, k, s, p; } convt_case;

static const convt_case convt_cases[] = {
    {3, 4, 3, 2, 2, 2, 0}, /* UNet's up-sampling: 2x2 stride 2, no overlap */
    {2, 3, 4, 3, 3, 2, 1}, /* overlapping patches, padding cropped */
    {2, 4, 4, 3, 3, 1, 1}, /* stride 1 same padding: the adjoint of a same conv */
    {3, 3, 5, 2, 1, 1, 0}, /* pointwise: no column buffer */
    {2, 3, 3, 2, 2, 3, 0}, /* stride larger than the kernel: output pixels no patch reaches hold the bias */
    {1, 2, 3, 2, 4, 2, 1}, /* kernel 4 stride 2 padding 1: the DCGAN up-sampler */
};

static void test_conv_transpose2d_gradients(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof convt_cases / sizeof convt_cases[0]; i++) {
        const convt_case *k = &convt_cases[i];
        for (size_t m = 1; m <= 3; m += 2) {
            op_fixture f;
            op_fixture_init(&f, convt_graph(k->c, k->h, k->w, k->co, k->k, k->s, k->p), 1, m, threads(),
                            FILL_PLAIN, 200 + 10 * i + m);
            check_convt_forward(&f, m);
            op_check_all(&f, m, 1e-2f, TOL_LINEAR);
            op_check_backward_adds(&f);
            op_fixture_free(&f);
        }
    }
}

static void test_conv_transpose2d_shapes_and_costs(void **state) {
    (void)state;
    snug_graph *g = convt_graph(3, 5, 4, 2, 3, 2, 1);
    const graph_node *n = &g->nodes[1];
    const snug_shape *out = &g->tensors[n->output].shape;
    assert_ptr_equal(n->op, &op_conv_transpose2d);
    assert_true(n->op->flags & OP_KEEPS_INPUT);
    assert_int_equal(out->rank, 3);
    assert_int_equal(out->dims[0], 2);
    assert_int_equal(out->dims[1], 9); /* (5 - 1) * 2 - 2 + 3 */
    assert_int_equal(out->dims[2], 7); /* (4 - 1) * 2 - 2 + 3 */
    const graph_param *w = &g->params[n->params[0]];
    assert_int_equal(w->shape.dims[0], 3); /* PyTorch's layout: (in, out, k, k) */
    assert_int_equal(w->shape.dims[1], 2);
    assert_int_equal(w->shape.dims[2], 3);
    assert_int_equal(w->fan_in, 18);       /* PyTorch: weight.size(1) * k * k = Co * k * k */
    assert_int_equal(w->init, INIT_KAIMING_UNIFORM);
    assert_int_equal(g->params[n->params[1]].shape.dims[0], 2);
    assert_int_equal(g->params[n->params[1]].fan_in, 18);
    assert_true(op_conv_transpose2d.flops(n) == 2.0 * 3 * 18 * 20);
    /* Column buffer (18 rows x 20 input pixels = 1440 bytes); partial dW (3 x 18) + db (2), rounded. */
    assert_int_equal(op_conv_transpose2d.workspace_bytes(n, 2, 1), 1472);
    assert_int_equal(op_conv_transpose2d.workspace_bytes(n, 8, 4), 4 * (1472 + 256));
    snug_graph_free(g);
    g = convt_graph(16, 8, 8, 8, 2, 2, 0); /* UNet: doubles the plane */
    out = &g->tensors[g->nodes[1].output].shape;
    assert_int_equal(out->dims[0], 8);
    assert_int_equal(out->dims[1], 16);
    assert_int_equal(out->dims[2], 16);
    snug_graph_free(g);
}

/* A non-overlapping up-sampling whose column matrix exceeds 8 MiB (64 rows x 200 x 200 pixels: 10 MiB) builds
 * it a block of input rows at a time (163 rows, then 37), in a workspace of one block: output and gradients
 * against the definition in double. */
static void test_conv_transpose2d_row_blocks(void **state) {
    (void)state;
    snug_graph *g = convt_graph(2, 200, 200, 16, 2, 2, 0);
    assert_true(op_conv_transpose2d.workspace_bytes(&g->nodes[1], 1, 1) <= ((size_t)8 << 20));
    op_fixture f;
    op_fixture_init(&f, g, 1, 2, threads(), FILL_PLAIN, 29);
    op_fixture_analytic(&f);
    const size_t yn = 2 * f.out_n, xn = 2 * f.in_n[0];
    double *y = op_test_xmalloc(yn * sizeof *y), *dx = op_test_xmalloc(xn * sizeof *dx);
    double *dw = op_test_xmalloc(f.wn[0] * sizeof *dw), *db = op_test_xmalloc(f.wn[1] * sizeof *db);
    convt_direct_grads(&f, 2, y, dx, dw, db);
    expect_close(f.y, y, yn, 1e-5, "blocked conv_transpose2d output");
    expect_close(f.dx[0], dx, xn, 1e-5, "blocked conv_transpose2d input gradient");
    expect_close(f.dw[0], dw, f.wn[0], 1e-4, "blocked conv_transpose2d weight gradient");
    expect_close(f.dw[1], db, f.wn[1], 1e-4, "blocked conv_transpose2d bias gradient");
    free(y), free(dx), free(dw), free(db);
    op_fixture_free(&f);
}

static snug_graph *large_convt_graph(void) { return convt_graph(2, 520, 520, 8, 3, 2, 1); }

/* An overlapping one (3x3 stride 2) keeps its matrix whole; where that exceeds LOWERING_SLOT_MAX (72 rows x
 * 520 x 520 pixels: 74 MiB) its samples run in turn on all threads: one buffer at m = 2 as at m = 1, no
 * partials, and 2 threads give the bits of 1 (the products' elements are one chain each whatever the threads). */
static void test_conv_transpose2d_large_sample_one_slot(void **state) {
    (void)state;
    op_expect_large_sample_one_slot(large_convt_graph, 23);
}

/* Per-thread partials, reduced in thread order, and the BLAS-threaded loop agree; the same thread count gives
 * the same bits. */
static void test_conv_transpose2d_paths_agree(void **state) {
    (void)state;
    op_fixture par, seq;
    op_fixture_init(&par, convt_graph(12, 9, 10, 6, 2, 2, 0), 1, 5, 3, FILL_PLAIN, 19);
    op_fixture_init(&seq, convt_graph(12, 9, 10, 6, 2, 2, 0), 1, 5, 1, FILL_PLAIN, 19);
    check_convt_forward(&seq, 5);
    op_fixture_analytic(&par);
    op_fixture_analytic(&seq);
    for (size_t i = 0; i < 5 * par.out_n; i++) assert_float_equal(par.y[i], seq.y[i], 1e-5f);
    for (size_t i = 0; i < 5 * par.in_n[0]; i++) assert_float_equal(par.dx[0][i], seq.dx[0][i], 1e-5f);
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < par.wn[p]; i++)
            assert_float_equal(par.dw[p][i], seq.dw[p][i], 1e-4f * (1.0f + fabsf(seq.dw[p][i])));
    float *first = op_test_xmalloc(par.wn[0] * sizeof(float));
    memcpy(first, par.dw[0], par.wn[0] * sizeof(float));
    op_fixture_analytic(&par);
    assert_memory_equal(first, par.dw[0], par.wn[0] * sizeof(float));
    free(first);
    op_fixture_free(&par);
    op_fixture_free(&seq);
}

/* ---- concat ---------------------------------------------------------------------------------------------- */

static void check_concat(snug_graph *g, int node, size_t m, uint64_t seed) {
    op_fixture f;
    op_fixture_init(&f, g, node, m, threads(), FILL_PLAIN, seed);
    f.op->forward(&f.c);
    const size_t an = f.in_n[0], bn = f.in_n[1];
    assert_int_equal(f.out_n, an + bn);
    for (size_t n = 0; n < m; n++) {
        assert_memory_equal(f.y + n * (an + bn), f.x[0] + n * an, an * sizeof(float));
        assert_memory_equal(f.y + n * (an + bn) + an, f.x[1] + n * bn, bn * sizeof(float));
    }
    op_check_all(&f, m, 1e-2f, TOL_LINEAR);
    op_check_backward_adds(&f);
    op_fixture_free(&f);
}

static void test_concat_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        /* channels: (3, 4, 5) + (2, 4, 5) */
        snug_graph *g = snug_graph_new("t");
        snug_tensor x = snug_input(g, "x", 3, 4, 5);
        snug_tensor c = snug_concat(g, "cat", x, snug_conv2d(g, "conv", x, 2, 1, 1, 0));
        assert_int_equal(snug_tensor_shape(g, c).dims[0], 5);
        assert_int_equal(snug_tensor_shape(g, c).dims[1], 4);
        check_concat(g, 2, m, 400 + m);
        /* rank 1: (6) + (4) */
        g = snug_graph_new("t");
        snug_tensor f = snug_flatten(g, "flat", snug_input(g, "x", 6, 1, 1));
        snug_concat(g, "cat", f, snug_linear(g, "fc", f, 4));
        check_concat(g, 3, m, 410 + m);
        /* rank 2: (3, 4) + (6, 4) */
        snug_tensor e;
        g = token_graph(3, 7, 4, &e);
        c = snug_concat(g, "cat", e, snug_concat(g, "twice", e, e));
        assert_int_equal(snug_tensor_shape(g, c).rank, 2);
        assert_int_equal(snug_tensor_shape(g, c).dims[0], 9);
        check_concat(g, 4, m, 420 + m);
    }
}

/* concat(x, x): one input tensor, one gradient buffer receiving both halves. */
static void test_concat_same_tensor(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", 2, 3, 3);
    snug_concat(g, "cat", x, x);
    op_fixture f;
    op_fixture_init(&f, g, 1, 3, threads(), FILL_PLAIN, 7);
    assert_int_equal(f.owner[1], 0);
    op_check_all(&f, 3, 1e-2f, TOL_LINEAR);
    op_fixture_analytic(&f);
    for (size_t n = 0; n < 3; n++)
        for (size_t i = 0; i < 18; i++)
            assert_float_equal(f.dx[0][n * 18 + i], f.r[n * 36 + i] + f.r[n * 36 + 18 + i], 1e-6f);
    op_fixture_free(&f);
}

/* Large enough for the blocked parallel copies, with one sample (a big image at m = 1) and with several. */
static void test_concat_large(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_graph *g = snug_graph_new("t");
        snug_tensor x = snug_input(g, "x", 5, 64, 61);
        snug_concat(g, "cat", snug_conv2d(g, "conv", x, 3, 1, 1, 0), x);
        op_fixture f;
        op_fixture_init(&f, g, 2, m, threads(), FILL_PLAIN, 70 + m);
        op_fixture_analytic(&f);
        const size_t an = f.in_n[0], bn = f.in_n[1], on = an + bn;
        for (size_t n = 0; n < m; n++) {
            assert_memory_equal(f.y + n * on, f.x[0] + n * an, an * sizeof(float));
            assert_memory_equal(f.y + n * on + an, f.x[1] + n * bn, bn * sizeof(float));
            assert_memory_equal(f.dx[0] + n * an, f.r + n * on, an * sizeof(float));
            assert_memory_equal(f.dx[1] + n * bn, f.r + n * on + an, bn * sizeof(float));
        }
        op_fixture_free(&f);
    }
}

/* ---- global_avgpool -------------------------------------------------------------------------------------- */

static void test_global_avgpool(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_graph *g = snug_graph_new("t");
        snug_tensor y = snug_global_avgpool(g, "gap", snug_input(g, "x", 3, 5, 7));
        assert_int_equal(snug_tensor_shape(g, y).rank, 1);
        assert_int_equal(snug_tensor_shape(g, y).dims[0], 3);
        op_fixture f;
        op_fixture_init(&f, g, 1, m, threads(), FILL_PLAIN, 500 + m);
        assert_true(f.op->flops(f.node) == 105.0);
        f.op->forward(&f.c);
        for (size_t p = 0; p < 3 * m; p++) {
            double s = 0;
            for (size_t i = 0; i < 35; i++) s += f.x[0][p * 35 + i];
            assert_float_equal(f.y[p], s / 35, 1e-6);
        }
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
    /* the parallel path: 64 planes of 32x32 */
    snug_graph *g = snug_graph_new("t");
    snug_global_avgpool(g, "gap", snug_input(g, "x", 16, 32, 32));
    op_fixture f;
    op_fixture_init(&f, g, 1, 4, threads(), FILL_PLAIN, 17);
    op_fixture_analytic(&f);
    for (size_t p = 0; p < 64; p++) {
        double s = 0;
        for (size_t i = 0; i < 1024; i++) s += f.x[0][p * 1024 + i];
        assert_float_equal(f.y[p], s / 1024, 1e-6);
        for (size_t i = 0; i < 1024; i++) assert_float_equal(f.dx[0][p * 1024 + i], f.r[p] / 1024.0f, 1e-9f);
    }
    op_fixture_free(&f);
}

/* ---- gelu ------------------------------------------------------------------------------------------------ */

static void test_gelu(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_graph *g = snug_graph_new("t");
        snug_gelu(g, "act", snug_input(g, "x", 2, 3, 5));
        op_fixture f;
        op_fixture_init(&f, g, 1, m, threads(), FILL_PLAIN, 600 + m);
        assert_true(f.op->flags & OP_KEEPS_INPUT);
        assert_true(f.op->flags & OP_ELEMENTWISE);
        assert_false(f.op->flags & OP_KEEPS_OUTPUT);
        for (size_t i = 0; i < m * 30; i++) f.x[0][i] *= 3.0f; /* both tails and the dip near -0.75 */
        op_check_all(&f, m, 1e-3f, TOL_CURVED);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

/* Known values of x Phi(x), and the parallel path against the formula in double. */
static void test_gelu_values(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_gelu(g, "act", snug_input(g, "x", 4, 100, 100));
    op_fixture f;
    op_fixture_init(&f, g, 1, 2, threads(), FILL_PLAIN, 61);
    const float known_x[] = {0.0f, 1.0f, -1.0f, 2.0f, -3.0f, 10.0f, -10.0f};
    const double known_y[] = {0.0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416,
                              -0.004049694771835, 10.0, 0.0};
    for (size_t i = 0; i < sizeof known_x / sizeof known_x[0]; i++) f.x[0][i] = known_x[i];
    for (size_t i = 0; i < 2 * f.out_n; i++) f.x[0][i] *= i < 7 ? 1.0f : 4.0f;
    op_fixture_analytic(&f);
    for (size_t i = 0; i < sizeof known_x / sizeof known_x[0]; i++)
        assert_float_equal(f.y[i], known_y[i], 1e-6 * (1 + fabs(known_y[i])));
    for (size_t i = 0; i < 2 * f.out_n; i++) {
        double x = f.x[0][i], cdf = 0.5 * (1 + erf(x / sqrt(2.0)));
        double want_y = x * cdf, want_d = f.r[i] * (cdf + x * exp(-0.5 * x * x) / sqrt(2 * 3.14159265358979323846));
        assert_float_equal(f.y[i], want_y, 2e-6 * (1 + fabs(want_y)));
        assert_float_equal(f.dx[0][i], want_d, 2e-6 * (1 + fabs(want_d)));
    }
    op_fixture_free(&f);
}

/* Backward's other ways of reading and writing, each against the plain call bit for bit (bf16-valued inputs, as
 * in a bf16 run): x from its packed copy (op_call.in_packed, in[0] NULL), adding into a gradient or writing it
 * fresh; and dx written over dy itself (OP_GRAD_IN_PLACE, fresh). 80,000 elements: the parallel chunks, and
 * spans that end inside the unpacking blocks. */
static void test_gelu_packed_and_in_place(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_gelu(g, "act", snug_input(g, "x", 4, 100, 100));
    op_fixture f;
    op_fixture_init(&f, g, 1, 2, threads(), FILL_PLAIN, 62);
    assert_true(f.op->flags & OP_READS_PACKED);
    assert_true(f.op->flags & OP_GRAD_IN_PLACE);
    const size_t n = 2 * f.out_n;
    bf16 *packed = op_test_xmalloc(n * sizeof *packed);
    float *want = op_test_xmalloc(n * sizeof *want), *got = op_test_xmalloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) f.x[0][i] = bf16_round(4.0f * f.x[0][i]);
    bf16_pack(packed, f.x[0], n);
    op_expect_packed_input_same_bits(&f, packed, want, got, n, 0.25f);
    op_call c = f.c; /* in place: dx over a copy of dy */
    memcpy(got, f.r, n * sizeof *got);
    c.din_fresh = 1u;
    c.din[0] = got;
    c.dout = got;
    f.op->backward(&c);
    assert_memory_equal(got, want, n * sizeof *got);
    op_expect_packed_regen_same_bits(&f, packed, want, got);
    free(packed);
    free(want);
    free(got);
    op_fixture_free(&f);
}

/* GELU's formula one element at a time in the baseline instruction set: the reference the op's vectorised loops
 * (the widest clone this CPU has, erf's exp form only over the gathered outliers) must match bit for bit. */
__attribute__((noinline)) static float gelu_scalar(float x) {
    return 0.5f * x * (1.0f + vm_erff(x * 0.70710678118654752440f));
}

__attribute__((noinline)) static float gelu_slope_scalar(float x) {
    const float cdf = 0.5f * (1.0f + vm_erff(x * 0.70710678118654752440f));
    return cdf + x * (0.39894228040143267794f * vm_expf(-0.5f * x * x));
}

/* Inputs that exercise every way through the gathering of outliers: whole vectors near 0 (|x| < sqrt 2), one
 * outlier at each lane, values at the switch itself, the tails, NaN and infinities, vectors mixed or all beyond,
 * and stages and a tail shorter than a vector (59,994 elements in parallel chunks); forward, backward adding and
 * backward fresh, bit for bit (natively, and through the portable gathering in test_ops_zoo_a_portable). */
/* The same bits, or NaN for NaN (a NaN's payload is the compiler's choice of operand order). */
static void expect_same_bits(float got, float want) {
    if (isnan(want)) assert_true(isnan(got));
    else assert_memory_equal(&got, &want, sizeof want);
}

static void test_gelu_outliers_bitwise(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_gelu(g, "act", snug_input(g, "x", 3, 99, 101));
    op_fixture f;
    op_fixture_init(&f, g, 1, 2, threads(), FILL_PLAIN, 63);
    const size_t n = 2 * f.out_n;
    const float edge = nextafterf(sqrtf(2.0f), 0.0f), special[] = {1.4142135f, -1.4142135f, 1.4142137f, edge, -edge,
                                                                  NAN, INFINITY, -INFINITY, 6.0f, -6.0f, 40.0f};
    for (size_t i = 0; i < n; i++) {
        const size_t block = i / 16;
        float x = 0.45f * f.x[0][i]; /* near 0 */
        if (block % 3 == 1 && i % 16 == block % 16) x = special[block % (sizeof special / sizeof special[0])];
        if (block % 3 == 2) x = 3.0f * f.x[0][i]; /* mixed */
        f.x[0][i] = x;
    }
    f.op->forward(&f.c);
    for (size_t i = 0; i < n; i++) {
        expect_same_bits(f.y[i], gelu_scalar(f.x[0][i]));
    }
    float *got = op_test_xmalloc(n * sizeof *got);
    for (int fresh = 0; fresh <= 1; fresh++) {
        for (size_t i = 0; i < n; i++) got[i] = fresh ? NAN : 0.25f * f.r[i];
        op_call c = f.c;
        c.din_fresh = fresh ? 1u : 0u;
        c.din[0] = got;
        f.op->backward(&c);
        for (size_t i = 0; i < n; i++) {
            const float want = (fresh ? 0.0f : 0.25f * f.r[i]) + f.r[i] * gelu_slope_scalar(f.x[0][i]);
            expect_same_bits(got[i], want);
        }
    }
    free(got);
    op_fixture_free(&f);
}

/* Every bfloat16 bit pattern as GELU's input, in each way a bf16 run reads it packed (the looked-up paths): the
 * forward writing only packed, and rounding into out with a packed copy; a consumer's regeneration; backward
 * with float32 gradients, and with bfloat16 gradients (dx over dy's memory too), adding and fresh: each bit for
 * bit the scalar formula's rounded as the float32 path rounds it (NaN for NaN). */
static void expect_bf16_same_bits(bf16 got, float want) {
    expect_same_bits(bf16_to_float(got), bf16_round(want));
}

static void test_gelu_bf16_patterns_bitwise(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_gelu(g, "act", snug_input(g, "x", 4, 128, 128));
    op_fixture f;
    op_fixture_init(&f, g, 1, 1, threads(), FILL_PLAIN, 64);
    const size_t n = f.out_n;
    assert_int_equal(n, (size_t)1 << 16);
    bf16 *x = op_test_xmalloc(n * sizeof *x), *y16 = op_test_xmalloc(n * sizeof *y16);
    bf16 *dy16 = op_test_xmalloc(n * sizeof *dy16), *dx16 = op_test_xmalloc(n * sizeof *dx16);
    float *got = op_test_xmalloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) x[i] = (bf16)i, dy16[i] = bf16_from_float(f.r[i]);
    op_call c = f.c;
    c.bf16 = true, c.in[0] = NULL, c.packed.in[0] = x, c.out = NULL, c.packed.out = y16;
    f.op->forward(&c);
    for (size_t i = 0; i < n; i++) expect_bf16_same_bits(y16[i], gelu_scalar(bf16_to_float(x[i])));
    memset(y16, 0, n * sizeof *y16);
    c.out = f.y, c.packed.out = NULL, c.packed.round = true, c.packed.copy = y16;
    f.op->forward(&c);
    for (size_t i = 0; i < n; i++) {
        expect_bf16_same_bits(y16[i], gelu_scalar(bf16_to_float(x[i])));
        expect_same_bits(f.y[i], bf16_round(gelu_scalar(bf16_to_float(x[i]))));
    }
    c = f.c;
    c.bf16 = true, c.in[0] = NULL, c.in_packed = x;
    for (size_t t = 0; t < 3; t++) f.op->regen(&c, 0, got, t, 3);
    for (size_t i = 0; i < n; i++) expect_same_bits(got[i], bf16_round(gelu_scalar(bf16_to_float(x[i]))));
    for (int fresh = 0; fresh <= 1; fresh++) {
        for (size_t i = 0; i < n; i++) got[i] = fresh ? NAN : 0.25f * f.r[i];
        c.din_fresh = fresh ? 1u : 0u, c.din[0] = got, c.dout = f.r;
        f.op->backward(&c);
        for (size_t i = 0; i < n; i++)
            expect_same_bits(got[i], (fresh ? 0.0f : 0.25f * f.r[i]) + f.r[i] * gelu_slope_scalar(bf16_to_float(x[i])));
        for (int in_place = 0; in_place <= fresh; in_place++) {
            bf16 *dx = in_place ? dy16 : dx16;
            for (size_t i = 0; i < n; i++) dx[i] = fresh ? 0x7FC1 : bf16_from_float(0.25f * f.r[i]);
            if (in_place)
                for (size_t i = 0; i < n; i++) dy16[i] = bf16_from_float(f.r[i]);
            c.din[0] = NULL, c.dout = NULL, c.grads = (op_packed_grads){.dout = dy16, .din = {dx}};
            f.op->backward(&c);
            c.grads = (op_packed_grads){0};
            for (size_t i = 0; i < n; i++) {
                const float dy = bf16_round(f.r[i]), earlier = fresh ? 0.0f : bf16_round(0.25f * f.r[i]);
                expect_bf16_same_bits(dx[i], earlier + dy * gelu_slope_scalar(bf16_to_float(x[i])));
            }
        }
    }
    free(x), free(y16), free(dy16), free(dx16), free(got);
    op_fixture_free(&f);
}

/* ---- linear over (tokens, features) ---------------------------------------------------------------------- */

static void test_linear_tokens(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_tensor e;
        snug_graph *g = token_graph(3, 11, 5, &e);
        snug_tensor y = snug_linear(g, "fc", e, 4);
        const snug_shape s = snug_tensor_shape(g, y);
        assert_int_equal(s.rank, 2);
        assert_int_equal(s.dims[0], 3);
        assert_int_equal(s.dims[1], 4);
        op_fixture f;
        op_fixture_init(&f, g, 3, m, threads(), FILL_PLAIN, 700 + m);
        assert_int_equal(f.g->params[f.node->params[0]].shape.dims[0], 4);
        assert_int_equal(f.g->params[f.node->params[0]].shape.dims[1], 5);
        assert_int_equal(f.g->params[f.node->params[0]].fan_in, 5);
        assert_true(f.op->flops(f.node) == 2.0 * 3 * 5 * 4);
        f.op->forward(&f.c);
        for (size_t r = 0; r < 3 * m; r++)
            for (size_t o = 0; o < 4; o++) {
                double want = f.w[1][o];
                for (size_t j = 0; j < 5; j++) want += (double)f.w[0][o * 5 + j] * f.x[0][r * 5 + j];
                assert_float_equal(f.y[r * 4 + o], want, 1e-5);
            }
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

/* Big enough for the parallel bias loops: forward and all gradients against direct sums. */
static void test_linear_tokens_large(void **state) {
    (void)state;
    snug_tensor e;
    snug_graph *g = token_graph(64, 5, 9, &e);
    snug_linear(g, "fc", e, 600);
    op_fixture f;
    op_fixture_init(&f, g, 3, 2, threads(), FILL_PLAIN, 71);
    op_fixture_analytic(&f);
    const size_t rows = 128, fi = 9, fo = 600;
    double *y = op_test_xmalloc(rows * fo * sizeof(double)), *db = op_test_xmalloc(fo * sizeof(double));
    double *dw = op_test_xmalloc(fo * fi * sizeof(double)), *dx = op_test_xmalloc(rows * fi * sizeof(double));
    memset(db, 0, fo * sizeof(double));
    memset(dw, 0, fo * fi * sizeof(double));
    memset(dx, 0, rows * fi * sizeof(double));
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < fo; o++) {
            const double d = f.r[r * fo + o];
            y[r * fo + o] = f.w[1][o];
            db[o] += d;
            for (size_t j = 0; j < fi; j++) {
                y[r * fo + o] += (double)f.w[0][o * fi + j] * f.x[0][r * fi + j];
                dw[o * fi + j] += d * f.x[0][r * fi + j];
                dx[r * fi + j] += d * f.w[0][o * fi + j];
            }
        }
    expect_close(f.y, y, rows * fo, 1e-5, "linear output");
    expect_close(f.dw[1], db, fo, 1e-5, "linear bias gradient");
    expect_close(f.dw[0], dw, fo * fi, 1e-5, "linear weight gradient");
    expect_close(f.dx[0], dx, rows * fi, 1e-5, "linear input gradient");
    free(y), free(db), free(dw), free(dx);
    op_fixture_free(&f);
}

/* ---- embedding ------------------------------------------------------------------------------------------- */

static void test_embedding_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_tensor e;
        snug_graph *g = token_graph(5, 4, 3, &e); /* 5 tokens from a vocab of 4: repeats */
        const snug_shape s = snug_tensor_shape(g, e);
        assert_int_equal(s.rank, 2);
        assert_int_equal(s.dims[0], 5);
        assert_int_equal(s.dims[1], 3);
        op_fixture f;
        op_fixture_init(&f, g, 2, m, threads(), FILL_PLAIN, 800 + m);
        fill_ids(&f, 4, 800 + m);
        f.op->forward(&f.c);
        for (size_t r = 0; r < 5 * m; r++)
            assert_memory_equal(f.y + r * 3, f.w[0] + (size_t)f.x[0][r] * 3, 3 * sizeof(float));
        /* The ids' "gradient" stays zero: a step of 1e-2 rounds back to the same id, and din is not touched. */
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

static void test_embedding_table(void **state) {
    (void)state;
    snug_tensor e;
    snug_graph *g = token_graph(7, 50257, 48, &e);
    const graph_node *n = &g->nodes[2];
    assert_ptr_equal(n->op, &op_embedding);
    assert_int_equal(n->n_params, 1);
    const graph_param *w = &g->params[n->params[0]];
    assert_string_equal(w->name, "wte.weight");
    assert_int_equal(w->shape.dims[0], 50257);
    assert_int_equal(w->shape.dims[1], 48);
    assert_int_equal(w->init, INIT_KAIMING_UNIFORM);
    /* U(-b, b) with b = 1/sqrt(fan_in): standard deviation b/sqrt(3) = 0.02, GPT-2's */
    const double std = 1.0 / sqrt((double)w->fan_in) / sqrt(3.0);
    assert_true(fabs(std - 0.02) < 1e-5);
    assert_true(n->op->flags & OP_KEEPS_INPUT);
    assert_int_equal(n->op->saved_bytes(n), 0);
    assert_int_equal(n->op->workspace_bytes(n, 8, 4), 0);
    snug_graph_free(g);
}

/* Ids outside [0, vocab) (and NaN) read nothing, give a zero row and no gradient; din is never written. */
static void test_embedding_bad_ids(void **state) {
    (void)state;
    snug_tensor e;
    snug_graph *g = token_graph(8, 5, 4, &e);
    op_fixture f;
    op_fixture_init(&f, g, 2, 1, threads(), FILL_PLAIN, 9);
    const float ids[8] = {-1.0f, 5.0f, 2.0f, NAN, 1e9f, -0.6f, 4.0f, 4.4f};
    const long row[8] = {-1, -1, 2, -1, -1, -1, 4, 4}; /* 4.4 rounds to 4, -0.6 to -1 */
    memcpy(f.x[0], ids, sizeof ids);
    for (size_t i = 0; i < 8; i++) f.dx[0][i] = 123.0f;
    f.op->forward(&f.c);
    memset(f.dw[0], 0, f.wn[0] * sizeof(float));
    f.op->backward(&f.c);
    double dw[20] = {0};
    for (size_t t = 0; t < 8; t++) {
        for (size_t d = 0; d < 4; d++) {
            const float want = row[t] < 0 ? 0.0f : f.w[0][(size_t)row[t] * 4 + d];
            assert_true(f.y[t * 4 + d] == want);
            if (row[t] >= 0) dw[(size_t)row[t] * 4 + d] += f.r[t * 4 + d];
        }
        assert_true(f.dx[0][t] == 123.0f);
    }
    expect_close(f.dw[0], dw, 20, 1e-6, "embedding gradient");
    op_fixture_free(&f);
}

/* Many tokens and a wide table: the column-parallel scatter equals a serial one bit for bit. */
static void test_embedding_large(void **state) {
    (void)state;
    snug_tensor e;
    snug_graph *g = token_graph(64, 37, 160, &e);
    op_fixture f;
    op_fixture_init(&f, g, 2, 4, threads(), FILL_PLAIN, 91);
    fill_ids(&f, 37, 91);
    op_fixture_analytic(&f);
    float *dw = op_test_xmalloc(f.wn[0] * sizeof(float));
    memset(dw, 0, f.wn[0] * sizeof(float));
    for (size_t r = 0; r < 4 * 64; r++) {
        const size_t id = (size_t)f.x[0][r];
        assert_memory_equal(f.y + r * 160, f.w[0] + id * 160, 160 * sizeof(float));
        for (size_t d = 0; d < 160; d++) dw[id * 160 + d] += f.r[r * 160 + d];
    }
    assert_memory_equal(f.dw[0], dw, f.wn[0] * sizeof(float));
    free(dw);
    op_fixture_free(&f);
}

/* ---- position embedding ---------------------------------------------------------------------------------- */

static snug_graph *position_graph(size_t t, size_t dim, size_t max_len) {
    snug_tensor e;
    snug_graph *g = token_graph(t, 9, dim, &e);
    snug_position_embedding(g, "wpe", e, max_len);
    return g; /* node 3 */
}

static void test_position_embedding_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        op_fixture_init(&f, position_graph(3, 5, 7), 3, m, threads(), FILL_PLAIN, 900 + m);
        const graph_param *w = &f.g->params[f.node->params[0]];
        assert_string_equal(w->name, "wpe.weight");
        assert_int_equal(w->shape.dims[0], 7);
        assert_int_equal(w->shape.dims[1], 5);
        assert_int_equal(w->fan_in, f.g->params[f.g->nodes[2].params[0]].fan_in); /* initialised alike */
        assert_true(f.op->flags & OP_ELEMENTWISE);
        assert_true(f.op->flags & OP_GRAD_PASSTHROUGH);
        assert_false(f.op->flags & (OP_KEEPS_INPUT | OP_KEEPS_OUTPUT));
        f.op->forward(&f.c);
        for (size_t n = 0; n < m; n++)
            for (size_t i = 0; i < 15; i++) assert_true(f.y[n * 15 + i] == f.x[0][n * 15 + i] + f.w[0][i]);
        /* rows T.. of the table get no gradient: op_check_all checks all 7 rows */
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        for (size_t i = 15; i < 35; i++) assert_true(f.dw[0][i] == 0.0f);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

/* In place (out = in) and with the input gradient on dout's memory (the planner's pass-through): dout is left
 * alone, and the table's gradient is the sum over samples, bit for bit as a serial sum, in the parallel path. */
static void test_position_embedding_in_place(void **state) {
    (void)state;
    const size_t m = 5, n = 64 * 130;
    op_fixture f;
    op_fixture_init(&f, position_graph(64, 130, 100), 3, m, threads(), FILL_PLAIN, 31);
    float *want = op_test_xmalloc(m * n * sizeof(float)), *r = op_test_xmalloc(m * n * sizeof(float));
    for (size_t i = 0; i < m * n; i++) want[i] = f.x[0][i] + f.w[0][i % n];
    memcpy(r, f.r, m * n * sizeof(float));
    f.c.out = f.x[0];
    f.op->forward(&f.c);
    assert_memory_equal(f.x[0], want, m * n * sizeof(float));
    f.c.din[0] = (float *)f.c.dout;
    memset(f.dw[0], 0, f.wn[0] * sizeof(float));
    f.op->backward(&f.c);
    assert_memory_equal(f.r, r, m * n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float s = 0.0f;
        for (size_t k = 0; k < m; k++) s += r[k * n + i];
        assert_true(f.dw[0][i] == s);
    }
    free(want);
    free(r);
    op_fixture_free(&f);
}

/* ---- tied linear head ------------------------------------------------------------------------------------ */

/* tokens (T) -> wte (T, D) -> fc (T, D) -> head = fc W_wte^T (T, vocab): nodes 2 (wte), 3 (fc), 4 (head). */
static snug_graph *tied_graph(size_t t, size_t vocab, size_t dim) {
    snug_tensor e;
    snug_graph *g = token_graph(t, vocab, dim, &e);
    snug_linear_tied(g, "head", snug_linear(g, "fc", e, dim), "wte");
    return g;
}

static void test_linear_tied_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_graph *g = tied_graph(3, 7, 5);
        const graph_node *head = &g->nodes[4], *wte = &g->nodes[2];
        assert_ptr_equal(head->op, &op_linear_tied);
        assert_int_equal(head->n_params, 1);
        assert_int_equal(head->params[0], wte->params[0]); /* the embedding's weight itself */
        assert_int_equal(g->n_params, 3);                   /* wte.weight, fc.weight, fc.bias: nothing new */
        const snug_shape s = snug_tensor_shape(g, head->output);
        assert_int_equal(s.rank, 2);
        assert_int_equal(s.dims[0], 3);
        assert_int_equal(s.dims[1], 7);
        assert_true(op_linear_tied.flops(head) == 2.0 * 3 * 5 * 7);
        op_fixture f;
        op_fixture_init(&f, g, 4, m, threads(), FILL_PLAIN, 1000 + m);
        f.op->forward(&f.c);
        for (size_t r = 0; r < 3 * m; r++)
            for (size_t v = 0; v < 7; v++) {
                double want = 0;
                for (size_t j = 0; j < 5; j++) want += (double)f.w[0][v * 5 + j] * f.x[0][r * 5 + j];
                assert_float_equal(f.y[r * 7 + v], want, 1e-5);
            }
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

/* The embedding and the head bound to one table and one gradient, as the executor binds shared parameters:
 * the gradient receives the embedding's scatter and the head's dy^T x. */
static void test_linear_tied_shares_gradient(void **state) {
    (void)state;
    const size_t T = 4, V = 6, D = 3, m = 2;
    snug_graph *g = tied_graph(T, V, D);
    const graph_node *wte = &g->nodes[2], *head = &g->nodes[4];
    float w[6 * 3], dw[6 * 3] = {0}, ids[2 * 4], e[2 * 4 * 3], de[2 * 4 * 3], x[2 * 4 * 3], dx[2 * 4 * 3] = {0};
    float y[2 * 4 * 6], dy[2 * 4 * 6];
    uint64_t s = 5;
    op_test_fill_sym(w, V * D, &s);
    op_test_fill_sym(x, m * T * D, &s);
    op_test_fill_sym(de, m * T * D, &s);
    op_test_fill_sym(dy, m * T * V, &s);
    for (size_t i = 0; i < m * T; i++) ids[i] = (float)(op_test_rng_next(&s) % V);
    op_call ce = {.node = wte, .m = m, .threads = 1, .in = {ids}, .out = e, .dout = de, .w = {w},
                  .dw = {dw}};
    op_call ch = {.node = head, .m = m, .threads = 1, .in = {x}, .out = y, .din = {dx}, .dout = dy,
                  .w = {w}, .dw = {dw}};
    op_embedding.forward(&ce);
    op_linear_tied.forward(&ch);
    op_linear_tied.backward(&ch);
    op_embedding.backward(&ce);
    double want[6 * 3] = {0};
    for (size_t r = 0; r < m * T; r++)
        for (size_t d = 0; d < D; d++) {
            want[(size_t)ids[r] * D + d] += de[r * D + d];       /* the embedding's scatter */
            for (size_t v = 0; v < V; v++) want[v * D + d] += (double)dy[r * V + v] * x[r * D + d]; /* head's */
        }
    expect_close(dw, want, V * D, 1e-5, "shared gradient");
    snug_graph_free(g);
}

/* ---- shape errors through the builders ------------------------------------------------------------------- */

static void test_shape_errors(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_conv2d_grouped(g, "g1", snug_input(g, "x", 6, 5, 5), 4, 3, 1, 1, 4);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"conv2d", "'g1'", "groups 4", "6", "(6, 5, 5)", NULL});
    g = snug_graph_new("t");
    snug_conv2d_grouped(g, "g1", snug_input(g, "x", 6, 5, 5), 4, 3, 1, 1, 3);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"conv2d", "'g1'", "groups 3", "output channels 4", NULL});
    g = snug_graph_new("t");
    snug_conv2d_grouped(g, "g1", snug_input(g, "x", 6, 5, 5), 4, 3, 1, 1, 0);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"conv2d", "'g1'", "groups 0", NULL});

    g = snug_graph_new("t");
    snug_conv_transpose2d(g, "up", snug_input(g, "x", 2, 1, 1), 3, 2, 1, 1);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"conv_transpose2d", "'up'", "padding 1", "(2, 1, 1)",
                                                           "kernel 2", NULL});
    g = snug_graph_new("t");
    snug_conv_transpose2d(g, "up", snug_flatten(g, "f", snug_input(g, "x", 2, 3, 3)), 3, 2, 2, 0);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"conv_transpose2d", "'up'", "(18)", NULL});
    g = snug_graph_new("t");
    snug_conv_transpose2d(g, "up", snug_input(g, "x", 2, 3, 3), 3, 2, 0, 0);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"conv_transpose2d", "'up'", "stride 0", NULL});

    g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", 2, 8, 8);
    snug_concat(g, "skip", x, snug_maxpool2d(g, "pool", x, 2, 2));
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"concat", "'skip'", "(2, 8, 8)", "(2, 4, 4)", NULL});
    g = snug_graph_new("t");
    x = snug_input(g, "x", 2, 8, 8);
    snug_concat(g, "skip", x, snug_flatten(g, "f", x));
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"concat", "'skip'", "(2, 8, 8)", "(128)", NULL});

    g = snug_graph_new("t");
    snug_global_avgpool(g, "gap", snug_flatten(g, "f", snug_input(g, "x", 2, 3, 3)));
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"global_avgpool", "'gap'", "(18)", NULL});

    g = snug_graph_new("t");
    snug_linear(g, "fc1", snug_input(g, "x", 32, 7, 7), 10);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"linear 'fc1': expects (features) or (tokens, features), "
                                                           "got (32, 7, 7): add a flatten", NULL});

    g = snug_graph_new("t");
    snug_embedding(g, "wte", snug_input(g, "tok", 4, 2, 2), 10, 8);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"embedding", "'wte'", "(4, 2, 2)", "flatten", NULL});
    g = snug_graph_new("t");
    snug_embedding(g, "wte", snug_flatten(g, "f", snug_input(g, "tok", 4, 1, 1)), 0, 8);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"embedding", "'wte'", "vocab 0", NULL});
    g = snug_graph_new("t");
    snug_embedding(g, "wte", snug_flatten(g, "f", snug_input(g, "tok", 4, 1, 1)), ((size_t)1 << 24) + 1, 8);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"embedding", "'wte'", "16777217", NULL});

    snug_tensor e;
    g = token_graph(5, 10, 4, &e);
    snug_position_embedding(g, "wpe", e, 3);
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"position_embedding", "'wpe'", "(5, 4)", "max_len 3",
                                                           NULL});

    g = token_graph(5, 10, 4, &e);
    snug_linear_tied(g, "head", e, "wtf");
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"linear_tied", "'head'", "no layer 'wtf'", NULL});
    g = token_graph(5, 10, 4, &e);
    snug_linear_tied(g, "head", snug_linear(g, "fc", e, 4), "fc");
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"linear_tied", "'head'", "'fc' is a linear", NULL});
    g = token_graph(5, 10, 4, &e);
    snug_linear_tied(g, "head", snug_linear(g, "fc", e, 6), "wte");
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"linear_tied", "'head'", "(5, 6)", "'wte.weight' (10, 4)",
                                                           NULL});
    g = token_graph(5, 10, 4, &e);
    snug_linear_tied(g, "wte", e, "wte");
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"'wte' is used twice", NULL});
}

/* ---- inside real graphs, through the trainer --------------------------------------------------------------- */

#define E2E_SAMPLES 8

/* A small UNet-like classifier of every image op: grouped conv, gelu, a strided conv down, a transposed conv up,
 * a skip concatenation, a pointwise conv, global average pooling and a linear head. */
static snug_graph *vision_model(void) {
    snug_graph *g = snug_graph_new("vision");
    snug_tensor x = snug_input(g, "x", 3, 8, 8);
    snug_tensor c1 = snug_gelu(g, "g1", snug_conv2d_grouped(g, "c1", x, 6, 3, 1, 1, 3));
    snug_tensor d = snug_gelu(g, "g2", snug_conv2d(g, "down", c1, 8, 3, 2, 1));
    snug_tensor u = snug_conv_transpose2d(g, "up", d, 4, 2, 2, 0);
    snug_tensor h = snug_conv2d(g, "mix", snug_concat(g, "cat", c1, u), 5, 1, 1, 0);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", snug_global_avgpool(g, "gap", h), 4));
    return g;
}

/* A one-block GPT-like model of every sequence op: token and position embeddings, an MLP over (tokens, features)
 * with GELU and a residual, and the tied head; its (T, vocab) logits flattened into one class per sample. */
static snug_graph *token_model(void) {
    snug_graph *g = snug_graph_new("tokens");
    snug_tensor t = snug_flatten(g, "flat", snug_input(g, "tokens", 6, 1, 1));
    snug_tensor x = snug_position_embedding(g, "wpe", snug_embedding(g, "wte", t, 7, 8), 8);
    snug_tensor h = snug_linear(g, "fc2", snug_gelu(g, "act", snug_linear(g, "fc1", x, 16)), 8);
    snug_tensor logits = snug_linear_tied(g, "head", snug_add(g, "res", x, h), "wte");
    snug_softmax_cross_entropy(g, "loss", snug_flatten(g, "logits", logits));
    return g;
}

static snug_dataset *e2e_data(bool tokens) {
    const size_t per = tokens ? 6 : 3 * 8 * 8, classes = tokens ? 42 : 4;
    float *x = op_test_xmalloc(E2E_SAMPLES * per * sizeof(float));
    int32_t y[E2E_SAMPLES];
    uint64_t s = tokens ? 13 : 12;
    if (tokens)
        for (size_t i = 0; i < E2E_SAMPLES * per; i++) x[i] = (float)(op_test_rng_next(&s) % 7);
    else
        op_test_fill_sym(x, E2E_SAMPLES * per, &s);
    for (size_t i = 0; i < E2E_SAMPLES; i++) y[i] = (int32_t)(op_test_rng_next(&s) % classes);
    snug_dataset *ds;
    snug_error err;
    snug_status st = tokens ? snug_dataset_from_memory(x, y, E2E_SAMPLES, 6, 1, 1, classes, &ds, &err)
                            : snug_dataset_from_memory(x, y, E2E_SAMPLES, 3, 8, 8, classes, &ds, &err);
    if (st != SNUG_OK) fail_msg("%s", err.message);
    free(x);
    return ds;
}

static snug_trainer *e2e_trainer(snug_graph *g, size_t micro_batch, const char *checkpoint) {
    snug_train_config cfg = snug_train_config_default();
    cfg.seed = 4;
    snug_error err;
    snug_checkpoint_policy policy;
    if (snug_parse_checkpoint(checkpoint, &policy, &err) != SNUG_OK) fail_msg("%s", err.message);
    const snug_plan_request req = request_for(E2E_SAMPLES, micro_batch ? micro_batch : E2E_SAMPLES, policy, 0, &cfg);
    snug_trainer *tr;
    if (trainer_for(g, &req, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    return tr;
}

static double e2e_loss(snug_trainer *tr, const snug_dataset *ds) {
    static const size_t idx[E2E_SAMPLES] = {0, 1, 2, 3, 4, 5, 6, 7};
    double loss;
    snug_error err;
    if (snug_trainer_gradients(tr, ds, idx, E2E_SAMPLES, &loss, &err) != SNUG_OK) fail_msg("%s", err.message);
    return loss;
}

/* A few elements of every parameter: the trainer's gradient against central differences of its loss. */
static void check_e2e_fd(snug_trainer *tr, const snug_dataset *ds) {
    const size_t np = snug_trainer_param_count(tr);
    for (size_t p = 0; p < np; p++) {
        size_t n;
        float *v, *gr;
        const char *name = snug_trainer_param(tr, p, &n, &v, &gr);
        if (!gr) continue;
        e2e_loss(tr, ds); /* the gradient at the unperturbed point: the differences below overwrite it */
        float *grad = op_test_xmalloc(n * sizeof(float));
        memcpy(grad, gr, n * sizeof(float));
        double scale = 0, worst = 0;
        for (size_t j = 0; j < n; j++) scale = fmax(scale, fabs(grad[j]));
        for (size_t k = 0; k < 5; k++) {
            const size_t j = (k * 7919 + 3) % n;
            const float keep = v[j], h = 1e-2f;
            v[j] = keep + h;
            double lp = e2e_loss(tr, ds);
            v[j] = keep - h;
            double lm = e2e_loss(tr, ds);
            v[j] = keep;
            /* The loss carries float rounding (about 1e-7): divided by 2h, a noise of about 1e-5 in fd. */
            double fd = (lp - lm) / (2.0 * h), err = fabs(fd - grad[j]) / (fabs(fd) + 0.05 * scale + 1e-3);
            worst = fmax(worst, err);
            if (err > 2e-2) fail_msg("%s[%zu]: gradient %.7g, finite difference %.7g", name, j, grad[j], fd);
        }
        print_message("%-14s n=%-5zu |grad| <= %.2e: max relative error %.2e\n", name, n, scale, worst);
        free(grad);
    }
}

/* Gradients of the same window at micro-batch 8 and under other splits and policies, tensor by tensor. */
static void check_e2e_splits(snug_graph *g, const snug_dataset *ds) {
    snug_trainer *full = e2e_trainer(g, E2E_SAMPLES, "none");
    const double loss_full = e2e_loss(full, ds);
    const struct { size_t m; const char *ckpt; } runs[] = {{3, "none"}, {1, "none"}, {8, "every:2"}, {3, "sqrt"}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        snug_trainer *tr = e2e_trainer(g, runs[r].m, runs[r].ckpt);
        const double loss = e2e_loss(tr, ds);
        double worst = 0;
        for (size_t p = 0; p < snug_trainer_param_count(tr); p++) {
            size_t n;
            float *a, *ga, *b, *gb;
            snug_trainer_param(tr, p, &n, &a, &ga);
            snug_trainer_param(full, p, NULL, &b, &gb);
            if (!ga) continue;
            double diff = 0, scale = 0;
            for (size_t j = 0; j < n; j++) {
                diff = fmax(diff, fabs((double)ga[j] - gb[j]));
                scale = fmax(scale, fabs((double)gb[j]));
            }
            worst = fmax(worst, diff / (scale + 1e-12));
        }
        print_message("%s micro-batch %zu, checkpoint %s: gradient max rel error %.2e, loss %.9f vs %.9f\n",
                      snug_graph_name(g), runs[r].m, runs[r].ckpt, worst, loss, loss_full);
        assert_true(worst <= 1e-5);
        assert_true(fabs(loss - loss_full) <= 1e-6 * fabs(loss_full));
        trainer_done(tr);
    }
    trainer_done(full);
}

static void test_vision_model_through_trainer(void **state) {
    (void)state;
    snug_graph *g = vision_model();
    snug_error err;
    if (snug_graph_check(g, &err) != SNUG_OK) fail_msg("%s", err.message);
    snug_dataset *ds = e2e_data(false);
    snug_trainer *tr = e2e_trainer(g, 3, "none");
    check_e2e_fd(tr, ds);
    trainer_done(tr);
    check_e2e_splits(g, ds);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

/* The tied head has no parameter of its own: the trainer lists wte.weight once, and its gradient (checked by
 * finite differences, which move the one table both layers read) holds both layers' parts. */
static void test_token_model_through_trainer(void **state) {
    (void)state;
    snug_graph *g = token_model();
    snug_error err;
    if (snug_graph_check(g, &err) != SNUG_OK) fail_msg("%s", err.message);
    snug_dataset *ds = e2e_data(true);
    snug_trainer *tr = e2e_trainer(g, 3, "none");
    assert_int_equal(snug_trainer_param_count(tr), 6); /* wte, wpe, fc1 (2), fc2 (2) */
    check_e2e_fd(tr, ds);
    trainer_done(tr);
    check_e2e_splits(g, ds);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_grouped_gradients),
        cmocka_unit_test(test_conv2d_grouped_shapes_and_costs),
        cmocka_unit_test(test_conv2d_grouped_paths_agree),
        cmocka_unit_test(test_conv_transpose2d_gradients),
        cmocka_unit_test(test_conv_transpose2d_shapes_and_costs),
        cmocka_unit_test(test_conv_transpose2d_paths_agree),
        cmocka_unit_test(test_conv_transpose2d_large_sample_one_slot),
        cmocka_unit_test(test_conv_transpose2d_row_blocks),
        cmocka_unit_test(test_concat_gradients),
        cmocka_unit_test(test_concat_same_tensor),
        cmocka_unit_test(test_concat_large),
        cmocka_unit_test(test_global_avgpool),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_gelu_values),
        cmocka_unit_test(test_gelu_packed_and_in_place),
        cmocka_unit_test(test_gelu_outliers_bitwise),
        cmocka_unit_test(test_gelu_bf16_patterns_bitwise),
        cmocka_unit_test(test_linear_tokens),
        cmocka_unit_test(test_linear_tokens_large),
        cmocka_unit_test(test_embedding_gradients),
        cmocka_unit_test(test_embedding_table),
        cmocka_unit_test(test_embedding_bad_ids),
        cmocka_unit_test(test_embedding_large),
        cmocka_unit_test(test_position_embedding_gradients),
        cmocka_unit_test(test_position_embedding_in_place),
        cmocka_unit_test(test_linear_tied_gradients),
        cmocka_unit_test(test_linear_tied_shares_gradient),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_vision_model_through_trainer),
        cmocka_unit_test(test_token_model_through_trainer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

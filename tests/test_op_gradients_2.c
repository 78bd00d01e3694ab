/* Gradient checks and contracts of the residual ops, add and dropout: finite differences on odd shapes, backward
 * adds, add(x, x), in-place runs, the dropout mask (a pure function of its RNG key, replayed by backward, never
 * stored, independent of the thread count and of the micro-batch size), evaluation mode, and the shape errors
 * the builder reports. Nodes are bound by hand as in test_op_gradients.c (op_test_util.h). */
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

#include "core/rng.h"
#include "graph/graph.h"
#include "op_test_util.h"
#include "ops/op.h"
#include "snug.h"
#include "test_util.h"

/* add and dropout are linear in what is perturbed: central differences differ by float rounding only. */
#define TOL_LINEAR 2e-4

static int threads(void) { return omp_get_max_threads(); }

/* ---- add ------------------------------------------------------------------------------------------------- */

/* x (c, h, w) and relu(x): two tensors of one shape; add is node 2. */
static snug_graph *add_graph(size_t c, size_t h, size_t w) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", c, h, w);
    snug_add(g, "sum", x, snug_relu(g, "act", x));
    return g;
}

static void test_add_table(void **state) {
    (void)state;
    snug_graph *g = add_graph(3, 5, 7);
    snug_error err;
    assert_int_equal(snug_graph_check(g, &err), SNUG_OK);
    const graph_node *n = &g->nodes[2];
    assert_ptr_equal(n->op, &op_add);
    assert_string_equal(op_add.kind, "add");
    assert_true(op_add.flags & OP_ELEMENTWISE);
    assert_false(op_add.flags & (OP_KEEPS_INPUT | OP_KEEPS_OUTPUT | OP_IS_VIEW));
    snug_shape s = snug_tensor_shape(g, n->output);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dims[0], 3);
    assert_int_equal(s.dims[1], 5);
    assert_int_equal(s.dims[2], 7);
    assert_int_equal(n->n_params, 0);
    assert_true(op_add.flops(n) == 105.0);
    assert_int_equal(op_add.saved_bytes(n), 0);
    assert_int_equal(op_add.workspace_bytes(n, 3, 4), 0);
    /* relu runs in place too, and still reads its output in backward */
    assert_true(op_relu.flags & OP_ELEMENTWISE);
    assert_true(op_relu.flags & OP_KEEPS_OUTPUT);
    snug_graph_free(g);
}

static void test_add_gradients(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        op_fixture_init(&f, add_graph(3, 5, 7), 2, m, threads(), FILL_PLAIN, 10 + m);
        assert_int_equal(f.n_in, 2);
        assert_ptr_not_equal(f.x[0], f.x[1]);
        f.op->forward(&f.c);
        for (size_t i = 0; i < m * f.out_n; i++) assert_true(f.y[i] == f.x[0][i] + f.x[1][i]);
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        /* dy reaches both inputs unchanged */
        op_fixture_analytic(&f);
        for (size_t i = 0; i < m * f.out_n; i++) assert_true(f.dx[0][i] == f.r[i] && f.dx[1][i] == f.r[i]);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
    op_fixture f;
    op_fixture_init(&f, add_graph(2, 3, 3), 2, 5, threads(), FILL_PLAIN, 3);
    op_check_all(&f, 2, 1e-2f, TOL_LINEAR); /* planned 5, runs 2 */
    op_fixture_free(&f);
}

/* add(x, x): one buffer for both inputs and one for both gradients, which must receive dy twice. */
static void test_add_same_tensor(void **state) {
    (void)state;
    for (size_t m = 1; m <= 3; m += 2) {
        snug_graph *g = snug_graph_new("t");
        snug_tensor x = snug_input(g, "x", 5, 1, 3);
        snug_add(g, "twice", x, x);
        op_fixture f;
        op_fixture_init(&f, g, 1, m, threads(), FILL_PLAIN, 20 + m);
        assert_int_equal(f.owner[1], 0);
        assert_ptr_equal(f.c.din[0], f.c.din[1]);
        op_fixture_analytic(&f);
        for (size_t i = 0; i < m * f.out_n; i++) {
            assert_true(f.y[i] == 2.0f * f.x[0][i]);
            assert_true(f.dx[0][i] == 2.0f * f.r[i]);
        }
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
}

/* Either din may be NULL (an input without a gradient): the other still gets dy. */
static void test_add_without_one_gradient(void **state) {
    (void)state;
    for (int skip = 0; skip < 2; skip++) {
        op_fixture f;
        op_fixture_init(&f, add_graph(3, 2, 5), 2, 3, threads(), FILL_PLAIN, 30);
        op_fixture_zero_grads(&f);
        f.c.din[skip] = NULL;
        f.op->backward(&f.c);
        const int other = 1 - skip;
        for (size_t i = 0; i < 3 * f.out_n; i++) {
            assert_true(f.dx[other][i] == f.r[i]);
            assert_true(f.dx[skip][i] == 0.0f);
        }
        op_fixture_free(&f);
    }
}

/* Above the parallel threshold, and in place (out is the first input's buffer). */
static void test_add_large_in_place(void **state) {
    (void)state;
    op_fixture f;
    op_fixture_init(&f, add_graph(8, 64, 65), 2, 2, threads(), FILL_PLAIN, 40);
    const size_t len = 2 * f.out_n;
    float *want = op_test_xmalloc(len * sizeof(float));
    for (size_t i = 0; i < len; i++) want[i] = f.x[0][i] + f.x[1][i];
    f.c.out = f.x[0];
    f.op->forward(&f.c);
    assert_memory_equal(f.x[0], want, len * sizeof(float));
    op_fixture_zero_grads(&f);
    f.op->backward(&f.c);
    f.op->backward(&f.c);
    for (size_t i = 0; i < len; i++) assert_true(f.dx[0][i] == 2.0f * f.r[i] && f.dx[1][i] == 2.0f * f.r[i]);
    free(want);
    op_fixture_free(&f);
}

/* ---- dropout --------------------------------------------------------------------------------------------- */

#define DROP_P 0.3f

/* x (c, h, w), then two dropout layers of probability p: nodes 1 and 2. */
static snug_graph *dropout_graph(size_t c, size_t h, size_t w, float p) {
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_input(g, "x", c, h, w);
    snug_dropout(g, "d2", snug_dropout(g, "d1", x, p), p);
    return g;
}

/* A fixture on node 1 in training, with a fixed RNG key. */
static void dropout_fixture(op_fixture *f, size_t c, size_t h, size_t w, float p, size_t m, fill_kind kind,
                            uint64_t seed) {
    op_fixture_init(f, dropout_graph(c, h, w, p), 1, m, threads(), kind, seed);
    f->c.training = true;
    f->c.seed = 1234;
    f->c.step = 17;
    f->c.micro = 2;
}

static float drop_scale(float p) { return (float)(1.0 / (1.0 - (double)p)); }

/* Forward of call c over inputs of all ones: mask[i] = 1 where kept, 0 where dropped. */
static void mask_of(const op_call *c, float *ones, float *out, unsigned char *mask, size_t len) {
    op_call k = *c;
    for (size_t i = 0; i < len; i++) ones[i] = 1.0f;
    k.in[0] = ones;
    k.out = out;
    k.node->op->forward(&k);
    for (size_t i = 0; i < len; i++) {
        assert_true(out[i] == 0.0f || out[i] == drop_scale(k.node->p.dropout.p));
        mask[i] = out[i] != 0.0f;
    }
}

/* The fraction of elements where two masks differ. */
static double mask_difference(const unsigned char *a, const unsigned char *b, size_t len) {
    size_t d = 0;
    for (size_t i = 0; i < len; i++) d += a[i] != b[i];
    return (double)d / (double)len;
}

static void test_dropout_table(void **state) {
    (void)state;
    snug_graph *g = dropout_graph(3, 5, 7, DROP_P);
    snug_error err;
    assert_int_equal(snug_graph_check(g, &err), SNUG_OK);
    const graph_node *n = &g->nodes[1];
    assert_ptr_equal(n->op, &op_dropout);
    assert_string_equal(op_dropout.kind, "dropout");
    assert_true(n->p.dropout.p == DROP_P);
    assert_true(op_dropout.flags & OP_ELEMENTWISE);
    assert_false(op_dropout.flags & (OP_KEEPS_INPUT | OP_KEEPS_OUTPUT | OP_IS_VIEW));
    assert_int_equal(snug_tensor_shape(g, n->output).dims[2], 7);
    assert_int_equal(n->n_params, 0);
    assert_true(op_dropout.flops(n) == 210.0);
    assert_int_equal(op_dropout.saved_bytes(n), 0); /* the mask is regenerated, never stored */
    assert_int_equal(op_dropout.workspace_bytes(n, 3, 4), 0);
    snug_graph_free(g);
}

/* With the key fixed the mask is fixed, so y is linear in x and central differences are exact. */
static void test_dropout_gradients(void **state) {
    (void)state;
    const float s = drop_scale(DROP_P);
    for (size_t m = 1; m <= 3; m += 2) {
        op_fixture f;
        dropout_fixture(&f, 3, 5, 7, DROP_P, m, FILL_AWAY_ZERO, 50 + m);
        op_fixture_analytic(&f);
        size_t kept = 0;
        for (size_t i = 0; i < m * f.out_n; i++) {
            /* x is never 0, so y == 0 means dropped; backward uses the same mask and the same scale */
            const bool keep = f.y[i] != 0.0f;
            kept += keep;
            assert_true(f.y[i] == (keep ? f.x[0][i] * s : 0.0f));
            assert_true(f.dx[0][i] == (keep ? f.r[i] * s : 0.0f));
        }
        assert_true(kept > 0 && kept < m * f.out_n);
        op_check_all(&f, m, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        op_fixture_free(&f);
    }
    op_fixture f;
    dropout_fixture(&f, 2, 3, 5, DROP_P, 4, FILL_AWAY_ZERO, 59);
    op_check_all(&f, 3, 1e-2f, TOL_LINEAR); /* planned 4, runs 3 */
    op_fixture_free(&f);
}

/* The mask is the documented function of the key: keep element j of sample s iff
 * snug_rng_uniform(seed, snug_rng_bits(step, node, "dropout"), (micro + s) * numel + j) >= p. A change here
 * changes every resumed run. */
static void test_dropout_mask_formula(void **state) {
    (void)state;
    op_fixture f;
    dropout_fixture(&f, 2, 3, 5, DROP_P, 3, FILL_PLAIN, 60);
    const size_t len = 3 * f.out_n;
    float *ones = op_test_xmalloc(len * sizeof(float)), *out = op_test_xmalloc(len * sizeof(float));
    unsigned char *mask = op_test_xmalloc(len);
    mask_of(&f.c, ones, out, mask, len);
    const uint64_t stream = snug_rng_bits(17, 1, 0x64726f706f7574ULL);
    for (size_t i = 0; i < len; i++)
        assert_int_equal(mask[i], snug_rng_uniform(1234, stream, 2 * f.out_n + i) >= DROP_P);
    free(ones), free(out), free(mask);
    op_fixture_free(&f);
}

/* Splitting a batch does not change its mask: the micro-batch that starts at sample 1 draws rows 1.. of the
 * mask of the micro-batch that starts at sample 0, so accumulation stays exact with dropout. */
static void test_dropout_mask_split_invariant(void **state) {
    (void)state;
    op_fixture f;
    dropout_fixture(&f, 2, 3, 5, DROP_P, 3, FILL_PLAIN, 61);
    const size_t len = 3 * f.out_n;
    float *ones = op_test_xmalloc(len * sizeof(float)), *out = op_test_xmalloc(len * sizeof(float));
    unsigned char *whole = op_test_xmalloc(len), *part = op_test_xmalloc(len);
    op_call c = f.c;
    c.micro = 0;
    mask_of(&c, ones, out, whole, len);
    c.micro = 1;
    c.m = 2;
    mask_of(&c, ones, out, part, 2 * f.out_n);
    assert_memory_equal(whole + f.out_n, part, 2 * f.out_n);
    free(ones), free(out), free(whole), free(part);
    op_fixture_free(&f);
}

/* The same key gives the same mask (forward twice, and backward after forward); changing the seed, step,
 * micro-batch or node gives another. */
static void test_dropout_mask_key(void **state) {
    (void)state;
    op_fixture f;
    dropout_fixture(&f, 4, 32, 33, DROP_P, 2, FILL_AWAY_ZERO, 70);
    const size_t len = 2 * f.out_n;
    float *ones = op_test_xmalloc(len * sizeof(float)), *out = op_test_xmalloc(len * sizeof(float));
    unsigned char *base = op_test_xmalloc(len), *other = op_test_xmalloc(len);
    mask_of(&f.c, ones, out, base, len);
    mask_of(&f.c, ones, out, other, len);
    assert_memory_equal(base, other, len);
    /* Backward regenerates the same mask: dx is nonzero exactly where forward kept. */
    op_fixture_zero_grads(&f);
    f.op->backward(&f.c);
    for (size_t i = 0; i < len; i++) assert_int_equal(f.dx[0][i] != 0.0f, base[i]);
    /* Two independent masks of keep rate q differ in 2 q (1 - q) = 42% of the elements for p = 0.3. */
    for (int which = 0; which < 4; which++) {
        op_call c = f.c;
        if (which == 0) c.seed++;
        if (which == 1) c.step++;
        if (which == 2) c.micro++;
        if (which == 3) c.node = &f.g->nodes[2];
        mask_of(&c, ones, out, other, len);
        double d = mask_difference(base, other, len);
        print_message("key change %d: masks differ in %.1f%% of the elements\n", which, 100.0 * d);
        assert_true(d > 0.38 && d < 0.46);
    }
    /* Samples of one micro-batch get different masks: the counter runs over the whole micro-batch. */
    double rows = mask_difference(base, base + f.out_n, f.out_n);
    assert_true(rows > 0.38 && rows < 0.46);
    free(ones), free(out), free(base), free(other);
    op_fixture_free(&f);
}

/* Over 100k elements, the kept fraction is 1 - p within 1%; the mask of element i depends neither on the thread
 * count nor on the micro-batch size (a smaller last micro-batch draws a prefix of the same mask). */
static void test_dropout_keep_rate_and_threads(void **state) {
    (void)state;
    op_fixture f;
    dropout_fixture(&f, 1, 125, 200, DROP_P, 4, FILL_PLAIN, 80);
    const size_t len = 4 * f.out_n;
    assert_int_equal(len, 100000);
    float *ones = op_test_xmalloc(len * sizeof(float)), *out = op_test_xmalloc(len * sizeof(float));
    unsigned char *par = op_test_xmalloc(len), *seq = op_test_xmalloc(len);
    mask_of(&f.c, ones, out, par, len);
    size_t kept = 0;
    for (size_t i = 0; i < len; i++) kept += par[i];
    const double rate = (double)kept / (double)len;
    print_message("dropout p = %.2f: kept %.4f of %zu elements\n", (double)DROP_P, rate, len);
    assert_true(fabs(rate - (1.0 - DROP_P)) < 0.01);
    const int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    mask_of(&f.c, ones, out, seq, len);
    omp_set_num_threads(saved_threads);
    assert_memory_equal(par, seq, len);
    f.c.m = 2;
    mask_of(&f.c, ones, out, seq, 2 * f.out_n);
    assert_memory_equal(par, seq, 2 * f.out_n);
    free(ones), free(out), free(par), free(seq);
    op_fixture_free(&f);
}

/* Evaluation, and p = 0 in training, are the identity in both directions, in place too. */
static void test_dropout_identity(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        op_fixture f;
        dropout_fixture(&f, 3, 5, 7, mode == 0 ? DROP_P : 0.0f, 3, FILL_PLAIN, 90 + (uint64_t)mode);
        if (mode == 0) f.c.training = false;
        const size_t len = 3 * f.out_n;
        op_fixture_analytic(&f);
        assert_memory_equal(f.y, f.x[0], len * sizeof(float));
        assert_memory_equal(f.dx[0], f.r, len * sizeof(float));
        op_check_all(&f, 3, 1e-2f, TOL_LINEAR);
        op_check_backward_adds(&f);
        float *x = op_test_xmalloc(len * sizeof(float));
        memcpy(x, f.x[0], len * sizeof(float));
        f.c.out = f.x[0]; /* in place */
        f.op->forward(&f.c);
        assert_memory_equal(f.x[0], x, len * sizeof(float));
        free(x);
        op_fixture_free(&f);
    }
}

/* In training and in place, forward then backward (which reads neither x nor y) gives the masked values. */
static void test_dropout_in_place(void **state) {
    (void)state;
    op_fixture f, ref;
    dropout_fixture(&f, 2, 50, 100, DROP_P, 2, FILL_PLAIN, 95);
    dropout_fixture(&ref, 2, 50, 100, DROP_P, 2, FILL_PLAIN, 95);
    op_fixture_analytic(&ref);
    f.c.out = f.x[0];
    op_fixture_analytic(&f);
    const size_t len = 2 * f.out_n;
    assert_memory_equal(f.x[0], ref.y, len * sizeof(float));
    assert_memory_equal(f.dx[0], ref.dx[0], len * sizeof(float));
    op_fixture_free(&f);
    op_fixture_free(&ref);
}

/* ---- shape errors through the builder -------------------------------------------------------------------- */

static void test_shape_errors(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("t");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "x", 1, 16, 16));
    snug_add(g, "res", x, snug_linear(g, "fc", x, 128));
    op_expect_error(g, SNUG_E_SHAPE,
                 (const char *const[]){"add", "'res'", "inputs (256) and (128) differ", "equal shapes", NULL});

    g = snug_graph_new("t");
    x = snug_input(g, "x", 2, 3, 4);
    snug_add(g, "res", x, snug_flatten(g, "flat", x));
    op_expect_error(g, SNUG_E_SHAPE, (const char *const[]){"add", "'res'", "(2, 3, 4)", "(24)", NULL});

    const float bad[] = {1.0f, -0.1f, 1.5f, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = snug_graph_new("t");
        snug_dropout(g, "drop", snug_input(g, "x", 2, 3, 4), bad[i]);
        op_expect_error(g, SNUG_E_ARG, (const char *const[]){"dropout", "'drop'", "[0, 1)", NULL});
    }
    g = snug_graph_new("t");
    snug_dropout(g, "drop", snug_input(g, "x", 2, 3, 4), 1.0f);
    op_expect_error(g, SNUG_E_ARG, (const char *const[]){"p = 1 ", NULL});
}

/* ---- the built-in model made of them --------------------------------------------------------------------- */

static void test_resmlp_builds(void **state) {
    (void)state;
    snug_error err;
    snug_graph *g = model_named("resmlp", &err);
    assert_non_null(g);
    /* input, flatten, fc_in, 32 x (fc1, relu, fc2, drop, add), fc_out, loss */
    assert_int_equal(g->n_nodes, 3 + 32 * 5 + 2);
    assert_int_equal(g->n_params, 2 * (2 + 2 * 32));
    assert_int_equal(g->param_numel,
                     784 * 256 + 256 + 32 * (256 * 1024 + 1024 + 1024 * 256 + 256) + 256 * 10 + 10);
    /* block i adds its input (the previous block's add) to its dropout */
    for (int i = 2; i <= 32; i++) {
        const graph_node *add = &g->nodes[3 + 5 * (i - 1) + 4], *prev = &g->nodes[3 + 5 * (i - 2) + 4];
        const graph_node *drop = &g->nodes[3 + 5 * (i - 1) + 3];
        char name[32];
        snprintf(name, sizeof name, "block%d.add", i);
        assert_string_equal(add->name, name);
        assert_ptr_equal(add->op, &op_add);
        assert_int_equal(add->inputs[0], prev->output);
        assert_int_equal(add->inputs[1], drop->output);
        snprintf(name, sizeof name, "block%d.drop", i);
        assert_string_equal(drop->name, name);
        assert_true(drop->p.dropout.p == 0.1f);
    }
    assert_string_equal(g->nodes[g->n_nodes - 2].name, "fc_out");
    snug_graph_free(g);
    bool listed = false;
    for (const char *const *n = snug_model_names(); *n; n++) listed |= strcmp(*n, "resmlp") == 0;
    assert_true(listed);
    assert_null(model_named("resnet", &err));
    assert_non_null(strstr(err.message, "resmlp"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_table),
        cmocka_unit_test(test_add_gradients),
        cmocka_unit_test(test_add_same_tensor),
        cmocka_unit_test(test_add_without_one_gradient),
        cmocka_unit_test(test_add_large_in_place),
        cmocka_unit_test(test_dropout_table),
        cmocka_unit_test(test_dropout_gradients),
        cmocka_unit_test(test_dropout_mask_formula),
        cmocka_unit_test(test_dropout_mask_split_invariant),
        cmocka_unit_test(test_dropout_mask_key),
        cmocka_unit_test(test_dropout_keep_rate_and_threads),
        cmocka_unit_test(test_dropout_identity),
        cmocka_unit_test(test_dropout_in_place),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_resmlp_builds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* A bf16 plan's linear weights enter the products from a kept bfloat16 copy that the optimizer's update writes
 * as it writes the weights (src/train/kept_copies.c). The copy must hold exactly what rounding the weights at
 * the next forward would give, and a weight the caller writes through snug_trainer_param's pointer between
 * steps (taken just before the write, or long before) must be the one the next forward reads. The reference for both is a fresh trainer given the same
 * weights: no update has ever written its copies, so its first forward rounds them itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snug.h"
#include "train/trainer.h"
#include "test_util.h"

#define BATCH 8

static snug_graph *small_mlp(void) {
    snug_graph *g = snug_graph_new("mlp");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 1, 6, 6));
    x = snug_linear(g, "fc2", snug_relu(g, "act", snug_linear(g, "fc1", x, 40)), 5);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* A bf16 trainer whose linear layers take snug's bfloat16 products on every CPU (a portable kernel without
 * AVX512_BF16), so the plan keeps their weights rounded. */
static snug_trainer *bf16_trainer(const snug_graph *g) {
    snug_train_config cfg = snug_train_config_default();
    snug_plan_request req = request_for(BATCH, BATCH / 2, NO_CHECKPOINT, 0, &cfg);
    req.precision = SNUG_PRECISION_BF16;
    req.products = SNUG_PRODUCTS_SNUG;
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_for(g, &req, &cfg, &tr, NULL), SNUG_OK);
    return tr;
}

static const size_t first[BATCH] = {0, 1, 2, 3, 4, 5, 6, 7}, second[BATCH] = {8, 9, 10, 11, 12, 13, 14, 15};

/* Every parameter of `from` into `to`. */
static void copy_params(snug_trainer *to, const snug_trainer *from) {
    float *src, *dst;
    size_t n, m;
    for (size_t i = 0; snug_trainer_param(from, i, &n, &src, NULL); i++) {
        assert_non_null(snug_trainer_param(to, i, &m, &dst, NULL));
        assert_int_equal(n, m);
        memcpy(dst, src, n * sizeof *dst);
    }
}

/* The loss and every gradient of window `second` on a fresh trainer holding tr's parameters must equal tr's
 * (just computed: loss, and its gradients in place), bit for bit. */
static void check_against_fresh(const snug_graph *g, const snug_dataset *ds, const snug_trainer *tr, double loss) {
    snug_trainer *ref = bf16_trainer(g);
    copy_params(ref, tr);
    double ref_loss;
    assert_int_equal(snug_trainer_gradients(ref, ds, second, BATCH, &ref_loss, NULL), SNUG_OK);
    assert_memory_equal(&loss, &ref_loss, sizeof loss);
    float *gr, *ref_gr;
    size_t n;
    for (size_t i = 0; snug_trainer_param(tr, i, &n, NULL, &gr); i++) {
        assert_non_null(snug_trainer_param(ref, i, NULL, NULL, &ref_gr));
        if (gr) assert_memory_equal(gr, ref_gr, n * sizeof *gr);
    }
    trainer_done(ref);
}

/* Each test's model, data and bf16 trainer. */
typedef struct run {
    snug_graph *g;
    snug_dataset *ds;
    snug_trainer *tr;
} run;

static int setup(void **state) {
    run *r = malloc(sizeof *r);
    if (!r) return -1;
    r->g = small_mlp();
    r->ds = pattern_images(2 * BATCH, 1, 6, 6, 5);
    r->tr = bf16_trainer(r->g);
    *state = r;
    return r->ds ? 0 : -1;
}

static int teardown(void **state) {
    run *r = *state;
    trainer_done(r->tr);
    snug_dataset_free(r->ds);
    snug_graph_free(r->g);
    free(r);
    return 0;
}

/* The update writes the copies (its spans carry them), and the next window reads them as the products' own
 * rounding of the new weights would be. */
static void update_writes_the_rounding(void **state) {
    const run *r = *state;
    snug_graph *g = r->g;
    snug_dataset *ds = r->ds;
    snug_trainer *tr = r->tr;
    assert_non_null(tr->opt.round16); /* both weights' copies are written by the update */
    int with_copy = 0;
    for (int i = 0; i < tr->opt.n_spans; i++) with_copy += tr->opt.spans[i].copy16 != NULL;
    assert_int_equal(with_copy, 2);
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ds, first, BATCH, &st, NULL), SNUG_OK);
    double loss;
    assert_int_equal(snug_trainer_gradients(tr, ds, second, BATCH, &loss, NULL), SNUG_OK);
    check_against_fresh(g, ds, tr, loss);
}

/* A weight written through snug_trainer_param between a step and the next window is the one that window's
 * forward reads, not the copy the update wrote. */
static void caller_write_reaches_the_products(void **state) {
    const run *r = *state;
    snug_graph *g = r->g;
    snug_dataset *ds = r->ds;
    snug_trainer *tr = r->tr;
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ds, first, BATCH, &st, NULL), SNUG_OK);
    float *w;
    size_t n;
    assert_string_equal(snug_trainer_param(tr, 0, &n, &w, NULL), "fc1.weight");
    for (size_t i = 0; i < n; i++) w[i] = -1.5f * w[i]; /* every bfloat16 of the copy changes */
    double loss;
    assert_int_equal(snug_trainer_gradients(tr, ds, second, BATCH, &loss, NULL), SNUG_OK);
    check_against_fresh(g, ds, tr, loss);
    /* and again after a second step */
    assert_int_equal(snug_trainer_step(tr, ds, first, BATCH, &st, NULL), SNUG_OK);
    assert_non_null(snug_trainer_param(tr, 2, &n, &w, NULL));
    for (size_t i = 0; i < n; i++) w[i] = 0.5f * w[i] + 0.01f;
    assert_int_equal(snug_trainer_gradients(tr, ds, second, BATCH, &loss, NULL), SNUG_OK);
    check_against_fresh(g, ds, tr, loss);
}

/* A pointer taken before the steps and written through after one (as a Python memoryview kept across steps):
 * the window after the write reads the written weights too. */
static void kept_pointer_write_reaches_the_products(void **state) {
    const run *r = *state;
    snug_graph *g = r->g;
    snug_dataset *ds = r->ds;
    snug_trainer *tr = r->tr;
    float *w;
    size_t n;
    assert_string_equal(snug_trainer_param(tr, 2, &n, &w, NULL), "fc2.weight");
    snug_step_stats st;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(snug_trainer_step(tr, ds, first, BATCH, &st, NULL), SNUG_OK);
        for (size_t i = 0; i < n; i++) w[i] = -w[i];
        double loss;
        assert_int_equal(snug_trainer_gradients(tr, ds, second, BATCH, &loss, NULL), SNUG_OK);
        check_against_fresh(g, ds, tr, loss);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(update_writes_the_rounding, setup, teardown),
        cmocka_unit_test_setup_teardown(caller_write_reaches_the_products, setup, teardown),
        cmocka_unit_test_setup_teardown(kept_pointer_write_reaches_the_products, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

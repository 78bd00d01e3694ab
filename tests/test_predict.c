/* What a binding needs beside training: the graph's shapes and parameter names (snug_graph_input_shape,
 * snug_graph_output_shape, snug_graph_param), the logits of a data set (snug_trainer_predict, against a float64
 * product of the trainer's own weights, at micro-batches that do and do not divide the set), and a new run
 * configuration for the next fit (snug_trainer_configure: checked, and the step limit it sets is the one fit
 * keeps). */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "snug.h"
#include "test_util.h"

#define IN 6
#define OUT 4
#define SAMPLES 7

/* input (IN) -> linear (OUT) -> cross-entropy */
static snug_graph *linear_model(void) {
    snug_graph *g = snug_graph_new("lin");
    snug_tensor x = snug_linear(g, "fc", snug_flatten(g, "flat", snug_input(g, "input", IN, 1, 1)), OUT);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static void shapes_and_parameters(void **state) {
    (void)state;
    snug_graph *g = linear_model();
    const snug_shape in = snug_graph_input_shape(g), out = snug_graph_output_shape(g);
    assert_int_equal(in.rank, 3);
    assert_int_equal(in.dims[0], IN);
    assert_int_equal(out.rank, 1);
    assert_int_equal(out.dims[0], OUT);
    assert_int_equal(snug_graph_param_count(g), 2);
    snug_shape s;
    bool trainable = false;
    assert_string_equal(snug_graph_param(g, 0, &s, &trainable), "fc.weight");
    assert_true(trainable);
    assert_int_equal(s.rank, 2);
    assert_int_equal(s.dims[0], OUT); /* PyTorch's (out, in) */
    assert_int_equal(s.dims[1], IN);
    assert_string_equal(snug_graph_param(g, 1, &s, NULL), "fc.bias");
    assert_null(snug_graph_param(g, 2, &s, NULL));
    snug_graph_free(g);
}

/* Logits = W x + b for every sample, whatever the micro-batch; the targets are not read into the result. */
static void predict_is_the_forward(void **state) {
    (void)state;
    float x[SAMPLES * IN];
    int32_t y[SAMPLES];
    test_fill(x, SAMPLES * IN, 7);
    for (size_t i = 0; i < SAMPLES; i++) y[i] = SNUG_IGNORE_TARGET;
    snug_dataset *ds = NULL;
    assert_int_equal(snug_dataset_borrow_memory(x, y, SAMPLES, IN, 1, 1, OUT, &ds, NULL), SNUG_OK);
    for (size_t m = 1; m <= 4; m++) {
        snug_graph *g = linear_model();
        snug_train_config cfg = snug_train_config_default();
        snug_trainer *tr = NULL;
        assert_int_equal(trainer_simple(g, 4, m, &cfg, &tr, NULL), SNUG_OK);
        float *w, *b, logits[SAMPLES * OUT];
        snug_trainer_param(tr, 0, NULL, &w, NULL);
        snug_trainer_param(tr, 1, NULL, &b, NULL);
        assert_int_equal(snug_trainer_predict(tr, ds, logits, NULL), SNUG_OK);
        for (size_t i = 0; i < SAMPLES; i++)
            for (size_t o = 0; o < OUT; o++) {
                double want = b[o];
                for (size_t k = 0; k < IN; k++) want += (double)w[o * IN + k] * x[i * IN + k];
                assert_true(fabs(logits[i * OUT + o] - want) <= 1e-5 * (1 + fabs(want)));
            }
        trainer_done(tr);
        snug_graph_free(g);
    }
    snug_dataset_free(ds);
}

/* A step limit set after the trainer is made is the one fit keeps; a bad configuration changes nothing. */
static void configure_for_the_next_fit(void **state) {
    (void)state;
    float x[SAMPLES * IN];
    int32_t y[SAMPLES];
    test_fill(x, SAMPLES * IN, 3);
    for (size_t i = 0; i < SAMPLES; i++) y[i] = (int32_t)(i % OUT);
    snug_dataset *ds = NULL;
    assert_int_equal(snug_dataset_borrow_memory(x, y, SAMPLES, IN, 1, 1, OUT, &ds, NULL), SNUG_OK);
    snug_graph *g = linear_model();
    snug_train_config cfg = snug_train_config_default();
    cfg.epochs = 100;
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(g, 2, 2, &cfg, &tr, NULL), SNUG_OK);
    snug_train_config bad = cfg;
    bad.epochs = 0, bad.max_steps = 0;
    snug_error err;
    assert_int_equal(snug_trainer_configure(tr, &bad, &err), SNUG_E_ARG);
    cfg.epochs = 0, cfg.max_steps = 3;
    assert_int_equal(snug_trainer_configure(tr, &cfg, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    long per_epoch, total;
    snug_trainer_run_length(tr, SAMPLES, &per_epoch, &total);
    assert_int_equal(per_epoch, 4);
    assert_int_equal(total, 3);
    trainer_done(tr);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shapes_and_parameters),
        cmocka_unit_test(predict_is_the_forward),
        cmocka_unit_test(configure_for_the_next_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

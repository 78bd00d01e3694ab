/* The evaluation metrics against counts made by hand: a per-pixel model whose logits are its input (a 1x1
 * convolution set to the identity) scores a data set whose predictions and targets are chosen pixel by pixel, so
 * pixel accuracy, per-class IoU, mean IoU, foreground IoU and bits = nats / ln 2 have known values; ignored
 * targets count for nothing; per-sample models leave the IoU fields at 0. */
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
#include "data/dataset.h"

/* 3 samples of (C, 2, 2) logits and 4 targets each, at most 3 classes. */
typedef struct fixed_data {
    float x[3][3 * 4];
    int32_t y[3][4];
} fixed_data;

static void fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {
    const fixed_data *d = ds->impl;
    for (size_t i = 0; i < n; i++) memcpy(x + i * ds->sample_numel, d->x[idx[i]], ds->sample_numel * sizeof *x);
}

static void fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {
    const fixed_data *d = ds->impl;
    for (size_t i = 0; i < n; i++) memcpy(y + i * 4, d->y[idx[i]], 4 * sizeof *y);
}

static void destroy(snug_dataset *ds) { free(ds->impl); }

static const dataset_ops fixed_ops = {.fill_inputs = fill_inputs, .fill_targets = fill_targets, .destroy = destroy};

/* Sample s's prediction at pixel p is pred[s][p] (its logit 4, the others 0), its target target[s][p]. */
static snug_dataset *pixel_data(size_t classes, const int pred[3][4], const int32_t target[3][4]) {
    fixed_data *d = calloc(1, sizeof *d);
    snug_dataset *ds = calloc(1, sizeof *ds);
    assert_non_null(d);
    assert_non_null(ds);
    for (int s = 0; s < 3; s++)
        for (int p = 0; p < 4; p++) {
            d->x[s][(size_t)pred[s][p] * 4 + (size_t)p] = 4.0f;
            d->y[s][p] = target[s][p];
        }
    *ds = (snug_dataset){.ops = &fixed_ops, .n = 3, .sample_shape = {3, {classes, 2, 2}},
                         .sample_numel = classes * 4, .classes = classes, .targets_per_sample = 4, .impl = d};
    return ds;
}

/* input (classes, 2, 2) -> 1x1 conv set to the identity -> per-pixel cross-entropy. */
static snug_trainer *identity_model(size_t classes, snug_graph **g, size_t batch) {
    *g = snug_graph_new("pixels");
    snug_tensor x = snug_conv2d(*g, "id", snug_input(*g, "input", classes, 2, 2), classes, 1, 1, 0);
    snug_softmax_cross_entropy(*g, "loss", x);
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(*g, batch, batch, &cfg, &tr, NULL), SNUG_OK);
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t numel;
        float *v;
        const char *name = snug_trainer_param(tr, i, &numel, &v, NULL);
        memset(v, 0, numel * sizeof *v);
        if (strcmp(name, "id.weight") == 0)
            for (size_t c = 0; c < classes; c++) v[c * classes + c] = 1.0f;
    }
    return tr;
}

/* Two classes, 12 pixels, one ignored: the counts give TP/FP/FN per class by hand. */
static void two_class_metrics(void **state) {
    (void)state;
    static const int pred[3][4] = {{1, 1, 0, 0}, {1, 0, 0, 0}, {1, 1, 1, 0}};
    static const int32_t target[3][4] = {{1, 0, 0, 0}, {1, 1, 0, -1}, {1, 1, 0, 0}};
    /* counted pixels 11; correct: s0 {1,0,0} -> 3 of 4 (p1 wrong); s1 p0, p2 -> 2 (p1 wrong, p3 ignored);
     * s2 p0, p1, p3 -> 3 (p2 wrong): 8 of 11. Class 1: TP 4 (s0p0, s1p0, s2p0, s2p1), FP 2 (s0p1, s2p2), FN 1
     * (s1p1): IoU 4/7. Class 0: TP 4 (s0p2, s0p3, s1p2, s2p3), FP 1 (s1p1), FN 2: IoU 4/7. */
    snug_graph *g;
    for (size_t batch = 1; batch <= 3; batch++) {  /* the micro-batches must not matter */
        snug_trainer *tr = identity_model(2, &g, batch);
        snug_dataset *ds = pixel_data(2, pred, target);
        snug_eval_result r;
        assert_int_equal(snug_trainer_evaluate(tr, ds, &r, NULL), SNUG_OK);
        assert_int_equal(r.kind, SNUG_EVAL_PIXELS);
        assert_int_equal(r.classes, 2);
        assert_int_equal(r.items, 11);
        assert_true(fabs(r.accuracy - 8.0 / 11.0) < 1e-12);
        assert_true(fabs(r.foreground_iou - 4.0 / 7.0) < 1e-12);
        assert_true(fabs(r.mean_iou - 4.0 / 7.0) < 1e-12);
        /* a right pixel costs log(1 + e^-4), a wrong one log(1 + e^4) */
        double want = (8 * log1p(exp(-4.0)) + 3 * log1p(exp(4.0))) / 11;
        assert_true(fabs(r.loss - want) < 1e-5);
        assert_true(fabs(r.bits - r.loss / log(2.0)) < 1e-12);
        snug_dataset_free(ds);
        trainer_done(tr);
        snug_graph_free(g);
    }
}

/* Three classes, one of which neither occurs nor is predicted: it is left out of the mean, and there is no
 * foreground IoU. */
static void absent_class_left_out(void **state) {
    (void)state;
    static const int pred[3][4] = {{0, 0, 1, 1}, {0, 1, 1, 1}, {0, 0, 0, 0}};
    static const int32_t target[3][4] = {{0, 0, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 1}};
    /* class 0: TP 6, FP 1 (s2p3), FN 1 (s1p1): 6/8; class 1: TP 4, FP 1 (s1p1), FN 1 (s2p3): 4/6; class 2
     * absent. Mean (6/8 + 4/6) / 2. */
    snug_graph *g;
    snug_trainer *tr = identity_model(3, &g, 2);
    snug_dataset *ds = pixel_data(3, pred, target);
    snug_eval_result r;
    assert_int_equal(snug_trainer_evaluate(tr, ds, &r, NULL), SNUG_OK);
    assert_int_equal(r.items, 12);
    assert_true(fabs(r.accuracy - 10.0 / 12.0) < 1e-12);
    assert_true(fabs(r.mean_iou - (6.0 / 8.0 + 4.0 / 6.0) / 2) < 1e-12);
    assert_true(r.foreground_iou == 0);
    snug_dataset_free(ds);
    trainer_done(tr);
    snug_graph_free(g);
}

/* Per-sample labels: kind SAMPLES, the IoU fields 0. */
static void classification_has_no_iou(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("cls");
    snug_tensor x = snug_flatten(g, "f", snug_input(g, "in", 1, 1, 2));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", x, 2));
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(g, 2, 2, &cfg, &tr, NULL), SNUG_OK);
    static const float inputs[4] = {1, 0, 0, 1};
    static const int32_t y[2] = {0, 1};
    snug_dataset *ds = NULL;
    assert_int_equal(snug_dataset_from_memory(inputs, y, 2, 1, 1, 2, 2, &ds, NULL), SNUG_OK);
    snug_eval_result r;
    assert_int_equal(snug_trainer_evaluate(tr, ds, &r, NULL), SNUG_OK);
    assert_int_equal(r.kind, SNUG_EVAL_SAMPLES);
    assert_int_equal(r.items, 2);
    assert_true(r.mean_iou == 0 && r.foreground_iou == 0);
    assert_true(fabs(r.bits - r.loss / log(2.0)) < 1e-12);
    snug_dataset_free(ds);
    trainer_done(tr);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_class_metrics),
        cmocka_unit_test(absent_class_left_out),
        cmocka_unit_test(classification_has_no_iou),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

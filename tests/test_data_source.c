/* Data sets over the caller's callbacks (snug_dataset_from_source): a model trained through them gets the bits
 * of the same data given as arrays; a callback that fails stops the step (and an evaluation) with the caller's
 * own message, or a generic one when it left none, and changes no parameter; targets outside the classes are
 * refused by sample; bad sources are refused when opened; close runs once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snug.h"
#include "test_util.h"

enum { N = 24, IN = 6, CLASSES = 3, B = 12 };

typedef struct source_data {
    float x[N * IN];
    int32_t y[N];
    long fail_inputs_after;   /* calls of read_inputs that succeed before one fails; -1: never */
    bool fail_silently;       /* fail without a message */
    int bad_target;           /* a sample whose target is out of range, or -1 */
    long calls, closes;
} source_data;

static bool read_inputs(void *user, const size_t *idx, size_t n, float *x, snug_error *err) {
    source_data *d = user;
    if (d->fail_inputs_after >= 0 && d->calls++ >= d->fail_inputs_after) {
        if (!d->fail_silently) {
            err->status = SNUG_E_IO;
            snprintf(err->message, sizeof err->message, "shard 7 is gone");
        }
        return false;
    }
    for (size_t i = 0; i < n; i++) memcpy(x + i * IN, d->x + idx[i] * IN, IN * sizeof *x);
    return true;
}

static bool read_targets(void *user, const size_t *idx, size_t n, int32_t *y, snug_error *err) {
    source_data *d = user;
    (void)err;
    for (size_t i = 0; i < n; i++) y[i] = (int)idx[i] == d->bad_target ? CLASSES : d->y[idx[i]];
    return true;
}

static void on_close(void *user) { ((source_data *)user)->closes++; }

static void fill(source_data *d) {
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < N * IN; i++) d->x[i] = (float)((i * 7919) % 97) / 48.0f - 1.0f;
    for (size_t i = 0; i < N; i++) d->y[i] = (int32_t)(i % CLASSES);
    d->fail_inputs_after = -1;
    d->bad_target = -1;
}

static snug_dataset *open_source(source_data *d) {
    const snug_dataset_source src = {.size = N, .sample_shape = {.rank = 3, .dims = {IN, 1, 1}},
                                     .targets_per_sample = 1, .classes = CLASSES, .read_inputs = read_inputs,
                                     .read_targets = read_targets, .close = on_close, .user = d};
    snug_dataset *ds = NULL;
    assert_int_equal(snug_dataset_from_source(&src, &ds, NULL), SNUG_OK);
    return ds;
}

static snug_graph *model(void) {
    snug_graph *g = snug_graph_new("src");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", IN, 1, 1));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", snug_relu(g, "act", snug_linear(g, "fc", x, 8)), CLASSES));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_trainer *trainer(const snug_graph *g) {
    snug_train_config cfg = snug_train_config_default();
    cfg.shuffle = false;
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(g, B, 5, &cfg, &tr, NULL), SNUG_OK);
    return tr;
}

static float *params_of(const snug_trainer *tr, size_t *total) {
    size_t n = 0, numel;
    float *v;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        snug_trainer_param(tr, i, &numel, NULL, NULL);
        n += numel;
    }
    float *all = malloc(n * sizeof *all);
    size_t at = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        snug_trainer_param(tr, i, &numel, &v, NULL);
        memcpy(all + at, v, numel * sizeof *all);
        at += numel;
    }
    *total = n;
    return all;
}

/* Two epochs through callbacks and through copied arrays: the same bits; close runs once, at free. */
static void trains_as_arrays(void **state) {
    (void)state;
    source_data d;
    fill(&d);
    snug_dataset *via_source = open_source(&d), *via_arrays = NULL;
    assert_int_equal(snug_dataset_from_memory(d.x, d.y, N, IN, 1, 1, CLASSES, &via_arrays, NULL), SNUG_OK);
    snug_graph *g = model();
    snug_trainer *a = trainer(g), *b = trainer(g);
    assert_int_equal(snug_trainer_fit(a, via_source, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(b, via_arrays, NULL), SNUG_OK);
    size_t na, nb;
    float *pa = params_of(a, &na), *pb = params_of(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, na * sizeof *pa);
    snug_eval_result ra, rb;
    assert_int_equal(snug_trainer_evaluate(a, via_source, &ra, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_evaluate(b, via_arrays, &rb, NULL), SNUG_OK);
    assert_memory_equal(&ra.loss, &rb.loss, sizeof ra.loss);
    free(pa), free(pb);
    trainer_done(a), trainer_done(b);
    assert_int_equal(d.closes, 0);
    snug_dataset_free(via_source);
    assert_int_equal(d.closes, 1);
    snug_dataset_free(via_arrays);
    snug_graph_free(g);
}

/* A failing read stops the step with the caller's message and leaves the parameters as they were. */
static void failed_read_stops_the_step(void **state) {
    (void)state;
    for (int silent = 0; silent < 2; silent++) {
        source_data d;
        fill(&d);
        d.fail_inputs_after = 1; /* the second micro-batch of the first window */
        d.fail_silently = silent;
        snug_dataset *ds = open_source(&d);
        snug_graph *g = model();
        snug_trainer *tr = trainer(g);
        size_t n0;
        float *before = params_of(tr, &n0);
        size_t idx[B];
        for (size_t i = 0; i < B; i++) idx[i] = i;
        snug_step_stats st;
        snug_error err = {0};
        assert_int_equal(snug_trainer_step(tr, ds, idx, B, &st, &err), SNUG_E_IO);
        assert_non_null(strstr(err.message, silent ? "read_inputs callback failed without saying why" : "shard 7 is gone"));
        float *after = params_of(tr, &n0);
        assert_memory_equal(before, after, n0 * sizeof *before);
        snug_eval_result res;
        assert_int_equal(snug_trainer_evaluate(tr, ds, &res, &err), SNUG_E_IO); /* the failure sticks */
        free(before), free(after);
        trainer_done(tr);
        snug_dataset_free(ds);
        snug_graph_free(g);
    }
}

/* A target outside [0, classes) that is not SNUG_IGNORE_TARGET is refused, naming the sample. */
static void bad_target_is_refused(void **state) {
    (void)state;
    source_data d;
    fill(&d);
    d.bad_target = 9;
    snug_dataset *ds = open_source(&d);
    snug_graph *g = model();
    snug_trainer *tr = trainer(g);
    snug_error err = {0};
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_E_FORMAT);
    assert_non_null(strstr(err.message, "sample 9: target 3 is not a class of [0, 3)"));
    trainer_done(tr);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

static void bad_sources_are_refused(void **state) {
    (void)state;
    source_data d;
    fill(&d);
    snug_dataset_source src = {.size = N, .sample_shape = {.rank = 3, .dims = {IN, 1, 1}}, .targets_per_sample = 1,
                               .classes = CLASSES, .read_inputs = read_inputs, .read_targets = NULL, .user = &d};
    snug_dataset *ds = NULL;
    snug_error err;
    assert_int_equal(snug_dataset_from_source(&src, &ds, &err), SNUG_E_ARG);
    assert_null(ds);
    assert_non_null(strstr(err.message, "read_inputs and read_targets"));
    src.read_targets = read_targets;
    src.classes = 0;
    assert_int_equal(snug_dataset_from_source(&src, &ds, &err), SNUG_E_ARG);
    src.classes = CLASSES;
    src.sample_shape.rank = 0;
    assert_int_equal(snug_dataset_from_source(&src, &ds, &err), SNUG_E_ARG);
    src.sample_shape = (snug_shape){.rank = 2, .dims = {SIZE_MAX / 2, 4}};
    assert_int_equal(snug_dataset_from_source(&src, &ds, &err), SNUG_E_OVERFLOW);
    assert_int_equal(d.closes, 0); /* a refused source is not closed: it was never the data set's */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(trains_as_arrays),
        cmocka_unit_test(failed_read_stops_the_step),
        cmocka_unit_test(bad_target_is_refused),
        cmocka_unit_test(bad_sources_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

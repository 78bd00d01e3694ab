/* The trainer's contract beyond the accumulation arithmetic: bad configurations and data are refused with a
 * clear message, epochs have ceil(N/B) optimizer steps (the last window normalised by its real count),
 * counters act per optimizer step, non-finite losses skip the step and then stop the run, and the op timers
 * count what ran while they were on. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/rng.h"
#include "snug.h"
#include "test_util.h"

static snug_dataset *random_data(size_t n, size_t c, size_t h, size_t w, size_t classes, bool with_nan) {
    size_t numel = n * c * h * w;
    float *x = malloc(numel * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < numel; i++) x[i] = snug_rng_uniform(5, 1, i) - 0.5f;
    if (with_nan) x[0] = NAN;
    for (size_t i = 0; i < n; i++) y[i] = (int32_t)snug_rng_below(5, 2, i, classes);
    snug_dataset *ds = NULL;
    assert_int_equal(snug_dataset_from_memory(x, y, n, c, h, w, classes, &ds, NULL), SNUG_OK);
    free(x);
    free(y);
    return ds;
}

static snug_graph *tiny_model(void) {
    snug_graph *g = snug_graph_new("tiny");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 1, 4, 4));
    x = snug_linear(g, "out", snug_relu(g, "act", snug_linear(g, "hidden", x, 8)), 3);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* A trainer of g over windows of 8 samples in micro-batches of 4, for `epochs` epochs. */
static snug_trainer *trainer_8_by_4(snug_graph *g, long epochs) {
    snug_train_config cfg = snug_train_config_default();
    cfg.epochs = epochs;
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_simple(g, 8, 4, &cfg, &tr, NULL), SNUG_OK);
    return tr;
}

/* Plans batch B in micro-batches of m for g and makes a trainer running cfg: the status of the first that fails. */
static snug_status try_config(snug_graph *g, size_t batch, size_t m, snug_train_config cfg, snug_error *err) {
    snug_trainer *tr = NULL;
    const snug_plan_request req = request_for(batch, m, NO_CHECKPOINT, 0, &cfg);
    snug_status s = trainer_for(g, &req, &cfg, &tr, err);
    trainer_done(tr);
    return s;
}

static void refuses_bad_configs(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_error err;
    snug_train_config cfg = snug_train_config_default();
    assert_int_equal(try_config(g, 0, 1, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "batch size 0"));
    assert_int_equal(try_config(g, 8, 9, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "micro-batch 9 is larger than the batch 8"));
    assert_int_equal(try_config(g, 8, 0, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "micro-batch 0"));
    cfg.epochs = 0;
    assert_int_equal(try_config(g, 8, 8, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "nothing to train"));
    cfg = snug_train_config_default();
    cfg.optim.lr = -1;
    assert_int_equal(try_config(g, 8, 8, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "learning rate"));
    cfg = snug_train_config_default();
    assert_true(cfg.rank_timeout_seconds == 600);
    cfg.rank_timeout_seconds = -1;
    assert_int_equal(try_config(g, 8, 8, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "rank timeout -1 seconds"));
    cfg = snug_train_config_default();
    /* a run whose optimizer needs other state than the plan reserved */
    snug_plan *plan = NULL;
    snug_trainer *tr = NULL;
    snug_plan_request req = request_for(8, 8, NO_CHECKPOINT, 0, &cfg); /* SGD with momentum: 1 slot */
    assert_int_equal(snug_plan_new(g, &req, &plan, NULL, &err), SNUG_OK);
    cfg = snug_train_config_default();
    cfg.optim.kind = SNUG_OPTIM_ADAMW;
    assert_int_equal(snug_trainer_new(plan, &cfg, &tr, &err), SNUG_E_ARG);
    assert_null(tr);
    assert_non_null(strstr(err.message, "req.optim = cfg.optim"));
    snug_plan_free(plan);
    snug_graph_free(g);
}

static void refuses_bad_graphs(void **state) {
    (void)state;
    snug_error err;
    snug_graph *g = snug_graph_new("noloss");
    snug_linear(g, "fc", snug_flatten(g, "flat", snug_input(g, "input", 1, 2, 2)), 2);
    snug_train_config cfg = snug_train_config_default();
    assert_int_equal(try_config(g, 64, 64, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "has no loss"));
    snug_graph_free(g);

    g = snug_graph_new("dup");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 1, 2, 2));
    snug_linear(g, "flat", x, 2);
    assert_int_equal(snug_graph_check(g, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "'flat' is used twice"));
    snug_graph_free(g);

    g = snug_graph_new("afterloss");
    x = snug_flatten(g, "flat", snug_input(g, "input", 1, 2, 2));
    snug_softmax_cross_entropy(g, "loss", x);
    snug_relu(g, "late", x);
    assert_int_equal(snug_graph_check(g, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "the loss must be the last layer"));
    snug_graph_free(g);

    g = snug_graph_new("zero"); /* a bad argument, not a shape mismatch */
    snug_input(g, "input", 0, 2, 2);
    assert_int_equal(snug_graph_check(g, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "at least 1"));
    snug_graph_free(g);

    g = snug_graph_new("stray"); /* a layer nothing reads: no trainer, no plan */
    x = snug_flatten(g, "flat", snug_input(g, "input", 1, 2, 2));
    snug_linear(g, "typo", x, 4);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", x, 2));
    assert_int_equal(try_config(g, 64, 64, cfg, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "layer 'typo' (linear) is never read"));
    snug_graph_free(g);

    assert_null(model_named("resnet9000", &err));
    assert_non_null(strstr(err.message, "unknown model 'resnet9000'"));
}

static void refuses_mismatched_data(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr;
    snug_error err;
    assert_int_equal(trainer_simple(g, 64, 64, &cfg, &tr, &err), SNUG_OK);
    snug_dataset *wrong_shape = random_data(10, 1, 5, 4, 3, false), *wrong_classes = random_data(10, 1, 4, 4, 4, false);
    assert_int_equal(snug_trainer_fit(tr, wrong_shape, &err), SNUG_E_SHAPE);
    assert_non_null(strstr(err.message, "(1, 5, 4) but model 'tiny' takes (1, 4, 4)"));
    assert_int_equal(snug_trainer_fit(tr, wrong_classes, &err), SNUG_E_SHAPE);
    assert_non_null(strstr(err.message, "4 classes but model 'tiny' predicts 3"));
    size_t idx[2] = {0, 10};
    snug_dataset *ok = random_data(10, 1, 4, 4, 3, false);
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ok, idx, 2, &st, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "sample index 10 is out of range"));
    snug_dataset_free(wrong_shape);
    snug_dataset_free(wrong_classes);
    snug_dataset_free(ok);
    trainer_done(tr);
    snug_graph_free(g);
}

typedef struct recorder {
    long calls;
    long last_step, steps_per_epoch, total_steps;
    size_t items[64];
    size_t micro_batches[64];
} recorder;

static bool record(const snug_step_stats *st, void *user) {
    recorder *r = user;
    if (r->calls < 64) {
        r->items[r->calls] = st->items;
        r->micro_batches[r->calls] = st->micro_batches;
    }
    r->calls++;
    r->last_step = st->step;
    r->steps_per_epoch = st->steps_per_epoch;
    r->total_steps = st->total_steps;
    return true;
}

/* 50 samples, batch 16 in micro-batches of 5: 4 steps an epoch, the last with 2 samples in one micro-batch. */
static void epochs_have_ceil_steps(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_dataset *ds = random_data(50, 1, 4, 4, 3, false);
    recorder r = {0};
    snug_train_config cfg = snug_train_config_default();
    cfg.epochs = 2;
    cfg.progress = record;
    cfg.progress_user = &r;
    snug_trainer *tr;
    assert_int_equal(trainer_simple(g, 16, 5, &cfg, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    assert_int_equal(r.calls, 8);
    assert_int_equal(r.steps_per_epoch, 4);
    assert_int_equal(r.total_steps, 8);
    assert_int_equal(r.last_step, 8); /* one optimizer step per window, not per micro-batch */
    assert_int_equal(r.items[0], 16);
    assert_int_equal(r.micro_batches[0], 4); /* 5 + 5 + 5 + 1 */
    assert_int_equal(r.items[3], 2);
    assert_int_equal(r.micro_batches[3], 1);
    trainer_done(tr);

    cfg.drop_last = true;
    r = (recorder){0};
    assert_int_equal(trainer_simple(g, 16, 5, &cfg, &tr, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, NULL), SNUG_OK);
    assert_int_equal(r.calls, 6);
    assert_int_equal(r.steps_per_epoch, 3);
    trainer_done(tr);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

/* A short last window is normalised by its own count: its gradient is the mean over its samples, the same
 * as a trainer whose global batch is exactly that window. */
static void short_window_is_its_own_mean(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_dataset *ds = random_data(20, 1, 4, 4, 3, false);
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *a, *b;
    assert_int_equal(trainer_simple(g, 16, 4, &cfg, &a, NULL), SNUG_OK);
    assert_int_equal(trainer_simple(g, 3, 3, &cfg, &b, NULL), SNUG_OK);
    size_t idx[3] = {17, 18, 19};
    double la, lb;
    assert_int_equal(snug_trainer_gradients(a, ds, idx, 3, &la, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_gradients(b, ds, idx, 3, &lb, NULL), SNUG_OK);
    assert_true(fabs(la - lb) <= 1e-7 * fabs(lb));
    for (size_t i = 0; i < snug_trainer_param_count(a); i++) {
        size_t n;
        float *ga, *gb;
        snug_trainer_param(a, i, &n, NULL, &ga);
        snug_trainer_param(b, i, NULL, NULL, &gb);
        for (size_t j = 0; j < n; j++) assert_true(fabsf(ga[j] - gb[j]) <= 1e-6f * (1 + fabsf(gb[j])));
    }
    trainer_done(a);
    trainer_done(b);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

/* A NaN in the data makes every window containing it non-finite: those steps are skipped without touching the
 * parameters or the schedule, and the fifth in a row stops the run with advice. */
static void nonfinite_skips_then_stops(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_dataset *ds = random_data(8, 1, 4, 4, 3, true);
    snug_trainer *tr = trainer_8_by_4(g, 10);
    float *w;
    size_t n;
    snug_trainer_param(tr, 0, &n, &w, NULL);
    float before = w[0];
    size_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    snug_step_stats st;
    snug_error err;
    assert_int_equal(snug_trainer_step(tr, ds, idx, 8, &st, &err), SNUG_OK);
    assert_true(st.skipped);
    assert_int_equal(st.step, 0);
    assert_true(w[0] == before);
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_E_NONFINITE);
    assert_non_null(strstr(err.message, "not finite for 10 optimizer steps in a row"));
    assert_non_null(strstr(err.message, "lower the learning rate"));
    assert_non_null(strstr(err.message, "sample 0 of the data set holds a non-finite value (nan)"));
    assert_true(w[0] == before);
    trainer_done(tr);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

/* Sets every value of parameter i to v. */
static void set_param(snug_trainer *tr, size_t i, float v) {
    size_t n;
    float *w;
    snug_trainer_param(tr, i, &n, &w, NULL);
    for (size_t j = 0; j < n; j++) w[j] = v;
}

/* The message that stops a run names where the last skipped window first met a non-finite value: a layer's
 * output in forward (weights so large that 'hidden' overflows), or a gradient in backward (a forward that stays
 * finite, tiny activations times huge weights, whose gradient with respect to the activations overflows). */
static void nonfinite_names_the_layer(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_train_config cfg = snug_train_config_default();
    cfg.max_nonfinite = 2;
    cfg.epochs = 3;
    snug_trainer *tr;
    snug_error err;

    snug_dataset *ds = random_data(8, 1, 4, 4, 3, false);
    assert_int_equal(trainer_simple(g, 8, 4, &cfg, &tr, NULL), SNUG_OK);
    set_param(tr, 0, 3e38f); /* hidden.weight */
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_E_NONFINITE);
    assert_non_null(strstr(err.message, "is in the output of layer 'hidden'"));
    assert_non_null(strstr(err.message, "in forward, for sample"));
    trainer_done(tr);
    snug_dataset_free(ds);

    /* zero images of class 0: hidden = relu(bias) = 1e-30, logits = out.weight x 8e-30 (finite), the gradient of
     * the 8 activations sums 3 rows of +-3e38 weights: 6e38 overflows */
    float x[16] = {0};
    int32_t y[1] = {0};
    assert_int_equal(snug_dataset_from_memory(x, y, 1, 1, 4, 4, 3, &ds, NULL), SNUG_OK);
    assert_int_equal(trainer_simple(g, 1, 1, &cfg, &tr, NULL), SNUG_OK);
    set_param(tr, 0, 0.0f);
    set_param(tr, 1, 1e-30f);
    size_t n;
    float *w2;
    snug_trainer_param(tr, 2, &n, &w2, NULL); /* out.weight: (3, 8) */
    for (size_t j = 0; j < n; j++) w2[j] = j < 8 ? -3e38f : 3e38f;
    set_param(tr, 3, 0.0f);
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_E_NONFINITE);
    assert_non_null(strstr(err.message, "in the gradient of layer 'out' (linear) with respect to its input 1"));
    assert_non_null(strstr(err.message, "in backward, for sample 0"));
    trainer_done(tr);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

/* A skipped window changes nothing but the counters: BatchNorm's running statistics, updated by its forward,
 * are put back as they were before it. */
static void skipped_window_keeps_running_statistics(void **state) {
    (void)state;
    snug_graph *g = snug_graph_new("bn");
    snug_tensor x = snug_batchnorm2d(g, "bn", snug_input(g, "input", 1, 4, 4), 1e-5f, 0.1f);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", snug_flatten(g, "flat", x), 3));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    snug_dataset *ds = random_data(8, 1, 4, 4, 3, true);
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr;
    assert_int_equal(trainer_simple(g, 8, 4, &cfg, &tr, NULL), SNUG_OK);
    float before[64], *v;
    size_t at = 0, n;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        snug_trainer_param(tr, i, &n, &v, NULL);
        assert_true(at + n <= 64);
        memcpy(before + at, v, n * sizeof *v);
        at += n;
    }
    size_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ds, idx, 8, &st, NULL), SNUG_OK);
    assert_true(st.skipped);
    at = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        snug_trainer_param(tr, i, &n, &v, NULL);
        assert_memory_equal(before + at, v, n * sizeof *v);
        at += n;
    }
    trainer_done(tr);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The entry for name in phase, or NULL. */
static const snug_op_time *entry(const snug_op_time *t, size_t n, const char *name, snug_phase phase) {
    for (size_t i = 0; i < n; i++)
        if (t[i].phase == phase && strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

/* Profiling: off, nothing is listed; on, every op's forward and backward is counted once per micro-batch and
 * the parts once per window (data: the count of the window's items, then each micro-batch), the times add up
 * to no more than the steps took; evaluation adds nothing; off keeps the totals; on again clears them. */
static void profile_counts_what_ran(void **state) {
    (void)state;
    snug_graph *g = tiny_model();
    snug_dataset *ds = random_data(8, 1, 4, 4, 3, false);
    snug_trainer *tr = trainer_8_by_4(g, snug_train_config_default().epochs);
    size_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    snug_step_stats st;
    assert_int_equal(snug_trainer_step(tr, ds, idx, 8, &st, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_op_times(tr, NULL, 0), 0);

    assert_int_equal(snug_trainer_profile(tr, true, NULL), SNUG_OK);
    const double t0 = now_s();
    for (int i = 0; i < 3; i++) assert_int_equal(snug_trainer_step(tr, ds, idx, 8, &st, NULL), SNUG_OK);
    const double wall = now_s() - t0;
    snug_op_time t[32];
    const size_t n = snug_trainer_op_times(tr, t, 32);
    /* forward: flat, hidden, act, out, loss; backward: the same but flat (its input needs no gradient) */
    const char *nodes[] = {"hidden", "act", "out", "loss"};
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(t[i].seconds >= 0);
        sum += t[i].seconds;
    }
    for (size_t i = 0; i < 4; i++) {
        const snug_op_time *f = entry(t, n, nodes[i], SNUG_PHASE_FORWARD);
        const snug_op_time *b = entry(t, n, nodes[i], SNUG_PHASE_BACKWARD);
        assert_non_null(f);
        assert_non_null(b);
        assert_int_equal(f->calls, 6);
        assert_int_equal(b->calls, 6);
    }
    assert_string_equal(entry(t, n, "hidden", SNUG_PHASE_FORWARD)->op, "linear");
    const snug_op_time *update = entry(t, n, "(update)", SNUG_PHASE_UPDATE);
    const snug_op_time *data = entry(t, n, "(data)", SNUG_PHASE_FORWARD);
    assert_non_null(update);
    assert_non_null(data);
    assert_int_equal(update->calls, 3);
    assert_int_equal(data->calls, 9);
    assert_string_equal(update->op, "");
    assert_true(sum > 0 && sum <= wall);
    /* the last entries are the parts, after every op */
    assert_int_equal(t[n - 1].phase, SNUG_PHASE_UPDATE);

    /* a smaller cap: the count, the first entries written */
    snug_op_time few[2];
    assert_int_equal(snug_trainer_op_times(tr, few, 2), n);
    assert_string_equal(few[0].name, t[0].name);

    snug_eval_result res;
    assert_int_equal(snug_trainer_evaluate(tr, ds, &res, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_op_times(tr, t, 32), n);
    assert_int_equal(entry(t, n, "hidden", SNUG_PHASE_FORWARD)->calls, 6);

    assert_int_equal(snug_trainer_profile(tr, false, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_step(tr, ds, idx, 8, &st, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_op_times(tr, t, 32), n);
    assert_int_equal(entry(t, n, "hidden", SNUG_PHASE_BACKWARD)->calls, 6);
    assert_int_equal(entry(t, n, "(update)", SNUG_PHASE_UPDATE)->calls, 3);

    assert_int_equal(snug_trainer_profile(tr, true, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_op_times(tr, NULL, 0), 0);
    assert_int_equal(snug_trainer_step(tr, ds, idx, 8, &st, NULL), SNUG_OK);
    assert_int_equal(snug_trainer_op_times(tr, t, 32), n);
    assert_int_equal(entry(t, n, "out", SNUG_PHASE_FORWARD)->calls, 2);
    trainer_done(tr);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refuses_bad_configs),       cmocka_unit_test(refuses_bad_graphs),
        cmocka_unit_test(refuses_mismatched_data),   cmocka_unit_test(epochs_have_ceil_steps),
        cmocka_unit_test(short_window_is_its_own_mean), cmocka_unit_test(nonfinite_skips_then_stops),
        cmocka_unit_test(nonfinite_names_the_layer), cmocka_unit_test(skipped_window_keeps_running_statistics),
        cmocka_unit_test(profile_counts_what_ran),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

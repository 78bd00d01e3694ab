/* The budgeted allocator and the memory plan: sizes (and durations) parse strictly, every byte is counted in its
 * category, a budget that is too small is one clear message naming the buffer and the micro-batch that would fit,
 * and the memory a trainer holds is exactly its plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/mem.h"
#include "snug.h"
#include "test_util.h"

static void parses_sizes(void **state) {
    (void)state;
    static const struct { const char *text; size_t bytes; } ok[] = {
        {"256MiB", 256u << 20}, {"1.5GiB", 3u << 29}, {"64M", 64u << 20}, {"1000000", 1000000},
        {"2 KiB", 2048},        {"3kB", 3000},        {"1gb", 1000000000}, {"512b", 512},
        {"1e3", 1000},          {"2.0", 2},           {"1.5KiB", 1536},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t b = 0;
        assert_int_equal(snug_parse_size(ok[i].text, &b, NULL), SNUG_OK);
        assert_int_equal(b, ok[i].bytes);
    }
    static const char *const bad[] = {"",    "0",      "-5MiB", "12XB",    "MiB",   "1e400",
                                      "nan", "0.5",    "99999999999TiB", "1.5", "1.5b", "0x10",
                                      "0x1p20MiB", "inf", " 5MiB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t b = 0;
        snug_error err = {0};
        if (snug_parse_size(bad[i], &b, &err) == SNUG_OK) fail_msg("'%s' parsed as %zu bytes", bad[i], b);
        assert_non_null(strstr(err.message, "size"));
    }
    /* a fraction without a unit is not rounded to a byte count: it names the unit it needs */
    snug_error err = {0};
    size_t b = 0;
    assert_int_equal(snug_parse_size("1.5", &b, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "bad size '1.5': a byte count is a whole number"));
}

static void formats_bytes(void **state) {
    (void)state;
    char buf[32];
    assert_string_equal(snug_format_bytes(44u << 20, buf, sizeof buf), "44.00 MiB");
    assert_string_equal(snug_format_bytes(512, buf, sizeof buf), "512 B");
    assert_string_equal(snug_format_bytes(3u << 29, buf, sizeof buf), "1.50 GiB");
    /* advice rounds up in the last digit, in every unit: read back it is at least the bytes */
    const size_t advised[] = {9741762, (44u << 20) + 1, 66181, 3u << 29, 1023, 4096, (size_t)5e9 + 7};
    for (size_t i = 0; i < sizeof advised / sizeof advised[0]; i++) {
        size_t back = 0, k = 0;
        char text[32]; /* "9.30 MiB" as a flag takes it: "9.30MiB" */
        for (const char *p = snug_format_bytes_up(advised[i], buf, sizeof buf); *p; p++)
            if (*p != ' ') text[k++] = *p;
        text[k] = '\0';
        assert_int_equal(snug_parse_size(text, &back, NULL), SNUG_OK);
        assert_true(back >= advised[i]);
    }
    assert_string_equal(snug_format_bytes_up(9741762, buf, sizeof buf), "9.30 MiB"); /* 9.2905 MiB */
    assert_string_equal(snug_format_bytes_up(44u << 20, buf, sizeof buf), "44.00 MiB");
    /* a count is whole; a rate below 10 keeps its digits */
    assert_string_equal(snug_format_count(1234567, buf, sizeof buf), "1,234,567");
    assert_string_equal(snug_format_count(0.3125, buf, sizeof buf), "0.31");
    assert_string_equal(snug_format_count(7, buf, sizeof buf), "7");
}

/* Durations as --state-every-time and --rank-timeout take them: decimal, with s, m or h, or seconds alone. */
static void parses_durations(void **state) {
    (void)state;
    static const struct { const char *text; double seconds; } ok[] = {
        {"90s", 90}, {"10m", 600}, {"2h", 7200}, {"1.5h", 5400}, {"45", 45}, {"0", 0}, {"0.25s", 0.25}, {"1e3", 1000},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double v = -1;
        assert_int_equal(snug_parse_duration(ok[i].text, &v, NULL), SNUG_OK);
        assert_true(v == ok[i].seconds);
    }
    static const char *const bad[] = {"", "s", "-1s", "1h30", "10 m", "0x10s", "inf", "nan", "1e8", "5d", " 5s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = -1;
        snug_error err = {0};
        if (snug_parse_duration(bad[i], &v, &err) == SNUG_OK) fail_msg("'%s' parsed as %g s", bad[i], v);
        assert_non_null(strstr(err.message, "bad duration"));
    }
    char buf[32];
    assert_string_equal(snug_format_duration(3723, buf, sizeof buf), "1:02:03");
    assert_string_equal(snug_format_duration(44.6, buf, sizeof buf), "0:45");
    assert_string_equal(snug_format_count(1234567, buf, sizeof buf), "1,234,567");
    assert_string_equal(snug_format_count(999, buf, sizeof buf), "999");
    assert_string_equal(snug_format_flops(25.1e6, buf, sizeof buf), "25.1 MFLOP");
    assert_string_equal(snug_format_flops(912, buf, sizeof buf), "912 FLOP");
}

static void counts_categories_and_refuses_over_budget(void **state) {
    (void)state;
    snug_mem mem;
    snug_mem_init(&mem, 1 << 20);
    snug_error err = {0};
    assert_non_null(snug_mem_alloc(&mem, SNUG_MEM_PARAMS, 1000, "model", &err));
    assert_non_null(snug_mem_alloc(&mem, SNUG_MEM_ACTIVATIONS, 300000, "conv1", &err));
    assert_int_equal(mem.in_use[SNUG_MEM_PARAMS], 1024); /* rounded to the 64-byte alignment */
    assert_int_equal(mem.in_use[SNUG_MEM_ACTIVATIONS], 300032);
    assert_null(snug_mem_alloc(&mem, SNUG_MEM_ACTIVATIONS, 1 << 20, "conv2", &err));
    assert_int_equal(err.status, SNUG_E_OOM);
    assert_non_null(strstr(err.message, "out of memory: conv2 activations need"));
    assert_non_null(strstr(err.message, "budget 1.00 MiB"));
    assert_non_null(strstr(err.message, "params 0.0, grads 0.0, optim 0.0, activations 0.3"));
    assert_int_equal(mem.total, 1024 + 300032); /* a refusal changes nothing */
    snug_mem_report rep;
    snug_mem_report_get(&mem, &rep);
    assert_int_equal(rep.peak, 1024 + 300032);
    snug_mem_release_all(&mem);
    assert_int_equal(mem.total, 0);
    assert_int_equal(mem.peak, 1024 + 300032);
}

static snug_train_config config(void) { return snug_train_config_default(); }

/* The plan of batch B in micro-batches of m, no checkpointing, within budget (0: none); over it only when
 * may_exceed. */
static snug_status plan_at(const snug_graph *g, size_t batch, size_t m, size_t budget, bool may_exceed, snug_plan **p,
                           snug_plan_shortfall *why, snug_error *err) {
    const snug_train_config cfg = config();
    snug_plan_request req = request_for(batch, m, NO_CHECKPOINT, budget, &cfg);
    req.may_exceed_budget = may_exceed;
    return snug_plan_new(g, &req, p, why, err);
}

/* The largest micro-batch up to limit whose plan fits budget: limit itself, or the shortfall's answer. */
static size_t largest_fit(const snug_graph *g, size_t budget, size_t limit) {
    snug_plan *p = NULL;
    snug_plan_shortfall why;
    snug_status s = plan_at(g, limit, limit, budget, false, &p, &why, NULL);
    snug_plan_free(p);
    if (s == SNUG_OK) return limit;
    assert_int_equal(s, SNUG_E_OOM);
    return why.largest_micro_batch;
}

/* Whether m's unbudgeted plan holds bytes that give way to a budget: pending rows, kept weights. */
static bool extras_at(const snug_graph *g, size_t m) {
    snug_plan *p;
    snug_plan_summary sum;
    assert_int_equal(plan_at(g, m, m, 0, false, &p, NULL, NULL), SNUG_OK);
    snug_plan_summarize(p, &sum);
    snug_plan_free(p);
    return sum.pending_bytes || sum.kept_bytes;
}

/* What a trainer reserves is what the planner says, category by category, for any micro-batch. */
static void trainer_memory_equals_plan(void **state) {
    (void)state;
    static const char *const models[] = {"mlp", "cnn"};
    for (int i = 0; i < 2; i++) {
        snug_graph *g = model_named(models[i], NULL);
        for (size_t m = 1; m <= 64; m *= 4) {
            snug_train_config cfg = config();
            snug_trainer *tr;
            assert_int_equal(trainer_simple(g, 64, m, &cfg, &tr, NULL), SNUG_OK);
            snug_mem_report held;
            snug_plan_summary planned;
            snug_trainer_memory(tr, &held);
            snug_plan_summarize(snug_trainer_plan(tr), &planned);
            assert_memory_equal(held.in_use, planned.bytes, sizeof held.in_use);
            assert_int_equal(held.total, planned.total);
            /* And a budget of exactly those bytes fits m; where m's plan holds pending weight-gradient rows (at 1 to
             * 3 rows a call) or kept transformed weights (at 1 to 4 samples), a larger micro-batch without them
             * may fit too, and the fit is the largest. */
            size_t fit = largest_fit(g, held.total, 64);
            if (extras_at(g, m)) assert_true(fit >= m);
            else assert_int_equal(fit, m);
            if (fit < 64) { /* and the next micro-batch, planned within that budget, does not fit */
                snug_plan *next;
                snug_plan_summary sum;
                assert_int_equal(plan_at(g, 64, fit + 1, held.total, true, &next, NULL, NULL), SNUG_OK);
                snug_plan_summarize(next, &sum);
                assert_true(sum.total > held.total);
                snug_plan_free(next);
            }
            assert_int_equal(held.peak, held.total);
            trainer_done(tr);
        }
        snug_graph_free(g);
    }
}

/* At micro-batch 1 the mlp's wide layers keep pending weight-gradient rows (counted as gradients); a budget
 * without room for them gets the same micro-batch without them, never a refusal. */
static void pending_rows_give_way_to_the_budget(void **state) {
    (void)state;
    snug_graph *g = model_named("mlp", NULL);
    snug_train_config cfg = config();
    snug_trainer *tr;
    snug_mem_report roomy, tight;
    assert_int_equal(trainer_simple(g, 16, 1, &cfg, &tr, NULL), SNUG_OK);
    snug_trainer_memory(tr, &roomy);
    trainer_done(tr);
    if (roomy.in_use[SNUG_MEM_GRADS] > roomy.in_use[SNUG_MEM_PARAMS]) { /* none without AVX-512 */
        const snug_plan_request req = request_for(16, 1, NO_CHECKPOINT, roomy.total - 1, &cfg);
        assert_int_equal(trainer_for(g, &req, &cfg, &tr, NULL), SNUG_OK);
        snug_trainer_memory(tr, &tight);
        assert_int_equal(tight.in_use[SNUG_MEM_GRADS], tight.in_use[SNUG_MEM_PARAMS]);
        assert_true(tight.total < roomy.total);
        trainer_done(tr);
    }
    snug_graph_free(g);
}

/* At micro-batch 1 the cnn keeps its second convolution's Winograd weights across a window (counted as params,
 * listed in the summary); a budget without room for them gets the same micro-batch without them, and both
 * train to the same bits over steps that change the weights, and evaluate to the same loss after them (the
 * kept ones derived again every window and every evaluation). */
static void kept_weights_give_way_to_the_budget(void **state) {
    (void)state;
    snug_graph *g = model_named("cnn", NULL);
    snug_train_config cfg = config();
    cfg.shuffle = false;
    snug_plan *p;
    snug_plan_summary sum;
    assert_int_equal(plan_at(g, 4, 1, 0, false, &p, NULL, NULL), SNUG_OK);
    snug_plan_summarize(p, &sum);
    snug_plan_free(p);
    if (!sum.kept_bytes) { /* no Winograd without AVX-512 */
        snug_graph_free(g);
        skip();
    }
    assert_int_equal(sum.kept_bytes % 64, 0);
    assert_true(sum.bytes[SNUG_MEM_PARAMS] > sum.bytes[SNUG_MEM_GRADS] - sum.pending_bytes);
    assert_int_equal(plan_at(g, 8, 8, 0, false, &p, NULL, NULL), SNUG_OK);
    snug_plan_summarize(p, &sum);
    snug_plan_free(p);
    assert_int_equal(sum.kept_bytes, 0); /* from 8 samples on, derived every micro-batch */

    enum { N = 8 };
    float x[N * 28 * 28];
    int32_t y[N];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.3f;
    for (int i = 0; i < N; i++) y[i] = i % 10;
    snug_dataset *ds;
    assert_int_equal(snug_dataset_from_memory(x, y, N, 1, 28, 28, 10, &ds, NULL), SNUG_OK);
    snug_trainer *tr[2];
    snug_mem_report rep[2];
    size_t budget = 0;
    for (int t = 0; t < 2; t++) {
        const snug_plan_request req = request_for(4, 1, NO_CHECKPOINT, budget, &cfg);
        assert_int_equal(trainer_for(g, &req, &cfg, &tr[t], NULL), SNUG_OK);
        snug_trainer_memory(tr[t], &rep[t]);
        budget = rep[0].total - 1; /* the second one without the kept weights (nor the pending rows) */
    }
    assert_true(rep[1].in_use[SNUG_MEM_PARAMS] < rep[0].in_use[SNUG_MEM_PARAMS]);
    snug_plan_summarize(snug_trainer_plan(tr[1]), &sum);
    assert_int_equal(sum.micro_batch, 1);
    for (int step = 0; step < 3; step++) {
        size_t idx[4];
        for (int i = 0; i < 4; i++) idx[i] = (size_t)(4 * step + i) % N;
        snug_step_stats st;
        for (int t = 0; t < 2; t++) assert_int_equal(snug_trainer_step(tr[t], ds, idx, 4, &st, NULL), SNUG_OK);
    }
    for (size_t i = 0; i < snug_trainer_param_count(tr[0]); i++) {
        float *a, *b;
        size_t n;
        snug_trainer_param(tr[0], i, &n, &a, NULL);
        snug_trainer_param(tr[1], i, NULL, &b, NULL);
        assert_memory_equal(a, b, n * sizeof(float));
    }
    snug_eval_result ev[2]; /* an evaluation after the steps derives them again too */
    for (int t = 0; t < 2; t++) assert_int_equal(snug_trainer_evaluate(tr[t], ds, &ev[t], NULL), SNUG_OK);
    assert_memory_equal(&ev[0].loss, &ev[1].loss, sizeof ev[0].loss);
    for (int t = 0; t < 2; t++) trainer_done(tr[t]);
    snug_dataset_free(ds);
    snug_graph_free(g);
}

/* A budget below the plan: the request is refused before any memory is reserved, and the shortfall and the
 * message name what it needs, the budget, the categories and the largest micro-batch that fits; with that
 * micro-batch the trainer starts within the budget, and one more sample no longer fits. */
static void too_small_budget_suggests_micro_batch(void **state) {
    (void)state;
    snug_graph *g = model_named("cnn", NULL);
    snug_plan *p = NULL;
    snug_plan_shortfall why;
    snug_error err = {0};
    assert_int_equal(plan_at(g, 256, 256, 16u << 20, false, &p, &why, &err), SNUG_E_OOM);
    assert_null(p);
    assert_non_null(strstr(err.message, "out of memory: "));
    assert_non_null(strstr(err.message, "at micro-batch 256"));
    assert_non_null(strstr(err.message, "over the budget of 16.00 MiB"));
    assert_non_null(strstr(err.message, "params 1.6, grads 1.6, optim 1.6, activations"));
    assert_true(why.needed > why.budget && why.budget == 16u << 20);
    const size_t m = why.largest_micro_batch;
    assert_true(m >= 1 && m < 256);
    char said[64];
    snprintf(said, sizeof said, "The largest micro-batch that fits is %zu", m);
    assert_non_null(strstr(err.message, said));
    assert_true(why.largest_with_recompute >= m);
    snug_train_config cfg = config();
    const snug_plan_request req = request_for(256, m, NO_CHECKPOINT, 16u << 20, &cfg);
    snug_trainer *tr = NULL;
    assert_int_equal(trainer_for(g, &req, &cfg, &tr, &err), SNUG_OK);
    snug_mem_report rep;
    snug_trainer_memory(tr, &rep);
    assert_true(rep.peak <= 16u << 20);
    trainer_done(tr);
    /* One more sample per micro-batch no longer fits: the suggestion is the largest. */
    assert_int_equal(plan_at(g, 256, m + 1, 16u << 20, false, &p, NULL, &err), SNUG_E_OOM);
    snug_graph_free(g);
}

/* Not even micro-batch 1 fits, and no micro-batch could: the parameters alone exceed the budget; the shortfall
 * and the message say so and give the smallest budget that fits. */
static void hopeless_budget_states_minimum(void **state) {
    (void)state;
    snug_graph *g = model_named("mlp", NULL);
    snug_plan *p = NULL;
    snug_plan_shortfall why;
    snug_error err = {0};
    assert_int_equal(plan_at(g, 32, 8, 1u << 20, false, &p, &why, &err), SNUG_E_OOM);
    assert_true(why.fixed > why.budget);
    assert_int_equal(why.largest_micro_batch, 0);
    assert_int_equal(why.largest_with_recompute, 0);
    assert_true(why.smallest_budget > why.fixed);
    assert_non_null(strstr(err.message, "parameters, gradients and optimizer state whatever the micro-batch"));
    assert_non_null(strstr(err.message, "the smallest budget that fits is"));
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_sizes),
        cmocka_unit_test(formats_bytes),
        cmocka_unit_test(parses_durations),
        cmocka_unit_test(counts_categories_and_refuses_over_budget),
        cmocka_unit_test(trainer_memory_equals_plan),
        cmocka_unit_test(pending_rows_give_way_to_the_budget),
        cmocka_unit_test(kept_weights_give_way_to_the_budget),
        cmocka_unit_test(too_small_budget_suggests_micro_batch),
        cmocka_unit_test(hopeless_budget_states_minimum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

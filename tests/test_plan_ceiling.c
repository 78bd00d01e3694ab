/* Planning under a ceiling (plan_build_under, plan_build_auto_under): what the searches use to skip placing
 * candidates that cannot matter. A plan whose total is at most the ceiling has plan_build's total, and placed
 * (plan_place) every offset of it; one above it has plan_build's total or a bound above the ceiling and at most
 * that total. The auto search under a ceiling of its budget answers as without one wherever a plan fits. A
 * request's memo (plan/memo.c) answers every question of its candidate table as a fresh search does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plan/plan.h"
#include "snug.h"

/* How the plans here compute: float32, the products left to snug. */
#define FP32_AUTO plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO)

static const char *const models[] = {"mlp", "cnn", "resmlp", "resnet20", "gpt"};
#define N_MODELS (sizeof models / sizeof models[0])

static snug_graph *zoo(size_t i) {
    snug_graph *g = NULL;
    snug_error err;
    if (snug_model_builtin(models[i], &g, &err) != SNUG_OK) fail_msg("%s", err.message);
    return g;
}

/* b, planned under a ceiling, has a's total; placed, it is a to every offset. */
static void assert_same_plan(const snug_graph *g, const plan *a, plan *b, const char *what) {
    if (a->total != b->total) fail_msg("%s: totals %zu and %zu differ", what, a->total, b->total);
    const snug_optim_config optim = snug_train_config_default().optim;
    assert_int_equal(plan_place(g, &optim, b, NULL), SNUG_OK);
    if (a->total != b->total || a->arena_bytes != b->arena_bytes || a->n_bufs != b->n_bufs || b->unplaced)
        fail_msg("%s: placed, totals %zu and %zu differ", what, a->total, b->total);
    for (int i = 0; i < a->n_bufs; i++)
        if (a->bufs[i].offset != b->bufs[i].offset) fail_msg("%s: buffer %d moved", what, i);
}

static void plan_variants_under_their_total(void **state) {
    (void)state;
    const snug_optim_config optim = snug_train_config_default().optim;
    static const snug_checkpoint_policy policies[] = {{SNUG_CHECKPOINT_NONE, 0}, {SNUG_CHECKPOINT_CHEAP, 0},
                                                      {SNUG_CHECKPOINT_SQRT, 0}};
    for (size_t i = 0; i < N_MODELS; i++) {
        snug_graph *g = zoo(i);
        for (size_t k = 0; k < 3; k++)
            for (int bf16 = 0; bf16 < 2; bf16++)
                for (size_t m = 1; m <= 4; m += 3) {
                    plan_variant v = plan_variant_of(policies[k]);
                    plan_variant_compute(&v, plan_compute_of(bf16 ? SNUG_PRECISION_BF16 : SNUG_PRECISION_FP32,
                                                             SNUG_PRODUCTS_AUTO));
                    char what[96];
                    snprintf(what, sizeof what, "%s policy %zu bf16 %d m %zu", models[i], k, bf16, m);
                    plan full, at, below;
                    assert_int_equal(plan_build(g, m, 2, &optim, &v, &full, NULL), SNUG_OK);
                    assert_false(full.unplaced);
                    assert_int_equal(plan_build_under(g, m, 2, &optim, &v, full.total, &at, NULL), SNUG_OK);
                    assert_same_plan(g, &full, &at, what);
                    assert_int_equal(plan_build_under(g, m, 2, &optim, &v, full.total - 1, &below, NULL), SNUG_OK);
                    assert_true(below.total > full.total - 1 && below.total <= full.total);
                    if (below.total == full.total) assert_same_plan(g, &full, &below, what);
                    plan_free(&full);
                    plan_free(&at);
                    plan_free(&below);
                }
        snug_graph_free(g);
    }
}

/* Budgets from the leanest plan to the plan without checkpointing: the search under its budget picks the same
 * plan wherever one fits, and says it does not fit where none does. */
static void auto_under_its_budget(void **state) {
    (void)state;
    const snug_optim_config optim = snug_train_config_default().optim;
    for (size_t i = 0; i < N_MODELS; i++) {
        snug_graph *g = zoo(i);
        const size_t m = 4;
        plan none, lean;
        plan_variant v = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0});
        assert_int_equal(plan_build(g, m, 2, &optim, &v, &none, NULL), SNUG_OK);
        assert_int_equal(plan_build_auto(g, m, 2, &optim, FP32_AUTO, 1, &lean, NULL), SNUG_OK);
        for (int step = 0; step <= 4; step++) {
            const size_t budget = lean.total - 1 + (none.total - lean.total + 1) * (size_t)step / 4;
            plan a, b;
            assert_int_equal(plan_build_auto(g, m, 2, &optim, FP32_AUTO, budget, &a, NULL), SNUG_OK);
            assert_false(a.unplaced); /* what a caller keeps is placed */
            assert_int_equal(plan_build_auto_under(g, m, 2, &optim, FP32_AUTO, budget, budget, &b, NULL), SNUG_OK);
            if (a.total <= budget) {
                assert_true(a.recompute_flops == b.recompute_flops);
                assert_same_plan(g, &a, &b, models[i]);
            } else {
                assert_true(b.total > budget);
            }
            plan_free(&a);
            plan_free(&b);
        }
        plan spared; /* sparing plans its candidates under a ceiling; the plan it keeps is placed */
        assert_int_equal(plan_build_policy(g, m, 2, &optim, (snug_checkpoint_policy){SNUG_CHECKPOINT_SQRT, 0}, FP32_AUTO,
                                           0, &spared, NULL), SNUG_OK);
        assert_false(spared.unplaced);
        plan_free(&spared);
        plan_free(&none);
        plan_free(&lean);
        snug_graph_free(g);
    }
}

/* The chosen plan and every row of its candidate table, planned again each on its own without a memo, to the
 * byte, for budgets from the leanest plan to the plan without checkpointing, in float32 and bfloat16. */
static void memo_answers_as_fresh_searches(void **state) {
    (void)state;
    for (size_t i = 0; i < N_MODELS; i++) {
        snug_graph *g = zoo(i);
        for (int bf16 = 0; bf16 < 2; bf16++) {
            snug_plan_request req = snug_plan_request_default(16);
            req.threads = 2;
            req.precision = bf16 ? SNUG_PRECISION_BF16 : SNUG_PRECISION_FP32;
            snug_plan *whole = NULL;
            assert_int_equal(snug_plan_new(g, &req, &whole, NULL, NULL), SNUG_OK);
            const size_t none = whole->p.total;
            snug_plan_free(whole);
            req.micro_batch = SNUG_MICRO_BATCH_AUTO;
            req.checkpoint = (snug_checkpoint_policy){SNUG_CHECKPOINT_AUTO, 0};
            snug_plan_shortfall why;
            req.budget = 1;
            assert_int_equal(snug_plan_new(g, &req, &whole, &why, NULL), SNUG_E_OOM);
            for (int step = 0; step <= 3; step++) {
                req.budget = why.smallest_budget + (none - why.smallest_budget) * (size_t)step / 3;
                snug_plan *chosen = NULL, *fresh = NULL;
                snug_plan_set *set = NULL;
                assert_int_equal(snug_plan_new(g, &req, &chosen, NULL, NULL), SNUG_OK);
                assert_int_equal(plan_new_in(g, &req, NULL, &fresh, NULL, NULL), SNUG_OK);
                char what[96];
                snprintf(what, sizeof what, "%s bf16 %d budget %zu: chosen", models[i], bf16, req.budget);
                assert_same_plan(g, &chosen->p, &fresh->p, what);
                snug_plan_free(fresh);
                assert_int_equal(snug_plan_set_new(chosen, &set, NULL), SNUG_OK);
                for (size_t r = 0; r < snug_plan_set_count(set); r++) {
                    const snug_plan *row = snug_plan_set_at(set, r);
                    assert_int_equal(plan_new_in(g, snug_plan_request_of(row), NULL, &fresh, NULL, NULL), SNUG_OK);
                    snprintf(what, sizeof what, "%s bf16 %d budget %zu: row %zu", models[i], bf16, req.budget, r);
                    assert_same_plan(g, &row->p, &fresh->p, what);
                    assert_true(row->p.recompute_flops == fresh->p.recompute_flops);
                    snug_plan_free(fresh);
                }
                snug_plan_set_free(set);
            }
        }
        snug_graph_free(g);
    }
}

/* What the memo answers: a probe's answer where nothing fits (compared by bounds) only to other probes; an
 * answer that fits, or one settled without a ceiling, to every question; nothing across budgets. */
static void memo_keeps_probe_answers_from_exact_questions(void **state) {
    (void)state;
    const snug_optim_config optim = snug_train_config_default().optim;
    const snug_checkpoint_policy automatic = {SNUG_CHECKPOINT_AUTO, 0};
    snug_graph *g = zoo(1);
    plan lean, p;
    assert_int_equal(plan_build_auto(g, 1, 2, &optim, FP32_AUTO, 1, &lean, NULL), SNUG_OK);
    const size_t budget = lean.total; /* fits at m = 1, at no m of 8 */
    plan_memo *memo = plan_memo_new();
    plan_variant v;
    assert_int_equal(plan_build_policy_under(g, 8, 2, &optim, automatic, FP32_AUTO, budget, budget, memo, &p, NULL), SNUG_OK);
    assert_true(p.total > budget);
    plan_free(&p);
    assert_true(plan_memo_find(memo, 8, automatic, budget, budget, &v));
    assert_false(plan_memo_find(memo, 8, automatic, budget, SIZE_MAX, &v));
    assert_false(plan_memo_find(memo, 8, automatic, budget + 1, budget + 1, &v));
    assert_int_equal(plan_build_policy_under(g, 1, 2, &optim, automatic, FP32_AUTO, budget, budget, memo, &p, NULL), SNUG_OK);
    assert_true(p.total <= budget);
    assert_true(plan_memo_find(memo, 1, automatic, budget, SIZE_MAX, &v));
    assert_true(v.policy.kind == p.variant.policy.kind && v.policy.every == p.variant.policy.every &&
                v.selective == p.variant.selective && v.recomputed_segments == p.variant.recomputed_segments &&
                v.spared == p.variant.spared && v.no_window_extras == p.variant.no_window_extras);
    plan_free(&p);
    plan_memo_free(memo);
    plan_free(&lean);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_variants_under_their_total),
        cmocka_unit_test(auto_under_its_budget),
        cmocka_unit_test(memo_answers_as_fresh_searches),
        cmocka_unit_test(memo_keeps_probe_answers_from_exact_questions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The library's defaults mean what the CLI's do, and a setting made in one of two places is not silently lost:
 * a request that only asks for SNUG_MICRO_BATCH_AUTO under a budget chooses the checkpoint policy too (as
 * `snug train --mem` does), and an optimizer set in the run's configuration but not in the plan request is
 * refused by name. Every expectation is another plan of the same build, never a measured number. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "snug.h"

static snug_graph *zoo(const char *name) {
    snug_graph *g = NULL;
    assert_int_equal(snug_model_builtin(name, &g, NULL), SNUG_OK);
    return g;
}

static void summary_of(const snug_graph *g, const snug_plan_request *req, snug_plan_summary *s) {
    snug_plan *p = NULL;
    snug_error err = {0};
    if (snug_plan_new(g, req, &p, NULL, &err) != SNUG_OK) fail_msg("%s", err.message);
    snug_plan_summarize(p, s);
    snug_plan_free(p);
}

/* resmlp (the deep chain) at batch 256 in a budget between the leanest plan and batch 256 in one pass: what the
 * default request with only the micro-batch left free chooses equals what micro-batch and policy both AUTO do. */
static void auto_micro_batch_chooses_the_policy_too(void **state) {
    (void)state;
    snug_graph *g = zoo("resmlp");
    snug_plan_request whole = snug_plan_request_default(256);
    snug_plan_summary one_pass;
    summary_of(g, &whole, &one_pass);
    assert_int_equal(one_pass.requested.kind, SNUG_CHECKPOINT_NONE); /* no budget: the default is none */

    snug_plan_request lean = snug_plan_request_default(256);
    lean.micro_batch = 1;
    lean.checkpoint.kind = SNUG_CHECKPOINT_AUTO;
    lean.budget = one_pass.total; /* AUTO needs a budget; micro-batch 1 with recompute fits this one */
    snug_plan_summary leanest;
    summary_of(g, &lean, &leanest);

    snug_plan_request asked = snug_plan_request_default(256), both;
    asked.micro_batch = SNUG_MICRO_BATCH_AUTO;
    snug_plan_summary by_default, by_auto;
    by_auto.segments = 0;
    /* the first budget, from the roomiest down, where the choice recomputes: there the default must too */
    for (size_t part = 2; part <= 4096 && by_auto.segments == 0; part *= 2) {
        asked.budget = leanest.total + (one_pass.total - leanest.total) / part;
        both = asked;
        both.checkpoint.kind = SNUG_CHECKPOINT_AUTO;
        summary_of(g, &both, &by_auto);
    }
    summary_of(g, &asked, &by_default);
    printf("# resmlp B=256 in %zu bytes: micro-batch %zu, %zu segments recomputed\n", asked.budget,
           by_auto.micro_batch, by_auto.segments);
    assert_true(by_auto.segments > 0);
    assert_int_equal(by_default.requested.kind, by_auto.requested.kind);
    assert_int_equal(by_default.micro_batch, by_auto.micro_batch);
    assert_int_equal(by_default.segments, by_auto.segments);
    assert_int_equal(by_default.total, by_auto.total);

    snug_plan_request fixed = asked; /* a fixed micro-batch keeps the default policy at none */
    fixed.micro_batch = 8;
    fixed.may_exceed_budget = true;
    snug_plan_summary fixed_s;
    summary_of(g, &fixed, &fixed_s);
    assert_int_equal(fixed_s.requested.kind, SNUG_CHECKPOINT_NONE);
    snug_graph_free(g);
}

/* AdamW in the run's configuration, the default SGD in the plan request: refused, naming both fields. */
static void optimizer_set_once_is_refused_by_name(void **state) {
    (void)state;
    snug_graph *g = zoo("mlp");
    snug_plan_request req = snug_plan_request_default(8);
    snug_plan *p = NULL;
    assert_int_equal(snug_plan_new(g, &req, &p, NULL, NULL), SNUG_OK);
    snug_train_config cfg = snug_train_config_default();
    cfg.optim.kind = SNUG_OPTIM_ADAMW;
    snug_trainer *tr = NULL;
    snug_error err = {0};
    assert_int_equal(snug_trainer_new(p, &cfg, &tr, &err), SNUG_E_ARG);
    assert_null(tr);
    assert_non_null(strstr(err.message, "the plan was made for SGD with momentum (snug_plan_request.optim"));
    assert_non_null(strstr(err.message, "the run's optimizer is AdamW (snug_train_config.optim"));
    cfg.optim = req.optim;
    cfg.optim.momentum = 0.5f; /* the same state: a hyperparameter of the run alone */
    cfg.optim.lr = 0.01f;
    assert_int_equal(snug_trainer_new(p, &cfg, &tr, &err), SNUG_OK);
    snug_trainer_free(tr);
    snug_plan_free(p);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_micro_batch_chooses_the_policy_too),
        cmocka_unit_test(optimizer_set_once_is_refused_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

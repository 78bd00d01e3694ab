/* Choosing the micro-batch for a budget. The library's snug_plan_choose weighs micro-batch against recompute;
 * when the user fixed the checkpoint policy only the micro-batch is free, and the planner's total grows with m,
 * so a bisection finds the largest m that fits, which is then evened out over the same number of passes. */
#define _POSIX_C_SOURCE 200809L
#include "cli/autofit.h"

#include "core/error.h"

size_t cli_micro_batches(size_t batch, size_t m) {
    return m == 0 ? 1 : batch / m + (batch % m != 0);
}

/* The reserved total at micro-batch m under policy. */
static snug_status planned_total(const snug_graph *g, const snug_train_config *cfg, size_t m,
                                 snug_checkpoint_policy policy, size_t *total, snug_error *err) {
    snug_plan *p = NULL;
    snug_status st = snug_plan_new(g, cfg, m, policy, cfg->mem_budget, &p, err);
    if (st != SNUG_OK) return st;
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    *total = s.total;
    snug_plan_free(p);
    return SNUG_OK;
}

static snug_status fit_fixed_policy(const snug_graph *g, const snug_train_config *cfg,
                                    snug_checkpoint_policy policy, size_t *m, snug_error *err) {
    size_t budget = cfg->mem_budget, total = 0;
    snug_status st = planned_total(g, cfg, 1, policy, &total, err);
    if (st != SNUG_OK) return st;
    if (total > budget) {
        char need[32], have[32], name[32];
        return snug_fail(err, SNUG_E_OOM,
                         "with checkpoint %s even micro-batch 1 needs %s, over the budget of %s: raise --mem, or "
                         "let snug choose the policy too (--checkpoint auto, or leave --checkpoint out)",
                         snug_format_checkpoint(policy, name, sizeof name),
                         snug_format_bytes(total, need, sizeof need), snug_format_bytes(budget, have, sizeof have));
    }
    size_t lo = 1, hi = cfg->batch;  /* lo fits; find the largest m in [lo, hi] that fits */
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        st = planned_total(g, cfg, mid, policy, &total, err);
        if (st != SNUG_OK) return st;
        if (total <= budget) lo = mid;
        else hi = mid - 1;
    }
    size_t k = cli_micro_batches(cfg->batch, lo);
    *m = cli_micro_batches(cfg->batch, k);  /* ceil(B/k) <= lo: fits, with the passes as even as they go */
    return SNUG_OK;
}

snug_status cli_choose_plan(const snug_graph *g, const snug_train_config *cfg, bool checkpoint_given, size_t *m,
                            snug_checkpoint_policy *policy, snug_error *err) {
    if (!cfg->auto_fit) {
        *m = cfg->micro_batch ? cfg->micro_batch : cfg->batch;
        *policy = cfg->checkpoint;
        return SNUG_OK;
    }
    if (checkpoint_given && cfg->checkpoint.kind != SNUG_CHECKPOINT_AUTO) {
        *policy = cfg->checkpoint;
        return fit_fixed_policy(g, cfg, cfg->checkpoint, m, err);
    }
    return snug_plan_choose(g, cfg, cfg->mem_budget, m, policy, err);
}

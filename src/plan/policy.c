/* A user's checkpoint policy planned: AUTO searches (auto.c), the others are planned as given with their
 * useless segments spared (spare.c); either way a plan over budget only with its optional extras is planned
 * again without them. A question the request's memo (memo.c) has settled is planned once, from its answer. */
#include <stdint.h>

#include "plan/plan.h"

snug_status plan_build_policy_under(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                    snug_checkpoint_policy policy, plan_compute how, size_t budget, size_t ceiling,
                                    plan_memo *memo, plan *p, snug_error *err) {
    plan_variant settled;
    if (plan_memo_find(memo, m, policy, budget, ceiling, &settled))
        return plan_build_under(g, m, threads, optim, &settled, ceiling, p, err);
    snug_status s;
    if (policy.kind == SNUG_CHECKPOINT_AUTO) {
        s = plan_build_auto_in(g, m, threads, optim, how, budget, ceiling, memo, p, err);
    } else {
        s = plan_build_spared(g, m, threads, optim, policy, how, ceiling, p, err);
        if (s == SNUG_OK) s = plan_within_budget(g, m, threads, optim, budget, ceiling, p, err);
    }
    /* sparing compares exact totals whatever the ceiling; AUTO's answer is exact where it fits */
    const bool exact = ceiling == SIZE_MAX || policy.kind != SNUG_CHECKPOINT_AUTO || !budget || p->total <= budget;
    if (s == SNUG_OK) plan_memo_keep(memo, m, policy, budget, exact, &p->variant);
    return s;
}

snug_status plan_build_policy(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                              snug_checkpoint_policy policy, plan_compute how, size_t budget, plan *p, snug_error *err) {
    return plan_build_policy_under(g, m, threads, optim, policy, how, budget, SIZE_MAX, NULL, p, err);
}

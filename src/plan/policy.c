/* A user's checkpoint policy planned: AUTO searches (auto.c), the others are planned as given with their
 * useless segments spared (spare.c); either way a plan over budget only with its optional extras is planned
 * again without them. */
#include <stdint.h>

#include "plan/plan.h"

snug_status plan_build_policy_under(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                    snug_checkpoint_policy policy, bool bf16, size_t budget, size_t ceiling, plan *p,
                                    snug_error *err) {
    if (policy.kind == SNUG_CHECKPOINT_AUTO)
        return plan_build_auto_under(g, m, threads, optim, bf16, budget, ceiling, p, err);
    snug_status s = plan_build_spared(g, m, threads, optim, policy, bf16, ceiling, p, err);
    return s == SNUG_OK ? plan_within_budget(g, m, threads, optim, budget, ceiling, p, err) : s;
}

snug_status plan_build_policy(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                              snug_checkpoint_policy policy, bool bf16, size_t budget, plan *p, snug_error *err) {
    return plan_build_policy_under(g, m, threads, optim, policy, bf16, budget, SIZE_MAX, p, err);
}

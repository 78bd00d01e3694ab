/* How a plan's checkpoint policy and recompute read in the reports (plan_labels.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "report/plan_labels.h"

double snug_plan_recompute_percent(const snug_plan_summary *s) {
    return s->step_flops > 0 ? 100.0 * s->recompute_flops / s->step_flops : 0.0;
}

char *plan_resolved_label(const snug_plan_summary *s, char *buf, size_t len) {
    char policy[32];
    snug_format_checkpoint(s->policy, policy, sizeof policy);
    snprintf(buf, len, "%s%s", policy, s->selective && s->policy.kind != SNUG_CHECKPOINT_CHEAP ? " selective" : "");
    return buf;
}

char *snug_plan_policy_label(const snug_plan_summary *s, char *buf, size_t len) {
    char resolved[48];
    if (s->requested.kind == SNUG_CHECKPOINT_AUTO)
        snprintf(buf, len, "auto: %s", plan_resolved_label(s, resolved, sizeof resolved));
    else snug_format_checkpoint(s->requested, buf, len);
    return buf;
}

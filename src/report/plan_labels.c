/* How a plan's checkpoint policy and recompute read in the reports. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "cli/plan_report.h"

double plan_recompute_percent(const snug_plan_summary *s) {
    return s->step_flops > 0 ? 100.0 * s->recompute_flops / s->step_flops : 0.0;
}

char *plan_resolved_label(const snug_plan_summary *s, char *buf, size_t len) {
    char policy[32];
    snug_format_checkpoint(s->policy, policy, sizeof policy);
    snprintf(buf, len, "%s%s", policy, s->selective && s->policy.kind != SNUG_CHECKPOINT_CHEAP ? " selective" : "");
    return buf;
}

char *plan_policy_label(snug_checkpoint_policy requested, const snug_plan_summary *s, char *buf, size_t len) {
    char resolved[48];
    if (requested.kind == SNUG_CHECKPOINT_AUTO)
        snprintf(buf, len, "auto: %s", plan_resolved_label(s, resolved, sizeof resolved));
    else snug_format_checkpoint(requested, buf, len);
    return buf;
}

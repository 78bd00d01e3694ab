/* The words of a plan for people: its checkpoint policy as asked for and as resolved, and its recompute share
 * (plan_labels.c: snug_plan_policy_label, snug_plan_recompute_percent in snug.h), shared by the text report of a
 * plan set (plan_table.c) and the memory timeline (timeline.c). */
#ifndef SNUG_REPORT_PLAN_LABELS_H
#define SNUG_REPORT_PLAN_LABELS_H

#include <stddef.h>

#include "snug.h"

/* The policy a plan resolved to: "every:3", or "every:3 selective" when only cheap element-wise outputs are
 * recomputed. */
char *plan_resolved_label(const snug_plan_summary *s, char *buf, size_t len);

#endif

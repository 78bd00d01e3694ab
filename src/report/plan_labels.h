/* The words of a plan in `snug plan` and `snug train`: policy labels (plan_labels.c) and the text report of a
 * plan set (plan_table.c). */
#ifndef SNUG_CLI_PLAN_REPORT_H
#define SNUG_CLI_PLAN_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snug.h"

double plan_recompute_percent(const snug_plan_summary *s);  /* recompute FLOPs / step FLOPs, in % */
/* The policy a plan resolved to: "every:3", or "every:3 selective" when only cheap element-wise outputs are
 * recomputed. */
char *plan_resolved_label(const snug_plan_summary *s, char *buf, size_t len);
/* A policy as asked for, with what auto resolved to: "none", "sqrt", "every:4", "auto: every:3 selective". */
char *plan_policy_label(snug_checkpoint_policy requested, const snug_plan_summary *s, char *buf, size_t len);

/* The table of candidates (the chosen row marked '*'), the chosen plan's summary, and every buffer of it. */
void plan_print_table(FILE *out, const snug_plan_set *set, const char *model);
void plan_print_summary(FILE *out, const snug_plan_set *set);
void plan_print_layers(FILE *out, const snug_plan_set *set);

#endif

/* The report of `snug plan`: candidate plans, one per micro-batch m and checkpoint policy, with the chosen one;
 * built by plan_rows.c, printed as text by plan_table.c or as JSON by plan_json.c. */
#ifndef SNUG_CLI_PLAN_REPORT_H
#define SNUG_CLI_PLAN_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snug.h"

typedef struct plan_row {
    size_t m, k;                       /* micro-batch, and micro-batches per optimizer step: ceil(B/m) */
    snug_checkpoint_policy requested;  /* the policy asked for; auto stays auto (s.policy says what it chose) */
    snug_plan *plan;
    snug_plan_summary s;
    bool fits;                         /* a budget was given and s.total is within it */
    bool chosen;
} plan_row;

typedef struct plan_report {
    const char *model;
    const snug_train_config *cfg;      /* batch, mem_budget (0: none), optimizer */
    int threads;                       /* the workspace is sized for these */
    plan_row *rows;                    /* by m, then by policy: none, cheap, sqrt, auto, then any other */
    size_t n_rows;
    size_t chosen;                     /* index of the chosen row */
    bool auto_chosen;                  /* chosen by snug_plan_choose for the budget, not given by flags */
    snug_plan *baseline;               /* the chosen m without checkpointing (may be the chosen row's plan) */
    snug_plan_summary baseline_s;
} plan_report;

/* Plans every candidate for g: m = 1, 2, 4, ... below B, then B, plus the chosen m; policies none and sqrt,
 * auto with a budget, plus the chosen policy. The chosen (m, policy) is given by the caller. */
snug_status plan_report_build(plan_report *r, const snug_graph *g, const char *model, const snug_train_config *cfg,
                              int threads, size_t chosen_m, snug_checkpoint_policy chosen_policy, bool auto_chosen,
                              snug_error *err);
void plan_report_free(plan_report *r);

/* Shared wording of both outputs. */
double plan_recompute_percent(const snug_plan_summary *s);  /* recompute FLOPs / step FLOPs, in % */
/* The policy a plan resolved to: "every:3", or "every:3 selective" when only cheap element-wise outputs are
 * recomputed. */
char *plan_resolved_label(const snug_plan_summary *s, char *buf, size_t len);
/* A policy as asked for, with what auto resolved to: "none", "sqrt", "every:4", "auto: every:3 selective". */
char *plan_policy_label(snug_checkpoint_policy requested, const snug_plan_summary *s, char *buf, size_t len);

/* plan_table.c: the text report. */
void plan_print_table(FILE *out, const plan_report *r);
void plan_print_summary(FILE *out, const plan_report *r);
void plan_print_layers(FILE *out, const plan_report *r);

/* plan_json.c: the same as one JSON document (buffers with layers). 0, or -1 when out of memory or the write
 * failed. */
int plan_print_json(FILE *out, const plan_report *r, bool layers);

#endif

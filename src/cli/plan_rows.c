/* The candidate plans of `snug plan`: micro-batches m = 1, 2, 4, ... up to B (the sizes where memory halves or
 * doubles), each under the policies worth comparing, and the chosen plan among them. Every row keeps its plan,
 * since the summaries point into it. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli/plan_report.h"
#include "core/error.h"

static bool same_policy(snug_checkpoint_policy a, snug_checkpoint_policy b) {
    return a.kind == b.kind && (a.kind != SNUG_CHECKPOINT_EVERY || a.every == b.every);
}

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

/* The candidate micro-batches, ascending: powers of two below B, B, and the chosen m. Returns the count. */
static size_t candidate_sizes(size_t batch, size_t chosen_m, size_t *ms, size_t cap) {
    size_t n = 0;
    for (size_t m = 1; m < batch && n + 2 < cap; m *= 2) {
        ms[n++] = m;
        if (m > batch / 2) break;  /* the next doubling would pass B (or overflow) */
    }
    ms[n++] = batch;
    bool present = false;
    for (size_t i = 0; i < n; i++) present |= ms[i] == chosen_m;
    if (!present) {
        size_t i = n++;
        while (i > 0 && ms[i - 1] > chosen_m) ms[i] = ms[i - 1], i--;
        ms[i] = chosen_m;
    }
    return n;
}

static snug_status add_row(plan_report *r, const snug_graph *g, size_t m, snug_checkpoint_policy policy,
                           snug_error *err) {
    plan_row *row = &r->rows[r->n_rows];
    memset(row, 0, sizeof *row);
    size_t budget = r->cfg->mem_budget;
    snug_status st = snug_plan_new(g, r->cfg, m, policy, budget, &row->plan, err);
    if (st != SNUG_OK) return st;
    r->n_rows++;
    row->m = m;
    row->k = r->cfg->batch / m + (r->cfg->batch % m != 0);
    row->requested = policy;
    snug_plan_summarize(row->plan, &row->s);
    row->fits = budget > 0 && row->s.total <= budget;
    return SNUG_OK;
}

/* The baseline of the timeline and the summary: the chosen m without checkpointing, always among the rows. */
static void find_baseline(plan_report *r) {
    const plan_row *c = &r->rows[r->chosen];
    for (size_t i = 0; i < r->n_rows; i++) {
        const plan_row *row = &r->rows[i];
        if (row->m == c->m && row->requested.kind == SNUG_CHECKPOINT_NONE) {
            r->baseline = row->plan;
            r->baseline_s = row->s;
            return;
        }
    }
}

#define MAX_SIZES 72  /* log2 of any size_t B, plus B and the chosen m */

snug_status plan_report_build(plan_report *r, const snug_graph *g, const char *model, const snug_train_config *cfg,
                              int threads, size_t chosen_m, snug_checkpoint_policy chosen_policy, bool auto_chosen,
                              snug_error *err) {
    memset(r, 0, sizeof *r);
    r->model = model;
    r->cfg = cfg;
    r->threads = threads;
    r->auto_chosen = auto_chosen;
    snug_checkpoint_policy policies[4] = {{SNUG_CHECKPOINT_NONE, 0}, {SNUG_CHECKPOINT_CHEAP, 0},
                                          {SNUG_CHECKPOINT_SQRT, 0}};
    size_t n_policies = 3;
    if (cfg->mem_budget > 0) policies[n_policies++] = (snug_checkpoint_policy){SNUG_CHECKPOINT_AUTO, 0};
    size_t ms[MAX_SIZES];
    size_t n_sizes = candidate_sizes(cfg->batch, chosen_m, ms, MAX_SIZES);
    r->rows = calloc(n_sizes * (n_policies + 1), sizeof *r->rows);
    if (!r->rows) return snug_fail(err, SNUG_E_OOM, "no memory for %zu candidate plans", n_sizes * n_policies);

    for (size_t i = 0; i < n_sizes; i++) {
        bool extra = ms[i] == chosen_m;
        for (size_t p = 0; p < n_policies; p++) {
            snug_status st = add_row(r, g, ms[i], policies[p], err);
            if (st != SNUG_OK) return st;
            if (ms[i] == chosen_m && same_policy(policies[p], chosen_policy)) extra = false;
        }
        if (extra) {
            snug_status st = add_row(r, g, ms[i], chosen_policy, err);
            if (st != SNUG_OK) return st;
        }
    }
    for (size_t j = 0; j < r->n_rows; j++)
        if (r->rows[j].m == chosen_m && same_policy(r->rows[j].requested, chosen_policy)) r->chosen = j;
    r->rows[r->chosen].chosen = true;
    find_baseline(r);
    return SNUG_OK;
}

void plan_report_free(plan_report *r) {
    for (size_t i = 0; i < r->n_rows; i++) snug_plan_free(r->rows[i].plan);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

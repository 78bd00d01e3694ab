/* A chosen plan among its alternatives (snug_plan_set_new): the same request at the micro-batches where memory
 * halves or doubles (1, 2, 4, ... below B, then B) and the chosen one, each under the policies worth comparing,
 * kept even over the budget so that a reader sees what does not fit and by how much. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "plan/plan.h"

struct snug_plan_set {
    snug_plan **plans;      /* by micro-batch, then policy */
    size_t n, chosen;
    size_t baseline;        /* the chosen micro-batch without checkpointing */
};

static bool same_policy(snug_checkpoint_policy a, snug_checkpoint_policy b) {
    return a.kind == b.kind && (a.kind != SNUG_CHECKPOINT_EVERY || a.every == b.every);
}

#define MAX_SIZES 72  /* log2 of any size_t B, plus B and the chosen m */

/* The candidate micro-batches, ascending: powers of two below B, B, and the chosen m; none past the ceiling (a
 * micro-batch too large to plan). Returns the count. */
static size_t candidate_sizes(size_t batch, size_t chosen_m, size_t ceiling, size_t *ms) {
    size_t n = 0;
    for (size_t m = 1; m < batch && m <= ceiling && n + 2 < MAX_SIZES; m *= 2) {
        ms[n++] = m;
        if (m > batch / 2) break; /* the next doubling would pass B (or overflow) */
    }
    if (batch <= ceiling) ms[n++] = batch;
    bool present = false;
    for (size_t i = 0; i < n; i++) present |= ms[i] == chosen_m;
    if (!present) {
        size_t i = n++;
        while (i > 0 && ms[i - 1] > chosen_m) ms[i] = ms[i - 1], i--;
        ms[i] = chosen_m;
    }
    return n;
}

/* The chosen plan's request at micro-batch m under policy, over the budget or not. */
static snug_status add_candidate(snug_plan_set *s, const snug_plan *chosen, size_t m, snug_checkpoint_policy policy,
                                 snug_error *err) {
    snug_plan_request q = chosen->request;
    q.micro_batch = m;
    q.checkpoint = policy;
    q.may_exceed_budget = true;
    snug_status st = plan_new_in(chosen->g, &q, chosen->memo, &s->plans[s->n], NULL, err);
    if (st == SNUG_OK) s->n++;
    return st;
}

/* Whether a and b plan the same thing: one micro-batch, one resolved choice of what is recomputed, the same bytes
 * (an AUTO that resolved to a policy already in the set). */
static bool same_plan(const snug_plan *a, const snug_plan *b) {
    const plan_variant *u = &a->p.variant, *v = &b->p.variant;
    return a->p.m == b->p.m && same_policy(u->policy, v->policy) && u->selective == v->selective &&
           u->recomputed_segments == v->recomputed_segments && u->spared == v->spared && a->p.total == b->p.total &&
           memcmp(a->p.bytes, b->p.bytes, sizeof a->p.bytes) == 0;
}

/* An AUTO row that repeats another row of its micro-batch says nothing new: it goes, unless it is the chosen
 * plan, which stays while the row it repeats goes. */
static void drop_repeats(snug_plan_set *s) {
    bool drop[MAX_SIZES * 5] = {false}; /* decided over the whole set before any plan is freed */
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->n && !drop[i]; j++) {
            if (j == i || !same_plan(s->plans[i], s->plans[j])) continue;
            const bool i_auto = s->plans[i]->requested_policy.kind == SNUG_CHECKPOINT_AUTO;
            const bool j_auto = s->plans[j]->requested_policy.kind == SNUG_CHECKPOINT_AUTO;
            /* the chosen plan always stays, a policy's own row stays unless the chosen AUTO row repeats it */
            drop[i] = i != s->chosen && (i_auto ? j == s->chosen || !j_auto || j < i : j == s->chosen && j_auto);
        }
    size_t kept = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (drop[i]) {
            snug_plan_free(s->plans[i]);
            continue;
        }
        if (i == s->chosen) s->chosen = kept;
        s->plans[kept++] = s->plans[i];
    }
    s->n = kept;
}

static void find_baseline(snug_plan_set *s) {
    const size_t m = s->plans[s->chosen]->p.m;
    s->baseline = s->chosen;
    for (size_t i = 0; i < s->n; i++)
        if (s->plans[i]->p.m == m && s->plans[i]->requested_policy.kind == SNUG_CHECKPOINT_NONE) s->baseline = i;
}

static snug_status fill(snug_plan_set *s, snug_plan *chosen, bool *kept, snug_error *err) {
    snug_checkpoint_policy policies[4] = {{SNUG_CHECKPOINT_NONE, 0}, {SNUG_CHECKPOINT_CHEAP, 0},
                                          {SNUG_CHECKPOINT_SQRT, 0}};
    size_t n_policies = 3, ms[MAX_SIZES];
    if (chosen->request.budget > 0) policies[n_policies++] = (snug_checkpoint_policy){SNUG_CHECKPOINT_AUTO, 0};
    const size_t n_sizes = candidate_sizes(chosen->request.batch, chosen->p.m, plan_micro_batch_ceiling(chosen->g), ms);
    s->plans = calloc(n_sizes * (n_policies + 1), sizeof *s->plans);
    if (!s->plans) return snug_fail(err, SNUG_E_OOM, "no memory for %zu candidate plans", n_sizes * n_policies);
    for (size_t i = 0; i < n_sizes; i++) {
        bool here = ms[i] == chosen->p.m;
        for (size_t k = 0; k <= n_policies; k++) {
            const bool own = here && (k == n_policies || same_policy(policies[k], chosen->requested_policy));
            if (own) {
                s->chosen = s->n;
                s->plans[s->n++] = chosen;
                here = false, *kept = true;
            } else if (k < n_policies) {
                snug_status st = add_candidate(s, chosen, ms[i], policies[k], err);
                if (st != SNUG_OK) return st;
            }
        }
    }
    drop_repeats(s);
    find_baseline(s);
    plan_memo_free(chosen->memo); /* the table is all it was kept for */
    chosen->memo = NULL;
    return SNUG_OK;
}

snug_status snug_plan_set_new(snug_plan *chosen, snug_plan_set **out, snug_error *err) {
    *out = NULL;
    snug_plan_set *s = calloc(1, sizeof *s);
    bool kept = false;
    snug_status st = s ? fill(s, chosen, &kept, err) : snug_fail(err, SNUG_E_OOM, "no memory for a plan set");
    if (st != SNUG_OK) {
        if (!kept) snug_plan_free(chosen);
        snug_plan_set_free(s);
        return st;
    }
    *out = s;
    return SNUG_OK;
}

void snug_plan_set_free(snug_plan_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) snug_plan_free(s->plans[i]);
    free(s->plans);
    free(s);
}

size_t snug_plan_set_count(const snug_plan_set *s) { return s->n; }

const snug_plan *snug_plan_set_at(const snug_plan_set *s, size_t i) { return i < s->n ? s->plans[i] : NULL; }

size_t snug_plan_set_chosen(const snug_plan_set *s) { return s->chosen; }

const snug_plan *snug_plan_set_baseline(const snug_plan_set *s) { return s->plans[s->baseline]; }

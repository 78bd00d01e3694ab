/* What the searches of one plan request settled, kept for the rest of it. Choosing a micro-batch for a budget
 * plans AUTO at a few micro-batches, the request's own plan plans AUTO again at the one chosen, and the candidate
 * table plans AUTO, sqrt and every:N at the table's micro-batches; each AUTO search plans sqrt with its spared
 * segments. A search's answer is a variant, and plan_build_under of that variant is the plan the search
 * returned, so a question asked again is answered by one plan instead of a search.
 *
 * A search made under a ceiling (a probe that only asks whether a plan fits) compares the candidates that do not
 * fit by a lower bound of their totals: its leanest non-fitting answer may not be the exact search's. Its answer
 * is kept for every later question only when it fits, where both searches weigh the same exact totals. */
#include <stdlib.h>

#include "plan/plan.h"

typedef struct memo_entry {
    size_t m, budget;
    snug_checkpoint_policy policy;
    plan_variant variant;
    bool exact;       /* settled as the search without a ceiling settles it */
} memo_entry;

struct plan_memo {
    memo_entry *entries;
    size_t n, cap;
};

plan_memo *plan_memo_new(void) { return calloc(1, sizeof(plan_memo)); }

void plan_memo_free(plan_memo *memo) {
    if (!memo) return;
    free(memo->entries);
    free(memo);
}

static bool same_question(const memo_entry *e, size_t m, snug_checkpoint_policy policy, size_t budget) {
    return e->m == m && e->budget == budget && e->policy.kind == policy.kind &&
           (policy.kind != SNUG_CHECKPOINT_EVERY || e->policy.every == policy.every);
}

static memo_entry *find(plan_memo *memo, size_t m, snug_checkpoint_policy policy, size_t budget) {
    for (size_t i = 0; memo && i < memo->n; i++)
        if (same_question(&memo->entries[i], m, policy, budget)) return &memo->entries[i];
    return NULL;
}

bool plan_memo_find(plan_memo *memo, size_t m, snug_checkpoint_policy policy, size_t budget, size_t ceiling,
                    plan_variant *v) {
    const memo_entry *e = find(memo, m, policy, budget);
    if (!e || (!e->exact && ceiling == SIZE_MAX)) return false;
    *v = e->variant;
    return true;
}

void plan_memo_keep(plan_memo *memo, size_t m, snug_checkpoint_policy policy, size_t budget, bool exact,
                    const plan_variant *v) {
    if (!memo) return;
    memo_entry *e = find(memo, m, policy, budget);
    if (e && e->exact) return;
    if (!e) {
        if (memo->n == memo->cap) {
            const size_t cap = memo->cap ? 2 * memo->cap : 16;
            memo_entry *grown = realloc(memo->entries, cap * sizeof *grown);
            if (!grown) return; /* a memo that forgets only costs time */
            memo->entries = grown, memo->cap = cap;
        }
        e = &memo->entries[memo->n++];
    }
    *e = (memo_entry){.m = m, .budget = budget, .policy = policy, .variant = *v, .exact = exact};
}

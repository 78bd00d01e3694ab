/* Sparing segments that save nothing. A segment of sqrt or every:N is dropped so that its activations need not
 * live from its forward to its backward; but when the step's peak lies elsewhere (the MNIST CNN's is in
 * relu2's backward, where conv2's input, relu2's output and their gradients are live whatever was dropped
 * before), replaying the segment costs a forward and saves no byte. So after planning the policy, each recomputed segment, last first, is tried kept whole: when
 * the plan's total does not grow, it stays kept. The memory a user was promised is unchanged to the byte; only
 * recompute that bought nothing goes. Segments from the 65th on are never spared (plan_variant's mask). */
#include <stdint.h>

#include "plan/plan.h"
#include "plan/spare_bound.h"

/* The highest segment index with a recomputed node, or -1. */
static int last_recomputed_segment(const snug_graph *g, const plan *p) {
    int last = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (p->seg.recompute[i] && p->seg.segment[i] > last) last = p->seg.segment[i];
    return last;
}

static bool recomputes_segment(const snug_graph *g, const plan *p, int s) {
    for (int i = 0; i < g->n_nodes; i++)
        if (p->seg.recompute[i] && p->seg.segment[i] == s) return true;
    return false;
}

/* Keeps whole, one at a time from the last, the recomputed segments of *p whose drop does not lower its total.
 * A variant whose bound (plan/spare_bound.c) already passes the first total is not planned: it would not stay.
 * Each variant is the requested one (asked) with the segments spared so far and s: in bf16, whether to pack
 * is decided again for it (plan_build), not inherited from *p, since a packed plan can lose to the plain one
 * before sparing (by a stage's bytes, at a peak in a replay) and win after it. */
static snug_status spare_segments(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                  const plan_variant *asked, plan *p, snug_error *err) {
    const size_t total = p->total;
    spare_bound bound;
    bool bounded = spare_bound_init(&bound, g, p);
    snug_status st = SNUG_OK;
    for (int s = last_recomputed_segment(g, p); s >= 0 && st == SNUG_OK; s--) {
        if (s >= 64 || !recomputes_segment(g, p, s) || (bounded && spare_bound_total(&bound, s) > total)) continue;
        plan_variant v = *asked;
        v.spared = p->variant.spared | (uint64_t)1 << s;
        plan q;
        /* only a total at most the first one's matters: above it, the bound decides without placing */
        if ((st = plan_build_under(g, m, threads, optim, &v, total, &q, err)) != SNUG_OK) break;
        if (q.total <= total) {
            if (bounded) spare_bound_free(&bound);
            plan_free(p);
            *p = q;
            bounded = spare_bound_init(&bound, g, p); /* the bounds are of the plan kept */
        } else {
            plan_free(&q);
        }
    }
    if (bounded) spare_bound_free(&bound);
    return st;
}

snug_status plan_build_spared(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                              snug_checkpoint_policy policy, plan_compute how, size_t ceiling, plan *p, snug_error *err) {
    plan_variant v = plan_variant_of(policy);
    plan_variant_compute(&v, how);
    const bool spares = policy.kind == SNUG_CHECKPOINT_SQRT || policy.kind == SNUG_CHECKPOINT_EVERY;
    /* sparing compares with the first plan's exact total, whatever the ceiling */
    snug_status s = plan_build_under(g, m, threads, optim, &v, spares && ceiling != SIZE_MAX ? PLAN_EXACT_TOTAL : ceiling,
                                     p, err);
    if (s == SNUG_OK && spares) {
        s = spare_segments(g, m, threads, optim, &v, p, err);
        if (s != SNUG_OK) plan_free(p);
    }
    /* the plan kept may be one of the unplaced candidates: in full where the caller keeps it */
    return s == SNUG_OK && ceiling == SIZE_MAX ? plan_place(g, optim, p, err) : s;
}

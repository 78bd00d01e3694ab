/* AUTO: the checkpoint set with the least recompute whose plan fits the budget. Candidates are the `cheap` policy
 * (only element-wise and normalisation layers replayed), sqrt as the user gets it (segments whose recompute saves
 * nothing spared), and segmentations into runs of N layers, each either dropping every output of a segment or
 * only the cheap element-wise ones (selective, Korthikanti et al. 2022), recomputing the first j segments (the
 * earliest activations live longest, so dropping them saves the most). For a given (N, selective), recompute
 * grows with j and memory shrinks, so the smallest j that fits is found by bisection; the answer is the fitting
 * candidate with the least recompute. N runs over 1..8, powers of two and multiples of sqrt(depth): enough
 * resolution for the trade-off at a few hundred plans, each a fraction of a millisecond. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "plan/plan.h"
#include "plan/spare_bound.h"

/* The recompute of one segment length with its first j segments recomputed, for every j (plan/leading.c). */
typedef struct leading_flops {
    size_t every;
    bool selective;
    double *upto;     /* n + 1 entries, or NULL */
    int n;            /* segments */
} leading_flops;

typedef struct search {
    const snug_graph *g;
    size_t m, budget;
    size_t ceiling;   /* the caller's (plan_build_under) */
    int threads;
    const snug_optim_config *optim;
    plan_compute how; /* every candidate's number format and product */
    plan best;        /* the cheapest fitting plan so far, or the leanest when none fits */
    bool have, fits;
    plan_reads reads; /* for the segments of a candidate that is not planned */
    plan_memo *memo;  /* the request's, for sqrt */
    leading_flops lead; /* the recompute of every leading-segment count of one segmentation */
    plan base;          /* the last fitting plan that did not beat best (have_base) */
    bool have_base;
    int version;        /* counts the plans best and base have held */
    spare_bound bound;  /* of bound_plan as it was at bound_of (bounded: any) */
    const plan *bound_plan;
    int bound_of;
    bool bounded;
    snug_status status;
    snug_error *err;
} search;

static size_t layer_count(const snug_graph *g) {
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += !(g->nodes[i].op->flags & (OP_IS_INPUT | OP_IS_VIEW));
    return n;
}

/* Keeps plan q when it beats the best so far; else keeps a fitting one as the base of the bounds of its
 * segmentation's fewer leading segments (surely_over), or frees it. Returns whether it fits. */
static bool consider(search *s, plan *q) {
    bool fits = !s->budget || q->total <= s->budget;
    bool better = !s->have || (fits && !s->fits) ||
                  (fits && s->fits ? q->recompute_flops < s->best.recompute_flops ||
                                         (q->recompute_flops == s->best.recompute_flops && q->total < s->best.total)
                                   : !s->fits && q->total < s->best.total);
    plan *kept = better ? &s->best : fits ? &s->base : NULL;
    if (kept && (better ? s->have : s->have_base)) plan_free(kept);
    if (kept) {
        *kept = *q;
        s->version++;
    } else {
        plan_free(q);
    }
    if (better) s->have = true, s->fits = fits;
    else if (fits) s->have_base = true;
    return fits;
}

/* The total above which a candidate can neither fit nor beat the best so far, so need not be placed (the
 * caller's ceiling at most). Once a candidate fits, only fitting ones can win; before, a leaner one can. The
 * first is placed unless the caller's ceiling says otherwise: the answer is always a placed plan where it can
 * matter to the caller. Without a budget every candidate fits and its total breaks ties: no bound. */
static size_t candidate_ceiling(const search *s) {
    if (!s->have || !s->budget) return s->ceiling;
    size_t c = s->budget;
    if (!s->fits && s->best.total - 1 > c) c = s->best.total - 1;
    return c < s->ceiling ? c : s->ceiling;
}

static plan_variant leading(const search *s, size_t every, bool selective, int recomputed) {
    return (plan_variant){.policy = {SNUG_CHECKPOINT_EVERY, every}, .selective = selective,
                          .recomputed_segments = recomputed, .bf16 = s->how.bf16, .product = s->how.product};
}

/* s->lead for (every, selective); false when memory runs out (then plan_segment answers). */
static bool lead_flops(search *s, size_t every, bool selective) {
    leading_flops *l = &s->lead;
    if (l->upto && l->every == every && l->selective == selective) return true;
    free(l->upto);
    *l = (leading_flops){.every = every, .selective = selective};
    const plan_variant all = leading(s, every, selective, -1);
    l->upto = plan_leading_recompute(s->g, &s->reads, &all, s->m, &l->n);
    return l->upto != NULL;
}

/* The recompute FLOPs of v: from s->lead for a leading-segment variant, else from its segments. */
static bool recompute_of(search *s, const plan_variant *v, double *flops) {
    if (v->policy.kind == SNUG_CHECKPOINT_EVERY && v->recomputed_segments >= 0 && !v->spared &&
        lead_flops(s, v->policy.every, v->selective) && v->recomputed_segments <= s->lead.n) {
        *flops = s->lead.upto[v->recomputed_segments];
        return true;
    }
    plan_segments seg;
    if ((s->status = plan_segment(s->g, &s->reads, v, &seg)) != SNUG_OK) {
        snug_fail(s->err, s->status, "out of memory while planning model '%s'", s->g->name);
        return false;
    }
    *flops = plan_recompute_flops(s->g, &seg, s->m);
    plan_segments_free(&seg);
    return true;
}

/* Whether v recomputes more than the best fitting plan so far: then it cannot win, fitting or not. Its
 * segments alone say so, without planning it. */
static bool recomputes_more(search *s, const plan_variant *v) {
    double flops;
    if (!s->fits || s->status != SNUG_OK || !recompute_of(s, v, &flops)) return false;
    return flops > s->best.recompute_flops;
}

/* Whether p is v's segmentation with more leading segments recomputed: then v is p with the segments between
 * spared. */
static bool recomputes_more_of(const plan *p, const plan_variant *v) {
    const plan_variant *b = &p->variant;
    return b->policy.kind == SNUG_CHECKPOINT_EVERY && b->policy.every == v->policy.every &&
           b->selective == v->selective && !b->spared && !b->bf16 && b->recomputed_segments > v->recomputed_segments;
}

/* Whether leading-segment variant v surely does not fit, by a bound (plan/spare_bound.c) from the best plan so
 * far or the base, where one is its segmentation with more segments recomputed. The bound leaves out pending
 * rows and kept weights, so it holds for v without them too. Once a plan fits, one that does not cannot win,
 * so v need not be planned. */
static bool surely_over(search *s, const plan_variant *v) {
    if (!s->fits || !s->budget || v->policy.kind != SNUG_CHECKPOINT_EVERY || v->recomputed_segments < 0 || v->spared ||
        v->bf16)
        return false;
    const plan *p = recomputes_more_of(&s->best, v) ? &s->best
                    : s->have_base && recomputes_more_of(&s->base, v) ? &s->base : NULL;
    if (!p) return false;
    if (s->bound_plan != p || s->bound_of != s->version) {
        if (s->bounded) spare_bound_free(&s->bound);
        s->bounded = spare_bound_init(&s->bound, s->g, p);
        s->bound_plan = p;
        s->bound_of = s->version;
    }
    const size_t bound = s->bounded ? spare_bound_range(&s->bound, v->recomputed_segments, p->variant.recomputed_segments)
                                    : 0;
    const size_t extras = p->pending_bytes + p->kept_bytes;
    return bound > extras && bound - extras > s->budget;
}

/* Plans v (without pending rows when they do not fit) and considers it. Returns whether it fits; one that
 * recomputes more than a fitting plan found before is not planned, and counts as fitting: the bisection then
 * looks at fewer recomputed segments, the only ones that can still win (search_segments). */
static bool try_variant(search *s, const plan_variant *v) {
    plan q;
    if (s->status != SNUG_OK) return false;
    if (recomputes_more(s, v)) return s->status == SNUG_OK;
    if (surely_over(s, v)) return false;
    const size_t ceiling = candidate_ceiling(s);
    if ((s->status = plan_build_under(s->g, s->m, s->threads, s->optim, v, ceiling, &q, s->err)) != SNUG_OK ||
        (s->status = plan_within_budget(s->g, s->m, s->threads, s->optim, s->budget, ceiling, &q, s->err)) != SNUG_OK)
        return false;
    return consider(s, &q);
}

/* Plans a user policy (with its spared segments) and considers it. */
static void try_policy(search *s, snug_checkpoint_kind kind) {
    plan q;
    if (s->status != SNUG_OK) return;
    const size_t ceiling = candidate_ceiling(s);
    if ((s->status = plan_build_policy_under(s->g, s->m, s->threads, s->optim, (snug_checkpoint_policy){kind, 0},
                                             s->how, s->budget, ceiling, s->memo, &q, s->err)) == SNUG_OK)
        consider(s, &q);
}

/* The most leading segments, at most hi, that recompute no more than the best fitting plan so far (all of hi
 * before one fits; 0 where even one recomputes more), by bisection: recompute grows with them. */
static int most_worth_recomputing(search *s, size_t every, bool selective, int hi) {
    int lo = 0;
    while (lo < hi && s->status == SNUG_OK) {
        const int mid = lo + (hi - lo + 1) / 2;
        const plan_variant v = leading(s, every, selective, mid);
        if (recomputes_more(s, &v)) hi = mid - 1;
        else lo = mid;
    }
    return lo;
}

/* The smallest number of recomputed leading segments that fits, by bisection over j in [1, segments - 1].
 * Memory shrinks as j grows (the bisection's premise) and recompute grows, so only the j up to the most that
 * recompute no more than the best fitting plan so far can win: the bisection runs below that j, and where that
 * j does not fit, no smaller one does, and the length is done after one plan. During the bisection a j that
 * recomputes more than a plan found meanwhile is passed over as if it fitted (try_variant), for the same
 * reason. The bisection then plans only around the j that can beat the best: a few plans a length. */
static void search_segments(search *s, size_t every, bool selective, size_t layers) {
    int segments = (int)((layers + every - 1) / every), lo = 1;
    int hi = segments - 1 >= 1 ? most_worth_recomputing(s, every, selective, segments - 1) : 0;
    if (hi < 1) return;
    const plan_variant most = leading(s, every, selective, hi);
    if (!try_variant(s, &most)) return; /* even the most segments worth recomputing do not fit */
    while (lo < hi && s->status == SNUG_OK) {
        int mid = lo + (hi - lo) / 2;
        const plan_variant v = leading(s, every, selective, mid);
        if (try_variant(s, &v)) hi = mid;
        else lo = mid + 1;
    }
}

static bool wanted_length(size_t every, size_t layers) {
    if (every <= 8) return true;
    if ((every & (every - 1)) == 0) return true;
    double r = (double)every / sqrt((double)layers);
    static const double multiples[] = {0.5, 0.75, 1.0, 1.5, 2.0, 3.0};
    for (size_t i = 0; i < sizeof multiples / sizeof multiples[0]; i++)
        if (fabs(r - multiples[i]) * sqrt((double)layers) < 0.5) return true;
    return false;
}

snug_status plan_build_auto(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                            plan_compute how, size_t budget, plan *p, snug_error *err) {
    return plan_build_auto_under(g, m, threads, optim, how, budget, SIZE_MAX, p, err);
}

snug_status plan_build_auto_under(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                  plan_compute how, size_t budget, size_t ceiling, plan *p, snug_error *err) {
    return plan_build_auto_in(g, m, threads, optim, how, budget, ceiling, NULL, p, err);
}

snug_status plan_build_auto_in(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim, plan_compute how,
                               size_t budget, size_t ceiling, plan_memo *memo, plan *p, snug_error *err) {
    search s = {.g = g, .m = m, .budget = budget, .ceiling = ceiling, .threads = threads, .optim = optim,
                .how = how, .memo = memo, .err = err, .bound_of = -1};
    if (!plan_reads_init(g, &s.reads)) return snug_fail(err, SNUG_E_OOM, "out of memory while planning model '%s'", g->name);
    plan_variant none = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0});
    plan_variant cheap = plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_CHEAP, 0});
    plan_variant_compute(&none, how);
    plan_variant_compute(&cheap, how);
    if (!try_variant(&s, &none) && s.status == SNUG_OK) {
        try_variant(&s, &cheap);
        try_policy(&s, SNUG_CHECKPOINT_SQRT); /* so that auto never recomputes more than sqrt where sqrt fits */
        size_t layers = layer_count(g);
        for (size_t every = 1; every < layers && s.status == SNUG_OK; every++)
            if (wanted_length(every, layers))
                for (int sel = 0; sel < 2; sel++) search_segments(&s, every, sel == 1, layers);
    }
    plan_reads_free(&s.reads);
    free(s.lead.upto);
    if (s.bounded) spare_bound_free(&s.bound);
    if (s.have_base) plan_free(&s.base);
    if (s.status != SNUG_OK) {
        if (s.have) plan_free(&s.best);
        return s.status;
    }
    *p = s.best;
    return ceiling == SIZE_MAX ? plan_place(g, optim, p, err) : SNUG_OK; /* in full where the caller keeps it */
}


/* AUTO: the checkpoint set with the least recompute whose plan fits the budget. The candidates are segmentations
 * into runs of N layers (every N from 1 to the depth), each either dropping every output of a segment or only
 * the cheap element-wise ones (selective, Korthikanti et al. 2022), recomputing the first j segments (the
 * earliest activations live longest, so dropping them saves the most). Recompute FLOPs follow from the
 * segmentation alone, so candidates are sorted by them and planned in that order: the first that fits is the
 * cheapest that fits. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "plan/plan.h"

typedef struct candidate {
    plan_variant v;
    double recompute;
} candidate;

typedef struct candidate_list {
    candidate *c;
    size_t n, cap;
} candidate_list;

static bool push(candidate_list *l, plan_variant v, double recompute) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        candidate *c = realloc(l->c, cap * sizeof *c);
        if (!c) return false;
        l->c = c;
        l->cap = cap;
    }
    l->c[l->n++] = (candidate){v, recompute};
    return true;
}

static int by_recompute(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->recompute != y->recompute) return x->recompute < y->recompute ? -1 : 1;
    /* Equal cost: prefer plain segments (fewer kept tensors to reason about), then longer ones. */
    if (x->v.selective != y->v.selective) return x->v.selective ? 1 : -1;
    return x->v.policy.every > y->v.policy.every ? -1 : x->v.policy.every < y->v.policy.every;
}

static size_t layer_count(const snug_graph *g) {
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += !(g->nodes[i].op->flags & (OP_IS_INPUT | OP_IS_VIEW));
    return n;
}

/* Every variant worth planning, with its recompute FLOPs per sample. */
static bool list_candidates(const snug_graph *g, candidate_list *l) {
    if (!push(l, plan_variant_of((snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0}), 0)) return false;
    size_t layers = layer_count(g);
    for (size_t every = 1; every < layers; every++) {
        int segments = (int)((layers + every - 1) / every);
        for (int sel = 0; sel < 2; sel++)
            for (int j = 1; j < segments; j++) {
                plan_variant v = {{SNUG_CHECKPOINT_EVERY, every}, sel == 1, j};
                plan_segments s;
                if (plan_segment(g, &v, &s) != SNUG_OK) return false;
                double f = plan_segments_recompute_flops(g, &s);
                bool any = s.n_segments > 0;
                plan_segments_free(&s);
                if (any && !push(l, v, f)) return false;
            }
    }
    qsort(l->c, l->n, sizeof *l->c, by_recompute);
    return true;
}

snug_status plan_build_auto(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                            size_t budget, plan *p, snug_error *err) {
    candidate_list l = {0};
    if (!list_candidates(g, &l)) {
        free(l.c);
        return snug_fail(err, SNUG_E_OOM, "out of memory while planning model '%s'", g->name);
    }
    /* Sorted by recompute: the first candidate that fits is the cheapest that fits. When none fits, the one
     * with the least memory is the plan to report. */
    plan best = {0};
    bool have_best = false;
    snug_status s = SNUG_OK;
    for (size_t i = 0; i < l.n; i++) {
        plan q;
        if ((s = plan_build(g, m, threads, optim, &l.c[i].v, &q, err)) != SNUG_OK) break;
        bool fits = !budget || q.total <= budget;
        if (fits || !have_best || q.total < best.total) {
            if (have_best) plan_free(&best);
            best = q;
            have_best = true;
        } else {
            plan_free(&q);
        }
        if (fits) break;
    }
    free(l.c);
    if (s != SNUG_OK) {
        if (have_best) plan_free(&best);
        return s;
    }
    *p = best;
    return SNUG_OK;
}

/* A lower bound of the total of a plan with one more segment kept whole (plan/spare_bound.c), from the plan
 * without it, in the work of that segment: sparing rejects most variants by it instead of planning them. */
#ifndef SNUG_PLAN_SPARE_BOUND_H
#define SNUG_PLAN_SPARE_BOUND_H

#include "plan/plan.h"

typedef struct spare_bound {
    const snug_graph *g;
    const plan *p;       /* the plan whose segments are spared; must outlive the bound */
    size_t fixed;        /* p's total without its arena, with the least workspace of any variant */
    int *by_segment;     /* nodes grouped by segment: by_segment[start[s] .. start[s + 1]) */
    int *start;
    int n_segments;
    int *stamp;          /* per tensor: the last trial that counted its buffer */
    int trial;
} spare_bound;

/* Prepares the bounds of p's variants (p's total exact: planned without a ceiling or under one it does not
 * pass); false where there are none (bfloat16, no memory): then every bound is
 * 0, and b needs no spare_bound_free. */
bool spare_bound_init(spare_bound *b, const snug_graph *g, const plan *p);
void spare_bound_free(spare_bound *b);
/* At most the total of p's variant with segment s spared as well, as plan_build makes it (0: no bound). */
size_t spare_bound_total(spare_bound *b, int s);
/* The same for segments [from, to) spared at once. */
size_t spare_bound_range(spare_bound *b, int from, int to);

#endif

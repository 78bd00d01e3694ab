/* The recompute of a segmentation with its first j segments recomputed, for every j at once. AUTO bisects over j
 * for each segment length (plan/auto.c) and first asks, at each j, whether the variant recomputes more than the
 * best plan so far; planning the segments of each j to learn that is a pass over the graph per question.
 *
 * Whether a layer is dropped depends only on the layers of its own segment: one that a layer of another segment
 * reads is a boundary, kept under every j, and the passes that keep more (only the cheap layers, only the useful
 * ones, none whose reader regenerates it) look at a layer's readers and sources, which are then in its segment
 * or kept. So the first j segments drop exactly what they drop with every segment but the last recomputed, and
 * since the segments ascend with the nodes, the sum over those layers in node order is a prefix of that
 * segmentation's sum, to the bit (plan_recompute_flops adds in the same order). */
#include <stdlib.h>

#include "plan/plan.h"

double *plan_leading_recompute(const snug_graph *g, const plan_reads *r, const plan_variant *v, size_t m, int *n) {
    plan_variant all = *v;
    all.recomputed_segments = -1;
    plan_segments seg;
    if (plan_segment(g, r, &all, &seg) != SNUG_OK) return NULL;
    int top = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (seg.segment[i] > top) top = seg.segment[i];
    *n = top + 1;
    double *upto = malloc(((size_t)*n + 1) * sizeof *upto);
    if (upto) {
        double f = 0;
        int j = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const graph_node *nd = &g->nodes[i];
            while (j <= seg.segment[i]) upto[j++] = f; /* the layers before segment j's first */
            if (seg.recompute[i]) f += (nd->op->flops ? nd->op->flops(nd) : 0) * (double)m;
        }
        while (j <= *n) upto[j++] = f;
    }
    plan_segments_free(&seg);
    return upto;
}

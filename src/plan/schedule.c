/* The schedule of one micro-batch: every layer's forward in graph order; then backward in reverse, where a
 * segment with dropped outputs first replays the forward of those layers (from the kept tensors it reads),
 * then back-propagates through the segment; then the optimizer update. */
#include <stdlib.h>

#include "ops/op.h"
#include "plan/plan.h"

static bool is_layer(const graph_node *n) { return !(n->op->flags & (OP_IS_INPUT | OP_IS_VIEW)); }

/* True when node i is the highest layer of its segment that holds any recomputed layer. */
static bool opens_segment_backward(const snug_graph *g, const plan_segments *s, int i) {
    for (int j = i + 1; j < g->n_nodes; j++)
        if (is_layer(&g->nodes[j]) && s->segment[j] == s->segment[i]) return false;
    for (int j = i; j >= 0 && s->segment[j] == s->segment[i]; j--)
        if (s->recompute[j]) return true;
    return false;
}

bool plan_schedule(const snug_graph *g, plan *p) {
    /* At most: forward + recompute + backward of every node, and the update. */
    p->steps = malloc(((size_t)g->n_nodes * 3 + 1) * sizeof *p->steps);
    if (!p->steps) return false;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (is_layer(&g->nodes[i])) p->steps[n++] = (sched_step){i, SNUG_PHASE_FORWARD};
    p->n_forward = n;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (!is_layer(&g->nodes[i])) continue;
        if (opens_segment_backward(g, &p->seg, i)) {
            int first = i;
            while (first > 0 && p->seg.segment[first - 1] == p->seg.segment[i]) first--;
            for (int j = first; j <= i; j++)
                if (p->seg.recompute[j]) p->steps[n++] = (sched_step){j, SNUG_PHASE_RECOMPUTE};
        }
        p->steps[n++] = (sched_step){i, SNUG_PHASE_BACKWARD};
    }
    p->steps[n++] = (sched_step){-1, SNUG_PHASE_UPDATE};
    p->n_steps = n;
    return true;
}

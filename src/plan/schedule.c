/* The schedule of one micro-batch: every layer's forward in graph order; then backward in reverse, where a
 * segment with dropped outputs first replays the forward of those layers (from the kept tensors it reads),
 * then back-propagates through the segment; then the optimizer update. */
#include <stdlib.h>

#include "ops/op.h"
#include "plan/plan.h"

static bool is_layer(const graph_node *n) { return !(n->op->flags & (OP_IS_INPUT | OP_IS_VIEW)); }

/* Per node: whether it is the highest layer of its segment and a recomputed node lies in the run of nodes of
 * its segment that ends at it. Then its backward is the first of the segment's, and the replay comes before it. */
static bool *segment_openers(const snug_graph *g, const plan_segments *s) {
    const size_t nn = (size_t)g->n_nodes + 1;
    bool *opens = calloc(nn, sizeof *opens);
    int *last_layer = malloc(nn * sizeof *last_layer); /* per segment id (ids are below the node count + 1) */
    if (!opens || !last_layer) {
        free(opens);
        free(last_layer);
        return NULL;
    }
    for (size_t i = 0; i < nn; i++) last_layer[i] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (is_layer(&g->nodes[i])) last_layer[s->segment[i]] = i;
    bool recomputed_in_run = false;
    for (int i = 0; i < g->n_nodes; i++) {
        if (i == 0 || s->segment[i - 1] != s->segment[i]) recomputed_in_run = false;
        recomputed_in_run |= s->recompute[i];
        opens[i] = last_layer[s->segment[i]] == i && recomputed_in_run;
    }
    free(last_layer);
    return opens;
}

bool plan_schedule(const snug_graph *g, plan *p) {
    /* At most: forward + recompute + backward of every node, and the update. */
    p->steps = malloc(((size_t)g->n_nodes * 3 + 1) * sizeof *p->steps);
    bool *opens = segment_openers(g, &p->seg);
    if (!p->steps || !opens) {
        free(opens);
        return false;
    }
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (is_layer(&g->nodes[i])) p->steps[n++] = (sched_step){i, SNUG_PHASE_FORWARD};
    p->n_forward = n;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (!is_layer(&g->nodes[i])) continue;
        if (opens[i]) {
            int first = i;
            while (first > 0 && p->seg.segment[first - 1] == p->seg.segment[i]) first--;
            for (int j = first; j <= i; j++)
                if (p->seg.recompute[j]) p->steps[n++] = (sched_step){j, SNUG_PHASE_RECOMPUTE};
        }
        p->steps[n++] = (sched_step){i, SNUG_PHASE_BACKWARD};
    }
    p->steps[n++] = (sched_step){-1, SNUG_PHASE_UPDATE};
    p->n_steps = n;
    free(opens);
    return true;
}

/* A lower bound of the total of a plan that keeps one more segment whole (or several), from the plan it spares
 * them of, in the work of those segments alone. Sparing (plan/spare.c) keeps a variant only when its total does not
 * grow, and most variants are rejected: keeping a segment's activations from its forward to its backward puts
 * them beside everything live as forward ends. Planning each variant in full to learn that is a pass over the
 * whole graph per segment; this bound rejects it from the segment's own layers.
 *
 * The bound is the activations live at the last forward step L. Forward steps are the same in both plans, and
 * whether a buffer is live at L depends only on whether a step after forward reads it. Sparing segment s changes
 * what the steps of s's layers read and nothing else (a layer outside s that reads s's outputs makes them
 * crossing, never recomputed; regenerated inputs (plan/regen.c) likewise involve s's recompute only through s's
 * layers and their inputs' producers). So, from the plan's live bytes at L:
 *   - minus every buffer a step of s reads that s did not make (a layer's inputs, and the inputs of their
 *     producers, which a regenerated input reads): it may die before L once s is not replayed, unless the
 *     backward of the layer that made it reads it;
 *   - plus, for each layer s replayed, the buffers the spared plan surely keeps past L: the saved bytes that
 *     had a replayed copy (backward reads the forward's instead), and the output of a layer whose backward
 *     reads it (OP_KEEPS_OUTPUT).
 * Every other buffer is live at L in both plans or in neither; an in-place share hands memory over at one step,
 * so no two of its buffers are counted at L. The fixed blocks are the plan's, with the workspace at its least
 * (without regeneration stages, which only add). bfloat16 plans keep packed copies whose lifetimes follow a
 * second walk: no bound there (0). */
#include "plan/spare_bound.h"

#include <stdlib.h>

#include "core/checked.h"
#include "core/mem.h"
#include "ops/op.h"

static bool is_layer(const graph_node *n) { return !(n->op->flags & (OP_IS_INPUT | OP_IS_VIEW)); }

/* The least workspace any variant of p's micro-batch takes: the ops' own, without regeneration stages. */
static size_t least_workspace(const snug_graph *g, const plan *p) {
    size_t most = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const size_t w = plan_op_workspace(&g->nodes[i], &p->variant, p->m, p->threads);
        if (w != (size_t)-1 && w > most) most = w;
    }
    return most && !size_align(most, SNUG_MEM_ALIGN, &most) ? 0 : most;
}

/* Groups the nodes by segment (a counting sort): by_segment[start[s] .. start[s + 1]) are segment s's. */
static bool group_by_segment(const snug_graph *g, spare_bound *b) {
    int top = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (b->p->seg.segment[i] > top) top = b->p->seg.segment[i];
    b->n_segments = top + 1;
    b->start = calloc((size_t)b->n_segments + 1, sizeof *b->start);
    b->by_segment = malloc(((size_t)g->n_nodes + 1) * sizeof *b->by_segment);
    if (!b->start || !b->by_segment) return false;
    for (int i = 0; i < g->n_nodes; i++) b->start[b->p->seg.segment[i] + 1]++;
    for (int s = 0; s < b->n_segments; s++) b->start[s + 1] += b->start[s];
    int *next = malloc(((size_t)b->n_segments + 1) * sizeof *next);
    if (!next) return false;
    for (int s = 0; s < b->n_segments; s++) next[s] = b->start[s];
    for (int i = 0; i < g->n_nodes; i++) b->by_segment[next[b->p->seg.segment[i]]++] = i;
    free(next);
    return true;
}

bool spare_bound_init(spare_bound *b, const snug_graph *g, const plan *p) {
    *b = (spare_bound){.g = g, .p = p};
    if (p->variant.bf16 || !p->live_at || p->n_forward < 2) return false;
    b->stamp = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *b->stamp);
    if (!b->stamp || !group_by_segment(g, b)) {
        spare_bound_free(b);
        return false;
    }
    b->fixed = p->total - p->arena_bytes - p->workspace_bytes + least_workspace(g, p);
    return true;
}

void spare_bound_free(spare_bound *b) {
    free(b->stamp);
    free(b->start);
    free(b->by_segment);
    *b = (spare_bound){0};
}

/* The bytes of tensor t's forward instance where it may stop being live at L: made by a layer not replayed (a
 * replayed layer's forward instance dies in forward in both plans) whose own backward does not read it (then
 * it lives past L in both), counted once a trial. */
static size_t may_die(spare_bound *b, snug_tensor t) {
    const plan *p = b->p;
    const graph_node *producer = &b->g->nodes[b->g->tensors[t].producer];
    if (b->stamp[t] == b->trial || p->value_fwd[t] < 0 || p->value_rec[t] >= 0 ||
        (producer->op->flags & OP_KEEPS_OUTPUT))
        return 0;
    b->stamp[t] = b->trial;
    return p->bufs[p->value_fwd[t]].bytes;
}

/* What the reads of layer i may stop holding past L: its inputs, and their producers' first inputs. */
static size_t inputs_may_die(spare_bound *b, const graph_node *n) {
    const snug_graph *g = b->g;
    size_t bytes = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        const snug_tensor t = graph_base_tensor(g, n->inputs[k]);
        bytes += may_die(b, t);
        const int producer = g->tensors[t].producer;
        if (producer >= 0 && g->nodes[producer].n_inputs > 0)
            bytes += may_die(b, graph_base_tensor(g, g->nodes[producer].inputs[0]));
    }
    return bytes;
}

/* What the spared plan surely keeps past L of replayed layer i that the plan does not. */
static size_t kept_once_spared(const spare_bound *b, int i) {
    const plan *p = b->p;
    const graph_node *n = &b->g->nodes[i];
    size_t bytes = 0;
    if (p->saved_rec[i] >= 0 && p->saved_fwd[i] >= 0) bytes += p->bufs[p->saved_fwd[i]].bytes;
    if ((n->op->flags & OP_KEEPS_OUTPUT) && p->value_fwd[n->output] >= 0) bytes += p->bufs[p->value_fwd[n->output]].bytes;
    return bytes;
}

size_t spare_bound_total(spare_bound *b, int s) { return spare_bound_range(b, s, s + 1); }

size_t spare_bound_range(spare_bound *b, int from, int to) {
    if (from < 0 || to > b->n_segments || from >= to) return 0;
    const plan *p = b->p;
    size_t lost = 0, kept = 0;
    b->trial++;
    for (int k = b->start[from]; k < b->start[to]; k++) {
        const int i = b->by_segment[k];
        const graph_node *n = &b->g->nodes[i];
        if (!is_layer(n)) continue;
        lost += inputs_may_die(b, n);
        if (p->seg.recompute[i]) kept += kept_once_spared(b, i);
    }
    const size_t at_end = p->live_at[p->n_forward - 1];
    if (lost >= at_end + kept) return 0;
    size_t bound;
    return size_add(b->fixed, at_end + kept - lost, &bound) ? bound : 0;
}

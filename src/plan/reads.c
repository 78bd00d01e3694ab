/* Who reads each tensor, through views, counted once per plan: the stages ask of every layer whether another
 * layer reads its output, or keeps it for backward, and scanning the graph for each answer would make
 * planning quadratic in the number of layers. */
#include <stdlib.h>

#include "ops/op.h"
#include "plan/plan.h"

bool plan_reads_init(const snug_graph *g, plan_reads *r) {
    const size_t nt = (size_t)(g->n_tensors ? g->n_tensors : 1);
    r->slots = calloc(nt, sizeof *r->slots);
    r->kept = calloc(nt, sizeof *r->kept);
    if (!r->slots || !r->kept) {
        plan_reads_free(r);
        return false;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        const unsigned flags = n->op->flags;
        if (flags & OP_IS_VIEW) continue;
        for (int k = 0; k < n->n_inputs; k++) {
            const snug_tensor t = graph_base_tensor(g, n->inputs[k]);
            r->slots[t]++;
            if ((flags & OP_KEEPS_INPUT) && !(flags & OP_IS_INPUT)) r->kept[t] = true;
        }
    }
    return true;
}

void plan_reads_free(plan_reads *r) {
    free(r->slots);
    free(r->kept);
    r->slots = NULL;
    r->kept = NULL;
}

bool plan_reads_only(const snug_graph *g, const plan_reads *r, snug_tensor t, int node) {
    const graph_node *n = &g->nodes[node];
    int own = 0;
    if (!(n->op->flags & OP_IS_VIEW))
        for (int k = 0; k < n->n_inputs; k++) own += graph_base_tensor(g, n->inputs[k]) == t;
    return r->slots[t] == own;
}

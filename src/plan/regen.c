/* Inputs regenerated instead of kept. A layer whose backward can take its input sample by sample
 * (OP_REGEN_INPUT: conv2d; linear with samples of 17 rows and more) reading the output of one that can write
 * any sample of it again from what its own backward keeps anyway (op_desc.regen: BatchNorm and GroupNorm, with
 * their ReLU folded in or not, and LayerNorm keep their input and statistics; GELU its input) needs that
 * output only in forward: it dies after its last forward reader instead of living until the consumer's
 * backward. The bits do not change: the regenerated sample is the forward's own expression over the same
 * values. In a ResNet block that is the first convolution's normalised, rectified output; in a U-Net, the
 * first of each pair of convolutions'; in a transformer block, both LayerNorms' outputs and the GELU's.
 *
 * Only where nothing else reads the output (another reader that keeps it would keep it alive anyway) and no
 * recompute touches the three layers involved: the producer's input and statistics must be the very instances
 * its own backward reads, alive from forward on. */
#include <stdlib.h>

#include "ops/op.h"
#include "plan/plan.h"

int plan_regen_producer(const snug_graph *g, const plan_reads *r, const plan_variant *v, int consumer) {
    const graph_node *n = &g->nodes[consumer];
    if (!(n->op->flags & OP_REGEN_INPUT) || n->n_inputs < 1 || plan_op_stage(n, v, 1, 1) == 0) return -1;
    const snug_tensor base = graph_base_tensor(g, n->inputs[0]);
    const int producer = g->tensors[base].producer;
    if (producer < 0 || producer == g->input_node) return -1;
    const graph_node *pn = &g->nodes[producer];
    return pn->op->regen && pn->n_inputs == 1 && plan_reads_only(g, r, base, consumer) ? producer : -1;
}

int plan_regen_source(const snug_graph *g, int producer) {
    return g->tensors[graph_base_tensor(g, g->nodes[producer].inputs[0])].producer;
}

static bool regenerates(const snug_graph *g, const plan_reads *r, const plan *p, int i) {
    const int producer = plan_regen_producer(g, r, &p->variant, i);
    return producer >= 0 && !p->seg.recompute[i] && !p->seg.recompute[producer] &&
           !p->seg.recompute[plan_regen_source(g, producer)];
}

bool plan_regen(const snug_graph *g, const plan_reads *r, plan *p) {
    p->regen = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *p->regen);
    if (!p->regen) return false;
    for (int i = 0; i < g->n_nodes; i++) p->regen[i] = !p->variant.no_regen && regenerates(g, r, p, i);
    return true;
}

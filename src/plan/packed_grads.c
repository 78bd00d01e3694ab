/* bfloat16 activation gradients in the plan. In a bf16 plan backward's peak is made of float32 gradients beside
 * the packed outputs (a UNet's decoder top: a convolution's output gradient and the concatenation's gradient it
 * writes, each a full-resolution tensor). A gradient is stored in bfloat16 (ACT_GRAD_PACKED, half the bytes)
 * where every op that touches it can take it so: its producer's backward reads it a sample at a time into a
 * float32 stage (OP_GRAD_READS_PACKED), and every reader's backward computes its share in float32 and rounds it
 * as it stores it (OP_GRAD_WRITES_PACKED; a second writer of a fan-out gradient unpacks, adds and rounds). No
 * op then holds a float32 copy of a packed gradient beyond one sample per thread, and a gradient nobody can
 * take packed stays float32 whole: no conversion passes, no second instance.
 *
 * Rounding a gradient adds an error (at most 2^-9 relative per rounding, as rounding a value), and its stages
 * and roundings cost time in every backward (a read, a conversion and a write of the gradient beside the
 * float32 arithmetic), so plan_build keeps the plan with float32 gradients, the same bits as without packing,
 * unless packing saves a meaningful share of the bytes (plan_packed_grads_pay) or a budget needs it
 * (plan_within_budget). */
#include <stdlib.h>

#include "core/checked.h"
#include "ops/op.h"
#include "plan/plan.h"

/* Whether op takes packed gradients (flag) in plan p. An op whose kernels are the plan's matrix product (a linear
 * layer) works through them a sample at a time, which gives the bits of one product over all the rows only on
 * snug's own products: the BLAS's may change a row's last float32 bit with the row count, and rounding the
 * gradient to bfloat16 would turn that into a split that changes the gradient by a bf16 step. So on the BLAS
 * those keep float32 gradients, and a bf16 plan's gradient stays the same whatever the micro-batch. */
static bool takes_packed(const op_desc *op, unsigned flag, const plan *p) {
    if (!(op->flags & flag)) return false;
    return !op->by_product || p->variant.product != OP_PRODUCT_BLAS;
}

/* Whether every reader of t writes its gradient packed, and one does: reading all of t (itself, or a view of the
 * whole of it, as a folded ReLU's), since a reader's input gradient is bound at the start of t's. */
static bool readers_write_packed(const snug_graph *g, const plan *p, snug_tensor t) {
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            const snug_tensor in = g->nodes[i].inputs[j];
            if (graph_base_tensor(g, in) != t || (g->nodes[i].op->flags & OP_IS_VIEW)) continue;
            if (g->tensors[in].numel != g->tensors[t].numel ||
                !takes_packed(g->nodes[i].op, OP_GRAD_WRITES_PACKED, p))
                return false;
            any = true;
        }
    return any;
}

/* Whether tensor t's gradient can be packed: a layer's output (not the data, not a view, not the logits, whose
 * gradient the loss writes in float32) whose producer reads its gradient packed and whose readers write it so. */
static bool grad_packable(const snug_graph *g, const plan *p, snug_tensor t) {
    const int producer = g->tensors[t].producer;
    const snug_tensor logits = graph_base_tensor(g, g->nodes[g->loss_node].inputs[0]);
    if (producer < 0 || producer == g->input_node || t == logits || graph_base_tensor(g, t) != t) return false;
    return takes_packed(g->nodes[producer].op, OP_GRAD_READS_PACKED, p) && readers_write_packed(g, p, t);
}

/* A packed gradient pays where a sample's float32 gradient streams from memory: larger than a core's cache (at
 * least 1 MiB of L2 on current x86 cores), reading and writing it costs memory traffic that bfloat16 halves; a
 * smaller one (a small CNN's, a 28x28 image's 32 channels: 98 KiB) stays in the cache, where packing adds only
 * its stages and conversions to every backward. A UNet's top gradients are megabytes a sample and packing them
 * makes its backward faster as well as smaller; the cnn's are a tenth of that and packing made it slower. A rule
 * of bytes, not of a clock, so that a plan depends only on its graph, its request and the machine; and not of
 * the search's ceiling, whose candidates would flip the choice between neighbouring plans and break the search's
 * premise that memory falls as more is recomputed. A budget only packed gradients meet gets them from
 * plan_within_budget. */
#define PACKED_GRAD_SAMPLE_BYTES ((size_t)1 << 20)

/* The largest float32 bytes one sample of a gradient the plan packs would take. */
static size_t largest_packed_sample(const snug_graph *g, const plan *p) {
    size_t most = 0;
    for (int t = 0; p->grad_packed && t < g->n_tensors; t++)
        if (p->grad_packed[t] && g->tensors[t].numel * sizeof(float) > most)
            most = g->tensors[t].numel * sizeof(float);
    return most;
}

bool plan_packed_grads_pay(const snug_graph *g, const plan *packed, const plan *flat) {
    if (packed->total >= flat->total) return false;
    return largest_packed_sample(g, packed) >= PACKED_GRAD_SAMPLE_BYTES;
}

bool plan_packs_no_grads(const snug_graph *g, const plan *p) {
    for (int t = 0; p->grad_packed && t < g->n_tensors; t++)
        if (p->grad_packed[t]) return false;
    return true;
}

bool plan_packed_grads(const snug_graph *g, plan *p) {
    p->grad_packed = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *p->grad_packed);
    if (!p->grad_packed) return false;
    if (!p->variant.bf16 || p->variant.no_packing || p->variant.no_grad_packing) return true;
    for (int t = 0; t < g->n_tensors; t++) p->grad_packed[t] = grad_packable(g, p, t);
    return true;
}

bool plan_node_packs_grads(const snug_graph *g, const plan *p, int i) {
    const graph_node *n = &g->nodes[i];
    if (!p->grad_packed || n->op->flags & (OP_IS_INPUT | OP_IS_VIEW)) return false;
    bool any = p->grad_packed[n->output];
    for (int j = 0; j < n->n_inputs; j++) any |= p->grad_packed[graph_base_tensor(g, n->inputs[j])];
    return any;
}

size_t plan_node_grad_stage(const snug_graph *g, const plan *p, int i) {
    const graph_node *n = &g->nodes[i];
    if (!plan_node_packs_grads(g, p, i) || !n->op->grad_stage_bytes) return 0;
    return n->op->grad_stage_bytes(n, p->m, p->threads, plan_input_staged(n, p, i));
}

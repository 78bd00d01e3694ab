/* bfloat16 mixed precision in the plan. Every layer's output is rounded to bfloat16 as it is made, so an output
 * that a step after forward reads (backward, or a recompute replaying from it) loses nothing when it is kept in
 * half the bytes: it gets a packed copy (ACT_PACKED), written as its producer's forward step ends, and a
 * float32 instance unpacked from that copy just before the first step after forward that reads it. The float32
 * forward instance then dies at its last forward reader instead of living into backward, and that is where the
 * memory goes: between forward and backward only the packed copies are live. Packing at the producer, not at
 * the last forward reader, means an element-wise layer writing over its input in place never overwrites a
 * value before it is packed; it costs the packed copy of the few outputs live during forward.
 *
 * A convolution's backward takes its input sample by sample from the packed copy (plan.packed_in), unpacked
 * into a stage of one sample, a GELU's backward a span at a time as it reads it, and a linear layer's on snug's
 * products inside its weight gradient's product (no stage); a ReLU, and an add with its ReLU folded in, read
 * their kept output's packed copy for the mask (plan.packed_out); an instance no step reads is then dropped. Where packing lowers nothing (the peak
 * is made of float32 gradients), plan_build keeps the plan without it: the same bits.
 *
 * A concatenation, a GroupNorm and a GELU read their inputs from packed copies and, where their readers read
 * them packed (convolutions, a linear layer), write only their packed copies (pack_forward_io); a linear layer
 * writes only its packed copy where its reader is such a GELU (pack_staged_output).
 *
 * The input batch is rounded too, unless a layer reads it as indices (an embedding's tokens). */
#include <stdint.h>
#include <stdlib.h>

#include "core/checked.h"
#include "core/mem.h"
#include "ops/op.h"
#include "plan/plan.h"

static bool packed_bytes(size_t numel, size_t m, size_t *out) {
    return size_mul(numel, m, out) && size_mul(*out, sizeof(uint16_t), out) &&
           size_align(*out ? *out : 1, SNUG_MEM_ALIGN, out);
}

/* Whether tensor t may be kept packed: a layer's output (not the data), not recomputed, not the float32 logits. */
static bool packable(const snug_graph *g, const plan *p, snug_tensor t) {
    const snug_tensor logits = graph_base_tensor(g, g->nodes[g->loss_node].inputs[0]); /* float32: not rounded */
    return p->value_fwd[t] >= 0 && p->value_rec[t] < 0 && t != logits;
}

/* A packed copy of t and the float32 instance unpacked from it for the steps after forward (dropped where
 * none reads it). */
static bool add_packed(const snug_graph *g, plan *p, snug_tensor t) {
    const int node = p->bufs[p->value_fwd[t]].node;
    const size_t value = p->bufs[p->value_fwd[t]].bytes;
    size_t bytes;
    return packed_bytes(g->tensors[t].numel, p->m, &bytes) &&
           (p->packed[t] = plan_add_buf(p, node, ACT_PACKED, false, bytes)) >= 0 &&
           (p->value_bwd[t] = plan_add_buf(p, node, ACT_VALUE, false, value)) >= 0;
}

/* Whether every reader of t reads it packed in forward and, where backward reads it, in backward too (a
 * convolution with a stage; one whose backward regenerates t from its producer reads none of it): then t needs
 * no float32 instance at all. */
static bool read_only_packed(const snug_graph *g, const plan *p, snug_tensor t) {
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            if (graph_base_tensor(g, g->nodes[i].inputs[j]) != t || (g->nodes[i].op->flags & OP_IS_VIEW)) continue;
            if (j != 0 || !(g->nodes[i].op->flags & OP_FORWARD_READS_PACKED) || p->seg.recompute[i] ||
                !(p->regen[i] || (p->packed_in[i] && !plan_op_reads_packed_unstaged(&g->nodes[i], &p->variant))))
                return false;
            any = true;
        }
    return any;
}

/* An op that reads and writes packed values in forward (OP_FORWARD_READS_PACKED | OP_WRITES_PACKED) reads its
 * inputs from packed copies: a concatenation copies rounded values, a GroupNorm takes a group at a time (their
 * float32 instances then die at their other readers: a UNet's skip is not held in float32 through the whole
 * encoder and decoder, a convolution's output dies at the convolution). Where its readers all read its output
 * packed (a convolution sample by sample), it writes only the packed copy, made for them where backward reads
 * none: no float32 instance of the widest tensors at the decoder's top. */
/* Makes node i's output exist only packed where every reader reads it packed, and tells the readers. */
static bool write_only_packed(const snug_graph *g, plan *p, int i) {
    const snug_tensor out = g->nodes[i].output;
    if (!packable(g, p, out) || !read_only_packed(g, p, out)) return true;
    if (p->packed[out] < 0 && !add_packed(g, p, out)) return false;
    p->packed_only[out] = true;
    for (int r = 0; r < g->n_nodes; r++)
        if (g->nodes[r].n_inputs > 0 && graph_base_tensor(g, g->nodes[r].inputs[0]) == out) p->fwd_packed[r] = true;
    return true;
}

/* A product with a stage (a linear layer) computes a sample at a time into it where it reads or writes packed
 * values: it reads packed only what its producer keeps only packed (a GELU's output), and writes only packed
 * where its readers all read packed (a GELU), so no float32 instance of a transformer's MLP activations. */
static bool pack_staged_output(const snug_graph *g, plan *p, int i) {
    const graph_node *n = &g->nodes[i];
    if (!(n->op->flags & OP_WRITES_PACKED) || p->seg.recompute[i] || plan_op_stage(n, &p->variant, 1, 1) == 0)
        return true;
    if (!write_only_packed(g, p, i)) return false;
    if (p->packed_only[n->output]) p->fwd_packed[i] = true;
    return true;
}

static bool pack_forward_io(const snug_graph *g, plan *p) {
    const unsigned both = OP_FORWARD_READS_PACKED | OP_WRITES_PACKED;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        if (plan_op_has_stage(n)) {
            if (!pack_staged_output(g, p, i)) return false;
            continue;
        }
        bool ok = (n->op->flags & both) == both && !p->seg.recompute[i];
        for (int j = 0; ok && j < n->n_inputs; j++) ok = packable(g, p, graph_base_tensor(g, n->inputs[j]));
        if (!ok) continue;
        for (int j = 0; j < n->n_inputs; j++) {
            const snug_tensor t = graph_base_tensor(g, n->inputs[j]);
            if (p->packed[t] < 0 && !add_packed(g, p, t)) return false;
        }
        p->fwd_packed[i] = true;
        if (!write_only_packed(g, p, i)) return false;
    }
    return true;
}

bool plan_pack_values(const snug_graph *g, plan *p) {
    for (int t = 0; t < g->n_tensors; t++) {
        const int b = p->value_fwd[t];
        if (b < 0 || !packable(g, p, t) || p->bufs[b].last < p->n_forward) continue;
        if (!add_packed(g, p, t)) return false;
    }
    return pack_forward_io(g, p);
}

/* Removes the unpacked instances no step reads (every reader after forward takes the packed copy): they were
 * added last, so only the indices above each removed one move. */
static void drop_unread_unpacked(const snug_graph *g, plan *p) {
    int *to = malloc((size_t)p->n_bufs * sizeof *to), n = 0;
    if (!to) return; /* they stay, unread and never placed in any step's memory but the first's */
    for (int b = 0; b < p->n_bufs; b++) {
        const bool unread = p->bufs[b].first < 0 && p->bufs[b].kind == ACT_VALUE;
        to[b] = unread ? -1 : n;
        if (!unread) p->bufs[n++] = p->bufs[b];
    }
    int *tables[] = {p->value_fwd, p->value_rec, p->value_bwd, p->packed, p->grad};
    for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++)
        for (int t = 0; t < g->n_tensors; t++)
            if (tables[k][t] >= 0) tables[k][t] = to[tables[k][t]];
    for (int i = 0; i < g->n_nodes; i++) {
        if (p->saved_fwd[i] >= 0) p->saved_fwd[i] = to[p->saved_fwd[i]];
        if (p->saved_rec[i] >= 0) p->saved_rec[i] = to[p->saved_rec[i]];
    }
    p->n_bufs = n;
    free(to);
}

void plan_pack_lifetimes(const snug_graph *g, plan *p) {
    for (int t = 0; t < g->n_tensors; t++) {
        if (p->packed[t] < 0) continue;
        act_buffer *k = &p->bufs[p->packed[t]];
        const int unpacked = p->bufs[p->value_bwd[t]].first; /* the first step after forward that reads it */
        const int made = p->bufs[p->value_fwd[t]].first;     /* none where it is only packed: the walk's */
        if (made >= 0) k->first = made;                      /* the producer's forward step packs it */
        if (unpacked > k->last) k->last = unpacked;          /* beyond its readers' backward steps */
        if (k->last < k->first) k->last = k->first;
    }
    drop_unread_unpacked(g, p);
}

bool plan_packed_inputs(const snug_graph *g, plan *p) {
    p->packed_in = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *p->packed_in);
    p->packed_out = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *p->packed_out);
    p->fwd_packed = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *p->fwd_packed);
    p->packed_only = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *p->packed_only);
    if (!p->packed_in || !p->packed_out || !p->fwd_packed || !p->packed_only) return false;
    if (!p->variant.bf16 || p->variant.no_packing) return true;
    const snug_tensor logits = graph_base_tensor(g, g->nodes[g->loss_node].inputs[0]);
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        /* a kept output read packed: made by this layer, not recomputed, not the float32 logits */
        p->packed_out[i] = (n->op->flags & (OP_KEEPS_OUTPUT | OP_READS_OUTPUT_PACKED)) ==
                               (OP_KEEPS_OUTPUT | OP_READS_OUTPUT_PACKED) &&
                           !p->seg.recompute[i] && graph_base_tensor(g, n->output) != logits;
        /* a staged reader (conv2d) reads packed only where it has a stage for the size; one without reads
         * its packed input as it goes (GELU), or in its products (a linear layer) */
        if (!(n->op->flags & OP_READS_PACKED) || n->n_inputs < 1 || p->regen[i] ||
            (plan_op_has_stage(n) && plan_op_stage(n, &p->variant, 1, 1) == 0 &&
             !plan_op_reads_packed_unstaged(n, &p->variant)))
            continue;
        const snug_tensor t = graph_base_tensor(g, n->inputs[0]);
        const int producer = g->tensors[t].producer;
        /* packed: made by a layer (not the data), not recomputed, not the float32 logits */
        p->packed_in[i] = producer >= 0 && producer != g->input_node && !p->seg.recompute[producer] && t != logits;
    }
    return true;
}

size_t plan_node_out_stage(const snug_graph *g, const plan *p, int i) {
    const graph_node *n = &g->nodes[i];
    if (!p->packed_only || !p->packed_only[n->output] || !p->fwd_packed[i] || !n->op->out_stage_bytes) return 0;
    return n->op->out_stage_bytes(n, p->m, p->threads);
}

/* Whether a layer reads the input batch as indices (an embedding): then it is not rounded. */
static bool input_holds_indices(const snug_graph *g) {
    const snug_tensor in = g->nodes[g->input_node].output;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++)
            if ((g->nodes[i].op->flags & OP_READS_INDICES) && graph_base_tensor(g, g->nodes[i].inputs[j]) == in)
                return true;
    return false;
}

bool plan_rounds_input(const snug_graph *g, const plan *p) { return p->variant.bf16 && !input_holds_indices(g); }

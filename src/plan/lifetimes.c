/* Buffers and lifetimes. Each layer's output gets a forward instance, and a second, recomputed instance when its
 * segment replays it; its gradient and saved bytes likewise. A buffer lives from the step that writes it to the
 * last step that reads it: forward reads by consumers; backward reads only of what each op declares it keeps
 * (linear and conv2d their input, ReLU its output); gradients from the first backward step that adds into them
 * to the backward of their producer. An element-wise layer writes over its input when that input dies at this
 * very step (ReLU in place). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/mem.h"
#include "ops/op.h"
#include "plan/plan.h"

int plan_add_buf(plan *p, int node, act_kind kind, bool recomputed, size_t bytes) {
    if (p->n_bufs == p->cap_bufs) {
        int cap = p->cap_bufs ? 2 * p->cap_bufs : 64;
        act_buffer *nb = realloc(p->bufs, (size_t)cap * sizeof *nb);
        if (!nb) return -2;
        p->bufs = nb;
        p->cap_bufs = cap;
    }
    p->bufs[p->n_bufs] = (act_buffer){.node = node, .kind = kind, .recomputed = recomputed, .bytes = bytes,
                                      .first = -1, .last = -1, .shares = -1};
    return p->n_bufs++;
}

static bool batch_bytes(size_t per_sample, size_t m, size_t elem, size_t *out) {
    return size_mul(per_sample, m, out) && size_mul(*out, elem, out) && size_align(*out ? *out : 1, SNUG_MEM_ALIGN, out);
}

static bool needs_grad(const snug_graph *g, int node) {
    return !(g->nodes[node].op->flags & (OP_IS_INPUT | OP_IS_LOSS | OP_IS_VIEW));
}

/* Creates every buffer; lifetimes are filled in by the walk over the schedule. */
static bool create_buffers(const snug_graph *g, plan *p) {
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op->flags & (OP_IS_INPUT | OP_IS_VIEW)) continue;
        size_t value, saved = n->op->saved_bytes ? n->op->saved_bytes(n) : 0, saved_bytes = 0;
        size_t per_batch = n->op->saved_batch_bytes ? n->op->saved_batch_bytes(n) : 0;
        if (!batch_bytes(g->tensors[n->output].numel, p->m, sizeof(float), &value)) return false;
        if ((saved || per_batch) &&
            (!size_mul(saved, p->m, &saved_bytes) || !size_add(saved_bytes, per_batch, &saved_bytes) ||
             !size_align(saved_bytes, SNUG_MEM_ALIGN, &saved_bytes)))
            return false;
        saved = saved_bytes;
        bool rec = p->seg.recompute[i];
        p->value_fwd[n->output] = plan_add_buf(p, i, ACT_VALUE, false, value);
        if (rec) p->value_rec[n->output] = plan_add_buf(p, i, ACT_VALUE, true, value);
        if (saved) p->saved_fwd[i] = plan_add_buf(p, i, ACT_SAVED, false, saved_bytes);
        /* An op that saves per-micro-batch state (BatchNorm's batch statistics), or says it replays from its
         * saved bytes (GroupNorm's and LayerNorm's statistics), replays from what its first forward saved: one
         * saved buffer, kept from forward to backward, read by the recompute. */
        if (saved && rec && !per_batch && !(n->op->flags & OP_REPLAYS_SAVED))
            p->saved_rec[i] = plan_add_buf(p, i, ACT_SAVED, true, saved_bytes);
        if (needs_grad(g, i) && p->grad_packed[n->output]) { /* bf16: half the bytes (plan/packed_grads.c) */
            size_t half;
            if (!batch_bytes(g->tensors[n->output].numel, p->m, sizeof(uint16_t), &half)) return false;
            p->grad[n->output] = plan_add_buf(p, i, ACT_GRAD_PACKED, false, half);
        } else if (needs_grad(g, i)) {
            p->grad[n->output] = plan_add_buf(p, i, ACT_GRAD, false, value);
        }
        if (p->n_bufs > 0 && p->bufs == NULL) return false;
    }
    return true;
}

static void touch(plan *p, int b, int step) {
    if (b < 0) return;
    act_buffer *x = &p->bufs[b];
    if (x->first < 0) x->first = step;
    if (step > x->last) x->last = step;
}

/* The instance of tensor t a step reads: after forward, a recomputed instance replaces the forward one, and in
 * bf16 the instance unpacked from the packed copy does. */
static int value_at(const plan *p, snug_tensor t, bool after_forward) {
    if (after_forward && p->value_rec[t] >= 0) return p->value_rec[t];
    if (after_forward && p->value_bwd && p->value_bwd[t] >= 0) return p->value_bwd[t];
    return p->value_fwd[t];
}

static void walk_step(const snug_graph *g, plan *p, int s) {
    const sched_step *st = &p->steps[s];
    if (st->node < 0) return;
    const graph_node *n = &g->nodes[st->node];
    unsigned flags = n->op->flags;
    bool after = st->phase != SNUG_PHASE_FORWARD;
    if (st->phase != SNUG_PHASE_BACKWARD) {
        const bool fwd = st->phase == SNUG_PHASE_FORWARD, packed = fwd && p->fwd_packed[st->node];
        for (int i = 0; i < n->n_inputs; i++) {
            const snug_tensor t = graph_base_tensor(g, n->inputs[i]);
            touch(p, packed && p->packed[t] >= 0 ? p->packed[t] : value_at(p, t, after), s);
        }
        touch(p, !fwd ? p->value_rec[n->output] : p->packed_only[n->output] ? p->packed[n->output]
                                                                             : p->value_fwd[n->output], s);
        touch(p, st->phase == SNUG_PHASE_FORWARD || p->saved_rec[st->node] < 0 ? p->saved_fwd[st->node]
                                                                               : p->saved_rec[st->node], s);
        return;
    }
    if (flags & OP_KEEPS_INPUT)
        for (int i = p->regen[st->node] ? 1 : 0; i < n->n_inputs; i++) {
            const snug_tensor t = graph_base_tensor(g, n->inputs[i]);
            const bool packed = i == 0 && p->packed_in[st->node] && p->packed[t] >= 0; /* after the first walk */
            touch(p, packed ? p->packed[t] : value_at(p, t, true), s);
        }
    if (p->regen[st->node]) { /* what the producer regenerates from: its own backward's reads */
        const int producer = g->tensors[graph_base_tensor(g, n->inputs[0])].producer;
        const snug_tensor src = graph_base_tensor(g, g->nodes[producer].inputs[0]);
        const bool packed = p->packed_in[producer] && p->packed[src] >= 0; /* a GELU reading its input packed */
        touch(p, packed ? p->packed[src] : value_at(p, src, true), s);
        touch(p, p->saved_fwd[producer], s);
    }
    if (flags & OP_KEEPS_OUTPUT) { /* from its packed copy where backward reads it so (after the first walk) */
        const bool packed = p->packed_out[st->node] && p->packed[n->output] >= 0;
        touch(p, packed ? p->packed[n->output] : value_at(p, n->output, true), s);
    }
    touch(p, p->saved_rec[st->node] >= 0 ? p->saved_rec[st->node] : p->saved_fwd[st->node], s);
    touch(p, p->grad[n->output], s);
    for (int i = 0; i < n->n_inputs; i++) touch(p, p->grad[graph_base_tensor(g, n->inputs[i])], s);
}

static int root_of(const plan *p, int b) {
    while (p->bufs[b].shares >= 0) b = p->bufs[b].shares;
    return b;
}

/* An element-wise layer whose first input dies at this step writes its output over it. */
static void share_in_place(const snug_graph *g, plan *p) {
    for (int s = 0; s < p->n_steps; s++) {
        const sched_step *st = &p->steps[s];
        if (st->phase != SNUG_PHASE_FORWARD && st->phase != SNUG_PHASE_RECOMPUTE) continue;
        const graph_node *n = &g->nodes[st->node];
        if (!(n->op->flags & OP_ELEMENTWISE)) continue;
        int in = value_at(p, graph_base_tensor(g, n->inputs[0]), st->phase != SNUG_PHASE_FORWARD);
        int out = st->phase == SNUG_PHASE_FORWARD ? p->value_fwd[n->output] : p->value_rec[n->output];
        if (in < 0 || out < 0 || p->bufs[in].last != s || p->bufs[in].bytes != p->bufs[out].bytes) continue;
        int root = root_of(p, in);
        p->bufs[out].shares = root;
        if (p->bufs[out].last > p->bufs[root].last) p->bufs[root].last = p->bufs[out].last;
    }
}

/* Whether the backward of node n, at step s, may write its first input's gradient over its output's: a
 * pass-through (the residual add), or an op writing din[0] element by element from dout (GELU) where dout dies
 * at s and din[0] is the whole of its buffer (not a view of part of it). Either way in[0]'s gradient must begin
 * at s. */
static bool gradient_continues(const snug_graph *g, const plan *p, const graph_node *n, int s) {
    const snug_tensor in0 = graph_base_tensor(g, n->inputs[0]);
    const int gin = p->grad[in0], gout = p->grad[n->output];
    if (gin < 0 || gout < 0 || p->bufs[gin].first != s || p->bufs[gin].bytes != p->bufs[gout].bytes ||
        p->bufs[gin].kind != p->bufs[gout].kind)
        return false;
    bool repeated = false; /* add(x, x): x's gradient needs dy twice, so it cannot be dy's memory */
    for (int i = 1; i < n->n_inputs; i++) repeated |= graph_base_tensor(g, n->inputs[i]) == in0;
    if (n->op->flags & OP_GRAD_PASSTHROUGH) return !repeated;
    const size_t whole = g->tensors[g->nodes[p->bufs[gin].node].output].numel;
    const unsigned in_place = OP_GRAD_IN_PLACE | OP_WRITES_FRESH; /* written whole, never added into dout */
    return (n->op->flags & in_place) == in_place && !repeated && p->bufs[root_of(p, gout)].last == s &&
           g->tensors[n->inputs[0]].numel == whole;
}

/* A backward that continues its output gradient's memory as its first input's (gradient_continues): dL/dx of
 * a residual stream flows down the blocks without a copy, and a GELU's gradient takes the place of the one it
 * reads. */
static void share_gradients(const snug_graph *g, plan *p) {
    for (int s = p->n_forward; s < p->n_steps; s++) {
        const sched_step *st = &p->steps[s];
        if (st->node < 0 || st->phase != SNUG_PHASE_BACKWARD) continue;
        const graph_node *n = &g->nodes[st->node];
        if (n->n_inputs < 1 || !gradient_continues(g, p, n, s)) continue;
        const int gin = p->grad[graph_base_tensor(g, n->inputs[0])], root = root_of(p, p->grad[n->output]);
        p->bufs[gin].shares = root;
        if (p->bufs[gin].last > p->bufs[root].last) p->bufs[root].last = p->bufs[gin].last;
    }
}

static void walk_all(const snug_graph *g, plan *p) {
    for (int b = 0; b < p->n_bufs; b++) p->bufs[b].first = p->bufs[b].last = -1;
    for (int s = 0; s < p->n_steps; s++) walk_step(g, p, s);
    /* The trainer reads the per-item losses and the logits after the last forward step. */
    const graph_node *loss = &g->nodes[g->loss_node];
    touch(p, p->value_fwd[loss->output], p->n_forward - 1);
}

bool plan_lifetimes(const snug_graph *g, plan *p) {
    if (!create_buffers(g, p)) return false;
    walk_all(g, p);
    if (p->variant.bf16 && !p->variant.no_packing) { /* what the first walk found read after forward is kept
                                                        packed: walk again */
        if (!plan_pack_values(g, p)) return false;
        walk_all(g, p);
        plan_pack_lifetimes(g, p);
    }
    for (int b = 0; b < p->n_bufs; b++)
        if (p->bufs[b].first < 0) p->bufs[b].first = p->bufs[b].last = 0; /* never touched: a dead end */
    share_in_place(g, p);
    share_gradients(g, p);
    return true;
}

/* Building the plan. Every tensor that is not a view gets its own value buffer and, when backward needs it,
 * a gradient buffer; no two buffers share memory yet (liveness-based sharing comes with the planner proper). */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/mem.h"
#include "ops/op.h"
#include "optim/optim.h"

typedef struct plan_builder {
    plan *p;
    int cap;
    bool overflow;
} plan_builder;

/* Appends a buffer of count * elem_size bytes; returns its index, or -1 on overflow or allocation failure. */
static int add_buffer(plan_builder *b, int node, buffer_role role, snug_mem_category cat, size_t count,
                      size_t elem_size) {
    size_t bytes;
    if (!size_mul(count, elem_size, &bytes) || !size_align(bytes ? bytes : 1, SNUG_MEM_ALIGN, &bytes)) {
        b->overflow = true;
        return -1;
    }
    plan *p = b->p;
    if (p->n_bufs == b->cap) {
        int ncap = b->cap ? 2 * b->cap : 32;
        plan_buffer *nb = realloc(p->bufs, (size_t)ncap * sizeof *nb);
        if (!nb) { b->overflow = true; return -1; }
        p->bufs = nb;
        b->cap = ncap;
    }
    p->bufs[p->n_bufs] = (plan_buffer){.node = node, .role = role, .cat = cat, .bytes = bytes};
    if (!size_add(p->bytes[cat], bytes, &p->bytes[cat]) || !size_add(p->total, bytes, &p->total))
        b->overflow = true;
    return p->n_bufs++;
}

static void plan_fixed_buffers(plan_builder *b, const snug_graph *g, const snug_optim_config *optim) {
    plan *p = b->p;
    size_t n = g->param_numel;
    p->params_buf = add_buffer(b, -1, BUF_PARAMS, SNUG_MEM_PARAMS, n, sizeof(float));
    p->grads_buf = add_buffer(b, -1, BUF_GRADS, SNUG_MEM_GRADS, n, sizeof(float));
    size_t slots = (size_t)optim_state_slots(optim), state;
    p->optim_buf = -1;
    if (!size_mul(slots, n, &state)) b->overflow = true;
    else if (slots) p->optim_buf = add_buffer(b, -1, BUF_OPTIM, SNUG_MEM_OPTIM, state, sizeof(float));
}

static size_t per_batch(plan_builder *b, size_t per_sample, size_t m) {
    size_t n;
    if (!size_mul(per_sample, m, &n)) b->overflow = true;
    return n;
}

static void plan_data_and_workspace(plan_builder *b, const snug_graph *g) {
    plan *p = b->p;
    const graph_node *in = &g->nodes[g->input_node];
    const graph_node *loss = &g->nodes[g->loss_node];
    p->value_buf[in->output] = add_buffer(b, g->input_node, BUF_INPUT, SNUG_MEM_DATA,
                                          per_batch(b, g->tensors[in->output].numel, p->m), sizeof(float));
    p->targets_per_sample = g->tensors[loss->output].numel;
    p->targets_buf = add_buffer(b, g->loss_node, BUF_TARGETS, SNUG_MEM_DATA,
                                per_batch(b, p->targets_per_sample, p->m), sizeof(int32_t));
    size_t work = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const op_desc *op = g->nodes[i].op;
        size_t w = op->workspace_bytes ? op->workspace_bytes(g, &g->nodes[i], p->m, p->threads) : 0;
        if (w > work) work = w;
    }
    p->workspace_buf = work ? add_buffer(b, -1, BUF_WORKSPACE, SNUG_MEM_WORKSPACE, work, 1) : -1;
}

/* A tensor needs a gradient when some path from it reaches the loss through ops with backward: every tensor
 * but the graph input (no op here wants dL/dinput) and the loss's own per-item output. */
static bool needs_grad(const snug_graph *g, snug_tensor t) {
    const graph_node *producer = &g->nodes[g->tensors[t].producer];
    return !(producer->op->flags & (OP_IS_INPUT | OP_IS_LOSS));
}

static void plan_activations(plan_builder *b, const snug_graph *g) {
    plan *p = b->p;
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *nd = &g->nodes[i];
        const op_desc *op = nd->op;
        snug_tensor t = nd->output;
        if (op->flags & OP_IS_INPUT) continue;
        size_t numel = per_batch(b, g->tensors[t].numel, p->m);
        if (op->flags & OP_IS_VIEW) {
            p->value_buf[t] = p->value_buf[nd->inputs[0]];
            p->grad_buf[t] = p->grad_buf[nd->inputs[0]];
            continue;
        }
        p->value_buf[t] = add_buffer(b, i, BUF_VALUE, SNUG_MEM_ACTIVATIONS, numel, sizeof(float));
        if (needs_grad(g, t))
            p->grad_buf[t] = add_buffer(b, i, BUF_GRAD, SNUG_MEM_ACTIVATIONS, numel, sizeof(float));
        size_t saved = op->saved_bytes ? op->saved_bytes(g, nd) : 0;
        if (saved) p->saved_buf[i] = add_buffer(b, i, BUF_SAVED, SNUG_MEM_ACTIVATIONS, per_batch(b, saved, p->m), 1);
    }
}

static void plan_flops(plan *p, const snug_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *nd = &g->nodes[i];
        double f = nd->op->flops ? nd->op->flops(g, nd) : 0;
        p->fwd_flops_per_sample += f;
        /* Ops with parameters compute two products in backward (input and parameter gradients). */
        p->bwd_flops_per_sample += nd->n_params ? 2 * f : f;
    }
}

static int *filled(int n, int value) {
    int *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    if (a) for (int i = 0; i < n; i++) a[i] = value;
    return a;
}

snug_status plan_build(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim, plan *p,
                       snug_error *err) {
    memset(p, 0, sizeof *p);
    if (g->input_node < 0) return snug_fail(err, SNUG_E_ARG, "model '%s' has no input: add one with snug_input", g->name);
    if (g->loss_node < 0) return snug_fail(err, SNUG_E_ARG, "model '%s' has no loss: end it with a loss layer", g->name);
    if (m == 0) return snug_fail(err, SNUG_E_ARG, "micro-batch size 0: it must be at least 1");
    p->m = m;
    p->threads = threads > 0 ? threads : 1;
    p->value_buf = filled(g->n_tensors, -1);
    p->grad_buf = filled(g->n_tensors, -1);
    p->saved_buf = filled(g->n_nodes, -1);
    plan_builder b = {.p = p, .overflow = !p->value_buf || !p->grad_buf || !p->saved_buf};
    if (!b.overflow) {
        plan_fixed_buffers(&b, g, optim);
        plan_data_and_workspace(&b, g);
        plan_activations(&b, g);
        plan_flops(p, g);
    }
    if (b.overflow) {
        plan_free(p);
        return snug_fail(err, SNUG_E_OVERFLOW,
                         "model '%s' at micro-batch %zu needs more memory than this machine can address: "
                         "lower --micro-batch", g->name, m);
    }
    return SNUG_OK;
}

void plan_free(plan *p) {
    free(p->bufs);
    free(p->value_buf);
    free(p->grad_buf);
    free(p->saved_buf);
    memset(p, 0, sizeof *p);
}

const char *plan_buffer_owner(const snug_graph *g, const plan_buffer *b) {
    if (b->node >= 0) return g->nodes[b->node].name;
    switch (b->role) {
    case BUF_WORKSPACE: return "shared";
    default: return "model";
    }
}

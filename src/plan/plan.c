/* Building a plan: segments from the policy, the schedule, buffer lifetimes, arena offsets, then the fixed
 * blocks and the totals per category. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/mem.h"
#include "ops/op.h"
#include "optim/optim.h"

static int *filled(int n, int value) {
    int *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    if (a) for (int i = 0; i < n; i++) a[i] = value;
    return a;
}

static bool aligned_bytes(size_t count, size_t elem, size_t *out) {
    return size_mul(count, elem, out) && size_align(*out ? *out : 1, SNUG_MEM_ALIGN, out);
}

/* The ops' pending blocks (kept: false) or kept weights (true), one after another, each aligned. */
static bool plan_across_window(const snug_graph *g, plan *p, bool kept) {
    size_t *total = kept ? &p->kept_bytes : &p->pending_bytes, *at = kept ? p->kept_at : p->pending_at;
    *total = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        size_t b = p->variant.no_window_extras ? 0
                 : !kept                       ? plan_op_pending(&g->nodes[i], &p->variant, p->m)
                                               : plan_op_kept(&g->nodes[i], &p->variant, p->m);
        at[i] = SIZE_MAX;
        if (b == 0) continue;
        if (b == SIZE_MAX || !size_align(b, SNUG_MEM_ALIGN, &b)) return false;
        at[i] = *total;
        if (!size_add(*total, b, total)) return false;
    }
    return true;
}

/* The shared workspace: the most any node uses while it runs. */
static bool plan_workspace(const snug_graph *g, plan *p) {
    p->workspace_bytes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        size_t w = plan_node_workspace(g, p, i);
        if (w == (size_t)-1) return false;
        if (w > p->workspace_bytes) p->workspace_bytes = w;
    }
    return !p->workspace_bytes || size_align(p->workspace_bytes, SNUG_MEM_ALIGN, &p->workspace_bytes);
}

/* Parameters, gradients, optimizer state, the data buffers and the shared workspace. */
static bool plan_fixed(const snug_graph *g, const snug_optim_config *optim, plan *p) {
    size_t slots = (size_t)optim_state_slots(optim), state, in_numel;
    p->optim_slots = (int)slots;
    const graph_node *in = &g->nodes[g->input_node], *loss = &g->nodes[g->loss_node];
    p->targets_per_sample = g->tensors[loss->output].numel;
    p->state_bytes = 0;
    bool ok = aligned_bytes(g->param_numel, sizeof(float), &p->params_bytes) && size_mul(slots, g->param_numel, &state) &&
              (!g->state_numel || aligned_bytes(g->state_numel, sizeof(float), &p->state_bytes)) &&
              aligned_bytes(state, sizeof(float), &p->optim_bytes) &&
              size_mul(g->tensors[in->output].numel, p->m, &in_numel) &&
              aligned_bytes(in_numel, sizeof(float), &p->input_bytes) &&
              size_mul(p->targets_per_sample, p->m, &state) && aligned_bytes(state, sizeof(int32_t), &p->targets_bytes);
    if (!slots) p->optim_bytes = 0;
    /* the buffers and their copy from the window's start: a skipped window restores them */
    ok = ok && size_mul(p->state_bytes, 2, &p->state_bytes);
    return ok && plan_workspace(g, p) && plan_across_window(g, p, false) && plan_across_window(g, p, true);
}

/* The op's own workspace and its input's stages. */
static size_t node_workspace_and_stages(const snug_graph *g, const plan *p, int i) {
    const graph_node *n = &g->nodes[i];
    size_t w = plan_op_workspace(n, &p->variant, p->m, p->threads);
    /* a regenerated (or unpacked) input's stages come after the op's own workspace */
    if ((plan_input_staged(n, p, i) || (p->fwd_packed[i] && plan_op_has_stage(n))) && w != (size_t)-1 &&
        !size_add(w, plan_op_input_stage(n, &p->variant, p->m, p->threads, p->regen[i]), &w))
        w = (size_t)-1;
    return w;
}

size_t plan_node_grad_stage_at(const snug_graph *g, const plan *p, int i) {
    size_t w = node_workspace_and_stages(g, p, i);
    return w == (size_t)-1 || !size_align(w, 64, &w) ? (size_t)-1 : w;
}

size_t plan_node_workspace(const snug_graph *g, const plan *p, int i) {
    const size_t grads = plan_node_grad_stage(g, p, i), out = plan_node_out_stage(g, p, i);
    const size_t stage = out > grads ? out : grads; /* the same bytes: forward's, then backward's */
    size_t w = plan_node_grad_stage_at(g, p, i);
    if (w == (size_t)-1 || stage == SIZE_MAX || !size_add(w, stage, &w)) return (size_t)-1;
    return stage ? w : node_workspace_and_stages(g, p, i); /* no stage: nothing to align */
}

static bool plan_totals(plan *p) {
    size_t *b = p->bytes;
    b[SNUG_MEM_PARAMS] = p->params_bytes + p->state_bytes + p->kept_bytes;
    b[SNUG_MEM_GRADS] = p->params_bytes + p->pending_bytes;
    b[SNUG_MEM_OPTIM] = p->optim_bytes;
    b[SNUG_MEM_ACTIVATIONS] = p->arena_bytes;
    if (!size_add(p->workspace_bytes, p->runtime_bytes, &b[SNUG_MEM_WORKSPACE])) return false;
    if (!size_add(p->input_bytes, p->targets_bytes, &b[SNUG_MEM_DATA]) ||
        !size_add(b[SNUG_MEM_DATA], p->data_set_bytes, &b[SNUG_MEM_DATA]) ||
        !size_add(b[SNUG_MEM_DATA], p->ring_bytes, &b[SNUG_MEM_DATA]))
        return false;
    p->total = 0;
    for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++)
        if (!size_add(p->total, b[c], &p->total)) return false;
    return true;
}

bool plan_add_beside(plan *p, size_t data_set_bytes, size_t runtime_bytes, size_t ring_slots) {
    p->data_set_bytes = data_set_bytes;
    p->runtime_bytes = runtime_bytes;
    p->ring_slots = ring_slots;
    return size_mul(ring_slots, p->input_bytes + p->targets_bytes, &p->ring_bytes) && plan_totals(p);
}

/* Whether every offset and sum of the arena fits in size_t: the greedy placement never puts a buffer past twice
 * the bytes of all buffers, so a quarter of the address space for them all leaves room for every sum. */
static bool arena_addressable(const plan *p) {
    size_t all = 0;
    for (int b = 0; b < p->n_bufs; b++)
        if (p->bufs[b].shares < 0 && !size_add(all, p->bufs[b].bytes, &all)) return false;
    return all <= SIZE_MAX / 4;
}

/* The activation bytes live at every step, and the largest sum and where it occurs: a sweep over lifetime starts
 * and ends. The running sum wraps while an end is subtracted before a start is added, and is right after each
 * step's changes (arena_addressable keeps every true sum in size_t). */
static bool plan_live_peak(plan *p) {
    size_t *delta = calloc((size_t)p->n_steps + 1, sizeof *delta);
    p->live_at = malloc(((size_t)p->n_steps + 1) * sizeof *p->live_at);
    if (!delta || !p->live_at) {
        free(delta);
        return false;
    }
    for (int b = 0; b < p->n_bufs; b++) {
        if (p->bufs[b].shares >= 0) continue;
        delta[p->bufs[b].first] += p->bufs[b].bytes;
        delta[p->bufs[b].last + 1] -= p->bufs[b].bytes;
    }
    size_t live = 0;
    p->live_peak = 0;
    p->live_peak_step = 0;
    for (int s = 0; s < p->n_steps; s++) {
        live += delta[s];
        p->live_at[s] = live;
        if (live > p->live_peak) {
            p->live_peak = live;
            p->live_peak_step = s;
        }
    }
    free(delta);
    return true;
}

double plan_backward_flops(const snug_graph *g, const graph_node *n) {
    if (n->op->backward_flops) return n->op->backward_flops(n);
    double f = n->op->flops ? n->op->flops(n) : 0;
    /* Ops with parameters compute two products in backward (input and parameter gradients), but no input
     * gradient when their input is the data (it has no gradient buffer, and the op skips that product: MLP's
     * first layer, a network's first convolution). */
    const bool din = n->n_inputs < 1 || g->tensors[graph_base_tensor(g, n->inputs[0])].producer != g->input_node;
    return (n->n_params ? f : 0) + (din ? f : 0);
}

static void plan_flops(const snug_graph *g, plan *p) {
    for (int i = 0; i < g->n_nodes; i++) {
        const graph_node *nd = &g->nodes[i];
        double f = (nd->op->flops ? nd->op->flops(nd) : 0) * (double)p->m;
        p->fwd_flops += f;
        p->bwd_flops += plan_backward_flops(g, nd) * (double)p->m;
    }
    p->recompute_flops = plan_recompute_flops(g, &p->seg, p->m);
}

static bool plan_tables(const snug_graph *g, plan *p) {
    p->value_fwd = filled(g->n_tensors, -1);
    p->value_rec = filled(g->n_tensors, -1);
    p->grad = filled(g->n_tensors, -1);
    p->saved_fwd = filled(g->n_nodes, -1);
    p->saved_rec = filled(g->n_nodes, -1);
    p->pending_at = malloc((size_t)g->n_nodes * sizeof *p->pending_at);
    p->kept_at = malloc((size_t)g->n_nodes * sizeof *p->kept_at);
    p->packed = filled(g->n_tensors, -1);
    p->value_bwd = filled(g->n_tensors, -1);
    return p->value_fwd && p->value_rec && p->grad && p->saved_fwd && p->saved_rec && p->pending_at && p->kept_at &&
           p->packed && p->value_bwd;
}

/* *p, or the plan of variant u where that is smaller (or as small, where ties go to u); on failure *p is
 * freed. Under a ceiling the comparison still takes the plan_build one where it is at most the ceiling: a total
 * over the ceiling is at least the bound over it. */
static snug_status keep_leaner(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                               const plan_variant *u, bool ties_to_u, size_t ceiling, plan *p, snug_error *err) {
    plan q;
    const snug_status s = plan_build_under(g, m, threads, optim, u, ceiling, &q, err);
    if (s != SNUG_OK) {
        plan_free(p);
        return s;
    }
    if (q.total < p->total || (ties_to_u && q.total == p->total)) {
        plan_free(p);
        *p = q;
    } else {
        plan_free(&q);
    }
    return SNUG_OK;
}

/* bf16: the plan without packed copies instead of *p where that is smaller. Packing is lossless (every value is
 * rounded as it is made), so both give the same bits; it lowers the peak where kept outputs make it, not where
 * float32 gradients do (a small CNN's first convolution), and there its copies only take room. */
static snug_status keep_leaner_packing(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                       const plan_variant *v, size_t ceiling, plan *p, snug_error *err) {
    plan_variant u = *v;
    u.no_packing = true;
    return keep_leaner(g, m, threads, optim, &u, false, ceiling, p, err);
}

/* bf16: the plan with float32 activation gradients instead of *p unless packing them pays
 * (plan_packed_grads_pay; planned with its own comparison above): rounding gradients adds error and time. */
static snug_status keep_leaner_grads(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                                     const plan_variant *v, size_t ceiling, plan *p, snug_error *err) {
    const bool any = !plan_packs_no_grads(g, p);
    if (any && v->grad_packing_anyway) return SNUG_OK;
    plan_variant u = *v;
    u.no_grad_packing = true;
    if (!any) { /* nothing packed: *p is the plan without, to be compared with no packing */
        p->variant.no_grad_packing = true;
        return keep_leaner_packing(g, m, threads, optim, &u, ceiling, p, err);
    }
    plan q;
    const snug_status s = plan_build_under(g, m, threads, optim, &u, ceiling, &q, err);
    if (s != SNUG_OK) {
        plan_free(p);
        return s;
    }
    if (plan_packed_grads_pay(g, p, &q)) {
        plan_free(&q);
    } else {
        plan_free(p);
        *p = q;
    }
    return SNUG_OK;
}

/* The totals with the live peak in place of the arena: a lower bound, since buffers live at one step never share
 * memory. When it passes the ceiling, no placement can bring the plan under it. */
static bool bounded_by_live_peak(plan *p, size_t ceiling, bool *over) {
    p->arena_bytes = p->live_peak;
    if (!plan_totals(p)) return false;
    *over = p->total > ceiling;
    p->unplaced = *over;
    return true;
}

snug_status plan_build(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                       const plan_variant *v, plan *p, snug_error *err) {
    return plan_build_under(g, m, threads, optim, v, SIZE_MAX, p, err);
}

snug_status plan_build_under(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                             const plan_variant *v, size_t ceiling, plan *p, snug_error *err) {
    memset(p, 0, sizeof *p);
    if (g->input_node < 0) return snug_fail(err, SNUG_E_ARG, "model '%s' has no input: add one with snug_input", g->name);
    if (g->loss_node < 0) return snug_fail(err, SNUG_E_ARG, "model '%s' has no loss: end it with a loss layer", g->name);
    if (m == 0) return snug_fail(err, SNUG_E_ARG, "micro-batch size 0: it must be at least 1");
    if (v->policy.kind == SNUG_CHECKPOINT_EVERY && v->policy.every == 0)
        return snug_fail(err, SNUG_E_ARG, "checkpoint every:0: a segment needs at least 1 layer");
    p->m = m;
    p->threads = threads > 0 ? threads : 1;
    p->variant = *v;
    p->round_input = plan_rounds_input(g, p);
    plan_reads reads;
    if (!plan_reads_init(g, &reads)) return snug_fail(err, SNUG_E_OOM, "out of memory while planning model '%s'", g->name);
    snug_status s = plan_segment(g, &reads, v, &p->seg);
    bool ok = s == SNUG_OK && plan_tables(g, p) && plan_regen(g, &reads, p) && plan_packed_inputs(g, p) &&
              plan_packed_grads(g, p) && plan_schedule(g, p);
    plan_reads_free(&reads);
    if (ok && !plan_fixed(g, optim, p)) s = SNUG_E_OVERFLOW, ok = false;
    if (ok && (!plan_lifetimes(g, p) || !arena_addressable(p))) s = SNUG_E_OVERFLOW, ok = false;
    /* again once packing has decided which outputs exist only packed: their output stages (plan_node_out_stage) */
    if (ok && !plan_workspace(g, p)) s = SNUG_E_OVERFLOW, ok = false;
    bool over = false;
    ok = ok && plan_live_peak(p);
    if (ok && !bounded_by_live_peak(p, ceiling, &over)) s = SNUG_E_OVERFLOW, ok = false;
    ok = ok && (over || plan_assign_offsets(p, ceiling != SIZE_MAX));
    if (ok && !plan_totals(p)) s = SNUG_E_OVERFLOW, ok = false;
    if (!ok) {
        plan_free(p);
        if (s == SNUG_E_OVERFLOW)
            return snug_fail(err, SNUG_E_OVERFLOW, "model '%s' at micro-batch %zu needs more memory than this "
                             "machine can address: plan a smaller micro-batch", g->name, m);
        return snug_fail(err, SNUG_E_OOM, "out of memory while planning model '%s'", g->name);
    }
    plan_flops(g, p);
    if (!v->bf16 || v->no_packing) return SNUG_OK;
    return v->no_grad_packing ? keep_leaner_packing(g, m, threads, optim, v, ceiling, p, err)
                              : keep_leaner_grads(g, m, threads, optim, v, ceiling, p, err);
}

snug_status plan_place(const snug_graph *g, const snug_optim_config *optim, plan *p, snug_error *err) {
    if (!p->unplaced) return SNUG_OK;
    const plan_variant v = p->variant;
    const size_t m = p->m;
    const int threads = p->threads;
    plan_free(p);
    return plan_build(g, m, threads, optim, &v, p, err);
}

/* Whether p, a bf16 plan that packs no gradient by plan_build's choice, may be planned with them. */
static bool may_pack_grads(const snug_graph *g, const plan *p) {
    return p->variant.bf16 && !p->variant.grad_packing_anyway && plan_packs_no_grads(g, p);
}

snug_status plan_within_budget(const snug_graph *g, size_t m, int threads, const snug_optim_config *optim,
                               size_t budget, size_t ceiling, plan *p, snug_error *err) {
    if (!budget || p->total <= budget) return SNUG_OK;
    plan_variant v = p->variant;
    if (may_pack_grads(g, p)) {
        plan_variant u = v;
        u.no_packing = u.no_grad_packing = false;
        u.grad_packing_anyway = true;
        plan q;
        const snug_status s = plan_build_under(g, m, threads, optim, &u, ceiling, &q, err);
        if (s != SNUG_OK) {
            plan_free(p);
            return s;
        }
        if (q.total < p->total) {
            plan_free(p);
            *p = q;
            v = u;
        } else {
            plan_free(&q);
        }
        if (p->total <= budget) return SNUG_OK;
    }
    if (!p->pending_bytes && !p->kept_bytes) return SNUG_OK;
    v.no_window_extras = true;
    plan_free(p);
    return plan_build_under(g, m, threads, optim, &v, ceiling, p, err);
}

void plan_free(plan *p) {
    plan_segments_free(&p->seg);
    free(p->steps);
    free(p->bufs);
    free(p->value_fwd);
    free(p->value_rec);
    free(p->grad);
    free(p->saved_fwd);
    free(p->saved_rec);
    free(p->pending_at);
    free(p->kept_at);
    free(p->packed);
    free(p->value_bwd);
    free(p->regen);
    free(p->packed_in);
    free(p->packed_out);
    free(p->fwd_packed);
    free(p->packed_only);
    free(p->grad_packed);
    free(p->live_at);
    memset(p, 0, sizeof *p);
}

/* Forward runs the forward steps of the schedule; backward runs the rest (recompute and backward) but the update.
 * Every pointer is bound once, at plan time: a step only fills in m and the random key. */
#include "exec/exec.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/bf16.h"
#include "kernels/elementwise.h"

static void *buf_ptr(const exec *x, int b) { return b >= 0 ? x->arena + x->p->bufs[b].offset : NULL; }

/* Zeroing a gradient buffer is a pass over memory like any element-wise op (2-3% of a UNet step on one thread),
 * so it goes through the element-wise driver: from 4 MiB in 256 KiB chunks over the threads, below that on the
 * calling thread, since waking a sleeping OpenMP worker costs about what zeroing a few MiB does (cnn's
 * micro-batches of 16 opened two teams per pass for 1.6 MiB buffers). */
static const ew_split zero_split = {.par_min = (size_t)1 << 20, .chunk = (size_t)1 << 16};

static void zero_span(float *y, const float *x, size_t n) {
    (void)x;
    memset(y, 0, n * sizeof *y);
}

static void zero_floats(float *p, size_t n) { ew_apply_unary(zero_split, zero_span, p, p, n); }

/* The memory of tensor t's value as a step sees it: the data buffer for the graph input, else the forward
 * instance, or once forward is over the recomputed one, or in bf16 the one unpacked from its packed copy. */
static float *value_ptr(const exec *x, snug_tensor t, bool after_forward) {
    const snug_graph *g = x->g;
    t = graph_base_tensor(g, t);
    if (g->tensors[t].producer == g->input_node) return x->input;
    const plan *p = x->p;
    int b = p->value_fwd[t];
    if (after_forward && p->value_rec[t] >= 0) b = p->value_rec[t];
    else if (after_forward && p->value_bwd[t] >= 0) b = p->value_bwd[t];
    return buf_ptr(x, b);
}

/* A step whose input the plan regenerates (plan.regen) reads it through its producer's backward call, bound
 * with the same steps (the calls table never moves), instead of in[0]. */
static void bind_regen(exec *x, op_call *c) {
    const plan *p = x->p;
    const int producer = x->g->tensors[graph_base_tensor(x->g, c->node->inputs[0])].producer;
    for (int s = p->n_forward; s < p->n_steps; s++)
        if (p->steps[s].node == producer && p->steps[s].phase == SNUG_PHASE_BACKWARD) c->regen = &x->calls[s];
    c->in[0] = NULL;
}

/* bf16: a forward step that reads (writes) values the plan keeps only packed around it (plan.fwd_packed,
 * plan.packed_only) takes their packed copies instead of in[i] (out), and an output made in a stage first the
 * stage it is made in (plan_node_out_stage). */
static void bind_packed_forward(const exec *x, op_call *c, int node) {
    const plan *p = x->p;
    const graph_node *nd = c->node;
    for (int i = 0; i < nd->n_inputs; i++) {
        const int k = p->packed[graph_base_tensor(x->g, nd->inputs[i])];
        if (k < 0) continue;
        c->packed.in[i] = buf_ptr(x, k);
        c->in[i] = NULL;
    }
    if (!p->packed_only[nd->output]) return;
    c->packed.out = buf_ptr(x, p->packed[nd->output]);
    if (x->workspace && plan_node_out_stage(x->g, p, node))
        c->packed.stage = (char *)x->workspace + plan_node_grad_stage_at(x->g, p, node);
}

/* bf16: a backward step whose gradients the plan stores packed (plan.grad_packed) reads (writes) them there
 * instead of dout (din[i]), through its stage after the rest of its workspace. */
static void bind_packed_grads(const exec *x, op_call *c, int node) {
    const plan *p = x->p;
    const graph_node *nd = c->node;
    if (!plan_node_packs_grads(x->g, p, node)) return;
    if (p->grad_packed[nd->output]) {
        c->grads.dout = buf_ptr(x, p->grad[nd->output]);
        c->dout = NULL;
    }
    for (int i = 0; i < nd->n_inputs; i++) {
        const snug_tensor t = graph_base_tensor(x->g, nd->inputs[i]);
        if (!p->grad_packed[t]) continue;
        c->grads.din[i] = buf_ptr(x, p->grad[t]);
        c->din[i] = NULL;
    }
    if (x->workspace) c->grads.stage = (char *)x->workspace + plan_node_grad_stage_at(x->g, p, node);
}

/* bf16: whether a step's output is rounded to bfloat16 as it is made. Not the loss's output or input: the
 * per-item losses and the logits stay float32, since rounding the logits would move the softmax's
 * probabilities by up to 1% (a logit of 5 moves by 0.01), a gradient error of its own beside every other
 * rounding. */
static bool rounds_output(const exec *x, const op_call *c) {
    const op_node *n = c->node;
    const snug_graph *g = x->g;
    return x->p->variant.bf16 && !(n->op->flags & (OP_IS_LOSS | OP_IS_VIEW)) && c->out &&
           n->output != graph_base_tensor(g, g->nodes[g->loss_node].inputs[0]);
}

/* bf16: an op that rounds its own output (OP_ROUNDS_OUTPUT) is told to, with the packed copy to write beside
 * it, so round_output has nothing left to do for it. */
static void bind_rounding(const exec *x, op_call *c) {
    if (!(c->node->op->flags & OP_ROUNDS_OUTPUT) || c->packed.out || !rounds_output(x, c)) return;
    const int k = x->p->packed[c->node->output];
    c->packed.round = true;
    c->packed.copy = k >= 0 ? buf_ptr(x, k) : NULL;
}

static void bind_step(exec *x, int s) {
    const snug_graph *g = x->g;
    const plan *p = x->p;
    const sched_step *st = &p->steps[s];
    op_call *c = &x->calls[s];
    memset(c, 0, sizeof *c);
    if (st->node < 0) return;
    const graph_node *nd = &g->nodes[st->node];
    *c = (op_call){.node = nd, .m = p->m, .threads = p->threads, .work = x->workspace, .bf16 = p->variant.bf16,
                   .product = p->variant.product};
    const bool after = st->phase != SNUG_PHASE_FORWARD;
    for (int i = 0; i < nd->n_inputs; i++) {
        c->in[i] = value_ptr(x, nd->inputs[i], after);
        c->din[i] = buf_ptr(x, p->grad[graph_base_tensor(g, nd->inputs[i])]);
    }
    c->out = st->phase == SNUG_PHASE_FORWARD ? buf_ptr(x, p->value_fwd[nd->output]) : value_ptr(x, nd->output, true);
    c->dout = buf_ptr(x, p->grad[nd->output]);
    int saved = st->phase != SNUG_PHASE_FORWARD && p->saved_rec[st->node] >= 0 ? p->saved_rec[st->node]
                                                                                : p->saved_fwd[st->node];
    c->saved = buf_ptr(x, saved);
    for (int i = 0; i < nd->n_params; i++) {
        const graph_param *gp = &g->params[nd->params[i]];
        if (gp->buffer) {
            c->state[i] = x->state + gp->offset;
            c->w[i] = c->state[i];
        } else {
            c->w[i] = x->params + gp->offset;
            c->dw[i] = x->grads + gp->offset;
        }
    }

    if (nd->op->flags & OP_IS_LOSS) c->targets = x->targets;
    if (p->pending_at[st->node] != SIZE_MAX) c->pending = x->pending + p->pending_at[st->node];
    if (p->kept_at[st->node] != SIZE_MAX) c->kept = x->kept + p->kept_at[st->node];
    if (st->phase == SNUG_PHASE_FORWARD && p->fwd_packed[st->node]) bind_packed_forward(x, c, st->node);
    if (st->phase != SNUG_PHASE_BACKWARD) bind_rounding(x, c);
    if (st->phase == SNUG_PHASE_BACKWARD && p->regen[st->node]) bind_regen(x, c);
    if (st->phase == SNUG_PHASE_BACKWARD) bind_packed_grads(x, c, st->node);
    if (st->phase == SNUG_PHASE_BACKWARD && p->packed_out[st->node] && p->packed[nd->output] >= 0) {
        c->out_packed = buf_ptr(x, p->packed[nd->output]); /* bf16: the kept output only in its packed copy */
        c->out = NULL;
    }
    if (st->phase == SNUG_PHASE_BACKWARD && p->packed_in[st->node]) { /* bf16: in[0] only in its packed copy */
        c->in_packed = buf_ptr(x, p->packed[graph_base_tensor(g, nd->inputs[0])]);
        c->in[0] = NULL;
    }
}

/* Which input of backward step s has gradient buffer b, where that step may write b whole instead of adding
 * into it (OP_WRITES_FRESH): b is the gradient of exactly one of the node's inputs (add(x, x) adds twice), that
 * input covers all of b (no view of part of it), and b is not the gradient the step reads. -1 otherwise. */
static int fresh_input(const exec *x, int s, int b) {
    const plan *p = x->p;
    const snug_graph *g = x->g;
    const sched_step *st = &p->steps[s];
    if (st->node < 0 || st->phase != SNUG_PHASE_BACKWARD) return -1;
    const graph_node *nd = &g->nodes[st->node];
    if (!(nd->op->flags & OP_WRITES_FRESH) || p->grad[nd->output] == b) return -1;
    int found = -1;
    for (int i = 0; i < nd->n_inputs; i++) {
        if (p->grad[graph_base_tensor(g, nd->inputs[i])] != b) continue;
        if (found >= 0) return -1;
        found = i;
    }
    const size_t whole = g->tensors[g->nodes[p->bufs[b].node].output].numel;
    return found >= 0 && g->tensors[nd->inputs[found]].numel == whole ? found : -1;
}

/* Gradient buffers share memory with others over the step, so each is zeroed when its lifetime begins, or
 * written whole by its first writer where that op can (fresh_input: the zeroing was a pass over memory of its
 * own, 2-12% of a step); one that continues another's memory (a residual add's pass-through) starts with that
 * gradient instead, or is written whole over it by an OP_GRAD_IN_PLACE op. Called after bind_step. */
static bool bind_zeroing(exec *x) {
    const plan *p = x->p;
    x->zero_start = calloc((size_t)p->n_steps + 1, sizeof *x->zero_start);
    x->zero_list = malloc(((size_t)p->n_bufs + 1) * sizeof *x->zero_list);
    if (!x->zero_start || !x->zero_list) return false;
    int n = 0;
    for (int s = 0; s < p->n_steps; s++) {
        x->zero_start[s] = n;
        for (int b = 0; b < p->n_bufs; b++) {
            const bool grad = p->bufs[b].kind == ACT_GRAD || p->bufs[b].kind == ACT_GRAD_PACKED;
            if (!grad || p->bufs[b].first != s) continue;
            const int i = fresh_input(x, s, b);
            if (p->bufs[b].shares >= 0) { /* continued: over a dead dout (GELU) it is written whole */
                if (i >= 0 && (x->g->nodes[p->steps[s].node].op->flags & OP_GRAD_IN_PLACE))
                    x->calls[s].din_fresh |= 1u << i;
            } else if (i >= 0) {
                x->calls[s].din_fresh |= 1u << i;
            } else {
                x->zero_list[n++] = b;
            }
        }
    }
    x->zero_start[p->n_steps] = n;
    return true;
}

/* A parameter's gradient is written whole by its first writer in backward where that step's op can
 * (OP_WRITES_DW_FRESH): the update then need not zero it, and the first micro-batch's product need not read it
 * back (a pass over memory each, the size of the model). Shared parameters (a tied head and its embedding)
 * count their first writer only; the later ones add. Called after bind_step. */
static bool bind_param_fresh(exec *x) {
    const plan *p = x->p;
    const snug_graph *g = x->g;
    x->param_fresh = calloc((size_t)g->n_params + 1, sizeof *x->param_fresh);
    bool *seen = calloc((size_t)g->n_params + 1, sizeof *seen);
    if (!x->param_fresh || !seen) {
        free(seen);
        return false;
    }
    for (int s = p->n_forward; s < p->n_steps; s++) {
        const sched_step *st = &p->steps[s];
        if (st->node < 0 || st->phase != SNUG_PHASE_BACKWARD) continue;
        const graph_node *nd = &g->nodes[st->node];
        for (int i = 0; i < nd->n_params; i++) {
            const int k = nd->params[i];
            if (!x->calls[s].dw[i] || seen[k]) continue;
            seen[k] = true;
            if (!(nd->op->flags & OP_WRITES_DW_FRESH)) continue;
            x->calls[s].dw_fresh |= 1u << i;
            x->param_fresh[k] = true;
        }
    }
    free(seen);
    return true;
}

/* bf16: before each step after forward, the instances unpacked from a packed copy whose first reader it is;
 * the list holds their buffers. */
static bool bind_unpacking(exec *x) {
    const plan *p = x->p;
    x->unpack_start = calloc((size_t)p->n_steps + 1, sizeof *x->unpack_start);
    x->unpack_list = malloc(((size_t)p->n_bufs + 1) * sizeof *x->unpack_list);
    if (!x->unpack_start || !x->unpack_list) return false;
    int n = 0;
    for (int s = 0; s < p->n_steps; s++) {
        x->unpack_start[s] = n;
        for (int t = 0; t < x->g->n_tensors; t++)
            if (p->value_bwd[t] >= 0 && p->bufs[p->value_bwd[t]].first == s) x->unpack_list[n++] = p->value_bwd[t];
    }
    x->unpack_start[p->n_steps] = n;
    return true;
}

/* Reservation order decides which block an over-budget message names: the fixed blocks first, the
 * activation arena (which grows with m) last, named after the layer where its peak occurs. */
static snug_status reserve(exec *x, snug_mem *mem, snug_error *err) {
    const plan *p = x->p;
    const sched_step *peak = &p->steps[p->live_peak_step];
    const char *peak_layer = peak->node >= 0 ? x->g->nodes[peak->node].name : "model";
    if (!(x->params = snug_mem_alloc(mem, SNUG_MEM_PARAMS, p->params_bytes, "model", err))) return SNUG_E_OOM;
    if (p->state_bytes && !(x->state = snug_mem_alloc(mem, SNUG_MEM_PARAMS, p->state_bytes, "model", err)))
        return SNUG_E_OOM;
    if (p->state_bytes) x->state_before = (float *)((char *)x->state + p->state_bytes / 2);
    if (!(x->grads = snug_mem_alloc(mem, SNUG_MEM_GRADS, p->params_bytes, "model", err))) return SNUG_E_OOM;
    if (p->optim_bytes && !(x->optim_state = snug_mem_alloc(mem, SNUG_MEM_OPTIM, p->optim_bytes, "optimizer", err)))
        return SNUG_E_OOM;
    if (!(x->input = snug_mem_alloc(mem, SNUG_MEM_DATA, p->input_bytes, "input", err))) return SNUG_E_OOM;
    if (!(x->targets = snug_mem_alloc(mem, SNUG_MEM_DATA, p->targets_bytes, "targets", err))) return SNUG_E_OOM;
    if (p->data_set_bytes && !snug_mem_hold(mem, SNUG_MEM_DATA, p->data_set_bytes, "data sets", err))
        return SNUG_E_OOM;
    if (p->ring_slots &&
        (!(x->ring_inputs = snug_mem_alloc(mem, SNUG_MEM_DATA, p->ring_slots * p->input_bytes, "read-ahead", err)) ||
         !(x->ring_targets = snug_mem_alloc(mem, SNUG_MEM_DATA, p->ring_slots * p->targets_bytes, "read-ahead", err))))
        return SNUG_E_OOM;
    if (p->runtime_bytes && !snug_mem_hold(mem, SNUG_MEM_WORKSPACE, p->runtime_bytes, "runtime", err))
        return SNUG_E_OOM;
    if (p->workspace_bytes && !(x->workspace = snug_mem_alloc(mem, SNUG_MEM_WORKSPACE, p->workspace_bytes, "shared", err)))
        return SNUG_E_OOM;
    if (p->pending_bytes && !(x->pending = snug_mem_alloc(mem, SNUG_MEM_GRADS, p->pending_bytes, "pending rows", err)))
        return SNUG_E_OOM;
    if (p->kept_bytes &&
        !(x->kept = snug_mem_alloc(mem, SNUG_MEM_PARAMS, p->kept_bytes, "kept weights", err)))
        return SNUG_E_OOM;
    if (!(x->arena = snug_mem_alloc(mem, SNUG_MEM_ACTIVATIONS, p->arena_bytes, peak_layer, err))) return SNUG_E_OOM;
    return SNUG_OK;
}

snug_status exec_bind(exec *x, const snug_graph *g, const plan *p, snug_mem *mem, snug_error *err) {
    memset(x, 0, sizeof *x);
    x->g = g;
    x->p = p;
    x->weights_version = 1; /* kept blocks start zeroed: version 0, stale */
    snug_status s = reserve(x, mem, err);
    if (s != SNUG_OK) {
        exec_unbind(x);
        return err ? err->status : s;
    }
    x->calls = calloc((size_t)p->n_steps + 1, sizeof *x->calls);
    if (x->calls)
        for (int i = 0; i < p->n_steps; i++) bind_step(x, i);
    if (!x->calls || !bind_zeroing(x) || !bind_unpacking(x) || !bind_param_fresh(x)) {
        exec_unbind(x);
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the executor's tables");
    }
    const graph_node *loss = &g->nodes[g->loss_node];
    x->item_loss = value_ptr(x, loss->output, false);
    x->logits = value_ptr(x, loss->inputs[0], false);
    return SNUG_OK;
}

void exec_unbind(exec *x) {
    free(x->calls);
    free(x->zero_start);
    free(x->zero_list);
    free(x->unpack_start);
    free(x->unpack_list);
    free(x->param_fresh);
    free(x->op_seconds);
    free(x->op_calls);
    x->calls = NULL;
    x->zero_start = x->zero_list = NULL;
    x->unpack_start = x->unpack_list = NULL;
    x->param_fresh = NULL;
    x->op_seconds = NULL;
    x->op_calls = NULL;
}

void exec_weights_changed(exec *x) { x->weights_version++; }

/* Node's kept block where its op keeps w[0] in bfloat16, else NULL. */
static void *kept_block_of_weight(const exec *x, int node) {
    const size_t at = x->p->kept_at[node];
    return x->kept && at != SIZE_MAX && x->g->nodes[node].op->kept_bf16_weight && x->g->nodes[node].n_params > 0
               ? x->kept + at
               : NULL;
}

uint16_t *exec_kept_bf16_weight(const exec *x, int node) {
    void *kept = kept_block_of_weight(x, node);
    uint64_t *version;
    return kept ? x->g->nodes[node].op->kept_bf16_weight(kept, &version) : NULL;
}

void exec_kept_bf16_weight_current(exec *x, int node) {
    void *kept = kept_block_of_weight(x, node);
    uint64_t *version;
    if (kept && x->g->nodes[node].op->kept_bf16_weight(kept, &version)) *version = x->weights_version;
}

bool exec_param_written_fresh(const exec *x, int i) { return x->param_fresh && x->param_fresh[i]; }

void exec_grads_left_stale(exec *x) { x->grads_stale = true; }

bool exec_profile(exec *x, bool on) {
    x->profiling = false;
    if (!on) return true;
    const size_t n = (size_t)x->p->n_steps + 1;
    if (!x->op_seconds) x->op_seconds = calloc(n, sizeof *x->op_seconds);
    if (!x->op_calls) x->op_calls = calloc(n, sizeof *x->op_calls);
    if (!x->op_seconds || !x->op_calls) return false;
    memset(x->op_seconds, 0, n * sizeof *x->op_seconds);
    memset(x->op_calls, 0, n * sizeof *x->op_calls);
    x->profiling = true;
    return true;
}

/* Profiling: the clock before a step's call (0 when not timed), and the time since added to step s. */
static double tick(const exec *x, const exec_key *key) {
    return x->profiling && key->training ? omp_get_wtime() : 0;
}
static void tock(exec *x, int s, double t0) {
    if (t0 == 0) return;
    x->op_seconds[s] += omp_get_wtime() - t0;
    x->op_calls[s]++;
}

static void set_run(const exec *x, op_call *c, size_t m, const exec_key *key) {
    c->weights_version = x->weights_version;
    c->m = m;
    c->seed = key->seed;
    c->step = key->step;
    c->micro = key->micro;
    c->training = key->training;
}

/* The first element of v[0..n) that is not finite, or n. */
static size_t first_nonfinite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return i;
    return n;
}

/* Whether a checked run found a non-finite value in the n floats at v, per-sample numel apiece: where says
 * which step's node, which sample, which input (-1: the output). Views alias their base, checked where written. */
static bool found_in(const float *v, size_t per, size_t m, const op_call *c, int input, exec_nonfinite *where) {
    if (!where || !v || (c->node->op->flags & OP_IS_VIEW)) return false;
    const size_t i = first_nonfinite(v, per * m);
    if (i == per * m) return false;
    *where = (exec_nonfinite){.node = c->node, .input = input, .sample = i / per, .value = v[i]};
    return true;
}

/* found_in for a gradient stored in bfloat16 (plan.grad_packed). */
static bool found_in_packed(const bf16 *v, size_t per, size_t m, const op_call *c, int input, exec_nonfinite *where) {
    if (!where || !v) return false;
    for (size_t i = 0; i < per * m; i++)
        if ((v[i] & 0x7F80u) == 0x7F80u) { /* all exponent bits: infinity or NaN */
            *where = (exec_nonfinite){.node = c->node, .input = input, .sample = i / per, .value = bf16_to_float(v[i])};
            return true;
        }
    return false;
}

/* bf16: a layer's output is rounded to bfloat16 as it is made, and packed where a step after forward reads it,
 * here in one pass after the op where the op does not do it itself (op_call.packed.round). */
static void round_output(const exec *x, const op_call *c, size_t m) {
    if (c->packed.round || !rounds_output(x, c)) return;
    const size_t count = c->node->out_numel * m;
    const int k = x->p->packed[c->node->output];
    if (k >= 0) bf16_round_pack_par(c->out, (bf16 *)buf_ptr(x, k), count); /* one pass over the output */
    else bf16_round_floats_par(c->out, c->out, count);
}

static void unpack_before(const exec *x, int s, size_t m) {
    for (int i = x->unpack_start[s]; i < x->unpack_start[s + 1]; i++) {
        const int b = x->unpack_list[i];
        const snug_tensor t = x->g->nodes[x->p->bufs[b].node].output;
        bf16_unpack_par(buf_ptr(x, b), (const bf16 *)buf_ptr(x, x->p->packed[t]), x->g->tensors[t].numel * m);
    }
}

static bool run_forward(exec *x, size_t m, const exec_key *key, exec_nonfinite *where) {
    if (x->p->round_input) bf16_round_floats_par(x->input, x->input, x->g->nodes[x->g->input_node].out_numel * m);
    for (int s = 0; s < x->p->n_forward; s++) {
        op_call c = x->calls[s];
        set_run(x, &c, m, key);
        const double t0 = tick(x, key);
        if (c.node->op->forward) c.node->op->forward(&c);
        round_output(x, &c, m);
        tock(x, s, t0);
        if (x->watch && c.out) x->watch(x->watch_ctx, c.node, c.out, m);
        if (found_in(c.out, x->g->tensors[c.node->output].numel, m, &c, -1, where)) return true;
    }
    return false;
}

void exec_forward(exec *x, size_t m, const exec_key *key) { run_forward(x, m, key, NULL); }

void exec_flush(exec *x) {
    const plan *p = x->p;
    for (int s = p->n_forward; s < p->n_steps; s++) {
        const sched_step *st = &p->steps[s];
        if (st->node < 0 || st->phase != SNUG_PHASE_BACKWARD) continue;
        const op_call *c = &x->calls[s];
        if (c->pending && c->node->op->flush) c->node->op->flush(c);
    }
}

static bool run_backward(exec *x, size_t m, float loss_scale, const exec_key *key, exec_nonfinite *where) {
    const plan *p = x->p;
    const bool stale = x->grads_stale; /* only this micro-batch's first writers write whole */
    x->grads_stale = false;
    for (int s = p->n_forward; s < p->n_steps; s++) {
        const sched_step *st = &p->steps[s];
        if (st->node < 0) continue; /* the update belongs to the trainer */
        const double t0 = tick(x, key); /* zeroing its gradient buffers is part of the step's cost */
        for (int z = x->zero_start[s]; z < x->zero_start[s + 1]; z++) {
            const act_buffer *b = &p->bufs[x->zero_list[z]];
            const size_t n = x->g->tensors[x->g->nodes[b->node].output].numel * m;
            if (b->kind == ACT_GRAD_PACKED) memset(buf_ptr(x, x->zero_list[z]), 0, n * sizeof(bf16)); /* +0 */
            else zero_floats(buf_ptr(x, x->zero_list[z]), n);
        }
        unpack_before(x, s, m);
        op_call c = x->calls[s];
        set_run(x, &c, m, key);
        c.loss_scale = loss_scale;
        if (!stale) c.dw_fresh = 0;
        const op_desc *op = c.node->op;
        if (st->phase == SNUG_PHASE_RECOMPUTE) {
            c.recompute = true;
            if (op->forward) op->forward(&c);
            round_output(x, &c, m);
        } else if (op->backward) {
            op->backward(&c);
        }
        tock(x, s, t0);
        if (!where || st->phase == SNUG_PHASE_RECOMPUTE) continue;
        for (int i = 0; i < c.node->n_inputs; i++) {
            const size_t per = x->g->tensors[graph_base_tensor(x->g, c.node->inputs[i])].numel;
            if (found_in(c.din[i], per, m, &c, i, where) || found_in_packed(c.grads.din[i], per, m, &c, i, where))
                return true;
        }
    }
    return false;
}

void exec_backward(exec *x, size_t m, float loss_scale, const exec_key *key) {
    run_backward(x, m, loss_scale, key, NULL);
}

bool exec_find_nonfinite(exec *x, size_t m, float loss_scale, const exec_key *key, exec_nonfinite *where) {
    const op_call input = {.node = &x->g->nodes[x->g->input_node]}; /* the data block: no step writes it */
    return found_in(x->input, input.node->out_numel, m, &input, -1, where) || run_forward(x, m, key, where) ||
           run_backward(x, m, loss_scale, key, where);
}

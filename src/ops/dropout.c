/* dropout: inverted dropout with drop probability p in [0, 1), any shape. In training each element is zeroed
 * with probability p and the others are scaled by 1/(1-p), so evaluation (and p = 0) is the identity.
 *
 * The mask is never stored: element j of sample s of the micro-batch is kept iff
 * snug_rng_uniform(seed, stream, (micro + s) * numel + j) >= p, with
 *     stream = snug_rng_bits(step, node index, DROPOUT_TAG)
 * and micro the micro-batch's first sample within the global batch. So the mask is a pure function of (seed,
 * step, layer, the element's position in the whole global batch): backward, a recompute of a checkpointed
 * segment and a resumed run regenerate it bit for bit, it does not depend on the thread count, and it does not
 * depend on how the global batch is split into micro-batches (accumulation stays exact with dropout).
 * snug_rng_bits (core/rng.c) is a chain of bijections in each of its arguments, so two keys that differ in
 * exactly one of (step, node) never share a stream. */
#include <stdio.h>
#include <string.h>

#include "core/rng.h"
#include "core/parallel.h"
#include "kernels/elementwise.h"
#include "ops/op.h"

/* Below this many elements a parallel loop costs more than it saves (an element costs a few hashes). */
#define DROPOUT_PAR_MIN ((size_t)1 << 13)

static snug_status dropout_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                                 int *n_params, char *msg, size_t msg_len) {
    (void)params;
    const float p = n->p.dropout.p;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (!(p >= 0.0f && p < 1.0f)) { /* written so that NaN fails too */
        snprintf(msg, msg_len, "drop probability p = %g is outside [0, 1): use 0 <= p < 1 (p = 1 would drop "
                 "every element)", (double)p);
        return SNUG_E_ARG;
    }
    *out = in[0];
    *n_params = 0;
    return SNUG_OK;
}

#define DROPOUT_TAG 0x64726f706f7574ULL /* "dropout" */

/* The RNG stream of this call: one per (step, node); see the top of the file. */
static uint64_t dropout_stream(const op_call *c) {
    const uint64_t node = (uint64_t)c->node->index;
    return snug_rng_bits(c->step, node, DROPOUT_TAG);
}

/* The counter of element i of this micro-batch: its index in the whole global batch. */
static uint64_t dropout_counter(const op_call *c, size_t i) { return c->micro * op_in_numel(c, 0) + i; }

/* Whether this call drops anything: only in training and with p > 0. */
static bool dropout_active(const op_call *c) { return c->training && c->node->p.dropout.p > 0.0f; }

/* 1/(1-p), computed once in double and rounded once, so forward and backward scale by the same float. */
static float dropout_scale(const op_call *c) { return (float)(1.0 / (1.0 - (double)c->node->p.dropout.p)); }

static void dropout_forward(const op_call *c) {
    const size_t len = c->m * op_in_numel(c, 0);
    const float *x = c->in[0]; // (m, numel)
    float *y = c->out;         // (m, numel), may be x itself (in place)
    if (!dropout_active(c)) {
        if (y != x) memcpy(y, x, len * sizeof(float));
        return;
    }
    const uint64_t seed = c->seed, stream = dropout_stream(c);
    const float p = c->node->p.dropout.p, scale = dropout_scale(c);
    #pragma omp parallel for schedule(static) if (len >= DROPOUT_PAR_MIN && par_pays_floats(3 * len))
    for (size_t i = 0; i < len; i++)
        y[i] = snug_rng_uniform(seed, stream, dropout_counter(c, i)) >= p ? x[i] * scale : 0.0f;
}

static void dropout_backward(const op_call *c) {
    const size_t len = c->m * op_out_numel(c);
    const float *dy = c->dout; // (m, numel)
    float *dx = c->din[0];     // (m, numel)
    if (!dx) return;
    const bool fresh = c->din_fresh & 1u; /* the first writer of dx: 0 + the gradient, dropped elements 0 */
    if (!dropout_active(c)) {
        const ew_split split = {.par_min = DROPOUT_PAR_MIN, .chunk = DROPOUT_PAR_MIN};
        ew_accumulate(split, dx, dy, len, fresh);
        return;
    }
    const uint64_t seed = c->seed, stream = dropout_stream(c);
    const float p = c->node->p.dropout.p, scale = dropout_scale(c);
    #pragma omp parallel for schedule(static) if (len >= DROPOUT_PAR_MIN && par_pays_floats(3 * len))
    for (size_t i = 0; i < len; i++) {
        const bool keep = snug_rng_uniform(seed, stream, dropout_counter(c, i)) >= p;
        if (fresh) dx[i] = keep ? 0.0f + dy[i] * scale : 0.0f;
        else if (keep) dx[i] += dy[i] * scale;
    }
}

/* A compare and a multiply per element; the hashes behind the mask are not floating-point work. */
static double dropout_flops(const op_node *n) {
    return 2.0 * (double)n->out_numel;
}

static size_t dropout_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward regenerates the mask from its RNG key */
}

static size_t dropout_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_dropout = {
    .kind = "dropout",
    .flags = OP_ELEMENTWISE | OP_WRITES_FRESH,
    .infer = dropout_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .flops = dropout_flops,
    .saved_bytes = dropout_saved_bytes,
    .workspace_bytes = dropout_workspace_bytes,
};

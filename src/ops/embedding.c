/* embedding: token ids (T) -> rows of a table, (T, dim), as torch.nn.Embedding. The ids travel as floats (the
 * data buffer is float): each is rounded to the nearest integer, exact for ids below 2^24. An id outside
 * [0, vocab) (or NaN) gives a zero row and no gradient rather than a wild read: the data layer validates ids and
 * reports them; the op must only never crash on one. The input is data, so there is no input gradient: din, when
 * bound, is left untouched. Backward scatter-adds dy into the table's rows; threads own disjoint column ranges
 * and walk the tokens in order, so the sums are the same bits for any thread count.
 *
 * position_embedding: x (T, D) + P[0..T), P (max_len, D) a learned table (GPT-2's positions). Element-wise and
 * in place; backward passes dy to x unchanged (OP_GRAD_PASSTHROUGH) and adds its sum over the micro-batch into
 * dP's first T rows, element by element over the samples in order: deterministic. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "ops/op.h"
#include "ops/round_output.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define EMB_PAR_MIN ((size_t)1 << 15)
/* Backward's column ranges start on 16-float (64-byte) boundaries: no two threads write one cache line. */
#define EMB_COL_BLOCK ((size_t)16)
/* Position backward's column block: a stack accumulator of 1 KiB. */
#define EMB_POS_BLOCK 256
/* Ids are exact as floats below 2^24. */
#define EMB_MAX_VOCAB ((size_t)1 << 24)
/* The init: GPT-2's N(0, 0.02) matched in standard deviation by U(-b, b) with b = 1/sqrt(fan_in) (see snug.h):
 * std = b / sqrt 3 = 0.02 gives fan_in = 1 / (3 * 0.02^2) = 833.3; 833 gives std 0.020004. */
#define EMB_INIT_FAN_IN ((size_t)833)

/* ---- shape inference ------------------------------------------------------------------------------------ */

static snug_status emb_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                             int *n_params, char *msg, size_t msg_len) {
    const size_t vocab = n->p.embedding.vocab, dim = n->p.embedding.dim;
    char s[96];
    size_t wn, on;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 1 || in[0].dims[0] == 0) {
        snprintf(msg, msg_len, "expects token ids (tokens), got %s: add a flatten",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (vocab == 0 || dim == 0 || vocab > EMB_MAX_VOCAB) {
        snprintf(msg, msg_len, "needs 1 <= vocab <= %zu (ids travel as exact floats) and dim >= 1, got vocab "
                 "%zu and dim %zu", EMB_MAX_VOCAB, vocab, dim);
        return SNUG_E_ARG;
    }
    if (!size_mul(vocab, dim, &wn) || !size_mul(in[0].dims[0], dim, &on) || wn > SIZE_MAX / sizeof(float)) {
        snprintf(msg, msg_len, "table (%zu, %zu) over input %s is too large", vocab, dim,
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = 2, .dims = {in[0].dims[0], dim}};
    params[0] = (param_decl){.suffix = "weight", .shape = {.rank = 2, .dims = {vocab, dim}},
                             .fan_in = EMB_INIT_FAN_IN, .init = INIT_KAIMING_UNIFORM};
    *n_params = 1;
    return SNUG_OK;
}

static snug_status pos_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                             int *n_params, char *msg, size_t msg_len) {
    const size_t max_len = n->p.embedding.vocab;
    char s[96];
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 2 || in[0].dims[0] == 0 || in[0].dims[1] == 0) {
        snprintf(msg, msg_len, "expects (tokens, features), got %s", snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (in[0].dims[0] > max_len) {
        snprintf(msg, msg_len, "input %s has %zu positions, more than max_len %zu: raise max_len to the "
                 "context length", snug_shape_format(&in[0], s, sizeof s), in[0].dims[0], max_len);
        return SNUG_E_SHAPE;
    }
    size_t wn;
    if (!size_mul(max_len, in[0].dims[1], &wn) || wn > SIZE_MAX / sizeof(float)) {
        snprintf(msg, msg_len, "table (%zu, %zu) is too large", max_len, in[0].dims[1]);
        return SNUG_E_SHAPE;
    }
    *out = in[0];
    params[0] = (param_decl){.suffix = "weight", .shape = {.rank = 2, .dims = {max_len, in[0].dims[1]}},
                             .fan_in = EMB_INIT_FAN_IN, .init = INIT_KAIMING_UNIFORM};
    *n_params = 1;
    return SNUG_OK;
}

/* ---- embedding kernels ---------------------------------------------------------------------------------- */

/* The table row of id value v, or SIZE_MAX when v does not round to an id of [0, vocab) (NaN included). In
 * double, so that v + 0.5 stays exact up to 2^24. */
static size_t token_row(float v, size_t vocab) {
    const double d = v;
    if (!(d > -0.5 && d < (double)vocab - 0.5)) return SIZE_MAX;
    return (size_t)(d + 0.5);
}

static void emb_forward(const op_call *c) {
    const size_t rows = c->m * op_in_numel(c, 0), vocab = c->node->p.embedding.vocab;
    const size_t dim = c->node->p.embedding.dim;
    const float *ids = c->in[0]; // (m*T)
    const float *w = c->w[0];    // (vocab, dim)
    float *y = c->out;           // (m*T, dim)
    #pragma omp parallel for schedule(static) \
        if (rows > 1 && rows * dim >= EMB_PAR_MIN && par_pays_floats(2 * rows * dim))
    for (size_t r = 0; r < rows; r++) {
        const size_t id = token_row(ids[r], vocab);
        if (id == SIZE_MAX) memset(y + r * dim, 0, dim * sizeof(float));
        else memcpy(y + r * dim, w + id * dim, dim * sizeof(float));
        op_round_output(c, r * dim, dim);
    }
}

/* dW[id] += dy[r] for the columns [lo, hi), tokens in order. */
static void emb_scatter(float *dw,        // (vocab, dim)
                        const float *dy,  // (rows, dim)
                        const float *ids, // (rows)
                        size_t rows, size_t vocab, size_t dim, size_t lo, size_t hi) {
    for (size_t r = 0; r < rows; r++) {
        const size_t id = token_row(ids[r], vocab);
        if (id == SIZE_MAX) continue;
        float *d = dw + id * dim;
        const float *g = dy + r * dim;
        #pragma omp simd
        for (size_t j = lo; j < hi; j++) d[j] += g[j];
    }
}

static void emb_backward(const op_call *c) {
    /* c->din[0] is deliberately left alone: token ids have no gradient. */
    const size_t rows = c->m * op_in_numel(c, 0), vocab = c->node->p.embedding.vocab;
    const size_t dim = c->node->p.embedding.dim, nblk = (dim + EMB_COL_BLOCK - 1) / EMB_COL_BLOCK;
    if (!c->dw[0]) return;
    #pragma omp parallel if (nblk > 1 && rows * dim >= EMB_PAR_MIN && par_pays_floats(2 * rows * dim))
    {
        const size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        const size_t lo = nblk * t / nt * EMB_COL_BLOCK, hi_blk = nblk * (t + 1) / nt * EMB_COL_BLOCK;
        const size_t hi = hi_blk < dim ? hi_blk : dim;
        if (lo < hi) emb_scatter(c->dw[0], c->dout, c->in[0], rows, vocab, dim, lo, hi);
    }
}

/* ---- position kernels ----------------------------------------------------------------------------------- */

static void pos_forward(const op_call *c) {
    const size_t m = c->m, n = op_in_numel(c, 0); /* T * D: the table's first T rows, flat */
    const float *x = c->in[0]; // (m, T*D)
    const float *p = c->w[0];  // (max_len, D), first T*D used
    float *y = c->out;         // (m, T*D), may be x itself (in place)
    if (c->packed.round) { /* a sample at a time, rounded while in cache */
        #pragma omp parallel for schedule(static) if (m > 1 && m * n >= EMB_PAR_MIN && par_pays_floats(2 * m * n))
        for (size_t s = 0; s < m; s++) {
            for (size_t i = 0; i < n; i++) y[s * n + i] = x[s * n + i] + p[i];
            op_round_output(c, s * n, n);
        }
        return;
    }
    #pragma omp parallel for collapse(2) schedule(static) if (m * n >= EMB_PAR_MIN && par_pays_floats(2 * m * n))
    for (size_t s = 0; s < m; s++)
        for (size_t i = 0; i < n; i++) y[s * n + i] = x[s * n + i] + p[i];
}

static void pos_backward(const op_call *c) {
    const size_t m = c->m, n = op_in_numel(c, 0);
    const float *dy = c->dout; // (m, T*D)
    float *dx = c->din[0];     // (m, T*D) or NULL; dout itself when the planner passed it through
    float *dp = c->dw[0];      // (max_len, D), first T*D used
    if (dx && dx != c->dout) {
        #pragma omp parallel for simd schedule(static) if (m * n >= EMB_PAR_MIN && par_pays_floats(2 * m * n))
        for (size_t i = 0; i < m * n; i++) dx[i] += dy[i];
    }
    if (!dp) return;
    /* Blocks of columns, samples in order inside each: contiguous reads, and every element sums its samples in
     * the same order whatever the thread count. */
    const size_t nblk = (n + EMB_POS_BLOCK - 1) / EMB_POS_BLOCK;
    #pragma omp parallel for schedule(static) if (nblk > 1 && m * n >= EMB_PAR_MIN && par_pays_floats(2 * m * n))
    for (size_t b = 0; b < nblk; b++) {
        const size_t lo = b * EMB_POS_BLOCK, len = lo + EMB_POS_BLOCK < n ? EMB_POS_BLOCK : n - lo;
        float acc[EMB_POS_BLOCK] = {0};
        for (size_t k = 0; k < m; k++) {
            const float *g = dy + k * n + lo;
            #pragma omp simd
            for (size_t j = 0; j < len; j++) acc[j] += g[j];
        }
        for (size_t j = 0; j < len; j++) dp[lo + j] += acc[j];
    }
}

/* ---- costs ---------------------------------------------------------------------------------------------- */

static double emb_flops(const op_node *n) {
    return (double)n->out_numel; /* a copy: one per element written */
}

static size_t emb_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* embedding reads its kept input (the ids); position reads only dout */
}

static size_t emb_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_embedding = {
    .kind = "embedding",
    .flags = OP_KEEPS_INPUT | OP_READS_INDICES | OP_ROUNDS_OUTPUT,
    .infer = emb_infer,
    .forward = emb_forward,
    .backward = emb_backward,
    .flops = emb_flops,
    .saved_bytes = emb_saved_bytes,
    .workspace_bytes = emb_workspace_bytes,
};

const op_desc op_position_embedding = {
    .kind = "position_embedding",
    .flags = OP_ELEMENTWISE | OP_GRAD_PASSTHROUGH | OP_ROUNDS_OUTPUT,
    .infer = pos_infer,
    .forward = pos_forward,
    .backward = pos_backward,
    .flops = emb_flops,
    .saved_bytes = emb_saved_bytes,
    .workspace_bytes = emb_workspace_bytes,
};

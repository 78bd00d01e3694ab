/* layernorm: each row of the last dimension of x (T, C) or (C) is normalised with its own mean and biased
 * variance, then scaled and shifted per column (weight ones, bias zeros), as torch.nn.LayerNorm(C). Forward
 * saves each row's mean and inverse deviation (2T floats per sample), which a recompute reuses
 * (OP_REPLAYS_SAVED); backward recomputes x_hat from the kept input. Rows never mix samples, so accumulation is
 * exact and a recompute writes the same bits. The row loops are `omp simd`: their sums run in an order fixed at
 * compile time, the same for any thread count. In bf16 forward rounds each row as it writes it
 * (OP_ROUNDS_OUTPUT), and backward and a regeneration read an input the plan keeps only packed a row at a time
 * from the packed copy (OP_READS_PACKED): no float32 instance of it is unpacked. */
#include <math.h>
#include <stdio.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "kernels/bf16.h"
#include "ops/op.h"
#include "ops/round_output.h"
#include "kernels/vmath.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define LN_PAR_MIN ((size_t)1 << 15)
/* Backward sums dgamma and dbeta over blocks of this many rows, one partial per block in the workspace, then
 * over the blocks in order: no races, and the same bits whatever the thread count. */
#define LN_BLOCK_ROWS ((size_t)32)

static snug_status ln_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                            int *n_params, char *msg, size_t msg_len) {
    const norm_params *p = &n->p.norm;
    char s[96];
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 1 && in[0].rank != 2) {
        snprintf(msg, msg_len, "normalises the last dimension of (T, C) or (C), got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (!(p->eps > 0.0f) || !isfinite(p->eps)) {
        snprintf(msg, msg_len, "eps must be positive and finite, got %g (PyTorch's default is 1e-5)", (double)p->eps);
        return SNUG_E_ARG;
    }
    const size_t C = in[0].dims[in[0].rank - 1];
    const snug_shape cs = {.rank = 1, .dims = {C}};
    *out = in[0];
    params[0] = (param_decl){.suffix = "weight", .shape = cs, .fan_in = C, .init = INIT_ONES};
    params[1] = (param_decl){.suffix = "bias", .shape = cs, .fan_in = C, .init = INIT_ZEROS};
    *n_params = 2;
    return SNUG_OK;
}

static size_t ln_width(const snug_shape *s) { return s->dims[s->rank - 1]; }
static size_t ln_rows_per_sample(const snug_shape *s) { return s->rank == 2 ? s->dims[0] : 1; }

/* One row's mean and inverse deviation into stat[0], stat[1]. */
VM_KERNEL static void ln_row_stats(float *stat, const float *x, size_t C, double eps) {
    /* shifted by the first value so that a large mean does not cancel the variance in the one-pass sums */
    const double shift = x[0];
    double s1 = 0.0, s2 = 0.0;
    #pragma omp simd reduction(+ : s1, s2)
    for (size_t j = 0; j < C; j++) {
        const double d = (double)x[j] - shift;
        s1 += d;
        s2 += d * d;
    }
    const double dm = s1 / (double)C, v = s2 / (double)C - dm * dm;
    stat[0] = (float)(shift + dm);
    stat[1] = (float)(1.0 / sqrt((v > 0.0 ? v : 0.0) + eps));
}

/* One row: its mean and inverse deviation into stat, unless `replay` (a recompute reads the saved ones: the same
 * bits, without the statistics' pass); then y = (x - mean) invstd gamma + beta. */
VM_KERNEL static void ln_forward_row(float *y, float *stat, const float *x, const float *gamma, const float *beta,
                                     size_t C, double eps, bool replay) {
    if (!replay) ln_row_stats(stat, x, C, eps);
    const float mean = stat[0], invstd = stat[1];
    #pragma omp simd
    for (size_t j = 0; j < C; j++) y[j] = (x[j] - mean) * invstd * gamma[j] + beta[j];
}

static void ln_forward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t C = ln_width(s), rows = c->m * ln_rows_per_sample(s);
    const double eps = c->node->p.norm.eps;
    const float *x = c->in[0];     // (rows, C)
    float *y = c->out;             // (rows, C)
    float *stat = c->saved;        // (rows, 2): mean, invstd
    #pragma omp parallel for schedule(static) if (rows * C >= LN_PAR_MIN && par_pays_floats(4 * rows * C))
    for (size_t r = 0; r < rows; r++) {
        ln_forward_row(y + r * C, stat + 2 * r, x + r * C, c->w[0], c->w[1], C, eps, c->recompute);
        op_round_output(c, r * C, C);
    }
}

/* One row: x_hat = (x - mean) invstd, g = gamma dy; dx += invstd (g - mean(g) - x_hat mean(g x_hat)); the
 * row's dy x_hat and dy go into the block partials pg, pb. */
VM_KERNEL static void ln_backward_row(const float *x, const float *dy, const float *gamma, float mean, float invstd,
                            size_t C, float *dx, bool fresh, double *pg, double *pb) {
    double sg = 0.0, sgx = 0.0;
    #pragma omp simd reduction(+ : sg, sgx)
    for (size_t j = 0; j < C; j++) {
        const float xh = (x[j] - mean) * invstd, g = gamma[j] * dy[j];
        sg += g;
        sgx += (double)g * xh;
        pg[j] += (double)dy[j] * xh;
        pb[j] += dy[j];
    }
    if (!dx) return;
    const float mg = (float)(sg / (double)C), mgx = (float)(sgx / (double)C);
    /* the first writer of dx (op_call.din_fresh) starts from 0: the bits of adding into zeros */
    #pragma omp simd
    for (size_t j = 0; j < C; j++)
        dx[j] = (fresh ? 0.0f : dx[j]) + invstd * (gamma[j] * dy[j] - mg - (x[j] - mean) * invstd * mgx);
}

static void ln_backward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t C = ln_width(s), rows = c->m * ln_rows_per_sample(s);
    const size_t blocks = (rows + LN_BLOCK_ROWS - 1) / LN_BLOCK_ROWS;
    const float *x = c->in[0], *dy = c->dout; // (rows, C); x NULL where it is packed (c->in_packed)
    const float *stat = c->saved;             // (rows, 2)
    float *dx = c->din[0];
    double *part = c->work;                   // (blocks, 2, C): dgamma, dbeta partials
    float *unpacked = (float *)(void *)(part + 2 * blocks * C); // (blocks, C): a row of x, where x is packed
    #pragma omp parallel for schedule(static) if (rows * C >= LN_PAR_MIN && par_pays_floats(4 * rows * C))
    for (size_t b = 0; b < blocks; b++) {
        double *pg = part + 2 * b * C, *pb = pg + C;
        for (size_t j = 0; j < 2 * C; j++) pg[j] = 0.0;
        const size_t end = (b + 1) * LN_BLOCK_ROWS < rows ? (b + 1) * LN_BLOCK_ROWS : rows;
        for (size_t r = b * LN_BLOCK_ROWS; r < end; r++) {
            const float *xr = x ? x + r * C : unpacked + b * C;
            if (!x) bf16_unpack(unpacked + b * C, c->in_packed + r * C, C); /* the row's values, exactly */
            ln_backward_row(xr, dy + r * C, c->w[0], stat[2 * r], stat[2 * r + 1], C, dx ? dx + r * C : NULL,
                            c->din_fresh & 1u, pg, pb);
        }
    }
    float *dgamma = c->dw[0], *dbeta = c->dw[1];
    #pragma omp parallel for schedule(static) if (blocks * C >= LN_PAR_MIN && par_pays_floats(4 * blocks * C))
    for (size_t j = 0; j < C; j++) {
        double sg = 0.0, sb = 0.0;
        for (size_t b = 0; b < blocks; b++) {
            sg += part[2 * b * C + j];
            sb += part[(2 * b + 1) * C + j];
        }
        if (dgamma) dgamma[j] += (float)sg;
        if (dbeta) dbeta[j] += (float)sb;
    }
}

/* Sample n's rows of the forward's output (op_desc.regen), rows split over T: the forward's row apply from the
 * saved statistics (as a recompute does), so the same bits. */
static void ln_regen(const op_call *c, size_t n, float *dst, size_t t, size_t T) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t C = ln_width(s), R = ln_rows_per_sample(s);
    float *stat = (float *)c->saved + 2 * n * R; // (R, 2) of sample n
    for (size_t r = R * t / T; r < R * (t + 1) / T; r++) {
        const float *x = c->in[0] ? c->in[0] + (n * R + r) * C : dst + r * C; /* packed: unpacked in place */
        if (!c->in[0]) bf16_unpack(dst + r * C, c->in_packed + (n * R + r) * C, C);
        ln_forward_row(dst + r * C, stat + 2 * r, x, c->w[0], c->w[1], C, c->node->p.norm.eps, true);
        if (c->bf16) bf16_round_floats(dst + r * C, dst + r * C, C);
    }
}

static double ln_flops(const op_node *n) {
    return 5.0 * (double)n->in_numel[0]; /* statistics (2) + normalise, scale, shift (3) */
}

static size_t ln_saved_bytes(const op_node *n) {
    size_t bytes;
    const size_t rows = ln_rows_per_sample(&n->in_shape[0]);
    return size_mul(rows, 2 * sizeof(float), &bytes) ? bytes : SIZE_MAX;
}

static size_t ln_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)threads;
    const snug_shape *s = &n->in_shape[0];
    size_t rows, bytes;
    if (!size_mul(m, ln_rows_per_sample(s), &rows)) return SIZE_MAX;
    const size_t blocks = rows / LN_BLOCK_ROWS + (rows % LN_BLOCK_ROWS != 0);
    return size_mul(blocks, ln_width(s), &bytes) && size_mul(bytes, 2 * sizeof(double), &bytes) ? bytes : SIZE_MAX;
}

/* In a bf16 plan, beside the partials a row of floats per block: backward unpacks each row of a packed input
 * there (OP_READS_PACKED) and runs the float32 row kernel on it, the bits of reading an unpacked instance. */
static size_t ln_bf16_workspace_bytes(const op_node *n, size_t m, int threads) {
    const size_t partials = ln_workspace_bytes(n, m, threads);
    size_t blocks, bytes;
    if (partials == SIZE_MAX || !size_mul(m, ln_rows_per_sample(&n->in_shape[0]), &blocks)) return SIZE_MAX;
    blocks = blocks / LN_BLOCK_ROWS + (blocks % LN_BLOCK_ROWS != 0);
    return size_mul(blocks, ln_width(&n->in_shape[0]) * sizeof(float), &bytes) && size_add(bytes, partials, &bytes)
               ? bytes
               : SIZE_MAX;
}

const op_desc op_layernorm = {
    .kind = "layernorm",
    .flags = OP_KEEPS_INPUT | OP_REPLAYS_SAVED | OP_WRITES_FRESH | OP_ROUNDS_OUTPUT | OP_READS_PACKED,
    .infer = ln_infer,
    .forward = ln_forward,
    .backward = ln_backward,
    .flops = ln_flops,
    .saved_bytes = ln_saved_bytes,
    .workspace_bytes = ln_workspace_bytes,
    .bf16_workspace_bytes = ln_bf16_workspace_bytes,
    .regen = ln_regen,
};

/* batchnorm2d: y = (x - mean) / sqrt(var + eps) * gamma + beta per channel of x (C, H, W), as
 * torch.nn.BatchNorm2d. Training uses the biased statistics of the micro-batch over (m, H, W); evaluation the
 * running ones. Params weight (gamma, ones), bias (beta, zeros); buffers running_mean (zeros), running_var (ones).
 *
 * The per-channel mean and inverse deviation are saved once per micro-batch (saved_batch_bytes, 2C floats) and
 * backward recomputes x_hat from the kept input, so nothing is saved per sample. A recompute forward
 * (checkpointing) skips the statistics and applies the saved floats through the same code as the first forward,
 * so it writes bit-identical output and leaves the running statistics alone.
 *
 * Statistics are per micro-batch: with gradient accumulation this is NOT exactly large-batch BatchNorm. */
#include <math.h>
#include <stdio.h>

#include "ops/norm_stats.h"
#include "ops/op.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define BN_PAR_MIN ((size_t)1 << 15)

enum { BN_GAMMA, BN_BETA, BN_RUNNING_MEAN, BN_RUNNING_VAR };

static bool bn_infer(const graph_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                     int *n_params, char *msg, size_t msg_len) {
    const norm_params *p = &n->p.norm;
    char s[96];
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return false;
    }
    if (in[0].rank != 3) {
        snprintf(msg, msg_len, "expects an image-like input (C, H, W), got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return false;
    }
    if (!(p->eps > 0.0f) || !isfinite(p->eps)) {
        snprintf(msg, msg_len, "eps must be positive and finite, got %g (PyTorch's default is 1e-5)", (double)p->eps);
        return false;
    }
    if (!(p->momentum >= 0.0f && p->momentum <= 1.0f)) {
        snprintf(msg, msg_len, "momentum must be in [0, 1], got %g (PyTorch's default is 0.1)", (double)p->momentum);
        return false;
    }
    const size_t C = in[0].dims[0];
    const snug_shape cs = {.rank = 1, .dims = {C}};
    *out = in[0];
    params[BN_GAMMA] = (param_decl){.suffix = "weight", .shape = cs, .fan_in = C, .init = INIT_ONES};
    params[BN_BETA] = (param_decl){.suffix = "bias", .shape = cs, .fan_in = C, .init = INIT_ZEROS};
    params[BN_RUNNING_MEAN] = (param_decl){.suffix = "running_mean", .shape = cs, .fan_in = C, .init = INIT_ZEROS,
                                           .buffer = true};
    params[BN_RUNNING_VAR] = (param_decl){.suffix = "running_var", .shape = cs, .fan_in = C, .init = INIT_ONES,
                                          .buffer = true};
    *n_params = 4;
    return true;
}

/* Batch statistics of channel ch over (m, hw): its m planes, C planes apart (ops/norm_stats.h). Returns the
 * mean; *var is the biased variance. */
static double bn_channel_stats(const float *x, // (m, C, hw)
                               size_t m, size_t C, size_t hw, size_t ch, double *var) {
    return norm_plane_moments(x + ch * hw, m, C * hw, hw, var);
}

/* Training forward, first pass only: the micro-batch's mean and inverse deviation into saved, and the running
 * statistics updated as PyTorch does (unbiased variance). */
static void bn_batch_stats(const op_call *c, size_t C, size_t hw, float *mean, float *invstd) {
    const float eps = c->node->p.norm.eps;
    const double mom = c->node->p.norm.momentum, count = (double)(c->m * hw);
    const double unbias = count > 1.0 ? count / (count - 1.0) : 1.0;
    float *rmean = c->state[BN_RUNNING_MEAN], *rvar = c->state[BN_RUNNING_VAR];
    #pragma omp parallel for schedule(static) if (c->m * C * hw >= BN_PAR_MIN)
    for (size_t ch = 0; ch < C; ch++) {
        double var, mu = bn_channel_stats(c->in[0], c->m, C, hw, ch, &var);
        mean[ch] = (float)mu;
        invstd[ch] = (float)(1.0 / sqrt(var + (double)eps));
        rmean[ch] = (float)((1.0 - mom) * rmean[ch] + mom * mu);
        rvar[ch] = (float)((1.0 - mom) * rvar[ch] + mom * var * unbias);
    }
}

/* y = (x - mean) a + beta per channel, a = gamma invstd: one code path for every mode. (Subtracting the mean
 * first: with a large mean, x a + (beta - mean a) would cancel.) */
static void bn_apply(const op_call *c, size_t C, size_t hw, const float *mean, const float *invstd) {
    const float *x = c->in[0];     // (m, C, hw)
    const float *gamma = c->w[BN_GAMMA], *beta = c->w[BN_BETA];
    float *y = c->out;             // (m, C, hw)
    const size_t planes = c->m * C;
    #pragma omp parallel for schedule(static) if (planes * hw >= BN_PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const size_t ch = pl % C;
        const float a = gamma[ch] * invstd[ch], mu = mean[ch], b = beta[ch];
        const float *xp = x + pl * hw;
        float *yp = y + pl * hw;
        for (size_t k = 0; k < hw; k++) yp[k] = (xp[k] - mu) * a + b;
    }
}

static void bn_forward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t C = s->dims[0], hw = s->dims[1] * s->dims[2];
    if (c->m == 0) return;
    if (c->training) {
        float *mean = c->saved, *invstd = mean + C; // (C) each: this micro-batch's statistics
        if (!c->recompute) bn_batch_stats(c, C, hw, mean, invstd);
        bn_apply(c, C, hw, mean, invstd);
        return;
    }
    /* Evaluation: the running statistics, converted into the same (mean, invstd) form; C is small. */
    const float eps = c->node->p.norm.eps;
    const float *rmean = c->w[BN_RUNNING_MEAN], *rvar = c->w[BN_RUNNING_VAR];
    float *mean = c->work, *invstd = mean + C; // (C) each
    for (size_t ch = 0; ch < C; ch++) {
        mean[ch] = rmean[ch];
        invstd[ch] = (float)(1.0 / sqrt((double)rvar[ch] + (double)eps));
    }
    bn_apply(c, C, hw, mean, invstd);
}

/* With x_hat = (x - mean) * invstd and N = m * hw per channel:
 * dbeta = sum dy, dgamma = sum dy x_hat, dx = gamma invstd (dy - dbeta / N - x_hat dgamma / N). */
static void bn_backward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t m = c->m, C = s->dims[0], hw = s->dims[1] * s->dims[2];
    const float *x = c->in[0], *dy = c->dout; // (m, C, hw)
    const float *mean = c->saved, *invstd = mean + C;
    const float *gamma = c->w[BN_GAMMA];
    float *dx = c->din[0], *dgamma = c->dw[BN_GAMMA], *dbeta = c->dw[BN_BETA];
    if (m == 0) return;
    #pragma omp parallel for schedule(static) if (m * C * hw >= BN_PAR_MIN)
    for (size_t ch = 0; ch < C; ch++) {
        const float mu = mean[ch], is = invstd[ch];
        double sdy = 0.0, sdyx = 0.0;
        for (size_t i = 0; i < m; i++) { /* float vector sums per plane, double over planes, as the statistics */
            const float *dyp = dy + (i * C + ch) * hw, *xp = x + (i * C + ch) * hw;
            float p1 = 0.0f, p2 = 0.0f;
            #pragma omp simd reduction(+ : p1, p2)
            for (size_t k = 0; k < hw; k++) {
                p1 += dyp[k];
                p2 += dyp[k] * ((xp[k] - mu) * is);
            }
            sdy += p1;
            sdyx += p2;
        }
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
        if (!dx) continue;
        const double n = (double)(m * hw);
        const float k0 = gamma[ch] * is, mdy = (float)(sdy / n), mdyx = (float)(sdyx / n);
        for (size_t i = 0; i < m; i++) {
            const float *dyp = dy + (i * C + ch) * hw, *xp = x + (i * C + ch) * hw;
            float *dxp = dx + (i * C + ch) * hw;
            #pragma omp simd
            for (size_t k = 0; k < hw; k++) dxp[k] += k0 * (dyp[k] - mdy - (xp[k] - mu) * is * mdyx);
        }
    }
}

static double bn_flops(const snug_graph *g, const graph_node *n) {
    return 4.0 * (double)g->tensors[n->inputs[0]].numel; /* statistics (2) + scale and shift (2) */
}

static size_t bn_saved_bytes(const snug_graph *g, const graph_node *n) {
    (void)g, (void)n;
    return 0; /* backward reads the kept input (OP_KEEPS_INPUT) and the per-batch statistics */
}

static size_t bn_saved_batch_bytes(const snug_graph *g, const graph_node *n) {
    return 2 * g->tensors[n->inputs[0]].shape.dims[0] * sizeof(float); /* mean and invstd per channel */
}

static size_t bn_workspace_bytes(const snug_graph *g, const graph_node *n, size_t m, int threads) {
    (void)m, (void)threads;
    return 2 * g->tensors[n->inputs[0]].shape.dims[0] * sizeof(float); /* evaluation's (mean, invstd) */
}

const op_desc op_batchnorm2d = {
    .kind = "batchnorm2d",
    .flags = OP_KEEPS_INPUT,
    .infer = bn_infer,
    .forward = bn_forward,
    .backward = bn_backward,
    .flops = bn_flops,
    .saved_bytes = bn_saved_bytes,
    .saved_batch_bytes = bn_saved_batch_bytes,
    .workspace_bytes = bn_workspace_bytes,
};

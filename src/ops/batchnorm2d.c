/* batchnorm2d: y = (x - mean) / sqrt(var + eps) * gamma + beta per channel of x (C, H, W), as
 * torch.nn.BatchNorm2d. Training uses the biased statistics of the micro-batch over (m, H, W); evaluation the
 * running ones. Params weight (gamma, ones), bias (beta, zeros); buffers running_mean (zeros), running_var (ones).
 *
 * The per-channel mean and inverse deviation are saved once per micro-batch (saved_batch_bytes, 2C floats) and
 * backward recomputes x_hat from the kept input, so nothing is saved per sample. A recompute forward
 * (checkpointing) skips the statistics and applies the saved floats through the same code as the first forward,
 * so it writes bit-identical output and leaves the running statistics alone.
 *
 * Forward and backward each make one parallel loop over channels and two passes over a channel (statistics
 * then apply; the two gradient sums together, then dx), the second while the channel is still in cache.
 *
 * Statistics are per micro-batch: with gradient accumulation this is NOT exactly large-batch BatchNorm.
 *
 * op_batchnorm2d_relu is the same layer with the ReLU that is its output's only reader folded in
 * (graph/fuse.c; the ReLU node becomes a view of this output): forward writes relu(y), and backward takes the
 * ReLU's output gradient and masks it with y > 0, y recomputed from the kept input by the forward's own
 * expression (the same bits, so the same mask). It computes what the two ops compute, bit for bit, without
 * the ReLU's backward pass over memory and its gradient buffer.
 *
 * In bf16 the layer rounds its output (and writes its packed copy) in the loop that computes it
 * (OP_ROUNDS_OUTPUT: the bits of op_round_output's pass, without reading the plane back from the cache), and
 * backward (and the regeneration of its output for the convolution after it) reads a kept input that the plan
 * holds only packed block by block from the packed copy (OP_READS_PACKED), so no float32 instance of it is
 * unpacked. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/parallel.h"
#include "kernels/bf16.h"
#include "kernels/norm_relu.h"
#include "ops/op.h"
#include "kernels/vmath.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define BN_PAR_MIN ((size_t)1 << 15)

enum { BN_GAMMA, BN_BETA, BN_RUNNING_MEAN, BN_RUNNING_VAR };

static snug_status bn_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                            int *n_params, char *msg, size_t msg_len) {
    const norm_params *p = &n->p.norm;
    char s[96];
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 3) {
        snprintf(msg, msg_len, "expects an image-like input (C, H, W), got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (!(p->eps > 0.0f) || !isfinite(p->eps)) {
        snprintf(msg, msg_len, "eps must be positive and finite, got %g (PyTorch's default is 1e-5)", (double)p->eps);
        return SNUG_E_ARG;
    }
    if (!(p->momentum >= 0.0f && p->momentum <= 1.0f)) {
        snprintf(msg, msg_len, "momentum must be in [0, 1], got %g (PyTorch's default is 0.1)", (double)p->momentum);
        return SNUG_E_ARG;
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
    return SNUG_OK;
}

/* ---- per-channel kernels --------------------------------------------------------------------------------
 * A channel's m planes lie C planes apart; one thread does a whole channel (statistics, then the apply that
 * reads the planes again while they are still in its cache), so the bits do not depend on the thread count.
 * Sums run in 16 float lanes (element k of a plane into lane k mod 16), which the compiler keeps in one
 * AVX-512 vector or two AVX2 or four SSE vectors alike: the same order, so the same bits, on every CPU. The
 * lanes go into double totals every BN_FLUSH elements, which bounds the float error whatever m and hw are. */

#define BN_LANES NORM_LANES
#define BN_FLUSH ((size_t)1 << 12)

/* The double totals of two lane sets, and the lanes back to zero. */
static inline void bn_flush(float *l1, float *l2, double *s1, double *s2) {
    for (int l = 0; l < BN_LANES; l++) {
        *s1 += l1[l];
        *s2 += l2[l];
        l1[l] = l2[l] = 0.0f;
    }
}

/* Mean and biased variance (*var) of m planes of hw values, `stride` apart. Shifted by the first value so that
 * a large mean does not cancel the variance in the one-pass sums (as kernels/norm_stats.h). */
VM_KERNEL static double bn_moments(const float *x, // (m, stride), the first hw of each
                                   size_t m, size_t stride, size_t hw, double *var) {
    const float shift = x[0];
    float l1[BN_LANES] = {0}, l2[BN_LANES] = {0};
    double s1 = 0.0, s2 = 0.0;
    size_t pending = 0;
    for (size_t j = 0; j < m; j++) {
        const float *xp = x + j * stride;
        size_t k = 0;
        for (; k + BN_LANES <= hw; k += BN_LANES)
            #pragma omp simd
            for (int l = 0; l < BN_LANES; l++) {
                const float d = xp[k + l] - shift;
                l1[l] += d;
                l2[l] += d * d;
            }
        if (k < hw) { /* the tail, through a copy: lanes past it add zero */
            float t[BN_LANES] = {0};
            memcpy(t, xp + k, (hw - k) * sizeof(float));
            #pragma omp simd
            for (int l = 0; l < BN_LANES; l++) {
                const float d = (size_t)l < hw - k ? t[l] - shift : 0.0f;
                l1[l] += d;
                l2[l] += d * d;
            }
        }
        if ((pending += hw) >= BN_FLUSH) {
            bn_flush(l1, l2, &s1, &s2);
            pending = 0;
        }
    }
    bn_flush(l1, l2, &s1, &s2);
    const double n = (double)(m * hw), dm = s1 / n, v = s2 / n - dm * dm;
    *var = v > 0.0 ? v : 0.0;
    return shift + dm;
}

/* y = the normalised value over m planes of hw values, relu(y) where a ReLU is folded in (norm_relu.h). */
VM_KERNEL static void bn_apply_channel(float *y,       // (m, stride)
                                       const float *x, // (m, stride)
                                       size_t m, size_t stride, size_t hw, norm_plane k) {
    for (size_t j = 0; j < m; j++) norm_apply_span(y + j * stride, x + j * stride, hw, k);
}

/* The value a bf16 forward writes: the apply's (norm_apply_span's expressions), rounded as op_round_output
 * rounds it. */
NORM_INLINE float bn_rounded_value(float x, norm_plane k) {
    const float v = norm_value(x, k.mean, k.a, k.b);
    return bf16_round(k.relu ? relu_value(v) : v);
}

/* A plane of a bf16 forward: applied and rounded in one pass (the bits of bn_apply_channel then
 * op_round_output, without reading the plane back), then packed into copy where the plan keeps one: a
 * rounded value packs to its own top half, so the copy holds what op_round_output writes. (Writing the copy in
 * the same loop spills the ReLU's vectors on AVX-512 and was slower on 16 x 16 planes.) */
VM_KERNEL static void bn_apply_round_span(float *y, bf16 *copy, const float *x, size_t hw, norm_plane k) {
    #pragma omp simd
    for (size_t i = 0; i < hw; i++) y[i] = bn_rounded_value(x[i], k);
    if (copy) bf16_pack_rounded(copy, y, hw);
}

/* A regenerated plane from the packed input in one pass: widened (exact), applied and rounded
 * (bn_rounded_value): the bits of unpacking, applying and rounding in turn. */
VM_KERNEL static void bn_regen_packed(float *y, const bf16 *x, size_t hw, norm_plane k) {
    #pragma omp simd
    for (size_t i = 0; i < hw; i++) y[i] = bn_rounded_value(bf16_to_float(x[i]), k);
}

/* In a bf16 plan that keeps the input only packed (op_call.in_packed, OP_READS_PACKED), backward and a
 * regeneration read it from the packed copy: a block at a time on the stack, a multiple of the lanes, so each
 * lane sums the same elements in the same order: the bits of reading the unpacked instance (as GroupNorm's). */
#define BN_PACKED_BLOCK ((size_t)256)

/* A channel's input: its float32 planes, or (f NULL) their bfloat16 copies. */
typedef struct bn_input {
    const float *f;
    const bf16 *h;
} bn_input;

/* The lanes of norm_grad_lanes over one plane of hw values of x at offset at. */
NORM_INLINE void bn_plane_lanes(float *l1, float *l2, const float *dy, bn_input x, size_t at, size_t hw,
                                norm_plane k) {
    if (x.f) {
        norm_grad_lanes(l1, l2, dy, x.f + at, hw, k);
        return;
    }
    float xb[BN_PACKED_BLOCK];
    for (size_t i = 0; i < hw; i += BN_PACKED_BLOCK) {
        const size_t n = hw - i < BN_PACKED_BLOCK ? hw - i : BN_PACKED_BLOCK;
        bf16_unpack(xb, x.h + at + i, n);
        norm_grad_lanes(l1, l2, dy + i, xb, n, k);
    }
}

/* sum dy (*sdy) and sum dy x_hat (*sdyx) over m planes, x_hat = (x - mu) is; dy masked by a folded ReLU. */
VM_KERNEL static void bn_grad_sums(const float *dy, bn_input x, // (m, stride) each
                                   size_t m, size_t stride, size_t hw, norm_plane k, double *sdy, double *sdyx) {
    float l1[BN_LANES] = {0}, l2[BN_LANES] = {0};
    double s1 = 0.0, s2 = 0.0;
    size_t pending = 0;
    for (size_t j = 0; j < m; j++) {
        bn_plane_lanes(l1, l2, dy + j * stride, x, j * stride, hw, k);
        if ((pending += hw) >= BN_FLUSH) {
            bn_flush(l1, l2, &s1, &s2);
            pending = 0;
        }
    }
    bn_flush(l1, l2, &s1, &s2);
    *sdy = s1;
    *sdyx = s2;
}

/* dx += k0 (dy - mdy - x_hat mdyx) for one element (dy masked by a folded ReLU); dx = 0 + that where dx is
 * fresh (op_call.din_fresh: the bits of adding into zeros). */
NORM_INLINE float bn_grad_value(float dx, float dy, float x, norm_plane c, float k0, float mdy, float mdyx,
                                bool fresh) {
    return (fresh ? 0.0f : dx) + k0 * (norm_dy(dy, x, c) - mdy - (x - c.mean) * c.invstd * mdyx);
}

/* bn_grad_value over a plane of hw values, x float32 ... */
VM_KERNEL static void bn_grad_span(float *dx, const float *dy, const float *x, size_t hw, norm_plane c, float k0,
                                   float mdy, float mdyx, bool fresh) {
    #pragma omp simd
    for (size_t k = 0; k < hw; k++) dx[k] = bn_grad_value(dx[k], dy[k], x[k], c, k0, mdy, mdyx, fresh);
}

/* ... or x as the packed copy holds it, widened in the loop (exact: the bits of the float32 instance) with no
 * stage between. */
VM_KERNEL static void bn_grad_span_packed(float *dx, const float *dy, const bf16 *x, size_t hw, norm_plane c,
                                          float k0, float mdy, float mdyx, bool fresh) {
    #pragma omp simd
    for (size_t k = 0; k < hw; k++)
        dx[k] = bn_grad_value(dx[k], dy[k], bf16_to_float(x[k]), c, k0, mdy, mdyx, fresh);
}

static void bn_grad_apply(float *dx,                       // (m, stride)
                          const float *dy, bn_input x,     // (m, stride) each
                          size_t m, size_t stride, size_t hw, norm_plane c, float k0, float mdy, float mdyx,
                          bool fresh) {
    for (size_t j = 0; j < m; j++) {
        const size_t at = j * stride;
        if (x.f) bn_grad_span(dx + at, dy + at, x.f + at, hw, c, k0, mdy, mdyx, fresh);
        else bn_grad_span_packed(dx + at, dy + at, x.h + at, hw, c, k0, mdy, mdyx, fresh);
    }
}

/* ---- forward and backward --------------------------------------------------------------------------------- */

/* Channel ch: in training (not a recompute) first the micro-batch's mean and inverse deviation into mean and
 * invstd, and the running statistics updated as PyTorch does (unbiased variance); then y from mean and invstd,
 * one code path for every mode: in a bf16 forward rounded (and packed into the plan's copy) plane by plane in
 * the pass that computes it. */
static void bn_forward_channel(const op_call *c, size_t C, size_t hw, size_t ch, bool stats, float *mean,
                               float *invstd) {
    const float *x = c->in[0] + ch * hw; // (m, C, hw) at channel ch
    float *y = c->out + ch * hw;
    if (stats) {
        const double mom = c->node->p.norm.momentum, count = (double)(c->m * hw);
        const double unbias = count > 1.0 ? count / (count - 1.0) : 1.0;
        float *rmean = c->state[BN_RUNNING_MEAN], *rvar = c->state[BN_RUNNING_VAR];
        double var, mu = bn_moments(x, c->m, C * hw, hw, &var);
        mean[ch] = (float)mu;
        invstd[ch] = (float)(1.0 / sqrt(var + (double)c->node->p.norm.eps));
        rmean[ch] = (float)((1.0 - mom) * rmean[ch] + mom * mu);
        rvar[ch] = (float)((1.0 - mom) * rvar[ch] + mom * var * unbias);
    }
    const norm_plane k = norm_plane_of(mean[ch], invstd[ch], c->w[BN_GAMMA][ch], c->w[BN_BETA][ch],
                                       c->node->op == &op_batchnorm2d_relu);
    if (!c->packed.round) {
        bn_apply_channel(y, x, c->m, C * hw, hw, k);
        return;
    }
    for (size_t n = 0; n < c->m; n++) {
        const size_t at = n * C * hw;
        bn_apply_round_span(y + at, c->packed.copy ? c->packed.copy + ch * hw + at : NULL, x + at, hw, k);
    }
}

static void bn_forward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t C = s->dims[0], hw = s->dims[1] * s->dims[2];
    if (c->m == 0) return;
    float *mean, *invstd; // (C) each
    const bool stats = c->training && !c->recompute;
    if (c->training) {
        mean = c->saved, invstd = mean + C; /* this micro-batch's statistics, kept for backward */
    } else {
        /* Evaluation: the running statistics, converted into the same (mean, invstd) form; C is small. */
        const float eps = c->node->p.norm.eps;
        const float *rmean = c->w[BN_RUNNING_MEAN], *rvar = c->w[BN_RUNNING_VAR];
        mean = c->work, invstd = mean + C;
        for (size_t ch = 0; ch < C; ch++) {
            mean[ch] = rmean[ch];
            invstd[ch] = (float)(1.0 / sqrt((double)rvar[ch] + (double)eps));
        }
    }
    #pragma omp parallel for schedule(static) if (c->m * C * hw >= BN_PAR_MIN && par_pays_floats(4 * c->m * C * hw))
    for (size_t ch = 0; ch < C; ch++) bn_forward_channel(c, C, hw, ch, stats, mean, invstd);
}

/* With x_hat = (x - mean) * invstd and N = m * hw per channel:
 * dbeta = sum dy, dgamma = sum dy x_hat, dx = gamma invstd (dy - dbeta / N - x_hat dgamma / N).
 * Per channel two passes: the two sums together, then dx. */
static void bn_backward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t m = c->m, C = s->dims[0], hw = s->dims[1] * s->dims[2];
    const float *dy = c->dout; // (m, C, hw), and x from in[0] or where it is kept packed c->in_packed
    const float *mean = c->saved, *invstd = mean + C;
    const float *gamma = c->w[BN_GAMMA], *beta = c->w[BN_BETA];
    float *dx = c->din[0], *dgamma = c->dw[BN_GAMMA], *dbeta = c->dw[BN_BETA];
    const bool relu = c->node->op == &op_batchnorm2d_relu;
    if (m == 0) return;
    #pragma omp parallel for schedule(static) if (m * C * hw >= BN_PAR_MIN && par_pays_floats(4 * m * C * hw))
    for (size_t ch = 0; ch < C; ch++) {
        const float is = invstd[ch];
        /* a: the forward's own float product (norm_plane_of), so that the mask's y rounds as the forward's did */
        const norm_plane k = norm_plane_of(mean[ch], is, gamma[ch], beta[ch], relu);
        double sdy, sdyx;
        const bn_input x = c->in[0] ? (bn_input){.f = c->in[0] + ch * hw} : (bn_input){.h = c->in_packed + ch * hw};
        bn_grad_sums(dy + ch * hw, x, m, C * hw, hw, k, &sdy, &sdyx);
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
        if (!dx) continue;
        const double n = (double)(m * hw);
        bn_grad_apply(dx + ch * hw, dy + ch * hw, x, m, C * hw, hw, k, gamma[ch] * is, (float)(sdy / n),
                      (float)(sdyx / n), c->din_fresh & 1u);
    }
}

/* Sample n of the forward's output (op_desc.regen), channels split over T: the forward's plane constants and
 * apply from the kept input and the saved statistics, so the same bits. */
static void bn_regen(const op_call *c, size_t n, float *dst, size_t t, size_t T) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t C = s->dims[0], hw = s->dims[1] * s->dims[2];
    const float *mean = c->saved, *invstd = mean + C;
    for (size_t ch = C * t / T; ch < C * (t + 1) / T; ch++) {
        const norm_plane k = norm_plane_of(mean[ch], invstd[ch], c->w[BN_GAMMA][ch], c->w[BN_BETA][ch],
                                           c->node->op == &op_batchnorm2d_relu);
        if (!c->in[0] && c->bf16) { /* packed (only bf16 plans pack) */
            bn_regen_packed(dst + ch * hw, c->in_packed + (n * C + ch) * hw, hw, k);
            continue;
        }
        const float *x = c->in[0] ? c->in[0] + (n * C + ch) * hw : dst + ch * hw; /* packed: unpacked in place */
        if (!c->in[0]) bf16_unpack(dst + ch * hw, c->in_packed + (n * C + ch) * hw, hw);
        bn_apply_channel(dst + ch * hw, x, 1, hw, hw, k);
        if (c->bf16) bf16_round_floats(dst + ch * hw, dst + ch * hw, hw);
    }
}

static double bn_flops(const op_node *n) {
    /* statistics (2) + scale and shift (2), and the folded ReLU's compare */
    return (n->op == &op_batchnorm2d_relu ? 5.0 : 4.0) * (double)n->in_numel[0];
}

static size_t bn_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads the kept input (OP_KEEPS_INPUT) and the per-batch statistics */
}

static size_t bn_saved_batch_bytes(const op_node *n) {
    return 2 * n->in_shape[0].dims[0] * sizeof(float); /* mean and invstd per channel */
}

static size_t bn_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)m, (void)threads;
    return 2 * n->in_shape[0].dims[0] * sizeof(float); /* evaluation's (mean, invstd) */
}

/* The two tables differ only in identity: forward and backward fold the ReLU in where the node's op is
 * op_batchnorm2d_relu. */
#define BN_TABLE                                                                                              \
    .kind = "batchnorm2d", .flags = OP_KEEPS_INPUT | OP_WRITES_FRESH | OP_ROUNDS_OUTPUT | OP_READS_PACKED,      \
    .infer = bn_infer,                                                                                        \
    .forward = bn_forward, .backward = bn_backward, .flops = bn_flops, .saved_bytes = bn_saved_bytes,         \
    .saved_batch_bytes = bn_saved_batch_bytes, .workspace_bytes = bn_workspace_bytes, .regen = bn_regen

const op_desc op_batchnorm2d = {BN_TABLE, .fold.relu_after = &op_batchnorm2d_relu};
const op_desc op_batchnorm2d_relu = {BN_TABLE, .fold = {.unfolded = &op_batchnorm2d, .hides_values = true}};

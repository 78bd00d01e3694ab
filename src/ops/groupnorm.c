/* groupnorm: per sample, the C channels of x (C, H, W) fall into G groups of C/G channels; each group is
 * normalised with its own mean and biased variance over (C/G, H, W), then scaled and shifted per channel
 * (weight ones, bias zeros), as torch.nn.GroupNorm. Statistics never mix samples, so accumulation is exact and a
 * recompute writes the same bits. Forward saves each group's mean and inverse deviation (2G floats per sample);
 * a recompute reuses them (OP_REPLAYS_SAVED) and backward recomputes x_hat from the kept input (in a bf16 plan
 * from its packed copy, a block at a time). Where the plan stores its gradients in bfloat16 (op_call.grads),
 * backward reads and writes a group at a time through float32 stages.
 *
 * op_groupnorm_relu is the same layer with the ReLU that is its output's only reader folded in (graph/fuse.c),
 * as op_batchnorm2d_relu: forward writes relu(y), backward masks the ReLU's output gradient with y > 0, y
 * recomputed by the forward's own expression, so the bits are those of the two ops. */
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "kernels/bf16.h"
#include "kernels/norm_relu.h"
#include "kernels/norm_stats.h"
#include "ops/op.h"
#include "ops/packed_grads.h"
#include "ops/round_output.h"
#include "kernels/vmath.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define GN_PAR_MIN ((size_t)1 << 15)

static snug_status gn_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
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
    const size_t C = in[0].dims[0];
    if (p->groups == 0) {
        snprintf(msg, msg_len, "0 groups: a group norm needs at least 1 group (a divisor of the %zu channels)", C);
        return SNUG_E_ARG;
    }
    if (C % p->groups != 0) {
        snprintf(msg, msg_len, "%zu groups do not divide the %zu channels of input %s: choose a divisor of %zu",
                 p->groups, C, snug_shape_format(&in[0], s, sizeof s), C);
        return SNUG_E_SHAPE;
    }
    if (!(p->eps > 0.0f) || !isfinite(p->eps)) {
        snprintf(msg, msg_len, "eps must be positive and finite, got %g (PyTorch's default is 1e-5)", (double)p->eps);
        return SNUG_E_ARG;
    }
    const snug_shape cs = {.rank = 1, .dims = {C}};
    *out = in[0];
    params[0] = (param_decl){.suffix = "weight", .shape = cs, .fan_in = C, .init = INIT_ONES};
    params[1] = (param_decl){.suffix = "bias", .shape = cs, .fan_in = C, .init = INIT_ZEROS};
    *n_params = 2;
    return SNUG_OK;
}

/* Mean and biased variance of `planes` contiguous planes of hw values (kernels/norm_stats.h). */
static double gn_stats(const float *x, size_t planes, size_t hw, double *var) {
    return norm_plane_moments(x, planes, hw, hw, var);
}

/* The plane kernels run outside the OpenMP region, as VM_KERNEL functions around norm_relu.h's loops (in an
 * outlined region GCC 12 keeps a compare and a branch per element of the masked loops: GroupNorm's backward
 * takes 8x longer). */

/* y = the normalised value over hw values, relu(y) where folded. */
VM_KERNEL static void gn_apply_plane(float *y, const float *x, size_t hw, norm_plane k) {
    norm_apply_span(y, x, hw, k);
}

/* sum dy (*s1) and sum dy x_hat (*s2) over a plane: 16 fixed lanes, then the lanes in order. */
VM_KERNEL static void gn_plane_sums(const float *dy, const float *x, size_t hw, norm_plane k, float *s1, float *s2) {
    float l1[NORM_LANES] = {0}, l2[NORM_LANES] = {0};
    norm_grad_lanes(l1, l2, dy, x, hw, k);
    float p1 = 0.0f, p2 = 0.0f;
    for (int l = 0; l < NORM_LANES; l++) p1 += l1[l], p2 += l2[l];
    *s1 = p1, *s2 = p2;
}

/* In a bf16 plan that keeps the input only packed (op_call.in_packed, OP_READS_PACKED), backward and a
 * regeneration read it from the packed copy: a block at a time on the stack, a multiple of the lanes, so each
 * lane sums the same elements in the same order: the bits of reading the unpacked instance. */
#define GN_PACKED_BLOCK ((size_t)256)

VM_KERNEL static void gn_plane_sums_packed(const float *dy, const bf16 *xp, size_t hw, norm_plane k, float *s1,
                                           float *s2) {
    float l1[NORM_LANES] = {0}, l2[NORM_LANES] = {0}, x[GN_PACKED_BLOCK];
    for (size_t i = 0; i < hw; i += GN_PACKED_BLOCK) {
        const size_t n = hw - i < GN_PACKED_BLOCK ? hw - i : GN_PACKED_BLOCK;
        bf16_unpack(x, xp + i, n);
        norm_grad_lanes(l1, l2, dy + i, x, n, k);
    }
    float p1 = 0.0f, p2 = 0.0f;
    for (int l = 0; l < NORM_LANES; l++) p1 += l1[l], p2 += l2[l];
    *s1 = p1, *s2 = p2;
}

/* dx (+)= invstd (gamma dy - mg - x_hat mgx) over a plane (dy masked where folded); a fresh dx (op_call.din_fresh)
 * starts from 0: the bits of adding into zeros. */
VM_KERNEL static void gn_plane_dx(float *dx, const float *dy, const float *x, size_t hw, norm_plane k, float gamma,
                                  float mg, float mgx, bool fresh) {
    #pragma omp simd
    for (size_t i = 0; i < hw; i++)
        dx[i] = (fresh ? 0.0f : dx[i]) +
                k.invstd * (gamma * norm_dy(dy[i], x[i], k) - mg - (x[i] - k.mean) * k.invstd * mgx);
}

/* gn_plane_dx over a packed plane, a block at a time. */
static void gn_plane_dx_packed(float *dx, const float *dy, const bf16 *xp, size_t hw, norm_plane k, float gamma,
                               float mg, float mgx, bool fresh) {
    float x[GN_PACKED_BLOCK];
    for (size_t i = 0; i < hw; i += GN_PACKED_BLOCK) {
        const size_t n = hw - i < GN_PACKED_BLOCK ? hw - i : GN_PACKED_BLOCK;
        bf16_unpack(x, xp + i, n);
        gn_plane_dx(dx + i, dy + i, x, n, k, gamma, mg, mgx, fresh);
    }
}

/* A bf16 forward that reads its input packed (op_call.packed.in) or writes only its packed output (packed.out)
 * takes a group at a time through a float32 stage of its thread's (gn_bf16_workspace_bytes): the same kernels
 * on the same values, so the bits of the float32 instances, and no float32 copy of the whole tensor. */
static float *gn_forward_stage(const op_call *c, size_t K) {
    if (!c->packed.in[0] && !c->packed.out) return NULL;
    return (float *)c->work + grad_stage_bytes_of(K) / sizeof(float) * (size_t)omp_get_thread_num();
}

/* Block b's input: in place, or unpacked into the stage. */
static const float *gn_forward_x(const op_call *c, size_t b, size_t K, float *stage) {
    if (!c->packed.in[0]) return c->in[0] + b * K;
    bf16_unpack(stage, c->packed.in[0] + b * K, K);
    return stage;
}

/* Plane j of block b made: rounded in place (and copied) or, where only the packed output exists, rounded
 * into it from the stage. */
static void gn_forward_plane_done(const op_call *c, size_t b, size_t K, size_t j, size_t hw, float *yb) {
    if (c->packed.out) bf16_round_pack(yb + j * hw, c->packed.out + b * K + j * hw, hw);
    else op_round_output(c, b * K + j * hw, hw); /* the plane still in cache */
}

static void gn_forward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t G = c->node->p.norm.groups, C = s->dims[0], hw = s->dims[1] * s->dims[2], cg = C / G;
    const double eps = c->node->p.norm.eps;
    const float *gamma = c->w[0], *beta = c->w[1];
    float *stat = c->saved;        // (m, G, 2): mean, invstd
    const size_t blocks = c->m * G, K = cg * hw;
    const bool relu = c->node->op == &op_groupnorm_relu;
    #pragma omp parallel for schedule(static) num_threads(c->threads > 0 ? c->threads : 1) \
        if (blocks * cg * hw >= GN_PAR_MIN && par_pays_floats(4 * blocks * cg * hw))
    for (size_t b = 0; b < blocks; b++) {
        const size_t c0 = (b % G) * cg;
        float *stage = gn_forward_stage(c, K);
        const float *xb = gn_forward_x(c, b, K, stage); // (cg, hw)
        float *yb = c->packed.out ? stage : c->out + b * K; /* the stage: y over x, plane by plane */
        if (!c->recompute) { /* a replay reads what this forward saved: the same bits, one pass less */
            double var, mu = gn_stats(xb, cg, hw, &var);
            stat[2 * b] = (float)mu;
            stat[2 * b + 1] = (float)(1.0 / sqrt(var + eps));
        }
        const float mean = stat[2 * b], invstd = stat[2 * b + 1];
        for (size_t j = 0; j < cg; j++) {
            /* x - mean first: with a large mean, x a + (beta - mean a) would cancel */
            const norm_plane k = norm_plane_of(mean, invstd, gamma[c0 + j], beta[c0 + j], relu);
            gn_apply_plane(yb + j * hw, xb + j * hw, hw, k);
            gn_forward_plane_done(c, b, K, j, hw, yb);
        }
    }
}

/* Block b's gradients as float32 (a group of a sample: K elements at b K): dout's and din's in place, or, where
 * they are stored in bfloat16 (op_call.grads), in this thread's two stages of `stage` floats, the packed dout
 * unpacked and a packed din unpacked where backward adds into it. */
static const float *gn_block_dy(const op_call *c, size_t b, size_t K, float *mine) {
    if (!c->grads.dout) return c->dout + b * K;
    bf16_unpack(mine, c->grads.dout + b * K, K);
    return mine;
}

static float *gn_block_dx(const op_call *c, size_t b, size_t K, float *mine, bool fresh) {
    if (!c->grads.din[0]) return c->din[0] ? c->din[0] + b * K : NULL;
    if (!fresh) bf16_unpack(mine, c->grads.din[0] + b * K, K);
    return mine;
}

/* Per (sample, group) with K = cg * hw, x_hat = (x - mean) invstd and g = gamma dy:
 * dx = invstd (g - mean(g) - x_hat mean(g x_hat)). The per-(sample, channel) sums of dy and dy x_hat go to the
 * workspace and are reduced over samples in order afterwards: dgamma and dbeta without races, and the same bits
 * whatever the thread count. */
static void gn_backward(const op_call *c) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t m = c->m, G = c->node->p.norm.groups, C = s->dims[0], hw = s->dims[1] * s->dims[2], cg = C / G;
    const float *x = c->in[0];                // (m, C, hw); NULL where it is packed (c->in_packed)
    const float *stat = c->saved;             // (m, G, 2)
    const float *gamma = c->w[0], *beta = c->w[1];
    const bool fresh = c->din_fresh & 1u, relu = c->node->op == &op_groupnorm_relu;
    double *sums = c->work;                   // (m, C, 2): sum dy, sum dy x_hat
    const size_t blocks = m * G, K = cg * hw, stage = grad_stage_bytes_of(K) / sizeof(float);
    #pragma omp parallel for schedule(static) num_threads(c->threads > 0 ? c->threads : 1) \
        if (blocks * cg * hw >= GN_PAR_MIN && par_pays_floats(4 * blocks * cg * hw))
    for (size_t b = 0; b < blocks; b++) {
        float *mine = c->grads.stage ? (float *)c->grads.stage + 2 * stage * (size_t)omp_get_thread_num() : NULL;
        const float *dy = gn_block_dy(c, b, K, mine);
        float *dx = gn_block_dx(c, b, K, mine ? mine + stage : NULL, fresh);
        const size_t c0 = (b % G) * cg, base = b * K;
        const float mean = stat[2 * b], invstd = stat[2 * b + 1];
        double sg = 0.0, sgx = 0.0;
        for (size_t j = 0; j < cg; j++) {
            const norm_plane k = norm_plane_of(mean, invstd, gamma[c0 + j], beta[c0 + j], relu);
            float p1, p2; /* float sums over a plane, as the statistics */
            if (c->in_packed) gn_plane_sums_packed(dy + j * hw, c->in_packed + base + j * hw, hw, k, &p1, &p2);
            else gn_plane_sums(dy + j * hw, x + base + j * hw, hw, k, &p1, &p2);
            const double sdy = p1, sdyx = p2;
            sums[2 * (b * cg + j)] = sdy;
            sums[2 * (b * cg + j) + 1] = sdyx;
            sg += gamma[c0 + j] * sdy;
            sgx += gamma[c0 + j] * sdyx;
        }
        if (!dx) continue;
        const float mg = (float)(sg / (double)K), mgx = (float)(sgx / (double)K);
        for (size_t j = 0; j < cg; j++) {
            const norm_plane k = norm_plane_of(mean, invstd, gamma[c0 + j], beta[c0 + j], relu);
            const size_t at = base + j * hw;
            if (c->in_packed)
                gn_plane_dx_packed(dx + j * hw, dy + j * hw, c->in_packed + at, hw, k, gamma[c0 + j], mg, mgx, fresh);
            else
                gn_plane_dx(dx + j * hw, dy + j * hw, x + at, hw, k, gamma[c0 + j], mg, mgx, fresh);
        }
        if (c->grads.din[0]) bf16_pack(c->grads.din[0] + base, dx, K); /* rounded once, whole */
    }
    float *dgamma = c->dw[0], *dbeta = c->dw[1];
    for (size_t ch = 0; ch < C; ch++) {
        double sdy = 0.0, sdyx = 0.0;
        for (size_t i = 0; i < m; i++) {
            sdy += sums[2 * (i * C + ch)];
            sdyx += sums[2 * (i * C + ch) + 1];
        }
        if (dgamma) dgamma[ch] += (float)sdyx;
        if (dbeta) dbeta[ch] += (float)sdy;
    }
}

/* Sample n of the forward's output (op_desc.regen), channels split over T: the forward's plane constants and
 * apply from the kept input and the saved statistics, so the same bits. */
static void gn_regen(const op_call *c, size_t n, float *dst, size_t t, size_t T) {
    const snug_shape *s = op_in_shape(c, 0);
    const size_t G = c->node->p.norm.groups, C = s->dims[0], hw = s->dims[1] * s->dims[2], cg = C / G;
    const float *stat = (const float *)c->saved + 2 * n * G; // (G, 2) of sample n
    const float *gamma = c->w[0], *beta = c->w[1];
    for (size_t ch = C * t / T; ch < C * (t + 1) / T; ch++) {
        const float mean = stat[2 * (ch / cg)], invstd = stat[2 * (ch / cg) + 1];
        const norm_plane k = norm_plane_of(mean, invstd, gamma[ch], beta[ch], c->node->op == &op_groupnorm_relu);
        const float *x = c->in[0] ? c->in[0] + (n * C + ch) * hw : dst + ch * hw; /* packed: unpacked in place */
        if (!c->in[0]) bf16_unpack(dst + ch * hw, c->in_packed + (n * C + ch) * hw, hw);
        gn_apply_plane(dst + ch * hw, x, hw, k);
        if (c->bf16) bf16_round_floats(dst + ch * hw, dst + ch * hw, hw);
    }
}

static double gn_flops(const op_node *n) {
    /* statistics (2) + scale and shift (2), and the folded ReLU's compare */
    return (n->op == &op_groupnorm_relu ? 5.0 : 4.0) * (double)n->in_numel[0];
}

static size_t gn_saved_bytes(const op_node *n) {
        size_t bytes;
    return size_mul(n->p.norm.groups, 2 * sizeof(float), &bytes) ? bytes : SIZE_MAX;
}

/* Two stages of a group per thread (gn_block_dy, gn_block_dx) where its gradients are stored packed. */
static size_t gn_grad_stage_bytes(const op_node *n, size_t m, int threads, bool input_staged) {
    (void)m, (void)input_staged;
    const size_t K = n->in_numel[0] / n->p.norm.groups, one = grad_stage_bytes_of(K);
    size_t bytes;
    return one != SIZE_MAX && size_mul(one, 2 * (size_t)(threads > 0 ? threads : 1), &bytes) ? bytes : SIZE_MAX;
}

static size_t gn_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)threads;
    size_t bytes;
    const size_t C = n->in_shape[0].dims[0];
    return size_mul(m, C, &bytes) && size_mul(bytes, 2 * sizeof(double), &bytes) ? bytes : SIZE_MAX;
}

/* In a bf16 plan forward may also need a group's stage per thread (gn_forward_stage). */
static size_t gn_bf16_workspace_bytes(const op_node *n, size_t m, int threads) {
    const size_t sums = gn_workspace_bytes(n, m, threads), one = grad_stage_bytes_of(n->in_numel[0] / n->p.norm.groups);
    size_t stages;
    if (sums == SIZE_MAX || one == SIZE_MAX || !size_mul(one, (size_t)(threads > 0 ? threads : 1), &stages))
        return SIZE_MAX;
    return sums > stages ? sums : stages;
}

/* The two tables differ only in identity: forward and backward fold the ReLU in where the node's op is
 * op_groupnorm_relu. */
#define GN_TABLE                                                                                              \
    .kind = "groupnorm", .flags = OP_KEEPS_INPUT | OP_REPLAYS_SAVED | OP_WRITES_FRESH | OP_READS_PACKED |     \
                                  OP_GRAD_READS_PACKED | OP_GRAD_WRITES_PACKED | OP_ROUNDS_OUTPUT |           \
                                  OP_FORWARD_READS_PACKED | OP_WRITES_PACKED,                                 \
    .infer = gn_infer,                                                                                        \
    .forward = gn_forward, .backward = gn_backward, .flops = gn_flops, .saved_bytes = gn_saved_bytes,         \
    .workspace_bytes = gn_workspace_bytes, .bf16_workspace_bytes = gn_bf16_workspace_bytes,                   \
    .grad_stage_bytes = gn_grad_stage_bytes, .regen = gn_regen

const op_desc op_groupnorm = {GN_TABLE, .fold.relu_after = &op_groupnorm_relu};
const op_desc op_groupnorm_relu = {GN_TABLE, .fold = {.unfolded = &op_groupnorm, .hides_values = true}};

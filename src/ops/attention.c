/* attention: multi-head scaled dot-product self-attention over qkv (T, 3C) = [Q | K | V], output (T, C).
 * Head h of width D = C/H uses columns [hD, (h+1)D) of Q, K and V, and writes the same columns of the output:
 *   S = Q_h K_h^T / sqrt(D), P = softmax over each row (causal: row t over columns 0..t, the rest 0),
 *   O_h = P V_h.
 * Backward needs P: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) / sqrt(D), dQ = dS K, dK = dS^T Q.
 * Forward saves nothing (P is H T^2 floats per sample: 8 MiB per layer of the gpt workload, the largest
 * activation a transformer would keep): backward recomputes P a block of rows at a time, in cache, from the kept
 * Q and K, as FlashAttention does. It repeats the forward's own calls on the same operands (the same product
 * into a block of the same shape, then the same softmax kernel), so backward sees the forward's P bit for bit;
 * the price is one more product beside backward's four and the exponentials, and it saves the forward's write of
 * P and backward's two reads of it.
 * Each (sample, head) is one task of a few small products (small_gemm, on the task's thread); the tasks write
 * disjoint columns, so they run in parallel without races. Every element of a product is one chain of
 * multiply-adds in a fixed order, whatever the operands' addresses or the thread count, so a sample's attention
 * has the same bits in any micro-batch and in any plan: in bf16, where every output is rounded to bfloat16, a
 * changed last bit would become a changed value. The blocks of scores and probabilities, and the
 * head's keys and values transposed (small_gemm reads B along its rows), are per-thread scratch.
 *
 * In plans whose products are bgemm's (bf16 where vdpbf16ps does twice an FMA's work: plan/products.c), the
 * same products go through bgemm on the task's thread instead: its operands rounded to bfloat16 as it packs
 * them (Q, K, V and the output gradient already are in such a plan; P and dS are rounded there), each element
 * one chain of float32 sums over the pairs of k, whatever the operands' addresses or the thread count, so the
 * promises above hold unchanged. The softmax, its backward and every sum stay float32.
 *
 * The rows go in blocks of ATTN_BLOCK queries. A causal block of rows [r0, r1) sees keys [0, r1) only, so every
 * product runs over those keys: the masked upper triangle is neither multiplied nor exponentiated, beyond the
 * corner of the diagonal block (about 56% of the full work at T = 256). The FLOP counts count exactly this. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "kernels/bgemm.h"
#include "ops/op.h"
#include "ops/round_output.h"
#include "kernels/small_gemm.h"
#include "kernels/transpose.h"
#include "kernels/vmath.h"

/* Below this many multiply-adds a parallel loop costs more than it saves. */
#define ATTN_PAR_MIN ((size_t)1 << 15)
/* Query rows per block: enough rows for the products' register tiles to reuse each row of K and V many
 * times, few enough that a causal block skips most of the masked triangle. */
#define ATTN_BLOCK ((size_t)32)

typedef struct attn_dims {
    size_t T, C, H, D;
    bool causal;
} attn_dims;

static attn_dims attn_dims_of(const op_node *n) {
    const snug_shape *s = &n->in_shape[0];
    const size_t H = n->p.attention.heads, C = s->dims[1] / 3;
    return (attn_dims){.T = s->dims[0], .C = C, .H = H, .D = C / H, .causal = n->p.attention.causal};
}

static snug_status attn_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                              int *n_params, char *msg, size_t msg_len) {
    (void)params;
    const size_t H = n->p.attention.heads;
    char s[96];
    size_t tt;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input (q, k, v concatenated), got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 2 || in[0].dims[1] % 3 != 0) {
        snprintf(msg, msg_len, "expects (T, 3C): queries, keys and values side by side, got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    const size_t T = in[0].dims[0], C = in[0].dims[1] / 3;
    if (H == 0) {
        snprintf(msg, msg_len, "needs heads at least 1, got 0");
        return SNUG_E_ARG;
    }
    if (C % H != 0) {
        snprintf(msg, msg_len, "%zu heads do not divide the model width C = %zu of input %s: choose a divisor of %zu",
                 H, C, snug_shape_format(&in[0], s, sizeof s), C);
        return SNUG_E_SHAPE;
    }
    /* The scores are T x T per head: their bytes must be countable. */
    if (!size_mul(T, T, &tt) || !size_mul(tt, H, &tt) || tt > SIZE_MAX / sizeof(float)) {
        snprintf(msg, msg_len, "input %s is too large for %zu heads of T x T scores",
                 snug_shape_format(&in[0], s, sizeof s), H);
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = 2, .dims = {T, C}};
    *n_params = 0;
    return SNUG_OK;
}

/* The scores of rows [r0, r0 + nr) into probabilities, in place, row t at b + (t - r0) T over the block's nk keys:
 * numerically stable (shifted by the row's max). The masked keys [t + 1, nk) of a causal row are set to -inf
 * first, so that every row's loops run over all nk keys, a whole number of vectors when nk is, instead of a
 * ragged length with a scalar tail (half this kernel's time when it was so); exp(-inf) is an exact 0, in P and
 * in the sum. Forward and backward's recomputation both run this function on the same scores: the same P, bit
 * for bit. */
VM_KERNEL static void attn_softmax_rows(float *b, size_t r0, size_t nr, size_t nk, size_t T, bool causal) {
    for (size_t t = r0; t < r0 + nr; t++) {
        float *row = b + (t - r0) * T;
        for (size_t j = causal ? t + 1 : nk; j < nk; j++) row[j] = -INFINITY;
        float mx = row[0];
        #pragma omp simd reduction(max : mx)
        for (size_t j = 1; j < nk; j++) mx = row[j] > mx ? row[j] : mx;
        float sum = 0.0f;
        #pragma omp simd reduction(+ : sum)
        for (size_t j = 0; j < nk; j++) {
            row[j] = vm_expf(row[j] - mx);
            sum += row[j];
        }
        const float inv = 1.0f / sum;
        #pragma omp simd
        for (size_t j = 0; j < nk; j++) row[j] *= inv;
    }
}

/* The keys that query block [r0, r0 + ATTN_BLOCK) sees: all T, or [0, r1) when causal. */
static size_t attn_keys(const attn_dims *d, size_t r0) {
    const size_t r1 = r0 + ATTN_BLOCK < d->T ? r0 + ATTN_BLOCK : d->T;
    return d->causal ? r1 : d->T;
}

/* Score entries computed per head: the sum over row blocks of rows x keys (T^2 when not causal). */
static double attn_area(const attn_dims *d) {
    double area = 0.0;
    for (size_t r0 = 0; r0 < d->T; r0 += ATTN_BLOCK) {
        const size_t nr = d->T - r0 < ATTN_BLOCK ? d->T - r0 : ATTN_BLOCK;
        area += (double)nr * (double)attn_keys(d, r0);
    }
    return area;
}

static int attn_team(const op_call *c, size_t tasks) {
    size_t nt = c->threads > 0 ? (size_t)c->threads : 1;
    return (int)(nt < tasks ? nt : tasks);
}

/* A matrix row-major with rows ld apart, and the transpose of one: A(i, p) = x[p ld + i]. */
static sgemm_mat attn_rows(const float *x, size_t ld) { return (sgemm_mat){.p = x, .rs = ld, .cs = 1}; }
static sgemm_mat attn_cols(const float *x, size_t ld) { return (sgemm_mat){.p = x, .rs = 1, .cs = ld}; }

/* A thread's scratch in the workspace: two (min(ATTN_BLOCK, T), T) blocks, P and backward's dP (then dS), then
 * what the products read again for every block of rows of a (sample, head), prepared once for it:
 * - small_gemm's: the head's keys and values transposed, (D, T) each (the B operands of Q K^T and dO V^T, which
 *   small_gemm reads along their rows);
 * - bgemm's: the panels of K^T and V^T (D, T) and of V or K (T, D) in bgemm's packed pairs, a stage to pack
 *   them, and bgemm's workspace for the largest product (bwork; NULL where the products are small_gemm's). */
typedef struct attn_scratch {
    float *p, *ds, *kt, *vt;
    uint32_t *kt_panels, *vt_panels, *rows_panels;
    float *stage, *bwork;
} attn_scratch;

/* Whether a plan with this product multiplies through bgemm. */
static bool attn_bgemm(op_product product) { return product == OP_PRODUCT_BGEMM; }

/* The floats of the part after the two blocks: small_gemm's transposed copies, or bgemm's panels (a word a
 * float), stage and workspace for every product of a block (M up to T, N and K up to max(T, D): bgemm's
 * workspace is monotone in each). */
static size_t attn_head_floats(const attn_dims *d, op_product product) {
    if (!attn_bgemm(product)) return 2 * d->D * d->T;
    const size_t wide = d->T > d->D ? d->T : d->D;
    return 2 * bgemm_panels_words(d->D, d->T) + bgemm_panels_words(d->T, d->D) + bgemm_panels_stage_floats() +
           bgemm_workspace_floats(d->T, wide, wide, 1);
}

static size_t attn_thread_floats(const attn_dims *d, op_product product) {
    const size_t bt = d->T < ATTN_BLOCK ? d->T : ATTN_BLOCK;
    return 2 * bt * d->T + attn_head_floats(d, product);
}

static attn_scratch attn_scratch_of(const op_call *c, const attn_dims *d) {
    const size_t bt = d->T < ATTN_BLOCK ? d->T : ATTN_BLOCK;
    float *w = (float *)c->work + (size_t)omp_get_thread_num() * attn_thread_floats(d, c->product);
    attn_scratch s = {.p = w, .ds = w + bt * d->T};
    float *rest = w + 2 * bt * d->T;
    if (!attn_bgemm(c->product)) {
        s.kt = rest, s.vt = rest + d->D * d->T;
        return s;
    }
    const size_t cols = bgemm_panels_words(d->D, d->T), rows = bgemm_panels_words(d->T, d->D);
    s.kt_panels = (uint32_t *)(void *)rest;
    s.vt_panels = s.kt_panels + cols;
    s.rows_panels = s.vt_panels + cols;
    s.stage = (float *)(void *)(s.rows_panels + rows);
    s.bwork = s.stage + bgemm_panels_stage_floats();
    return s;
}

/* A B operand of the products: its floats (small_gemm reads them along rows: cs 1), and in bgemm's products
 * the panels packed from them where the head has them (p NULL otherwise). */
typedef struct attn_operand {
    sgemm_mat b;
    bgemm_panels_of panels;
} attn_operand;

static attn_operand attn_operand_rows(const float *x, size_t ld) { return (attn_operand){.b = attn_rows(x, ld)}; }

/* The transpose (D, T) of a head's (T, D) columns x (rows 3C apart): small_gemm's copy into `copy`, or bgemm's
 * panels into `panels`. */
static attn_operand attn_head_transposed(const attn_scratch *s, const attn_dims *d, const float *x, float *copy,
                                         uint32_t *panels) {
    if (!s->bwork) {
        transpose_floats(copy, d->T, x, 3 * d->C, d->T, d->D);
        return attn_operand_rows(copy, d->T);
    }
    const attn_operand o = {.b = attn_cols(x, 3 * d->C), .panels = {.p = panels, .K = d->D, .N = d->T}};
    bgemm_pack_panels(panels, d->D, d->T, o.b, s->stage);
    return o;
}

/* A head's (T, D) columns x in place; in bgemm's products also packed into the scratch's row panels. */
static attn_operand attn_head_rows(const attn_scratch *s, const attn_dims *d, const float *x) {
    attn_operand o = attn_operand_rows(x, 3 * d->C);
    if (!s->bwork) return o;
    o.panels = (bgemm_panels_of){.p = s->rows_panels, .K = d->T, .N = d->D};
    bgemm_pack_panels(s->rows_panels, d->T, d->D, o.b, s->stage);
    return o;
}

/* C (M, N), rows ldc apart = scale (init + A (M, K) B (K, N)), init C (accumulate) or zero: small_gemm, or
 * where the scratch has bgemm's workspace bgemm on this thread (from B's panels where it has them and they hold
 * these K rows whole: K even, or all of them), then the scale after each element's chain as small_gemm applies
 * it. bgemm's bits are the same from panels or floats. */
static void attn_gemm(const attn_scratch *s, size_t M, size_t N, size_t K, sgemm_mat a, attn_operand b, float *c,
                      size_t ldc, float scale, bool accumulate) {
    if (!s->bwork) {
        small_gemm(M, N, K, a, b.b.p, b.b.rs, c, ldc, scale, accumulate);
        return;
    }
    if (b.panels.p && (K % 2 == 0 || K == b.panels.K))
        bgemm_panels(M, N, K, a, b.panels, c, ldc, accumulate, s->bwork, 1);
    else
        bgemm(M, N, K, a, b.b, c, ldc, NULL, accumulate, s->bwork, 1);
    if (scale != 1.0f)
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++) c[i * ldc + j] *= scale;
}

/* The probabilities of rows [r0, r0 + nr) of one (sample, head) into b (rows T apart): the block's scores
 * against its nk keys (kt: the keys transposed, (D, T)), scaled after each score's chain, then their softmax.
 * Forward and backward both build P through this function. */
static void attn_block_probs(const attn_dims *d, const attn_scratch *s, const float *q, attn_operand kt, size_t r0,
                             size_t nr, size_t nk, float *b) {
    const float scale = (float)(1.0 / sqrt((double)d->D));
    attn_gemm(s, nr, nk, d->D, attn_rows(q + r0 * 3 * d->C, 3 * d->C), kt, b, d->T, scale, false);
    attn_softmax_rows(b, r0, nr, nk, d->T, d->causal);
}

static void attn_forward(const op_call *c) {
    const attn_dims d = attn_dims_of(c->node);
    const size_t T = d.T, C = d.C, H = d.H, D = d.D, tasks = c->m * H;
    const float *qkv = c->in[0]; // (m, T, 3C)
    float *out = c->out;         // (m, T, C)
    if (tasks == 0) return;
    #pragma omp parallel for schedule(static) num_threads(attn_team(c, tasks)) \
        if (tasks * T * T * D >= ATTN_PAR_MIN && par_pays_macs(tasks * T * T * D))
    for (size_t task = 0; task < tasks; task++) {
        const size_t n = task / H, h = task % H;
        const float *q = qkv + n * T * 3 * C + h * D, *k = q + C, *v = q + 2 * C;
        const attn_scratch s = attn_scratch_of(c, &d);
        const attn_operand kt = attn_head_transposed(&s, &d, k, s.kt, s.kt_panels), vr = attn_head_rows(&s, &d, v);
        for (size_t r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
            const size_t nr = T - r0 < ATTN_BLOCK ? T - r0 : ATTN_BLOCK, nk = attn_keys(&d, r0);
            attn_block_probs(&d, &s, q, kt, r0, nr, nk, s.p);
            attn_gemm(&s, nr, D, nk, attn_rows(s.p, T), vr, out + (n * T + r0) * C + h * D, C, 1.0f, false);
            for (size_t t = r0; t < r0 + nr; t++) op_round_output(c, (n * T + t) * C + h * D, D); /* final: in L1 */
        }
    }
}

/* dP of rows [r0, r0 + nr) into dS in place: dS = P (dP - sum_j P dP) * scale, row by row over the nk keys
 * the block computed (P is an exact 0 on the masked ones: whole vectors, as in the softmax); the masked entries
 * are then set to +0. Row t of the block at ds + (t - r0) T, and of P at p + (t - r0) T. */
VM_KERNEL static void attn_softmax_backward(float *ds, const float *p, size_t r0, size_t nr, size_t nk, size_t T,
                                            bool causal, float scale) {
    for (size_t t = r0; t < r0 + nr; t++) {
        float *r = ds + (t - r0) * T;
        const float *pr = p + (t - r0) * T;
        float dot = 0.0f;
        #pragma omp simd reduction(+ : dot)
        for (size_t j = 0; j < nk; j++) dot += pr[j] * r[j];
        #pragma omp simd
        for (size_t j = 0; j < nk; j++) r[j] = pr[j] * (r[j] - dot) * scale;
        for (size_t j = causal ? t + 1 : nk; j < nk; j++) r[j] = 0.0f;
    }
}

/* The operands a head's backward reads for every block of rows: K^T, V^T and K. */
typedef struct attn_head_operands {
    attn_operand kt, vt, k;
} attn_head_operands;

/* One block of rows [r0, r0 + nr) of one (sample, head) against keys [0, nk): P_b as forward built it,
 * dV[keys] += P_b^T dO_b, dP_b = dO_b V[keys]^T, dQ_b += dS_b K[keys], dK[keys] += dS_b^T Q_b. q, dq, dk, dv:
 * the head's columns, rows 3C apart; dO rows C apart. */
static void attn_block_backward(const attn_dims *d, const attn_scratch *s, const attn_head_operands *o,
                                const float *q, const float *dO, float *dq, float *dk, float *dv, size_t r0) {
    const size_t T = d->T, C = d->C, D = d->D, ld = 3 * C, nk = attn_keys(d, r0);
    const size_t nr = T - r0 < ATTN_BLOCK ? T - r0 : ATTN_BLOCK;
    const float scale = (float)(1.0 / sqrt((double)D));
    const float *dOb = dO + r0 * C, *qb = q + r0 * ld;
    attn_block_probs(d, s, q, o->kt, r0, nr, nk, s->p);
    attn_gemm(s, nk, D, nr, attn_cols(s->p, T), attn_operand_rows(dOb, C), dv, ld, 1.0f, true);
    attn_gemm(s, nr, nk, D, attn_rows(dOb, C), o->vt, s->ds, T, 1.0f, false);
    attn_softmax_backward(s->ds, s->p, r0, nr, nk, T, d->causal, scale);
    attn_gemm(s, nr, D, nk, attn_rows(s->ds, T), o->k, dq + r0 * ld, ld, 1.0f, true);
    attn_gemm(s, nk, D, nr, attn_cols(s->ds, T), attn_operand_rows(qb, ld), dk, ld, 1.0f, true);
}

static void attn_backward(const op_call *c) {
    const attn_dims d = attn_dims_of(c->node);
    const size_t T = d.T, C = d.C, H = d.H, D = d.D, tasks = c->m * H;
    const float *qkv = c->in[0]; // (m, T, 3C)
    const float *dout = c->dout; // (m, T, C)
    float *din = c->din[0];      // (m, T, 3C)
    if (!din || tasks == 0) return;
    #pragma omp parallel for schedule(static) num_threads(attn_team(c, tasks)) \
        if (tasks * T * T * D >= ATTN_PAR_MIN && par_pays_macs(tasks * T * T * D))
    for (size_t task = 0; task < tasks; task++) {
        const size_t n = task / H, h = task % H;
        const float *q = qkv + n * T * 3 * C + h * D, *k = q + C, *v = q + 2 * C, *dO = dout + n * T * C + h * D;
        float *dq = din + n * T * 3 * C + h * D, *dk = dq + C, *dv = dq + 2 * C;
        const attn_scratch s = attn_scratch_of(c, &d);
        if (c->din_fresh & 1u) /* the first writer of din: this task's columns zeroed while they come into cache */
            for (size_t t = 0; t < T; t++)
                for (int part = 0; part < 3; part++) memset(dq + t * 3 * C + (size_t)part * C, 0, D * sizeof *dq);
        const attn_head_operands o = {.kt = attn_head_transposed(&s, &d, k, s.kt, s.kt_panels),
                                      .vt = attn_head_transposed(&s, &d, v, s.vt, s.vt_panels),
                                      .k = attn_head_rows(&s, &d, k)};
        for (size_t r0 = 0; r0 < T; r0 += ATTN_BLOCK) attn_block_backward(&d, &s, &o, q, dO, dq, dk, dv, r0);
    }
}

/* Forward: Q K^T and P V over the score entries computed (attn_area), and the softmax. */
static double attn_flops(const op_node *n) {
    const attn_dims d = attn_dims_of(n);
    const double area = attn_area(&d);
    return 4.0 * area * (double)d.C + 5.0 * area * (double)d.H;
}

/* Backward: P recomputed (Q K^T and the softmax, as forward), dV = P^T dO and dP = dO V^T, then dQ = dS K and
 * dK = dS^T Q: five products over the same entries, the softmax and its backward. */
static double attn_backward_flops(const op_node *n) {
    const attn_dims d = attn_dims_of(n);
    const double area = attn_area(&d);
    return 10.0 * area * (double)d.C + 10.0 * area * (double)d.H;
}

/* attn_thread_floats per thread that can run a task, min(threads, m H): backward uses all of a thread's
 * scratch, forward its first block, the transposed keys and bgemm's workspace where it has one. */
static size_t attn_product_workspace_bytes(const op_node *n, size_t m, int threads, op_product product) {
    const attn_dims d = attn_dims_of(n);
    size_t tasks, per, bytes;
    if (!size_mul(m, d.H, &tasks)) return SIZE_MAX;
    const size_t nt = threads > 0 ? (size_t)threads : 1, team = nt < tasks ? nt : tasks;
    const size_t bt = d.T < ATTN_BLOCK ? d.T : ATTN_BLOCK;
    if (!size_mul(2 * bt + 2 * d.D, d.T, &per)) return SIZE_MAX;
    /* bgemm's panels hold about 1.5 D T words, their padding under 32 (D + 1): no larger than the input's
     * T 3C floats by more than a constant, so they are countable once those are */
    if (attn_bgemm(product)) per = 2 * bt * d.T + attn_head_floats(&d, product);
    return size_mul(per, team, &bytes) && size_mul(bytes, sizeof(float), &bytes) ? bytes : SIZE_MAX;
}

/* The workspace of small_gemm's products (what a plan whose products are not bgemm's reserves). */
static size_t attn_workspace_bytes(const op_node *n, size_t m, int threads) {
    return attn_product_workspace_bytes(n, m, threads, OP_PRODUCT_SGEMM);
}

static const op_product_sizes attn_sizes = {.workspace_bytes = attn_product_workspace_bytes};

const op_desc op_attention = {
    .kind = "attention",
    .flags = OP_KEEPS_INPUT | OP_WRITES_FRESH | OP_ROUNDS_OUTPUT,
    .infer = attn_infer,
    .forward = attn_forward,
    .backward = attn_backward,
    .flops = attn_flops,
    .backward_flops = attn_backward_flops,
    .workspace_bytes = attn_workspace_bytes,
    .by_product = &attn_sizes,
};

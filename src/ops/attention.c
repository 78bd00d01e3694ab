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
 * Each (sample, head) is one task of a few GEMMs (the BLAS runs single-threaded inside the parallel loop); the
 * tasks write disjoint columns, so they run in parallel without races, and each task's sums run in one fixed
 * order: the same bits for any thread count. The blocks of scores and probabilities are per-thread scratch.
 *
 * The rows go in blocks of ATTN_BLOCK queries. A causal block of rows [r0, r1) sees keys [0, r1) only, so every
 * product runs over those keys: the masked upper triangle is neither multiplied nor exponentiated, beyond the
 * corner of the diagonal block (about 56% of the full work at T = 256). The FLOP counts count exactly this. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "ops/op.h"
#include "kernels/vmath.h"

/* Below this many multiply-adds a parallel loop costs more than it saves. */
#define ATTN_PAR_MIN ((size_t)1 << 15)
/* Query rows per block: large enough for the BLAS to run near its peak on (block, keys, D) products, small
 * enough that a causal block skips most of the masked triangle. */
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
    /* The BLAS takes int dimensions; the scores are T x T per head. */
    if (T > INT_MAX || in[0].dims[1] > INT_MAX || !size_mul(T, T, &tt) || !size_mul(tt, H, &tt) ||
        tt > SIZE_MAX / sizeof(float)) {
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

/* The probabilities of rows [r0, r0 + nr) of one (sample, head) into b (rows T apart): the block's scores against
 * its nk keys, then their softmax. Forward and backward both build P through this function. */
static void attn_block_probs(const attn_dims *d, const float *q, const float *k, size_t r0, size_t nr, size_t nk,
                             float *b) {
    const int ld = (int)(3 * d->C);
    const float scale = (float)(1.0 / sqrt((double)d->D));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)nk, (int)d->D, scale, q + r0 * 3 * d->C, ld,
                k, ld, 0.0f, b, (int)d->T);
    attn_softmax_rows(b, r0, nr, nk, d->T, d->causal);
}

/* The thread's blocks of the workspace: (min(ATTN_BLOCK, T), T) floats each, `per_thread` of them per thread. */
static float *attn_thread_blocks(const op_call *c, const attn_dims *d, int per_thread) {
    const size_t bt = d->T < ATTN_BLOCK ? d->T : ATTN_BLOCK;
    return (float *)c->work + (size_t)omp_get_thread_num() * (size_t)per_thread * bt * d->T;
}

static void attn_forward(const op_call *c) {
    const attn_dims d = attn_dims_of(c->node);
    const size_t T = d.T, C = d.C, H = d.H, D = d.D, tasks = c->m * H;
    const int iT = (int)T, iD = (int)D, ld = (int)(3 * C), ldo = (int)C;
    const float *qkv = c->in[0]; // (m, T, 3C)
    float *out = c->out;         // (m, T, C)
    if (tasks == 0) return;
    #pragma omp parallel for schedule(static) num_threads(attn_team(c, tasks)) \
        if (tasks * T * T * D >= ATTN_PAR_MIN && par_pays_macs(tasks * T * T * D))
    for (size_t task = 0; task < tasks; task++) {
        const size_t n = task / H, h = task % H;
        const float *q = qkv + n * T * 3 * C + h * D, *k = q + C, *v = q + 2 * C;
        float *pb = attn_thread_blocks(c, &d, 1); // (nr, T): a block's rows, keys [0, nk)
        for (size_t r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
            const size_t nr = T - r0 < ATTN_BLOCK ? T - r0 : ATTN_BLOCK, nk = attn_keys(&d, r0);
            attn_block_probs(&d, q, k, r0, nr, nk, pb);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, iD, (int)nk, 1.0f, pb, iT, v, ld, 0.0f,
                        out + (n * T + r0) * C + h * D, ldo);
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

static void attn_backward(const op_call *c) {
    const attn_dims d = attn_dims_of(c->node);
    const size_t T = d.T, C = d.C, H = d.H, D = d.D, tasks = c->m * H, bt = T < ATTN_BLOCK ? T : ATTN_BLOCK;
    const int iT = (int)T, iD = (int)D, ld = (int)(3 * C), ldo = (int)C;
    const float scale = (float)(1.0 / sqrt((double)D));
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
        float *pb = attn_thread_blocks(c, &d, 2), *ds = pb + bt * T; // (nr, T) each: P, then dP and dS
        if (c->din_fresh & 1u) /* the first writer of din: this task's columns zeroed while they come into cache */
            for (size_t t = 0; t < T; t++)
                for (int part = 0; part < 3; part++) memset(dq + t * 3 * C + (size_t)part * C, 0, D * sizeof *dq);
        for (size_t r0 = 0; r0 < T; r0 += ATTN_BLOCK) {
            /* rows [r0, r0 + nr) against keys [0, nk): P_b as forward built it, dV[keys] += P_b^T dO_b,
             * dP_b = dO_b V[keys]^T, dQ_b += dS_b K[keys], dK[keys] += dS_b^T Q_b */
            const size_t nr = T - r0 < ATTN_BLOCK ? T - r0 : ATTN_BLOCK, nk = attn_keys(&d, r0);
            const int inr = (int)nr, ink = (int)nk;
            const float *dOb = dO + r0 * C, *qb = q + r0 * 3 * C;
            attn_block_probs(&d, q, k, r0, nr, nk, pb);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ink, iD, inr, 1.0f, pb, iT, dOb, ldo, 1.0f, dv, ld);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, inr, ink, iD, 1.0f, dOb, ldo, v, ld, 0.0f, ds, iT);
            attn_softmax_backward(ds, pb, r0, nr, nk, T, d.causal, scale);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, inr, iD, ink, 1.0f, ds, iT, k, ld, 1.0f,
                        dq + r0 * 3 * C, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ink, iD, inr, 1.0f, ds, iT, qb, ld, 1.0f, dk, ld);
        }
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

/* Two (min(ATTN_BLOCK, T), T) blocks per thread that can run a task, min(threads, m H): backward's P and dS
 * (forward uses the first, for P). */
static size_t attn_workspace_bytes(const op_node *n, size_t m, int threads) {
    const attn_dims d = attn_dims_of(n);
    size_t tasks, bytes;
    if (!size_mul(m, d.H, &tasks)) return SIZE_MAX;
    const size_t nt = threads > 0 ? (size_t)threads : 1, team = nt < tasks ? nt : tasks;
    const size_t bt = d.T < ATTN_BLOCK ? d.T : ATTN_BLOCK;
    return size_mul(bt, d.T, &bytes) && size_mul(bytes, team, &bytes) && size_mul(bytes, 2 * sizeof(float), &bytes)
               ? bytes
               : SIZE_MAX;
}

const op_desc op_attention = {
    .kind = "attention",
    .flags = OP_KEEPS_INPUT | OP_WRITES_FRESH,
    .infer = attn_infer,
    .forward = attn_forward,
    .backward = attn_backward,
    .flops = attn_flops,
    .backward_flops = attn_backward_flops,
    .workspace_bytes = attn_workspace_bytes,
};

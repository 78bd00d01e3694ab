/* matmul: the product of two computed tensors over their last two axes, a (..., M, K) times b (..., K, N) ->
 * (..., M, N), the leading axes broadcast as numpy does (a size-1 or missing axis repeats the other's): torch's
 * a @ b of activations, attention written out by hand. Backward reads both kept inputs: da += dc b^T,
 * db += a^T dc, summed over the products a broadcast operand took part in.
 * Every product is small_gemm's, one fixed chain per element on the calling thread, so the bits depend neither
 * on the thread count nor on where a plan puts the buffers, and a recomputed forward writes the same bits. The
 * products run in parallel (each writes only its own block); in backward, where an operand is broadcast, a
 * sample's products run in order on one thread, so the sums over that operand have one order. */
#include <omp.h>
#include <stdio.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "kernels/small_gemm.h"
#include "kernels/transpose.h"
#include "ops/layout.h"
#include "ops/op.h"

/* The output's leading axes, padded in front to SNUG_MAX_DIMS - 2 of them, and each operand's stride (in
 * matrices) along them: 0 where it is broadcast. */
#define MM_LEAD (SNUG_MAX_DIMS - 2)
typedef struct mm_dims {
    size_t M, K, N, batches;
    size_t lead[MM_LEAD], a_stride[MM_LEAD], b_stride[MM_LEAD];
} mm_dims;

/* Leading axis i (of MM_LEAD, right-aligned) of s, 1 where s has none. */
static size_t mm_lead_dim(const snug_shape *s, int i) {
    const int at = s->rank - 2 - (MM_LEAD - i);
    return at >= 0 ? s->dims[at] : 1;
}

static snug_status mm_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                            int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    char a[96], b[96];
    if (!layout_inputs(n_in, 2, msg, msg_len)) return SNUG_E_ARG;
    const int ra = in[0].rank, rb = in[1].rank, r = ra > rb ? ra : rb;
    bool ok = ra >= 2 && rb >= 2 && in[0].dims[ra - 1] == in[1].dims[rb - 2];
    size_t numel = 1;
    for (int i = 0; ok && i < MM_LEAD; i++) {
        const size_t da = mm_lead_dim(&in[0], i), db = mm_lead_dim(&in[1], i);
        ok = da == db || da == 1 || db == 1;
    }
    if (!ok) {
        snprintf(msg, msg_len, "inputs %s and %s do not multiply: (..., M, K) times (..., K, N), the leading axes "
                 "equal or 1", snug_shape_format(&in[0], a, sizeof a), snug_shape_format(&in[1], b, sizeof b));
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = r};
    for (int i = 0; i < r - 2; i++) {
        const size_t da = mm_lead_dim(&in[0], MM_LEAD - (r - 2) + i), db = mm_lead_dim(&in[1], MM_LEAD - (r - 2) + i);
        out->dims[i] = da > db ? da : db;
    }
    out->dims[r - 2] = in[0].dims[ra - 2], out->dims[r - 1] = in[1].dims[rb - 1];
    if (!size_prod(out->dims, r, &numel)) {
        snprintf(msg, msg_len, "the product of %s and %s is too large", snug_shape_format(&in[0], a, sizeof a),
                 snug_shape_format(&in[1], b, sizeof b));
        return SNUG_E_SHAPE;
    }
    *n_params = 0;
    return SNUG_OK;
}

static mm_dims mm_dims_of(const op_node *n) {
    const snug_shape *a = &n->in_shape[0], *b = &n->in_shape[1];
    mm_dims d = {.M = a->dims[a->rank - 2], .K = a->dims[a->rank - 1], .N = b->dims[b->rank - 1], .batches = 1};
    size_t sa = 1, sb = 1;
    for (int i = MM_LEAD - 1; i >= 0; i--) {
        const size_t da = mm_lead_dim(a, i), db = mm_lead_dim(b, i);
        d.lead[i] = da > db ? da : db;
        d.a_stride[i] = da == 1 ? 0 : sa, d.b_stride[i] = db == 1 ? 0 : sb;
        sa *= da, sb *= db, d.batches *= d.lead[i];
    }
    return d;
}

/* The matrices of a and b that product `bi` of a sample multiplies. */
static void mm_operands(const mm_dims *d, size_t bi, size_t *ai, size_t *bj) {
    *ai = 0, *bj = 0;
    for (int i = MM_LEAD - 1; i >= 0; i--) {
        const size_t k = bi % d->lead[i];
        bi /= d->lead[i];
        *ai += k * d->a_stride[i], *bj += k * d->b_stride[i];
    }
}

/* Whether an operand repeats over some leading axis: its gradient then sums over the products it took part in,
 * which one task must do in order. */
static bool mm_broadcast(const mm_dims *d) {
    for (int i = 0; i < MM_LEAD; i++)
        if (d->lead[i] > 1 && (d->a_stride[i] == 0 || d->b_stride[i] == 0)) return true;
    return false;
}

/* Backward's tasks: every (sample, product), or whole samples where an operand is broadcast. */
static size_t mm_backward_tasks(const mm_dims *d, size_t m) { return mm_broadcast(d) ? m : m * d->batches; }

static int mm_team(const op_call *c, size_t tasks) {
    const size_t nt = c->threads > 0 ? (size_t)c->threads : 1;
    return (int)(nt < tasks ? nt : tasks);
}

/* Forward: each (sample, product) a task of its own, writing its own block of the output. */
static void mm_forward(const op_call *c) {
    const mm_dims d = mm_dims_of(c->node);
    const size_t an = op_in_numel(c, 0), bn = op_in_numel(c, 1), cn = op_out_numel(c), tasks = c->m * d.batches;
    if (tasks == 0) return;
    #pragma omp parallel for schedule(static) num_threads(mm_team(c, tasks)) if (par_pays_macs(tasks * d.M * d.N * d.K))
    for (size_t task = 0; task < tasks; task++) {
        const size_t s = task / d.batches, bi = task % d.batches;
        size_t ai, bj;
        mm_operands(&d, bi, &ai, &bj);
        const float *a = c->in[0] + s * an + ai * d.M * d.K, *b = c->in[1] + s * bn + bj * d.K * d.N;
        small_gemm(d.M, d.N, d.K, (sgemm_mat){.p = a, .rs = d.K, .cs = 1}, b, d.N, c->out + s * cn + bi * d.M * d.N,
                   d.N, 1.0f, false);
    }
}

/* Product bi of sample s: da += dc b^T (b^T copied into bt: small_gemm reads its B along rows), db += a^T dc. */
static void mm_backward_product(const op_call *c, const mm_dims *d, size_t s, size_t bi, float *bt) {
    size_t ai, bj;
    mm_operands(d, bi, &ai, &bj);
    const size_t ao = s * op_in_numel(c, 0) + ai * d->M * d->K, bo = s * op_in_numel(c, 1) + bj * d->K * d->N;
    const float *dc = c->dout + s * op_out_numel(c) + bi * d->M * d->N;
    if (c->din[0]) {
        transpose_floats(bt, d->K, c->in[1] + bo, d->N, d->K, d->N);
        small_gemm(d->M, d->K, d->N, (sgemm_mat){.p = dc, .rs = d->N, .cs = 1}, bt, d->K, c->din[0] + ao, d->K,
                   1.0f, true);
    }
    if (c->din[1])
        small_gemm(d->K, d->N, d->M, (sgemm_mat){.p = c->in[0] + ao, .rs = 1, .cs = d->K}, dc, d->N, c->din[1] + bo,
                   d->N, 1.0f, true);
}

/* Each task's products write gradients no other task writes: its own matrices of a and b (a sample's, in order,
 * where an operand is broadcast). */
static void mm_backward(const op_call *c) {
    const mm_dims d = mm_dims_of(c->node);
    const size_t per = mm_broadcast(&d) ? d.batches : 1, tasks = c->m * d.batches / per; /* products per task */
    if (tasks == 0 || (!c->din[0] && !c->din[1])) return;
    #pragma omp parallel for schedule(static) num_threads(mm_team(c, tasks)) \
        if (par_pays_macs(2 * c->m * d.batches * d.M * d.N * d.K))
    for (size_t task = 0; task < tasks; task++) {
        float *bt = (float *)c->work + (size_t)omp_get_thread_num() * d.N * d.K;
        for (size_t p = task * per; p < (task + 1) * per; p++) mm_backward_product(c, &d, p / d.batches, p % d.batches, bt);
    }
}

static double mm_flops(const op_node *n) {
    const mm_dims d = mm_dims_of(n);
    return 2.0 * (double)d.batches * (double)d.M * (double)d.N * (double)d.K;
}

/* Two products of the forward's size, one per input. */
static double mm_backward_flops(const op_node *n) { return 2.0 * mm_flops(n); }

/* b^T of one product per thread that can have a backward task. */
static size_t mm_workspace_bytes(const op_node *n, size_t m, int threads) {
    const mm_dims d = mm_dims_of(n);
    const size_t nt = threads > 0 ? (size_t)threads : 1, tasks = mm_backward_tasks(&d, m), team = nt < tasks ? nt : tasks;
    size_t bytes;
    return size_mul(d.N, d.K, &bytes) && size_mul(bytes, team, &bytes) && size_mul(bytes, sizeof(float), &bytes)
               ? bytes : SIZE_MAX;
}

const op_desc op_matmul = {
    .kind = "matmul",
    .flags = OP_KEEPS_INPUT,
    .infer = mm_infer,
    .forward = mm_forward,
    .backward = mm_backward,
    .flops = mm_flops,
    .backward_flops = mm_backward_flops,
    .workspace_bytes = mm_workspace_bytes,
};

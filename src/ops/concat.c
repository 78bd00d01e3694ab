/* concat: joins two tensors along their first per-sample dimension: (C1, H, W) and (C2, H, W) -> (C1 + C2, H, W)
 * (UNet's skip connections, channels first as in torch.cat(dim=1)); ranks 1 and 2 too, (C1) + (C2) and
 * (T1, D) + (T2, D). Row-major and first-dimension-major, so per sample the output is a's elements followed by
 * b's: forward is two copies and backward two adds, reading only dout. Keeps nothing. In a bf16 plan it copies
 * from its inputs' packed copies, and to its own where its readers read only that (plan/packing.c); backward
 * reads and writes gradients stored in bfloat16 a block at a time (plan/packed_grads.c). The two
 * inputs may be one tensor (concat(x, x)): then din[0] and din[1] are one buffer and both adds land in it. */
#include <stdio.h>
#include <string.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "kernels/bf16.h"
#include "ops/op.h"

/* Below this many elements per call a parallel loop costs more than it saves. */
#define CONCAT_PAR_MIN ((size_t)1 << 15)

static snug_status concat_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                                int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    char a[96], b[96];
    if (n_in != 2) {
        snprintf(msg, msg_len, "takes two inputs, got %d", n_in);
        return SNUG_E_ARG;
    }
    bool fits = in[0].rank == in[1].rank && in[0].rank >= 1;
    for (int i = 1; fits && i < in[0].rank; i++) fits = in[0].dims[i] == in[1].dims[i];
    if (!fits) {
        snprintf(msg, msg_len, "inputs %s and %s do not fit: concat joins along the first dimension and needs "
                 "the same rank and the same other dimensions", snug_shape_format(&in[0], a, sizeof a),
                 snug_shape_format(&in[1], b, sizeof b));
        return SNUG_E_SHAPE;
    }
    *out = in[0];
    if (!size_add(in[0].dims[0], in[1].dims[0], &out->dims[0])) {
        snprintf(msg, msg_len, "inputs %s and %s: the joined dimension overflows",
                 snug_shape_format(&in[0], a, sizeof a), snug_shape_format(&in[1], b, sizeof b));
        return SNUG_E_SHAPE;
    }
    *n_params = 0;
    return SNUG_OK;
}

/* Rows are split into blocks so that one large sample (m = 1 on a big image) still spreads over the threads. */
#define CONCAT_BLOCK ((size_t)4096)

/* One span of a part: n elements of x written at y, in the formats of the two sides. */
typedef void (*part_span)(void *y, const void *x, size_t n);
static void span_floats(void *y, const void *x, size_t n) { memcpy(y, x, n * sizeof(float)); }
static void span_bf16(void *y, const void *x, size_t n) { memcpy(y, x, n * sizeof(bf16)); }
static void span_unpack(void *y, const void *x, size_t n) { bf16_unpack(y, x, n); }
static void span_pack(void *y, const void *x, size_t n) { bf16_pack(y, x, n); } /* rounded values: exact */

/* The columns [off, off + len) of y (m, stride) = x (m, len), elements of ysz and xsz bytes. */
static void copy_part(void *y, size_t ysz, const void *x, size_t xsz, part_span span, size_t m, size_t len,
                      size_t off, size_t stride) {
    const size_t nblk = (len + CONCAT_BLOCK - 1) / CONCAT_BLOCK;
    #pragma omp parallel for collapse(2) schedule(static) if (m * len >= CONCAT_PAR_MIN && par_pays_floats(2 * m * len))
    for (size_t n = 0; n < m; n++)
        for (size_t k = 0; k < nblk; k++) {
            const size_t lo = k * CONCAT_BLOCK, hi = lo + CONCAT_BLOCK < len ? lo + CONCAT_BLOCK : len;
            span((char *)y + (n * stride + off + lo) * ysz, (const char *)x + (n * len + lo) * xsz, hi - lo);
        }
}

/* Input i into its columns of the output, from and to float32 or (in a bf16 plan) the packed copies. */
static void copy_input(const op_call *c, int i, size_t m, size_t len, size_t off, size_t stride) {
    const bf16 *xp = c->packed.in[i];
    if (c->packed.out)
        copy_part(c->packed.out, sizeof(bf16), xp ? (const void *)xp : (const void *)c->in[i],
                  xp ? sizeof(bf16) : sizeof(float), xp ? span_bf16 : span_pack, m, len, off, stride);
    else
        copy_part(c->out, sizeof(float), xp ? (const void *)xp : (const void *)c->in[i],
                  xp ? sizeof(bf16) : sizeof(float), xp ? span_unpack : span_floats, m, len, off, stride);
}

/* din (m, len) += the columns [off, off + len) of dy (m, stride); din = 0 + them where din is fresh
 * (op_call.din_fresh: the bits of adding into zeros). */
static void add_part(float *din, const float *dy, size_t m, size_t len, size_t off, size_t stride, bool fresh) {
    const size_t nblk = (len + CONCAT_BLOCK - 1) / CONCAT_BLOCK;
    #pragma omp parallel for collapse(2) schedule(static) if (m * len >= CONCAT_PAR_MIN && par_pays_floats(2 * m * len))
    for (size_t n = 0; n < m; n++)
        for (size_t k = 0; k < nblk; k++) {
            const size_t lo = k * CONCAT_BLOCK, hi = lo + CONCAT_BLOCK < len ? lo + CONCAT_BLOCK : len;
            float *d = din + n * len;
            const float *s = dy + n * stride + off;
            #pragma omp simd
            for (size_t i = lo; i < hi; i++) d[i] = (fresh ? 0.0f : d[i]) + s[i];
        }
}

/* add_part where the output's or the input's gradient is stored in bfloat16 (op_call.grads): a block at a
 * time through float32 on the stack, the same sums, rounded as the packed gradient is stored. */
static void add_part_packed(const op_call *c, int in, size_t len, size_t off, size_t stride, bool fresh) {
    const size_t m = c->m, nblk = (len + CONCAT_BLOCK - 1) / CONCAT_BLOCK;
    #pragma omp parallel for collapse(2) schedule(static) if (m * len >= CONCAT_PAR_MIN && par_pays_floats(2 * m * len))
    for (size_t n = 0; n < m; n++)
        for (size_t k = 0; k < nblk; k++) {
            const size_t lo = k * CONCAT_BLOCK, cnt = (lo + CONCAT_BLOCK < len ? lo + CONCAT_BLOCK : len) - lo;
            float dy[CONCAT_BLOCK], dx[CONCAT_BLOCK];
            const float *s = c->dout ? c->dout + n * stride + off + lo : dy;
            float *d = c->din[in] ? c->din[in] + n * len + lo : dx;
            if (!c->dout) bf16_unpack(dy, c->grads.dout + n * stride + off + lo, cnt);
            if (!c->din[in] && !fresh) bf16_unpack(dx, c->grads.din[in] + n * len + lo, cnt);
            #pragma omp simd
            for (size_t i = 0; i < cnt; i++) d[i] = (fresh ? 0.0f : d[i]) + s[i];
            if (!c->din[in]) bf16_pack(c->grads.din[in] + n * len + lo, dx, cnt);
        }
}

/* Input in's share of dout added into its gradient, float32 or packed. */
static void concat_backward_input(const op_call *c, int in, size_t len, size_t off, size_t stride) {
    const bool fresh = (c->din_fresh >> in) & 1u;
    if (c->din[in] && c->dout) add_part(c->din[in], c->dout, c->m, len, off, stride, fresh);
    else if (c->din[in] || c->grads.din[in]) add_part_packed(c, in, len, off, stride, fresh);
}

static void concat_forward(const op_call *c) {
    const size_t m = c->m, an = op_in_numel(c, 0), bn = op_in_numel(c, 1);
    copy_input(c, 0, m, an, 0, an + bn);  /* out (m, an + bn), in[0] (m, an) */
    copy_input(c, 1, m, bn, an, an + bn); /* in[1] (m, bn) */
}

static void concat_backward(const op_call *c) {
    const size_t an = op_in_numel(c, 0), bn = op_in_numel(c, 1);
    /* Two passes, so that concat(x, x) gets both halves added into its one gradient. */
    concat_backward_input(c, 0, an, 0, an + bn);
    concat_backward_input(c, 1, bn, an, an + bn);
}

static double concat_flops(const op_node *n) {
    return (double)n->out_numel; /* copies: one per element written, as relu counts */
}

static size_t concat_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads only dout */
}

static size_t concat_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_concat = {
    .kind = "concat",
    .flags = OP_WRITES_FRESH | OP_FORWARD_READS_PACKED | OP_WRITES_PACKED | OP_GRAD_READS_PACKED |
             OP_GRAD_WRITES_PACKED,
    .infer = concat_infer,
    .forward = concat_forward,
    .backward = concat_backward,
    .flops = concat_flops,
    .saved_bytes = concat_saved_bytes,
    .workspace_bytes = concat_workspace_bytes,
};

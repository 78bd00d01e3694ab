/* relu: y = max(x, 0), any shape. Backward reads the output (y > 0 exactly where x > 0), so the input can be
 * freed after forward and an in-place relu stays correct. NaN passes through, as in PyTorch. */
#include <stdio.h>

#include "kernels/bf16.h"
#include "kernels/elementwise.h"
#include "ops/op.h"
#include "ops/round_output.h"
#include "kernels/relu_bf16.h"
#include "kernels/relu_math.h"
#include "kernels/vmath.h"

/* Below this many elements a parallel loop costs more than it saves (above it par_pays decides). 2^15 splits
 * the mlp's 64-row micro-batches (65 536 elements): with the cores on two chiplets its two backward ReLUs take
 * about twice as long on one thread. */
#define RELU_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel work item: a multiple of every vector width, so spans start aligned to each other. */
#define RELU_CHUNK ((size_t)1 << 13)

static snug_status relu_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                              int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    *out = in[0];
    *n_params = 0;
    return SNUG_OK;
}

/* y = max(x, 0) over n elements; y may be x (in place: each element is read before it is written). x < 0 is
 * false for NaN, so NaN propagates. A plain function with a simd loop, outside any OpenMP region: inside an
 * outlined region GCC 12 kept a compare and a branch per element (taken at random, half the signs negative),
 * which made both relu kernels 14% each of a micro-batch-1 CNN step. */
VM_KERNEL static void relu_span(float *y,       // (n)
                                const float *x, // (n)
                                size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = relu_value(x[i]);
}

/* relu_grad (kernels/relu_math.h) loads both y and dy, then selects: with dy read only where y > 0 the loop keeps
 * a branch per element and does not vectorise. */
/* dx += relu_grad(y, dy). Adding +0 where y <= 0 leaves dx as it was, up to the sign of a zero. */
VM_KERNEL static void relu_backward_span(float *dx,       // (n)
                                         const float *y,  // (n)
                                         const float *dy, // (n)
                                         size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = dx[i] + relu_grad(y[i], dy[i]);
}

/* dx = 0 + relu_grad(y, dy): the first writer of dx (op_call.din_fresh), as the add into a zeroed dx computes
 * it (a -0 gradient becomes +0 there too). */
VM_KERNEL static void relu_backward_fresh_span(float *dx,       // (n)
                                               const float *y,  // (n)
                                               const float *dy, // (n)
                                               size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = 0.0f + relu_grad(y[i], dy[i]);
}

/* The same two with y read from the packed copy a bf16 plan keeps of it (op_call.out_packed), widened in the
 * loop: exact (the output was rounded to bfloat16 as it was made), so the same mask and the same bits, and no
 * float32 instance of y is unpacked for backward. */
VM_KERNEL static void relu_backward_span_packed(float *restrict dx, const uint16_t *restrict y,
                                                const float *restrict dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = dx[i] + relu_grad(bf16_to_float(y[i]), dy[i]);
}

VM_KERNEL static void relu_backward_fresh_span_packed(float *dx, const uint16_t *y, const float *dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = 0.0f + relu_grad(bf16_to_float(y[i]), dy[i]);
}

static const ew_split relu_split = {.par_min = RELU_PAR_MIN, .chunk = RELU_CHUNK};

static void relu_forward(const op_call *c) {
    op_forward_unary_rounding(c, relu_split, relu_span, relu_bf16_round_pack, c->m * op_in_numel(c, 0));
}

static void relu_backward(const op_call *c) {
    if (!c->din[0]) return;
    const bool fresh = c->din_fresh & 1u;
    const size_t len = c->m * op_out_numel(c);
    if (c->out_packed)
        ew_apply_binary_packed(relu_split, fresh ? relu_backward_fresh_span_packed : relu_backward_span_packed,
                               c->din[0], c->out_packed, c->dout, len);
    else ew_apply_binary(relu_split, fresh ? relu_backward_fresh_span : relu_backward_span, c->din[0], c->out, c->dout,
                         len);
}

static double relu_flops(const op_node *n) {
    return (double)n->out_numel;
}

static size_t relu_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads the kept output (OP_KEEPS_OUTPUT) */
}

static size_t relu_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

/* A ReLU folded into the layer beside it (graph/fuse.c) is a view, the gradient shared the same way; no kernel
 * runs. op_relu_folded: folded into the normalisation before it (op_batchnorm2d_relu, op_groupnorm_relu), a
 * view of that output, which already holds relu(y). op_relu_pooled: folded into the max-pool after it
 * (op_maxpool2d_relu), a view of its own input, the values before the ReLU, which the pool rectifies as it
 * loads them and whose backward applies the mask; the pool is its only reader, so no one sees those values
 * under the ReLU's name. Two descriptors so that each fold knows its own ReLU. */
#define RELU_VIEW                                                                                               \
    .kind = "relu", .flags = OP_IS_VIEW, .infer = relu_infer, .forward = NULL, .backward = NULL,                \
    .flops = relu_flops, .saved_bytes = relu_saved_bytes, .workspace_bytes = relu_workspace_bytes,              \
    .fold.unfolded = &op_relu
const op_desc op_relu_folded = {RELU_VIEW};
const op_desc op_relu_pooled = {RELU_VIEW, .fold.hides_values = true};

const op_desc op_relu = {
    .kind = "relu",
    .flags = OP_KEEPS_OUTPUT | OP_ELEMENTWISE | OP_WRITES_FRESH | OP_ROUNDS_OUTPUT | OP_READS_OUTPUT_PACKED,
    .infer = relu_infer,
    .forward = relu_forward,
    .backward = relu_backward,
    .flops = relu_flops,
    .saved_bytes = relu_saved_bytes,
    .workspace_bytes = relu_workspace_bytes,
    .fold = {.view_after = &op_relu_folded, .view_before = &op_relu_pooled},
};

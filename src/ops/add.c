/* add: y = a + b for two inputs of the same per-sample shape: the join of a residual connection. Backward needs
 * neither input nor output (dy flows to both), so the op keeps nothing and can run in place over a. The two
 * inputs may be one tensor (add(x, x)): then din[0] and din[1] are one buffer and both adds land in it, which is
 * the gradient 2 dy.
 *
 * op_add_relu is the add with the ReLU after it folded in (graph/fuse.c: the ReLU the add's only reader, as
 * after a ResNet block): y = relu(a + b) in one pass, and backward passes ReLU's gradient g = 0 + (y > 0 ? dy :
 * 0) to both inputs, computed as ReLU's backward computed it into its own fresh buffer: the same bits as the two
 * ops, one pass over memory fewer each way, and no buffer for the ReLU's gradient. It keeps y (the mask); a
 * bf16 plan keeps y only in its packed copy for it (OP_READS_OUTPUT_PACKED), which holds the mask exactly:
 * no float32 instance unpacked before backward, and half the bytes read. */
#include <stdio.h>

#include "kernels/bf16.h"
#include "kernels/elementwise.h"
#include "ops/op.h"
#include "ops/round_output.h"
#include "kernels/relu_math.h"
#include "kernels/vmath.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define ADD_PAR_MIN ((size_t)1 << 15)
/* Elements per parallel work item: a multiple of every vector width. */
#define ADD_CHUNK ((size_t)1 << 13)

static const ew_split add_split = {.par_min = ADD_PAR_MIN, .chunk = ADD_CHUNK};

static bool same_shape(const snug_shape *a, const snug_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

static snug_status add_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                             int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    if (n_in != 2) {
        snprintf(msg, msg_len, "takes two inputs, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (!same_shape(&in[0], &in[1])) {
        char a[96], b[96];
        snprintf(msg, msg_len, "inputs %s and %s differ: add needs equal shapes",
                 snug_shape_format(&in[0], a, sizeof a), snug_shape_format(&in[1], b, sizeof b));
        return SNUG_E_SHAPE;
    }
    *out = in[0];
    *n_params = 0;
    return SNUG_OK;
}

/* y = a + b over n elements; y may be a (in place). A plain function with a simd loop, run by the element-wise
 * driver outside any OpenMP region: as an `omp parallel for simd` loop in the outlined region GCC 12 compiled
 * it, and the gradient's pass, scalar (movss/addss). */
VM_KERNEL static void add_span(float *y, const float *a, const float *b, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* y = relu(a + b): add_span's sum, then ReLU's value. y may be a. */
VM_KERNEL static void add_relu_span(float *y, const float *a, const float *b, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = relu_value(a[i] + b[i]);
}

/* The two rounded to bfloat16 in the same loop (a bf16 forward: bf16_round of the same sum, so the same bits). */
VM_KERNEL static void add_round_span(float *y, const float *a, const float *b, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bf16_round(a[i] + b[i]);
}

VM_KERNEL static void add_relu_round_span(float *y, const float *a, const float *b, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bf16_round(relu_value(a[i] + b[i]));
}

static void add_forward(const op_call *c) {
    const bool relu = c->node->op == &op_add_relu;
    op_forward_binary_rounding(c, add_split, relu ? add_relu_span : add_span,
                               relu ? add_relu_round_span : add_round_span, c->m * op_out_numel(c));
}

/* ReLU's gradient as its backward writes it into a fresh buffer. */
static inline float relu_grad_fresh(float y, float dy) { return 0.0f + relu_grad(y, dy); }

/* d = ReLU's gradient (a fresh d, or dy's own memory: d may be dy). */
VM_KERNEL static void relu_grad_set_span(float *d, const float *y, const float *dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] = relu_grad_fresh(y[i], dy[i]);
}

/* d += ReLU's gradient, as the add's backward adds it. */
VM_KERNEL static void relu_grad_add_span(float *restrict d, const float *restrict y, const float *restrict dy,
                                         size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] = d[i] + relu_grad_fresh(y[i], dy[i]);
}

/* The same two with y read from the packed copy a bf16 plan keeps of it (op_call.out_packed), widened in the
 * loop: exact, so the same mask and the same bits. */
VM_KERNEL static void relu_grad_set_span_packed(float *d, const uint16_t *y, const float *dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] = relu_grad_fresh(bf16_to_float(y[i]), dy[i]);
}

VM_KERNEL static void relu_grad_add_span_packed(float *restrict d, const uint16_t *restrict y,
                                                const float *restrict dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] = d[i] + relu_grad_fresh(bf16_to_float(y[i]), dy[i]);
}

/* d = ReLU's gradient (fresh) or d += it, from y as the plan keeps it: float32, or only its packed copy. */
static void relu_grad_into(const op_call *c, float *d, bool fresh, size_t len) {
    if (c->out_packed)
        ew_apply_binary_packed(add_split, fresh ? relu_grad_set_span_packed : relu_grad_add_span_packed, d,
                               c->out_packed, c->dout, len);
    else ew_apply_binary(add_split, fresh ? relu_grad_set_span : relu_grad_add_span, d, c->out, c->dout, len);
}

/* Where the planner continued dout's memory as din[0] (OP_GRAD_PASSTHROUGH), the gradient is masked there in
 * place and din[1] takes it from there; else each input gets its own pass over y and dy (separate passes, for
 * add(x, x)). */
static void add_relu_backward(const op_call *c) {
    const size_t len = c->m * op_out_numel(c);
    if (c->din[0] && c->din[0] == c->dout) {
        relu_grad_into(c, c->din[0], true, len);
        if (c->din[1] && c->din[1] != c->dout) ew_accumulate(add_split, c->din[1], c->din[0], len, c->din_fresh & 2u);
        return;
    }
    for (int k = 0; k < 2; k++)
        if (c->din[k]) relu_grad_into(c, c->din[k], c->din_fresh & (1u << k), len);
}

static void accumulate(float *din, const float *dy, size_t len, bool fresh) {
    ew_accumulate(add_split, din, dy, len, fresh);
}

static void add_backward(const op_call *c) {
    const size_t len = c->m * op_out_numel(c);
    /* Two separate passes, so that din[0] == din[1] (add(x, x)) gets dy twice, as it must. A gradient the planner
     * placed on dout's own memory (OP_GRAD_PASSTHROUGH) already holds dy: adding would double it. */
    if (c->din[0] && c->din[0] != c->dout) accumulate(c->din[0], c->dout, len, c->din_fresh & 1u);
    if (c->din[1] && c->din[1] != c->dout) accumulate(c->din[1], c->dout, len, c->din_fresh & 2u);
}

static double add_flops(const op_node *n) {
    return (double)n->out_numel;
}

static size_t add_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads only dout */
}

static size_t add_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_add_relu = {
    .kind = "add",
    .flags = OP_ELEMENTWISE | OP_GRAD_PASSTHROUGH | OP_WRITES_FRESH | OP_KEEPS_OUTPUT | OP_ROUNDS_OUTPUT |
             OP_READS_OUTPUT_PACKED,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_relu_backward,
    .flops = add_flops,
    .saved_bytes = add_saved_bytes,
    .workspace_bytes = add_workspace_bytes,
    .fold = {.unfolded = &op_add, .hides_values = true},
};

const op_desc op_add = {
    .kind = "add",
    .flags = OP_ELEMENTWISE | OP_GRAD_PASSTHROUGH | OP_WRITES_FRESH | OP_ROUNDS_OUTPUT,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_backward,
    .flops = add_flops,
    .saved_bytes = add_saved_bytes,
    .workspace_bytes = add_workspace_bytes,
    .fold.relu_after = &op_add_relu,
};

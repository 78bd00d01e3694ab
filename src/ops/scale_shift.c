/* scale_shift: y = scale x + shift with two constant scalars, any shape: what an exported `x * 0.5`, `x / 4`,
 * `x + 1` or `1 - x` computes (ONNX's Mul, Div, Add or Sub of a Constant). Nothing is learned; backward is
 * dx += scale dy, which reads neither x nor y, so nothing is kept for it and it may run in place. */
#include <math.h>
#include <stdio.h>

#include "ops/op.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define SCALE_SHIFT_PAR_MIN ((size_t)1 << 15)

static snug_status scale_shift_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                                     param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)params;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (!isfinite(n->p.scale_shift.scale) || !isfinite(n->p.scale_shift.shift)) {
        snprintf(msg, msg_len, "scale %g and shift %g must be finite", n->p.scale_shift.scale,
                 n->p.scale_shift.shift);
        return SNUG_E_ARG;
    }
    *out = in[0];
    *n_params = 0;
    return SNUG_OK;
}

/* The element-wise splitter's kernels take arrays only, and these two need the node's constants: one parallel
 * loop each instead. Every element is computed alone, so the bits do not depend on the thread count. */
static void scale_shift_forward(const op_call *c) {
    const float a = c->node->p.scale_shift.scale, b = c->node->p.scale_shift.shift;
    const size_t len = c->m * op_in_numel(c, 0);
    const float *x = c->in[0];
    float *y = c->out;
    #pragma omp parallel for simd schedule(static) if (len >= SCALE_SHIFT_PAR_MIN)
    for (size_t i = 0; i < len; i++) y[i] = a * x[i] + b;
}

/* dx += scale dy; a fresh dx is 0 + scale dy, the bits of adding into zeros. */
static void scale_shift_backward(const op_call *c) {
    if (!c->din[0]) return;
    const float a = c->node->p.scale_shift.scale;
    const size_t len = c->m * op_out_numel(c);
    const float *dy = c->dout;
    float *dx = c->din[0];
    if (c->din_fresh & 1u) {
        #pragma omp parallel for simd schedule(static) if (len >= SCALE_SHIFT_PAR_MIN)
        for (size_t i = 0; i < len; i++) dx[i] = 0.0f + a * dy[i];
    } else {
        #pragma omp parallel for simd schedule(static) if (len >= SCALE_SHIFT_PAR_MIN)
        for (size_t i = 0; i < len; i++) dx[i] = dx[i] + a * dy[i];
    }
}

static double scale_shift_flops(const op_node *n) { return 2.0 * (double)n->out_numel; }

static size_t scale_shift_saved_bytes(const op_node *n) {
    (void)n;
    return 0;
}

static size_t scale_shift_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_scale_shift = {
    .kind = "scale_shift",
    .flags = OP_ELEMENTWISE | OP_WRITES_FRESH,
    .infer = scale_shift_infer,
    .forward = scale_shift_forward,
    .backward = scale_shift_backward,
    .flops = scale_shift_flops,
    .saved_bytes = scale_shift_saved_bytes,
    .workspace_bytes = scale_shift_workspace_bytes,
};

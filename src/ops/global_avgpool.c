/* global_avgpool: (C, H, W) -> (C), the mean of every plane (ResNet's head, as
 * torch.nn.AdaptiveAvgPool2d(1) followed by a flatten). Backward spreads dy / (H*W) over the plane, so it keeps
 * nothing. Planes are summed in double: a plane can hold 65536 pixels. */
#include <stdio.h>

#include "core/parallel.h"
#include "ops/op.h"

/* Below this many input elements a parallel loop costs more than it saves. */
#define GAP_PAR_MIN ((size_t)1 << 15)

static snug_status gap_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                             int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    char s[96];
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 3 || in[0].dims[0] == 0 || in[0].dims[1] == 0 || in[0].dims[2] == 0) {
        snprintf(msg, msg_len, "expects an input (channels, height, width) with no zero dimension, got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = 1, .dims = {in[0].dims[0]}};
    *n_params = 0;
    return SNUG_OK;
}

/* The pixels of one plane: the input's numel over its channels. */
static size_t plane_of(const op_call *c) { return op_in_numel(c, 0) / op_out_numel(c); }

static void gap_forward(const op_call *c) {
    const size_t planes = c->m * op_out_numel(c), hw = plane_of(c);
    const float *x = c->in[0]; // (m*C, hw)
    float *y = c->out;         // (m*C)
    #pragma omp parallel for schedule(static) \
        if (planes > 1 && planes * hw >= GAP_PAR_MIN && par_pays_floats(planes * hw))
    for (size_t p = 0; p < planes; p++) {
        const float *v = x + p * hw;
        double s = 0.0;
        for (size_t i = 0; i < hw; i++) s += v[i];
        y[p] = (float)(s / (double)hw);
    }
}

static void gap_backward(const op_call *c) {
    const size_t planes = c->m * op_out_numel(c), hw = plane_of(c);
    const float *dy = c->dout; // (m*C)
    float *dx = c->din[0];     // (m*C, hw)
    if (!dx) return;
    const float inv = 1.0f / (float)hw;
    const bool fresh = c->din_fresh & 1u;
    #pragma omp parallel for schedule(static) \
        if (planes > 1 && planes * hw >= GAP_PAR_MIN && par_pays_floats(planes * hw))
    for (size_t p = 0; p < planes; p++) {
        const float g = dy[p] * inv;
        float *d = dx + p * hw;
        /* the first writer of dx (op_call.din_fresh) starts from 0, not from what dx held: the bits of adding */
        #pragma omp simd
        for (size_t i = 0; i < hw; i++) d[i] = (fresh ? 0.0f : d[i]) + g;
    }
}

static double gap_flops(const op_node *n) {
    return (double)n->in_numel[0]; /* one add per input element */
}

static size_t gap_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads only dout */
}

static size_t gap_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_global_avgpool = {
    .kind = "global_avgpool",
    .flags = OP_WRITES_FRESH,
    .infer = gap_infer,
    .forward = gap_forward,
    .backward = gap_backward,
    .flops = gap_flops,
    .saved_bytes = gap_saved_bytes,
    .workspace_bytes = gap_workspace_bytes,
};

/* upsample_nearest2d: (C, H, W) -> (C, s H, s W), every pixel repeated over an s x s block (torch.nn.Upsample(
 * scale_factor=s, mode="nearest"), which ONNX writes as Resize with mode "nearest"). Backward sums each block of
 * dout into its pixel, reading only dout, so it keeps nothing and writes din whole. */
#include <stdio.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "ops/op.h"

/* Below this many output elements a parallel loop costs more than it saves. */
#define UPSAMPLE_PAR_MIN ((size_t)1 << 15)
#define UPSAMPLE_MAX_SCALE 64

static snug_status upsample_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                                  param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)params;
    char s[96];
    const size_t scale = n->p.pool2d.stride;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (scale < 1 || scale > UPSAMPLE_MAX_SCALE) {
        snprintf(msg, msg_len, "scale %zu: nearest up-sampling takes a whole factor from 1 to %d", scale,
                 UPSAMPLE_MAX_SCALE);
        return SNUG_E_ARG;
    }
    if (in[0].rank != 3 || in[0].dims[0] == 0 || in[0].dims[1] == 0 || in[0].dims[2] == 0) {
        snprintf(msg, msg_len, "expects an input (channels, height, width) with no zero dimension, got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    *out = in[0];
    size_t numel;
    if (!size_mul(in[0].dims[1], scale, &out->dims[1]) || !size_mul(in[0].dims[2], scale, &out->dims[2]) ||
        !size_mul(out->dims[1], out->dims[2], &numel) || !size_mul(numel, out->dims[0], &numel)) {
        snprintf(msg, msg_len, "input %s up-sampled %zu times overflows", snug_shape_format(&in[0], s, sizeof s),
                 scale);
        return SNUG_E_SHAPE;
    }
    *n_params = 0;
    return SNUG_OK;
}

static void upsample_forward(const op_call *c) {
    const op_node *n = c->node;
    const size_t s = n->p.pool2d.stride, planes = c->m * n->in_shape[0].dims[0];
    const size_t h = n->in_shape[0].dims[1], w = n->in_shape[0].dims[2], wo = w * s;
    const float *x = c->in[0];
    float *y = c->out;
    #pragma omp parallel for schedule(static) \
        if (planes > 1 && planes * h * w * s * s >= UPSAMPLE_PAR_MIN && par_pays_floats(planes * h * w * s * s))
    for (size_t p = 0; p < planes; p++)
        for (size_t oi = 0; oi < h * s; oi++) {
            const float *row = x + (p * h + oi / s) * w;
            float *dst = y + (p * h * s + oi) * wo;
            for (size_t oj = 0; oj < wo; oj++) dst[oj] = row[oj / s];
        }
}

static void upsample_backward(const op_call *c) {
    const op_node *n = c->node;
    float *dx = c->din[0];
    if (!dx) return;
    const size_t s = n->p.pool2d.stride, planes = c->m * n->in_shape[0].dims[0];
    const size_t h = n->in_shape[0].dims[1], w = n->in_shape[0].dims[2], wo = w * s;
    const float *dy = c->dout;
    const bool fresh = c->din_fresh & 1u;
    #pragma omp parallel for schedule(static) \
        if (planes > 1 && planes * h * w * s * s >= UPSAMPLE_PAR_MIN && par_pays_floats(planes * h * w * s * s))
    for (size_t p = 0; p < planes; p++)
        for (size_t i = 0; i < h; i++)
            for (size_t j = 0; j < w; j++) {
                float sum = 0.0f;
                for (size_t a = 0; a < s; a++)
                    for (size_t b = 0; b < s; b++) sum += dy[(p * h * s + i * s + a) * wo + j * s + b];
                float *d = dx + (p * h + i) * w + j;
                /* the first writer of dx (op_call.din_fresh) starts from 0, not from what dx held */
                *d = (fresh ? 0.0f : *d) + sum;
            }
}

static double upsample_flops(const op_node *n) {
    (void)n;
    return 0.0; /* copies */
}

static double upsample_backward_flops(const op_node *n) {
    return (double)n->out_numel; /* one add per output gradient */
}

static size_t upsample_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads only dout */
}

static size_t upsample_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_upsample_nearest2d = {
    .kind = "upsample_nearest2d",
    .flags = OP_WRITES_FRESH,
    .infer = upsample_infer,
    .forward = upsample_forward,
    .backward = upsample_backward,
    .flops = upsample_flops,
    .backward_flops = upsample_backward_flops,
    .saved_bytes = upsample_saved_bytes,
    .workspace_bytes = upsample_workspace_bytes,
};

/* softmax: along one per-sample axis, y = exp(x - max) / sum exp(x - max) over that axis (torch.softmax(dim),
 * ONNX Softmax inside a model; the loss applies its own to the logits). Backward reads the kept output:
 * dx = y (dy - sum_j y_j dy_j) over the same axis. Each line is one sequential sum in a fixed order, so a
 * recomputed forward writes the same bits whatever the threads. */
#include <math.h>
#include <stdio.h>

#include "core/parallel.h"
#include "ops/layout.h"
#include "ops/op.h"

/* Below this many elements per call a parallel loop costs more than it saves. */
#define SOFTMAX_PAR_MIN ((size_t)1 << 14)

static snug_status softmax_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                                 param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)params;
    char s[96];
    if (!layout_inputs(n_in, 1, msg, msg_len)) return SNUG_E_ARG;
    if (n->p.softmax.axis < 0 || n->p.softmax.axis >= in[0].rank) {
        snprintf(msg, msg_len, "axis %d is not an axis of input %s (0 is the first after the batch)",
                 n->p.softmax.axis, snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_ARG;
    }
    *out = in[0];
    *n_params = 0;
    return SNUG_OK;
}

/* The line of len entries `inner` apart from x into y. */
static void softmax_line(const float *x, float *y, size_t len, size_t inner) {
    float mx = x[0];
    for (size_t j = 1; j < len; j++) mx = x[j * inner] > mx ? x[j * inner] : mx;
    float sum = 0.0f;
    for (size_t j = 0; j < len; j++) {
        y[j * inner] = expf(x[j * inner] - mx);
        sum += y[j * inner];
    }
    const float inv = 1.0f / sum;
    for (size_t j = 0; j < len; j++) y[j * inner] *= inv;
}

/* dx += y (dy - <y, dy>) along the line. */
static void softmax_line_backward(const float *y, const float *dy, float *dx, size_t len, size_t inner) {
    float dot = 0.0f;
    for (size_t j = 0; j < len; j++) dot += y[j * inner] * dy[j * inner];
    for (size_t j = 0; j < len; j++) dx[j * inner] += y[j * inner] * (dy[j * inner] - dot);
}

/* Every line of the m samples: (sample, outer, inner) index l starts at (l / inner) len inner + l % inner. */
static void softmax_run(const op_call *c, bool backward) {
    const layout_axis a = layout_around(op_in_shape(c, 0), c->node->p.softmax.axis);
    const size_t lines = c->m * a.outer * a.inner, numel = lines * a.len;
    #pragma omp parallel for schedule(static) if (numel >= SOFTMAX_PAR_MIN && par_pays_floats(4 * numel))
    for (size_t l = 0; l < lines; l++) {
        const size_t at = (l / a.inner) * a.len * a.inner + l % a.inner;
        if (backward) softmax_line_backward(c->out + at, c->dout + at, c->din[0] + at, a.len, a.inner);
        else softmax_line(c->in[0] + at, c->out + at, a.len, a.inner);
    }
}

static void softmax_forward(const op_call *c) { softmax_run(c, false); }

static void softmax_backward(const op_call *c) {
    if (c->din[0]) softmax_run(c, true);
}

/* max, subtract, exp, sum, scale: about five per element, as attention counts its softmax */
static double softmax_flops(const op_node *n) { return 5.0 * (double)n->out_numel; }

const op_desc op_softmax = {
    .kind = "softmax",
    .flags = OP_KEEPS_OUTPUT,
    .infer = softmax_infer,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .flops = softmax_flops,
    .workspace_bytes = layout_no_workspace,
};

/* slice: entries start, start + step, ... (len of them) of one per-sample axis (x[:, start:end:step] along
 * it; ONNX Slice of one axis, and each part of a Split). Forward copies them, backward adds dout back into
 * their places (the others get no gradient); it keeps nothing for backward. */
#include <stdio.h>

#include "core/checked.h"
#include "core/parallel.h"
#include "ops/layout.h"
#include "ops/op.h"

/* Below this many elements per call a parallel loop costs more than it saves. */
#define SLICE_PAR_MIN ((size_t)1 << 15)

static snug_status slice_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                               param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)params;
    const slice_params *p = &n->p.slice;
    char s[96];
    size_t last;
    if (!layout_inputs(n_in, 1, msg, msg_len)) return SNUG_E_ARG;
    if (p->axis < 0 || p->axis >= in[0].rank) {
        snprintf(msg, msg_len, "axis %d is not an axis of input %s (0 is the first after the batch)", p->axis,
                 snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_ARG;
    }
    if (p->len == 0 || p->step == 0) {
        snprintf(msg, msg_len, "needs at least one entry and a step of at least 1, got %zu entries, step %zu",
                 p->len, p->step);
        return SNUG_E_ARG;
    }
    if (!size_mul(p->len - 1, p->step, &last) || !size_add(last, p->start, &last) || last >= in[0].dims[p->axis]) {
        snprintf(msg, msg_len, "%zu entries from %zu by %zu run past the %zu of axis %d of input %s", p->len,
                 p->start, p->step, in[0].dims[p->axis], p->axis, snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    *out = in[0];
    out->dims[p->axis] = p->len;
    *n_params = 0;
    return SNUG_OK;
}

/* One sample: y = the slice of x (forward), or the slice of dx += dy (backward). */
static void slice_sample(const slice_params *p, const layout_axis *a, const float *src, float *dst, bool backward) {
    for (size_t o = 0; o < a->outer; o++)
        for (size_t j = 0; j < p->len; j++) {
            const size_t xi = (o * a->len + p->start + j * p->step) * a->inner, yi = (o * p->len + j) * a->inner;
            if (backward)
                for (size_t i = 0; i < a->inner; i++) dst[xi + i] += src[yi + i];
            else
                for (size_t i = 0; i < a->inner; i++) dst[yi + i] = src[xi + i];
        }
}

static void slice_run(const op_call *c, const float *src, float *dst, bool backward) {
    const slice_params *p = &c->node->p.slice;
    const layout_axis a = layout_around(op_in_shape(c, 0), p->axis);
    const size_t in_n = op_in_numel(c, 0), out_n = op_out_numel(c), m = c->m;
    #pragma omp parallel for schedule(static) if (m * out_n >= SLICE_PAR_MIN && par_pays_floats(2 * m * out_n))
    for (size_t s = 0; s < m; s++)
        slice_sample(p, &a, backward ? src + s * out_n : src + s * in_n, backward ? dst + s * in_n : dst + s * out_n,
                     backward);
}

static void slice_forward(const op_call *c) { slice_run(c, c->in[0], c->out, false); }

static void slice_backward(const op_call *c) {
    if (c->din[0]) slice_run(c, c->dout, c->din[0], true);
}

const op_desc op_slice = {
    .kind = "slice",
    .flags = 0,
    .infer = slice_infer,
    .forward = slice_forward,
    .backward = slice_backward,
    .flops = layout_copy_flops,
    .workspace_bytes = layout_no_workspace,
};

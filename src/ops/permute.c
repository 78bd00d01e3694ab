/* permute: the per-sample axes of x in another order (torch.permute, ONNX Transpose with the batch axis kept
 * first): output axis i is input axis perm[i]. Forward copies every element to its place, backward adds each
 * element of dout back to its input place; neither reads anything else, so it keeps nothing for backward. */
#include <stdio.h>

#include "core/parallel.h"
#include "ops/layout.h"
#include "ops/op.h"

/* Below this many elements per call a parallel loop costs more than it saves. */
#define PERMUTE_PAR_MIN ((size_t)1 << 15)

static snug_status permute_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                                 param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)params;
    char s[96];
    if (!layout_inputs(n_in, 1, msg, msg_len)) return SNUG_E_ARG;
    bool seen[SNUG_MAX_DIMS] = {false}, ok = in[0].rank >= 1 && in[0].rank <= SNUG_MAX_DIMS;
    for (int i = 0; ok && i < in[0].rank; i++) {
        const int p = n->p.permute.perm[i];
        ok = p >= 0 && p < in[0].rank && !seen[p];
        if (ok) seen[p] = true;
    }
    if (!ok) {
        snprintf(msg, msg_len, "perm must list each of the %d axes of input %s once (0 the first after the batch)",
                 in[0].rank, snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_ARG;
    }
    *out = (snug_shape){.rank = in[0].rank};
    for (int i = 0; i < in[0].rank; i++) out->dims[i] = in[0].dims[n->p.permute.perm[i]];
    *n_params = 0;
    return SNUG_OK;
}

/* The output's dims and, per output axis, the stride of the input axis it reads, padded in front to four axes
 * (size 1, stride 0), so that one loop nest serves every rank. */
typedef struct permute_walk {
    size_t dims[SNUG_MAX_DIMS], stride[SNUG_MAX_DIMS];
} permute_walk;

static permute_walk permute_walk_of(const op_node *n) {
    const snug_shape *in = &n->in_shape[0];
    size_t in_stride[SNUG_MAX_DIMS], st = 1;
    for (int i = in->rank - 1; i >= 0; i--) in_stride[i] = st, st *= in->dims[i];
    permute_walk w;
    const int pad = SNUG_MAX_DIMS - in->rank;
    for (int i = 0; i < SNUG_MAX_DIMS; i++) {
        w.dims[i] = i < pad ? 1 : n->out_shape.dims[i - pad];
        w.stride[i] = i < pad ? 0 : in_stride[n->p.permute.perm[i - pad]];
    }
    return w;
}

/* One sample: y[out order] = x (forward), or dx[in place] += dy (backward, add). */
static void permute_sample(const permute_walk *w, const float *src, float *dst, bool backward) {
    size_t o = 0;
    for (size_t a = 0; a < w->dims[0]; a++)
        for (size_t b = 0; b < w->dims[1]; b++)
            for (size_t c = 0; c < w->dims[2]; c++) {
                const size_t base = a * w->stride[0] + b * w->stride[1] + c * w->stride[2];
                for (size_t d = 0; d < w->dims[3]; d++, o++) {
                    const size_t i = base + d * w->stride[3];
                    if (backward) dst[i] += src[o];
                    else dst[o] = src[i];
                }
            }
}

static void permute_run(const op_call *c, const float *src, float *dst, bool backward) {
    const permute_walk w = permute_walk_of(c->node);
    const size_t numel = op_out_numel(c), m = c->m;
    #pragma omp parallel for schedule(static) if (m * numel >= PERMUTE_PAR_MIN && par_pays_floats(2 * m * numel))
    for (size_t s = 0; s < m; s++) permute_sample(&w, src + s * numel, dst + s * numel, backward);
}

static void permute_forward(const op_call *c) { permute_run(c, c->in[0], c->out, false); }

static void permute_backward(const op_call *c) {
    if (c->din[0]) permute_run(c, c->dout, c->din[0], true);
}

const op_desc op_permute = {
    .kind = "permute",
    .flags = 0,
    .infer = permute_infer,
    .forward = permute_forward,
    .backward = permute_backward,
    .flops = layout_copy_flops,
    .workspace_bytes = layout_no_workspace,
};

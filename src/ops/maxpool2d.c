/* maxpool2d: (C, H, W) -> (C, Ho, Wo), Ho = (H - k) / stride + 1, no padding (floor: a partial window at the
 * border is dropped, as in PyTorch's default).
 *
 * Saved for backward: per output element, the int32 index of its maximum within the sample, c*H*W + ih*W + iw
 * (infer rejects samples of more than INT32_MAX elements). Ties go to the first maximum in row-major window
 * order and a NaN counts as the maximum (the first NaN wins), both as in PyTorch. */
#include <stdint.h>
#include <stdio.h>

#include "core/checked.h"
#include "ops/op.h"

/* Below this many output elements a parallel loop costs more than it saves. */
#define POOL_PAR_MIN ((size_t)1 << 14)

typedef struct pool_geom { size_t c, h, w, k, s, ho, wo; } pool_geom;

static pool_geom pool_geom_of(const snug_graph *g, const graph_node *n) {
    const snug_shape *in = &g->tensors[n->inputs[0]].shape;
    pool_geom p = {.c = in->dims[0], .h = in->dims[1], .w = in->dims[2], .k = n->p.pool2d.kernel,
                   .s = n->p.pool2d.stride};
    p.ho = (p.h - p.k) / p.s + 1;
    p.wo = (p.w - p.k) / p.s + 1;
    return p;
}

static bool pool_infer(const graph_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                       int *n_params, char *msg, size_t msg_len) {
    (void)params;
    char s[96];
    const size_t k = n->p.pool2d.kernel, st = n->p.pool2d.stride;
    size_t numel;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return false;
    }
    if (in[0].rank != 3) {
        snprintf(msg, msg_len, "expects an input (channels, height, width), got %s",
                 snug_shape_format(&in[0], s, sizeof s));
        return false;
    }
    if (k == 0 || st == 0) {
        snprintf(msg, msg_len, "needs kernel and stride >= 1, got kernel %zu, stride %zu", k, st);
        return false;
    }
    if (k > in[0].dims[1] || k > in[0].dims[2]) {
        snprintf(msg, msg_len, "kernel %zux%zu is larger than its input %s: use a smaller kernel or "
                 "pool earlier", k, k, snug_shape_format(&in[0], s, sizeof s));
        return false;
    }
    if (!size_prod(in[0].dims, 3, &numel) || numel > INT32_MAX) {
        snprintf(msg, msg_len, "input %s has more than %d elements per sample: its argmax indices "
                 "are int32", snug_shape_format(&in[0], s, sizeof s), INT32_MAX);
        return false;
    }
    *out = (snug_shape){.rank = 3,
                        .dims = {in[0].dims[0], (in[0].dims[1] - k) / st + 1, (in[0].dims[2] - k) / st + 1}};
    *n_params = 0;
    return true;
}

/* One output element: the maximum of its window and where it is (first maximum; NaN beats everything). */
static float window_max(const float *plane, // (h, w)
                        const pool_geom *p, size_t oh, size_t ow, size_t *where) {
    size_t h0 = oh * p->s, w0 = ow * p->s, best_i = h0 * p->w + w0;
    float best = plane[best_i];
    for (size_t i = 0; i < p->k; i++) {
        const float *row = plane + (h0 + i) * p->w + w0;
        for (size_t j = 0; j < p->k; j++) {
            float v = row[j];
            if (v > best || (v != v && best == best)) {
                best = v;
                best_i = (h0 + i) * p->w + w0 + j;
            }
        }
    }
    *where = best_i;
    return best;
}

static void pool_forward(const op_call *c) {
    const pool_geom p = pool_geom_of(c->g, c->node);
    const size_t planes = c->m * p.c, in_plane = p.h * p.w, out_plane = p.ho * p.wo;
    const float *x = c->in[0];    // (m, c, h, w)
    float *y = c->out;            // (m, c, ho, wo)
    int32_t *arg = c->saved;      // (m, c, ho, wo): index within the sample
    #pragma omp parallel for schedule(static) if (planes * out_plane >= POOL_PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_plane;
        const size_t base = (pl % p.c) * in_plane; /* the plane's offset within its sample */
        for (size_t oh = 0; oh < p.ho; oh++)
            for (size_t ow = 0; ow < p.wo; ow++) {
                size_t where, o = pl * out_plane + oh * p.wo + ow;
                y[o] = window_max(xp, &p, oh, ow, &where);
                arg[o] = (int32_t)(base + where);
            }
    }
}

/* Each plane's gradient lands only in its own input plane, so planes run in parallel without races. */
static void pool_backward(const op_call *c) {
    const pool_geom p = pool_geom_of(c->g, c->node);
    const size_t planes = c->m * p.c, in_numel = p.c * p.h * p.w, out_plane = p.ho * p.wo;
    const float *dy = c->dout;    // (m, c, ho, wo)
    const int32_t *arg = c->saved; // (m, c, ho, wo)
    float *dx = c->din[0];        // (m, c, h, w)
    if (!dx) return;
    #pragma omp parallel for schedule(static) if (planes * out_plane >= POOL_PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxs = dx + (pl / p.c) * in_numel;
        for (size_t o = pl * out_plane; o < (pl + 1) * out_plane; o++) dxs[arg[o]] += dy[o];
    }
}

static double pool_flops(const snug_graph *g, const graph_node *n) {
    const pool_geom p = pool_geom_of(g, n);
    return (double)p.c * (double)p.ho * (double)p.wo * (double)(p.k * p.k); /* one comparison per element */
}

static size_t pool_saved_bytes(const snug_graph *g, const graph_node *n) {
    size_t bytes;
    return size_mul(g->tensors[n->output].numel, sizeof(int32_t), &bytes) ? bytes : SIZE_MAX;
}

static size_t pool_workspace_bytes(const snug_graph *g, const graph_node *n, size_t m, int threads) {
    (void)g, (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_maxpool2d = {
    .kind = "maxpool2d",
    .flags = 0,
    .infer = pool_infer,
    .forward = pool_forward,
    .backward = pool_backward,
    .flops = pool_flops,
    .saved_bytes = pool_saved_bytes,
    .workspace_bytes = pool_workspace_bytes,
};

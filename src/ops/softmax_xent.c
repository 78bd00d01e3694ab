/* softmax_xent (OP_IS_LOSS): softmax cross-entropy over the classes of logits, one item per target:
 *   (classes)        one item per sample,        output (1);
 *   (T, classes)     one item per token,         output (T);
 *   (classes, H, W)  one item per pixel (NCHW),  output (H, W).
 * The output has the targets' shape and holds the item losses -log p[target], 0 for an ignored item. Forward
 * saves the probabilities (the logits' shape) for backward, which adds (p - onehot(target)) * loss_scale to the
 * logits' gradient of every counted item.
 *
 * Per sample the logits are (outer, classes, inner): item (o, i) has its classes inner apart. Contiguous items
 * (inner = 1) go one by one; per-pixel items go in blocks of pixels with the class loop outside, so every pass
 * reads rows of contiguous pixels.
 *
 * A target outside [0, classes) counts as ignored (SNUG_IGNORE_TARGET): the data layer validates labels, this
 * only keeps a bad one from reading out of bounds. NULL targets (prediction only) ignore every item.
 * exp is kernels/vmath.h's (within 1 ulp of libm's), so the class loops vectorise; their sums run in an order fixed
 * at compile time, the same for any thread count. */
#include <math.h>
#include <omp.h>
#include <stdio.h>

#include "core/parallel.h"
#include "core/checked.h"
#include "ops/op.h"
#include "kernels/vmath.h"

/* Below this many logits a parallel loop costs more than it saves: the kernels are then called directly. */
#define XENT_PAR_MIN ((size_t)1 << 15)
/* Pixels per block of the per-pixel path: the block's max and sum live on the stack. */
#define XENT_BLOCK 64

typedef struct xent_layout {
    size_t classes, outer, inner; /* per sample: (outer, classes, inner); items = outer * inner */
} xent_layout;

static xent_layout xent_layout_of(const snug_shape *s) {
    switch (s->rank) {
    case 1: return (xent_layout){.classes = s->dims[0], .outer = 1, .inner = 1};
    case 2: return (xent_layout){.classes = s->dims[1], .outer = s->dims[0], .inner = 1};
    default: return (xent_layout){.classes = s->dims[0], .outer = 1, .inner = s->dims[1] * s->dims[2]};
    }
}

static snug_status xent_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                              int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    char s[96];
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input (the logits), got %d", n_in);
        return SNUG_E_ARG;
    }
    const snug_shape *x = &in[0];
    if (x->rank == 3 && x->dims[1] * x->dims[2] == 1) { /* almost surely a forgotten flatten, not 1x1 pixels */
        snprintf(msg, msg_len, "got logits %s: add a flatten for one class per sample, or give per-pixel logits "
                 "(classes, H, W) with more than one pixel", snug_shape_format(x, s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (x->rank < 1 || x->rank > 3) {
        snprintf(msg, msg_len, "expects logits (classes), (T, classes) or (classes, H, W), got %s: add a flatten "
                 "or a linear layer before it", snug_shape_format(x, s, sizeof s));
        return SNUG_E_SHAPE;
    }
    const xent_layout l = xent_layout_of(x);
    if (l.classes == 0 || l.outer == 0 || l.inner == 0) {
        snprintf(msg, msg_len, "got empty logits %s", snug_shape_format(x, s, sizeof s));
        return SNUG_E_SHAPE;
    }
    if (l.classes > INT32_MAX) { /* targets are int32 class indices */
        snprintf(msg, msg_len, "logits %s have more than %d classes", snug_shape_format(x, s, sizeof s), INT32_MAX);
        return SNUG_E_SHAPE;
    }
    if (x->rank == 1) *out = (snug_shape){.rank = 1, .dims = {1}};
    else if (x->rank == 2) *out = (snug_shape){.rank = 1, .dims = {x->dims[0]}};
    else *out = (snug_shape){.rank = 2, .dims = {x->dims[1], x->dims[2]}};
    *n_params = 0;
    return SNUG_OK;
}

static bool counted(const op_call *c, size_t i, size_t classes) {
    return c->targets && c->targets[i] >= 0 && (size_t)c->targets[i] < classes;
}

/* Numerically stable: p = exp(x - max) / sum, -log p[t] = log(sum) - (x[t] - max). */
VM_KERNEL static float xent_item(float *p,        // (classes) probabilities out
                       const float *x,  // (classes) logits
                       size_t classes, int32_t t, bool count) {
    float mx = x[0];
    #pragma omp simd reduction(max : mx)
    for (size_t j = 1; j < classes; j++) mx = x[j] > mx ? x[j] : mx;
    #pragma omp simd
    for (size_t j = 0; j < classes; j++) p[j] = vm_expf(x[j] - mx);
    double sum = 0.0;
    #pragma omp simd reduction(+ : sum)
    for (size_t j = 0; j < classes; j++) sum += p[j];
    const float inv = (float)(1.0 / sum);
    #pragma omp simd
    for (size_t j = 0; j < classes; j++) p[j] *= inv;
    return count ? (float)(log(sum) - (double)(x[t] - mx)) : 0.0f;
}

/* One block of len <= XENT_BLOCK pixels of one sample: x and p point at the block's first pixel of class 0,
 * classes are `stride` apart; item is the block's first item index in the micro-batch. */
VM_KERNEL static void xent_pixels(const op_call *c, const float *x, float *p, float *loss, size_t item, size_t len,
                        size_t classes, size_t stride) {
    float mx[XENT_BLOCK];
    double sum[XENT_BLOCK];
    for (size_t k = 0; k < len; k++) mx[k] = x[k], sum[k] = 0.0;
    for (size_t j = 1; j < classes; j++)
        for (size_t k = 0; k < len; k++) mx[k] = x[j * stride + k] > mx[k] ? x[j * stride + k] : mx[k];
    for (size_t j = 0; j < classes; j++)
        #pragma omp simd
        for (size_t k = 0; k < len; k++) {
            p[j * stride + k] = vm_expf(x[j * stride + k] - mx[k]);
            sum[k] += p[j * stride + k];
        }
    for (size_t k = 0; k < len; k++) {
        const bool count = counted(c, item + k, classes);
        const size_t t = count ? (size_t)c->targets[item + k] : 0;
        loss[k] = count ? (float)(log(sum[k]) - (double)(x[t * stride + k] - mx[k])) : 0.0f;
        sum[k] = 1.0 / sum[k];
    }
    for (size_t j = 0; j < classes; j++)
        for (size_t k = 0; k < len; k++) p[j * stride + k] *= (float)sum[k];
}

/* Items [lo, hi) of one item per row (inner = 1): the classes of item i are the row x[i]. */
static void xent_rows(const op_call *c, size_t classes, size_t lo, size_t hi) {
    const float *x = c->in[0]; // (items, classes)
    float *p = c->saved;       // (items, classes)
    for (size_t i = lo; i < hi; i++) {
        const bool count = counted(c, i, classes);
        c->out[i] = xent_item(p + i * classes, x + i * classes, classes, count ? c->targets[i] : 0, count);
    }
}

/* Tasks [lo, hi) of the per-pixel path: task = (sample, block of XENT_BLOCK pixels). */
static void xent_pixel_tasks(const op_call *c, const xent_layout *l, size_t numel, size_t lo, size_t hi) {
    const size_t hw = l->inner, nb = (hw + XENT_BLOCK - 1) / XENT_BLOCK;
    for (size_t task = lo; task < hi; task++) {
        const size_t n = task / nb, k0 = (task % nb) * XENT_BLOCK, len = hw - k0 < XENT_BLOCK ? hw - k0 : XENT_BLOCK;
        const size_t off = n * numel + k0;
        xent_pixels(c, c->in[0] + off, (float *)c->saved + off, c->out + n * hw + k0, n * hw + k0, len,
                    l->classes, hw);
    }
}

/* Items [lo, hi) of backward, one at a time (the path of one item per row, inner = 1; per-pixel items go in
 * blocks, xent_backward_block): item i is sample-and-outer row i / inner, pixel i % inner; its classes are
 * inner apart. */
static void xent_backward_items(const op_call *c, const xent_layout *l, size_t lo, size_t hi) {
    const size_t classes = l->classes, inner = l->inner;
    const float *p = c->saved; // (m, outer, classes, inner)
    float *dx = c->din[0];     // (m, outer, classes, inner)
    const float scale = c->loss_scale;
    const bool fresh = c->din_fresh & 1u; /* the first writer of dx: an ignored item's gradient is zero */
    for (size_t i = lo; i < hi; i++) {
        const size_t base = (i / inner) * classes * inner + i % inner;
        if (!counted(c, i, classes)) {
            if (fresh)
                for (size_t j = 0; j < classes; j++) dx[base + j * inner] = 0.0f;
            continue;
        }
        const size_t t = (size_t)c->targets[i];
        for (size_t j = 0; j < classes; j++) {
            const float g = (p[base + j * inner] - (j == t ? 1.0f : 0.0f)) * scale;
            dx[base + j * inner] = (fresh ? 0.0f : dx[base + j * inner]) + g;
        }
    }
}

/* Whether a call over `logits` values is worth the threads (an exponential and a few passes each). Below, the
 * kernels are called directly: a small loss (a micro-batch of 64 samples has 640 logits) never enters the
 * OpenMP runtime. */
static bool xent_parallel(size_t logits) { return logits >= XENT_PAR_MIN && par_pays_floats(4 * logits); }

static void xent_forward(const op_call *c) {
    const xent_layout l = xent_layout_of(op_in_shape(c, 0));
    const size_t m = c->m, numel = op_in_numel(c, 0);
    const bool rows = l.inner == 1;
    const size_t tasks = rows ? m * l.outer : m * ((l.inner + XENT_BLOCK - 1) / XENT_BLOCK);
    if (!xent_parallel(m * numel)) {
        if (rows) xent_rows(c, l.classes, 0, tasks);
        else xent_pixel_tasks(c, &l, numel, 0, tasks);
        return;
    }
    /* contiguous static shares, as schedule(static): every item is computed alone, so any split gives the
     * same bits */
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        const size_t lo = tasks * t / T, hi = tasks * (t + 1) / T;
        if (rows) xent_rows(c, l.classes, lo, hi);
        else xent_pixel_tasks(c, &l, numel, lo, hi);
    }
}

/* One block of len <= XENT_BLOCK pixels of the per-pixel backward, as xent_backward_items computes each item
 * (the same expressions, so the same bits) but class by class over contiguous pixels: the loop vectorises
 * where the item by item one divided by inner for every pixel (unet full: 0.22% -> 0.03% of the samples). p and
 * dx point at the block's first pixel of class 0, classes `stride` apart; item is its first item index. */
VM_KERNEL static void xent_backward_block(const op_call *c, const float *p, float *dx, size_t item, size_t len,
                                          size_t classes, size_t stride, bool fresh) {
    const float scale = c->loss_scale;
    for (size_t j = 0; j < classes; j++) {
        const float *pj = p + j * stride;
        float *dj = dx + j * stride;
        #pragma omp simd
        for (size_t k = 0; k < len; k++) {
            const bool count = counted(c, item + k, classes);
            const size_t t = count ? (size_t)c->targets[item + k] : 0;
            const float g = (pj[k] - (t == j ? 1.0f : 0.0f)) * scale, keep = fresh ? 0.0f : dj[k];
            dj[k] = count ? keep + g : keep;
        }
    }
}

/* Tasks [lo, hi) of the per-pixel backward: task = (row of the sample's outer dimension, block of XENT_BLOCK
 * pixels). */
static void xent_backward_pixel_tasks(const op_call *c, const xent_layout *l, size_t lo, size_t hi) {
    const size_t inner = l->inner, nb = (inner + XENT_BLOCK - 1) / XENT_BLOCK;
    const bool fresh = c->din_fresh & 1u;
    for (size_t task = lo; task < hi; task++) {
        const size_t r = task / nb, k0 = (task % nb) * XENT_BLOCK;
        const size_t len = inner - k0 < XENT_BLOCK ? inner - k0 : XENT_BLOCK, off = r * l->classes * inner + k0;
        xent_backward_block(c, (const float *)c->saved + off, c->din[0] + off, r * inner + k0, len, l->classes,
                            inner, fresh);
    }
}

static void xent_backward(const op_call *c) {
    const xent_layout l = xent_layout_of(op_in_shape(c, 0));
    const size_t m = c->m, items = m * l.outer * l.inner;
    if (!c->din[0]) return;
    const bool pixels = l.inner > 1;
    const size_t tasks = pixels ? m * l.outer * ((l.inner + XENT_BLOCK - 1) / XENT_BLOCK) : items;
    if (!xent_parallel(m * op_in_numel(c, 0))) {
        if (pixels) xent_backward_pixel_tasks(c, &l, 0, tasks);
        else xent_backward_items(c, &l, 0, items);
        return;
    }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        if (pixels) xent_backward_pixel_tasks(c, &l, tasks * t / T, tasks * (t + 1) / T);
        else xent_backward_items(c, &l, items * t / T, items * (t + 1) / T);
    }
}

static double xent_flops(const op_node *n) {
    return 5.0 * (double)n->in_numel[0];
}

static size_t xent_saved_bytes(const op_node *n) {
    size_t bytes;
    return size_mul(n->in_numel[0], sizeof(float), &bytes) ? bytes : SIZE_MAX;
}

static size_t xent_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_softmax_xent = {
    .kind = "softmax_cross_entropy",
    .flags = OP_IS_LOSS | OP_WRITES_FRESH,
    .infer = xent_infer,
    .forward = xent_forward,
    .backward = xent_backward,
    .flops = xent_flops,
    .saved_bytes = xent_saved_bytes,
    .workspace_bytes = xent_workspace_bytes,
};

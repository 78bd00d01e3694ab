/* softmax_xent (OP_IS_LOSS): softmax cross-entropy over logits (classes). Output per sample, shape (1): the item
 * loss -log p[target], 0 for an ignored item. Forward saves the probabilities (classes floats per sample) for
 * backward, which adds (p - onehot(target)) * loss_scale to the logits' gradient of every counted item.
 *
 * A target outside [0, classes) counts as ignored (SNUG_IGNORE_TARGET): the data layer validates labels, this
 * only keeps a bad one from reading out of bounds. NULL targets (prediction only) ignore every item. */
#include <math.h>
#include <stdio.h>

#include "core/checked.h"
#include "ops/op.h"

/* Below this many logits a parallel loop costs more than it saves. */
#define XENT_PAR_MIN ((size_t)1 << 15)

static bool xent_infer(const graph_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                       int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    char s[96];
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input (the logits), got %d", n_in);
        return false;
    }
    if (in[0].rank != 1 || in[0].dims[0] == 0) {
        snprintf(msg, msg_len, "expects flat logits (classes), got %s: add a flatten or a linear layer before it",
                 snug_shape_format(&in[0], s, sizeof s));
        return false;
    }
    if (in[0].dims[0] > INT32_MAX) { /* targets are int32 class indices */
        snprintf(msg, msg_len, "logits %s have more than %d classes", snug_shape_format(&in[0], s, sizeof s),
                 INT32_MAX);
        return false;
    }
    *out = (snug_shape){.rank = 1, .dims = {1}};
    *n_params = 0;
    return true;
}

static bool counted(const op_call *c, size_t i, size_t classes) {
    return c->targets && c->targets[i] >= 0 && (size_t)c->targets[i] < classes;
}

/* Numerically stable: p = exp(x - max) / sum, -log p[t] = log(sum) - (x[t] - max). */
static float xent_sample(float *p,        // (classes) probabilities out
                         const float *x,  // (classes) logits
                         size_t classes, int32_t t, bool count) {
    float mx = x[0];
    for (size_t j = 1; j < classes; j++) mx = x[j] > mx ? x[j] : mx;
    double sum = 0.0;
    for (size_t j = 0; j < classes; j++) {
        p[j] = expf(x[j] - mx);
        sum += p[j];
    }
    const float inv = (float)(1.0 / sum);
    for (size_t j = 0; j < classes; j++) p[j] *= inv;
    return count ? (float)(log(sum) - (double)(x[t] - mx)) : 0.0f;
}

static void xent_forward(const op_call *c) {
    const size_t m = c->m, classes = op_in_numel(c, 0);
    const float *x = c->in[0]; // (m, classes)
    float *loss = c->out;      // (m)
    float *p = c->saved;       // (m, classes)
    #pragma omp parallel for schedule(static) if (m * classes >= XENT_PAR_MIN)
    for (size_t i = 0; i < m; i++) {
        bool count = counted(c, i, classes);
        loss[i] = xent_sample(p + i * classes, x + i * classes, classes, count ? c->targets[i] : 0, count);
    }
}

static void xent_backward(const op_call *c) {
    const size_t m = c->m, classes = op_in_numel(c, 0);
    const float *p = c->saved; // (m, classes)
    float *dx = c->din[0];     // (m, classes)
    const float scale = c->loss_scale;
    if (!dx) return;
    #pragma omp parallel for schedule(static) if (m * classes >= XENT_PAR_MIN)
    for (size_t i = 0; i < m; i++) {
        if (!counted(c, i, classes)) continue;
        const float *pi = p + i * classes;
        float *di = dx + i * classes;
        const size_t t = (size_t)c->targets[i];
        for (size_t j = 0; j < classes; j++) di[j] += (pi[j] - (j == t ? 1.0f : 0.0f)) * scale;
    }
}

static double xent_flops(const snug_graph *g, const graph_node *n) {
    return 5.0 * (double)g->tensors[n->inputs[0]].numel;
}

static size_t xent_saved_bytes(const snug_graph *g, const graph_node *n) {
    size_t bytes;
    return size_mul(g->tensors[n->inputs[0]].numel, sizeof(float), &bytes) ? bytes : SIZE_MAX;
}

static size_t xent_workspace_bytes(const snug_graph *g, const graph_node *n, size_t m, int threads) {
    (void)g, (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_softmax_xent = {
    .kind = "softmax_cross_entropy",
    .flags = OP_IS_LOSS,
    .infer = xent_infer,
    .forward = xent_forward,
    .backward = xent_backward,
    .flops = xent_flops,
    .saved_bytes = xent_saved_bytes,
    .workspace_bytes = xent_workspace_bytes,
};

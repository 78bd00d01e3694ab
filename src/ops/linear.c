/* linear: y = x W^T + b over the whole micro-batch as one GEMM (the BLAS spreads it over the threads).
 * Input (in) per sample, rank 1: a CNN puts a flatten first, so shapes never get reinterpreted silently. */
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "core/checked.h"
#include "ops/op.h"

static bool linear_infer(const graph_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                         int *n_params, char *msg, size_t msg_len) {
    char s[96];
    size_t fo = n->p.linear.out_features, wn;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return false;
    }
    if (in[0].rank != 1) {
        snprintf(msg, msg_len, "expects a flat input (features), got %s: add a flatten",
                 snug_shape_format(&in[0], s, sizeof s));
        return false;
    }
    size_t fi = in[0].dims[0];
    if (fi == 0 || fo == 0) {
        snprintf(msg, msg_len, "needs in and out features >= 1, got input %s and out_features %zu",
                 snug_shape_format(&in[0], s, sizeof s), fo);
        return false;
    }
    /* The BLAS takes int dimensions. */
    if (fi > INT_MAX || fo > INT_MAX || !size_mul(fi, fo, &wn) || wn > SIZE_MAX / sizeof(float)) {
        snprintf(msg, msg_len, "weight (%zu, %zu) is too large: each dimension must stay below %d", fo,
                 fi, INT_MAX);
        return false;
    }
    *out = (snug_shape){.rank = 1, .dims = {fo}};
    params[0] = (param_decl){.suffix = "weight", .shape = {.rank = 2, .dims = {fo, fi}}, .fan_in = fi,
                             .init = INIT_KAIMING_UNIFORM};
    params[1] = (param_decl){.suffix = "bias", .shape = {.rank = 1, .dims = {fo}}, .fan_in = fi,
                             .init = INIT_BIAS_UNIFORM};
    *n_params = 2;
    return true;
}

static void linear_forward(const op_call *c) {
    const size_t m = c->m, fi = op_in_numel(c, 0), fo = op_out_numel(c);
    const float *x = c->in[0];  // (m, fi)
    const float *w = c->w[0];   // (fo, fi)
    const float *b = c->w[1];   // (fo)
    float *y = c->out;          // (m, fo)
    if (m == 0) return;
    /* Seed every row with the bias, then one beta = 1 GEMM adds x W^T. */
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < fo; j++) y[i * fo + j] = b[j];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)fo, (int)fi, 1.0f, x, (int)fi, w, (int)fi,
                1.0f, y, (int)fo);
}

static void linear_backward(const op_call *c) {
    const size_t m = c->m, fi = op_in_numel(c, 0), fo = op_out_numel(c);
    const float *x = c->in[0];  // (m, fi)
    const float *w = c->w[0];   // (fo, fi)
    const float *dy = c->dout;  // (m, fo)
    if (m == 0) return;
    if (c->din[0]) /* din (m, fi) += dy (m, fo) W (fo, fi) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)fi, (int)fo, 1.0f, dy, (int)fo, w,
                    (int)fi, 1.0f, c->din[0], (int)fi);
    if (c->dw[0]) /* dW (fo, fi) += dy^T (fo, m) x (m, fi) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)fo, (int)fi, (int)m, 1.0f, dy, (int)fo, x,
                    (int)fi, 1.0f, c->dw[0], (int)fi);
    if (c->dw[1]) { /* db += column sums of dy, rows in order: deterministic and O(m fo), next to the GEMMs */
        float *db = c->dw[1];
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < fo; j++) db[j] += dy[i * fo + j];
    }
}

static double linear_flops(const snug_graph *g, const graph_node *n) {
    double fi = (double)g->tensors[n->inputs[0]].numel, fo = (double)n->p.linear.out_features;
    return 2.0 * fi * fo;
}

static size_t linear_saved_bytes(const snug_graph *g, const graph_node *n) {
    (void)g, (void)n;
    return 0; /* backward reads the input itself (OP_KEEPS_INPUT) */
}

static size_t linear_workspace_bytes(const snug_graph *g, const graph_node *n, size_t m, int threads) {
    (void)g, (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_linear = {
    .kind = "linear",
    .flags = OP_KEEPS_INPUT,
    .infer = linear_infer,
    .forward = linear_forward,
    .backward = linear_backward,
    .flops = linear_flops,
    .saved_bytes = linear_saved_bytes,
    .workspace_bytes = linear_workspace_bytes,
};

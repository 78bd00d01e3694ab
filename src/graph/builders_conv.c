/* Builders of the model-zoo layers of the convolution family, pooling, concatenation, element-wise and embedding
 * ops (snug.h documents each). Each fills its op's parameters and appends one node through graph_add_node, which
 * checks the name, runs shape inference and records the first error; the tied linear head also looks up the
 * embedding it shares its weight with. */
#include <string.h>

#include "core/error.h"
#include "graph/graph.h"
#include "ops/op.h"

snug_tensor snug_conv2d_grouped(snug_graph *g, const char *name, snug_tensor x, size_t out_channels,
                                size_t kernel, size_t stride, size_t padding, size_t groups) {
    op_params p = {.conv2d = {.out_channels = out_channels, .kernel = kernel, .stride = stride, .padding = padding,
                              .groups = groups}};
    return graph_add_node(g, &op_conv2d, name, &x, 1, p);
}

snug_tensor snug_conv2d_no_bias(snug_graph *g, const char *name, snug_tensor x, size_t out_channels, size_t kernel,
                                size_t stride, size_t padding, size_t groups) {
    op_params p = {.conv2d = {.out_channels = out_channels, .kernel = kernel, .stride = stride, .padding = padding,
                              .groups = groups, .no_bias = true}};
    return graph_add_node(g, &op_conv2d, name, &x, 1, p);
}

snug_tensor snug_conv2d_ex(snug_graph *g, const char *name, snug_tensor x, const snug_conv2d_spec *spec) {
    if (!g || g->err.status != SNUG_OK) return -1;
    if (!spec) {
        snug_fail(&g->err, SNUG_E_ARG, "conv2d '%s': no spec: pass the layer's snug_conv2d_spec", name ? name : "?");
        return -1;
    }
    op_params p = {.conv2d = {.out_channels = spec->out_channels, .kernel = spec->kernel, .stride = spec->stride,
                              .padding = spec->padding, .groups = spec->groups ? spec->groups : 1,
                              .dilation = spec->dilation ? spec->dilation : 1, .no_bias = spec->no_bias,
                              .kernel_w = spec->kernel_w, .padding_w = spec->padding_w,
                              .stride_w = spec->stride_w ? spec->stride_w : spec->stride}};
    return graph_add_node(g, &op_conv2d, name, &x, 1, p);
}

snug_tensor snug_maxpool2d_padded(snug_graph *g, const char *name, snug_tensor x, size_t kernel, size_t stride,
                                  size_t padding) {
    op_params p = {.pool2d = {.kernel = kernel, .stride = stride, .padding = padding}};
    return graph_add_node(g, &op_maxpool2d, name, &x, 1, p);
}

snug_tensor snug_conv_transpose2d(snug_graph *g, const char *name, snug_tensor x, size_t out_channels,
                                  size_t kernel, size_t stride, size_t padding) {
    op_params p = {.conv2d = {.out_channels = out_channels, .kernel = kernel, .stride = stride, .padding = padding,
                              .groups = 1}};
    return graph_add_node(g, &op_conv_transpose2d, name, &x, 1, p);
}

snug_tensor snug_concat(snug_graph *g, const char *name, snug_tensor a, snug_tensor b) {
    snug_tensor in[2] = {a, b};
    return graph_add_node(g, &op_concat, name, in, 2, (op_params){{0}});
}

snug_tensor snug_global_avgpool(snug_graph *g, const char *name, snug_tensor x) {
    return graph_add_node(g, &op_global_avgpool, name, &x, 1, (op_params){{0}});
}

snug_tensor snug_upsample_nearest2d(snug_graph *g, const char *name, snug_tensor x, size_t scale) {
    return graph_add_node(g, &op_upsample_nearest2d, name, &x, 1, (op_params){.pool2d = {scale, scale, 0}});
}

snug_tensor snug_gelu(snug_graph *g, const char *name, snug_tensor x) {
    return graph_add_node(g, &op_gelu, name, &x, 1, (op_params){{0}});
}

snug_tensor snug_sigmoid(snug_graph *g, const char *name, snug_tensor x) {
    return graph_add_node(g, &op_sigmoid, name, &x, 1, (op_params){{0}});
}

snug_tensor snug_tanh(snug_graph *g, const char *name, snug_tensor x) {
    return graph_add_node(g, &op_tanh, name, &x, 1, (op_params){{0}});
}

snug_tensor snug_scale_shift(snug_graph *g, const char *name, snug_tensor x, float scale, float shift) {
    return graph_add_node(g, &op_scale_shift, name, &x, 1, (op_params){.scale_shift = {scale, shift}});
}

snug_tensor snug_embedding(snug_graph *g, const char *name, snug_tensor tokens, size_t vocab, size_t dim) {
    op_params p = {.embedding = {.vocab = vocab, .dim = dim}};
    return graph_add_node(g, &op_embedding, name, &tokens, 1, p);
}

snug_tensor snug_position_embedding(snug_graph *g, const char *name, snug_tensor x, size_t max_len) {
    op_params p = {.embedding = {.vocab = max_len}}; /* the table's width is x's: inferred */
    return graph_add_node(g, &op_position_embedding, name, &x, 1, p);
}

snug_tensor snug_linear_tied(snug_graph *g, const char *name, snug_tensor x, const char *embedding_layer) {
    if (g->err.status != SNUG_OK) return -1;
    const char *who = name ? name : "?";
    int e = embedding_layer ? graph_find_node(g, embedding_layer) : -1;
    if (e < 0) {
        snug_fail(&g->err, SNUG_E_ARG, "linear_tied '%s': no layer '%s' in the graph: name an embedding layer "
                  "built before this one", who, embedding_layer ? embedding_layer : "(null)");
        return -1;
    }
    const graph_node *emb = &g->nodes[e];
    if (emb->op != &op_embedding) {
        snug_fail(&g->err, SNUG_E_ARG, "linear_tied '%s': layer '%s' is a %s, not an embedding: tie the output "
                  "head to the token embedding", who, embedding_layer, emb->op->kind);
        return -1;
    }
    const int weight = emb->params[0]; /* "<layer>.weight" (vocab, dim) */
    const size_t vocab = emb->p.embedding.vocab, dim = emb->p.embedding.dim;
    if (x >= 0 && x < g->n_tensors) { /* a bad handle or rank is left to graph_add_node and shape inference */
        const snug_shape *xs = &g->tensors[x].shape;
        if ((xs->rank == 1 || xs->rank == 2) && xs->dims[xs->rank - 1] != dim) {
            char sh[96];
            snug_fail(&g->err, SNUG_E_SHAPE, "linear_tied '%s': input %s does not end in %zu, the dimension of "
                      "'%s.weight' (%zu, %zu)", who, snug_shape_format(xs, sh, sizeof sh), dim, embedding_layer,
                      vocab, dim);
            return -1;
        }
    }
    op_params p = {.embedding = emb->p.embedding};
    snug_tensor t = graph_add_node(g, &op_linear_tied, name, &x, 1, p);
    if (t < 0) return -1;
    if (!graph_share_param(g, g->tensors[t].producer, weight)) return -1;
    return t;
}

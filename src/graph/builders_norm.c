/* Builder functions of the normalisation and attention layers: each packs its arguments into the op's
 * parameter struct and appends one node; the op's shape inference checks them (graph_add_node). */
#include "graph/graph.h"
#include "ops/op.h"

snug_tensor snug_batchnorm2d(snug_graph *g, const char *name, snug_tensor x, float eps, float momentum) {
    op_params p = {.norm = {.groups = 0, .eps = eps, .momentum = momentum}};
    return graph_add_node(g, &op_batchnorm2d, name, &x, 1, p);
}

snug_tensor snug_groupnorm(snug_graph *g, const char *name, snug_tensor x, size_t groups, float eps) {
    op_params p = {.norm = {.groups = groups, .eps = eps}};
    return graph_add_node(g, &op_groupnorm, name, &x, 1, p);
}

snug_tensor snug_layernorm(snug_graph *g, const char *name, snug_tensor x, float eps) {
    op_params p = {.norm = {.eps = eps}};
    return graph_add_node(g, &op_layernorm, name, &x, 1, p);
}

snug_tensor snug_self_attention(snug_graph *g, const char *name, snug_tensor qkv, size_t heads, bool causal) {
    op_params p = {.attention = {.heads = heads, .causal = causal}};
    return graph_add_node(g, &op_attention, name, &qkv, 1, p);
}

snug_tensor snug_causal_self_attention(snug_graph *g, const char *name, snug_tensor qkv, size_t heads) {
    return snug_self_attention(g, name, qkv, heads, true);
}

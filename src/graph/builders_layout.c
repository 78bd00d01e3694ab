/* Builder functions of the layout layers (permute, slice, reshape) and of softmax and matmul between
 * activations: each packs its arguments into the op's parameter struct and appends one node; the op's shape
 * inference checks them (graph_add_node). */
#include "graph/graph.h"
#include "ops/op.h"

snug_tensor snug_permute(snug_graph *g, const char *name, snug_tensor x, const int *perm) {
    op_params p = {.permute = {.perm = {-1, -1, -1, -1}}};
    const int rank = snug_tensor_shape(g, x).rank;
    for (int i = 0; perm && i < rank && i < SNUG_MAX_DIMS; i++) p.permute.perm[i] = perm[i];
    return graph_add_node(g, &op_permute, name, &x, 1, p);
}

snug_tensor snug_slice(snug_graph *g, const char *name, snug_tensor x, int axis, size_t start, size_t len,
                       size_t step) {
    op_params p = {.slice = {.axis = axis, .start = start, .len = len, .step = step}};
    return graph_add_node(g, &op_slice, name, &x, 1, p);
}

snug_tensor snug_reshape(snug_graph *g, const char *name, snug_tensor x, snug_shape shape) {
    op_params p = {.reshape = {.shape = shape}};
    return graph_add_node(g, &op_reshape, name, &x, 1, p);
}

snug_tensor snug_softmax(snug_graph *g, const char *name, snug_tensor x, int axis) {
    op_params p = {.softmax = {.axis = axis}};
    return graph_add_node(g, &op_softmax, name, &x, 1, p);
}

snug_tensor snug_matmul(snug_graph *g, const char *name, snug_tensor a, snug_tensor b) {
    const snug_tensor in[2] = {a, b};
    return graph_add_node(g, &op_matmul, name, in, 2, (op_params){{0}});
}

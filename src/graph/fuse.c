/* graph_fuse_added (fuse.h): the normalisation + ReLU and ReLU + max-pool folds, kept consistent as nodes are
 * appended. */
#include "graph/fuse.h"

#include "ops/op.h"

/* Whether any node before `skip` reads tensor t. */
static bool read_before(const snug_graph *g, snug_tensor t, int skip) {
    for (int i = 0; i < skip; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == t) return true;
    return false;
}

/* The layers that take the ReLU after them in, and their folded ops. */
static const struct {
    const op_desc *plain, *folded;
} folds[] = {{&op_batchnorm2d, &op_batchnorm2d_relu}, {&op_groupnorm, &op_groupnorm_relu}, {&op_add, &op_add_relu}};
#define N_FOLDS (sizeof folds / sizeof folds[0])

/* Restores a folded layer (node n) and its ReLU to the two plain ops. */
static void unfold(snug_graph *g, int n, size_t f) {
    const snug_tensor t = g->nodes[n].output;
    g->nodes[n].op = folds[f].plain;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == &op_relu_folded && g->nodes[i].inputs[0] == t) g->nodes[i].op = &op_relu;
}

/* Restores a ReLU folded into the max-pool after it (node r) and that pool to the two plain ops. */
static void unfold_pool(snug_graph *g, int r) {
    const snug_tensor t = g->nodes[r].output;
    g->nodes[r].op = &op_relu;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == &op_maxpool2d_relu && g->nodes[i].inputs[0] == t) g->nodes[i].op = &op_maxpool2d;
}

/* A max-pool (node `node`) reading a plain ReLU's output that nothing else reads takes the ReLU in: the pool
 * rectifies as it loads, and the ReLU becomes a view of its input. */
static void fold_pool(snug_graph *g, int node) {
    graph_node *n = &g->nodes[node];
    const snug_tensor t = n->inputs[0];
    graph_node *relu = &g->nodes[g->tensors[t].producer];
    if (relu->op != &op_relu || read_before(g, t, node) || !maxpool2d_takes_relu(g, n)) return;
    relu->op = &op_relu_pooled;
    n->op = &op_maxpool2d_relu;
}

void graph_fuse_added(snug_graph *g, int node) {
    graph_node *n = &g->nodes[node];
    for (int k = 0; k < n->n_inputs; k++) { /* a new reader of the values before a folded ReLU */
        const int producer = g->tensors[n->inputs[k]].producer;
        for (size_t f = 0; f < N_FOLDS; f++)
            if (g->nodes[producer].op == folds[f].folded) unfold(g, producer, f);
        if (g->nodes[producer].op == &op_relu_pooled) unfold_pool(g, producer);
    }
    if (n->op == &op_maxpool2d) fold_pool(g, node);
    if (n->op != &op_relu) return;
    const snug_tensor t = n->inputs[0];
    graph_node *norm = &g->nodes[g->tensors[t].producer];
    for (size_t f = 0; f < N_FOLDS; f++) {
        if (norm->op != folds[f].plain || read_before(g, t, node)) continue;
        norm->op = folds[f].folded;
        n->op = &op_relu_folded;
        return;
    }
}

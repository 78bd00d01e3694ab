/* graph_fuse_added (fuse.h): the BatchNorm + ReLU fold, kept consistent as nodes are appended. */
#include "graph/fuse.h"

#include "ops/op.h"

/* Whether any node before `skip` reads tensor t. */
static bool read_before(const snug_graph *g, snug_tensor t, int skip) {
    for (int i = 0; i < skip; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == t) return true;
    return false;
}

/* Restores a folded BatchNorm (node bn) and its ReLU to the two plain ops. */
static void unfold(snug_graph *g, int bn) {
    const snug_tensor t = g->nodes[bn].output;
    g->nodes[bn].op = &op_batchnorm2d;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == &op_relu_folded && g->nodes[i].inputs[0] == t) g->nodes[i].op = &op_relu;
}

void graph_fuse_added(snug_graph *g, int node) {
    graph_node *n = &g->nodes[node];
    for (int k = 0; k < n->n_inputs; k++) { /* a new reader of the values before a folded ReLU */
        const int producer = g->tensors[n->inputs[k]].producer;
        if (g->nodes[producer].op == &op_batchnorm2d_relu) unfold(g, producer);
    }
    if (n->op != &op_relu) return;
    const snug_tensor t = n->inputs[0];
    graph_node *bn = &g->nodes[g->tensors[t].producer];
    if (bn->op != &op_batchnorm2d || read_before(g, t, node)) return;
    bn->op = &op_batchnorm2d_relu;
    n->op = &op_relu_folded;
}

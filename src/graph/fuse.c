/* graph_fuse_added (fuse.h): the ReLU folds, kept consistent as nodes are appended, decided from each op's
 * fold properties (op_desc.fold) alone. */
#include "graph/fuse.h"

#include "ops/op.h"

/* Whether any node before `node`, the last one, reads tensor t: readers counted as the graph grows, less the
 * new node's own reads. */
static bool read_before(const snug_graph *g, snug_tensor t, int node) {
    int own = 0;
    for (int k = 0; k < g->nodes[node].n_inputs; k++) own += g->nodes[node].inputs[k] == t;
    return g->tensors[t].readers > own;
}

/* Restores node `folded`, whose output hides its layer's values, and its partner (the fold's other node, the
 * only reader of that output) to their plain ops: the nodes whose first input is that output. */
static void unfold(snug_graph *g, int folded) {
    const snug_tensor t = g->nodes[folded].output;
    g->nodes[folded].op = g->nodes[folded].op->fold.unfolded;
    for (int i = g->tensors[t].last_first_reader; i >= 0; i = g->first_reader_prev[i])
        if (g->nodes[i].op->fold.unfolded) g->nodes[i].op = g->nodes[i].op->fold.unfolded;
}

/* A node that rectifies as it loads (a max-pool) reading a plain ReLU's output that nothing else reads takes
 * the ReLU in, where its geometry allows: the ReLU becomes a view of its input. */
static void fold_relu_before(snug_graph *g, int node) {
    graph_node *n = &g->nodes[node];
    const snug_tensor t = n->inputs[0];
    graph_node *relu = &g->nodes[g->tensors[t].producer];
    if (!relu->op->fold.view_before || read_before(g, t, node) || !n->op->fold.relu_before_fits(n)) return;
    relu->op = relu->op->fold.view_before;
    n->op = n->op->fold.relu_before;
}

/* A plain ReLU (node `node`) that is the only reader of an output whose op can apply it takes its place: the
 * ReLU becomes a view of that output. */
static void fold_relu_after(snug_graph *g, int node) {
    graph_node *n = &g->nodes[node];
    const snug_tensor t = n->inputs[0];
    graph_node *producer = &g->nodes[g->tensors[t].producer];
    if (!producer->op->fold.relu_after || read_before(g, t, node)) return;
    producer->op = producer->op->fold.relu_after;
    n->op = n->op->fold.view_after;
}

void graph_fuse_added(snug_graph *g, int node) {
    graph_node *n = &g->nodes[node];
    for (int k = 0; k < n->n_inputs; k++) { /* a new reader of values a fold hides */
        const int producer = g->tensors[n->inputs[k]].producer;
        if (g->nodes[producer].op->fold.hides_values) unfold(g, producer);
    }
    if (n->op->fold.relu_before) fold_relu_before(g, node);
    if (n->op->fold.view_after) fold_relu_after(g, node);
}

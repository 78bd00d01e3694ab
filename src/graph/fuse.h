/* Folding a layer into the one before it where the pair computes the same bits as one op with less memory
 * traffic: BatchNorm or GroupNorm followed by a ReLU that is its output's only reader (op_batchnorm2d_relu,
 * op_groupnorm_relu). Decided as the graph grows, by every builder alike (API, model files, the built-in
 * models): the node names, parameters and shapes stay, the ReLU node becomes a view. A later reader of the
 * normalisation's own output (the values before the ReLU) undoes the fold, so the graph always computes what
 * its layers say. */
#ifndef SNUG_GRAPH_FUSE_H
#define SNUG_GRAPH_FUSE_H

#include "graph/graph.h"

/* Called once node `node` has been appended to g. */
void graph_fuse_added(snug_graph *g, int node);

#endif

/* Folding a ReLU into the layer beside it where the pair computes the same bits as one op with less memory
 * traffic: BatchNorm, GroupNorm or add followed by a ReLU that is its output's only reader
 * (op_batchnorm2d_relu, op_groupnorm_relu, op_add_relu), and a ReLU whose output only a max-pool reads, windows tiling it exactly
 * (op_maxpool2d_relu: the full-size ReLU output is never written nor kept). Decided as the graph grows, by
 * every builder alike (API, model files, the built-in models): the node names, parameters and shapes stay, the
 * ReLU node becomes a view. A later reader of the values the fold leaves under the other name (the
 * normalisation's or add's own output; the pooled ReLU's output, which holds the values before the ReLU) undoes the
 * fold, so the graph always computes what its layers say. */
#ifndef SNUG_GRAPH_FUSE_H
#define SNUG_GRAPH_FUSE_H

#include "graph/graph.h"

/* Called once node `node` has been appended to g. */
void graph_fuse_added(snug_graph *g, int node);

#endif

/* The graph's internal form: nodes in topological order (a builder call can only use tensors that exist, so
 * build order is a valid execution order), tensors with per-sample shapes, and the parameter table. */
#ifndef SNUG_GRAPH_GRAPH_H
#define SNUG_GRAPH_GRAPH_H

#include "core/shape.h"
#include "ops/node.h"
#include "ops/op.h"
#include "snug.h"

typedef struct graph_param {
    char name[2 * SNUG_NAME_MAX];  /* "<node>.<suffix>" */
    snug_shape shape;
    size_t numel;
    size_t offset;        /* element offset in the parameter (and gradient) block, or in the state block */
    size_t fan_in;
    param_init init;
    float init_scale;     /* multiplies the initial values (1 by default; snug_init_scale) */
    bool buffer;          /* lives in the state block: no gradient, untouched by the optimizer */
    int node;
    float *values;        /* numel initial values that came with the model (an ONNX initializer), owned by the
                             graph; NULL: drawn as `init` says */
} graph_param;

typedef struct graph_tensor {
    snug_shape shape;     /* per sample: the batch dimension is implicit */
    size_t numel;         /* elements per sample */
    int producer;         /* node index */
    int readers;          /* input slots of nodes that name it (not through views) */
    int last_first_reader; /* the latest node that has it as its first input, or -1 (graph.first_reader_prev) */
} graph_tensor;

/* A node of the graph is an op node (ops/node.h): the op, its parameters and the shapes around it, with the
 * graph's wiring. */
typedef op_node graph_node;

struct snug_graph {
    char name[SNUG_NAME_MAX];
    graph_node *nodes;
    int n_nodes, cap_nodes;
    graph_tensor *tensors;
    int n_tensors, cap_tensors;
    graph_param *params;
    int n_params, cap_params;
    size_t param_numel;   /* trainable parameter elements: the parameter and gradient blocks */
    size_t state_numel;   /* non-trainable buffer elements: the state block */
    int input_node;       /* -1 until snug_input */
    int loss_node;        /* -1 until a loss */
    snug_error err;       /* the first builder error (sticky) */
    struct {              /* the index of node names (graph/names.c), open-addressed */
        int *slots;       /* node index or -1 */
        int n_slots;      /* a power of two, at least twice the nodes; 0 before the first node */
    } names;
    int *first_reader_prev; /* per node: the previous node with the same first input, or -1 (a list per tensor
                               from graph_tensor.last_first_reader, which the ReLU folds walk) */
    int cap_first_reader_prev;
    float **constants;    /* the values of constant operands (snug_binary_const), owned by the graph: no
                             parameter, so nothing trains or saves them */
    int n_constants, cap_constants;
    bool batchnorm_counters; /* saved weights carry "<bn>.num_batches_tracked" (I64): an ONNX export's module
                                has them in its state_dict, which load_state_dict(strict=True) wants */
};

/* The node called name, or -1. */
int graph_find_node(const snug_graph *g, const char *name);
/* Adds node `node` (already appended, with its name) to the name index; false when the system refuses memory. */
bool graph_index_name(snug_graph *g, int node);

/* The tensor whose memory holds t's values: views (flatten, a folded ReLU) resolve to the tensor they alias.
 * Inline: the planner asks it for every input of every node in each of its stages. */
static inline snug_tensor graph_base_tensor(const snug_graph *g, snug_tensor t) {
    while (g->nodes[g->tensors[t].producer].op->flags & OP_IS_VIEW) t = g->nodes[g->tensors[t].producer].inputs[0];
    return t;
}

/* The first node other than the loss whose output no node reads, or -1 (also when out of memory for the scan):
 * in a complete graph such a layer holds parameters and memory for nothing, and is almost always a wiring
 * mistake. */
int graph_unread_node(const snug_graph *g);

/* The shape a tensor has per sample. */
static inline const graph_tensor *graph_tensor_at(const snug_graph *g, snug_tensor t) { return &g->tensors[t]; }

/* Appends a node of `op` over inputs (shape inference, parameter declaration, name checks); returns its output
 * tensor or -1 (the error sticks in g). For the builder functions of every op family. */
snug_tensor graph_add_node(snug_graph *g, const struct op_desc *op, const char *name, const snug_tensor *in,
                           int n_in, op_params p);
/* Makes node `node` use the existing parameter `param` too (tied weights): its backward adds into the same
 * gradient. Returns false (error recorded) on a bad index. */
bool graph_share_param(snug_graph *g, int node, int param);

#endif

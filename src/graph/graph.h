/* The graph's internal form: nodes in topological order (a builder call can only use tensors that exist, so
 * build order is a valid execution order), tensors with per-sample shapes, and the parameter table. */
#ifndef SNUG_GRAPH_GRAPH_H
#define SNUG_GRAPH_GRAPH_H

#include "snug.h"

#define SNUG_NAME_MAX 64
#define NODE_MAX_INPUTS 4
#define NODE_MAX_PARAMS 4

struct op_desc;

/* Per-op parameters: small structs, one per op family, in one union. */
typedef struct linear_params { size_t out_features; } linear_params;
typedef struct conv2d_params { size_t out_channels, kernel, stride, padding, groups; } conv2d_params;
typedef struct pool2d_params { size_t kernel, stride; } pool2d_params;
typedef struct dropout_params { float p; } dropout_params;
typedef struct norm_params { size_t groups; float eps, momentum; } norm_params;
typedef struct embedding_params { size_t vocab, dim; } embedding_params;
typedef struct attention_params { size_t heads; bool causal; } attention_params;
typedef struct tied_params { int param; } tied_params; /* a layer reusing another layer's parameter */

typedef union op_params {
    linear_params linear;
    conv2d_params conv2d;
    pool2d_params pool2d;
    dropout_params dropout;
    norm_params norm;
    embedding_params embedding;
    attention_params attention;
    tied_params tied;
} op_params;

/* How a parameter starts: PyTorch's defaults, so runs compare with PyTorch. */
typedef enum param_init {
    INIT_KAIMING_UNIFORM, /* U(-b, b), b = 1/sqrt(fan_in): kaiming_uniform_(a = sqrt(5)) as nn.Linear/Conv2d */
    INIT_BIAS_UNIFORM,    /* U(-b, b), b = 1/sqrt(fan_in) */
    INIT_ZEROS,
    INIT_ONES,
} param_init;

/* What an op's shape inference declares for each parameter it owns. */
typedef struct param_decl {
    const char *suffix;   /* "weight", "bias" */
    snug_shape shape;
    size_t fan_in;
    param_init init;
    bool buffer;          /* non-trainable state (running statistics): no gradient, no optimizer */
} param_decl;

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
} graph_param;

typedef struct graph_tensor {
    snug_shape shape;     /* per sample: the batch dimension is implicit */
    size_t numel;         /* elements per sample */
    int producer;         /* node index */
} graph_tensor;

typedef struct graph_node {
    char name[SNUG_NAME_MAX];
    const struct op_desc *op;
    op_params p;
    int n_inputs;
    snug_tensor inputs[NODE_MAX_INPUTS];
    snug_tensor output;
    int n_params;
    int params[NODE_MAX_PARAMS];  /* indices into graph->params */
} graph_node;

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
};

/* The shape a tensor has per sample. */
static inline const graph_tensor *graph_tensor_at(const snug_graph *g, snug_tensor t) { return &g->tensors[t]; }

/* Appends a node of `op` over inputs (shape inference, parameter declaration, name checks); returns its output
 * tensor or -1 (the error sticks in g). For the builder functions of every op family. */
snug_tensor graph_add_node(snug_graph *g, const struct op_desc *op, const char *name, const snug_tensor *in,
                           int n_in, op_params p);
/* Makes node `node` use the existing parameter `param` too (tied weights): its backward adds into the same
 * gradient. Returns false (error recorded) on a bad index. */
bool graph_share_param(snug_graph *g, int node, int param);

/* "(32, 28, 28)" for messages. */
char *snug_shape_format(const snug_shape *s, char *buf, size_t len);

#endif

/* What an op sees of the node it runs on: its layer's name, its parameters (one small struct per op family),
 * the per-sample shapes of its inputs and output, and where the graph wires it (tensor handles, parameter
 * indices) for the planner and the executor. An op reads nothing else of the graph, so the op tables and the
 * kernels below them know no graph type; the graph keeps its nodes as op nodes (graph/graph.h). */
#ifndef SNUG_OPS_NODE_H
#define SNUG_OPS_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

#define SNUG_NAME_MAX 64
#define NODE_MAX_INPUTS 4
#define NODE_MAX_PARAMS 4

/* Per-op parameters: small structs, one per op family, in one union. */
typedef struct linear_params { size_t out_features; bool no_bias; } linear_params;
/* kernel, stride, padding: the height axis's, and the width's too unless kernel_w is set (then kernel_w, stride_w,
 * padding_w are the width axis's). dilation: PyTorch's, the kernel's taps that many pixels apart on both axes; 0
 * (builders that leave it out) reads as 1. */
typedef struct conv2d_params {
    size_t out_channels, kernel, stride, padding, groups, dilation;
    size_t kernel_w, stride_w, padding_w;
    bool no_bias;
} conv2d_params;
typedef struct pool2d_params { size_t kernel, stride, padding; } pool2d_params;
typedef struct dropout_params { float p; } dropout_params;
typedef struct scale_shift_params { float scale, shift; } scale_shift_params;
typedef struct norm_params { size_t groups; float eps, momentum; } norm_params;
typedef struct embedding_params { size_t vocab, dim; } embedding_params;
typedef struct attention_params { size_t heads; bool causal; } attention_params;
typedef struct tied_params { int param; } tied_params; /* a layer reusing another layer's parameter */
/* The layout ops (ops/permute.c, slice.c, reshape.c, softmax.c): axes count per sample, 0 the first after the
 * batch. */
typedef struct permute_params { int perm[SNUG_MAX_DIMS]; } permute_params; /* output axis i is input axis perm[i] */
typedef struct slice_params { int axis; size_t start, len, step; } slice_params; /* len entries from start */
typedef struct reshape_params { snug_shape shape; } reshape_params;
typedef struct softmax_params { int axis; } softmax_params;
/* y = a op b with numpy broadcasting (ops/binary.c). Operand k broadcasts as as[k] where viewed[k] (a shape of
 * its tensor's element count: GlobalAveragePool's (C) read as (C, 1, 1)), else as its tensor's shape. With a
 * constant, operand const_at is those values (owned by the graph, as[const_at] their shape, the same for every
 * sample) and the node has one input, the other operand. */
typedef struct binary_params {
    snug_binary_op kind;
    snug_shape as[2];
    bool viewed[2];
    const float *constant;
    int const_at;
} binary_params;

typedef union op_params {
    linear_params linear;
    conv2d_params conv2d;
    pool2d_params pool2d;
    dropout_params dropout;
    scale_shift_params scale_shift;
    norm_params norm;
    embedding_params embedding;
    attention_params attention;
    tied_params tied;
    permute_params permute;
    slice_params slice;
    reshape_params reshape;
    softmax_params softmax;
    binary_params binary;
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

typedef struct op_node {
    char name[SNUG_NAME_MAX];
    const struct op_desc *op;
    op_params p;
    int index;                                /* its place in the graph: part of the dropout mask's key */
    int n_inputs;
    snug_tensor inputs[NODE_MAX_INPUTS];      /* the graph's tensors it reads (ops read the shapes below) */
    snug_shape in_shape[NODE_MAX_INPUTS];     /* their per-sample shapes */
    size_t in_numel[NODE_MAX_INPUTS];         /* and elements per sample */
    snug_tensor output;
    snug_shape out_shape;
    size_t out_numel;
    int n_params;
    int params[NODE_MAX_PARAMS];              /* indices into the graph's parameter table */
} op_node;

#endif

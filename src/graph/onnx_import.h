/* What the ONNX loader's files share: the values of an ONNX graph as snug sees them while it builds the snug
 * graph. onnx_load.c reads the file (protoc-c's parser) and walks the nodes; onnx_consts.c holds the constant
 * tensors (initializers, Constant nodes, the folded shape computations); onnx_ops.c maps each op onto snug's
 * builders. */
#ifndef SNUG_GRAPH_ONNX_IMPORT_H
#define SNUG_GRAPH_ONNX_IMPORT_H

#include <stdint.h>

#include "graph/graph.h"
#include "onnx.pb-c.h"

#define ONNX_OPSET_MIN 13
#define ONNX_OPSET_MAX 17
#define ONNX_MAX_RANK 6
#define ONNX_MAX_FILE_BYTES ((size_t)1 << 31) /* protobuf's own limit for one message */
#define ONNX_MAX_NODES 100000
/* Shape's batch dimension, folded: the exported batch size means nothing to snug, whose batch is the plan's. */
#define ONNX_BATCH_DIM INT64_MIN

/* A constant tensor: float (weights) or int64 (shapes, indices). Owns its data. */
typedef struct onnx_const {
    int rank;
    int64_t dims[ONNX_MAX_RANK];
    size_t numel;
    float *f;        /* float data, or NULL */
    int64_t *i;      /* int64 data, or NULL */
} onnx_const;

/* A value part-way through a pattern that becomes one snug layer (onnx_ops_sequence.c): the rows [0, T) of a
 * position table, an initializer's transpose (a Linear's weight as MatMul reads it), or a step of the attention
 * pattern (Split of qkv -> heads -> q k^T -> scale -> causal mask -> Softmax -> times v -> heads merged). */
typedef enum onnx_pending_kind {
    ONNX_PEND_NONE, ONNX_PEND_ROWS, ONNX_PEND_WT, ONNX_PEND_PART, ONNX_PEND_HEADS, ONNX_PEND_HM, ONNX_PEND_KT,
    ONNX_PEND_SCORES, ONNX_PEND_PROBS, ONNX_PEND_OUT, ONNX_PEND_OUT_T
} onnx_pending_kind;

typedef struct onnx_pending {
    onnx_pending_kind kind;
    struct onnx_value *w; /* ROWS, WT: the initializer */
    snug_tensor src;      /* attention: the qkv tensor (T, 3C) the parts come from */
    int part;             /* 0 queries, 1 keys, 2 values */
    size_t heads;
    double scale;         /* what the scores were multiplied by so far */
    bool causal;
} onnx_pending;

/* An ONNX value: a constant, or a snug tensor with its ONNX per-sample shape (the batch axis dropped), which
 * can differ from the snug tensor's in unit axes (GlobalAveragePool's (C, 1, 1) is snug's (C)). */
typedef struct onnx_value {
    const char *name;     /* the ONNX name (the model's string) */
    onnx_const *c;        /* a constant, or NULL */
    snug_tensor t;        /* the snug tensor, when not a constant */
    snug_shape shape;     /* ONNX per-sample shape of t */
    bool bound;           /* a constant already a layer's parameter (a second use would tie weights) */
    onnx_pending p;       /* kind ONNX_PEND_NONE unless a pattern is under way */
} onnx_value;

typedef struct onnx_ctx {
    snug_graph *g;
    const Onnx__GraphProto *gp;
    const char *path;     /* for messages */
    int64_t opset;
    onnx_value *values;
    size_t n_values, cap_values;
    int node;             /* the node being mapped, for messages */
    bool *skip;           /* per node: fused into an earlier one (MatMul's bias Add) */
    int fallback_names;   /* a counter for generated layer names */
} onnx_ctx;

/* Fails with status s, prefixing "FILE: node 'NAME' (OP, opset N): " when a node is being mapped. */
__attribute__((format(printf, 4, 5))) snug_status onnx_fail(const onnx_ctx *cx, snug_error *err, snug_status s,
                                                             const char *fmt, ...);

/* The value called name, or NULL. */
onnx_value *onnx_find(onnx_ctx *cx, const char *name);
/* Adds a value (name must outlive the context: the model's strings); NULL when out of memory. */
onnx_value *onnx_add(onnx_ctx *cx, const char *name);

/* A constant from a TensorProto: float or int64 (int32 widened), dims checked against the data. */
snug_status onnx_const_from_tensor(const onnx_ctx *cx, const Onnx__TensorProto *t, onnx_const **out,
                                   snug_error *err);
void onnx_const_free(onnx_const *c);
/* Folds a node all of whose inputs are constants (Constant, Shape of a tensor, Gather, Unsqueeze, Squeeze,
 * Concat, Cast, Identity): SNUG_OK with *done set when it was such a node, *done false otherwise. */
snug_status onnx_fold(onnx_ctx *cx, const Onnx__NodeProto *n, bool *done, snug_error *err);

/* Maps node n onto snug's builders (every op snug trains), or refuses it with what to do. */
snug_status onnx_map_node(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);

/* Sequence models (onnx_ops_sequence.c): the patterns a transformer exports (LayerNorm, GELU, embeddings,
 * Linear on sequences, attention) and the constant folding around them. Called before the table: *taken is set
 * when the node is one of them (an input under way in a pattern, or an op these patterns begin with). */
snug_status onnx_map_sequence(onnx_ctx *cx, const Onnx__NodeProto *n, bool *taken, snug_error *err);
/* Folds a node all of whose inputs are constants, for onnx_fold: Slice, Not, integer Add/Sub/Mul/Div; a Slice
 * of rows or a Transpose of a float initializer becomes a pending value (a parameter, not a constant). */
snug_status onnx_fold_sequence(onnx_ctx *cx, const Onnx__NodeProto *n, bool *taken, snug_error *err);
/* The rows of OP_MAPS' "sequence models" block: ops that appear only inside those patterns. */
snug_status onnx_map_pattern_only(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
/* Mul, Div, Add or Sub (onnx_ops_arith.c): of a computed tensor and a constant scalar, snug's scale_shift; of
 * other constants or two computed tensors, onnx_map_binary*; pending pattern values go on to
 * onnx_map_pattern_only's refusal. */
snug_status onnx_map_arith(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
/* onnx_ops_binary.c: the broadcasting arithmetic (snug_binary) of two computed tensors a and b, and of a computed
 * tensor x and a Constant's value cv (c_first: cv op x), which broadcasts over the batch. */
snug_status onnx_map_binary(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *a, onnx_value *b, snug_error *err);
/* Whether `target` is x's snug tensor with axes of size 1 added or dropped (a vector (C) viewed as (C, 1, 1) to
 * broadcast over a plane): a Reshape that is only a new ONNX shape of the same snug tensor. */
bool onnx_unit_axes_view(onnx_ctx *cx, const onnx_value *x, const snug_shape *target);
snug_status onnx_map_binary_const(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *cv,
                                  bool c_first, snug_error *err);

/* onnx_consts.c's: a zeroed constant (NULL for a bad shape or out of memory), and a node's output set to one. */
onnx_const *onnx_const_new(int rank, const int64_t *dims, bool is_float);
snug_status onnx_set_const(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_const *c, snug_error *err);

/* Attributes: the one called name, or NULL. */
const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name);

/* ---- onnx_ops.c's helpers, shared with the op files of other model families ---- */

int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t fallback);
/* An ints attribute whose entries all equal one value in [lo, 2^20], into *v (kept when the attribute is absent). */
bool onnx_attr_uniform(const Onnx__NodeProto *n, const char *name, int64_t lo, int64_t *v);
/* The layer's name: its weight's initializer without ".weight", else the node's, else "<OpType>_<k>" (in buf). */
__attribute__((nonnull(1, 2, 4))) const char *onnx_layer_name(onnx_ctx *cx, const Onnx__NodeProto *n, const char *weight,
                                                       char *buf);
/* Input j of n as a value, or NULL when absent. */
onnx_value *onnx_input_value(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j);
/* Input j as a computed tensor of snug rank `rank` (0: any), or a refusal. */
snug_status onnx_tensor_in(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, int rank, onnx_value **v, snug_error *err);
/* Input j as a float initializer of rank `rank` (0: any), or a refusal. */
snug_status onnx_const_in(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, int rank, onnx_value **v, snug_error *err);
/* n's output is snug tensor t (a failed builder's status when t < 0) with ONNX shape onnx_shape (NULL: t's). */
snug_status onnx_set_out(onnx_ctx *cx, const Onnx__NodeProto *n, snug_tensor t, const snug_shape *onnx_shape,
                    snug_error *err);
/* Parameter k of the layer that made t starts from constant cv and takes its name (NULL cv: nothing). */
snug_status onnx_bind_param(onnx_ctx *cx, snug_tensor t, int k, onnx_value *cv, bool transpose, snug_error *err);

/* ---- image models (onnx_ops_image.c) ---- */

snug_status onnx_map_conv_transpose(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
snug_status onnx_map_concat(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
/* InstanceNormalization: of (C, H, W), snug's groupnorm with C groups; of the (G, C/G * H * W) view a Reshape
 * makes of (C, H, W) (onnx_group_view), the GroupNorm PyTorch exports, fused with the Reshape back and the Mul
 * and Add of its affine into one snug groupnorm whose weight and bias are the module's. */
snug_status onnx_map_instance_norm(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
/* Resize, nearest, by one whole factor on both axes of the plane: snug's upsample_nearest2d. */
snug_status onnx_map_resize(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
snug_status onnx_refuse_upsample(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
/* Whether Reshape n of x to per-sample `target` is the (groups, rest) view of an image that GroupNorm's export
 * feeds to InstanceNormalization, its only reader; snug keeps the image tensor and the view's ONNX shape. */
bool onnx_group_view(onnx_ctx *cx, const Onnx__NodeProto *n, const onnx_value *x, const snug_shape *target);

#endif

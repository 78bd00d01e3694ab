/* What the sequence-model pattern files share (onnx_ops_sequence.c, onnx_patterns_attention.c): the graph
 * around a node, read while a pattern is matched. */
#ifndef SNUG_GRAPH_ONNX_PATTERNS_H
#define SNUG_GRAPH_ONNX_PATTERNS_H

#include "graph/onnx_import.h"

/* Input j of n, or NULL when absent. */
onnx_value *onnx_in(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j);
/* The first node after `from` that reads `value` as op `op` (-1 if none); *readers (when not NULL) counts all
 * readers, the graph's outputs included. */
int onnx_reader(const onnx_ctx *cx, int from, const char *value, const char *op, int *readers);
/* The only reader of node at's output when it is op `op`; -1 otherwise (or when at < 0). */
int onnx_next(const onnx_ctx *cx, int at, const char *op);
/* Input j of n as a one-element constant. */
bool onnx_scalar(onnx_ctx *cx, const Onnx__NodeProto *n, size_t j, double *v);

/* Split of a (T, 3C) tensor into q, k, v: the attention pattern begins (onnx_patterns_attention.c). */
snug_status onnx_attention_split(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err);
/* A node with an input under way in a pattern: the next step, or a refusal naming what was expected. */
snug_status onnx_attention_step(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
/* Add(x, P[:T]) and MatMul(x, W^T) (onnx_ops_sequence.c). */
snug_status onnx_rows_or_weight(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *p,
                                snug_error *err);

/* Layout ops and products of activations outside the patterns (onnx_ops_layout.c): Transpose, Slice, Split and
 * Softmax (onnx_map_layout); a Split of x (onnx_map_split, also where a Split is not attention's); MatMul of
 * two computed tensors. */
snug_status onnx_map_layout(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err);
snug_status onnx_map_split(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, snug_error *err);
/* A name for a layer a node adds beside its own: "<node><suffix>", or a generated one where that is taken. */
const char *onnx_part_name(onnx_ctx *cx, const Onnx__NodeProto *n, const char *suffix, char *buf);
snug_status onnx_map_matmul_pair(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *a, onnx_value *b,
                                 snug_error *err);

#endif

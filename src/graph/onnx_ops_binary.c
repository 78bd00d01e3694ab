/* Element-wise Add, Sub, Mul and Div that broadcast (snug_binary): of two computed tensors (squeeze-excitation's
 * x * s with s (N, C, 1, 1), SiLU's x * sigmoid(x), a residual Sub or Div), and of a computed tensor and a
 * constant of more than one value (a per-channel normalisation (x - mean) / std baked into the export), or of a
 * constant scalar divided by a tensor (c / x, which scale_shift cannot express). A Reshape that only adds or
 * drops axes of size 1 (s.view(N, C, 1, 1), to broadcast a vector over a plane) is a view of the same tensor.
 *
 * A constant here is a Constant node's value, or a folded one: what PyTorch exports for a tensor made in
 * forward() and for a buffer registered with persistent=False. An initializer is a state_dict entry, a learned
 * nn.Parameter or a persistent buffer, and the file does not say which: snug refuses it as an operand rather than
 * freeze a parameter or train a buffer (onnx_ops_arith.c says so for every constant operand). */
#include <string.h>

#include "graph/onnx_import.h"
#include "snug.h"

static snug_binary_op binary_kind(const char *op_type) {
    return strcmp(op_type, "Add") == 0   ? SNUG_BINARY_ADD
           : strcmp(op_type, "Sub") == 0 ? SNUG_BINARY_SUB
           : strcmp(op_type, "Mul") == 0 ? SNUG_BINARY_MUL
                                         : SNUG_BINARY_DIV;
}

snug_status onnx_map_binary(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *a, onnx_value *b, snug_error *err) {
    char buf[SNUG_NAME_MAX];
    const snug_tensor t = snug_binary_viewed(cx->g, onnx_layer_name(cx, n, NULL, buf), binary_kind(n->op_type), a->t,
                                             &a->shape, b->t, &b->shape);
    return onnx_set_out(cx, n, t, NULL, err);
}

/* The per-sample shape of constant c beside a tensor of per-sample rank `rank` (numpy aligns the two from the
 * last axis): its axes, less the one that meets the batch, which must be 1 (one value for every sample). */
static snug_status constant_shape(onnx_ctx *cx, const onnx_value *cv, int rank, snug_shape *s, snug_error *err) {
    const onnx_const *c = cv->c;
    int skip = 0;
    if (c->rank > rank) {
        if (c->rank > rank + 1 || c->dims[0] != 1)
            return onnx_fail(cx, err, SNUG_E_ARG, "the constant '%s' has %d axes against a tensor of %d and a batch, "
                             "or varies along the batch (%lld values): snug broadcasts a constant over the batch, "
                             "one value for every sample", cv->name, c->rank, rank, (long long)c->dims[0]);
        skip = 1;
    }
    if (c->rank - skip > SNUG_MAX_DIMS)
        return onnx_fail(cx, err, SNUG_E_ARG, "the constant '%s' has %d axes per sample; snug takes at most %d",
                         cv->name, c->rank - skip, SNUG_MAX_DIMS);
    s->rank = c->rank - skip;
    for (int i = 0; i < s->rank; i++) s->dims[i] = (size_t)c->dims[i + skip];
    return SNUG_OK;
}

snug_status onnx_map_binary_const(onnx_ctx *cx, const Onnx__NodeProto *n, onnx_value *x, onnx_value *cv,
                                  bool c_first, snug_error *err) {
    snug_shape cs;
    snug_status s = constant_shape(cx, cv, x->shape.rank, &cs, err);
    if (s != SNUG_OK) return s;
    char buf[SNUG_NAME_MAX];
    const snug_tensor t = snug_binary_const(cx->g, onnx_layer_name(cx, n, NULL, buf), binary_kind(n->op_type), x->t,
                                            &x->shape, cv->c->f, &cs, c_first);
    return onnx_set_out(cx, n, t, NULL, err);
}

/* The dimensions of s other than 1, in order, into d; their count. */
static int sizes_beyond_one(const snug_shape *s, size_t *d) {
    int k = 0;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] != 1) d[k++] = s->dims[i];
    return k;
}

bool onnx_unit_axes_view(onnx_ctx *cx, const onnx_value *x, const snug_shape *target) {
    size_t a[SNUG_MAX_DIMS], b[SNUG_MAX_DIMS];
    const snug_shape held = snug_tensor_shape(cx->g, x->t);
    const int na = sizes_beyond_one(&held, a), nb = sizes_beyond_one(target, b);
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

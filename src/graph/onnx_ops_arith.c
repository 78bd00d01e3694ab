/* Element-wise arithmetic with a constant: Mul, Div, Add and Sub of a computed tensor and a Constant of one
 * element (`x * 0.5`, `x / 4`, `x + 1`, `1 - x` as PyTorch exports them) become one snug scale_shift,
 * y = scale x + shift. Division becomes a multiplication by 1 / c (within an ulp of x / c). Constants of more
 * values, c / x, and two computed tensors go on to the broadcasting arithmetic (onnx_ops_binary.c). A constant
 * that is an initializer is a state_dict entry, a learned nn.Parameter or a persistent buffer, which the file
 * does not tell apart: snug would silently freeze the one or train the other, so it is refused with how to
 * export a true constant (a tensor made in forward(), or a buffer registered with persistent=False: both are
 * Constant nodes). */
#include <string.h>

#include "graph/onnx_import.h"
#include "snug.h"

/* Whether name is one of the graph's initializers (parameters and buffers of the exported module). */
static bool is_initializer(const onnx_ctx *cx, const char *name) {
    for (size_t k = 0; k < cx->gp->n_initializer; k++)
        if (cx->gp->initializer[k]->name && strcmp(cx->gp->initializer[k]->name, name) == 0) return true;
    return false;
}

/* scale and shift of `x OP c` (c_first: `c OP x`); false for c / x, which is not affine. */
static bool affine_of(const char *op, double c, bool c_first, double *scale, double *shift) {
    *scale = 1, *shift = 0;
    if (strcmp(op, "Mul") == 0) *scale = c;
    else if (strcmp(op, "Add") == 0) *shift = c;
    else if (strcmp(op, "Sub") == 0) *scale = c_first ? -1 : 1, *shift = c_first ? c : -c;
    else if (strcmp(op, "Div") == 0 && !c_first && c != 0) *scale = 1 / c;
    else return false;
    return true;
}

snug_status onnx_map_arith(onnx_ctx *cx, const Onnx__NodeProto *n, snug_error *err) {
    onnx_value *a = onnx_input_value(cx, n, 0), *b = onnx_input_value(cx, n, 1);
    if (n->n_input != 2 || !a || !b || (a->c && b->c) || a->p.kind != ONNX_PEND_NONE || b->p.kind != ONNX_PEND_NONE)
        return onnx_map_pattern_only(cx, n, err);
    if (!a->c && !b->c) return onnx_map_binary(cx, n, a, b, err);
    const bool c_first = a->c != NULL;
    onnx_value *x = c_first ? b : a, *cv = c_first ? a : b;
    if (!cv->c->f)
        return onnx_fail(cx, err, SNUG_E_ARG, "%s of a tensor and the integer constant '%s': snug computes in "
                         "float32; export the constant as a float", n->op_type, cv->name);
    if (is_initializer(cx, cv->name))
        return onnx_fail(cx, err, SNUG_E_ARG, "%s by the initializer '%s', a state_dict entry that may be a learned "
                         "nn.Parameter or a buffer (the file does not say which), and snug trains no parameter "
                         "operand: if it is a constant, make it a tensor in forward() or register it with "
                         "register_buffer(name, t, persistent=False), which PyTorch exports as a Constant node",
                         n->op_type, cv->name);
    double scale, shift;
    if (cv->c->numel != 1 || !affine_of(n->op_type, cv->c->f[0], c_first, &scale, &shift))
        return onnx_map_binary_const(cx, n, x, cv, c_first, err);
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_scale_shift(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t, (float)scale,
                                                (float)shift), &x->shape, err);
}

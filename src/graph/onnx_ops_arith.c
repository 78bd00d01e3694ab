/* Element-wise arithmetic with a constant scalar: Mul, Div, Add and Sub of a computed tensor and a Constant of
 * one element (`x * 0.5`, `x / 4`, `x + 1`, `1 - x` as PyTorch exports them) become one snug scale_shift,
 * y = scale x + shift. Division becomes a multiplication by 1 / c (within an ulp of x / c). A scalar that is an
 * initializer may be a learned nn.Parameter, which snug would silently freeze, so it is refused; so are
 * per-channel and same-shape operands, for which snug has no layer yet. */
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
    if (n->n_input != 2 || !a || !b || (a->c != NULL) == (b->c != NULL) || a->p.kind != ONNX_PEND_NONE ||
        b->p.kind != ONNX_PEND_NONE)
        return onnx_map_pattern_only(cx, n, err);
    const bool c_first = a->c != NULL;
    onnx_value *x = c_first ? b : a, *cv = c_first ? a : b;
    if (cv->c->numel != 1 || !cv->c->f)
        return onnx_fail(cx, err, SNUG_E_ARG, "%s of a tensor and a constant of %zu values: snug maps a constant "
                         "scalar only (x * 0.5, x + 1), not yet per-channel or broadcast constants", n->op_type,
                         cv->c->numel);
    if (is_initializer(cx, cv->name))
        return onnx_fail(cx, err, SNUG_E_ARG, "%s by the initializer '%s', which may be a learned nn.Parameter "
                         "snug would not train: write the constant as a Python number in forward()", n->op_type,
                         cv->name);
    double scale, shift;
    if (!affine_of(n->op_type, cv->c->f[0], c_first, &scale, &shift))
        return onnx_fail(cx, err, SNUG_E_ARG, "%s of a constant %s a tensor is not y = a x + b: snug maps x * c, "
                         "x / c (c not 0), x + c, x - c and c - x", n->op_type, c_first ? "by" : "and");
    char buf[SNUG_NAME_MAX];
    return onnx_set_out(cx, n, snug_scale_shift(cx->g, onnx_layer_name(cx, n, NULL, buf), x->t, (float)scale,
                                                (float)shift), &x->shape, err);
}

/* Builders of the broadcasting element-wise arithmetic (snug_binary, snug_binary_viewed, snug_binary_const;
 * snug.h documents each). A constant operand's values are copied into the graph, which frees them with itself:
 * they are no parameter, so the trainer neither trains nor saves them, and the op reads them through its node. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/grow.h"
#include "graph/graph.h"
#include "ops/op.h"

static const op_desc *const binary_ops[] = {
    [SNUG_BINARY_ADD] = &op_add_broadcast,
    [SNUG_BINARY_SUB] = &op_sub,
    [SNUG_BINARY_MUL] = &op_mul,
    [SNUG_BINARY_DIV] = &op_div,
};

/* With a constant operand: the product and the quotient by a constant need no operand kept (c / x does). */
static const op_desc *constant_op(snug_binary_op op, bool c_first) {
    if (op == SNUG_BINARY_MUL) return &op_mul_by_const;
    if (op == SNUG_BINARY_DIV && !c_first) return &op_div_by_const;
    return binary_ops[op];
}

/* Records the first error only (the graph's error is sticky). */
#define BINARY_FAIL(g, s, ...) ((g)->err.status == SNUG_OK ? (void)snug_fail(&(g)->err, s, __VA_ARGS__) : (void)0)

static bool kind_ok(snug_graph *g, const char *name, snug_binary_op op) {
    if ((unsigned)op < sizeof binary_ops / sizeof binary_ops[0]) return true;
    BINARY_FAIL(g, SNUG_E_ARG, "layer '%s': %d is no snug_binary_op (SNUG_BINARY_ADD, _SUB, _MUL or _DIV)",
                name ? name : "", (int)op);
    return false;
}

/* Operand k reads as *view where view is not NULL. */
static void set_view(binary_params *p, int k, const snug_shape *view) {
    if (!view) return;
    p->as[k] = *view;
    p->viewed[k] = true;
}

snug_tensor snug_binary_viewed(snug_graph *g, const char *name, snug_binary_op op, snug_tensor a,
                               const snug_shape *a_view, snug_tensor b, const snug_shape *b_view) {
    if (!g || !kind_ok(g, name, op)) return -1;
    op_params p = {.binary = {.kind = op}};
    set_view(&p.binary, 0, a_view);
    set_view(&p.binary, 1, b_view);
    const snug_tensor in[2] = {a, b};
    return graph_add_node(g, binary_ops[op], name, in, 2, p);
}

snug_tensor snug_binary(snug_graph *g, const char *name, snug_binary_op op, snug_tensor a, snug_tensor b) {
    return snug_binary_viewed(g, name, op, a, NULL, b, NULL);
}

/* A copy of the n values of c that the graph owns, or NULL (error recorded) when one is not finite, a divisor is
 * 0 (divisor: c divides), or memory is refused. */
static float *keep_constant(snug_graph *g, const char *name, const float *c, size_t n, bool divisor) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(c[i]) || (divisor && c[i] == 0.0f)) {
            BINARY_FAIL(g, SNUG_E_ARG, "layer '%s': constant value %zu is %g: constants must be finite, and a "
                        "divisor not 0", name ? name : "", i, (double)c[i]);
            return NULL;
        }
    float *copy = malloc(n * sizeof *copy);
    if (!copy || !grow_array((void **)&g->constants, &g->cap_constants, g->n_constants + 1, sizeof *g->constants)) {
        free(copy);
        BINARY_FAIL(g, SNUG_E_OOM, "out of memory while building the graph");
        return NULL;
    }
    memcpy(copy, c, n * sizeof *copy);
    g->constants[g->n_constants++] = copy;
    return copy;
}

snug_tensor snug_binary_const(snug_graph *g, const char *name, snug_binary_op op, snug_tensor x,
                              const snug_shape *x_view, const float *c, const snug_shape *c_shape, bool c_first) {
    if (!g || !kind_ok(g, name, op)) return -1;
    if (!c || !c_shape || c_shape->rank < 0 || c_shape->rank > SNUG_MAX_DIMS) {
        BINARY_FAIL(g, SNUG_E_ARG, "layer '%s': a constant operand needs its values and a shape of at most %d axes",
                    name ? name : "", SNUG_MAX_DIMS);
        return -1;
    }
    size_t n = 1;
    for (int i = 0; i < c_shape->rank; i++) {
        if (c_shape->dims[i] == 0 || c_shape->dims[i] > ((size_t)1 << 31) / n) {
            BINARY_FAIL(g, SNUG_E_ARG, "layer '%s': constant of a zero or over-large dimension", name ? name : "");
            return -1;
        }
        n *= c_shape->dims[i];
    }
    if (g->err.status != SNUG_OK) return -1;
    const int at = c_first ? 0 : 1;
    op_params p = {.binary = {.kind = op, .const_at = at}};
    set_view(&p.binary, 1 - at, x_view);
    p.binary.as[at] = *c_shape;
    if (!(p.binary.constant = keep_constant(g, name, c, n, op == SNUG_BINARY_DIV && !c_first))) return -1;
    return graph_add_node(g, constant_op(op, c_first), name, &x, 1, p);
}

/* add, sub, mul, div with numpy broadcasting: y = a op b where the operands' per-sample shapes broadcast (aligned
 * from the last axis, each pair of sizes equal or one of them 1), one of them possibly a constant the same for
 * every sample (node.h's binary_params). What squeeze-excitation (x (C, H, W) times s (C, 1, 1)), SiLU (x times
 * sigmoid(x)), a per-channel normalisation ((x - mean) / std) and residual Sub/Div compute.
 *
 * Backward reduces each operand's gradient over the axes it was broadcast along: da += sum dy * d(a op b)/da. add
 * and sub need neither operand; mul and div read both, so they keep their inputs (OP_KEEPS_INPUT), but for a
 * product by a constant and a quotient by one, whose gradients read only the constant. Only a
 * computed operand gets a gradient; when both operands are one tensor (x * x), din[0] and din[1] are one buffer
 * and the two passes add both terms into it.
 *
 * Bits: every output element is computed alone, and each gradient element sums its terms in one fixed order
 * within its sample (samples are split among the threads, never a sample's terms), so forward, backward and a
 * recompute give the same bits for any thread count. */
#include <stdio.h>

#include "ops/op.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define BINARY_PAR_MIN ((size_t)1 << 15)

/* The broadcast as loops: per-sample axes of the output (size-1 axes dropped, axes that every operand walks
 * contiguously merged), each operand's element stride along them (0 where it broadcasts), and its elements per
 * sample (0 for the constant, the same for every sample). Every operand's stride along the last axis is 0 or 1. */
typedef struct bin_loops {
    int rank;
    size_t dims[SNUG_MAX_DIMS];
    size_t stride[2][SNUG_MAX_DIMS];
    size_t sample[2];
    size_t rows, inner;  /* rows: the product of all but the last axis; inner: the last */
} bin_loops;

/* The shape operand k broadcasts as. */
static const snug_shape *operand_shape(const op_node *n, int k, const snug_shape *in) {
    const binary_params *p = &n->p.binary;
    if (p->viewed[k] || (p->constant && k == p->const_at)) return &p->as[k];
    return &in[p->constant ? 0 : k];
}

static size_t shape_count(const snug_shape *s) {
    size_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

/* numpy's broadcast of a and b into out; false when a pair of sizes differs and neither is 1, or out would have
 * more than SNUG_MAX_DIMS axes (it never does: each has at most that many). */
static bool broadcast(const snug_shape *a, const snug_shape *b, snug_shape *out) {
    out->rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < out->rank; i++) {
        const int ia = a->rank - out->rank + i, ib = b->rank - out->rank + i;
        const size_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        out->dims[i] = da == 1 ? db : da;
    }
    return true;
}

static snug_status binary_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                                param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)params;
    const binary_params *p = &n->p.binary;
    const int want = p->constant ? 1 : 2;
    if (n_in != want) {
        snprintf(msg, msg_len, "takes %d input%s, got %d", want, want == 1 ? " beside its constant" : "s", n_in);
        return SNUG_E_ARG;
    }
    for (int k = 0; k < 2; k++) {
        const snug_shape *s = operand_shape(n, k, in);
        if (s->rank < 0 || s->rank > SNUG_MAX_DIMS) {
            snprintf(msg, msg_len, "operand %d has %d axes: at most %d per sample", k, s->rank, SNUG_MAX_DIMS);
            return SNUG_E_SHAPE;
        }
        if (p->viewed[k] && !(p->constant && k == p->const_at)) {
            const snug_shape *t = &in[p->constant ? 0 : k];
            if (shape_count(s) != shape_count(t)) {
                char a[96], b[96];
                snprintf(msg, msg_len, "operand %d %s read as %s: a view must keep the element count", k,
                         snug_shape_format(t, a, sizeof a), snug_shape_format(s, b, sizeof b));
                return SNUG_E_SHAPE;
            }
        }
    }
    if (!broadcast(operand_shape(n, 0, in), operand_shape(n, 1, in), out)) {
        char a[96], b[96];
        snprintf(msg, msg_len, "operands %s and %s do not broadcast: aligned from the last axis, each pair of sizes "
                 "must be equal or one of them 1", snug_shape_format(operand_shape(n, 0, in), a, sizeof a),
                 snug_shape_format(operand_shape(n, 1, in), b, sizeof b));
        return SNUG_E_SHAPE;
    }
    *n_params = 0;
    return SNUG_OK;
}

/* Operand k's stride along each axis of out, 0 where it has size 1 (broadcast) or lacks the axis. */
static void operand_strides(const snug_shape *s, const snug_shape *out, size_t *stride) {
    size_t step = 1;
    for (int i = out->rank - 1; i >= 0; i--) {
        const int j = s->rank - out->rank + i;
        const size_t d = j >= 0 ? s->dims[j] : 1;
        stride[i] = d == 1 ? 0 : step;
        step *= d;
    }
}

static bin_loops loops_of(const op_node *n) {
    bin_loops l = {0};
    size_t stride[2][SNUG_MAX_DIMS];
    for (int k = 0; k < 2; k++) {
        operand_strides(operand_shape(n, k, n->in_shape), &n->out_shape, stride[k]);
        const bool is_const = n->p.binary.constant && k == n->p.binary.const_at;
        l.sample[k] = is_const ? 0 : n->in_numel[n->p.binary.constant ? 0 : k];
    }
    for (int i = 0; i < n->out_shape.rank; i++) {
        const size_t d = n->out_shape.dims[i];
        if (d == 1) continue;
        const int r = l.rank - 1;
        if (r >= 0 && l.stride[0][r] == stride[0][i] * d &&
            l.stride[1][r] == stride[1][i] * d) {
            l.dims[r] *= d; /* the previous axis continues this one for both operands: one longer axis */
            l.stride[0][r] = stride[0][i], l.stride[1][r] = stride[1][i];
            continue;
        }
        l.dims[l.rank] = d;
        l.stride[0][l.rank] = stride[0][i], l.stride[1][l.rank] = stride[1][i];
        l.rank++;
    }
    if (l.rank == 0) l.dims[0] = 1, l.rank = 1; /* one element per sample */
    l.inner = l.dims[l.rank - 1];
    l.rows = 1;
    for (int i = 0; i + 1 < l.rank; i++) l.rows *= l.dims[i];
    return l;
}

/* Where row r of sample s starts in operand k. */
static size_t row_offset(const bin_loops *l, int k, size_t s, size_t r) {
    size_t off = s * l->sample[k];
    for (int i = l->rank - 2; i >= 0; i--) {
        off += (r % l->dims[i]) * l->stride[k][i];
        r /= l->dims[i];
    }
    return off;
}

/* The operands' memory: a computed one's input, or the constant. */
static const float *operand(const op_call *c, int k) {
    const binary_params *p = &c->node->p.binary;
    if (p->constant) return k == p->const_at ? p->constant : c->in[0];
    return c->in[k];
}

/* y[i] = a[i sa] op b[i sb] over one row. */
static void row_forward(snug_binary_op kind, float *y, const float *a, size_t sa, const float *b, size_t sb,
                        size_t n) {
    switch (kind) {
    case SNUG_BINARY_ADD: for (size_t i = 0; i < n; i++) y[i] = a[i * sa] + b[i * sb]; break;
    case SNUG_BINARY_SUB: for (size_t i = 0; i < n; i++) y[i] = a[i * sa] - b[i * sb]; break;
    case SNUG_BINARY_MUL: for (size_t i = 0; i < n; i++) y[i] = a[i * sa] * b[i * sb]; break;
    case SNUG_BINARY_DIV: for (size_t i = 0; i < n; i++) y[i] = a[i * sa] / b[i * sb]; break;
    }
}

static void binary_forward(const op_call *c) {
    const bin_loops l = loops_of(c->node);
    const snug_binary_op kind = c->node->p.binary.kind;
    const float *a = operand(c, 0), *b = operand(c, 1);
    const size_t items = c->m * l.rows;
    #pragma omp parallel for schedule(static) if (items * l.inner >= BINARY_PAR_MIN)
    for (size_t q = 0; q < items; q++) {
        const size_t s = q / l.rows, r = q % l.rows;
        row_forward(kind, c->out + q * l.inner, a + row_offset(&l, 0, s, r), l.stride[0][l.rank - 1],
                    b + row_offset(&l, 1, s, r), l.stride[1][l.rank - 1], l.inner);
    }
}

/* d[i sd] += the gradient of operand k of one row: dy for add's both and sub's first, -dy for sub's second,
 * dy b and dy a for mul's, dy / b and -dy a / b^2 for div's. sd = 0 sums the row into one element, in order. */
static void row_backward(snug_binary_op kind, int k, float *d, size_t sd, const float *dy, const float *a, size_t sa,
                         const float *b, size_t sb, size_t n) {
    switch (kind * 2 + k) {
    case SNUG_BINARY_ADD * 2: case SNUG_BINARY_ADD * 2 + 1: case SNUG_BINARY_SUB * 2:
        for (size_t i = 0; i < n; i++) d[i * sd] += dy[i];
        break;
    case SNUG_BINARY_SUB * 2 + 1: for (size_t i = 0; i < n; i++) d[i * sd] -= dy[i]; break;
    case SNUG_BINARY_MUL * 2: for (size_t i = 0; i < n; i++) d[i * sd] += dy[i] * b[i * sb]; break;
    case SNUG_BINARY_MUL * 2 + 1: for (size_t i = 0; i < n; i++) d[i * sd] += dy[i] * a[i * sa]; break;
    case SNUG_BINARY_DIV * 2: for (size_t i = 0; i < n; i++) d[i * sd] += dy[i] / b[i * sb]; break;
    case SNUG_BINARY_DIV * 2 + 1:
        for (size_t i = 0; i < n; i++) {
            const float bi = b[i * sb];
            d[i * sd] -= dy[i] * a[i * sa] / (bi * bi);
        }
        break;
    }
}

/* Operand k's gradient, sample by sample: a computed operand has its own rows in every sample, so the threads
 * write disjoint memory. */
static void operand_backward(const op_call *c, const bin_loops *l, int k, float *d) {
    const snug_binary_op kind = c->node->p.binary.kind;
    const float *a = operand(c, 0), *b = operand(c, 1);
    const size_t last = (size_t)l->rank - 1;
    #pragma omp parallel for schedule(static) if (c->m * l->rows * l->inner >= BINARY_PAR_MIN && c->m > 1)
    for (size_t s = 0; s < c->m; s++)
        for (size_t r = 0; r < l->rows; r++)
            row_backward(kind, k, d + row_offset(l, k, s, r), l->stride[k][last],
                         c->dout + (s * l->rows + r) * l->inner, a + row_offset(l, 0, s, r), l->stride[0][last],
                         b + row_offset(l, 1, s, r), l->stride[1][last], l->inner);
}

static void binary_backward(const op_call *c) {
    const binary_params *p = &c->node->p.binary;
    const bin_loops l = loops_of(c->node);
    for (int k = 0; k < 2; k++) {
        if (p->constant && k == p->const_at) continue;
        float *d = c->din[p->constant ? 0 : k];
        if (d) operand_backward(c, &l, k, d);
    }
}

static double binary_flops(const op_node *n) { return (double)n->out_numel; }

static size_t binary_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* mul and div read their kept inputs (OP_KEEPS_INPUT), add and sub only dout */
}

static size_t binary_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

/* Not OP_ELEMENTWISE: a broadcast output is larger than an operand, so it may not take an input's memory. */
#define BINARY_OP(var, name, flag_bits)                                                                             \
    const op_desc var = {                                                                                           \
        .kind = name, .flags = (flag_bits), .infer = binary_infer, .forward = binary_forward,                      \
        .backward = binary_backward, .flops = binary_flops, .saved_bytes = binary_saved_bytes,                     \
        .workspace_bytes = binary_workspace_bytes,                                                                  \
    }

BINARY_OP(op_add_broadcast, "add", 0);
BINARY_OP(op_sub, "sub", 0);
BINARY_OP(op_mul, "mul", OP_KEEPS_INPUT);
BINARY_OP(op_div, "div", OP_KEEPS_INPUT);
/* x * c and x / c by a constant: dx = dy c and dy / c read no x (c / x does: op_div). */
BINARY_OP(op_mul_by_const, "mul", 0);
BINARY_OP(op_div_by_const, "div", 0);

/* sigmoid and tanh: y = 1 / (1 + e^-x) and y = tanh(x), any shape. Both slopes are functions of the output
 * (y (1 - y) and 1 - y^2), so backward reads the kept output (OP_KEEPS_OUTPUT), the input can be freed after
 * forward, and running in place stays correct (each element is read before it is written). e^x comes from
 * kernels/vmath.h, so the loops vectorise; tanh is 1 - 2 / (e^2x + 1) away from 0, which saturates to +-1 where
 * e^2x overflows or underflows instead of dividing infinities. Every element is computed alone, so the bits do not
 * depend on the thread count. */
#include <math.h>
#include <stdio.h>

#include "kernels/elementwise.h"
#include "kernels/vmath.h"
#include "ops/op.h"

/* Below this many elements a parallel loop costs more than it saves. */
#define SQUASH_PAR_MIN ((size_t)1 << 14)
/* Elements per task of the parallel loops (kernels/elementwise.h). */
#define SQUASH_CHUNK ((size_t)4096)

static snug_status squash_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                                param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    *out = in[0];
    *n_params = 0;
    return SNUG_OK;
}

static inline float sigmoid_value(float x) { return 1.0f / (1.0f + vm_expf(-x)); }
/* Below |x| = 0.3 the odd series to x^11 (its next term is under 1e-8 of x); above, 1 - 2 / (e^2x + 1), whose
 * cancellation near 0 the series avoids. Both computed and one selected: no branch to stop the vector loop. */
static inline float tanh_value(float x) {
    const float s = x * x;
    const float series = x + x * s * (-3.33333333e-1f + s * (1.33333333e-1f + s * (-5.39682540e-2f +
                                      s * (2.18694885e-2f + s * -8.86323552e-3f))));
    const float large = 1.0f - 2.0f / (vm_expf(2.0f * x) + 1.0f);
    return vm_select(fabsf(x) < 0.3f, series, large);
}
static inline float sigmoid_slope(float y) { return y * (1.0f - y); }
static inline float tanh_slope(float y) { return 1.0f - y * y; }

/* The forward span, backward span (dx += dy slope(y)) and fresh backward span (dx = 0 + dy slope(y): the bits of
 * adding into zeros) of one function. */
#define SQUASH_SPANS(name)                                                                                       \
    VM_KERNEL static void name##_span(float *y, const float *x, size_t n) {                                      \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) y[i] = name##_value(x[i]);                            \
    }                                                                                                            \
    VM_KERNEL static void name##_backward_span(float *dx, const float *y, const float *dy, size_t n) {           \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) dx[i] = dx[i] + dy[i] * name##_slope(y[i]);           \
    }                                                                                                            \
    VM_KERNEL static void name##_backward_fresh_span(float *dx, const float *y, const float *dy, size_t n) {     \
        _Pragma("omp simd") for (size_t i = 0; i < n; i++) dx[i] = 0.0f + dy[i] * name##_slope(y[i]);            \
    }
SQUASH_SPANS(sigmoid)
SQUASH_SPANS(tanh)

static const ew_split squash_split = {.par_min = SQUASH_PAR_MIN, .chunk = SQUASH_CHUNK};

static void sigmoid_forward(const op_call *c) {
    ew_apply_unary(squash_split, sigmoid_span, c->out, c->in[0], c->m * op_in_numel(c, 0));
}

static void tanh_forward(const op_call *c) {
    ew_apply_unary(squash_split, tanh_span, c->out, c->in[0], c->m * op_in_numel(c, 0));
}

static void squash_backward(const op_call *c, ew_binary_fn add, ew_binary_fn fresh) {
    if (c->din[0])
        ew_apply_binary(squash_split, c->din_fresh & 1u ? fresh : add, c->din[0], c->out, c->dout,
                        c->m * op_out_numel(c));
}

static void sigmoid_backward(const op_call *c) {
    squash_backward(c, sigmoid_backward_span, sigmoid_backward_fresh_span);
}

static void tanh_backward(const op_call *c) { squash_backward(c, tanh_backward_span, tanh_backward_fresh_span); }

static double squash_flops(const op_node *n) {
    /* A nominal 4 per element (an exp, an add and a divide): element-wise work is memory-bound, and this only
     * ranks recompute costs against the GEMMs. */
    return 4.0 * (double)n->out_numel;
}

static size_t squash_saved_bytes(const op_node *n) {
    (void)n;
    return 0; /* backward reads the kept output (OP_KEEPS_OUTPUT) */
}

static size_t squash_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

#define SQUASH_DESC                                                                                              \
    .flags = OP_KEEPS_OUTPUT | OP_ELEMENTWISE | OP_WRITES_FRESH, .infer = squash_infer, .flops = squash_flops,   \
    .saved_bytes = squash_saved_bytes, .workspace_bytes = squash_workspace_bytes

const op_desc op_sigmoid = {.kind = "sigmoid", .forward = sigmoid_forward, .backward = sigmoid_backward, SQUASH_DESC};
const op_desc op_tanh = {.kind = "tanh", .forward = tanh_forward, .backward = tanh_backward, SQUASH_DESC};

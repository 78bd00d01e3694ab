/* input: the graph's input tensor (C, H, W), filled by the batcher (OP_IS_INPUT). No kernel computes it and no
 * gradient flows out of it, so forward and backward do nothing. */
#include <stdio.h>

#include "core/checked.h"
#include "ops/op.h"

/* The builder takes the declared shape as is (snug_input checks it); this validates a declared shape for any
 * other caller: either written into *out beforehand (n_in = 0) or passed as the one input shape (n_in = 1).
 * Checked: rank 1..SNUG_MAX_DIMS, no zero size, an addressable sample. */
static snug_status input_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                               int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    if (n_in > 1) {
        snprintf(msg, msg_len, "takes no inputs, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (n_in == 1) *out = in[0];
    size_t numel, bytes;
    bool ok = out->rank >= 1 && out->rank <= SNUG_MAX_DIMS && size_prod(out->dims, out->rank, &numel) &&
              numel > 0 && size_mul(numel, sizeof(float), &bytes);
    if (!ok) {
        char s[96];
        snprintf(msg, msg_len, "shape %s is invalid: every dimension must be >= 1 and the sample must "
                 "fit in memory", snug_shape_format(out, s, sizeof s));
        return SNUG_E_SHAPE;
    }
    *n_params = 0;
    return SNUG_OK;
}

static void input_forward(const op_call *c) { (void)c; /* the batcher has filled the buffer */ }

static void input_backward(const op_call *c) { (void)c; /* nothing upstream of the input */ }

static double input_flops(const op_node *n) {
    (void)n;
    return 0.0;
}

static size_t input_saved_bytes(const op_node *n) {
    (void)n;
    return 0;
}

static size_t input_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_input = {
    .kind = "input",
    .flags = OP_IS_INPUT,
    .infer = input_infer,
    .forward = input_forward,
    .backward = input_backward,
    .flops = input_flops,
    .saved_bytes = input_saved_bytes,
    .workspace_bytes = input_workspace_bytes,
};

/* flatten: any per-sample shape -> (numel). A view (OP_IS_VIEW): the executor aliases the output to the input
 * buffer and the output gradient to the input gradient, so no kernel runs and forward and backward are NULL. */
#include <stdio.h>

#include "core/checked.h"
#include "ops/op.h"

static snug_status flatten_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out, param_decl *params,
                                 int *n_params, char *msg, size_t msg_len) {
    (void)n, (void)params;
    size_t numel;
    if (n_in != 1) {
        snprintf(msg, msg_len, "takes one input, got %d", n_in);
        return SNUG_E_ARG;
    }
    if (in[0].rank < 1 || in[0].rank > SNUG_MAX_DIMS || !size_prod(in[0].dims, in[0].rank, &numel)) {
        char s[96];
        snprintf(msg, msg_len, "cannot flatten input %s", snug_shape_format(&in[0], s, sizeof s));
        return SNUG_E_SHAPE;
    }
    *out = (snug_shape){.rank = 1, .dims = {numel}};
    *n_params = 0;
    return SNUG_OK;
}

static double flatten_flops(const op_node *n) {
    (void)n;
    return 0.0;
}

static size_t flatten_saved_bytes(const op_node *n) {
    (void)n;
    return 0;
}

static size_t flatten_workspace_bytes(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

const op_desc op_flatten = {
    .kind = "flatten",
    .flags = OP_IS_VIEW,
    .infer = flatten_infer,
    .forward = NULL,  /* a view: the output is the input buffer */
    .backward = NULL, /* a view: the output gradient is the input gradient buffer */
    .flops = flatten_flops,
    .saved_bytes = flatten_saved_bytes,
    .workspace_bytes = flatten_workspace_bytes,
};

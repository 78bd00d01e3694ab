/* reshape: the same per-sample elements, in row-major order, under another shape (torch.reshape of each
 * sample, ONNX Reshape with the batch kept first). A view (OP_IS_VIEW), as flatten: the executor aliases the
 * output to the input buffer and the output gradient to the input gradient, so no kernel runs. */
#include <stdio.h>

#include "core/checked.h"
#include "ops/layout.h"
#include "ops/op.h"

static snug_status reshape_infer(const op_node *n, const snug_shape *in, int n_in, snug_shape *out,
                                 param_decl *params, int *n_params, char *msg, size_t msg_len) {
    (void)params;
    const snug_shape *to = &n->p.reshape.shape;
    size_t a = 0, b = 0;
    if (!layout_inputs(n_in, 1, msg, msg_len)) return SNUG_E_ARG;
    bool ok = to->rank >= 1 && to->rank <= SNUG_MAX_DIMS && size_prod(in[0].dims, in[0].rank, &a) &&
              size_prod(to->dims, to->rank, &b) && a == b;
    for (int i = 0; ok && i < to->rank; i++) ok = to->dims[i] > 0;
    if (!ok) {
        char s[96], t[96];
        snprintf(msg, msg_len, "cannot reshape input %s to %s: the element counts must be equal", snug_shape_format(&in[0], s, sizeof s),
                 snug_shape_format(to, t, sizeof t));
        return SNUG_E_SHAPE;
    }
    *out = *to;
    *n_params = 0;
    return SNUG_OK;
}

const op_desc op_reshape = {
    .kind = "reshape",
    .flags = OP_IS_VIEW,
    .infer = reshape_infer,
    .forward = NULL,  /* a view: the output is the input buffer */
    .backward = NULL, /* a view: the output gradient is the input gradient buffer */
    .flops = layout_view_flops,
    .workspace_bytes = layout_no_workspace,
};

/* What the layout ops (permute, slice, softmax, matmul) share: a per-sample shape seen around one axis. */
#ifndef SNUG_OPS_LAYOUT_H
#define SNUG_OPS_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ops/node.h"

/* The elements before axis (outer), along it (len) and after it (inner): index (o, j, i) of the sample lies at
 * (o len + j) inner + i. */
typedef struct layout_axis {
    size_t outer, len, inner;
} layout_axis;

static inline layout_axis layout_around(const snug_shape *s, int axis) {
    layout_axis a = {1, s->dims[axis], 1};
    for (int i = 0; i < axis; i++) a.outer *= s->dims[i];
    for (int i = axis + 1; i < s->rank; i++) a.inner *= s->dims[i];
    return a;
}

/* Whether the op got `want` inputs; the message when not. */
static inline bool layout_inputs(int n_in, int want, char *msg, size_t msg_len) {
    if (n_in == want) return true;
    snprintf(msg, msg_len, "takes %s, got %d", want == 1 ? "one input" : "two inputs", n_in);
    return false;
}

/* A copying op's forward: one per element written, as concat counts copies. */
static inline double layout_copy_flops(const op_node *n) { return (double)n->out_numel; }

/* A view's: no kernel runs. */
static inline double layout_view_flops(const op_node *n) {
    (void)n;
    return 0.0;
}

/* The layout ops need no scratch. */
static inline size_t layout_no_workspace(const op_node *n, size_t m, int threads) {
    (void)n, (void)m, (void)threads;
    return 0;
}

#endif

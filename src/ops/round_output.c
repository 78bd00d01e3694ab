/* The output rounding an op with OP_ROUNDS_OUTPUT does itself (round_output.h): the kernels of the executor's
 * pass, on the part of the output the calling thread just wrote. */
#include "ops/round_output.h"

#include "kernels/bf16.h"

void op_round_output(const op_call *c, size_t lo, size_t n) {
    if (!c->packed.round || n == 0) return;
    if (c->packed.copy) bf16_round_pack(c->out + lo, c->packed.copy + lo, n);
    else bf16_round_floats(c->out + lo, c->out + lo, n);
}

void op_round_output_whole(const op_call *c, size_t n) {
    if (!c->packed.round) return;
    if (c->packed.copy) bf16_round_pack_par(c->out, c->packed.copy, n);
    else bf16_round_floats_par(c->out, c->out, n);
}

typedef struct forward_args {
    const op_call *c;
    ew_unary_fn unary;
    ew_binary_fn binary;
    op_round_pack_fn round_pack; /* in place of unary: writes the chunk rounded and packed */
    bool rounded; /* the kernel writes the chunk rounded, and packed where there is a copy: nothing is left */
} forward_args;

static void forward_span(const void *args, size_t lo, size_t n) {
    const forward_args *a = args;
    const op_call *c = a->c;
    if (a->round_pack) a->round_pack(c->out + lo, c->packed.copy ? c->packed.copy + lo : NULL, c->in[0] + lo, n);
    else if (a->unary) a->unary(c->out + lo, c->in[0] + lo, n);
    else a->binary(c->out + lo, c->in[0] + lo, c->in[1] + lo, n);
    if (!a->rounded) op_round_output(c, lo, n);
}

/* The element-wise driver's team decisions as for ew_apply_unary and ew_apply_binary: the rounding works on
 * the chunk in cache. */
void op_forward_unary(const op_call *c, ew_split s, ew_unary_fn f, size_t len) {
    ew_apply_spans(s, len, 2 * len, forward_span, &(forward_args){.c = c, .unary = f});
}

void op_forward_binary(const op_call *c, ew_split s, ew_binary_fn f, size_t len) {
    ew_apply_spans(s, len, 4 * len, forward_span, &(forward_args){.c = c, .binary = f});
}

void op_forward_binary_rounding(const op_call *c, ew_split s, ew_binary_fn f, ew_binary_fn f_rounding, size_t len) {
    if (!c->packed.round || c->packed.copy) { /* with a copy to write, f then round_pack's one loop was faster */
        op_forward_binary(c, s, f, len);
        return;
    }
    ew_apply_spans(s, len, 4 * len, forward_span, &(forward_args){.c = c, .binary = f_rounding, .rounded = true});
}

void op_forward_unary_rounding(const op_call *c, ew_split s, ew_unary_fn f, op_round_pack_fn f_round_pack,
                               size_t len) {
    if (!c->packed.round) {
        op_forward_unary(c, s, f, len);
        return;
    }
    ew_apply_spans(s, len, 2 * len, forward_span,
                   &(forward_args){.c = c, .round_pack = f_round_pack, .rounded = true});
}

/* The output rounding of ops with OP_ROUNDS_OUTPUT (op.h): in a bf16 forward whose call says so
 * (op_call.packed.round), the op rounds each part of its output to bfloat16 once that part is final, from the
 * thread that wrote it and while it is in that thread's cache, and writes the packed copy the plan keeps
 * (packed.copy) in the same pass: the bits of the executor's pass over the whole output (bf16_round_pack), one
 * read and write of the output fewer. */
#ifndef SNUG_OPS_ROUND_OUTPUT_H
#define SNUG_OPS_ROUND_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/elementwise.h"
#include "ops/op.h"

/* out[lo, lo + n) rounded in place and packed into packed.copy where there is one, where packed.round asks for
 * it; else nothing. */
void op_round_output(const op_call *c, size_t lo, size_t n);
/* The same over out[0, n) in one pass spread over the threads (the executor's pass), for a path of an op whose
 * kernel has no part of its output in cache to round (a product of the BLAS). */
void op_round_output_whole(const op_call *c, size_t n);

/* The forward of an element-wise op: out = f(in[0]) (out = f(in[0], in[1])) over len elements through the
 * element-wise driver, each chunk rounded as it is made (op_round_output). */
void op_forward_unary(const op_call *c, ew_split s, ew_unary_fn f, size_t len);
void op_forward_binary(const op_call *c, ew_split s, ew_binary_fn f, size_t len);
/* The same where a bf16 forward rounds (packed.round) and keeps no packed copy: f_rounding computes f's values
 * rounded to bfloat16 in its own loop (the bits of f then op_round_output, one pass over the chunk fewer); f
 * and op_round_output otherwise (with a copy to write, the pass that rounds and packs together measured faster
 * than packing after a rounding loop). */
void op_forward_binary_rounding(const op_call *c, ew_split s, ew_binary_fn f, ew_binary_fn f_rounding, size_t len);

/* A unary kernel that writes y = f(x) rounded to bfloat16 and, where packed is not NULL, its bfloat16 there:
 * the bits of f then op_round_output in one loop (kernels/relu_bf16.h). */
typedef void (*op_round_pack_fn)(float *y, uint16_t *packed, const float *x, size_t n);
/* op_forward_unary, where a bf16 forward rounds (packed.round), through f_round_pack instead: the chunk is
 * written once, rounded and packed, not written by f and then read back to be rounded. */
void op_forward_unary_rounding(const op_call *c, ew_split s, ew_unary_fn f, op_round_pack_fn f_round_pack,
                               size_t len);

#endif

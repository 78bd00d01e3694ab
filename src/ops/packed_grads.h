/* Activation gradients stored in bfloat16 (op_call.grads), as an op's backward reads and writes them: a sample
 * (or a block of one) at a time through a float32 stage, so the float32 values of a packed gradient exist only
 * in a thread's stage, never for the whole micro-batch. Reading is exact (widening); writing rounds each
 * element once, after the op has added its whole contribution to it in float32 (a second writer of a fan-out
 * gradient unpacks the first's values, adds, and rounds again). Each function also serves a float32 gradient,
 * in place, so an op's loop is written once for both. [lo, hi) is the part of the sample a thread handles
 * (0 and the sample's size where one thread does all of it). */
#ifndef SNUG_OPS_PACKED_GRADS_H
#define SNUG_OPS_PACKED_GRADS_H

#include "ops/op.h"

/* Bytes of a stage of n floats, a multiple of 64; SIZE_MAX on overflow. */
size_t grad_stage_bytes_of(size_t n);

/* Whether backward computes input i's gradient (float32 or packed). */
static inline bool grad_din_wanted(const op_call *c, int i) { return c->din[i] || c->grads.din[i]; }

/* Sample n of dout (per elements a sample): its float32 values in place, or [lo, hi) unpacked into stage. */
const float *grad_dy(const op_call *c, size_t per, size_t n, float *stage, size_t lo, size_t hi);

/* Sample n of din[i] for the op to add into: in place, or the stage holding [lo, hi) of the packed values.
 * Where the op is the gradient's first writer (op_call.din_fresh) the part is zeroed if zero_fresh (an op
 * that writes it whole leaves it as it is): the bits of adding into zeros. */
float *grad_dx(const op_call *c, int i, size_t per, size_t n, float *stage, bool zero_fresh, size_t lo, size_t hi);

/* Rounds [lo, hi) of the stage into sample n of a packed din[i]; nothing for a float32 one. */
void grad_dx_store(const op_call *c, int i, size_t per, size_t n, const float *stage, size_t lo, size_t hi);

#endif

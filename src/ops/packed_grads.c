/* Activation gradients in bfloat16 through float32 stages: see ops/packed_grads.h. */
#include "ops/packed_grads.h"

#include <string.h>

#include "core/checked.h"
#include "kernels/bf16.h"

size_t grad_stage_bytes_of(size_t n) {
    size_t b;
    return size_mul(n, sizeof(float), &b) && size_align(b ? b : 1, 64, &b) ? b : SIZE_MAX;
}

const float *grad_dy(const op_call *c, size_t per, size_t n, float *stage, size_t lo, size_t hi) {
    if (!c->grads.dout) return c->dout + n * per;
    bf16_unpack(stage + lo, c->grads.dout + n * per + lo, hi - lo);
    return stage;
}

float *grad_dx(const op_call *c, int i, size_t per, size_t n, float *stage, bool zero_fresh, size_t lo, size_t hi) {
    const bool fresh = (c->din_fresh >> i) & 1u;
    float *dx = c->grads.din[i] ? stage : c->din[i] + n * per;
    if (fresh && zero_fresh) memset(dx + lo, 0, (hi - lo) * sizeof *dx);
    else if (!fresh && c->grads.din[i]) bf16_unpack(dx + lo, c->grads.din[i] + n * per + lo, hi - lo);
    return dx;
}

void grad_dx_store(const op_call *c, int i, size_t per, size_t n, const float *stage, size_t lo, size_t hi) {
    if (c->grads.din[i]) bf16_pack(c->grads.din[i] + n * per + lo, stage + lo, hi - lo);
}

/* The per-plane arithmetic BatchNorm and GroupNorm share, with or without the ReLU folded into them
 * (graph/fuse.c): the normalised value, the gradient reaching the norm (masked by y > 0 where folded, y
 * recomputed by the forward's own expression, which the build never contracts in ISO C mode, so the mask is
 * the forward's bit for bit), the forward's apply, and the two gradient sums of a plane in 16 fixed lanes (the
 * same order, so the same bits, on every instruction set). Always inlined: the callers are VM_KERNEL clones,
 * and a helper compiled on its own would run at the baseline's width. */
#ifndef SNUG_KERNELS_NORM_RELU_H
#define SNUG_KERNELS_NORM_RELU_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels/relu_math.h"

#define NORM_INLINE static inline __attribute__((always_inline))
#define NORM_LANES 16

/* One plane's constants: its mean and inverse deviation, the channel's scale a = gamma invstd and shift
 * b = beta (the forward's float product, which the mask rebuilds y from), and whether a ReLU is folded in. */
typedef struct norm_plane {
    float mean, invstd, a, b;
    bool relu;
} norm_plane;

/* A plane's constants from its statistics and its channel's gamma and beta. Forward, backward (whose ReLU mask
 * rebuilds y) and a regeneration (op_desc.regen) all take them from here, so a is the same float product. */
NORM_INLINE norm_plane norm_plane_of(float mean, float invstd, float gamma, float beta, bool relu) {
    return (norm_plane){.mean = mean, .invstd = invstd, .a = gamma * invstd, .b = beta, .relu = relu};
}

/* (x - mean) a + b. (Subtracting the mean first: with a large mean, x a + (b - mean a) would cancel.) */
NORM_INLINE float norm_value(float x, float mean, float a, float b) { return (x - mean) * a + b; }

/* The gradient reaching the norm: dy, or where a ReLU is folded in 0 + dy where y > 0, else +0 (what op_relu's
 * backward writes into a fresh buffer). */
NORM_INLINE float norm_dy(float dy, float x, norm_plane k) {
    return k.relu ? 0.0f + relu_grad(norm_value(x, k.mean, k.a, k.b), dy) : dy;
}

/* y = norm_value over hw values; relu(y) where folded, as op_relu computes it (NaN passes). */
NORM_INLINE void norm_apply_span(float *y, const float *x, size_t hw, norm_plane k) {
    if (!k.relu) {
        #pragma omp simd
        for (size_t i = 0; i < hw; i++) y[i] = norm_value(x[i], k.mean, k.a, k.b);
        return;
    }
    #pragma omp simd
    for (size_t i = 0; i < hw; i++) y[i] = relu_value(norm_value(x[i], k.mean, k.a, k.b));
}

/* l1 += dy', l2 += dy' x_hat over a plane of hw values (dy' = norm_dy, x_hat = (x - mean) invstd), element i
 * into lane i mod 16; the tail through copies, where zero dy adds zero (masked or not). */
NORM_INLINE void norm_grad_lanes(float l1[NORM_LANES], float l2[NORM_LANES], const float *dy, const float *x,
                                 size_t hw, norm_plane k) {
    size_t i = 0;
    for (; i + NORM_LANES <= hw; i += NORM_LANES)
        #pragma omp simd
        for (int l = 0; l < NORM_LANES; l++) {
            const float d = norm_dy(dy[i + l], x[i + l], k);
            l1[l] += d;
            l2[l] += d * ((x[i + l] - k.mean) * k.invstd);
        }
    if (i < hw) {
        float td[NORM_LANES] = {0}, tx[NORM_LANES] = {0};
        memcpy(td, dy + i, (hw - i) * sizeof(float));
        memcpy(tx, x + i, (hw - i) * sizeof(float));
        #pragma omp simd
        for (int l = 0; l < NORM_LANES; l++) {
            const float d = norm_dy(td[l], tx[l], k);
            l1[l] += d;
            l2[l] += d * ((tx[l] - k.mean) * k.invstd);
        }
    }
}

#endif

/* ReLU's value and gradient: the one pair of expressions every op that applies a ReLU uses (relu itself, and
 * the folds into BatchNorm, GroupNorm, add and max-pool: graph/fuse.c), so that a folded ReLU computes the bits
 * of the plain one by construction. Always inlined: they sit inside simd loops. */
#ifndef SNUG_KERNELS_RELU_MATH_H
#define SNUG_KERNELS_RELU_MATH_H

/* max(x, 0); x < 0 is false for NaN and -0, so both pass, as in PyTorch. */
static inline __attribute__((always_inline)) float relu_value(float x) { return x < 0.0f ? 0.0f : x; }

/* The gradient through a ReLU whose output is y: dy where y > 0, else +0. Its backward into a fresh buffer
 * writes 0 + relu_grad (a -0 gradient becomes +0 there, as added into zeros). */
static inline __attribute__((always_inline)) float relu_grad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

#endif

/* A bf16 forward's ReLU: y = relu(x) rounded to bfloat16 (bf16_round of relu_value, in that order: a tiny
 * negative x gives +0, not the -0 its rounding would), with its packed copy where the plan keeps one, in one
 * loop. The bits of the float32 ReLU followed by bf16_round_pack (bf16_round_floats without a copy), without
 * writing y unrounded and reading it back to round and pack it: the rounding and the packing then cost a bf16
 * ReLU only the stores of the copy. */
#ifndef SNUG_KERNELS_RELU_BF16_H
#define SNUG_KERNELS_RELU_BF16_H

#include <stddef.h>

#include "kernels/bf16.h"

/* y[i] = bf16_round(relu_value(x[i])) and, where packed is not NULL, packed[i] its bfloat16; y may be x. */
void relu_bf16_round_pack(float *y,      // (n)
                          bf16 *packed,  // (n) or NULL
                          const float *x, // (n)
                          size_t n);

#endif

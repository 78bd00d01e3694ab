/* conv3x3_bf16: the three products of a 3x3 stride-1 padding-1 convolution on bfloat16
 * operands, for bf16 mixed precision: vdpbf16ps (AVX512_BF16) multiplies two bfloat16 pairs per lane into a
 * float32 sum, twice the multiply-adds of float32's fused multiply-add per instruction.
 *
 * The padded grid of conv3x3_direct.h (planes of width w + 1 with a zero column in front of every row, a zero
 * row above and below, so that every tap is a shift of the flattened plane), with channels taken in pairs: one
 * 32-bit word per grid point holds the bfloat16 of channel 2p in its low half and of 2p + 1 in its high half
 * (zero past an odd count). A vector of 16 consecutive words is then the operand of vdpbf16ps for 16 pixels of
 * one tap; the weights, packed the same way (the pair of channels of one tap of one output plane, in one word),
 * are broadcast. Register tiles of 8 output planes x 3 vectors of 16 grid lanes, as the float32 kernel's (where
 * w is a multiple of 16, each vector 16 pixels of one row instead, the spare lanes skipped):
 *   forward         y = b + conv(x, W)
 *   input gradient  dx += conv(dy, W^T with every kernel rotated by 180 degrees) (channel pairs of dy)
 *   weight gradient dW += dy correlated with x: there the pairs run along the pixels instead (two
 *                   alignments of x, for the taps of odd and even offset), 16 channels in the lanes
 * x (or dy, or W) is rounded to bfloat16 as it is paired (activations already are bfloat16 values; a packed
 * activation is read as it lies, with no float32 stage). Each output is one float32 chain over channel pairs in
 * increasing order, then the 9 taps in order, the odd channel's product before the even one's within a pair
 * (vdpbf16ps's order): fixed by the shape, so the bits do not depend on the thread count.
 *
 * On a CPU with AMX tiles the three products run on them instead (conv3x3_amx.h), over the same paired planes,
 * wherever conv3x3_amx_takes the channels the product sums (the forward's input channels, the input gradient's
 * output channels; the weight gradient always): the weights are then paired as the tiles read them, and each
 * output is the tiles' chain (taps, then blocks of up to 16 channel pairs; for dW blocks of 16 pixel pairs),
 * whose bits differ from vdpbf16ps's but are again fixed by the shape.
 *
 * Where the CPU lacks AVX512_BF16 (or conv3x3_bf16_force_portable asks for it), a plain-C twin computes each
 * lane as vdpbf16ps is documented to (dpbf16_lane.h), over the same paired planes: slow, for tests. */
#ifndef SNUG_KERNELS_CONV3X3_BF16_H
#define SNUG_KERNELS_CONV3X3_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/conv3x3_direct.h"

/* Whether bf16 plans run 3x3 stride-1 convolutions here: on CPUs whose vdpbf16ps pays (kernel_bf16_dots_pay) or
 * that have AMX tiles, and anywhere while conv3x3_bf16_force_portable is on (tests of the portable twin). */
bool conv3x3_bf16_in_use(void);

/* Whether a bf16 plan runs the convolution of c input and co output channels here: everywhere conv3x3_bf16_in_use
 * but on a CPU whose vdpbf16ps does not pay, only where AMX tiles take both counts (conv3x3_amx_takes), each at
 * least 16. */
bool conv3x3_bf16_takes(size_t c, size_t co);

/* Tests: the portable twin even where the CPU has AVX512_BF16 (on), or the AVX512_BF16 kernel again (off, the
 * default). Set before a convolution runs, not during one. */
void conv3x3_bf16_force_portable(bool on);

/* Whether the bf16 convolutions run on AVX512_BF16 now (this file's and Winograd's weight gradient on bf16
 * pairs, conv3x3_winograd.h), not on their portable twins. */
bool conv3x3_bf16_hardware(void);

/* *n = the floats of one sample's scratch (its paired padded planes, for either call); false on overflow. */
bool conv3x3_bf16_scratch_floats(const conv3x3_shape *s, size_t *n);

/* *n = the floats (32-bit words) of the paired weights for the forward (dx false) or the input gradient. */
bool conv3x3_bf16_weights_floats(const conv3x3_shape *s, bool dx, size_t *n);

/* The words of u (conv3x3_bf16_weights) before the weights of plane `first`: the input gradient's planes taken
 * a group at a time, each group's weights a view of the whole layer's. */
size_t conv3x3_bf16_weights_offset(const conv3x3_shape *s, bool dx, size_t first);

/* u = W paired for the forward (dx false: word (o, p, tap) the pair of input channels 2p, 2p + 1 of output o)
 * or for the input gradient (dx true: word (i, p, tap) the pair of output channels 2p, 2p + 1 for input i, each
 * kernel rotated by 180 degrees), rounded to bfloat16; part t of T of the planes. Once per call, not per
 * sample: with many channels on a small plane, pairing the weights is as much work as one sample's product. */
void conv3x3_bf16_weights(const conv3x3_shape *s, float *u, // (conv3x3_bf16_weights_floats)
                          const float *w,                   // (co, c, 3, 3)
                          bool dx, size_t t, size_t T);

/* The source of a convolution's paired planes: float32 values (rounded to bfloat16 as they are paired) or
 * bfloat16 values as packed activations hold them; exactly one of the two is not NULL. */
typedef struct conv3x3_bf16_src {
    const float *f;
    const uint16_t *h;
} conv3x3_bf16_src;

/* y = b + conv(x, W) (b may be NULL), one sample. With T > 1 every thread of the enclosing parallel region calls
 * it with its t and the same arguments (it holds barriers, and ends in one); scratch is shared by them. */
void conv3x3_bf16_forward(const conv3x3_shape *s, float *y, // (co, h, w)
                          conv3x3_bf16_src x,               // (c, h, w)
                          const float *u,                   // conv3x3_bf16_weights(s, .., w, false)
                          const float *b,                   // (co) or NULL
                          float *scratch,                   // (conv3x3_bf16_scratch_floats)
                          size_t t, size_t T);
/* The same with y rounded to bfloat16 as it is stored (the bits of bf16_round_floats over conv3x3_bf16_forward's
 * y): a bf16 plan's output without a pass of its own. */
void conv3x3_bf16_forward_rounded(const conv3x3_shape *s, float *y, conv3x3_bf16_src x, const float *u,
                                  const float *b, float *scratch, size_t t, size_t T);

/* dx += the input gradient, one sample; threads as conv3x3_bf16_forward. fresh: dx holds no gradient yet (stale
 * memory) and each element is written whole, with the bits of adding into zeros (every chain starts from zero
 * either way): no pass to zero it first, no read of it. */
void conv3x3_bf16_backward_dx(const conv3x3_shape *s, float *dx, // (c, h, w)
                              const float *dy,                   // (co, h, w)
                              const float *u,                    // conv3x3_bf16_weights(s, .., w, true)
                              float *scratch,                    // (conv3x3_bf16_scratch_floats)
                              bool fresh, size_t t, size_t T);

/* The weight gradient, one sample: dW += the correlation of dy with x, pairs of pixels per vdpbf16ps (dy and x
 * rounded to bfloat16 as they are paired; x read as it lies where it is packed), each element a float32 chain
 * over the grid in bands of a fixed number of pixels, added into dW band after band: an order fixed by the
 * shape. Threads as conv3x3_bf16_forward; scratch: conv3x3_bf16_dw_scratch_floats. */
bool conv3x3_bf16_dw_scratch_floats(const conv3x3_shape *s, size_t *n);
void conv3x3_bf16_backward_dw(const conv3x3_shape *s, float *dw, // (co, c, 3, 3)
                              const float *dy,                   // (co, h, w)
                              conv3x3_bf16_src x,                // (c, h, w)
                              float *scratch, size_t t, size_t T);

#endif

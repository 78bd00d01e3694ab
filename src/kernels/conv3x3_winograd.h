/* Winograd F(2x2, 3x3) for the 3x3 stride-1 padding-1 convolutions of kernels/conv3x3_direct.h: 16 multiplies per
 * 2x2 output tile and (input, output) channel pair instead of 36, at the price of transforms that only add.
 * The input gradient takes F(4x4, 3x3) where it saves a quarter of the products or more (conv3x3_winograd_tile;
 * its transforms: conv3x3_winograd_f4.c): 36 multiplies per 4x4 tile, 2.25 per output instead of 4.
 * With d a 4x4 input tile (rows 2 ty - 1 .. 2 ty + 2, columns 2 tx - 1 .. 2 tx + 2, zero outside the plane)
 * and g a 3x3 kernel, one output tile is
 *     Y = A^T [ sum over input channels of (G g G^T) .* (B^T d B) ] A       (.* elementwise, 16 products)
 * with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
 * A^T = [1 1 1 0; 0 1 -1 -1]. Odd planes get a last tile row or column whose outputs past the edge are dropped.
 * (With F(4x4): 6x6 input tiles, 4x4 output tiles, 36 transformed values; below, read 36 for 16.)
 *
 * Where things live:
 *   U = G g G^T      the transformed weights, (16, in, out) floats: computed once per op call (not per sample
 *                    or tile) by conv3x3_winograd_weights into a buffer the caller keeps beside the scratch.
 *                    The input gradient is the same convolution over dy with W^T and every kernel rotated by
 *                    180 degrees, so it only needs its own U (in = co, out = c).
 *   scratch          per thread, one block of tiles: the block's transformed input V (16, in, nb) and the
 *                    products M of 8 output channels (16, 8, nb). nb = 16, 32 or 48 tiles (fewer for more
 *                    input channels, so that V stays within about 256 KB of L2). Never a whole transformed
 *                    tensor: the workspace stays near the direct kernel's.
 * For each block of nb tiles (a vector holds 16 / tw whole tile rows when tw <= 8 tiles across, else up to 16
 * tiles of one tile row, so that small planes fill their vectors: an 8x8 plane is exactly one vector of 16
 * tiles, 16x16 four): transform its input tiles for all input channels, then per
 * group of 8 output channels run the 16 products M[xi] = U[xi]^T V[xi] as register tiles of 8 output channels
 * x 16 nb tiles (weights broadcast, vectors along tiles, like the direct kernel's 8 planes x 48 lanes) and
 * inverse-transform those 8 channels into the output. Every sum runs in an order fixed by the shape alone
 * (input channels in order inside each product, the transforms' fixed expressions), so the bits depend neither
 * on the thread count nor on which micro-batch a sample is in.
 *
 * A call with T > 1 is thread t's part of T: blocks b with b in [nblocks t / T, nblocks (t + 1) / T), or on a
 * plane of fewer than 2T blocks every block and output channels [groups t / T, groups (t + 1) / T) in groups of
 * 8; each thread passes a scratch of its own (conv3x3_winograd_scratch_floats(s, dx, 1) floats: the caller
 * places them, side by side or in separate slots); t = 0, T = 1 does it all. AVX-512 only
 * (conv3x3_winograd_available); the sizing functions work everywhere. Accuracy, relative to the sum of the
 * terms' magnitudes against a double-precision reference: F(2x2) within about 1e-7 (the direct kernel's), F(4x4)
 * within about 3e-6. */
#ifndef SNUG_KERNELS_CONV3X3_WINOGRAD_H
#define SNUG_KERNELS_CONV3X3_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/conv3x3_direct.h"

/* Whether this CPU and build run the Winograd kernels (AVX-512F). */
bool conv3x3_winograd_available(void);

/* The tile of the forward (dx false: always 2, F(2x2, 3x3), whose rounding matches the direct kernel's) or of
 * the input gradient (4, F(4x4, 3x3), on planes of 12x12 and up where it saves a quarter of the products or
 * more; else 2). */
size_t conv3x3_winograd_tile(const conv3x3_shape *s, bool dx);

/* *n = the floats of one direction's transformed weights, nxi c co (nxi = 16 or 36); false on overflow. */
bool conv3x3_winograd_weights_floats(const conv3x3_shape *s, bool dx, size_t *n);

/* *n = the floats of the scratch of one direction for one sample shared by T threads (T per-thread blocks);
 * false on overflow. */
bool conv3x3_winograd_scratch_floats(const conv3x3_shape *s, bool dx, size_t T, size_t *n);

/* u = the transformed weights of W (co, c, 3, 3): for the forward (dx false, in = c, out = co) or for the input
 * gradient (dx true: in = co, out = c, kernels rotated by 180 degrees). Part t of T of the (in, out) pairs. */
void conv3x3_winograd_weights(const conv3x3_shape *s, float *u, // (nxi, in, out)
                              const float *w,                   // (co, c, 3, 3)
                              bool dx, size_t t, size_t T);

/* y = b + conv(x, W) (b not NULL), one sample, from u = conv3x3_winograd_weights(s, .., w, false). With T > 1
 * every thread of the enclosing parallel region calls it with its t and the same arguments (it ends in a
 * barrier). */
void conv3x3_winograd_forward(const conv3x3_shape *s, float *y, // (co, h, w)
                              const float *x,                   // (c, h, w)
                              const float *u,                   // (16, c, co)
                              const float *b,                   // (co)
                              float *scratch,                   // thread t's: scratch_floats(s, false, 1)
                              size_t t, size_t T);

/* dx += conv(dy, W^T rotated), one sample, from u = conv3x3_winograd_weights(s, .., w, true); thread t's
 * scratch sized by conv3x3_winograd_scratch_floats(s, true, 1). fresh: dx holds no gradient yet (stale memory)
 * and is written whole instead, 0 + each sum (the bits of adding into zeros, without a pass that zeroes it).
 * Threads as conv3x3_winograd_forward. */
void conv3x3_winograd_backward_dx(const conv3x3_shape *s, float *dx, // (c, h, w)
                                  const float *dy,                   // (co, h, w)
                                  const float *u,                    // (nxi, co, c)
                                  float *scratch,                    // thread t's: scratch_floats(s, true, 1)
                                  bool fresh, size_t t, size_t T);

/* The weight gradient by the same transform (conv3x3_winograd_dw.c): dW += G^T [sum over tiles of
 * (A dY A^T) .* (B^T d B)] G, the sum kept in the transformed domain as dU (nxi, co, round_up(c, 16)) floats
 * across samples and turned into dW once: F(4x4) (nxi = 36) on planes of 16 or more 4x4 tiles, else F(2x2)
 * (16). One sample per call on the calling thread, with channels in lanes
 * (x and dy transposed into the scratch), so it runs where samples go to threads, not where threads share one.
 * Where it pays: planes whose transposed x and dy, and a dU, each fit in 1 MiB (larger ones stay on the
 * direct kernel, which pads them in bands). */
bool conv3x3_winograd_dw_pays(const conv3x3_shape *s);
/* Where F(2x2)'s weight gradient on bfloat16 pairs pays (conv3x3_winograd_dw_accumulate_bf16), for bf16 plans:
 * where conv3x3_winograd_dw_pays, and on F(2x2) planes whose dU is up to 4 MiB (a UNet's bottleneck). */
bool conv3x3_winograd_dw_pays_bf16(const conv3x3_shape *s);

/* The weight gradient's tile: 4 (F(4x4), dU of 36 co round_up(c, 16) floats) on planes of 16 or more 4x4
 * tiles whose F(4x4) dU is at most 256 KiB, else 2. */
size_t conv3x3_winograd_dw_tile(const conv3x3_shape *s);

/* *n = the floats of dU; of one sample's scratch. False on overflow. */
bool conv3x3_winograd_dw_floats(const conv3x3_shape *s, size_t *n);
bool conv3x3_winograd_dw_scratch_floats(const conv3x3_shape *s, size_t *n);

/* du += one sample's transformed weight gradient. */
void conv3x3_winograd_dw_accumulate(const conv3x3_shape *s, float *du, // (nxi, co, round_up(c, 16))
                                    const float *dy,                   // (co, h, w)
                                    const float *x,                    // (c, h, w)
                                    float *scratch);                   // (conv3x3_winograd_dw_scratch_floats)

/* The same with the products on bfloat16 (a bf16 plan's, where conv3x3_bf16_in_use): each transformed value
 * of x and dy (B^T d B, A dY A^T, float32) rounded to bfloat16, the tiles in pairs through vdpbf16ps
 * (kernels/winograd_dw_bf16.h) or its portable twin (conv3x3_bf16_force_portable). Always F(2x2): rounding a
 * transformed value moves it by 2^-9 of the sum of its terms' magnitudes, which G^T . G then carries into dW;
 * F(4x4)'s transforms (coefficients up to 8 in A, 5 in B) make those sums many times dW's own terms, F(2x2)'s
 * (0 and +-1, G's halves) a few. du is (16, co, round_up(c, 16)), within conv3x3_winograd_dw_floats; the
 * scratch is conv3x3_winograd_dw_scratch_floats (F(2x2)'s blocks never outgrow F(4x4)'s). */
void conv3x3_winograd_dw_accumulate_bf16(const conv3x3_shape *s, float *du, // (nxi, co, round_up(c, 16))
                                         const float *dy,                   // (co, h, w)
                                         const float *x,                    // (c, h, w)
                                         float *scratch);                   // (conv3x3_winograd_dw_scratch_floats)

/* dw += G^T du G, pair by pair (du unchanged); _bf16: of conv3x3_winograd_dw_accumulate_bf16's du. */
void conv3x3_winograd_dw_finish(const conv3x3_shape *s, float *dw, // (co, c, 3, 3)
                                const float *du);                  // (nxi, co, round_up(c, 16))
void conv3x3_winograd_dw_finish_bf16(const conv3x3_shape *s, float *dw, const float *du);

#endif

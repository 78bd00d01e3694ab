/* A direct 3x3 stride-1 padding-1 convolution on AVX-512: no column matrix. im2col copies every input value 9
 * times (and the weight gradient lowers the input a second time, the input gradient scatters 9 copies back);
 * here each product reads the planes in place.
 *
 * The trick that makes every pixel a plain vector lane: a plane (h, w) is copied once into a padded plane of
 * width wp = w + 1 with a zero column in front of every row and a zero row above and below,
 *     P[r][0] = 0, P[r][1 + x] = in[r - 1][x] (1 <= r <= h), P[0][.] = P[h + 1][.] = 0,
 * so that, flattened, the zero column in front of row r + 1 is also the right padding of row r. On the "grid"
 * q = y wp + x (x <= w; x = w is one spare lane per row whose result is dropped) the convolution is a 1-D one:
 *     out[q] = sum over channels and taps (kh, kw) of weight * P[q + kh wp + kw],
 * so a vector of 16 consecutive q reads 16 consecutive floats for every tap, whatever w is, with no mask and no
 * branch. Stores drop the spare lanes by compressing each vector (vcompressps) into its contiguous run of
 * output pixels. The padded copy costs (h + 2)(w + 1) floats per channel: 9x less memory and traffic than the
 * column matrix; a tall plane is padded a band of at least 16 rows at a time, the band's rows plus three.
 *
 * The three products, each summing in an order fixed by the shape alone (channels, then taps, then pixels), so
 * the bits do not depend on the thread count nor on how the work is split:
 *   forward         y = b + conv(x, W)                        register tiles of 8 output planes x 48 grid lanes,
 *                                                             the weights broadcast from where they lie
 *   input gradient  dx += conv(dy, W^T, kernels rotated 180)  the same tiles over padded dy
 *   weight gradient dW += dy correlated with x                planes of more than 16x16: 16-lane partial dot
 *                                                             products over the grid, reduced per chunk;
 *                                                             smaller: dy transposed, vectors along channels
 *   bias gradient   db += the sums of dy's planes             16-lane float partials, combined in double
 * A call with T > 1 is one thread's part t of T (tiles, planes or channels i with i in [n t / T, n (t + 1) / T)),
 * with barriers between the padding and the products; t = 0, T = 1 does it all. It is faster than the lowering
 * (im2col + GEMM) it replaces from 16 to 256 channels on 8x8 to 128x128 planes (docs/performance.md). */
#ifndef SNUG_KERNELS_CONV3X3_DIRECT_H
#define SNUG_KERNELS_CONV3X3_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

/* The shape of one 3x3 stride-1 padding-1 convolution with groups 1. */
typedef struct conv3x3_shape {
    size_t c, co; /* input and output channels */
    size_t h, w;  /* the plane (input and output alike) */
} conv3x3_shape;

/* Whether this CPU and build run the direct kernels (AVX-512F). */
bool conv3x3_direct_available(void);

/* *n = the floats of one sample's scratch (the padded planes, and dy transposed for small planes); false
 * when that overflows. */
bool conv3x3_scratch_floats(const conv3x3_shape *s, size_t *n);

/* What one sample's calls use the scratch for: the forward (conv3x3_forward), the input gradient and the weight
 * gradient (conv3x3_backward with dx, with dw). */
enum { CONV3X3_FORWARD = 1u, CONV3X3_DX = 2u, CONV3X3_DW = 4u };

/* *n = the floats of one sample's scratch for the calls in `uses` (CONV3X3_* bits; conv3x3_scratch_floats is all
 * three). A plane taller than a band goes in bands of rows: each product pads the rows of one band of its
 * source at a time, so the scratch holds (c + co) bands, not (c + co) planes: 8 MiB instead of 545 MiB for
 * 16 + 32 channels of a 1408 x 2112 plane. */
bool conv3x3_scratch_floats_for(const conv3x3_shape *s, unsigned uses, size_t *n);

/* y = b + conv(x, W), one sample. With T > 1 every thread of the enclosing parallel region calls it with its
 * t and the same arguments (it holds barriers); scratch is shared by them. */
void conv3x3_forward(const conv3x3_shape *s, float *y, // (co, h, w)
                     const float *x,                   // (c, h, w)
                     const float *w,                   // (co, c, 3, 3)
                     const float *b,                   // (co)
                     float *scratch,                   // (conv3x3_scratch_floats)
                     size_t t, size_t T);
/* The same with y rounded to bfloat16 as it is stored (the bits of bf16_round_floats over conv3x3_forward's
 * y): a bf16 plan's output without a pass of its own over it, which on a layer of few input channels (a first
 * layer: 9 multiply-adds an output per channel) costs as much as the products. */
void conv3x3_forward_rounded(const conv3x3_shape *s, float *y, const float *x, const float *w, const float *b,
                             float *scratch, size_t t, size_t T);

/* Stride 2 (padding 1): the output plane is ((h + 1) / 2, (w + 1) / 2). Each input plane is split once into
 * its four phases (even or odd rows x even or odd columns, zero-padded), after which every tap (kh, kw) is a
 * plain shift of phase (kh % 2, kw % 2) on the output grid, and the stride-1 tiles above run unchanged over
 * 9 taps of 4 planes: no column matrix, and a scratch of about (h + 2)(w + 2) floats per input channel.
 * Backward likewise: dW correlates padded dy with the phase planes (9 phase offsets), and each phase of dx is
 * a sum of 4, 2, 2 or 1 shifted taps of padded dy, computed into phase planes that one pass interleaves into
 * dx. The sums run in orders fixed by the shape, as at stride 1. *n = the floats of one sample's scratch for
 * forward and backward (forward uses a prefix). */
bool conv3x3_s2_scratch_floats(const conv3x3_shape *s, size_t *n);
void conv3x3_s2_forward(const conv3x3_shape *s, float *y, // (co, (h + 1) / 2, (w + 1) / 2)
                        const float *x,                   // (c, h, w)
                        const float *w,                   // (co, c, 3, 3)
                        const float *b,                   // (co)
                        float *scratch,                   // (conv3x3_s2_scratch_floats)
                        size_t t, size_t T);

/* One sample's gradients, each ADDED and skipped where NULL: dx += conv(dy, W^T rotated), dW += the
 * correlation of dy with x, db += the plane sums of dy (16-lane float partial sums, combined in double).
 * Threads as conv3x3_forward. A tall plane goes in bands of rows here as in the forward: bands of whole chunks
 * of the grid for dW, of whole tile blocks for dx and the forward, so every sum runs over the same terms in
 * the same order as over whole planes: the bits do not depend on the banding. */
void conv3x3_backward(const conv3x3_shape *s, float *dx, // (c, h, w) or NULL
                      float *dw,                         // (co, c, 3, 3) or NULL
                      float *db,                         // (co) or NULL
                      const float *dy,                   // (co, h, w)
                      const float *x,                    // (c, h, w)
                      const float *w,                    // (co, c, 3, 3)
                      float *scratch,                    // (conv3x3_scratch_floats)
                      size_t t, size_t T);

/* Stride 2, one sample's gradients: as conv3x3_backward, dy (co, (h + 1) / 2, (w + 1) / 2). */
void conv3x3_s2_backward(const conv3x3_shape *s, float *dx, // (c, h, w) or NULL
                         float *dw,                         // (co, c, 3, 3) or NULL
                         float *db,                         // (co) or NULL
                         const float *dy,                   // (co, (h + 1) / 2, (w + 1) / 2)
                         const float *x,                    // (c, h, w)
                         const float *w,                    // (co, c, 3, 3)
                         float *scratch,                    // (conv3x3_s2_scratch_floats)
                         size_t t, size_t T);

#endif

/* im2col / col2im for one sample: the lowering that turns a 2-D convolution into one GEMM. The column matrix
 * has one row per (channel, kernel row, kernel column) and one column per output pixel, so
 * out (Co, Ho*Wo) = weight (Co, C*kh*kw) x col (C*kh*kw, Ho*Wo). A transposed convolution is the adjoint:
 * col = weight^T x, then col2im. A 1x1 unpadded kernel with stride > 1 takes a short path: the column matrix
 * is x subsampled, and col2im scatters it back.
 *
 * Also the thread scheme every lowered op (conv2d, conv_transpose2d) shares: with at least as many samples as
 * threads, one sample per thread at a time, each with its own column buffer and partial parameter gradients,
 * reduced in thread order (deterministic for a given thread count); with fewer, one thread and a threaded
 * BLAS inside each GEMM. */
#ifndef SNUG_KERNELS_IM2COL_H
#define SNUG_KERNELS_IM2COL_H

#include <stdbool.h>
#include <stddef.h>

/* The geometry of one convolution: kernel, stride and padding per axis, one dilation for both. */
typedef struct im2col_geom {
    size_t c, h, w;        /* input channels and plane */
    size_t k, stride, pad; /* the height axis's kernel size, stride >= 1, zero padding */
    size_t kw, sw, pw;     /* the width axis's; kw 0 (a geometry that leaves the axis out): the height's */
    size_t ho, wo;         /* output plane: (h + 2 pad - span) / stride + 1, span = dilation (k - 1) + 1 (wo: the
                              width axis's) */
    size_t dilation;       /* PyTorch's: kernel taps this many pixels apart; 0 (a geometry that leaves it out,
                              conv_transpose2d's) reads as 1, taps side by side */
} im2col_geom;

/* The pixels one kernel window covers along an axis: dilation (k - 1) + 1 (k without dilation). */
size_t im2col_span(size_t k, size_t dilation);

/* Along an axis of n pixels: *padded = n + 2 pad, *span (im2col_span) and the outputs (padded - span) / stride + 1
 * into *out; false where a size overflows or the span exceeds the padded axis (then *out is 0). */
bool im2col_axis(size_t n, size_t k, size_t stride, size_t pad, size_t dilation, size_t *padded, size_t *span,
                 size_t *out);

/* col = the patches of x (a dilated kernel's taps dilation apart); padding reads as zero. Parallel over channels
 * when called outside a parallel region and the matrix is large. */
void im2col(float *col,     // (c*k*kw, ho*wo)
            const float *x, // (c, h, w)
            const im2col_geom *g);

/* x += the patches in col scattered back (the adjoint of im2col): overlapping patches add up. */
void col2im_add(float *x,         // (c, h, w)
                const float *col, // (c*k*kw, ho*wo)
                const im2col_geom *g);

/* Threads a lowered op runs samples on: `threads` when m >= threads > 1, else 1. */
size_t lowering_threads(size_t m, int threads);

/* The largest scratch a sample gets to itself: a lowered op (and conv2d's direct path) whose sample needs more
 * runs every sample on all threads in turn, one slot of scratch, instead of a sample per thread with a slot
 * each. A slot this size is far beyond any cache, so a thread's own slot buys nothing, while the slots
 * multiply memory the plan could give to activations. Stride-1 3x3 planes (in bands of rows) and
 * non-overlapping up-samplings (in blocks of rows) stay below it; what can exceed it is a large image's
 * stride-2 phase planes, a lowered convolution's column matrix (CPUs without AVX-512, groups) or an overlapping
 * transposed convolution's (a 545 MiB sample's scratch would take 1.07 GiB in two slots). The workloads' largest
 * slots are 4 to 12 MiB. */
#define LOWERING_SLOT_MAX ((size_t)64 << 20)

/* lowering_threads for an op whose sample needs slot_bytes of scratch (its float32 stages included, where the op
 * has them): 1 beyond LOWERING_SLOT_MAX. */
size_t lowering_slot_threads(size_t m, int threads, size_t slot_bytes);

/* dst += the T per-thread partial buffers (the floats at byte `offset` of each `slot`-byte slot of work),
 * added in thread order for every element: deterministic for a given T. */
void lowering_reduce(float *dst,       // (len)
                     const char *work, // T slots of `slot` bytes
                     size_t slot, size_t offset, size_t len, size_t T);

#endif

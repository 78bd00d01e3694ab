/* im2col / col2im for one sample: the lowering that turns a 2-D convolution into one GEMM. The column matrix
 * has one row per (channel, kernel row, kernel column) and one column per output pixel, so
 * out (Co, Ho*Wo) = weight (Co, C*k*k) x col (C*k*k, Ho*Wo). */
#ifndef SNUG_OPS_IM2COL_H
#define SNUG_OPS_IM2COL_H

#include <stddef.h>

/* The geometry of one convolution (square kernel, same stride and padding on both axes). */
typedef struct im2col_geom {
    size_t c, h, w;        /* input channels and plane */
    size_t k, stride, pad; /* kernel size, stride >= 1, zero padding */
    size_t ho, wo;         /* output plane: (h + 2 pad - k) / stride + 1 */
} im2col_geom;

/* col = the patches of x; padding reads as zero. Parallel over channels when called outside a parallel region
 * and the matrix is large. */
void im2col(float *col,     // (c*k*k, ho*wo)
            const float *x, // (c, h, w)
            const im2col_geom *g);

/* x += the patches in col scattered back (the adjoint of im2col): overlapping patches add up. */
void col2im_add(float *x,         // (c, h, w)
                const float *col, // (c*k*k, ho*wo)
                const im2col_geom *g);

#endif

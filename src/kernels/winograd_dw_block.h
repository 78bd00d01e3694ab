/* What conv3x3_winograd_dw.c (the weight gradient's transforms and float32 products) shares with
 * conv3x3_winograd_dw_bf16.c (its products on vdpbf16ps): a block of transformed tiles and the walk over the
 * register tiles of its products. */
#ifndef SNUG_KERNELS_WINOGRAD_DW_BLOCK_H
#define SNUG_KERNELS_WINOGRAD_DW_BLOCK_H

#include <stdbool.h>
#include <stddef.h>

/* Output channels per register tile, and its vectors of 16 input channels at most (24 accumulators). */
#define WDW_MR 8
#define WDW_NV 3

/* A block of nt transformed tiles as the transforms wrote them: position xi's rows at v + xi vs (the input's
 * B^T d B, rows of cp) and y + xi ys (the output gradient's A dY A^T, rows of cq). Float32, a row per tile; or
 * in bfloat16 pairs, ceil(nt / 2) rows of 32-bit words, word j of row k holding channel j of tile 2k in its low
 * half and of tile 2k + 1 in its high half (zero past an odd nt). */
typedef struct wdw_block {
    const float *v, *y;
    size_t vs, ys, cp, cq;
    size_t co, nxi, nt;
} wdw_block;

/* du (rows cp apart) at rows [0, mr), columns [0, 16 nv) += the products of the n rows of y (cq apart, from the
 * tile's first output channel) and v (cp apart, from its first input channel). */
typedef void wdw_tile_fn(float *du, size_t cp, const float *y, size_t cq, const float *v, size_t mr, size_t nv,
                         size_t n);

/* du[xi] (co, cp) += Y[xi]^T V[xi] for every xi, register tile by register tile; n: rows of the block. */
static inline void wdw_block_products(const wdw_block *b, float *du, wdw_tile_fn *tile, size_t n) {
    for (size_t xi = 0; xi < b->nxi; xi++) {
        const float *y = b->y + xi * b->ys, *v = b->v + xi * b->vs;
        float *d = du + xi * b->co * b->cp;
        for (size_t o0 = 0; o0 < b->co; o0 += WDW_MR) {
            const size_t mr = b->co - o0 < WDW_MR ? b->co - o0 : WDW_MR;
            for (size_t j = 0; j < b->cp; j += 16 * WDW_NV) {
                const size_t nv = (b->cp - j) / 16 < WDW_NV ? (b->cp - j) / 16 : WDW_NV;
                tile(d + o0 * b->cp + j, b->cp, y + o0, b->cq, v + j, mr, nv, n);
            }
        }
    }
}

/* The block's products on its bfloat16 pairs: vdpbf16ps (hw) or its plain-C twin (dpbf16_lane.h). Each element
 * of du gets one float32 chain over the pairs in order, started from zero and added to du once, as the float32
 * products do: the same bits on either path. */
void wdw_bf16_products(const wdw_block *b, float *du, bool hw);

#endif

/* conv3x3_amx: the products of conv3x3_bf16 (conv3x3_bf16.h) on AMX tiles, where the CPU has them and Linux
 * granted their state (kernel_isa_now() at KERNEL_ISA_AMX_BF16): an implicit GEMM over the same paired padded
 * planes, with no lowering. tdpbf16ps multiplies a 16 x 16 tile of bfloat16 pairs by another into 16 x 16
 * float32 sums, 16 x 16 x 32 multiply-adds an instruction.
 *
 * Forward and input gradient: C = (output planes) x (16 grid lanes), A = the paired weights of one tap (planes
 * by channel pairs), B = 16 paired planes' rows at the tap's shift of the grid (a paired plane is a row of
 * pair words along the grid: exactly a B tile's row, one plane stride to the next pair). Each output is a
 * float32 chain over the 9 taps, and within a tap over its channel pairs in blocks of up to 16 (one
 * instruction each, its 32 products summed in the CPU's own order).
 *
 * Weight gradient: C = (16 output channels) x (16 input channels) for one tap, A = dy's grid as pixel pairs
 * (conv3x3_bf16.c's D rows), B = the tap's rows of x's transposed pairs (its E or O: 16 channels a row), a
 * chain over the band's pixel pairs in blocks of 16.
 *
 * The bits are fixed by the shape (the blocks along the channel pairs and the pixel pairs), not by the thread
 * count or the tiling; they differ from vdpbf16ps's pair-by-pair chains. */
#ifndef SNUG_KERNELS_CONV3X3_AMX_H
#define SNUG_KERNELS_CONV3X3_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the tiles take a product over `chans` channels: up to 16 pairs (one instruction a tap, its depth the
 * pairs) or a multiple of 16 pairs (whole instructions): no pair is read past the paired planes. */
bool conv3x3_amx_takes(size_t chans);

/* Words of the weights packed for the tiles: planes rounded up to 16 and 16 more, 9 taps, the pairs of chans. */
size_t conv3x3_amx_weights_words(size_t planes, size_t chans);

/* The weights for the A tiles (conv3x3_bf16_weights's flip: false for the forward, true for the input
 * gradient, each kernel rotated), rounded to bfloat16, part t of T of the planes: plane by plane (zero past the
 * last, for conv3x3_amx_weights_words's planes), each plane's 9 taps of its channel pairs. A tile of 16 planes at one tap and block
 * of pairs is then a strided load (rows 9 pairs words apart), and the weights of planes [first, ...) begin
 * first 9 pairs words on: any group of planes is a view of them. */
void conv3x3_amx_pack_weights(uint32_t *dst, const float *w, size_t planes, size_t chans, bool flip, size_t t,
                              size_t T);

/* One call's operands on the grid: the pairs np (conv3x3_amx_takes), the words between paired planes and a
 * grid row's (w + 1). */
typedef struct conv3x3_amx_grid {
    size_t np, stride, wp;
} conv3x3_amx_grid;

/* The C blocks of a call: two blocks of 16 planes by two vectors of lanes, or (wide, where the planes are at
 * most 16) one block by four vectors. */
#define CONV3X3_AMX_STAGES 4

/* Loads the tile configuration of the grid products (wide or not) on the calling thread, before its first
 * conv3x3_amx_grid_block; conv3x3_amx_end releases it after its last. */
void conv3x3_amx_begin_grid(size_t np, bool wide);
void conv3x3_amx_end(void);

/* C blocks (b, v) for b < nb plane blocks and v < nv vectors (nb * nv <= 4, nb <= 2 and nv <= 2 unless wide):
 * stage[s] (16 x 16 floats, rows = planes, s = b (wide ? 4 : 2) + v) holds the block's start where
 * from_stage (else zero) and receives the block plus the product of the weights from a (block 0's first plane;
 * block 1's 16 planes on) with the grid from src[v] (the pair planes' word of the vector's first lane, shifted by
 * each tap). */
void conv3x3_amx_grid_block(const conv3x3_amx_grid *g, const uint32_t *a, const uint32_t *const *src, size_t nb,
                            size_t nv, bool wide, float *stage, bool from_stage);

/* Loads the tile configuration of the weight gradient (all tiles 16 x 16 words). */
void conv3x3_amx_begin_dw(void);

/* acc (16 rows x 9 taps x 16 lanes) = the products of d's 16 rows (dy as pixel pairs, rows d_stride words
 * apart) with the 16-word rows of tap[tap] (x's pairs for the tap, channels in the lanes), over nj pixel
 * pairs (a multiple of 16: d is zero past the band). */
void conv3x3_amx_dw_block(const uint32_t *d, size_t d_stride, const uint32_t *const *tap, size_t nj, float *acc);

#endif

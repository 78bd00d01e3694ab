/* bgemm's AMX tile: C blocks of up to 32 x 32 as four 16 x 16 float32 tiles, tdpbf16ps over 16 pairs of k at a
 * time (16 x 16 x 32 multiply-adds an instruction), on CPUs whose AMX state Linux granted (kernels/isa.h).
 *
 * Operands are in the layouts the tiles load: A by rows, each row its pair words (the even k in the low half)
 * zero-padded to a multiple of 16 pairs (one tile's depth), either packed by bgemm in whole tiles of 16 rows by
 * 16 pairs (1 KiB each, contiguous; a block of 16 rows takes 16 lda words, lda its stored pairs) or, where a
 * bfloat16 A's rows need no padding, read as they lie (bgemm_amx_a); B as
 * bgemm's panels of 32 columns, one row of 32 pair words per pair of k, zero rows to the same multiple of 16.
 * The padding adds products of zero, so it changes no finite sum. Each element of C is one chain over the pairs
 * of k in increasing order, carried through C between calls: the bits depend on K and on which 16 pairs an
 * instruction takes (fixed by the packing), not on the tiling or the thread count. */
#ifndef SNUG_KERNELS_BGEMM_AMX_H
#define SNUG_KERNELS_BGEMM_AMX_H

#include <stddef.h>
#include <stdint.h>

/* The pairs of k one tdpbf16ps takes: the multiple A rows and B panels are padded to. */
#define BGEMM_AMX_PAIRS 16
/* The rows and columns of C one call covers: two tiles each way. */
#define BGEMM_AMX_ROWS 32
#define BGEMM_AMX_COLS 32

/* How a block of C starts: from zero, from C, or from its columns' biases (bgemm.c's starts). */
enum { BGEMM_AMX_ZERO, BGEMM_AMX_C, BGEMM_AMX_BIAS };

/* Loads the tile configuration on the calling thread (before its first bgemm_amx_block) and releases the tile
 * state after its last (so that the OS need not save it across switches). Only where kernel_isa_now() is
 * KERNEL_ISA_AMX_BF16. */
void bgemm_amx_begin(void);
void bgemm_amx_end(void);

/* Where a block's A tiles lie, in bytes: the tile of pairs [0, 16) of rows 0-15 at p, its 16 rows row_bytes
 * apart, the tile of the next 16 pairs tile_bytes on, rows 16-31 block_bytes on. bgemm's packed tiles (lda
 * stored pairs a row): 64, 1024 and 64 lda. A's own bfloat16 rows, rs values apart, where every block of K is
 * whole tiles: 2 rs, 64 and 32 rs (the same pair words, read where they lie). */
typedef struct bgemm_amx_a {
    const char *p;
    size_t row_bytes, tile_bytes, block_bytes;
} bgemm_amx_a;

/* C rows [0, mr), columns [0, nr) (mr, nr <= 32), rows ldc apart, = its start (BGEMM_AMX_C: cin's rows, ldcin
 * apart, which may be C itself; bias: nr floats) plus A (the tiles of rows [0, mr), as a says; the rows past mr
 * are never read) times the panel b (32 columns, a row of 32 pair words per pair of k), over kp pairs (a
 * multiple of BGEMM_AMX_PAIRS). */
void bgemm_amx_block(size_t kp, const bgemm_amx_a *a, const uint32_t *b, const float *cin, size_t ldcin,
                     float *c, size_t ldc, size_t mr, size_t nr, int start, const float *bias);

#endif

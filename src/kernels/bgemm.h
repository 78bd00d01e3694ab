/* bgemm: the matrix product of bf16 mixed precision, on CPUs with AVX512_BF16 or AMX.
 *
 * Why a second product beside sgemm: in bf16 mixed precision the operands of a layer's products (weights,
 * activations, gradients) hold values already rounded to bfloat16, and AVX512_BF16's vdpbf16ps multiplies
 * 32 such pairs and adds them into 16 float32 lanes in one instruction: twice the multiply-adds of sgemm's
 * fused multiply-add per instruction, from operands packed at half the bytes. The products of two bfloat16
 * values are exact in float32, so the result differs from the float32 product of the same values only by the
 * order of its float32 additions.
 *
 * The interface is sgemm's (sgemm.h), so that a caller swaps one for the other: the same operands (float32
 * arrays read through two strides), the same starts (C itself, a bias per column, or zero), the same workspace
 * contract. Blocks of A and B are packed into the workspace as bf16 pairs along K (the layout vdpbf16ps reads:
 * A in strips of 8 rows, B in panels of 32 columns, each 32-bit word two consecutive k of one row or column,
 * the even k in the low half; an odd K is padded with a zero), an 8 x 32 register tile of vdpbf16ps runs over
 * the pairs. Each element of C is one chain over the pairs of k in increasing order, odd k before even k within
 * a pair (vdpbf16ps's order), started from its initial value and carried through C between blocks of K: the
 * bits do not depend on the thread count or on the tiling.
 *
 * Where the kernels may use AMX (kernel_isa_now() is KERNEL_ISA_AMX_BF16), the same packed pairs feed AMX tiles
 * instead (kernels/bgemm_amx.h): A by rows rather than in strips, every block of K padded with zero pairs to a
 * multiple of 16 pairs, a 32 x 32 block of C as four tiles of tdpbf16ps, each instruction 16 x 16 x 32
 * multiply-adds. Within one tdpbf16ps the CPU orders the additions of its 16 pairs as it does (on the Xeons
 * measured, not vdpbf16ps's order: tests/test_bgemm.c reports it), so AMX bits differ from the vdpbf16ps
 * tile's; they still depend only on K (its blocks are fixed by K), not on the thread count or the tiling.
 *
 * Which plans send their products here is the plans' choice (plan/products.c). Where the CPU lacks
 * AVX512_BF16 (or bgemm_force_portable asks for it), a portable micro-kernel in plain C
 * computes what vdpbf16ps is documented to compute per lane (each of the two products added by a float32
 * fused multiply-add rounded to nearest even, denormal inputs read as zero, denormal results flushed to zero)
 * over the same packed blocks: slow, but every CPU runs bgemm and tests its packing and blocking. Whether a
 * given CPU's vdpbf16ps rounds exactly as documented is what tests/test_bgemm.c reports on one. */
#ifndef SNUG_KERNELS_BGEMM_H
#define SNUG_KERNELS_BGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/sgemm.h"

/* Whether the build and the CPU have AVX512_BF16 (with the AVX-512 state enabled by the OS; checked once). */
bool bgemm_enabled(void);

/* Tests: run the portable micro-kernel even where bgemm_enabled() (on), or the AVX512_BF16 one again (off, the
 * default). Set before a product runs, not during one. */
void bgemm_force_portable(bool on);

/* Floats of workspace a product of these sizes needs on `threads` threads; monotone in each size, so the size
 * for the largest call covers every smaller one. */
size_t bgemm_workspace_floats(size_t M, size_t N, size_t K, int threads);

/* C (M, N), rows ldc apart = init + A (M, K) B (K, N), where init is C itself (accumulate), bias[j] for column
 * j (col_bias, not with accumulate), or zero. A and B hold bfloat16 values stored as float32 (any other value
 * is rounded to the nearest bfloat16, ties to even, when packed). Splits the work over up to `threads` OpenMP
 * threads when called outside a parallel region and the product pays for a team; work holds
 * bgemm_workspace_floats(M, N, K, threads) floats. On every CPU (see bgemm_enabled for the fast one). */
void bgemm(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc, const float *col_bias,
           bool accumulate, float *work, int threads);

/* An operand already rounded to bfloat16 (the bits bgemm_round_weights writes), read through two strides as
 * sgemm_mat reads floats: a bf16 plan's weights, rounded once per change of the weights instead of in every
 * product that reads them. */
typedef struct bgemm_mat16 {
    const uint16_t *p;
    size_t rs, cs;
} bgemm_mat16;

/* dst[i] = src[i] rounded to bfloat16 exactly as bgemm rounds an operand when it packs it (on the path bgemm
 * takes now: denormals to a zero of their sign, NaNs kept quiet, else to nearest, ties to even); n values. */
void bgemm_round_weights(uint16_t *dst, const float *src, size_t n);

/* bgemm with B given in bfloat16 (either stride 1: B stored by rows or by columns): the same bits as bgemm on
 * the floats b16 was rounded from, without rounding B again. The same workspace. */
void bgemm_b16(size_t M, size_t N, size_t K, sgemm_mat a, bgemm_mat16 b, float *c, size_t ldc,
               const float *col_bias, bool accumulate, float *work, int threads);

/* bgemm without accumulate (bgemm_b16 where b16.p is not NULL, b then unused) whose C is then rounded to
 * bfloat16 (a bf16 layer's output), as sgemm_rounded: each block of C rounded by the thread that computed it once
 * its last block of K is added, its bfloat16 written into packed (ldc apart) where packed is not NULL: the bits
 * of the product followed by bf16_round_pack (bf16_round_floats without packed), without their pass over C. */
void bgemm_rounded(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, bgemm_mat16 b16, float *c, size_t ldc,
                   const float *col_bias, uint16_t *packed, float *work, int threads);

/* bgemm with A (M, K) in bfloat16 stored by rows (a.cs 1: a layer's input kept only packed) and B in bfloat16
 * as bgemm_b16 reads it, no accumulate; round as bgemm_rounded (packed where not NULL). The bits of bgemm on the
 * floats the two were rounded from (a bfloat16 already is what the packing would round it to: a denormal is
 * read as zero by the product either way), without widening A into floats and rounding it back. The same
 * workspace. */
void bgemm_a16(size_t M, size_t N, size_t K, bgemm_mat16 a, bgemm_mat16 b, float *c, size_t ldc,
               const float *col_bias, bool round, uint16_t *packed, float *work, int threads);

/* B packed once for products that read it many times (attention's keys and values, against every block of
 * queries): the pairs and panels bgemm packs from B in every call, for all of its K rows and N columns, rounded
 * as bgemm rounds. bgemm_panels then reads them in place: the same bits as bgemm on the floats they were packed
 * from, without packing B again. */
typedef struct bgemm_panels_of {
    const uint32_t *p; /* bgemm_pack_panels's words */
    size_t K, N;       /* the sizes of the B they were packed from */
} bgemm_panels_of;

/* The 32-bit words of the panels of a B of K rows and N columns. */
size_t bgemm_panels_words(size_t K, size_t N);
/* The floats of scratch bgemm_pack_panels needs, whatever the sizes. */
size_t bgemm_panels_stage_floats(void);
/* dst (bgemm_panels_words(K, N) words) = the panels of B (K, N), read through its two strides. */
void bgemm_pack_panels(uint32_t *dst, size_t K, size_t N, sgemm_mat b, float *stage);
/* bgemm_pack_panels from a B already in bfloat16 (either stride 1, as bgemm_b16 reads it): its bits as they
 * are, the panels bgemm_b16 packs in every call. */
void bgemm_pack_panels16(uint32_t *dst, size_t K, size_t N, bgemm_mat16 b, float *stage);
/* A layer's output from packed panels (a weight packed once for many products): C = bias + A B, no accumulate,
 * A as floats (a16.p NULL) or in bfloat16 by rows (as bgemm_a16 reads it), rounded and packed as
 * bgemm_rounded where round. The bits of bgemm_rounded / bgemm_a16 / bgemm_b16 on the B the panels were packed
 * from. The same workspace as bgemm. */
void bgemm_panels_out(size_t M, size_t N, size_t K, sgemm_mat a, bgemm_mat16 a16, bgemm_panels_of b, float *c,
                      size_t ldc, const float *col_bias, bool round, uint16_t *packed, float *work, int threads);
/* bgemm of A (M, K) and the first K rows and N columns of the packed B (K <= b.K, N <= b.N; K even unless it
 * is b.K: a pair of rows is packed whole), no bias; the same workspace as bgemm. */
void bgemm_panels(size_t M, size_t N, size_t K, sgemm_mat a, bgemm_panels_of b, float *c, size_t ldc,
                  bool accumulate, float *work, int threads);

#endif

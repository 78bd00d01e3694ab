/* small_gemm: an unpacked matrix product whose bits are a function of its operands' values only, for the small
 * products of attention (blocks of 32 query rows against up to a context of keys, a head's width inside).
 *
 * Why not the BLAS: its result's last bits depend on which kernel it picked for the CPU and on where the
 * operands lie (alignment decides its peeling and packing), and in bf16 mixed precision, where every output is
 * rounded to bfloat16, a changed last bit can become a changed value: a split of a batch into micro-batches,
 * or a plan that places a buffer elsewhere, would change the gradient beyond float32 rounding.
 *
 * Here each element of C is ONE chain of fused multiply-adds over k in increasing order, started from C itself
 * (accumulate) or from zero, and multiplied by `scale` after the chain where scale is not 1. Every path (AVX-512,
 * AVX2 + FMA, portable C through fmaf) computes exactly that chain, so the bits depend on neither the thread
 * count, nor the addresses, nor the tiling, nor the instruction set. The fast paths are register tiles of rows
 * x vectors of C's columns: each step of k broadcasts one element of A per row against a vector of a row of B,
 * so B is read along its rows (a transposed B is copied first, see transpose_floats) while A is read through
 * two strides (A or its transpose, in place). On the calling thread; no workspace. */
#ifndef SNUG_KERNELS_SMALL_GEMM_H
#define SNUG_KERNELS_SMALL_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/sgemm.h"

/* C (M, N), rows ldc apart = scale * (init + A (M, K) B (K, N)), init C itself (accumulate) or zero; B (K, N)
 * row-major, rows ldb apart. scale 1 leaves the chain as it is. */
void small_gemm(size_t M, size_t N, size_t K, sgemm_mat a, const float *b, size_t ldb, float *c, size_t ldc,
                float scale, bool accumulate);

#endif

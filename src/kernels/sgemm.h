/* sgemm: snug's own packed matrix product for the linear layers, on AVX-512 CPUs.
 *
 * Why not the BLAS everywhere: Debian's OpenBLAS 0.3.21 picks its kernel from the CPU model, and on CPUs it
 * does not know (or when OPENBLAS_CORETYPE names an older core, as some hosts set to work around crashes of old
 * builds) an AVX-512 machine runs an AVX2 kernel at about half the rate (docs/performance.md). And its results depend on how it splits the work over the threads with
 * that kernel (1 and 2 threads differ in the last bits), which breaks snug's promise that the thread count
 * never changes a result.
 *
 * So on AVX-512 CPUs the linear layers' products go through this one (unless a plan's request chose the BLAS:
 * snug_plan_request.products). It is the classic blocked product: blocks of B (KC x NC) and of A (MC x KC) copied
 * into panels that the register tile reads in order (A in strips of 8 rows, B in panels of 32 columns), an
 * 8 x 32 tile of fused multiply-adds. Every element of C is one chain of multiply-adds over k in increasing
 * order, started from its initial value (C itself, its column's bias, or zero) and carried through C between
 * blocks of K: the bits depend neither on the thread count nor on the tiling, and they are the bits of
 * gemm_direct (gemm_direct.h) for the same product, so a layer's samples come out the same whichever of the
 * two a call of its rows takes. The copies live in the caller's workspace (planned memory), sized by
 * sgemm_workspace_floats. */
#ifndef SNUG_KERNELS_SGEMM_H
#define SNUG_KERNELS_SGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A matrix read through two strides: X(i, j) = p[i * rs + j * cs]; one of them must be 1 (a row-major matrix
 * or the transpose of one). */
typedef struct sgemm_mat {
    const float *p;
    size_t rs, cs;
} sgemm_mat;

/* Whether sgemm can run here: the build and the CPU have AVX-512. Whether a plan's products take it is the
 * plan's choice (plan/products.c). */
bool sgemm_enabled(void);

/* Up to this inner dimension, a product with a row-major B updates C row by row without packing (a
 * one-sample micro-batch's weight gradient) and needs no workspace. */
#define SGEMM_SMALL_K 4

/* Floats of workspace a product of these sizes needs on `threads` threads; monotone in each size, so the size
 * for the largest call covers every smaller one. */
size_t sgemm_workspace_floats(size_t M, size_t N, size_t K, int threads);

/* A product with K == 0: C is its initial value (C itself with accumulate, else bias[j] or zero). */
void sgemm_start_only(size_t M, size_t N, float *c, size_t ldc, const float *bias, bool accumulate);

/* C (M, N), rows ldc apart = init + A (M, K) B (K, N), where init is C itself (accumulate), bias[j] for column
 * j (col_bias, not with accumulate), or zero. Splits the work over up to `threads` OpenMP threads when called
 * outside a parallel region and the product pays for a team; work holds sgemm_workspace_floats(M, N, K,
 * threads) floats. Only where sgemm_enabled(). */
void sgemm(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc, const float *col_bias,
           bool accumulate, float *work, int threads);

/* sgemm without accumulate whose C is then rounded to bfloat16 (a bf16 layer's output): each block of C is
 * rounded by the thread that computed it once its last block of K is added, while it is in that thread's
 * cache, and its bfloat16 written into packed (ldc apart) where packed is not NULL: the bits of sgemm followed by
 * bf16_round_pack (bf16_round_floats without packed), without their pass over the whole of C. */
void sgemm_rounded(size_t M, size_t N, size_t K, sgemm_mat a, sgemm_mat b, float *c, size_t ldc,
                   const float *col_bias, uint16_t *packed, float *work, int threads);

/* sgemm (round false) or sgemm_rounded (round) whose A (M, K) is stored row-major in bfloat16, rows lda apart (a
 * bf16 layer's input kept only packed): widened as its blocks are packed, exactly, so the bits of the same
 * product over the widened floats, with no float32 copy of A. The same workspace as sgemm. */
void sgemm_a16(size_t M, size_t N, size_t K, const uint16_t *a, size_t lda, sgemm_mat b, float *c, size_t ldc,
               const float *col_bias, bool round, uint16_t *packed, float *work, int threads);

/* sgemm whose B (K, N) is stored row-major in bfloat16, rows ldb apart (a bf16 layer's input kept only packed,
 * read by its weight gradient dy^T x): widened as its panels are packed, exactly, so the bits of sgemm over the
 * widened floats, with no float32 copy of B. No bias; the same workspace as sgemm. */
void sgemm_b16(size_t M, size_t N, size_t K, sgemm_mat a, const uint16_t *b, size_t ldb, float *c, size_t ldc,
               bool accumulate, float *work, int threads);

#endif

/* A matrix product without packing, for the lowered convolutions: C (M, N) = or += A (M, K) B (K, N), where B
 * and C are row-major with long rows (the output pixels) and M or K is a channel count (often 16 to 64).
 * OpenBLAS copies both operands into packed panels on every call; with one small dimension that copying costs
 * as much as the product (itcopy + incopy were 11% of a ResNet-20 step). Here B is streamed straight from its
 * rows, 32 columns at a time, against broadcasts of A held in L1, into a register tile of C: one pass, no copy.
 *
 * A is read through two strides, A(i, p) = a[i * a_rs + p * a_cs], so a transposed weight needs no copy either.
 * Each element of C is a sum over p in increasing order, started from C itself when accumulating: the bits do
 * not depend on the thread count nor on how the columns are split. On CPUs without AVX-512 the product is
 * cblas_sgemm's. */
#ifndef SNUG_KERNELS_GEMM_DIRECT_H
#define SNUG_KERNELS_GEMM_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this build and CPU run the AVX-512 kernels (checked once; the build itself has no -march). */
bool gemm_direct_has_avx512(void);

/* C = A B (accumulate false), C = bias + A B (bias[i] added to row i; accumulate false), or C += A B
 * (accumulate true, bias NULL). Splits the columns over the OpenMP threads when
 * called outside a parallel region and the product is large enough; inside one it runs on the calling thread. */
void gemm_direct(size_t M, size_t N, size_t K,
                 const float *a, size_t a_rs, size_t a_cs, // A (M, K): A(i, p) = a[i * a_rs + p * a_cs]
                 const float *b, size_t ldb,               // (K, N) rows ldb apart
                 float *c, size_t ldc,                     // (M, N) rows ldc apart
                 const float *bias,                        // (M) or NULL
                 bool accumulate);

/* C += A B^T, both read along their rows: the weight gradient of a lowered convolution (dW += dY col^T, whose
 * inner dimension is the pixels). Threads as gemm_direct, over the columns of C. The BLAS's where it is faster
 * (more than 16 rows and an inner dimension under 4096). */
void gemm_direct_nt(size_t M, size_t N, size_t K,
                    const float *a, size_t lda, // (M, K)
                    const float *b, size_t ldb, // (N, K)
                    float *c, size_t ldc);      // (M, N)

#endif

/* outliers_gather: a compress of each vector's outliers on AVX-512 (one instruction for the values, one for the
 * indices), a check per block of 16 and a scan of the blocks that have any elsewhere (and for the last elements
 * short of a vector). */
#include "kernels/outliers.h"

#include <math.h>

#include "kernels/avx512.h"
#include "kernels/isa.h"

#define OUTLIER_BLOCK 16

/* Whether the block of OUTLIER_BLOCK at x holds any outlier: a reduction the compiler vectorises. */
static int block_has_outlier(const float *x, float scale) {
    int inside = 1;
    #pragma omp simd reduction(&: inside)
    for (size_t i = 0; i < OUTLIER_BLOCK; i++) inside &= fabsf(x[i] * scale) < 1.0f;
    return !inside;
}

/* x[lo, hi)'s outliers appended at idx + k, out + k; returns the new count. */
static size_t scan(uint32_t *idx, float *out, const float *x, size_t lo, size_t hi, float scale, size_t k) {
    for (size_t i = lo; i < hi; i++) {
        if (fabsf(x[i] * scale) < 1.0f) continue;
        idx[k] = (uint32_t)i;
        out[k++] = x[i];
    }
    return k;
}

static size_t gather_portable(uint32_t *idx, float *out, const float *x, size_t n, float scale, size_t most) {
    size_t k = 0, lo = 0;
    for (; lo + OUTLIER_BLOCK <= n && k <= most; lo += OUTLIER_BLOCK)
        if (block_has_outlier(x + lo, scale)) k = scan(idx, out, x, lo, lo + OUTLIER_BLOCK, scale, k);
    if (k > most) return k;
    return scan(idx, out, x, lo, n, scale, k);
}

#ifdef SNUG_AVX512
/* The same comparison as the portable path: |x * scale| < 1 ordered (false for NaN), negated. */
static AVX512 size_t gather_avx512(uint32_t *idx, float *out, const float *x, size_t n, float scale,
                                    size_t most) {
    const __m512 s = _mm512_set1_ps(scale), one = _mm512_set1_ps(1.0f);
    const __m512i step = _mm512_set1_epi32(16);
    __m512i at = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    size_t k = 0, lo = 0;
    for (; lo + 16 <= n; lo += 16, at = _mm512_add_epi32(at, step)) {
        const __m512 v = _mm512_loadu_ps(x + lo);
        const __m512 a = _mm512_abs_ps(_mm512_mul_ps(v, s));
        const __mmask16 far = _mm512_cmp_ps_mask(a, one, _CMP_NLT_UQ);
        /* compressed in a register and stored whole (the lanes past the count are overwritten by the next
         * store or ignored): a compressing store to memory is microcoded on AMD's cores, many times slower. No
         * branch on an empty mask: where about half the vectors hold an outlier, its mispredictions cost more
         * than the stores. */
        _mm512_storeu_ps(out + k, _mm512_maskz_compress_ps(far, v));
        _mm512_storeu_si512(idx + k, _mm512_maskz_compress_epi32(far, at));
        k += (size_t)__builtin_popcount(far);
        if (k > most) return k;
    }
    return scan(idx, out, x, lo, n, scale, k);
}
#endif

bool outliers_compress(void) {
#ifdef SNUG_AVX512
    return kernel_isa_now() >= KERNEL_ISA_AVX512;
#else
    return false;
#endif
}

size_t outliers_gather(uint32_t *idx, float *out, const float *x, size_t n, float scale, size_t most) {
#ifdef SNUG_AVX512
    if (outliers_compress()) return gather_avx512(idx, out, x, n, scale, most);
#endif
    return gather_portable(idx, out, x, n, scale, most);
}

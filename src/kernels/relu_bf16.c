/* relu_bf16.h's kernel: a portable loop (compiled per instruction set, core/clones.h) and an AVX-512 one that
 * rounds by avx512_bf16_round and narrows by vpmovdw, as bf16.c's conversions do; the same bits
 * (tests/test_bf16.c runs both, the portable one under SNUG_TEST_ISA=avx2). */
#include "kernels/relu_bf16.h"

#include "core/clones.h"
#include "kernels/avx512.h"
#include "kernels/isa.h"
#include "kernels/relu_math.h"

VM_KERNEL static void relu_round_span(float *y, const float *x, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = bf16_round(relu_value(x[i]));
}

VM_KERNEL static void relu_round_pack_span(float *y, bf16 *packed, const float *x, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float r = bf16_round(relu_value(x[i]));
        uint32_t u;
        memcpy(&u, &r, sizeof u);
        packed[i] = (bf16)(u >> 16);
        y[i] = r;
    }
}

#ifdef SNUG_AVX512
/* relu_value on 16 lanes: zero where x < 0 (an ordered compare: NaN and -0 pass, as in the scalar form). */
static inline AVX512 __m512 relu16(__m512 x) {
    return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
}

/* The elements [0, k) it did, k a multiple of 16; packed may be NULL. */
static AVX512 size_t relu_round_pack_avx512(float *y, bf16 *packed, const float *x, size_t n) {
    size_t i = 0;
    if (!packed) {
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, avx512_bf16_round(relu16(_mm512_loadu_ps(x + i))));
        return i;
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 r = avx512_bf16_round(relu16(_mm512_loadu_ps(x + i)));
        _mm512_storeu_ps(y + i, r);
        _mm256_storeu_si256((__m256i *)(void *)(packed + i), avx512_bf16_top_halves(r));
    }
    return i;
}
#endif

void relu_bf16_round_pack(float *y, bf16 *packed, const float *x, size_t n) {
    size_t k = 0;
#ifdef SNUG_AVX512
    if (kernel_isa_now() >= KERNEL_ISA_AVX512) k = relu_round_pack_avx512(y, packed, x, n);
#endif
    if (packed) relu_round_pack_span(y + k, packed + k, x + k, n - k);
    else relu_round_span(y + k, x + k, n - k);
}

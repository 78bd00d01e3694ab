/* What the kernels that pair float32 values into bfloat16 words themselves share (conv3x3_bf16.c,
 * conv3x3_winograd_dw.c): the rounding of 16 floats in AVX-512F, the target attribute of the AVX512_BF16
 * functions (the build has no -march) and the rounding of two float vectors into one vector of pair words. */
#ifndef SNUG_KERNELS_DPBF16_PAIRS_H
#define SNUG_KERNELS_DPBF16_PAIRS_H

#include <stdint.h>

#include "kernels/avx512.h"

#ifdef SNUG_AVX512
/* dpbf16_of (dpbf16_lane.h) of 16 floats in AVX-512F alone, the bits in the low half of each lane: for code that
 * rounds on every AVX-512 CPU and must give the bits vcvtne2ps2bf16 gives (zero and denormals to a zero of their
 * sign, NaNs quiet, else to nearest, ties to even). */
static inline __attribute__((always_inline)) AVX512 __m512i dpbf16_of16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x), hi = _mm512_srli_epi32(u, 16);
    const __m512i exp = _mm512_and_si512(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(0xFF));
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    const __mmask16 tiny = _mm512_cmpeq_epi32_mask(exp, _mm512_setzero_si512());
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(exp, _mm512_set1_epi32(0xFF)) &
                          _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7FFFFF));
    r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(hi, _mm512_set1_epi32(0x8000)));
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
}

#define BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* 16 words from the bfloat16 of lo (low halves) and hi (high halves): vcvtne2ps2bf16 writes hi's 16 after lo's,
 * the permute interleaves them (word d takes halves d and 16 + d). The rounding is dpbf16_of's. */
static inline __attribute__((always_inline)) BF16 __m512i dpbf16_pair_floats(__m512 lo, __m512 hi) {
    uint16_t idx[32];
    for (unsigned d = 0; d < 16; d++) {
        idx[2 * d] = (uint16_t)d;
        idx[2 * d + 1] = (uint16_t)(d + 16);
    }
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(idx), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}
#endif

#endif

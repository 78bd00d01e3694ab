/* What every AVX-512 kernel file shares. The build has no -march (the binaries run on any x86-64), so kernels
 * are compiled for AVX-512 through a function attribute and chosen at run time (gemm_direct_has_avx512);
 * SNUG_AVX512 says this compiler can build them at all. */
#ifndef SNUG_KERNELS_AVX512_H
#define SNUG_KERNELS_AVX512_H

#include <stddef.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SNUG_AVX512 1
#define AVX512 __attribute__((target("avx512f")))

/* The lanes [0, n) of a vector: all 16 from n = 16 up (masked loads and stores of a row's last columns). */
static inline AVX512 __mmask16 avx512_lanes(size_t n) {
    return (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
}

/* 16 floats rounded to bfloat16 values in place of the bf16_round_bits steps (kernels/bf16.h): the same bits as
 * bf16_round_floats after the store, for kernels that round a bf16 plan's output in their registers. Six
 * vector operations where the scalar steps' translation takes eight: the lowest kept bit (bit 16) picks the
 * addend, 0x8000 or 0x7FFF (one test and one masked move instead of a shift, an and and a second add), and NaN
 * is the unordered compare of v with itself (instead of an and and an unsigned compare). */
static inline AVX512 __m512 avx512_bf16_round(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 odd = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
    const __m512i addend = _mm512_mask_mov_epi32(_mm512_set1_epi32(0x7FFF), odd, _mm512_set1_epi32(0x8000));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i picked =
        _mm512_mask_or_epi32(_mm512_add_epi32(u, addend), nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_castsi512_ps(_mm512_and_si512(picked, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* The floats of 16 bfloat16s (exact: a bfloat16 is the upper half of its float32). */
static inline AVX512 __m512 avx512_bf16_widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The bfloat16s of 16 floats already rounded (avx512_bf16_round): their upper halves, narrowed by vpmovdw. */
static inline AVX512 __m256i avx512_bf16_top_halves(__m512 r) {
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(r), 16));
}

/* F(R, nv, ...) for a tile's vector count nv of 1 to 3, as a constant (the tile's loops unroll on it). */
#define AVX512_NV_OF_3(nv, F, R, ...)                                                                         \
    if ((nv) == 3) F(R, 3, __VA_ARGS__);                                                                      \
    else if ((nv) == 2) F(R, 2, __VA_ARGS__);                                                                 \
    else F(R, 1, __VA_ARGS__);

/* The rows [0, mr) of a register tile of 8 rows (mr <= 8): TILE(8) where mr is 8, else TILE(4), TILE(2) and
 * TILE(1) for mr's bits, NEXT(k) moving the tile's pointers on by k rows after each. */
#define AVX512_ROWS_OF_8(mr, TILE, NEXT)                                                                      \
    do {                                                                                                      \
        if ((mr) == 8) {                                                                                      \
            TILE(8)                                                                                           \
            break;                                                                                            \
        }                                                                                                     \
        if ((mr) & 4) { TILE(4) NEXT(4) }                                                                     \
        if ((mr) & 2) { TILE(2) NEXT(2) }                                                                     \
        if ((mr) & 1) { TILE(1) }                                                                             \
    } while (0)
#else
#define AVX512
#endif

#endif

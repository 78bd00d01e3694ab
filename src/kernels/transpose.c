/* transpose_floats: 16 x 16 blocks through unpack and lane shuffles (AVX-512, chosen at run time), partial
 * blocks with masked loads and stores; a blocked scalar loop elsewhere. */
#include "kernels/transpose.h"

#include "kernels/avx512.h"
#include "kernels/gemm_direct.h"

#define BLOCK 16

/* One scalar block at a time (both sides touched a cache line at a time). */
static void transpose_scalar(float *dst, size_t ldd, const float *src, size_t lds, size_t r, size_t c) {
    for (size_t i0 = 0; i0 < r; i0 += BLOCK)
        for (size_t j = 0; j < c; j += BLOCK) {
            const size_t i1 = i0 + BLOCK < r ? i0 + BLOCK : r, jb = j + BLOCK < c ? j + BLOCK : c;
            for (size_t i = i0; i < i1; i++)
                for (size_t jj = j; jj < jb; jj++) dst[jj * ldd + i] = src[i * lds + jj];
        }
}

#ifdef SNUG_AVX512
/* r[t] becomes column t of the 16 x 16 block whose rows were r[0..15]: pairs of rows interleaved, then pairs
 * of pairs (as doubles), then the four 128-bit lanes gathered across row groups. */
static inline __attribute__((always_inline)) AVX512 void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g + q]: in 128-bit lane L, column 4L + q of rows 4g .. 4g + 3 */
    for (int g = 0; g < 4; g++) {
        const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
        const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    for (int q = 0; q < 4; q++) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88), w0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xdd);
        const __m512 v1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88);
        const __m512 w1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xdd);
        r[q] = _mm512_shuffle_f32x4(v0, v1, 0x88);
        r[8 + q] = _mm512_shuffle_f32x4(v0, v1, 0xdd);
        r[4 + q] = _mm512_shuffle_f32x4(w0, w1, 0x88);
        r[12 + q] = _mm512_shuffle_f32x4(w0, w1, 0xdd);
    }
}

/* Sixteen rows at a time, each walked along its length: with the 16-column blocks outer, every block stepped
 * down all r rows, and a linear layer's weight packed for the forward (32 rows 4 KiB apart) put the lines the
 * next block would read, all in one L1 set, out of reach (the mlp's 1024 x 1024 forward at 64 rows 0.94 of its
 * time). */
static AVX512 void transpose_avx512(float *dst, size_t ldd, const float *src, size_t lds, size_t r, size_t c) {
    for (size_t i0 = 0; i0 < r; i0 += BLOCK) {
        const size_t ni = r - i0 < BLOCK ? r - i0 : BLOCK;
        const __mmask16 store = avx512_lanes(ni);
        for (size_t j = 0; j < c; j += BLOCK) {
            const size_t nj = c - j < BLOCK ? c - j : BLOCK;
            const __mmask16 load = avx512_lanes(nj);
            __m512 v[16];
            for (size_t i = 0; i < BLOCK; i++)
                v[i] = i < ni ? _mm512_maskz_loadu_ps(load, src + (i0 + i) * lds + j) : _mm512_setzero_ps();
            transpose16(v);
            for (size_t t = 0; t < nj; t++) _mm512_mask_storeu_ps(dst + (j + t) * ldd + i0, store, v[t]);
        }
    }
}
#endif

#ifdef SNUG_AVX512
/* Rows [i0, i0 + 16) of src (ni of them real) into the strips at dst0 and dst0 + sstride, all c columns. */
static AVX512 void strips_pair_avx512(float *dst0, size_t sstride, const float *src, size_t lds, size_t ni,
                                      size_t c) {
    float *dst1 = dst0 + sstride;
    for (size_t j = 0; j < c; j += BLOCK) {
        const size_t nj = c - j < BLOCK ? c - j : BLOCK;
        const __mmask16 load = avx512_lanes(nj);
        __m512 v[16];
        for (size_t i = 0; i < BLOCK; i++)
            v[i] = i < ni ? _mm512_maskz_loadu_ps(load, src + i * lds + j) : _mm512_setzero_ps();
        transpose16(v);
        for (size_t t = 0; t < nj; t++) {
            _mm512_mask_storeu_ps(dst0 + (j + t) * 8, 0x00FF, v[t]);
            if (ni > 8) _mm512_mask_storeu_ps(dst1 + (j + t) * 8 - 8, 0xFF00, v[t]);
        }
    }
}
#endif

void transpose_to_strips8(float *dst, size_t sstride, const float *src, size_t lds, size_t r, size_t c) {
    for (size_t i0 = 0; i0 < r; i0 += 2 * 8) {
        const size_t ni = r - i0 < 16 ? r - i0 : 16;
        float *d = dst + i0 / 8 * sstride;
#ifdef SNUG_AVX512
        if (gemm_direct_has_avx512()) {
            strips_pair_avx512(d, sstride, src + i0 * lds, lds, ni, c);
            continue;
        }
#endif
        for (size_t s = 0; s < (ni + 7) / 8; s++)
            for (size_t p = 0; p < c; p++)
                for (size_t i = 0; i < 8; i++)
                    d[s * sstride + p * 8 + i] = 8 * s + i < ni ? src[(i0 + 8 * s + i) * lds + p] : 0.0f;
    }
}

void transpose_floats(float *dst, size_t ldd, const float *src, size_t lds, size_t r, size_t c) {
#ifdef SNUG_AVX512
    if (gemm_direct_has_avx512()) {
        transpose_avx512(dst, ldd, src, lds, r, c);
        return;
    }
#endif
    transpose_scalar(dst, ldd, src, lds, r, c);
}

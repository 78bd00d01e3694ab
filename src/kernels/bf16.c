/* The array kernels of bf16.h and their parallel drivers. */
#include "kernels/bf16.h"

#include "core/clones.h"
#include "core/parallel.h"
#include "kernels/avx512.h"
#include "kernels/elementwise.h"
#include "kernels/isa.h"

/* Below PAR_MIN elements one direct call; above, chunks of CHUNK elements (a few hundred KiB each side). */
#define BF16_PAR_MIN ((size_t)1 << 20)
#define BF16_CHUNK ((size_t)1 << 16)

VM_KERNEL static void pack_span(bf16 *dst, const float *src, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = bf16_from_float(src[i]);
}

VM_KERNEL static void pack_rounded_span(bf16 *dst, const float *src, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        dst[i] = (bf16)(u >> 16);
    }
}

VM_KERNEL static void unpack_span(float *dst, const bf16 *src, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}

VM_KERNEL static void round_pack_span(float *values, bf16 *packed, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float r = bf16_round(values[i]);
        uint32_t u;
        memcpy(&u, &r, sizeof u);
        packed[i] = (bf16)(u >> 16);
        values[i] = r;
    }
}

VM_KERNEL static void round_span(float *dst, const float *src, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = bf16_round(src[i]);
}

/* ---- AVX-512 --------------------------------------------------------------------------------------------- *
 * The loops above are the portable twins. GCC's AVX-512 clones of them run 8 lanes and translate the rounding
 * step by step (twelve operations per 8 floats); these run 16 lanes with avx512_bf16_round's six and narrow by
 * vpmovdw, about twice as fast where the arrays lie in cache (a sample's stage, a block of a product's output).
 * The same bits (tests/test_bf16.c runs both, the portable ones under SNUG_TEST_ISA=avx2). A tail of fewer than
 * 16 elements takes the portable loop. */
#ifdef SNUG_AVX512
static AVX512 size_t pack_avx512(bf16 *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 r = avx512_bf16_round(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), avx512_bf16_top_halves(r));
    }
    return i;
}

static AVX512 size_t pack_rounded_avx512(bf16 *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), avx512_bf16_top_halves(_mm512_loadu_ps(src + i)));
    return i;
}

static AVX512 size_t unpack_avx512(float *dst, const bf16 *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm512_storeu_ps(dst + i, avx512_bf16_widen(h));
    }
    return i;
}

static AVX512 size_t round_pack_avx512(float *values, bf16 *packed, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 r = avx512_bf16_round(_mm512_loadu_ps(values + i));
        _mm512_storeu_ps(values + i, r);
        _mm256_storeu_si256((__m256i *)(void *)(packed + i), avx512_bf16_top_halves(r));
    }
    return i;
}

static AVX512 size_t round_avx512(float *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, avx512_bf16_round(_mm512_loadu_ps(src + i)));
    return i;
}
#endif

/* The elements [0, k) the AVX-512 kernels did where the kernels may use AVX-512 (kernels/isa.h), else 0. */
#ifdef SNUG_AVX512
#define WIDE(call) (kernel_isa_now() >= KERNEL_ISA_AVX512 ? (call) : 0)
#else
#define WIDE(call) 0
#endif

/* The entry points other files call: plain functions around the static clones (core/clones.h says why). */
void bf16_pack(bf16 *dst, const float *src, size_t n) {
    const size_t k = WIDE(pack_avx512(dst, src, n));
    pack_span(dst + k, src + k, n - k);
}

void bf16_pack_rounded(bf16 *dst, const float *src, size_t n) {
    const size_t k = WIDE(pack_rounded_avx512(dst, src, n));
    pack_rounded_span(dst + k, src + k, n - k);
}

void bf16_unpack(float *dst, const bf16 *src, size_t n) {
    const size_t k = WIDE(unpack_avx512(dst, src, n));
    unpack_span(dst + k, src + k, n - k);
}

void bf16_round_pack(float *values, bf16 *packed, size_t n) {
    const size_t k = WIDE(round_pack_avx512(values, packed, n));
    round_pack_span(values + k, packed + k, n - k);
}

void bf16_round_floats(float *dst, const float *src, size_t n) {
    const size_t k = WIDE(round_avx512(dst, src, n));
    round_span(dst + k, src + k, n - k);
}

static size_t chunk_len(size_t n, size_t lo) { return n - lo < BF16_CHUNK ? n - lo : BF16_CHUNK; }

/* A conversion moves 6 bytes per element, one and a half floats. */
static bool worth_a_team(size_t n) { return n >= BF16_PAR_MIN && par_pays_floats(n + n / 2); }

void bf16_pack_par(bf16 *dst, const float *src, size_t n) {
    if (!worth_a_team(n)) {
        bf16_pack(dst, src, n);
        return;
    }
    const size_t chunks = (n + BF16_CHUNK - 1) / BF16_CHUNK;
    #pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * BF16_CHUNK;
        bf16_pack(dst + lo, src + lo, chunk_len(n, lo));
    }
}

void bf16_unpack_par(float *dst, const bf16 *src, size_t n) {
    if (!worth_a_team(n)) {
        bf16_unpack(dst, src, n);
        return;
    }
    const size_t chunks = (n + BF16_CHUNK - 1) / BF16_CHUNK;
    #pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * BF16_CHUNK;
        bf16_unpack(dst + lo, src + lo, chunk_len(n, lo));
    }
}

void bf16_round_pack_par(float *values, bf16 *packed, size_t n) {
    if (!worth_a_team(n)) {
        bf16_round_pack(values, packed, n);
        return;
    }
    const size_t chunks = (n + BF16_CHUNK - 1) / BF16_CHUNK;
    #pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * BF16_CHUNK;
        bf16_round_pack(values + lo, packed + lo, chunk_len(n, lo));
    }
}

void bf16_round_floats_par(float *dst, const float *src, size_t n) {
    static const ew_split split = {.par_min = BF16_PAR_MIN, .chunk = BF16_CHUNK};
    ew_apply_unary(split, bf16_round_floats, dst, src, n);
}

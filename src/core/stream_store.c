/* Non-temporal copies (stream_store.h). SSE2's 16-byte streaming store is part of every x86-64 CPU, and four of
 * them to one line fill one write-combining buffer, which leaves as a whole-line write: AVX-512's 64-byte form
 * measured the same on the mlp's update (one path, tested on every machine). Elsewhere a plain copy. */
#include <stdint.h>
#include <string.h>

#include "core/stream_store.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>

/* The floats of dst before its first 16-byte boundary, and after its last, take plain stores. */
void stream_floats(float *restrict dst, const float *restrict src, size_t n) {
    size_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15) != 0; i++) dst[i] = src[i];
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
}

void stream_zero_floats(float *dst, size_t n) {
    size_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15) != 0; i++) dst[i] = 0.0f;
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_setzero_ps());
    for (; i < n; i++) dst[i] = 0.0f;
}

void stream_fence(void) { _mm_sfence(); }

#else

void stream_floats(float *restrict dst, const float *restrict src, size_t n) { memcpy(dst, src, n * sizeof *dst); }

void stream_zero_floats(float *dst, size_t n) { memset(dst, 0, n * sizeof *dst); }

void stream_fence(void) {}

#endif

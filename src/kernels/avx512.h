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
#else
#define AVX512
#endif

#endif

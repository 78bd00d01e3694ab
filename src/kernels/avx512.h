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

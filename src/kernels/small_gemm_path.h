/* small_gemm's paths, for its tests: every path computes the same chains, so a test runs each on the same
 * operands and requires the same bits. Not for the engine, which takes the fastest path the CPU has. */
#ifndef SNUG_KERNELS_SMALL_GEMM_PATH_H
#define SNUG_KERNELS_SMALL_GEMM_PATH_H

#include <stdbool.h>

typedef enum small_gemm_path {
    SMALL_GEMM_FASTEST, /* the default: AVX-512 where the CPU has it, else AVX2 + FMA, else portable */
    SMALL_GEMM_PORTABLE,
    SMALL_GEMM_AVX2,
    SMALL_GEMM_AVX512,
} small_gemm_path;

/* Whether this build and CPU can run the path (SMALL_GEMM_FASTEST and SMALL_GEMM_PORTABLE always can). */
bool small_gemm_path_available(small_gemm_path p);

/* Runs every later product through path p, where available (returns false and changes nothing otherwise). Set
 * before a product runs, not during one. */
bool small_gemm_force_path(small_gemm_path p);

#endif

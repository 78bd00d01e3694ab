/* The machine as the kernels see it: threads, SIMD level, which BLAS kernel serves the matrix products and
 * which product the linear layers take where a plan leaves the choice to snug; and the one process-wide
 * setting, the threads. It lives with the kernels because it reports their choices. The BLAS
 * kernel matters most: an OpenBLAS that does not know the CPU falls back to a generic pre-AVX2 kernel several
 * times slower, silently, so snug reports it. */
#define _POSIX_C_SOURCE 200809L
#include "snug.h"

#include <cblas.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <strings.h>

#include "kernels/isa.h"
#include "kernels/sgemm.h"

/* OpenBLAS core names (as openblas_get_corename spells them, compared case-insensitively) of kernels written
 * for CPUs without AVX2: on a CPU with AVX2 or AVX-512 they leave most of its speed unused. */
static const char *const generic_kernels[] = {
    "unknown",  "prescott", "core2",  "penryn",   "dunnington", "nehalem",   "atom",     "katmai",
    "coppermine", "northwood", "banias", "athlon", "opteron",    "opteron_sse3", "barcelona", "bobcat",
    "sandybridge", "bulldozer", "piledriver", "steamroller", NULL,
};

static bool is_generic_kernel(const char *name) {
    if (!name) return true;
    for (size_t i = 0; generic_kernels[i]; i++)
        if (strcasecmp(name, generic_kernels[i]) == 0) return true;
    return false;
}

static const char *simd_level(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "AVX-512";
    if (__builtin_cpu_supports("avx2")) return "AVX2";
    if (__builtin_cpu_supports("avx")) return "AVX";
    if (__builtin_cpu_supports("sse4.2")) return "SSE4.2";
    if (__builtin_cpu_supports("sse2")) return "SSE2";
    return "none";
#else
    return "unknown";
#endif
}

static bool cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

void snug_system_info_get(snug_system_info *info) {
    info->threads = omp_get_max_threads();
    info->simd = simd_level();
    info->blas = openblas_get_config();
    info->blas_kernel = openblas_get_corename();
    info->blas_kernel_slow = cpu_has_avx2() && is_generic_kernel(info->blas_kernel);
    info->gemm = !sgemm_enabled()                             ? "BLAS"
                 : kernel_isa_now() >= KERNEL_ISA_AMX_BF16 ? "snug AVX-512 (bf16 runs: AMX)"
                 : kernel_bf16_products_pay()              ? "snug AVX-512 (bf16 runs: AVX512_BF16)"
                                                           : "snug AVX-512";
}

/* n <= 0 means every core. The BLAS has its own thread count even when it shares the OpenMP runtime. */
void snug_set_threads(int n) {
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

/* The first parallel region creates the OpenMP team (a stack and a malloc arena per thread); the BLAS maps its
 * per-thread buffers
 * at its first threaded product and touches what that product packs. A product of WARM_N-sided matrices is
 * threaded and packs full panels of the BLAS's blocking, about what the layers' products touch later. It runs
 * twice: the first product's job tables are mapped and returned, the second's land in the C library's heap,
 * where every later product's go. */
#define WARM_N 512

size_t snug_engine_start(void) {
#pragma omp parallel
    free(malloc(4096)); /* a thread's first allocation gives it its own malloc arena */
    float *a = calloc((size_t)WARM_N * WARM_N, sizeof *a), *c = malloc((size_t)WARM_N * WARM_N * sizeof *c);
    for (int i = 0; a && c && i < 2; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, WARM_N, WARM_N, WARM_N, 1.0f, a, WARM_N, a, WARM_N,
                    0.0f, c, WARM_N);
    free(a);
    free(c);
    size_t now = 0;
    snug_process_resident(&now, NULL);
    return now;
}

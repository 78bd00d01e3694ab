/* bench_fma_peak: the rate at which this machine's cores retire fused multiply-adds from registers, with no
 * memory traffic: the ceiling no product can pass, against which the SGEMM rate of `snug-bench` (2048x2048,
 * the best case of a GEMM) and the workloads' GFLOP/s can be read. Each thread runs 12 independent chains of
 * vector FMAs (more than latency x throughput on current x86 cores, so the chains never wait on each other) at
 * the widest width the CPU has: AVX-512 (16 floats), else AVX2 + FMA (8), else plain C (the compiler's choice).
 *
 *   bench_fma_peak [threads]   prints "fma_peak_gflops N threads T width W" (the best of 40 short batches)
 *                              and, where the CPU has AVX512_BF16, "bf16_peak_gflops N threads T width 32"
 *                              and, where it has AMX (granted by the OS), "amx_bf16_peak_gflops N threads T"
 *                              then "amx_bf16_loop_gflops N threads T" and "amx_bf16_block_gflops N threads T"
 *
 * The bf16 line is the same probe with vdpbf16ps (16 chains): each instruction multiplies 32 pairs of bfloat16
 * and adds them into 16 float32 lanes, counted as 64 floating-point operations (a multiply and an add per
 * product, as an FMA lane counts two), so the two lines compare directly: their ratio is the most that
 * bfloat16 products (bgemm) can gain over float32 ones (sgemm) on this core. The AMX line is the same probe
 * with tdpbf16ps on four accumulator tiles (a 32 x 32 block of C, as bgemm's AMX tile holds it), each
 * instruction 16 x 16 x 32 products counted as 16384 operations: the most bgemm's AMX path can reach. The AMX
 * loop line runs those four products with the four tile loads each round of bgemm's tile loop makes, from
 * operands in L1: what a product that reads its operands can reach at best on this core (tile loads cost the
 * tile unit time of their own, so this is below the register peak); the AMX block line adds C's trips to memory
 * and back that bgemm's blocking makes every 64 products: its ceiling with every operand in L1.
 *
 * threads: default every processor OpenMP offers. Exit status 0, or 2 on bad arguments.
 * On an AMD EPYC of family 25 (2 vCPUs, AVX-512 in two halves per instruction): 234 GFLOP/s with 2 threads,
 * 117 with one, so its SGEMM rate of 190-200 GFLOP/s is 80-85% of what the cores can do. On a family-26 EPYC
 * (full-width AVX-512, AVX512_BF16, no AMX) one thread: fma 254-258, bf16 492-502 GFLOP/s, a ratio of 1.9 to
 * 2.0. Virtual machines of one name can be either: this probe says which one a run had. */
#define _GNU_SOURCE /* syscall: the request for the AMX tile state */
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HAS_AMX_PROBE 1
#endif

#define CHAINS 12
/* vdpbf16ps has a longer latency than an FMA: 12 chains leave a core that issues two a cycle (AMD family 26)
 * waiting on them; 16 do not, and 16 vectors plus the two operands still fit AVX-512's 32 registers. */
#define BF16_CHAINS 24
/* Many short batches, the best kept: on a shared or virtual machine a batch that the scheduler interrupts
 * reads low, and of long batches every one is interrupted (the rate then reads about half the core's). */
#define BATCHES 40
/* Iterations per batch: a few ms per batch on a 3-4 GHz core. */
#define ITERATIONS 2000000L

/* The chains must live in registers: a loop over an array of them, not unrolled, keeps them on the stack and
 * measures store-to-load forwarding instead (half the rate at -O2 on the machine above). */
#if defined(__GNUC__) && !defined(__clang__)
#define UNROLLED _Pragma("GCC unroll 12")
#define UNROLLED_BF16 _Pragma("GCC unroll 24")
#elif defined(__clang__)
#define UNROLLED _Pragma("unroll")
#define UNROLLED_BF16 _Pragma("unroll")
#else
#define UNROLLED
#define UNROLLED_BF16
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static float chains_avx512(long iters) {
    __m512 a[CHAINS];
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_ps(1.0f + (float)i * 1e-3f);
    for (long it = 0; it < iters; it++)
        UNROLLED for (int i = 0; i < CHAINS; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
    float sum = 0;
    for (int i = 0; i < CHAINS; i++) sum += _mm512_reduce_add_ps(a[i]);
    return sum;
}

/* vdpbf16ps chains: each accumulator gains the products of a fixed pair of small bf16 vectors, so it grows
 * slowly and never overflows within a batch. The words are 0x3F80 (1.0) and 0x3400 (about 1.2e-7). */
__attribute__((target("avx512f,avx512bf16"))) static float chains_bf16(long iters) {
    __m512 a[BF16_CHAINS];
    const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3F803F80), y = (__m512bh)_mm512_set1_epi32(0x34003400);
    for (int i = 0; i < BF16_CHAINS; i++) a[i] = _mm512_set1_ps(1.0f + (float)i * 1e-3f);
    for (long it = 0; it < iters; it++)
        UNROLLED_BF16 for (int i = 0; i < BF16_CHAINS; i++) a[i] = _mm512_dpbf16_ps(a[i], x, y);
    float sum = 0;
    for (int i = 0; i < BF16_CHAINS; i++) sum += _mm512_reduce_add_ps(a[i]);
    return sum;
}

__attribute__((target("avx2,fma"))) static float chains_avx2(long iters) {
    __m256 a[CHAINS];
    const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm256_set1_ps(1.0f + (float)i * 1e-3f);
    for (long it = 0; it < iters; it++)
        UNROLLED for (int i = 0; i < CHAINS; i++) a[i] = _mm256_fmadd_ps(a[i], b, c);
    float lanes[8], sum = 0;
    for (int i = 0; i < CHAINS; i++) {
        _mm256_storeu_ps(lanes, a[i]);
        for (int l = 0; l < 8; l++) sum += lanes[l];
    }
    return sum;
}
#endif

#ifdef HAS_AMX_PROBE
/* tdpbf16ps probe: iters / AMX_SCALE rounds of four independent tile products (C tiles 0-3, A tiles 4-5, B
 * tiles 6-7, every tile 16 rows of 64 bytes); the operands are the small words of chains_bf16. */
#define AMX_SCALE 8

/* Tiles 0-7 all 16 rows of 64 bytes, on the calling thread. */
__attribute__((target("amx-tile,amx-bf16"))) static void load_square_tiles(void) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg)); /* the whole configuration as the operand (see bgemm_amx.c) */
}

__attribute__((target("amx-tile,amx-bf16"))) static void zero_c_tiles(void) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

/* C's first element (what the probes return, so that their products are kept) and the tile state released. */
__attribute__((target("amx-tile,amx-bf16"))) static float release_tiles(void) {
    float out[256];
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

__attribute__((target("amx-tile,amx-bf16"))) static float chains_amx(long iters) {
    load_square_tiles();
    static uint32_t ones[256], small[256];
    for (int i = 0; i < 256; i++) ones[i] = 0x3F803F80u, small[i] = 0x34003400u;
    zero_c_tiles();
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, small, 64);
    _tile_loadd(7, small, 64);
    for (long it = 0; it < iters / AMX_SCALE; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    return release_tiles();
}

/* The same four products a round, each round loading the tiles a product's step loads (bgemm_amx.c's block: two
 * A tiles with the streaming hint, the B panel's two halves), from operands that stay in L1: A 16 KiB (eight
 * steps of two 16-row tiles), B 16 KiB (eight steps of a 32-column panel), each thread its own. With c_trips,
 * C's four tiles are stored and loaded back every BLOCK_ROUNDS rounds (64 products), as bgemm's 32 x 32 blocks
 * of C go to memory and back between 256-pair slices of K (the most of K whose B panel, 32 KiB, stays in L1
 * beside A's tiles). */
#define LOOP_STEPS 8
#define BLOCK_ROUNDS 16
__attribute__((target("amx-tile,amx-bf16"))) static float amx_loop(long iters, bool c_trips) {
    load_square_tiles();
    _Alignas(64) float c[32][32];
    _Alignas(64) uint32_t a[LOOP_STEPS][2][256], b[LOOP_STEPS][16][32];
    for (int q = 0; q < LOOP_STEPS; q++) {
        for (int i = 0; i < 256; i++) a[q][0][i] = a[q][1][i] = 0x3F803F80u;
        for (int r = 0; r < 16; r++)
            for (int j = 0; j < 32; j++) b[q][r][j] = 0x34003400u;
    }
    zero_c_tiles();
    for (long it = 0; it < iters / AMX_SCALE; it++) {
        const int q = (int)(it % LOOP_STEPS);
        _tile_stream_loadd(4, a[q][0], 64);
        _tile_loadd(6, b[q][0], 128);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, b[q][0] + 16, 128);
        _tile_dpbf16ps(1, 4, 7);
        _tile_stream_loadd(5, a[q][1], 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        if (c_trips && it % BLOCK_ROUNDS == BLOCK_ROUNDS - 1) {
            _tile_stored(0, &c[0][0], 128);
            _tile_stored(1, &c[0][16], 128);
            _tile_stored(2, &c[16][0], 128);
            _tile_stored(3, &c[16][16], 128);
            _tile_loadd(0, &c[0][0], 128);
            _tile_loadd(1, &c[0][16], 128);
            _tile_loadd(2, &c[16][0], 128);
            _tile_loadd(3, &c[16][16], 128);
        }
    }
    return release_tiles();
}

/* What the tile loop of a product that loads its operands can reach when no byte comes from beyond L1, against
 * chains_amx's register peak; and with C's trips, the ceiling of a product tiled as bgemm tiles it. */
static float chains_amx_loads(long iters) { return amx_loop(iters, false); }
static float chains_amx_blocks(long iters) { return amx_loop(iters, true); }

/* The AMX probe where the CPU has AMX-BF16 and AMX-TILE (CPUID.(7,0):EDX bits 22 and 24) and Linux grants the
 * tile state, else NULL. */
static float (*pick_amx(void))(long) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & 1u << 22) || !(d & 1u << 24)) return NULL;
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) return NULL;
    return chains_amx;
}
#endif

/* The portable fallback: one float per chain element, as wide as the compiler vectorises it. */
static float chains_plain(long iters) {
    float a[CHAINS];
    for (int i = 0; i < CHAINS; i++) a[i] = 1.0f + (float)i * 1e-3f;
    for (long it = 0; it < iters; it++)
        UNROLLED for (int i = 0; i < CHAINS; i++) a[i] = a[i] * 0.999999f + 1e-7f;
    float sum = 0;
    for (int i = 0; i < CHAINS; i++) sum += a[i];
    return sum;
}

/* The widest kernel this CPU runs, and its floats per FMA. */
static float (*pick(int *width))(long) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return *width = 16, chains_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return *width = 8, chains_avx2;
#endif
    return *width = 1, chains_plain;
}

/* The best of BATCHES batches of `chains` on `threads` threads, in GFLOP/s at `flops` per iteration. */
static double best_rate(float (*chains)(long), long threads, double flops) {
    double best = 0;
    volatile float sink = 0; /* keeps the chains' results, so the compiler cannot drop them */
    for (int b = 0; b < BATCHES; b++) {
        const double t0 = omp_get_wtime();
        float sum = 0;
        #pragma omp parallel num_threads((int)threads) reduction(+ : sum)
        sum += chains(ITERATIONS);
        const double s = omp_get_wtime() - t0;
        sink += sum;
        const double rate = flops * (double)ITERATIONS * (double)threads / s * 1e-9;
        if (rate > best) best = rate;
    }
    return best;
}

/* The vdpbf16ps probe where the CPU has AVX512_BF16 (with AVX-512 state the OS enables), else NULL. */
static float (*pick_bf16(void))(long) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bf16")) return chains_bf16;
#endif
    return NULL;
}

int main(int argc, char **argv) {
    char *end = NULL;
    long threads = argc > 1 ? strtol(argv[1], &end, 10) : omp_get_max_threads();
    if (argc > 2 || (argc > 1 && (*end != '\0' || threads < 1 || threads > 4096))) {
        fprintf(stderr, "usage: bench_fma_peak [threads]   (threads: a whole number from 1 to 4096)\n");
        return 2;
    }
    int width;
    float (*chains)(long) = pick(&width);
    printf("fma_peak_gflops %.1f threads %ld width %d\n", best_rate(chains, threads, 2.0 * width * CHAINS), threads, width);
    float (*bf16)(long) = pick_bf16();
    if (bf16) printf("bf16_peak_gflops %.1f threads %ld width 32\n", best_rate(bf16, threads, 64.0 * BF16_CHAINS), threads);
#ifdef HAS_AMX_PROBE
    float (*amx)(long) = pick_amx();
    if (amx) {
        printf("amx_bf16_peak_gflops %.1f threads %ld\n", best_rate(amx, threads, 4.0 * 16384 / AMX_SCALE), threads);
        printf("amx_bf16_loop_gflops %.1f threads %ld\n",
               best_rate(chains_amx_loads, threads, 4.0 * 16384 / AMX_SCALE), threads);
        printf("amx_bf16_block_gflops %.1f threads %ld\n",
               best_rate(chains_amx_blocks, threads, 4.0 * 16384 / AMX_SCALE), threads);
    }
#endif
    return 0;
}

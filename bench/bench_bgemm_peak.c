/* How near the bf16 product comes to the AMX register peak (bench_fma_peak's amx_bf16_peak_gflops), on two kinds
 * of operands:
 *   floats  bgemm from float32 A and B stored by rows: every call rounds and packs both operands;
 *   packed  bgemm_panels_out from operands already in the layouts the product reads, as a linear layer whose
 *           weight is kept packed and whose input is kept in bfloat16 holds them: A in bfloat16 by rows, B as
 *           bgemm_pack_panels16's panels (packed once, outside the timing).
 * For a square 1024 and 2048 product, the mlp's two forward products (256 rows) and a product whose operands
 * together fit one core's 2 MiB L2 (what the tiles reach when nothing streams from beyond it), on one thread and
 * on two, in GFLOP/s (2 M N K operations) and as a fraction of the peak of that many threads: the peak of one
 * thread given on the command line (bench_fma_peak 1's amx line) times the threads, each thread on its own core.
 *
 * usage: bench_bgemm_peak [repeats] [amx_bf16_peak_gflops of one thread]
 *   e.g. bench_bgemm_peak 11 $(./build/bench/bench_fma_peak 1 | awk '/^amx_bf16_peak/ {print $2}') */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/bgemm.h"

typedef struct shape {
    const char *name;
    size_t M, N, K;
} shape;

static const shape shapes[] = {
    {"square 1024", 1024, 1024, 1024},
    {"square 2048", 2048, 2048, 2048},
    {"mlp 784 -> 1024 forward", 256, 1024, 784},
    {"mlp 1024 -> 1024 forward", 256, 1024, 1024},
    {"256 x 256 x 1024 (all in L2)", 256, 256, 1024},
};

static void *alloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_bgemm_peak: out of memory\n");
        exit(1);
    }
    return p;
}

/* Small values, so that no product meets denormals or infinities. */
static float *floats(size_t n) {
    float *p = alloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)(i % 13) * 0.01f - 0.06f;
    return p;
}

/* The operands of one shape in both forms, and a workspace for the most threads. */
typedef struct operands {
    float *a, *b, *c, *work;
    uint16_t *a16, *b16;
    uint32_t *panels;
} operands;

static operands operands_of(const shape *s, int threads) {
    operands o = {floats(s->M * s->K), floats(s->K * s->N), floats(s->M * s->N),
                  floats(bgemm_workspace_floats(s->M, s->N, s->K, threads)), NULL, NULL, NULL};
    o.a16 = alloc(s->M * s->K * sizeof *o.a16);
    o.b16 = alloc(s->K * s->N * sizeof *o.b16);
    bgemm_round_weights(o.a16, o.a, s->M * s->K);
    bgemm_round_weights(o.b16, o.b, s->K * s->N);
    o.panels = alloc(bgemm_panels_words(s->K, s->N) * sizeof *o.panels);
    float *stage = floats(bgemm_panels_stage_floats());
    bgemm_pack_panels16(o.panels, s->K, s->N, (bgemm_mat16){o.b16, s->N, 1}, stage);
    free(stage);
    return o;
}

static void free_operands(operands *o) {
    free(o->a), free(o->b), free(o->c), free(o->work), free(o->a16), free(o->b16), free(o->panels);
}

enum { FLOATS, PACKED, N_KINDS };
static const char *const kind_names[N_KINDS] = {"floats", "packed"};

static void product(int kind, const shape *s, const operands *o, int threads) {
    if (kind == FLOATS)
        bgemm(s->M, s->N, s->K, (sgemm_mat){o->a, s->K, 1}, (sgemm_mat){o->b, s->N, 1}, o->c, s->N, NULL, false,
              o->work, threads);
    else
        bgemm_panels_out(s->M, s->N, s->K, (sgemm_mat){0}, (bgemm_mat16){o->a16, s->K, 1},
                         (bgemm_panels_of){o->panels, s->K, s->N}, o->c, s->N, NULL, false, NULL, o->work, threads);
}

/* Seconds of the fastest of `repeats` warm calls. */
static double best_seconds(int kind, const shape *s, const operands *o, int threads, int repeats) {
    product(kind, s, o, threads); /* first touch of C and the workspace */
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        const double t0 = omp_get_wtime();
        product(kind, s, o, threads);
        const double t = omp_get_wtime() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 11;
    const double peak1 = argc > 2 ? atof(argv[2]) : 0.0;
    if (repeats < 1 || argc > 3 || peak1 < 0) {
        fprintf(stderr, "usage: bench_bgemm_peak [repeats >= 1] [amx_bf16_peak_gflops of one thread]\n");
        return 2;
    }
    if (!bgemm_enabled()) {
        printf("bench_bgemm_peak: this CPU or build has no AVX512_BF16; bgemm runs its portable kernel here\n");
        return 0;
    }
    const int most = omp_get_max_threads() < 2 ? omp_get_max_threads() : 2;
    printf("| shape | operands | threads | GFLOP/s | of the AMX peak |\n|---|---|--:|--:|--:|\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        operands o = operands_of(s, most);
        for (int kind = 0; kind < N_KINDS; kind++)
            for (int threads = 1; threads <= most; threads++) {
                const double gflops =
                    2.0 * (double)s->M * (double)s->N * (double)s->K / best_seconds(kind, s, &o, threads, repeats) * 1e-9;
                if (peak1 > 0)
                    printf("| %s | %s | %d | %.1f | %.2f |\n", s->name, kind_names[kind], threads, gflops,
                           gflops / (peak1 * threads));
                else
                    printf("| %s | %s | %d | %.1f | - |\n", s->name, kind_names[kind], threads, gflops);
                fflush(stdout);
            }
        free_operands(&o);
    }
    return 0;
}

/* bench_gelu: the GELU op's forward and backward (src/ops/gelu.c) on gpt's MLP activations (8 samples x 256
 * tokens x 1024 features, float32), over inputs drawn from normal distributions of several widths: erf's exp
 * form runs only over the elements beyond sqrt 2 of 0, so the cost depends on how many there are (a fifth of
 * a standard normal's, 5% at std 0.75). Beside each, the same formula over every element through vm_erff (both
 * of erf's forms computed and one selected), the op's loop before it gathered the outliers.
 *
 *   bench_gelu [threads] [repeats]   prints, per std: ns an element, forward and backward (the best of
 *                                    `repeats` calls, default 20), of the op and of the plain loop
 *
 * threads: default 1. Exit status 0, or 2 on bad arguments. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clones.h"
#include "kernels/vmath.h"
#include "ops/node.h"
#include "ops/op.h"

#define N ((size_t)8 * 256 * 1024)

/* The formula over every element, one expression each (the reference, not the op). */
VM_KERNEL static void plain_forward(float *y, const float *x, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + vm_erff(x[i] * 0.70710678118654752440f));
}

VM_KERNEL static void plain_backward(float *dx, const float *x, const float *dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float cdf = 0.5f * (1.0f + vm_erff(x[i] * 0.70710678118654752440f));
        dx[i] = 0.0f + dy[i] * (cdf + x[i] * (0.39894228040143267794f * vm_expf(-0.5f * x[i] * x[i])));
    }
}

/* Normal samples of standard deviation sd (Box-Muller over a fixed xorshift stream: the same inputs every run). */
static void fill_normal(float *x, size_t n, double sd) {
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const double u1 = ((s >> 11) + 1.0) / 9007199254740993.0;
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const double u2 = (s >> 11) / 9007199254740992.0;
        x[i] = (float)(sd * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

typedef struct timed {
    const op_call *c;
    float *y, *dx;
    const float *x, *dy;
    int threads;
} timed;

/* ns an element of the best of `repeats` runs of what (0: op forward, 1: op backward, 2, 3: the plain loops,
 * split over the threads as the op splits its elements). */
static double best_ns(const timed *t, int what, int repeats) {
    double best = INFINITY;
    for (int r = 0; r < repeats; r++) {
        const double t0 = omp_get_wtime();
        if (what == 0) op_gelu.forward(t->c);
        else if (what == 1) op_gelu.backward(t->c);
        else {
            #pragma omp parallel num_threads(t->threads)
            {
                const size_t k = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
                const size_t lo = N * k / T, hi = N * (k + 1) / T;
                if (what == 2) plain_forward(t->y + lo, t->x + lo, hi - lo);
                else plain_backward(t->dx + lo, t->x + lo, t->dy + lo, hi - lo);
            }
        }
        const double dt = omp_get_wtime() - t0;
        if (dt < best) best = dt;
    }
    return best * 1e9 / (double)N;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 1, repeats = argc > 2 ? atoi(argv[2]) : 20;
    if (threads < 1 || repeats < 1) {
        fprintf(stderr, "usage: bench_gelu [threads >= 1] [repeats >= 1]\n");
        return 2;
    }
    omp_set_num_threads(threads);
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *dy = malloc(N * sizeof *dy);
    float *dx = malloc(N * sizeof *dx);
    if (!x || !y || !dy || !dx) {
        fprintf(stderr, "bench_gelu: out of memory (4 arrays of %zu floats)\n", N);
        return 2;
    }
    op_node node;
    memset(&node, 0, sizeof node);
    node.in_numel[0] = N;
    node.out_numel = N;
    op_call c = {.node = &node, .m = 1, .threads = threads, .in = {x}, .out = y, .din = {dx}, .dout = dy,
                 .din_fresh = 1u};
    const timed t = {.c = &c, .y = y, .dx = dx, .x = x, .dy = dy, .threads = threads};
    fill_normal(dy, N, 1.0);
    printf("gelu over %zu elements, %d threads, ns an element (best of %d)\n", N, threads, repeats);
    printf("%6s %12s %12s %12s %12s\n", "std", "op forward", "op backward", "all forward", "all backward");
    const double sds[] = {0.3, 0.75, 1.0, 3.0};
    for (size_t i = 0; i < sizeof sds / sizeof sds[0]; i++) {
        fill_normal(x, N, sds[i]);
        printf("%6.2f %12.3f %12.3f %12.3f %12.3f\n", sds[i], best_ns(&t, 0, repeats), best_ns(&t, 1, repeats),
               best_ns(&t, 2, repeats), best_ns(&t, 3, repeats));
    }
    free(x), free(y), free(dy), free(dx);
    return 0;
}

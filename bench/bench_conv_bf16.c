/* The 3x3 stride-1 convolutions of the cnn, resnet20 and unet workloads, one sample on one thread: the rate of
 * the forward, the input gradient and the weight gradient through the float32 kernels a float32 plan chooses between (the direct
 * kernel, src/kernels/conv3x3_direct.c, and Winograd, conv3x3_winograd.c) and through conv3x3_bf16
 * (src/kernels/conv3x3_bf16.c, vdpbf16ps on channel pairs), and the weight gradient also through Winograd with its
 * products on bfloat16 pairs of tiles (src/kernels/conv3x3_winograd_dw_bf16.c), in GFLOP/s of the direct convolution's 2 c co 9 h w
 * flops (Winograd's figure is that work over its time, not its own multiply count; Winograd's and conv3x3_bf16's
 * input gradients written fresh, as a plan runs them where the convolution is the gradient's first writer): read
 * against bench_fma_peak's two lines. The best of `repeats` timed rounds, each about 0.1 s of the thread's CPU
 * time (not wall time: on a machine shared with other work the figures stay those of the core). Where the CPU
 * lacks AVX512_BF16 the bf16 columns are 0 (only the portable twin, for tests, would run there).
 *
 * usage: bench_conv_bf16 [repeats] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/bf16.h"
#include "kernels/conv3x3_bf16.h"
#include "kernels/conv3x3_direct.h"
#include "kernels/conv3x3_winograd.h"
#include "kernels/isa.h"

typedef struct shape_row {
    const char *name;
    conv3x3_shape s;
} shape_row;

static const shape_row rows[] = {
    {"cnn conv2", {32, 64, 14, 14}},        {"resnet20 conv1", {3, 16, 32, 32}}, {"resnet20 stage 1", {16, 16, 32, 32}},
    {"resnet20 stage 2", {32, 32, 16, 16}}, {"resnet20 stage 3", {64, 64, 8, 8}},
    {"unet level 1", {16, 16, 256, 256}},   {"unet dec1.conv1", {32, 16, 256, 256}},
    {"unet level 2", {32, 32, 128, 128}},   {"unet level 3", {64, 64, 64, 64}},
    {"unet level 4", {128, 128, 32, 32}},
    {"unet bottleneck", {256, 256, 16, 16}},
};

enum { FWD_DIRECT, FWD_WINO, FWD_BF16, DX_DIRECT, DX_WINO, DX_BF16, DW_DIRECT, DW_WINO, DW_BF16, DW_WINO_BF16, N_KERNELS };

/* The kernels that need AVX512_BF16 to be timed: the third of each direction, and Winograd's dW on bf16 pairs. */
static bool needs_bf16(int k) { return k % 3 == 2 || k == DW_WINO_BF16; }

/* Buffers of one shape, filled with bfloat16 values of moderate size. */
typedef struct bufs {
    float *x, *y, *w, *b, *dx, *dy, *direct, *wino, *wino_u, *bf16, *bf16_u, *dw, *du, *wdw, *bdw;
} bufs;

static float *filled(size_t n, unsigned seed) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_conv_bf16: out of memory for %zu floats\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = bf16_round((float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f);
    return p;
}

static size_t most(size_t a, size_t b) { return a > b ? a : b; }

static bufs bufs_of(const conv3x3_shape *s) {
    size_t nd, uw, uw2, sw, sw2, nb, ub, ub2, du, wdw, bdw;
    if (!conv3x3_scratch_floats(s, &nd) || !conv3x3_winograd_weights_floats(s, false, &uw) ||
        !conv3x3_winograd_weights_floats(s, true, &uw2) || !conv3x3_winograd_scratch_floats(s, false, 1, &sw) ||
        !conv3x3_winograd_scratch_floats(s, true, 1, &sw2) || !conv3x3_bf16_scratch_floats(s, &nb) ||
        !conv3x3_bf16_weights_floats(s, false, &ub) || !conv3x3_bf16_weights_floats(s, true, &ub2) ||
        !conv3x3_winograd_dw_floats(s, &du) || !conv3x3_winograd_dw_scratch_floats(s, &wdw) ||
        !conv3x3_bf16_dw_scratch_floats(s, &bdw)) {
        fprintf(stderr, "bench_conv_bf16: a scratch size overflows\n");
        exit(1);
    }
    const size_t xn = s->c * s->h * s->w, yn = s->co * s->h * s->w;
    return (bufs){.x = filled(xn, 1), .y = filled(yn, 2), .w = filled(s->co * s->c * 9, 3), .b = filled(s->co, 4),
                  .dx = filled(xn, 5), .dy = filled(yn, 6), .direct = filled(nd, 7), .wino = filled(most(sw, sw2), 8),
                  .wino_u = filled(most(uw, uw2), 9), .bf16 = filled(nb, 10), .bf16_u = filled(most(ub, ub2), 11),
                  .dw = filled(s->co * s->c * 9, 12), .du = filled(du, 13), .wdw = filled(wdw, 14),
                  .bdw = filled(bdw, 15)};
}

static void bufs_free(bufs *b) {
    float *all[] = {b->x,  b->y,      b->w,    b->b,    b->dx, b->dy, b->direct, b->wino,
                    b->wino_u, b->bf16, b->bf16_u, b->dw, b->du, b->wdw, b->bdw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* One call of kernel k (its weights derived beforehand: once per call of the op, not per sample). */
static void run(int k, const conv3x3_shape *s, bufs *b) {
    switch (k) {
    case FWD_DIRECT: conv3x3_forward(s, b->y, b->x, b->w, b->b, b->direct, 0, 1); break;
    case FWD_WINO: conv3x3_winograd_forward(s, b->y, b->x, b->wino_u, b->b, b->wino, 0, 1); break;
    case FWD_BF16: conv3x3_bf16_forward(s, b->y, (conv3x3_bf16_src){.f = b->x}, b->bf16_u, b->b, b->bf16, 0, 1); break;
    case DX_DIRECT: conv3x3_backward(s, b->dx, NULL, NULL, b->dy, b->x, b->w, b->direct, 0, 1); break;
    case DX_WINO: conv3x3_winograd_backward_dx(s, b->dx, b->dy, b->wino_u, b->wino, true, 0, 1); break;
    case DX_BF16: conv3x3_bf16_backward_dx(s, b->dx, b->dy, b->bf16_u, b->bf16, true, 0, 1); break;
    case DW_DIRECT: conv3x3_backward(s, NULL, b->dw, NULL, b->dy, b->x, b->w, b->direct, 0, 1); break;
    case DW_WINO: conv3x3_winograd_dw_accumulate(s, b->du, b->dy, b->x, b->wdw); break;
    case DW_WINO_BF16: conv3x3_winograd_dw_accumulate_bf16(s, b->du, b->dy, b->x, b->wdw); break;
    default: conv3x3_bf16_backward_dw(s, b->dw, b->dy, (conv3x3_bf16_src){.f = b->x}, b->bdw, 0, 1); break;
    }
}

static void derive(int k, const conv3x3_shape *s, bufs *b) {
    const bool dx = k >= DX_DIRECT && k <= DX_BF16;
    if (k == FWD_WINO || k == DX_WINO) conv3x3_winograd_weights(s, b->wino_u, b->w, dx, 0, 1);
    if (k == FWD_BF16 || k == DX_BF16) conv3x3_bf16_weights(s, b->bf16_u, b->w, dx, 0, 1);
}

/* Seconds of CPU time this thread has run: what a kernel costs when other processes share the cores. */
static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* GFLOP/s of kernel k: the best of `repeats` rounds of calls that take about 0.1 s. */
static double rate(int k, const conv3x3_shape *s, bufs *b, int repeats) {
    const double flops = 2.0 * (double)s->c * (double)s->co * 9.0 * (double)s->h * (double)s->w;
    derive(k, s, b);
    run(k, s, b);
    double t0 = thread_seconds();
    run(k, s, b);
    const double once = thread_seconds() - t0;
    const long calls = once > 0.1 ? 1 : (long)(0.1 / (once > 1e-7 ? once : 1e-7)) + 1;
    double best = 0.0;
    for (int r = 0; r < repeats; r++) {
        t0 = thread_seconds();
        for (long i = 0; i < calls; i++) run(k, s, b);
        const double g = flops * (double)calls / (thread_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    return best;
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 3;
    if (repeats < 1 || argc > 2) {
        fprintf(stderr, "usage: bench_conv_bf16 [repeats >= 1]\n");
        return 2;
    }
    if (!conv3x3_direct_available()) {
        printf("no AVX-512: the direct and bf16 kernels do not run on this CPU\n");
        return 0;
    }
    omp_set_num_threads(1);
    const bool hw = kernel_isa_now() >= KERNEL_ISA_AVX512_BF16;
    printf("one sample, one thread, GFLOP/s (best of %d)%s\n", repeats,
           hw ? "" : "; no AVX512_BF16: no bf16 kernel to time");
    printf("%-18s %5s %5s %4s | %-22s | %-22s | %-30s\n", "layer", "c", "co", "h", "forward direct/wino/bf16",
           "input grad direct/wino/bf16", "weight grad direct/wino/bf16/wino bf16");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const conv3x3_shape *s = &rows[i].s;
        bufs b = bufs_of(s);
        double g[N_KERNELS];
        for (int k = 0; k < N_KERNELS; k++) g[k] = hw || !needs_bf16(k) ? rate(k, s, &b, repeats) : 0;
        printf("%-18s %5zu %5zu %4zu |", rows[i].name, s->c, s->co, s->h);
        for (int k = 0; k < N_KERNELS; k++) printf(" %6.0f%s", g[k], k % 3 == 2 && k + 2 < N_KERNELS ? "   |" : "");
        printf("\n");
        bufs_free(&b);
    }
    return 0;
}

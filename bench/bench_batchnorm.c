/* bench_batchnorm: BatchNorm with its ReLU folded in (src/ops/batchnorm2d.c), forward and backward, on
 * ResNet-20's three stage shapes at its batch of 128: the float32 path, and the paths of a bf16 plan (the
 * forward rounding its output, with and without the packed copy of it the plan keeps for a later reader; the
 * backward reading its kept input from the packed copy).
 *
 *   bench_batchnorm [threads] [repeats]   prints, per shape: ms a call (the best of `repeats`, default 20)
 *
 * threads: default 1. Exit status 0, or 2 on bad arguments or no memory. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bf16.h"
#include "ops/node.h"
#include "ops/op.h"

#define M 128

enum { GAMMA, BETA, RMEAN, RVAR };

typedef struct bn_case {
    op_node node;
    float *x, *y, *dy, *dx, *w[4], *dw[2], *saved;
    bf16 *xp, *copy;
} bn_case;

static void fill(float *v, size_t n, uint64_t s) {
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        v[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

static bool case_init(bn_case *b, size_t C, size_t H, size_t W) {
    memset(b, 0, sizeof *b);
    const size_t n = (size_t)M * C * H * W;
    b->node.op = &op_batchnorm2d_relu;
    b->node.n_inputs = 1;
    b->node.in_shape[0] = (snug_shape){.rank = 3, .dims = {C, H, W}};
    b->node.out_shape = b->node.in_shape[0];
    b->node.in_numel[0] = b->node.out_numel = C * H * W;
    b->node.p.norm.eps = 1e-5f, b->node.p.norm.momentum = 0.1f;
    b->x = malloc(n * sizeof *b->x), b->y = malloc(n * sizeof *b->y), b->dy = malloc(n * sizeof *b->dy);
    b->dx = malloc(n * sizeof *b->dx), b->saved = malloc(2 * C * sizeof *b->saved);
    b->xp = malloc(n * sizeof *b->xp), b->copy = malloc(n * sizeof *b->copy);
    bool ok = b->x && b->y && b->dy && b->dx && b->saved && b->xp && b->copy;
    for (int i = 0; i < 4; i++) ok = ok && (b->w[i] = malloc(C * sizeof(float)));
    for (int i = 0; i < 2; i++) ok = ok && (b->dw[i] = calloc(C, sizeof(float)));
    if (!ok) return false;
    fill(b->x, n, 0x9E3779B97F4A7C15u), fill(b->dy, n, 0x2545F4914F6CDD1Du);
    bf16_round_floats(b->x, b->x, n); /* the values a bf16 run feeds it */
    bf16_pack(b->xp, b->x, n);
    for (size_t c = 0; c < C; c++) b->w[GAMMA][c] = 1.0f, b->w[BETA][c] = 0.0f, b->w[RMEAN][c] = 0.0f;
    for (size_t c = 0; c < C; c++) b->w[RVAR][c] = 1.0f;
    return true;
}

static void case_free(bn_case *b) {
    free(b->x), free(b->y), free(b->dy), free(b->dx), free(b->saved), free(b->xp), free(b->copy);
    for (int i = 0; i < 4; i++) free(b->w[i]);
    for (int i = 0; i < 2; i++) free(b->dw[i]);
}

/* A training call of the case: float32 (bf16 false), or a bf16 plan's with what the flags say. */
static op_call call_of(const bn_case *b, int threads, bool bf16, bool copy, bool packed_input) {
    op_call c = {.node = &b->node, .m = M, .threads = threads, .in = {b->x}, .out = b->y, .din = {b->dx},
                 .dout = b->dy, .din_fresh = 1u, .saved = b->saved, .training = true, .bf16 = bf16};
    for (int i = 0; i < 4; i++) c.w[i] = b->w[i];
    c.dw[GAMMA] = b->dw[0], c.dw[BETA] = b->dw[1], c.state[RMEAN] = b->w[RMEAN], c.state[RVAR] = b->w[RVAR];
    c.packed.round = bf16;
    c.packed.copy = copy ? b->copy : NULL;
    if (packed_input) c.in[0] = NULL, c.in_packed = b->xp;
    return c;
}

/* ms of the best of `repeats` calls of forward (or backward). */
static double best_ms(const op_call *c, bool backward, int repeats) {
    double best = INFINITY;
    for (int r = 0; r < repeats; r++) {
        const double t0 = omp_get_wtime();
        if (backward) op_batchnorm2d_relu.backward(c);
        else op_batchnorm2d_relu.forward(c);
        const double dt = omp_get_wtime() - t0;
        if (dt < best) best = dt;
    }
    return best * 1e3;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 1, repeats = argc > 2 ? atoi(argv[2]) : 20;
    if (threads < 1 || repeats < 1) {
        fprintf(stderr, "usage: bench_batchnorm [threads >= 1] [repeats >= 1]\n");
        return 2;
    }
    omp_set_num_threads(threads);
    static const size_t shapes[][3] = {{16, 32, 32}, {32, 16, 16}, {64, 8, 8}};
    printf("batchnorm2d + relu, %d samples, %d threads, ms a call (best of %d)\n", M, threads, repeats);
    printf("%-14s %10s %10s %12s %10s %12s\n", "C, H x W", "fwd fp32", "fwd bf16", "bf16 + copy", "bwd fp32",
           "bwd packed");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        bn_case b;
        if (!case_init(&b, shapes[s][0], shapes[s][1], shapes[s][2])) {
            fprintf(stderr, "bench_batchnorm: out of memory\n");
            case_free(&b);
            return 2;
        }
        const op_call f32 = call_of(&b, threads, false, false, false), h = call_of(&b, threads, true, false, false);
        const op_call hc = call_of(&b, threads, true, true, false), hp = call_of(&b, threads, true, false, true);
        char name[32];
        snprintf(name, sizeof name, "%zu, %zux%zu", shapes[s][0], shapes[s][1], shapes[s][2]);
        printf("%-14s %10.3f %10.3f %12.3f %10.3f %12.3f\n", name, best_ms(&f32, false, repeats),
               best_ms(&h, false, repeats), best_ms(&hc, false, repeats), best_ms(&f32, true, repeats),
               best_ms(&hp, true, repeats));
        case_free(&b);
    }
    return 0;
}

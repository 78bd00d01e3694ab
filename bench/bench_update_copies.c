/* bench_update_copies: the optimizer's update over the mlp's parameters (784-1024-1024-10: 1.86M, SGD with
 * momentum) in a bf16 plan, two ways: the update alone followed by the pass that rounds the three weights into
 * their kept bfloat16 copies (what the first forward after a step did), against the update writing the copies
 * itself as it writes each block of new weights (optim_span.copy16, what the trainer does now).
 *
 *   bench_update_copies [repeats]   prints the CPU time of one thread for each (the best of `repeats`
 *                                   rounds, default 40, the two ways alternating within a round)
 *
 * Run it with OMP_NUM_THREADS=1. Exit status 0, or 2 on bad arguments. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/bgemm.h"
#include "optim/optim.h"

#define TENSORS 6

static const size_t sizes[TENSORS] = {1024 * 784, 1024, 1024 * 1024, 1024, 10 * 1024, 10};
static const bool weights[TENSORS] = {true, false, true, false, true, false};

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* bytes on 64-byte lines, as the planner's blocks are. */
static void *lines(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

static void round_pass(uint16_t *w16, const float *p, const optim_span *spans) {
    for (int i = 0; i < TENSORS; i++)
        if (weights[i]) bgemm_round_weights(w16 + spans[i].offset, p + spans[i].offset, spans[i].numel);
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 40;
    if (repeats < 1) {
        fprintf(stderr, "bench_update_copies: repeats must be a positive count, not '%s'\n", argv[1]);
        return 2;
    }
    optim_span spans[TENSORS], fused[TENSORS];
    size_t n = 0;
    for (int i = 0; i < TENSORS; i++) spans[i] = (optim_span){.offset = n, .numel = sizes[i]}, n += sizes[i];
    float *p = lines(n * sizeof *p), *g = lines(n * sizeof *g);
    float *buf = lines(n * sizeof *buf);
    uint16_t *w16 = lines(n * sizeof *w16);
    if (!p || !g || !buf || !w16) {
        fprintf(stderr, "bench_update_copies: out of memory for %zu parameters\n", n);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)((i * 7919u) % 211u) / 1000.0f - 0.1f;
        g[i] = 1e-3f * (float)((i * 31u) % 17u);
        buf[i] = 0.0f;
    }
    memcpy(fused, spans, sizeof spans);
    for (int i = 0; i < TENSORS; i++) fused[i].copy16 = weights[i] ? w16 + spans[i].offset : NULL;
    const optim_state apart = {.cfg = snug_optim_config_default(), .state = buf, .n = n, .spans = spans,
                               .n_spans = TENSORS};
    optim_state together = apart;
    together.spans = fused;
    together.round16 = bgemm_round_weights;
    double update = 1e9, pass = 1e9, both = 1e9;
    for (int r = 0; r < repeats; r++) {
        optim_state a = apart, b = together;
        const double t0 = thread_seconds();
        optim_step(&a, p, g, 1e-6f);
        const double t1 = thread_seconds();
        round_pass(w16, p, spans);
        const double t2 = thread_seconds();
        optim_step(&b, p, g, 1e-6f);
        const double t3 = thread_seconds();
        update = t1 - t0 < update ? t1 - t0 : update;
        pass = t2 - t1 < pass ? t2 - t1 : pass;
        both = t3 - t2 < both ? t3 - t2 : both;
    }
    printf("mlp update (%zu parameters), ms, best of %d: update %.3f + rounding pass %.3f = %.3f; update writing "
           "the copies %.3f\n", n, repeats, update * 1e3, pass * 1e3, (update + pass) * 1e3, both * 1e3);
    free(p), free(g), free(buf), free(w16);
    return 0;
}

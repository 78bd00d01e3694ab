/* bench_pool: the max-pool's forward (src/ops/maxpool2d.c), ReLU folded in, on the cnn's two pools at its bench
 * batch (64 samples: 32 x 28 x 28 and 64 x 14 x 14 inputs) and on a unet level's (8 samples, 16 x 256 x 256), in
 * the three forms a plan binds it: float32 input and output (a float32 plan, or a bf16 plan that packs nothing);
 * float32 input and output with the bf16 plan's packed copy written beside; and input and output kept only in
 * bfloat16 (op_call.packed.in, packed.out), half the bytes read and written. The inputs are bfloat16 values, as
 * a bf16 plan's are; each form's outputs and argmax bytes are the same bits (tests/test_maxpool_fast.c).
 *
 *   bench_pool [repeats]   prints, per pool: ms a call on one thread, the best of `repeats` rounds of
 *                          calls (default 5) of about 0.1 s of the thread's CPU time each (not wall time: on a
 *                          machine shared with other work the figures stay those of the core)
 *
 * Exit status 0, or 2 on bad arguments. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/graph.h"
#include "kernels/bf16.h"
#include "ops/op.h"
#include "snug.h"

typedef struct pool_row {
    const char *name;
    size_t c, h, w, m;
} pool_row;

static const pool_row rows[] = {
    {"cnn pool1", 32, 28, 28, 64},
    {"cnn pool2", 64, 14, 14, 64},
    {"unet pool1", 16, 256, 256, 8},
};

enum { FORM_FLOAT, FORM_COPY, FORM_PACKED, N_FORMS };

/* Seconds of CPU time this thread has run: what a kernel costs when other processes share the cores. */
static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The buffers of one pool at its batch: the input in both precisions (the same bfloat16 values), the outputs in
 * both, the argmax bytes. */
typedef struct pool_bufs {
    float *x, *y;
    bf16 *xh, *yh;
    uint8_t *arg;
} pool_bufs;

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "bench_pool: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static pool_bufs bufs_of(size_t in, size_t out) {
    pool_bufs b = {xmalloc(in * sizeof(float)), xmalloc(out * sizeof(float)), xmalloc(in * sizeof(bf16)),
                   xmalloc(out * sizeof(bf16)), xmalloc(out)};
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < in; i++) { /* values in [-1, 1), half of them below zero: ReLU zeros and maxima */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b.x[i] = (float)(s >> 40) / (float)(1u << 23) - 1.0f;
    }
    bf16_pack(b.xh, b.x, in);
    bf16_unpack(b.x, b.xh, in);
    return b;
}

static op_call call_of(const graph_node *n, size_t m, int form, const pool_bufs *b) {
    op_call c = {.node = (const op_node *)n, .m = m, .threads = 1, .saved = b->arg, .bf16 = form != FORM_FLOAT};
    if (form == FORM_PACKED) {
        c.packed.in[0] = b->xh;
        c.packed.out = b->yh;
        return c;
    }
    c.in[0] = b->x;
    c.out = b->y;
    c.packed.round = form == FORM_COPY;
    c.packed.copy = form == FORM_COPY ? b->yh : NULL;
    return c;
}

/* ms a call: the best of `repeats` rounds of calls that take about 0.1 s. */
static double ms_per_call(const graph_node *n, const op_call *c, int repeats) {
    n->op->forward(c);
    double t0 = thread_seconds();
    n->op->forward(c);
    const double once = thread_seconds() - t0;
    const long calls = once > 0.1 ? 1 : (long)(0.1 / (once > 1e-7 ? once : 1e-7)) + 1;
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        t0 = thread_seconds();
        for (long i = 0; i < calls; i++) n->op->forward(c);
        const double t = (thread_seconds() - t0) / (double)calls;
        if (t < best) best = t;
    }
    return best * 1e3;
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1 || argc > 2) {
        fprintf(stderr, "usage: bench_pool [repeats >= 1]\n");
        return 2;
    }
    omp_set_num_threads(1);
    printf("max-pool 2x2 forward, ReLU folded in, one thread, ms a call (best of %d)\n", repeats);
    printf("%-12s %4s %4s %4s %4s | %8s %8s %8s\n", "pool", "m", "c", "h", "w", "float32", "+copy", "packed");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const pool_row *r = &rows[i];
        snug_graph *g = snug_graph_new("pool");
        snug_maxpool2d(g, "pool", snug_relu(g, "relu", snug_input(g, "x", r->c, r->h, r->w)), 2, 2);
        const graph_node *n = &g->nodes[2]; /* input, the folded ReLU (a view), the pool */
        const size_t in = r->m * r->c * r->h * r->w, out = in / 4;
        pool_bufs b = bufs_of(in, out);
        printf("%-12s %4zu %4zu %4zu %4zu |", r->name, r->m, r->c, r->h, r->w);
        for (int f = 0; f < N_FORMS; f++) {
            const op_call c = call_of(n, r->m, f, &b);
            printf(" %8.3f", ms_per_call(n, &c, repeats));
        }
        printf("\n");
        free(b.x), free(b.y), free(b.xh), free(b.yh), free(b.arg);
        snug_graph_free(g);
    }
    return 0;
}

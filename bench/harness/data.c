/* The synthetic data of a benchmark workload, held in memory so that reading a batch costs a copy and nothing
 * else, as the tensors bench/pytorch_bench.py keeps do: inputs U(-1, 1) (or token ids), targets uniform over the
 * classes, one per sample, pixel or token, through the public snug_dataset_from_arrays. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "bench.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/rng.h"

enum { STREAM_INPUTS = 1, STREAM_TARGETS = 2 };

static void draw(float *x, int32_t *y, const bench_workload *w, size_t inputs, size_t targets, uint64_t seed) {
    for (size_t i = 0; i < inputs; i++)
        x[i] = w->tokens ? (float)snug_rng_below(seed, STREAM_INPUTS, i, w->classes)
                         : 2.0f * snug_rng_uniform(seed, STREAM_INPUTS, i) - 1.0f;
    for (size_t i = 0; i < targets; i++) y[i] = (int32_t)snug_rng_below(seed, STREAM_TARGETS, i, w->classes);
}

snug_status bench_dataset_new(const bench_workload *w, const snug_graph *g, size_t n, uint64_t seed,
                              snug_dataset **out, snug_error *err) {
    *out = NULL;
    snug_shape shape = snug_tensor_shape(g, 0);  /* the input is the graph's first tensor */
    size_t numel, inputs, targets;
    if (shape.rank < 1 || !size_prod(shape.dims, (size_t)shape.rank, &numel) || !size_mul(n, numel, &inputs) ||
        !size_mul(n, w->targets, &targets) || inputs > SIZE_MAX / sizeof(float) || targets > SIZE_MAX / 4)
        return snug_fail(err, SNUG_E_OVERFLOW, "bench %s: %zu samples of its input do not fit in memory", w->name, n);
    float *x = malloc(inputs * sizeof *x);
    int32_t *y = malloc(targets * sizeof *y);
    snug_status st = SNUG_OK;
    if (!x || !y) st = snug_fail(err, SNUG_E_OOM, "bench %s: cannot hold %zu synthetic samples in memory", w->name, n);
    if (st == SNUG_OK) {
        draw(x, y, w, inputs, targets, seed);
        st = snug_dataset_from_arrays(x, shape, y, w->targets, n, w->classes, out, err);
    }
    free(x);
    free(y);
    return st;
}

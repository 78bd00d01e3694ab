/* The synthetic data of a benchmark workload, held in memory so that reading a batch costs a copy and nothing
 * else, as the tensors bench/pytorch_bench.py keeps do: inputs U(-1, 1) (or token ids), targets uniform over the
 * classes, one per sample, pixel or token. The public snug_dataset_from_memory takes one label per sample only,
 * so this is a dataset table (data/dataset.h) of its own. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"

enum { STREAM_INPUTS = 1, STREAM_TARGETS = 2 };

typedef struct bench_data {
    float *inputs;     /* (n, sample_numel) */
    int32_t *targets;  /* (n, targets_per_sample) */
} bench_data;

static void fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // x: (n, sample)
    const bench_data *d = ds->impl;
    for (size_t i = 0; i < n; i++)
        memcpy(x + i * ds->sample_numel, d->inputs + idx[i] * ds->sample_numel, ds->sample_numel * sizeof *x);
}

static void fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // y: (n, targets)
    const bench_data *d = ds->impl;
    const size_t t = ds->targets_per_sample;
    for (size_t i = 0; i < n; i++) memcpy(y + i * t, d->targets + idx[i] * t, t * sizeof *y);
}

static void destroy(snug_dataset *ds) {
    bench_data *d = ds->impl;
    if (!d) return;
    free(d->inputs);
    free(d->targets);
    free(d);
    ds->impl = NULL;
}

static const dataset_ops bench_ops = {.fill_inputs = fill_inputs, .fill_targets = fill_targets, .destroy = destroy};

static void draw(bench_data *d, const bench_workload *w, size_t inputs, size_t targets, uint64_t seed) {
    for (size_t i = 0; i < inputs; i++)
        d->inputs[i] = w->tokens ? (float)snug_rng_below(seed, STREAM_INPUTS, i, w->classes)
                                 : 2.0f * snug_rng_uniform(seed, STREAM_INPUTS, i) - 1.0f;
    for (size_t i = 0; i < targets; i++) d->targets[i] = (int32_t)snug_rng_below(seed, STREAM_TARGETS, i, w->classes);
}

snug_status bench_dataset_new(const bench_workload *w, const snug_graph *g, size_t n, uint64_t seed,
                              snug_dataset **out, snug_error *err) {
    *out = NULL;
    snug_shape shape = snug_tensor_shape(g, 0);  /* the input is the graph's first tensor */
    size_t numel, inputs, targets;
    if (shape.rank < 1 || !size_prod(shape.dims, shape.rank, &numel) || !size_mul(n, numel, &inputs) ||
        !size_mul(n, w->targets, &targets))
        return snug_fail(err, SNUG_E_OVERFLOW, "bench %s: %zu samples of its input do not fit in memory", w->name, n);
    snug_dataset *ds = calloc(1, sizeof *ds);
    bench_data *d = calloc(1, sizeof *d);
    float *x = malloc(inputs * sizeof *x);
    int32_t *y = malloc(targets * sizeof *y);
    if (!ds || !d || !x || !y) {
        free(ds), free(d), free(x), free(y);
        return snug_fail(err, SNUG_E_OOM, "bench %s: cannot hold %zu synthetic samples in memory", w->name, n);
    }
    *d = (bench_data){.inputs = x, .targets = y};
    draw(d, w, inputs, targets, seed);
    *ds = (snug_dataset){.ops = &bench_ops, .n = n, .sample_shape = shape, .sample_numel = numel,
                         .classes = w->classes, .targets_per_sample = w->targets, .impl = d};
    *out = ds;
    return SNUG_OK;
}

/* A data set over the caller's callbacks (snug_dataset_from_source): the samples of each micro-batch are asked
 * for as the trainer needs them. A callback that fails, or targets outside [0, classes), leave zeros in the
 * buffer and a sticky error that the trainer reads before it uses the batch (dataset_read_status), so a bad
 * read stops the step with the caller's own message instead of training on garbage. */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "data/dataset.h"

typedef struct source_impl {
    snug_dataset_source src;
    snug_error failure;   /* the first failed read; status SNUG_OK while none */
} source_impl;

/* Records the first failure; a callback that returned false without a message still gets one. */
static void note_failure(source_impl *s, const snug_error *e, const char *callback) {
    if (s->failure.status != SNUG_OK) return;
    if (e->status != SNUG_OK) {
        s->failure = *e;
        return;
    }
    snug_fail(&s->failure, SNUG_E_IO, "the data set's %s callback failed without saying why (fill its snug_error)",
              callback);
}

static void source_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // (n, sample)
    source_impl *s = ds->impl;
    snug_error e = {0};
    if (s->failure.status == SNUG_OK && s->src.read_inputs(s->src.user, idx, n, x, &e)) return;
    note_failure(s, &e, "read_inputs");
    memset(x, 0, n * ds->sample_numel * sizeof *x);
}

static void source_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // (n, t)
    source_impl *s = ds->impl;
    const size_t count = n * ds->targets_per_sample;
    snug_error e = {0};
    if (s->failure.status != SNUG_OK || !s->src.read_targets(s->src.user, idx, n, y, &e)) {
        note_failure(s, &e, "read_targets");
        for (size_t i = 0; i < count; i++) y[i] = SNUG_IGNORE_TARGET;
        return;
    }
    for (size_t i = 0; i < count; i++) {
        if (y[i] == SNUG_IGNORE_TARGET || (y[i] >= 0 && (size_t)y[i] < ds->classes)) continue;
        if (s->failure.status == SNUG_OK)
            snug_fail(&s->failure, SNUG_E_FORMAT, "sample %zu: target %ld is not a class of [0, %zu) nor "
                      "SNUG_IGNORE_TARGET (-1)", idx[i / ds->targets_per_sample], (long)y[i], ds->classes);
        y[i] = SNUG_IGNORE_TARGET;
    }
}

static snug_status source_read_status(const snug_dataset *ds, snug_error *err) {
    const source_impl *s = ds->impl;
    if (s->failure.status == SNUG_OK) return SNUG_OK;
    if (err) *err = s->failure;
    return s->failure.status;
}

static void source_destroy(snug_dataset *ds) {
    source_impl *s = ds->impl;
    if (!s) return;
    if (s->src.close) s->src.close(s->src.user);
    free(s);
    ds->impl = NULL;
}

static const dataset_ops source_ops = {
    .fill_inputs = source_fill_inputs,
    .fill_targets = source_fill_targets,
    .destroy = source_destroy,
    .read_status = source_read_status,
};

static snug_status check_source(const snug_dataset_source *src, size_t *numel, snug_error *err) {
    if (!src || !src->read_inputs || !src->read_targets)
        return snug_fail(err, SNUG_E_ARG, "data source: read_inputs and read_targets are both needed");
    if (src->sample_shape.rank < 1 || src->sample_shape.rank > SNUG_MAX_DIMS)
        return snug_fail(err, SNUG_E_ARG, "data source: a sample shape has 1 to %d dimensions, got %d", SNUG_MAX_DIMS,
                         src->sample_shape.rank);
    bool zero = src->size == 0 || src->targets_per_sample == 0 || src->classes == 0;
    for (int d = 0; d < src->sample_shape.rank; d++) zero = zero || src->sample_shape.dims[d] == 0;
    if (zero)
        return snug_fail(err, SNUG_E_ARG, "data source: size, every dimension of the sample shape, targets per "
                         "sample and classes must all be at least 1");
    if (!size_prod(src->sample_shape.dims, src->sample_shape.rank, numel) || *numel > SIZE_MAX / sizeof(float))
        return snug_fail(err, SNUG_E_OVERFLOW, "data source: the sample size overflows");
    return SNUG_OK;
}

snug_status snug_dataset_from_source(const snug_dataset_source *src, snug_dataset **out, snug_error *err) {
    *out = NULL;
    size_t numel = 0;
    snug_status st = check_source(src, &numel, err);
    if (st != SNUG_OK) return st;
    snug_dataset *ds = calloc(1, sizeof *ds);
    source_impl *s = calloc(1, sizeof *s);
    if (!ds || !s) {
        free(ds);
        free(s);
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused a data set");
    }
    s->src = *src;
    *ds = (snug_dataset){.ops = &source_ops, .n = src->size, .sample_shape = src->sample_shape,
                         .sample_numel = numel, .classes = src->classes,
                         .targets_per_sample = src->targets_per_sample, .impl = s};
    *out = ds;
    return SNUG_OK;
}

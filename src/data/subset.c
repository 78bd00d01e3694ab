/* A view of `count` samples of another dataset, evenly spaced over it: sample i of the view is sample
 * floor(i * n / count) of the inner one. Periodic evaluation during training scores such a view, so that each
 * evaluation costs a fixed, small share of a step budget while still sampling the whole held-out part (the
 * first `count` windows of a text would all come from its first pages). The view borrows the inner dataset. */
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "data/dataset.h"

/* Indices are mapped in chunks on the stack: the view allocates nothing per call. */
#define SUBSET_CHUNK 256

typedef struct subset_impl {
    const snug_dataset *inner;
} subset_impl;

static size_t inner_index(const snug_dataset *view, size_t i) {
    const subset_impl *s = view->impl;
    /* i < count <= n, so i * n fits unless n is beyond 2^32: then divide first (spacing off by < 1) */
    const size_t n = s->inner->n, count = view->n;
    if (n <= UINT32_MAX) return i * n / count;
    return (size_t)((double)i * ((double)n / (double)count));
}

/* Maps the chunk of idx starting at `at` into map (at most SUBSET_CHUNK); returns its length. */
static size_t map_chunk(const snug_dataset *view, const size_t *idx, size_t at, size_t n, size_t *map) {
    size_t len = n - at < SUBSET_CHUNK ? n - at : SUBSET_CHUNK;
    for (size_t j = 0; j < len; j++) map[j] = inner_index(view, idx[at + j]);
    return len;
}

static void subset_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {
    const snug_dataset *inner = ((const subset_impl *)ds->impl)->inner;
    size_t map[SUBSET_CHUNK];
    for (size_t at = 0, len; at < n; at += len) {
        len = map_chunk(ds, idx, at, n, map);
        inner->ops->fill_inputs(inner, map, len, x + at * ds->sample_numel);
    }
}

static void subset_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {
    const snug_dataset *inner = ((const subset_impl *)ds->impl)->inner;
    size_t map[SUBSET_CHUNK];
    for (size_t at = 0, len; at < n; at += len) {
        len = map_chunk(ds, idx, at, n, map);
        inner->ops->fill_targets(inner, map, len, y + at * ds->targets_per_sample);
    }
}

static void subset_destroy(snug_dataset *ds) {
    free(ds->impl);
    ds->impl = NULL;
}

static snug_status subset_read_status(const snug_dataset *ds, snug_error *err) {
    return dataset_read_status(((const subset_impl *)ds->impl)->inner, err);
}

/* A frame or a view keeps its data set's units and class names. */
static bool subset_normalisation(const snug_dataset *ds, snug_normalise *out) {
    return snug_dataset_normalisation(((const subset_impl *)ds->impl)->inner, out);
}

static bool subset_table_stats(const snug_dataset *ds, snug_table_stats *out) {
    return snug_dataset_table_stats(((const subset_impl *)ds->impl)->inner, out);
}

static const char *subset_class_name(const snug_dataset *ds, size_t i) {
    return snug_dataset_class_name(((const subset_impl *)ds->impl)->inner, i);
}

static const dataset_ops subset_ops = {
    .fill_inputs = subset_fill_inputs,
    .fill_targets = subset_fill_targets,
    .destroy = subset_destroy,
    .read_status = subset_read_status,
    .normalisation = subset_normalisation,
    .class_name = subset_class_name,
    .table_stats = subset_table_stats,
};

snug_status snug_dataset_subset(const snug_dataset *inner, size_t count, snug_dataset **out, snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_dataset_subset: out is NULL");
    *out = NULL;
    if (!inner) return snug_fail(err, SNUG_E_ARG, "snug_dataset_subset: the dataset is NULL");
    if (count == 0 || count > inner->n)
        return snug_fail(err, SNUG_E_ARG, "a subset of %zu samples of a dataset of %zu: choose between 1 and %zu",
                         count, inner->n, inner->n);
    snug_dataset *ds = malloc(sizeof *ds);
    subset_impl *s = malloc(sizeof *s);
    if (!ds || !s) {
        free(ds);
        free(s);
        return snug_fail(err, SNUG_E_OOM, "snug_dataset_subset: out of host memory for the view");
    }
    *ds = *inner;
    ds->ops = &subset_ops;
    ds->n = count;
    s->inner = inner;
    ds->impl = s;
    *out = ds;
    return SNUG_OK;
}

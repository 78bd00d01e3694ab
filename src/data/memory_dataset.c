/* A dataset over arrays the caller gives (tests, benchmarks, small problems, bindings): any sample shape, one
 * or more targets per sample (a label, or one per token or pixel). snug_dataset_from_arrays copies both arrays,
 * so the caller may free them at once; the copies are the data set's own memory (snug_dataset_memory), which a
 * run counts in its data. snug_dataset_borrow_arrays reads the caller's arrays where they are: a data set as
 * large as memory allows once, not twice, and the caller's memory, which the data set does not count. */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/shape.h"
#include "data/dataset.h"

typedef struct memory_impl {
    float *inputs;    /* (n, sample shape) */
    int32_t *targets; /* (n, targets per sample) */
    bool owned;       /* the copies (freed with the data set), else the caller's arrays, borrowed */
} memory_impl;

/* Over the threads in contiguous parts of the samples, as the ops after it split a batch, so that each thread
 * writes the lines it reads first (the MNIST and PNG readers split theirs too). With the host's two vCPUs on
 * cores that share no cache, one thread copying a whole micro-batch takes nearly twice as long. */
static void memory_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // (n, sample)
    const memory_impl *m = ds->impl;
    const size_t numel = ds->sample_numel;
#pragma omp parallel for schedule(static) if (n > 1 && par_pays_floats(2 * n * numel))
    for (size_t i = 0; i < n; i++)
        memcpy(x + i * numel, m->inputs + idx[i] * numel, numel * sizeof *x);
}

static void memory_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // (n, t)
    const memory_impl *m = ds->impl;
    const size_t t = ds->targets_per_sample;
    for (size_t i = 0; i < n; i++) memcpy(y + i * t, m->targets + idx[i] * t, t * sizeof *y);
}

static void memory_destroy(snug_dataset *ds) {
    memory_impl *m = ds->impl;
    if (!m) return;
    if (m->owned) {
        free(m->inputs);
        free(m->targets);
    }
    free(m);
    ds->impl = NULL;
}

static const dataset_ops memory_ops = {
    .fill_inputs = memory_fill_inputs,
    .fill_targets = memory_fill_targets,
    .destroy = memory_destroy,
};

static snug_status check_args(const float *inputs, const int32_t *targets, size_t n, const snug_shape *shape,
                              size_t targets_per_sample, size_t classes, snug_error *err) {
    if (!inputs || !targets)
        return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: inputs and labels must not be NULL");
    if (shape->rank < 1 || shape->rank > SNUG_MAX_DIMS)
        return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: a sample shape has 1 to %d dimensions, got %d",
                         SNUG_MAX_DIMS, shape->rank);
    bool zero = n == 0 || targets_per_sample == 0 || classes == 0;
    for (int d = 0; d < shape->rank; d++) zero = zero || shape->dims[d] == 0;
    if (zero) {
        char s[96];
        return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: every size must be > 0 (n %zu, sample %s, "
                         "targets per sample %zu, classes %zu)", n, snug_shape_format(shape, s, sizeof s),
                         targets_per_sample, classes);
    }
    return SNUG_OK;
}

static snug_status check_labels(const int32_t *labels, size_t count, size_t classes, snug_error *err) {  // (count)
    for (size_t i = 0; i < count; i++)
        if (labels[i] != SNUG_IGNORE_TARGET && (labels[i] < 0 || (size_t)labels[i] >= classes))
            return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: label %zu is %d, outside [0, %zu) (use %d "
                             "to ignore a sample)", i, (int)labels[i], classes, SNUG_IGNORE_TARGET);
    return SNUG_OK;
}

/* A memory data set over inputs and targets (owned: copies to free with it), once the arrays are checked. */
static snug_status wrap_arrays(float *inputs, snug_shape shape, int32_t *targets, size_t targets_per_sample, size_t n,
                               size_t classes, size_t numel, bool owned, size_t own_bytes, snug_dataset **out,
                               snug_error *err) {
    snug_dataset *ds = calloc(1, sizeof *ds);
    memory_impl *m = calloc(1, sizeof *m);
    if (!ds || !m) {
        free(ds);
        free(m);
        return snug_fail(err, SNUG_E_OOM, "snug_dataset_from_memory: out of memory for the data set");
    }
    *m = (memory_impl){.inputs = inputs, .targets = targets, .owned = owned};
    *ds = (snug_dataset){.ops = &memory_ops, .n = n, .sample_shape = shape, .sample_numel = numel,
                         .classes = classes, .targets_per_sample = targets_per_sample, .memory_bytes = own_bytes,
                         .impl = m};
    *out = ds;
    return SNUG_OK;
}

/* The checks both forms share: arguments, sizes (in bytes, into *input_bytes and *target_bytes) and labels. */
static snug_status check_arrays(const float *inputs, const snug_shape *shape, const int32_t *targets,
                                size_t targets_per_sample, size_t n, size_t classes, snug_dataset **out,
                                size_t *numel, size_t *input_bytes, size_t *target_bytes, snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: out is NULL");
    *out = NULL;
    snug_status s = check_args(inputs, targets, n, shape, targets_per_sample, classes, err);
    if (s != SNUG_OK) return s;
    size_t total, target_count;
    if (!size_prod(shape->dims, (size_t)shape->rank, numel) || !size_mul(n, *numel, &total) ||
        !size_mul(total, sizeof(float), input_bytes) || !size_mul(n, targets_per_sample, &target_count) ||
        !size_mul(target_count, sizeof(int32_t), target_bytes))
        return snug_fail(err, SNUG_E_OVERFLOW, "snug_dataset_from_memory: %zu samples of %zu floats and %zu targets "
                         "overflow size_t", n, *numel, targets_per_sample);
    /* Sizes before labels: sizes that overflow cannot describe a real array, whose labels must not be read. */
    return check_labels(targets, target_count, classes, err);
}

/* The data set over the caller's arrays: copies of them (copy), or the arrays themselves, borrowed. */
static snug_status memory_dataset_new(const float *inputs, snug_shape shape, const int32_t *targets,
                                      size_t targets_per_sample, size_t n, size_t classes, bool copy,
                                      snug_dataset **out, snug_error *err) {
    size_t numel = 0, input_bytes = 0, target_bytes = 0;
    snug_status s = check_arrays(inputs, &shape, targets, targets_per_sample, n, classes, out, &numel, &input_bytes,
                                 &target_bytes, err);
    if (s != SNUG_OK) return s;
    /* borrowed, only read through: the casts only share memory_impl's fields with the copies */
    if (!copy)
        return wrap_arrays((float *)inputs, shape, (int32_t *)targets, targets_per_sample, n, classes, numel, false,
                           0, out, err);
    float *inputs_copy = malloc(input_bytes);
    int32_t *targets_copy = malloc(target_bytes);
    if (!inputs_copy || !targets_copy) {
        free(inputs_copy);
        free(targets_copy);
        return snug_fail(err, SNUG_E_OOM, "snug_dataset_from_memory: cannot copy %zu bytes of inputs and labels "
                         "into host memory", input_bytes + target_bytes);
    }
    memcpy(inputs_copy, inputs, input_bytes);
    memcpy(targets_copy, targets, target_bytes);
    s = wrap_arrays(inputs_copy, shape, targets_copy, targets_per_sample, n, classes, numel, true,
                    input_bytes + target_bytes, out, err);
    if (s != SNUG_OK) free(inputs_copy), free(targets_copy);
    return s;
}

snug_status snug_dataset_from_arrays(const float *inputs, snug_shape sample_shape, const int32_t *targets,
                                     size_t targets_per_sample, size_t n, size_t classes, snug_dataset **out,
                                     snug_error *err) {
    return memory_dataset_new(inputs, sample_shape, targets, targets_per_sample, n, classes, true, out, err);
}

snug_status snug_dataset_borrow_arrays(const float *inputs, snug_shape sample_shape, const int32_t *targets,
                                       size_t targets_per_sample, size_t n, size_t classes, snug_dataset **out,
                                       snug_error *err) {
    return memory_dataset_new(inputs, sample_shape, targets, targets_per_sample, n, classes, false, out, err);
}

snug_status snug_dataset_from_memory(const float *inputs, const int32_t *labels, size_t n, size_t c, size_t h,
                                     size_t w, size_t classes, snug_dataset **out, snug_error *err) {
    const snug_shape shape = {.rank = 3, .dims = {c, h, w}};
    return snug_dataset_from_arrays(inputs, shape, labels, 1, n, classes, out, err);
}

snug_status snug_dataset_borrow_memory(const float *inputs, const int32_t *labels, size_t n, size_t c, size_t h,
                                       size_t w, size_t classes, snug_dataset **out, snug_error *err) {
    const snug_shape shape = {.rank = 3, .dims = {c, h, w}};
    return snug_dataset_borrow_arrays(inputs, shape, labels, 1, n, classes, out, err);
}

/* A dataset over arrays the caller gives (tests, small problems, bindings). Both arrays are copied, so the
 * caller may free them at once; the copies are the caller's data (plain malloc), outside the engine budget. */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "data/dataset.h"
#include "ops/op.h"

typedef struct memory_impl {
    float *inputs;   /* (n, c, h, w) */
    int32_t *labels; /* (n) */
} memory_impl;

static void memory_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // x: (n, c, h, w)
    const memory_impl *m = ds->impl;
    const size_t numel = ds->sample_numel;
    for (size_t i = 0; i < n; i++)
        memcpy(x + i * numel, m->inputs + idx[i] * numel, numel * sizeof *x);
}

static void memory_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // y: (n)
    const memory_impl *m = ds->impl;
    for (size_t i = 0; i < n; i++) y[i] = m->labels[idx[i]];
}

static void memory_destroy(snug_dataset *ds) {
    memory_impl *m = ds->impl;
    if (!m) return;
    free(m->inputs);
    free(m->labels);
    free(m);
    ds->impl = NULL;
}

static const dataset_ops memory_ops = {
    .fill_inputs = memory_fill_inputs,
    .fill_targets = memory_fill_targets,
    .destroy = memory_destroy,
};

static snug_status check_args(const float *inputs, const int32_t *labels, size_t n, size_t c, size_t h, size_t w,
                              size_t classes, snug_error *err) {
    if (!inputs || !labels)
        return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: inputs and labels must not be NULL");
    if (n == 0 || c == 0 || h == 0 || w == 0 || classes == 0)
        return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: every size must be > 0 (n %zu, c %zu, h %zu, "
                         "w %zu, classes %zu)", n, c, h, w, classes);
    return SNUG_OK;
}

static snug_status check_labels(const int32_t *labels, size_t n, size_t classes, snug_error *err) {  // (n)
    for (size_t i = 0; i < n; i++)
        if (labels[i] != SNUG_IGNORE_TARGET && (labels[i] < 0 || (size_t)labels[i] >= classes))
            return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: label %zu is %d, outside [0, %zu) (use %d "
                             "to ignore a sample)", i, (int)labels[i], classes, SNUG_IGNORE_TARGET);
    return SNUG_OK;
}

snug_status snug_dataset_from_memory(const float *inputs, const int32_t *labels, size_t n, size_t c, size_t h,
                                     size_t w, size_t classes, snug_dataset **out, snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_dataset_from_memory: out is NULL");
    *out = NULL;
    snug_status s = check_args(inputs, labels, n, c, h, w, classes, err);
    if (s != SNUG_OK) return s;
    const size_t per_sample[3] = {c, h, w};
    size_t numel, total, input_bytes, label_bytes;
    if (!size_prod(per_sample, 3, &numel) || !size_mul(n, numel, &total) ||
        !size_mul(total, sizeof(float), &input_bytes) || !size_mul(n, sizeof(int32_t), &label_bytes))
        return snug_fail(err, SNUG_E_OVERFLOW, "snug_dataset_from_memory: %zu x %zu x %zu x %zu floats overflow "
                         "size_t", n, c, h, w);
    /* Sizes before labels: sizes that overflow cannot describe a real array, whose labels must not be read. */
    s = check_labels(labels, n, classes, err);
    if (s != SNUG_OK) return s;
    snug_dataset *ds = calloc(1, sizeof *ds);
    memory_impl *m = calloc(1, sizeof *m);
    float *inputs_copy = malloc(input_bytes);
    int32_t *labels_copy = malloc(label_bytes);
    if (!ds || !m || !inputs_copy || !labels_copy) {
        free(ds);
        free(m);
        free(inputs_copy);
        free(labels_copy);
        return snug_fail(err, SNUG_E_OOM, "snug_dataset_from_memory: cannot copy %zu bytes of inputs and labels "
                         "into host memory", input_bytes + label_bytes);
    }
    memcpy(inputs_copy, inputs, input_bytes);
    memcpy(labels_copy, labels, label_bytes);
    *m = (memory_impl){.inputs = inputs_copy, .labels = labels_copy};
    ds->impl = m;
    ds->ops = &memory_ops;
    ds->n = n;
    ds->sample_shape = (snug_shape){.rank = 3, .dims = {c, h, w}};
    ds->sample_numel = numel;
    ds->classes = classes;
    ds->targets_per_sample = 1;
    *out = ds;
    return SNUG_OK;
}

/* CSV tables (snug_csv_open and the csv:FILE,FILE2 data set): the first byte chooses the options (bit 0:
 * standardise; bit 1: the labels in the column named "y" rather than the last), the rest is two files cut by
 * fuzz_parts: a training table and a validation table, opened on the training table's statistics. Every sample
 * that opens is read back: features finite, labels classes, class names where the labels are names. */
#include "fuzz_util.h"

#include <math.h>

#include "data/dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

static void read_all(const snug_dataset *ds) {
    if (!ds) return;
    const size_t n = ds->n;
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    float *x = malloc(n * ds->sample_numel * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    if (idx && x && y) {
        for (size_t i = 0; i < n; i++) idx[i] = n - 1 - i;
        ds->ops->fill_inputs(ds, idx, n, x);
        ds->ops->fill_targets(ds, idx, n, y);
        for (size_t i = 0; i < n * ds->sample_numel; i++)
            if (!isfinite(x[i])) {
                fprintf(stderr, "fuzz: feature %zu is %g\n", i, (double)x[i]);
                abort();
            }
        for (size_t i = 0; i < n; i++)
            if (y[i] < 0 || (size_t)y[i] >= ds->classes) {
                fprintf(stderr, "fuzz: label %d of %zu classes\n", (int)y[i], ds->classes);
                abort();
            }
    }
    for (size_t c = 0; c < ds->classes; c++) {
        const char *name = snug_dataset_class_name(ds, c);
        if (name && c && strcmp(snug_dataset_class_name(ds, c - 1), name) >= 0) {
            fprintf(stderr, "fuzz: class names %zu and %zu out of order\n", c - 1, c);
            abort();
        }
    }
    free(idx);
    free(x);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    fuzz_part parts[2] = {{0}};
    const size_t n = fuzz_parts(data + 1, size - 1, parts, 2);
    char train[512], val[512], name[1100];
    fuzz_write(fuzz_path(train, "train.csv"), parts[0].data, n > 0 ? parts[0].len : 0);
    fuzz_write(fuzz_path(val, "val.csv"), parts[1].data, n > 1 ? parts[1].len : 0);
    const snug_csv_options o = {.standardise = data[0] & 1, .label = data[0] & 2 ? "y" : NULL};
    snug_error err = {0};
    snug_dataset *t = NULL, *v = NULL;
    if (snug_csv_open(train, &o, &t, &err) == SNUG_OK) {
        read_all(t);
        const snug_csv_options ov = {.standardise = o.standardise, .label = o.label, .stats_from = t};
        if (snug_csv_open(val, &ov, &v, &err) == SNUG_OK) read_all(v);
        snug_dataset_free(v);
        snug_dataset_free(t);
    }
    snprintf(name, sizeof name, "csv:%s,%s", train, val);
    snug_data d;
    if (snug_data_open(name, NULL, (snug_shape){0}, true, 0, &d, &err) == SNUG_OK) {
        read_all(d.train);
        read_all(d.eval);
        snug_data_close(&d);
    }
    return 0;
}

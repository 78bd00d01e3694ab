/* JPEG images (snug_image_folder_open, the named data set images:DIR): the input is one file, images/c/a.jpg,
 * read through image_decode.c and jpeg_read.c as a training folder reads it. The folder is opened at one of four
 * model inputs, chosen by the input's length (gray or RGB, shrunk or grown, each resize filter), so that every
 * path from decoded pixels to samples is reached from a plain JPEG. A folder that opens is read back: the
 * sample decodes again, its read status must stay OK (the file did not change) and every value be finite. */
#include "fuzz_util.h"

#include <math.h>

#include "data/dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

static const snug_image_folder_options input_kinds[4] = {
    {.input = {.rank = 3, .dims = {3, 8, 8}}, .resize = SNUG_RESIZE_AUTO},
    {.input = {.rank = 3, .dims = {1, 5, 7}}, .resize = SNUG_RESIZE_AREA},
    {.input = {.rank = 3, .dims = {3, 33, 17}}, .resize = SNUG_RESIZE_BILINEAR},
    {.input = {.rank = 3, .dims = {1, 1, 1}}, .resize = SNUG_RESIZE_AUTO},
};

/* The one sample: its read succeeds a second time and gives finite values of class 0. */
static void read_back(const snug_dataset *ds) {
    if (ds->n != 1 || ds->classes != 1) {
        fprintf(stderr, "fuzz: one image in one class opened as %zu sample(s) of %zu class(es)\n", ds->n,
                ds->classes);
        abort();
    }
    const size_t idx = 0;
    float *x = malloc(ds->sample_numel * sizeof *x);
    int32_t y = -1;
    if (!x) return;
    ds->ops->fill_targets(ds, &idx, 1, &y);
    ds->ops->fill_inputs(ds, &idx, 1, x);
    snug_error err = {0};
    if (y != 0 || dataset_read_status(ds, &err) != SNUG_OK) {
        fprintf(stderr, "fuzz: the image that opened reads back as class %d: %s\n", (int)y, err.message);
        abort();
    }
    for (size_t i = 0; i < ds->sample_numel; i++)
        if (!isfinite(x[i])) {
            fprintf(stderr, "fuzz: input value %zu is %g\n", i, (double)x[i]);
            abort();
        }
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fuzz_clear(fuzz_dir(), false);
    mkdir(fuzz_path(path, "images"), 0700);
    mkdir(fuzz_path(path, "images/c"), 0700);
    fuzz_write(fuzz_path(path, "images/c/a.jpg"), data, size);
    snug_dataset *ds = NULL;
    snug_error err = {0};
    if (snug_image_folder_open(fuzz_path(path, "images"), &input_kinds[size % 4], &ds, &err) == SNUG_OK) {
        read_back(ds);
        snug_dataset_free(ds);
    }
    return 0;
}

/* PNG images and masks (snug_segmentation_open): the input is up to four parts (tests/fuzz/fuzz_util.h),
 * images/a.png, masks/a.png, images/b.png, masks/b.png, each PNG's chunk checksums recomputed so that mutations
 * reach the decoder; a part left out is a file left out. A folder that opens is read back, every sample's
 * pixels and classes. */
#include "fuzz_util.h"

#include "data/dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

/* Every sample, inputs and targets: pixels in [-1, 1], targets a class of the data set or ignored. */
static void read_all(const snug_dataset *ds) {
    const size_t n = ds->n;
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    float *x = malloc(n * ds->sample_numel * sizeof *x);
    int32_t *y = malloc(n * ds->targets_per_sample * sizeof *y);
    if (idx && x && y) {
        for (size_t i = 0; i < n; i++) idx[i] = i;
        ds->ops->fill_targets(ds, idx, n, y);
        ds->ops->fill_inputs(ds, idx, n, x);
        for (size_t i = 0; i < n * ds->targets_per_sample; i++)
            if (y[i] < SNUG_IGNORE_TARGET || y[i] >= (int32_t)ds->classes) {
                fprintf(stderr, "fuzz: target %d outside -1..%zu\n", (int)y[i], ds->classes - 1);
                abort();
            }
        for (size_t i = 0; i < n * ds->sample_numel; i++)
            if (!(x[i] >= -1.0f && x[i] <= 1.0f)) {
                fprintf(stderr, "fuzz: pixel value %g outside [-1, 1]\n", (double)x[i]);
                abort();
            }
    }
    free(idx);
    free(x);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[4] = {"images/a.png", "masks/a.png", "images/b.png", "masks/b.png"};
    char path[512];
    fuzz_clear(fuzz_dir(), false);
    mkdir(fuzz_path(path, "images"), 0700);
    mkdir(fuzz_path(path, "masks"), 0700);
    fuzz_part parts[4];
    const size_t n = fuzz_parts(data, size, parts, 4);
    for (size_t i = 0; i < n; i++) {
        uint8_t *copy = malloc(parts[i].len ? parts[i].len : 1);
        if (!copy) return 0;
        memcpy(copy, parts[i].data, parts[i].len);
        fuzz_fix_png_crcs(copy, parts[i].len);
        fuzz_write(fuzz_path(path, names[i]), copy, parts[i].len);
        free(copy);
    }
    snug_dataset *ds = NULL;
    snug_error err = {0};
    if (snug_segmentation_open(fuzz_dir(), &ds, &err) == SNUG_OK) {
        read_all(ds);
        snug_dataset_free(ds);
    }
    return 0;
}

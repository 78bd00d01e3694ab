/* MNIST IDX pairs (snug_mnist_open, snug_mnist_open_padded): the input is two parts (tests/fuzz/fuzz_util.h:
 * a 2-byte length, then the bytes), the images file and the labels file, written under MNIST's names; a pair
 * that opens is read back, every sample's pixels and label (the first 64 samples), plain and padded. */
#include "fuzz_util.h"

#include "data/dataset.h"

#define MAX_SAMPLES 64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

/* Reads up to MAX_SAMPLES samples, inputs and targets, as the trainer would; every label must be a digit and
 * every pixel one of the 256 normalised values (or the padding's background, one of them). */
static void read_all(const snug_dataset *ds) {
    size_t n = ds->n < MAX_SAMPLES ? ds->n : MAX_SAMPLES, idx[MAX_SAMPLES];
    for (size_t i = 0; i < n; i++) idx[i] = ds->n - 1 - i; /* from the end: the last bytes of the file */
    float *x = malloc(n * ds->sample_numel * sizeof *x);
    int32_t *y = malloc(n * ds->targets_per_sample * sizeof *y);
    if (x && y) {
        ds->ops->fill_targets(ds, idx, n, y);
        ds->ops->fill_inputs(ds, idx, n, x);
        for (size_t i = 0; i < n; i++)
            if (y[i] < 0 || y[i] >= (int32_t)ds->classes) {
                fprintf(stderr, "fuzz: sample %zu has label %d, outside 0..%zu\n", idx[i], (int)y[i], ds->classes - 1);
                abort();
            }
        for (size_t i = 0; i < n * ds->sample_numel; i++)
            if (!(x[i] >= -0.43f && x[i] <= 2.83f)) { /* (0/255 - 0.1307) / 0.3081 .. (1 - 0.1307) / 0.3081 */
                fprintf(stderr, "fuzz: pixel value %g is no normalised byte\n", (double)x[i]);
                abort();
            }
    }
    free(x);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_part parts[2] = {{0}};
    fuzz_parts(data, size, parts, 2);
    char images[512], labels[512];
    fuzz_path(images, "train-images-idx3-ubyte");
    fuzz_path(labels, "train-labels-idx1-ubyte");
    fuzz_write(images, parts[0].data, parts[0].len);
    fuzz_write(labels, parts[1].data, parts[1].len);
    snug_dataset *ds = NULL;
    snug_error err = {0};
    if (snug_mnist_open(fuzz_dir(), true, &ds, &err) == SNUG_OK) {
        read_all(ds);
        snug_dataset_free(ds);
        if (snug_mnist_open_padded(fuzz_dir(), true, 2, &ds, &err) == SNUG_OK) {
            read_all(ds);
            snug_dataset_free(ds);
        }
    }
    return 0;
}

/* Text data (snug_text_open and the `text:FILE` data set of snug_data_open): the first byte chooses the context
 * (1 to 64 tokens), the second the held-out fraction (0 to 0.996), the rest is the file. Both parts are opened
 * both ways and every window read back. */
#include "fuzz_util.h"

#include "data/dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

/* Every window, inputs and targets: token ids are bytes, targets bytes or ignored. */
static void read_all(const snug_dataset *ds) {
    if (!ds) return;
    const size_t n = ds->n;
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    float *x = malloc(n * ds->sample_numel * sizeof *x);
    int32_t *y = malloc(n * ds->targets_per_sample * sizeof *y);
    if (idx && x && y) {
        for (size_t i = 0; i < n; i++) idx[i] = n - 1 - i;
        ds->ops->fill_targets(ds, idx, n, y);
        ds->ops->fill_inputs(ds, idx, n, x);
        for (size_t i = 0; i < n * ds->sample_numel; i++)
            if (!(x[i] >= 0.0f && x[i] <= 255.0f && x[i] == (float)(int)x[i]) || y[i] < SNUG_IGNORE_TARGET ||
                y[i] > 255) {
                fprintf(stderr, "fuzz: token %g, target %d: not a byte\n", (double)x[i], (int)y[i]);
                abort();
            }
    }
    free(idx);
    free(x);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const size_t context = (size_t)(data[0] % 64) + 1;
    const double holdout = data[1] / 256.0;
    char path[512], name[600];
    fuzz_write(fuzz_path(path, "text.txt"), data + 2, size - 2);
    snug_error err = {0};
    for (int heldout = 0; heldout < 2; heldout++) {
        snug_dataset *ds = NULL;
        if (snug_text_open(path, context, holdout, heldout, &ds, &err) == SNUG_OK) {
            read_all(ds);
            snug_dataset_free(ds);
        }
    }
    snprintf(name, sizeof name, "text:%s", path);
    snug_data d;
    const snug_shape input = {.rank = 1, .dims = {context}};
    if (snug_data_open(name, NULL, input, true, NULL, &d, &err) == SNUG_OK) {
        read_all(d.train);
        read_all(d.eval);
        snug_data_close(&d);
    }
    return 0;
}

/* Weights files (snug_trainer_load): the input is written to a file and loaded into a small trainer
 * (tests/fuzz/fuzz_trainer.h). Where the header carries snug's checksum it is recomputed first, so that mutations
 * reach the header and value checks behind it. A file that loads leaves every value finite, and is then saved
 * and loaded again. */
#include "fuzz_trainer.h"

#include <math.h>

static fuzz_trainer trainer;

static void trainer_release(void) { fuzz_trainer_free(&trainer); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    fuzz_trainer_new(&trainer);
    atexit(trainer_release);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512], again[512];
    fuzz_write_checksummed(fuzz_path(path, "weights.safetensors"), data, size);
    snug_error err = {0};
    if (snug_trainer_load(trainer.tr, path, &err) == SNUG_OK) {
        for (size_t i = 0; i < snug_trainer_param_count(trainer.tr); i++) {
            size_t numel;
            float *v, *grads;
            const char *name = snug_trainer_param(trainer.tr, i, &numel, &v, &grads);
            for (size_t k = 0; k < numel; k++)
                if (!isfinite(v[k])) {
                    fprintf(stderr, "fuzz: %s[%zu] is %g after a load that succeeded\n", name, k, (double)v[k]);
                    abort();
                }
        }
        if (snug_trainer_save(trainer.tr, fuzz_path(again, "again.safetensors"), &err) != SNUG_OK ||
            snug_trainer_load(trainer.tr, again, &err) != SNUG_OK) {
            fprintf(stderr, "fuzz: loaded weights do not save and load again: %s\n", err.message);
            abort();
        }
    }
    return 0;
}

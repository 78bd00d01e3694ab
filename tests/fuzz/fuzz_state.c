/* Training-state files (snug_state_read, snug_trainer_load_state): the input is written to a state file (its
 * checksum recomputed, as in fuzz_weights.c), described without a trainer, then continued in the small trainer
 * of tests/fuzz/fuzz_trainer.h; a state that loads is trained on to the end of the run (at most 5 steps of 4
 * samples), so that the counters it restores drive the epoch loop. Each input gets a fresh trainer. */
#include "fuzz_trainer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fuzz_write_checksummed(fuzz_path(path, "state-000000000001.safetensors"), data, size);
    snug_error err = {0};
    snug_state_info info;
    if (snug_state_read(path, &info, &err) == SNUG_OK) snug_state_info_free(&info);
    if (snug_state_latest(fuzz_dir(), &info, &err) == SNUG_OK) snug_state_info_free(&info);
    fuzz_trainer f;
    fuzz_trainer_new(&f);
    if (snug_trainer_load_state(f.tr, path, &err) == SNUG_OK) snug_trainer_fit(f.tr, f.data, &err);
    fuzz_trainer_free(&f);
    return 0;
}

/* Writes the valid weights and state files the weights and state corpora start from, with the trainer of
 * tests/fuzz/fuzz_trainer.h: DIR/weights.safetensors (the initial weights) and the states after steps 2 and 5
 * of the run, DIR/state-*.safetensors. tests/fuzz/make_corpus.py runs it and derives the broken variants.
 *   usage: fuzz_make_seeds DIR */
#include "fuzz_trainer.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    snug_set_threads(1);
    fuzz_trainer f;
    fuzz_trainer_new(&f);
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", argv[1]);
    snug_error err = {0};
    snug_status s = snug_trainer_save(f.tr, path, &err);
    fuzz_trainer_free(&f);
    /* A run of 5 steps keeping a state every 2 steps and at the end: states 2, 4 and 5, of which the newest 2
     * stay (the trainer's run, so that the fuzz target's trainer continues them). */
    fuzz_trainer_new(&f);
    snug_train_config cfg = f.cfg;
    cfg.state_dir = argv[1];
    cfg.state_every = 2;
    cfg.state_keep = 3;
    snug_trainer_free(f.tr);
    f.tr = NULL;
    if (s == SNUG_OK) s = snug_trainer_new(f.plan, &cfg, &f.tr, &err);
    if (s == SNUG_OK) s = snug_trainer_fit(f.tr, f.data, &err);
    fuzz_trainer_free(&f);
    if (s != SNUG_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], err.message);
        return 1;
    }
    return 0;
}

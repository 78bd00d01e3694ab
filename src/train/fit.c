/* The epoch loop: a seeded order per epoch, cut into global batches of B samples. An epoch's last window holds
 * fewer than B samples unless --drop-last drops it; it is normalised by its real item count. */
#include <stdlib.h>

#include "core/error.h"
#include "data/shuffle.h"
#include "train/trainer.h"

static long steps_per_epoch(const snug_train_config *c, size_t n) {
    return c->drop_last ? (long)(n / c->batch) : (long)((n + c->batch - 1) / c->batch);
}

static long planned_steps(const snug_train_config *c, long per_epoch) {
    long total = per_epoch * c->epochs;
    if (c->epochs <= 0 || (c->max_steps > 0 && c->max_steps < total)) total = c->max_steps;
    return total;
}

/* Runs one epoch; *stop is set when the caller's callback or the step limit ends the run. */
static snug_status run_epoch(snug_trainer *tr, const snug_dataset *ds, size_t *order, long epoch, long per_epoch,
                             bool *stop, snug_error *err) {
    const snug_train_config *c = &tr->cfg;
    size_t n = snug_dataset_size(ds);
    if (c->shuffle) shuffle_permutation(c->seed, (uint64_t)epoch, order, n);
    else identity_permutation(order, n);
    for (long w = 0; w < per_epoch && !*stop; w++) {
        size_t start = (size_t)w * c->batch;
        size_t len = n - start < c->batch ? n - start : c->batch;
        snug_step_stats st;
        snug_status s = snug_trainer_step(tr, ds, order + start, len, &st, err);
        st.epoch = epoch;
        st.steps_per_epoch = per_epoch;
        if (c->progress && !c->progress(&st, c->progress_user)) *stop = true;
        if (s != SNUG_OK) return s;
        if (tr->step >= tr->total_steps) *stop = true;
    }
    return SNUG_OK;
}

snug_status snug_trainer_fit(snug_trainer *tr, const snug_dataset *ds, snug_error *err) {
    snug_status s = trainer_check_dataset(tr, ds, err);
    if (s != SNUG_OK) return s;
    const snug_train_config *c = &tr->cfg;
    size_t n = snug_dataset_size(ds);
    long per_epoch = steps_per_epoch(c, n);
    if (per_epoch == 0)
        return snug_fail(err, SNUG_E_ARG,
                         "--drop-last with batch %zu leaves no step: the data set has only %zu samples", c->batch, n);
    tr->total_steps = planned_steps(c, per_epoch);
    /* The sample order is the data set's index (8 bytes a sample), held like the mapped files themselves
     * outside the engine budget. */
    size_t *order = malloc(n * sizeof *order);
    if (!order) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the sample order");
    bool stop = false;
    long epochs = c->epochs > 0 ? c->epochs : (tr->total_steps + per_epoch - 1) / per_epoch;
    for (long e = 0; e < epochs && !stop && s == SNUG_OK; e++)
        s = run_epoch(tr, ds, order, e, per_epoch, &stop, err);
    free(order);
    return s;
}

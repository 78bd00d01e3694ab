/* The epoch loop: a seeded order per epoch, cut into global batches of B samples. An epoch's last window holds
 * fewer than B samples unless drop_last drops it; it is normalised by its real item count. Over several ranks
 * every rank runs this same loop over the same order (a pure function of seed and epoch, whatever the number of
 * ranks); snug_trainer_step takes each rank's shard of each window. */
#include <stdint.h>
#include <stdlib.h>

#include <limits.h>
#include <omp.h>

#include "core/error.h"
#include "core/shape.h"
#include "data/augment.h"
#include "data/shuffle.h"
#include "train/prefetch.h"
#include "train/trainer.h"

static long steps_per_epoch(const snug_train_config *c, size_t batch, size_t n) {
    const size_t steps = n / batch + (!c->drop_last && n % batch != 0);
    return steps > (size_t)LONG_MAX ? LONG_MAX : (long)steps;
}

static long planned_steps(const snug_train_config *c, long per_epoch) {
    long total;
    if (__builtin_mul_overflow(per_epoch, c->epochs, &total)) total = LONG_MAX;
    if (c->epochs <= 0 || (c->max_steps > 0 && c->max_steps < total)) total = c->max_steps;
    return total;
}

void snug_trainer_run_length(const snug_trainer *tr, size_t samples, long *steps_per_epoch_out, long *total_steps) {
    const long per_epoch = steps_per_epoch(&tr->cfg, tr->batch, samples);
    if (steps_per_epoch_out) *steps_per_epoch_out = per_epoch;
    if (total_steps) *total_steps = planned_steps(&tr->cfg, per_epoch);
}

/* The scores of eval_data every eval_every steps (not after the last: the caller scores the end), once per step
 * (a skipped step reports the same step again). */
static snug_status score_now(snug_trainer *tr, const snug_step_stats *st, bool *stop, snug_error *err) {
    const snug_train_config *c = &tr->cfg;
    if (!c->eval_every || !c->eval_data || st->step % c->eval_every != 0 || st->step == tr->last_scored)
        return SNUG_OK;
    tr->last_scored = st->step;
    snug_eval_result res;
    snug_status s = snug_trainer_evaluate(tr, c->eval_data, &res, err);
    if (s == SNUG_OK && c->on_eval && !c->on_eval(st, &res, c->progress_user)) *stop = true;
    return s;
}

/* Window w of epoch `epoch`: one step, then what follows it. The position is advanced before the callback, so
 * that a state saved from it resumes after this window. */
static snug_status run_window(snug_trainer *tr, const snug_dataset *ds, const size_t *order, size_t n, long epoch,
                              long w, long per_epoch, bool *stop, snug_error *err) {
    const snug_train_config *c = &tr->cfg;
    size_t start = (size_t)w * tr->batch;
    size_t len = n - start < tr->batch ? n - start : tr->batch;
    snug_step_stats st;
    snug_status s = snug_trainer_step(tr, ds, order + start, len, &st, err);
    st.epoch = epoch;
    st.steps_per_epoch = per_epoch;
    snug_error why;
    if ((s == SNUG_OK || s == SNUG_E_NONFINITE) && tr->log && snug_run_log_step(tr->log, &st, 0, &why) != SNUG_OK)
        trainer_drop_log(tr, &why);
    if (s == SNUG_OK || s == SNUG_E_NONFINITE) { /* the window was taken (or skipped): go on after it */
        tr->epoch = w + 1 < per_epoch ? epoch : epoch + 1;
        tr->window = w + 1 < per_epoch ? w + 1 : 0;
    }
    if (c->progress && !c->progress(&st, c->progress_user)) *stop = true;
    if (s != SNUG_OK) return s;
    if (tr->step >= tr->total_steps) *stop = true;
    else if ((s = score_now(tr, &st, stop, err)) != SNUG_OK) return s;
    return fit_after_step(tr, stop, err);
}

/* Runs epoch `epoch` from window tr->window on, its micro-batches read ahead when the plan has a ring; *stop is
 * set when the caller's callback or the step limit ends the run. */
static snug_status run_epoch(snug_trainer *tr, const snug_dataset *ds, size_t *order, long epoch, long per_epoch,
                             bool *stop, snug_error *err) {
    const snug_train_config *c = &tr->cfg;
    size_t n = snug_dataset_size(ds);
    if (c->shuffle) shuffle_permutation(c->seed, (uint64_t)epoch, order, n);
    else identity_permutation(order, n);
    snug_status s = SNUG_OK;
    snug_error ignored;
    /* without the thread, the steps read each micro-batch themselves */
    if (tr->pf) (void)prefetch_start(tr->pf, ds, order, n, epoch, tr->window, per_epoch, &ignored);
    for (long w = tr->window; w < per_epoch && !*stop && s == SNUG_OK; w++)
        s = run_window(tr, ds, order, n, epoch, w, per_epoch, stop, err);
    if (tr->pf) prefetch_stop(tr->pf);
    return s;
}

/* Ranks that cut different windows would wait for each other forever in the reductions: check once that every
 * rank has the same number of samples and the same global batch (a maximum of each value and of its complement
 * gives the largest and the smallest over the ranks). */
static snug_status check_same_windows(const snug_trainer *tr, size_t n, snug_error *err) {
    if (tr->dist.size == 1) return SNUG_OK;
    size_t b = tr->batch, v[4] = {n, SIZE_MAX - n, b, SIZE_MAX - b};
    snug_status s = dist_allreduce_sizes(v, 4, DIST_MAX, tr->cfg.rank_timeout_seconds, err);
    if (s != SNUG_OK) return s;
    if (v[0] != SIZE_MAX - v[1])
        return snug_fail(err, SNUG_E_ARG, "the ranks' training sets differ in size (between %zu and %zu samples; "
                         "rank %d has %zu): every rank must read the same data", SIZE_MAX - v[1], v[0],
                         tr->dist.rank, n);
    if (v[2] != SIZE_MAX - v[3])
        return snug_fail(err, SNUG_E_ARG, "the ranks were given different global batches (between %zu and %zu): "
                         "plan every rank with the same batch", SIZE_MAX - v[3], v[2]);
    return SNUG_OK;
}

snug_status snug_trainer_fit(snug_trainer *tr, const snug_dataset *ds, snug_error *err) {
    snug_status s = trainer_check_dataset(tr, ds, err);
    if (s == SNUG_OK) s = check_same_windows(tr, snug_dataset_size(ds), err);
    if (s != SNUG_OK) return s;
    const snug_train_config *c = &tr->cfg;
    size_t n = snug_dataset_size(ds);
    long per_epoch = steps_per_epoch(c, tr->batch, n);
    if (per_epoch == 0)
        return snug_fail(err, SNUG_E_ARG,
                         "dropping the last partial batch with batch %zu leaves no step: the data set has only %zu "
                         "samples", tr->batch, n);
    tr->total_steps = planned_steps(c, per_epoch);
    trainer_remember_data(tr, ds);
    /* a continued run keeps the log's lines up to its state's step: those after it are taken again */
    if (c->log_path && !tr->log && (s = snug_run_log_open(c->log_path, tr->step ? tr->step : -1, &tr->log, err)))
        return s;
    /* the reader lives for this call: after it, reads are the caller's and need no lock */
    if (tr->plan->ring_slots && (s = prefetch_new(tr, err)) != SNUG_OK) return s;
    /* The sample order is the data set's index (8 bytes a sample), held like the mapped files themselves
     * outside the engine budget. */
    size_t *order = malloc(n * sizeof *order);
    if (!order) {
        prefetch_free(tr);
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the sample order");
    }
    bool stop = tr->step >= tr->total_steps; /* a resumed run that is already done */
    long epochs = c->epochs > 0 ? c->epochs : (tr->total_steps + per_epoch - 1) / per_epoch;
    trainer_start_clock(tr);
    tr->state_step = tr->step, tr->state_time = omp_get_wtime() - tr->start_time, tr->state_windows = UINT64_MAX;
    for (long e = tr->epoch; e < epochs && !stop && s == SNUG_OK; e++)
        s = run_epoch(tr, ds, order, e, per_epoch, &stop, err);
    free(order);
    prefetch_free(tr);
    /* The end of the run, or non-finite values it could not go on with: the last good state stays on disk. */
    if (s == SNUG_OK || s == SNUG_E_NONFINITE) {
        snug_error werr;
        const snug_status w = fit_state_write(tr, s == SNUG_OK ? err : &werr);
        if (s == SNUG_OK) s = w;
    }
    return s;
}

/* When snug_trainer_fit writes the run's state (snug_train_config.state_*), and how it stops on request: after a
 * step, a stop flag set on any rank stops every rank (one small all-reduce, so that no rank waits for another in
 * the next step's collectives); the state is due at every state_every steps, after state_every_seconds of
 * training, and at the end. Only rank 0 writes, so the time rule needs no agreement. */
#include <omp.h>

#include "core/error.h"
#include "train/trainer.h"

/* Whether any rank's stop flag is set. */
static snug_status stop_asked(const snug_trainer *tr, bool *asked, snug_error *err) {
    size_t v = tr->cfg.stop && *tr->cfg.stop;
    snug_status s =
        tr->dist.size > 1 ? dist_allreduce_sizes(&v, 1, DIST_MAX, tr->cfg.rank_timeout_seconds, err) : SNUG_OK;
    *asked = v != 0;
    return s;
}

snug_status fit_state_write(snug_trainer *tr, snug_error *err) {
    const snug_train_config *c = &tr->cfg;
    if (!c->state_dir || tr->state_windows == tr->windows) return SNUG_OK;
    snug_status s = snug_trainer_save_state(tr, c->state_dir, c->state_keep, c->state_extra, NULL, 0, err);
    tr->state_windows = tr->windows;
    tr->state_step = tr->step;
    tr->state_time = omp_get_wtime() - tr->start_time;
    return s;
}

snug_status fit_after_step(snug_trainer *tr, bool *stop, snug_error *err) {
    const snug_train_config *c = &tr->cfg;
    bool asked = false;
    snug_status s = c->stop ? stop_asked(tr, &asked, err) : SNUG_OK;
    if (s != SNUG_OK) return s;
    const bool by_count = c->state_every > 0 && tr->step - tr->state_step >= c->state_every;
    const bool by_time = c->state_every_seconds > 0 &&
                         omp_get_wtime() - tr->start_time - tr->state_time >= c->state_every_seconds;
    if (c->state_dir && (asked || by_count || by_time)) s = fit_state_write(tr, err);
    if (s == SNUG_OK && asked) {
        *stop = true;
        return snug_fail(err, SNUG_E_INTERRUPTED, "the run was asked to stop after step %ld%s", tr->step,
                         c->state_dir ? "; its state is written" : "");
    }
    return s;
}

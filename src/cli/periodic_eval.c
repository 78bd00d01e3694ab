/* Periodic evaluation: a progress callback that chains the display and scores every N steps. */
#define _POSIX_C_SOURCE 200809L
#include "cli/periodic_eval.h"

#include <stdio.h>
#include <string.h>

snug_status cli_periodic_eval_init(cli_periodic_eval *pe, cli_progress *progress, snug_trainer *tr,
                                   const snug_dataset *eval, const char *split, long every, size_t samples,
                                   snug_error *err) {
    memset(pe, 0, sizeof *pe);
    pe->progress = progress;
    pe->tr = tr;
    pe->split = split;
    if (!eval || every <= 0) return SNUG_OK;
    pe->every = every;
    pe->set = eval;
    if (samples == 0 || samples >= snug_dataset_size(eval)) return SNUG_OK;
    snug_status st = snug_dataset_subset(eval, samples, &pe->view, err);
    if (st == SNUG_OK) pe->set = pe->view;
    return st;
}

/* "step 500: held-out loss 2.0312 nats/byte ... on 65,280 bytes": the split names the step; the count says
 * how much was scored (all of the part, or the --eval-samples view). */
static void print_score(const cli_periodic_eval *pe, const snug_step_stats *st, const snug_eval_result *res) {
    char split[160];
    snprintf(split, sizeof split, "step %ld: %s", st->step, pe->split);
    cli_progress_finish(pe->progress); /* a live line ends before the score's own line */
    cli_print_eval(pe->progress->out, res, split);
    fflush(pe->progress->out);
}

bool cli_periodic_eval_step(const snug_step_stats *st, void *user) {
    cli_periodic_eval *pe = user;
    if (pe->progress) cli_progress_step(st, pe->progress);
    /* The last step is scored on the whole part by the caller, after training. */
    if (!pe->every || st->step % pe->every != 0 || st->step >= st->total_steps || st->step == pe->last_scored)
        return true;
    pe->last_scored = st->step;
    double t0 = cli_now();
    snug_eval_result res;
    pe->status = snug_trainer_evaluate(pe->tr, pe->set, &res, &pe->err);
    pe->seconds += cli_now() - t0;
    if (pe->status != SNUG_OK) return false;
    if (pe->progress) print_score(pe, st, &res);
    return true;
}

void cli_periodic_eval_free(cli_periodic_eval *pe) {
    snug_dataset_free(pe->view);
    pe->view = NULL;
}

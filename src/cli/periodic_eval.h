/* `--eval-every N`: score the evaluation part (or an evenly spaced view of it, --eval-samples) every N optimizer
 * steps, from the progress callback, so that a run leaves a held-out curve and not just a final figure. Every
 * rank scores (an evaluation over several ranks is a collective); rank 0 prints. */
#ifndef SNUG_CLI_PERIODIC_EVAL_H
#define SNUG_CLI_PERIODIC_EVAL_H

#include <stdbool.h>

#include "cli/progress.h"
#include "snug.h"

typedef struct cli_periodic_eval {
    cli_progress *progress;    /* rank 0's display, chained first; NULL on the other ranks */
    snug_trainer *tr;
    const snug_dataset *set;   /* what is scored: the evaluation part, or view */
    snug_dataset *view;        /* the --eval-samples view, owned; NULL when the whole part is scored */
    const char *split;         /* "held-out", "test", ... */
    long every;                /* 0: off */
    long last_scored;          /* the step scored last (a skipped step reports the same step again) */
    double seconds;            /* spent scoring, so far */
    snug_status status;        /* a failed evaluation stops the run; the caller reports err */
    snug_error err;
} cli_periodic_eval;

/* Sets pe up over eval (NULL: nothing to score, pe stays off); samples 0 scores all of it. */
snug_status cli_periodic_eval_init(cli_periodic_eval *pe, cli_progress *progress, snug_trainer *tr,
                                   const snug_dataset *eval, const char *split, long every, size_t samples,
                                   snug_error *err);

/* The snug_progress_fn: user is a cli_periodic_eval. Returns false (stop) when an evaluation failed. */
bool cli_periodic_eval_step(const snug_step_stats *st, void *user);

void cli_periodic_eval_free(cli_periodic_eval *pe);

#endif

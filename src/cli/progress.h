/* What a run shows while it trains: one live line rewritten in place on a terminal, or plain log lines every
 * few steps otherwise; skipped (non-finite) steps on stderr at once; the clock and count the commands share. */
#ifndef SNUG_CLI_PROGRESS_H
#define SNUG_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snug.h"

typedef struct cli_progress {
    FILE *out;                 /* stdout */
    bool live;                 /* rewrite one line with '\r' instead of logging */
    long log_every;            /* log lines: every this many steps, and the last; 0: auto */
    long epochs;               /* for "epoch e/E" */
    const snug_trainer *tr;    /* for the memory figures; set once the trainer exists */
    size_t batch;              /* B and the training set's size, set once the data is open: a window's samples */
    size_t dataset_samples;    /* (an item is a token or a pixel for some models, so items are not samples) */
    const char *eval_name;     /* what the scores between steps score: "held-out", "test", ... */
    /* state */
    bool line_open;            /* a live line is on screen without its newline */
    double last_draw_s;        /* elapsed time of the last live redraw */
    size_t samples;            /* samples of every window so far, skipped ones included */
    long epoch_at;             /* the epoch of the latest window, and the windows seen in it */
    size_t window;
    long skipped;              /* skipped steps so far */
    snug_step_stats last;      /* the latest stats */
    bool any;                  /* last is set */
    bool log_failed;           /* the log could not be written: the run went on without it */
} cli_progress;

/* Starts a progress display on out; live as decided by the caller (terminal and --progress). */
void cli_progress_init(cli_progress *p, FILE *out, bool live, long log_every, long epochs);

/* The snug_progress_fn: user is a cli_progress. Always returns true (never stops the run). */
bool cli_progress_step(const snug_step_stats *st, void *user);

/* snug_train_config.on_log_failed: a warning on stderr (the live line ended first). */
void cli_progress_log_failed(const char *message, void *user);

/* Ends a live line with a newline, so that what follows starts on a fresh line. */
void cli_progress_finish(cli_progress *p);

/* One line of evaluation results on out, named after the part scored (split: "test", "held-out", ...):
 *   classification   "test accuracy 98.97% (loss 0.0336) on 10,000 images"
 *   tokens           "held-out loss 1.8234 nats/byte (2.6307 bits/byte), next-byte accuracy 45.12% on 123,456 bytes"
 *                    (per token instead of per byte unless the vocabulary is 256 bytes)
 *   pixels           "evaluation pixel accuracy 97.10%, mean IoU 0.9012, foreground IoU 0.8523 (loss 0.0812) on
 *                    2,048,000 pixels" (the foreground IoU with 2 classes only) */
void cli_print_eval(FILE *out, const snug_eval_result *res, const char *split);

/* A monotonic clock, in seconds. */
double cli_now(void);

#endif

/* What a run shows while it trains: one live line rewritten in place on a terminal, or plain log lines every
 * few steps otherwise; skipped (non-finite) steps on stderr at once. Also the number formats the CLI shares. */
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
    /* state */
    bool line_open;            /* a live line is on screen without its newline */
    double last_draw_s;        /* elapsed time of the last live redraw */
    size_t samples;            /* items of every window so far, skipped ones included */
    long skipped;              /* skipped steps so far */
    snug_step_stats last;      /* the latest stats */
    bool any;                  /* last is set */
} cli_progress;

/* Starts a progress display on out; live as decided by the caller (terminal and --progress). */
void cli_progress_init(cli_progress *p, FILE *out, bool live, long log_every, long epochs);

/* The snug_progress_fn: user is a cli_progress. Always returns true (never stops the run). */
bool cli_progress_step(const snug_step_stats *st, void *user);

/* Ends a live line with a newline, so that what follows starts on a fresh line. */
void cli_progress_finish(cli_progress *p);

/* "1,234,567" */
char *cli_format_count(double value, char *buf, size_t len);
/* "0:45", "12:03", "1:02:03" */
char *cli_format_duration(double seconds, char *buf, size_t len);
/* The steps of a whole run: epochs x steps per epoch, capped by max_steps (0: no cap). */
long cli_total_steps(size_t samples, size_t batch, bool drop_last, long epochs, long max_steps);
/* Optimizer steps in one epoch over `samples` with global batch `batch`. */
long cli_steps_per_epoch(size_t samples, size_t batch, bool drop_last);

#endif

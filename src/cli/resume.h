/* `snug train --state DIR` and `--resume DIR` (docs/resume.md). With every state the run stores its command line,
 * its model file's text (a model file may change or go) and its training set's size; --resume rebuilds the run's
 * flags from them, the flags given now on top (the library refuses those that change the result, and the message
 * names the flag), and continues from the folder's newest valid state. SIGINT and SIGTERM stop a run with a state
 * folder after the step in progress, its state written (exit 130 / 143); a second SIGINT ends it at once. */
#ifndef SNUG_CLI_RESUME_H
#define SNUG_CLI_RESUME_H

#include <signal.h>
#include <stddef.h>

#include "snug.h"

/* The text stored with every state (snug_train_config.state_extra), malloc'ed; NULL when out of memory. */
char *cli_state_extra(int argc, char **argv, const char *model, size_t train_samples);

typedef struct cli_resume {
    snug_state_info info;    /* the state continued */
    int argc;                /* the run's flags, then the flags given now */
    char **argv;
    char *model_text;        /* the model file's text, or NULL for a built-in model */
    char *model;             /* the --model value it was read from */
    size_t train_samples;    /* the run's training set's size */
} cli_resume;

/* Finds the newest valid state in dir and rebuilds the run's command line with argv's flags after it. */
snug_status cli_resume_open(const char *dir, int argc, char **argv, cli_resume *r, snug_error *err);
/* Continues tr from the state: the same training set's size, then snug_trainer_load_state. */
snug_status cli_resume_load(const cli_resume *r, snug_trainer *tr, size_t train_samples, snug_error *err);
void cli_resume_close(cli_resume *r);

/* Installs the handlers; the flag they set, for snug_train_config.stop. */
volatile sig_atomic_t *cli_stop_on_signals(void);
/* After a run stopped by a signal: says so and how to resume; returns the exit status (128 + the signal). */
int cli_stopped(const char *dir);

#endif

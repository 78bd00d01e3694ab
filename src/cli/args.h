/* The command line of `snug`: the flags of `snug train`, `snug plan` and `snug eval` parsed into a
 * snug_train_config plus the options only the CLI uses. The entry points of the commands are in cli/commands.h;
 * the exit statuses and error printers every command shares in cli/errors.h. */
#ifndef SNUG_CLI_ARGS_H
#define SNUG_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/errors.h"
#include "snug.h"

/* ---- `snug train` ---- */
typedef enum cli_progress_mode { CLI_PROGRESS_AUTO = 0, CLI_PROGRESS_ON, CLI_PROGRESS_OFF } cli_progress_mode;

typedef struct cli_train_options {
    snug_plan_request plan;  /* what the run asks of memory (ranks set once the job is known) */
    snug_train_config cfg;   /* what the run does with its plan (progress callback set later) */
    const char *model;       /* a snug_model_builtin name */
    size_t classes;          /* --classes: the model's class count; 0: the model file's */
    const char *data;        /* a --data value (cli/data_sets.h): "mnist", "brown", "text:FILE", ... */
    const char *data_dir;    /* where the data set's files are; NULL: the data set's default */
    size_t train_samples;    /* shapes: training samples to draw */
    const char *augment;     /* --augment, parsed into cfg.augment */
    const char *normalise;   /* --normalise, parsed into norm (has_norm) */
    snug_normalise norm;
    bool has_norm;
    const char *init;        /* NULL, or a safetensors file to start from (snug_trainer_load) */
    long threads;            /* 0: all cores (the OpenMP default) */
    long log_every;          /* 0: auto, about 20 lines per epoch */
    cli_progress_mode progress;
    const char *save;        /* NULL, or where to write the final weights as safetensors (snug_trainer_save) */
    const char *state;       /* NULL, or the folder of the run's state (cfg.state_dir, set by cmd_train) */
    const char *resume;      /* NULL, or the state folder whose newest state this run continues */
    int evaluate;            /* index into on|off: score the test set after training */
    long eval_every;         /* also score it every this many optimizer steps; 0: only at the end */
    long state_keep;         /* cfg.state_keep, as a flag's long */
    long max_skips;          /* cfg.max_nonfinite, likewise */
    size_t eval_samples;     /* periodic evaluations score this many evenly spaced samples; 0: all */
    bool micro_batch_given;  /* --micro-batch appeared (else: auto with --mem, B without) */
    bool checkpoint_given;   /* --checkpoint appeared (else: none, or chosen with an automatic micro-batch) */
    bool lr_given;           /* --lr appeared (else: the optimizer's own default) */
    bool help;               /* --help seen: print the help and do nothing else */
    /* choices as indices into their name lists; cli_parse_train maps them into cfg */
    int optim, schedule, lr_scaling, shuffle;
} cli_train_options;

/* Fills opt from the flags argv[1..argc) (argv[0] is the command name). Accepts `--flag value` and
 * `--flag=value`. Returns true on success; on a usage error returns false with one line in msg that says what
 * is wrong. Pointers in opt point into argv or static strings. */
bool cli_parse_train(int argc, char **argv, cli_train_options *opt, char *msg, size_t len);

/* The full help of `snug train` (declared in cli/commands.h) is generated from the same flag table. */
#define CLI_TRAIN_USAGE "usage: snug train [--model NAME] [--batch B] [--micro-batch M|auto] [--mem SIZE] [options]"

/* ---- `snug plan` ---- */
typedef struct cli_plan_options {
    snug_plan_request plan;  /* the chosen plan's request */
    const char *model;       /* a snug_model_builtin name */
    size_t classes;          /* --classes: the model's class count; 0: the model file's */
    const char *data, *data_dir; /* --data as snug train's (NULL: none counted), --data-dir (NULL: its default) */
    size_t train_samples;    /* shapes: training samples to draw */
    long threads;            /* 0: all cores; the workspace is sized per thread */
    bool layers;             /* list every buffer of the chosen plan */
    bool json;               /* one JSON document on stdout instead of the text report */
    const char *timeline;    /* NULL, or a .svg or .csv path for the memory timeline */
    bool micro_batch_given, checkpoint_given, help;
    int optim;               /* index into the --optim choices */
} cli_plan_options;

/* Fills opt from the flags of `snug plan`, as cli_parse_train does. */
bool cli_parse_plan(int argc, char **argv, cli_plan_options *opt, char *msg, size_t len);
/* The full help of `snug plan` is cli_plan_help in cli/commands.h. */
#define CLI_PLAN_USAGE                                                                                      \
    "usage: snug plan [--model NAME] [--data D] [--batch B] [--mem SIZE] [--checkpoint P] "                 \
    "[--micro-batch M|auto] [--layers] [--json] [--timeline FILE.svg|FILE.csv]"

/* ---- `snug eval` ---- */
typedef struct cli_eval_options {
    snug_plan_request plan;  /* batch (samples per forward pass), budget; SGD without momentum: no optimizer state */
    const char *model;       /* a built-in name or a model file */
    size_t classes;          /* --classes: the model's class count; 0: the model file's */
    const char *data;        /* a --data value */
    const char *data_dir;    /* NULL: the data set's default */
    const char *weights;     /* the safetensors file to evaluate (required) */
    long threads;            /* 0: all cores */
    bool help;
} cli_eval_options;

/* Fills opt from the flags of `snug eval`, as cli_parse_train does. */
bool cli_parse_eval(int argc, char **argv, cli_eval_options *opt, char *msg, size_t len);
#define CLI_EVAL_USAGE "usage: snug eval --model NAME --data D --weights FILE [--batch B] [--mem SIZE]"

#endif

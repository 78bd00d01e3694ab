/* The data sets a --data value names, opened for a given model: shared by `snug train` (both parts) and
 * `snug eval` (the evaluation part only). The value's syntax is checked while the flags are parsed (a usage
 * error); the sizes that depend on the model (a text's context, the synthetic shapes' H x W) come from the shape
 * of the model's input when the data is opened.
 *
 *   mnist               the MNIST IDX files in --data-dir ($SNUG_DATA_DIR, else data/mnist); test set: t10k
 *   mnist32             the same, centred in 1x32x32 (2 pixels of background around), for resnet20
 *   brown               the Brown corpus, --data-dir/brown.txt (default data/brown/brown.txt, `make data`);
 *                       byte-level, context = the model's input length; the last 10% is the held-out part
 *   text:FILE           any file, the same way
 *   shapes              synthetic shapes segmentation at the model's H x W: --train-samples training samples
 *                       (seed 1), 500 evaluation samples (seed 2); the same sets in every run
 *   segmentation:DIR    PNGs in DIR/images and DIR/masks; evaluated on DIR/val/{images,masks} when DIR/val
 *                       exists, else `snug train` does not evaluate and `snug eval` scores DIR itself */
#ifndef SNUG_CLI_DATA_SETS_H
#define SNUG_CLI_DATA_SETS_H

#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

#define CLI_DATA_VALUES "mnist|mnist32|brown|text:FILE|shapes|segmentation:DIR"
#define CLI_TEXT_HOLDOUT 0.1
#define CLI_SHAPES_EVAL_SAMPLES 500

typedef struct cli_data {
    snug_dataset *train;     /* NULL unless asked for */
    snug_dataset *eval;      /* the evaluation part; NULL when the data set has none (segmentation without val/) */
    const char *kind;        /* "mnist", "mnist32", "brown", "text", "shapes", "segmentation" */
    const char *eval_name;   /* what the evaluation part is called: "test", "held-out", "evaluation", ... */
    const char *unit;        /* what a sample is: "images", "windows of 256 bytes" (set when opened) */
    char unit_buf[48];
    char source[1100];       /* where the samples come from: a folder, a file, "synthetic" */
} cli_data;

/* Checks a --data value: one of the names, or text:FILE / segmentation:DIR with a non-empty path. On a bad
 * value writes "unknown data set 'X' for --data (choose from ...)" or what is missing into msg. */
bool cli_data_valid(const char *value, char *msg, size_t len);

/* Opens the data set `value` names for model g (whose input fixes the context or H x W): the training part when
 * want_train (with train_samples for shapes), and the evaluation part. dir is --data-dir, or NULL for the
 * default of the data set. Fails, with the hint that fits (`make data`, --data mnist32, ...), before anything is
 * printed; *d is then empty. */
snug_status cli_data_open(const char *value, const char *dir, const snug_graph *g, bool want_train,
                          size_t train_samples, cli_data *d, snug_error *err);

/* Checks both parts against the trainer's model (snug_trainer_check_dataset) before anything runs; the message
 * adds the --data value that fits when there is one (mnist32 for a 32x32 model, mnist for 28x28). */
snug_status cli_data_check(const cli_data *d, const snug_trainer *tr, const snug_graph *g, snug_error *err);

void cli_data_close(cli_data *d);

#endif

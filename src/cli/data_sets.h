/* --data: the library's named data sets (snug_data_open, include/snug.h lists them), with the command line's
 * defaults (--data-dir, else SNUG_DATA_DIR for MNIST) and its advice (`make data`, the --data that fits). */
#ifndef SNUG_CLI_DATA_SETS_H
#define SNUG_CLI_DATA_SETS_H

#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

#define CLI_DATA_VALUES "mnist|mnist32|brown|text:FILE|shapes|segmentation:DIR|images:DIR|csv:FILE[,FILE2]"

typedef snug_data cli_data;

/* A --data value's syntax, as a usage error's message. */
bool cli_data_valid(const char *value, char *msg, size_t len);
/* snug_data_open, with the data set's files where --data-dir says (dir, NULL when not given) and the advice to
 * fetch them. */
snug_status cli_data_open(const char *value, const char *dir, const snug_graph *g, bool want_train,
                          const snug_data_options *opt, cli_data *d, snug_error *err);
/* Checks both parts against the trainer's model (snug_trainer_check_dataset) before anything runs; the message
 * adds the --data value that fits when there is one (mnist32 for a 32x32 model, mnist for 28x28). */
snug_status cli_data_check(const cli_data *d, const snug_trainer *tr, const snug_graph *g, snug_error *err);

#endif

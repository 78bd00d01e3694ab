/* The per-class scores of a classifier's evaluation, printed by `snug eval`. */
#ifndef SNUG_CLI_EVAL_CLASSES_H
#define SNUG_CLI_EVAL_CLASSES_H

#include <stddef.h>
#include <stdio.h>

/* m: the confusion counts of snug_trainer_evaluate_confusion, classes x classes; names: the class names, or
 * NULL (numbers). */
void cli_print_classes(FILE *out, const size_t *m, size_t classes, const char *const *names);

#endif

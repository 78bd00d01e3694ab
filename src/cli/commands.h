/* The subcommands of `snug`: one entry point and one help printer each. argv[0] is the command name ("train"),
 * the flags follow; the return value is the exit status (CLI_EXIT_* in cli/args.h). main.c lists them in its
 * command table. */
#ifndef SNUG_CLI_COMMANDS_H
#define SNUG_CLI_COMMANDS_H

#include <stdio.h>

/* `snug train`: plan, reserve, train, evaluate (cmd_train.c). */
int cmd_train(int argc, char **argv);
void cli_train_help(FILE *out);

/* `snug plan`: what a run would need, per micro-batch and checkpoint policy, without training (cmd_plan.c). */
int cmd_plan(int argc, char **argv);
void cli_plan_help(FILE *out);

/* `snug eval`: load saved weights and score a data set's evaluation part, without training (cmd_eval.c). */
int cmd_eval(int argc, char **argv);
void cli_eval_help(FILE *out);

/* `snug curve`: draw a run's log as an SVG picture (cmd_curve.c). */
int cmd_curve(int argc, char **argv);
void cli_curve_help(FILE *out);

#endif

/* The plan a command runs: the library's snug_plan_new for the flags' request, and, when it does not fit, the
 * library's figures worded as the flags that would (the library itself never names a flag). */
#ifndef SNUG_CLI_PLAN_ADVICE_H
#define SNUG_CLI_PLAN_ADVICE_H

#include <stdbool.h>
#include <stdio.h>

#include "snug.h"

/* snug_plan_new(g, req); on SNUG_E_OOM the message ends with what to change on the command line.
 * checkpoint_given: the user fixed the policy with --checkpoint. */
snug_status cli_plan(const snug_graph *g, const snug_plan_request *req, bool checkpoint_given, snug_plan **out,
                     snug_error *err);
/* snug_trainer_new(plan, cfg); when the plan is more than the machine offers, the message ends with the flags
 * that lower it: `fit` says what --mem then chooses ("--micro-batch auto then ..."). */
snug_status cli_trainer(const snug_plan *plan, const snug_train_config *cfg, const char *fit, snug_trainer **out,
                        snug_error *err);
/* BatchNorm under accumulation (or over ranks): its statistics are the micro-batch's. Else nothing. */
void cli_batchnorm_warning(FILE *out, const snug_graph *g, const snug_plan_summary *s, int ranks);

#endif

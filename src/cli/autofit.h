/* The micro-batch and checkpoint policy a command plans with: chosen for the budget (--micro-batch auto, the
 * default with --mem) or taken from the flags. Shared by `snug train` and `snug plan`, so that the plan shown is
 * the plan run. */
#ifndef SNUG_CLI_AUTOFIT_H
#define SNUG_CLI_AUTOFIT_H

#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

/* With cfg->auto_fit: snug_plan_choose for cfg->mem_budget; but when the user fixed the policy (checkpoint_given
 * with none, sqrt or every:N), the largest even split m = ceil(B/k) that fits under that policy. Without
 * auto_fit: cfg->micro_batch (0: B) and cfg->checkpoint. Fails (SNUG_E_OOM) when nothing fits. */
snug_status cli_choose_plan(const snug_graph *g, const snug_train_config *cfg, bool checkpoint_given, size_t *m,
                            snug_checkpoint_policy *policy, snug_error *err);

/* k = ceil(B/m), the micro-batches of one optimizer step. */
size_t cli_micro_batches(size_t batch, size_t m);

#endif

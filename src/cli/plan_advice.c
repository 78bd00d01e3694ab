/* cli_plan (plan_advice.h): a shortfall's ways out, in flags. */
#define _POSIX_C_SOURCE 200809L
#include "cli/plan_advice.h"

#include <stdio.h>

#include "core/error.h"

static void advise(const snug_plan_request *req, bool checkpoint_given, const snug_plan_shortfall *why,
                   snug_error *err) {
    char line[256], least[32];
    snug_format_bytes(why->smallest_budget, least, sizeof least);
    if (why->fixed > req->budget) {
        snprintf(line, sizeof line, " Raise --mem to at least %s: no --micro-batch or --checkpoint lowers the "
                 "parameters, gradients and optimizer state.", least);
    } else if (req->micro_batch == SNUG_MICRO_BATCH_AUTO && checkpoint_given &&
               req->checkpoint.kind != SNUG_CHECKPOINT_AUTO) {
        char name[32];
        snug_format_checkpoint(req->checkpoint, name, sizeof name);
        snprintf(line, sizeof line, " Raise --mem, or let snug choose the policy too (--checkpoint auto, or leave "
                 "--checkpoint out) instead of --checkpoint %s.", name);
    } else if (req->micro_batch == SNUG_MICRO_BATCH_AUTO) {
        snprintf(line, sizeof line, " Raise --mem to at least %s.", least);
    } else if (why->largest_micro_batch > 0) {
        snprintf(line, sizeof line, " Try --micro-batch %zu%s.", why->largest_micro_batch,
                 req->checkpoint.kind == SNUG_CHECKPOINT_NONE
                     ? ", or --micro-batch auto to let checkpointing keep it larger" : "");
    } else if (why->largest_with_recompute > 0) {
        snprintf(line, sizeof line, " Even --micro-batch 1 does not fit without recomputing activations: try "
                 "--micro-batch auto or --checkpoint auto.");
    } else {
        snprintf(line, sizeof line, " Even --micro-batch 1 needs more: raise --mem to at least %s.", least);
    }
    snug_error_append(err, "%s", line);
}

snug_status cli_plan(const snug_graph *g, const snug_plan_request *req, bool checkpoint_given, snug_plan **out,
                     snug_error *err) {
    snug_plan_shortfall why;
    snug_status st = snug_plan_new(g, req, out, &why, err);
    if (st == SNUG_E_OOM && err && why.smallest_budget > 0) advise(req, checkpoint_given, &why, err);
    return st;
}

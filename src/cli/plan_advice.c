/* cli_plan, cli_trainer and cli_batchnorm_warning (plan_advice.h): a shortfall's ways out, in flags; what
 * accumulation does to BatchNorm. */
#define _POSIX_C_SOURCE 200809L
#include "cli/plan_advice.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static void advise(const snug_plan_request *req, bool checkpoint_given, const snug_plan_shortfall *why,
                   snug_error *err) {
    char line[256], least[32];
    snug_format_bytes_up(why->smallest_budget, least, sizeof least);
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

snug_status cli_trainer(const snug_plan *plan, const snug_train_config *cfg, const char *fit, snug_trainer **out,
                        snug_error *err) {
    snug_machine_memory m;
    snug_plan_summary s;
    snug_status st = snug_trainer_new(plan, cfg, out, err);
    snug_machine_memory_get(&m);
    if (st != SNUG_E_OOM || !err || snug_plan_check_machine(plan, &m, NULL) == SNUG_OK) return st;
    snug_plan_summarize(plan, &s);
    const size_t model = s.bytes[SNUG_MEM_PARAMS] - s.kept_bytes + s.bytes[SNUG_MEM_GRADS] - s.pending_bytes;
    char mem[32]; /* a --mem value, rounded down */
    if (m.usable >= 1u << 30) snprintf(mem, sizeof mem, "%.1fGiB", floor((double)m.usable / (1u << 30) * 10) / 10);
    else snprintf(mem, sizeof mem, "%zuMiB", m.usable >> 20);
    if (model + s.bytes[SNUG_MEM_OPTIM] < m.usable) snug_error_append(err, " Try --mem %s or less: %s.", mem, fit);
    else if (s.bytes[SNUG_MEM_OPTIM] > 0 && model < m.usable)
        snug_error_append(err, " Try --optim sgd --momentum 0 (no optimizer state).");
    return st;
}

void cli_batchnorm_warning(FILE *out, const snug_graph *g, const snug_plan_summary *s, int ranks) {
    const size_t m = s->micro_batch < s->share ? s->micro_batch : s->share, k = s->micro_batches;
    if (s->batch_statistics_layers == 0 || (k == 1 && ranks == 1)) return;
    const char *name = snug_graph_name(g);
    fprintf(out, "WARNING: model %s has %zu BatchNorm layer%s, and this run computes each step's gradient from %zu "
            "micro-batch%s of %zu%s: BatchNorm normalises with the statistics of each micro-batch of %zu samples "
            "(and updates its running statistics once per micro-batch), so this is not exactly training with batch "
            "%zu. Use the GroupNorm variant of the model (%s), whose statistics are per sample and exact under "
            "accumulation, or a larger --micro-batch (16 samples or more keep the statistics stable). See "
            "docs/accumulation.md.\n",
            name, s->batch_statistics_layers, s->batch_statistics_layers == 1 ? "" : "s", k, k == 1 ? "" : "es", m,
            ranks > 1 ? " on each rank" : "", m, s->batch, strcmp(name, "resnet20") ? "e.g. resnet20-gn" :
            "--model resnet20-gn");
}

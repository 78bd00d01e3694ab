/* A trainer continued from a run's state (snug_trainer_load_state): the state's run must be this trainer's (the
 * settings that define the result compared one by one), and nothing of the trainer changes until every tensor
 * has been read into scratch memory. Reading the state file and its metadata is io/state_read.c's. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/state.h"
#include "optim/optim.h"
#include "train/trainer.h"

/* The setting of the trainer that differs from the state's (those that define the run's result), or NULL. */
static const char *differs(const snug_trainer *tr, const snug_state_info *info, char *both, size_t len) {
    const snug_train_config *a = &tr->cfg, *b = &info->run;
#define SAME(field, fmt, cast)                                                                                      \
    if (a->field != b->field) {                                                                                     \
        snprintf(both, len, fmt " in the state, " fmt " in this run", (cast)b->field, (cast)a->field);                \
        return #field;                                                                                               \
    }
    if (tr->batch != info->batch) {
        snprintf(both, len, "%zu in the state, %zu in this run", info->batch, tr->batch);
        return "batch";
    }
    const snug_precision mine = tr->plan->variant.bf16 ? SNUG_PRECISION_BF16 : SNUG_PRECISION_FP32;
    if (mine != info->precision) {
        snprintf(both, len, "%s in the state, %s in this run", snug_precision_name(info->precision),
                 snug_precision_name(mine));
        return "precision";
    }
    SAME(seed, "%" PRIu64, uint64_t)
    char mine_aug[96], theirs_aug[96];
    snug_augment_format(&a->augment, mine_aug, sizeof mine_aug);
    if (strcmp(mine_aug, snug_augment_format(&b->augment, theirs_aug, sizeof theirs_aug)) != 0) {
        snprintf(both, len, "%.60s in the state, %.60s in this run", theirs_aug, mine_aug);
        return "augment";
    }
    SAME(shuffle, "%d", int)
    SAME(drop_last, "%d", int)
    SAME(clip_norm, "%g", double)
    SAME(optim.kind, "%d", int)
    SAME(optim.lr, "%g", double)
    SAME(optim.momentum, "%g", double)
    SAME(optim.nesterov, "%d", int)
    SAME(optim.weight_decay, "%g", double)
    SAME(optim.beta1, "%g", double)
    SAME(optim.beta2, "%g", double)
    SAME(optim.eps, "%g", double)
    SAME(schedule.kind, "%d", int)
    SAME(schedule.warmup_steps, "%ld", long)
    SAME(schedule.min_lr_ratio, "%g", double)
    SAME(schedule.linear_scaling, "%d", int)
    SAME(schedule.reference_batch, "%zu", size_t)
#undef SAME
    return NULL;
}

/* Every tensor of the state into scratch memory: parameters, buffers, optimizer state. */
static snug_status read_tensors(st_file *sf, const snug_trainer *tr, float *params, float *state, float *optim,
                                snug_error *err) {
    const snug_graph *g = tr->g;
    const int slots = optim_state_slots(&tr->cfg.optim);
    snug_status s = SNUG_OK;
    for (int i = 0; i < g->n_params && s == SNUG_OK; i++) {
        const graph_param *p = &g->params[i];
        s = trainer_read_tensor(sf, g, p, p->name, (p->buffer ? state : params) + p->offset, err);
        for (int k = 0; k < slots && s == SNUG_OK && !p->buffer; k++) {
            char name[STATE_NAME_MAX];
            snprintf(name, sizeof name, "optim.%s.%s", p->name, state_slot_name(tr->cfg.optim.kind, k));
            s = trainer_read_tensor(sf, g, p, name, optim + (size_t)k * g->param_numel + p->offset, err);
        }
    }
    return s;
}

static snug_status take_state(snug_trainer *tr, st_file *sf, const state_counters *k, snug_error *err) {
    const snug_graph *g = tr->g;
    const size_t np = g->param_numel, ns = g->state_numel, no = (size_t)optim_state_slots(&tr->cfg.optim) * np;
    float *scratch = malloc((np + ns + no + 1) * sizeof *scratch);
    if (!scratch) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused scratch space for a state");
    snug_status s = read_tensors(sf, tr, scratch, scratch + np, scratch + np + ns, err);
    if (s == SNUG_OK) { /* everything read: now the trainer changes */
        memcpy(tr->x.params, scratch, np * sizeof *scratch);
        if (ns) memcpy(tr->x.state, scratch + np, ns * sizeof *scratch);
        if (no) memcpy(tr->x.optim_state, scratch + np + ns, no * sizeof *scratch);
        tr->step = k->step;
        tr->stat_updates = k->step * (long)trainer_window_micro_batches(tr); /* the state keeps no count */
        tr->windows = k->windows;
        tr->epoch = k->epoch;
        tr->window = k->window;
        tr->nonfinite_run = k->nonfinite_run;
        tr->samples_seen = k->samples_seen;
        tr->opt.t = k->optim_steps;
        tr->earlier_seconds = k->train_seconds;
        tr->start_time = 0; /* this process's clock (and its counts) start again at its next step */
        exec_weights_changed(&tr->x);
        trainer_copies_stale(tr);
    }
    free(scratch);
    return s;
}

snug_status snug_trainer_load_state(snug_trainer *tr, const char *path, snug_error *err) {
    snug_state_info info = {0};
    state_counters k;
    st_file sf = {0};
    snug_status s = state_read_info(path, &info, &k, &sf, err);
    char both[160];
    const char *field = s == SNUG_OK ? differs(tr, &info, both, sizeof both) : NULL;
    if (field)
        s = snug_fail(err, SNUG_E_ARG, "%s: the run's %s differs (%s): a state continues the run that wrote it",
                      path, field, both);
    else if (s == SNUG_OK && strcmp(info.model, tr->g->name) != 0)
        s = snug_fail(err, SNUG_E_ARG, "%s is a state of model '%s', not of '%s'", path, info.model, tr->g->name);
    if (s == SNUG_OK) s = take_state(tr, &sf, &k, err);
    st_file_close(&sf);
    snug_state_info_free(&info);
    return s;
}

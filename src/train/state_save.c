/* The complete state of a run (snug_trainer_save_state), for an exact resume: the parameters and buffers under
 * the names snug_trainer_save uses, the optimizer's state as "optim.<parameter>.<slot>" (PyTorch's slot names:
 * momentum_buffer; exp_avg, exp_avg_sq), and the run's metadata (io/state_write.c writes it). The RNG needs no
 * state of its own: every draw is a function of the seed and the counters kept. The folder's files, their names
 * and their pruning are io/state_write.c's. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/state.h"
#include "optim/optim.h"
#include "train/trainer.h"

/* What the trainer's state says of its run besides the tensors. */
static state_meta meta_of(const snug_trainer *tr) {
    return (state_meta){.model = tr->g->name, .batch = tr->batch, .bf16 = tr->plan->variant.bf16, .run = &tr->cfg,
                        .counters = {.step = tr->step, .epoch = tr->epoch, .window = tr->window,
                                     .optim_steps = tr->opt.t, .windows = tr->windows,
                                     .nonfinite_run = tr->nonfinite_run, .samples_seen = tr->samples_seen,
                                     .train_seconds = tr->earlier_seconds + trainer_process_seconds(tr)}};
}

/* The optimizer's state of every trainable parameter, slot by slot; names written into names (room for
 * 2 x n_params of STATE_NAME_MAX). */
static size_t optim_tensors(const snug_trainer *tr, st_tensor *t, char (*names)[STATE_NAME_MAX]) {
    const int slots = optim_state_slots(&tr->cfg.optim);
    size_t n = 0;
    for (int s = 0; s < slots; s++)
        for (int i = 0; i < tr->g->n_params; i++) {
            const graph_param *p = &tr->g->params[i];
            if (p->buffer) continue;
            snprintf(names[n], STATE_NAME_MAX, "optim.%s.%s", p->name, state_slot_name(tr->cfg.optim.kind, s));
            t[n] = (st_tensor){.name = names[n], .dims = p->shape.dims, .rank = p->shape.rank,
                               .values = tr->x.optim_state + (size_t)s * tr->g->param_numel + p->offset,
                               .numel = p->numel};
            n++;
        }
    return n;
}

static snug_status write_state(const snug_trainer *tr, const char *dir, const char *extra, char *path, size_t len,
                               snug_error *err) {
    const size_t np = (size_t)tr->g->n_params;
    st_tensor *t = malloc((3 * np + 1) * sizeof *t);
    char(*names)[STATE_NAME_MAX] = malloc((2 * np + 1) * sizeof *names);
    const state_meta m = meta_of(tr);
    char *text = state_text(&m);
    snug_status s = SNUG_E_OOM;
    if (t && names && text) {
        const size_t n = trainer_param_tensors(tr, t);
        const size_t m = optim_tensors(tr, t + n, names);
        char tmp[4096];
        state_path(dir, tr->windows, false, path, len);
        state_path(dir, tr->windows, true, tmp, sizeof tmp);
        const st_pair meta[] = {{"format", "pt"}, {"producer", "snug " SNUG_VERSION}, {"model", tr->g->name},
                                {STATE_KEY, text}, {STATE_EXTRA_KEY, extra ? extra : ""}};
        s = st_write(path, tmp, t, n + m, meta, sizeof meta / sizeof meta[0], err);
    } else {
        snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the state's tensor list");
    }
    free(t);
    free(names);
    cJSON_free(text);
    return s;
}

snug_status snug_trainer_save_state(const snug_trainer *tr, const char *dir, int keep, const char *extra,
                                    char *path, size_t path_len, snug_error *err) {
    char local[4096];
    if (!path || path_len == 0) path = local, path_len = sizeof local;
    path[0] = '\0';
    if (tr->dist.rank != 0) return SNUG_OK;
    if (keep < 1) return snug_fail(err, SNUG_E_ARG, "keep %d states: keep at least 1", keep);
    snug_status s = state_folder(dir, err);
    if (s == SNUG_OK) s = write_state(tr, dir, extra, path, path_len, err);
    if (s != SNUG_OK) {
        uint64_t *v;
        const size_t n = state_list(dir, &v);
        char last[4096];
        if (n) state_path(dir, v[0], false, last, sizeof last);
        snug_error_append(err, n ? " The newest state written before, %s, is intact." : " No state was written "
                          "before this one.", last);
        free(v);
        return s;
    }
    state_prune(dir, keep);
    return SNUG_OK;
}

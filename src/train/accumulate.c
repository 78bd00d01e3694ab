/* One optimizer step over a global batch split into micro-batches. The loss gradient of every micro-batch is
 * scaled by 1/N, N the items of the WHOLE global batch, counted before the first forward; so the accumulated
 * gradient equals the large-batch gradient whatever the split, uneven and last micro-batches included.
 * Clipping, weight decay, the optimizer's counters and the LR schedule act once, after the window. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/error.h"
#include "data/dataset.h"
#include "ops/op.h"
#include "train/trainer.h"

static size_t count_items(const int32_t *targets, size_t n) {
    size_t items = 0;
    for (size_t i = 0; i < n; i++) items += targets[i] != SNUG_IGNORE_TARGET;
    return items;
}

/* Reads only the targets of the window, chunk by chunk through the targets buffer, to count its items. */
static size_t count_window_items(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n) {
    size_t m = tr->plan.m, per = tr->plan.targets_per_sample, items = 0;
    for (size_t start = 0; start < n; start += m) {
        size_t len = n - start < m ? n - start : m;
        ds->ops->fill_targets(ds, indices + start, len, tr->x.targets);
        items += count_items(tr->x.targets, len * per);
    }
    return items;
}

static double sum_item_losses(const float *loss, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += loss[i];
    return s;
}

void trainer_accumulate(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n, size_t *items,
                        double *loss, size_t *micro_batches) {
    size_t m = tr->plan.m, per = tr->plan.targets_per_sample;
    size_t N = count_window_items(tr, ds, indices, n);
    double total = 0;
    size_t k = 0;
    /* A window without any counted item has no loss to differentiate: it contributes nothing. */
    for (size_t start = 0; N > 0 && start < n; start += m, k++) {
        size_t len = n - start < m ? n - start : m;
        exec_key key = {.seed = tr->cfg.seed, .step = tr->windows, .micro = start, .training = true};
        ds->ops->fill_inputs(ds, indices + start, len, tr->x.input);
        ds->ops->fill_targets(ds, indices + start, len, tr->x.targets);
        exec_forward(&tr->x, len, &key);
        total += sum_item_losses(tr->x.item_loss, len * per);
        exec_backward(&tr->x, len, (float)(1.0 / (double)N), &key);
    }
    tr->windows++;
    tr->samples_seen += n;
    *items = N;
    *loss = N ? total / (double)N : 0.0;
    *micro_batches = k;
}

static void zero_grads(snug_trainer *tr) { memset(tr->x.grads, 0, tr->g->param_numel * sizeof(float)); }

static snug_status check_window(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                                snug_error *err) {
    snug_status s = trainer_check_dataset(tr, ds, err);
    if (s != SNUG_OK) return s;
    if (n == 0) return snug_fail(err, SNUG_E_ARG, "an empty batch: give at least one sample");
    size_t size = snug_dataset_size(ds);
    for (size_t i = 0; i < n; i++)
        if (indices[i] >= size)
            return snug_fail(err, SNUG_E_ARG, "sample index %zu is out of range: the data set has %zu samples",
                             indices[i], size);
    return SNUG_OK;
}

snug_status snug_trainer_gradients(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                                   double *loss, snug_error *err) {
    snug_status s = check_window(tr, ds, indices, n, err);
    if (s != SNUG_OK) return s;
    size_t items, k;
    zero_grads(tr);
    trainer_accumulate(tr, ds, indices, n, &items, loss, &k);
    return SNUG_OK;
}

/* Applies the window's gradients: skip on non-finite values (schedule held), else clip, update, advance. */
static void apply_window(snug_trainer *tr, snug_step_stats *st) {
    size_t np = tr->g->param_numel;
    double norm = grad_global_norm(tr->x.grads, np);
    st->grad_norm = (float)norm;
    st->skipped = !isfinite(st->loss) || !isfinite(norm);
    st->lr = snug_schedule_lr(&tr->cfg.schedule, tr->cfg.optim.lr, tr->cfg.batch, tr->step, tr->total_steps);
    if (st->skipped) {
        tr->nonfinite_run++;
    } else {
        tr->nonfinite_run = 0;
        if (tr->cfg.clip_norm > 0) grad_clip(tr->x.grads, np, norm, tr->cfg.clip_norm);
        optim_step(&tr->opt, tr->x.params, tr->x.grads, st->lr);
        tr->step++;
    }
    /* Gradients are zeroed only here, after an optimizer step: backward always adds. */
    zero_grads(tr);
}

snug_status snug_trainer_step(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                              snug_step_stats *st, snug_error *err) {
    snug_status s = check_window(tr, ds, indices, n, err);
    if (s != SNUG_OK) return s;
    memset(st, 0, sizeof *st);
    if (tr->start_time == 0) tr->start_time = omp_get_wtime();
    trainer_accumulate(tr, ds, indices, n, &st->items, &st->loss, &st->micro_batches);
    apply_window(tr, st);
    st->step = tr->step;
    st->total_steps = tr->total_steps;
    st->elapsed_s = omp_get_wtime() - tr->start_time;
    st->samples_per_s = st->elapsed_s > 0 ? (double)tr->samples_seen / st->elapsed_s : 0;
    if (st->skipped && tr->nonfinite_run >= (tr->cfg.max_nonfinite > 0 ? tr->cfg.max_nonfinite : 1))
        return snug_fail(err, SNUG_E_NONFINITE,
                         "the loss or the gradients were not finite for %d optimizer steps in a row (after step "
                         "%ld): lower --lr, add --clip 1.0, or check the data for bad values", tr->nonfinite_run,
                         tr->step);
    return SNUG_OK;
}

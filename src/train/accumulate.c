/* One optimizer step over a global batch split into micro-batches. The loss gradient of every micro-batch is
 * scaled by 1/N, N the items of the WHOLE global batch, counted before the first forward; so the accumulated
 * gradient equals the large-batch gradient whatever the split, uneven and last micro-batches included.
 * Clipping, weight decay, the optimizer's counters and the LR schedule act once, after the window.
 * Over several ranks each accumulates its contiguous shard of the window, N is summed over the ranks first, and
 * one all-reduce of the gradient block per window makes the sum the whole batch's gradient on every rank. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/error.h"
#include "data/dataset.h"
#include "ops/op.h"
#include "train/prefetch.h"
#include "train/read.h"
#include "train/trainer.h"

static size_t count_items(const int32_t *targets, size_t n) {
    size_t items = 0;
    for (size_t i = 0; i < n; i++) items += targets[i] != SNUG_IGNORE_TARGET;
    return items;
}

/* Reads only the targets of this rank's shard, chunk by chunk through the targets buffer, to count its items. */
static size_t count_window_items(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n) {
    size_t m = tr->plan->m, per = tr->plan->targets_per_sample, items = 0;
    for (size_t start = 0; start < n; start += m) {
        size_t len = n - start < m ? n - start : m;
        trainer_read_training_targets(tr, ds, indices + start, len, tr->epoch, tr->x.targets);
        items += count_items(tr->x.targets, len * per);
    }
    return items;
}

/* The micro-batch into the input and target buffers: from the read-ahead ring when it has it, else read now.
 * Either way the wait is the step's data stall. */
static void take_micro_batch(snug_trainer *tr, const snug_dataset *ds, const size_t *idx, size_t n) {
    const double t0 = omp_get_wtime();
    const bool taken = tr->pf && prefetch_take(tr->pf, idx, n, tr->x.input, tr->x.targets);
    if (!taken) trainer_read_training(tr, ds, idx, n, tr->epoch, tr->x.input, tr->x.targets);
    if (tr->pf && !taken) tr->data_misses++;
    tr->data_wait_s += omp_get_wtime() - t0;
    tr->data_takes++;
}

static double sum_item_losses(const float *loss, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += loss[i];
    return s;
}

/* This rank's micro-batches over its shard: indices[0..len) are the window's samples [begin, begin + len). Each
 * micro-batch is keyed by its first sample's position in the global batch, so dropout draws the masks a run of
 * one rank draws. Returns the sum of the item losses. */
static double run_shard(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t begin, size_t len,
                        size_t N, size_t *micro_batches) {
    size_t m = tr->plan->m, per = tr->plan->targets_per_sample, k = 0;
    double total = 0;
    for (size_t start = 0; start < len; start += m, k++) {
        size_t part = len - start < m ? len - start : m;
        exec_key key = {.seed = tr->cfg.seed, .step = tr->windows, .micro = begin + start, .training = true};
        const double t0 = trainer_tick(tr);
        take_micro_batch(tr, ds, indices + start, part);
        trainer_tock(tr, PART_DATA, t0);
        exec_forward(&tr->x, part, &key);
        total += sum_item_losses(tr->x.item_loss, part * per);
        exec_backward(&tr->x, part, (float)(1.0 / (double)N), &key);
    }
    *micro_batches = k;
    return total;
}

/* The ranks' partial sums become the window's: the loss sum, then the whole gradient block in one all-reduce
 * (in place: no buffer beyond the gradients themselves). In a job of one both are the identity, but the
 * all-reduce is still counted, so a test on one process sees how often a job of many would reduce. */
static snug_status reduce_window(snug_trainer *tr, double *loss_sum, snug_error *err) {
    snug_status s = dist_allreduce_doubles(loss_sum, 1, tr->cfg.rank_timeout_seconds, err);
    if (s != SNUG_OK) return s;
    tr->grad_allreduces++;
    double t0 = omp_get_wtime();
    s = dist_allreduce_floats(tr->x.grads, tr->g->param_numel, tr->cfg.rank_timeout_seconds, err);
    tr->allreduce_s += omp_get_wtime() - t0;
    return s;
}

snug_status trainer_accumulate(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                               size_t *items, double *loss, size_t *micro_batches, snug_error *err) {
    size_t begin, len, k = 0;
    /* The last window's step (or the caller) may have changed the parameters: what the ops derive from them is
     * stale, but where the step's update wrote the kept bf16 copies with them and nothing changed since. */
    if (!trainer_copies_take_current(tr)) exec_weights_changed(&tr->x);
    if (tr->x.state) memcpy(tr->x.state_before, tr->x.state, tr->g->state_numel * sizeof(float));
    dist_shard(n, tr->dist.rank, tr->dist.size, &begin, &len);
    /* N is summed over the ranks before the first forward, so that every rank scales by the same 1/N. */
    double t0 = trainer_tick(tr);
    size_t N = count_window_items(tr, ds, indices + begin, len);
    trainer_tock(tr, PART_DATA, t0);
    snug_status s = dataset_read_status(ds, err);
    if (s == SNUG_OK) s = dist_allreduce_sizes(&N, 1, DIST_SUM, tr->cfg.rank_timeout_seconds, err);
    if (s != SNUG_OK) return s;
    /* A window without any counted item has no loss to differentiate: it contributes nothing. An empty shard
     * (B < R) contributes zeros, and its rank still joins the reductions. */
    double total = N > 0 ? run_shard(tr, ds, indices + begin, begin, len, N, &k) : 0.0;
    /* No backward ran (an empty shard, a window without items): the gradients the last update left for their
     * first writer still hold that window's values, and this window's contribution is zero. */
    if (tr->x.grads_stale) trainer_zero_grads(tr);
    t0 = trainer_tick(tr);
    exec_flush(&tr->x); /* what backward deferred, before the gradients are read */
    trainer_tock(tr, PART_DEFERRED, t0);
    if ((s = dataset_read_status(ds, err)) != SNUG_OK) return s; /* a read failed: this window is no gradient */
    t0 = trainer_tick(tr);
    s = reduce_window(tr, &total, err);
    trainer_tock(tr, PART_ALLREDUCE, t0);
    if (s != SNUG_OK) return s;
    tr->windows++;
    tr->stat_updates += (long)k;
    tr->samples_seen += n;
    tr->window_items = N;
    *items = N;
    *loss = N ? total / (double)N : 0.0;
    *micro_batches = k;
    return SNUG_OK;
}

size_t trainer_window_micro_batches(const snug_trainer *tr) {
    size_t begin, len;
    dist_shard(tr->batch, tr->dist.rank, tr->dist.size, &begin, &len);
    return (len + tr->plan->m - 1) / tr->plan->m;
}

void trainer_zero_grads(snug_trainer *tr) {
    memset(tr->x.grads, 0, tr->g->param_numel * sizeof(float));
    tr->x.grads_stale = false; /* every gradient zero: the next backward may add */
}

/* A skipped window changes nothing but the counters: its running statistics go back to the window's start. */
void trainer_restore_buffers(snug_trainer *tr) {
    if (tr->x.state) memcpy(tr->x.state, tr->x.state_before, tr->g->state_numel * sizeof(float));
}

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
    trainer_zero_grads(tr);
    return trainer_accumulate(tr, ds, indices, n, &items, loss, &k, err);
}

/* Applies the window's gradients: skip on non-finite values (schedule held), else clip, update, advance. The
 * update reads each gradient once, scaled by the clip factor on the fly, and leaves it zero (optim.h): one pass
 * over the gradients instead of a clip, an update and a memset. A gradient whose first writer writes it whole
 * (exec_param_written_fresh: the linear layers' weights and biases) is not even zeroed: the next window's first
 * backward writes it over the values it keeps. */
static void apply_window(snug_trainer *tr, snug_step_stats *st) {
    const double t0 = trainer_tick(tr);
    size_t np = tr->g->param_numel;
    double norm = grad_global_norm(tr->x.grads, np, tr->opt.spans, tr->opt.n_spans);
    st->grad_norm = (float)norm;
    st->skipped = !isfinite(st->loss) || !isfinite(norm);
    st->lr = snug_schedule_lr(&tr->cfg.schedule, tr->cfg.optim.lr, tr->batch, tr->step, tr->total_steps);
    if (st->skipped) {
        tr->nonfinite_run++;
        trainer_zero_grads(tr); /* backward always adds: the next window starts from zero */
        trainer_restore_buffers(tr);
        tr->stat_updates -= (long)st->micro_batches; /* the statistics are those before the window again */
        trainer_tock(tr, PART_UPDATE, t0);
        return;
    }
    tr->nonfinite_run = 0;
    optim_step_consume(&tr->opt, tr->x.params, tr->x.grads, grad_clip_factor(norm, tr->cfg.clip_norm), st->lr);
    trainer_copies_written(tr);
    if (tr->opt.spans) exec_grads_left_stale(&tr->x); /* the rewritten spans kept their values (optim.h) */
    tr->step++;
    trainer_tock(tr, PART_UPDATE, t0);
}

snug_status snug_trainer_step(snug_trainer *tr, const snug_dataset *ds, const size_t *indices, size_t n,
                              snug_step_stats *st, snug_error *err) {
    snug_status s = check_window(tr, ds, indices, n, err);
    if (s != SNUG_OK) return s;
    memset(st, 0, sizeof *st);
    trainer_start_clock(tr);
    s = trainer_accumulate(tr, ds, indices, n, &st->items, &st->loss, &st->micro_batches, err);
    if (s != SNUG_OK) return s;
    /* Every rank holds the same gradients and loss now, so each takes the same decision and the same update:
     * the parameters stay identical without being sent again. */
    apply_window(tr, st);
    st->step = tr->step;
    st->total_steps = tr->total_steps;
    /* The run's time goes on from its state's; the speed is this process's samples over this process's time, so
     * that neither the samples nor the time of the processes before a resume enter it. */
    st->process_s = trainer_process_seconds(tr);
    st->elapsed_s = tr->earlier_seconds + st->process_s;
    st->first_step = tr->start_step;
    st->run_samples = tr->samples_seen;
    st->samples_per_s = st->process_s > 0 ? (double)(tr->samples_seen - tr->start_samples) / st->process_s : 0;
    if (st->skipped && tr->nonfinite_run >= (tr->cfg.max_nonfinite > 0 ? tr->cfg.max_nonfinite : 1)) {
        char where[512];
        trainer_find_nonfinite(tr, ds, indices, n, where, sizeof where);
        return snug_fail(err, SNUG_E_NONFINITE,
                         "the loss or the gradients were not finite for %d optimizer steps in a row (after step "
                         "%ld)%s; lower the learning rate, clip the gradient norm (at 1.0, say), or check the data "
                         "for bad values", tr->nonfinite_run, tr->step, where);
    }
    return SNUG_OK;
}

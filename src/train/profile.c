/* Where a step's time goes: the executor times each op call of a training micro-batch (exec_profile), the
 * trainer the parts of a step around the ops; snug_trainer_op_times lists both, in schedule order then the
 * parts. Off, the cost is one branch per op call. */
#include <omp.h>

#include "core/error.h"
#include "ops/op.h"
#include "train/prefetch.h"
#include "train/trainer.h"

static const char *const part_names[PART_COUNT] = {"(data)", "(deferred weight gradients)", "(all-reduce)",
                                                   "(update)"};
static const snug_phase part_phases[PART_COUNT] = {SNUG_PHASE_FORWARD, SNUG_PHASE_BACKWARD, SNUG_PHASE_BACKWARD,
                                                   SNUG_PHASE_UPDATE};

void trainer_start_clock(snug_trainer *tr) {
    if (tr->start_time != 0) return;
    tr->start_time = omp_get_wtime();
    tr->start_step = tr->step;
    tr->start_samples = tr->samples_seen;
}

double trainer_process_seconds(const snug_trainer *tr) {
    return tr->start_time != 0 ? omp_get_wtime() - tr->start_time : 0;
}

double trainer_tick(const snug_trainer *tr) { return tr->x.profiling ? omp_get_wtime() : 0; }

void trainer_tock(snug_trainer *tr, trainer_part part, double t0) {
    if (t0 == 0) return;
    tr->part_seconds[part] += omp_get_wtime() - t0;
    tr->part_calls[part]++;
}

snug_status snug_trainer_profile(snug_trainer *tr, bool on, snug_error *err) {
    if (on)
        for (int i = 0; i < PART_COUNT; i++) tr->part_seconds[i] = 0, tr->part_calls[i] = 0;
    /* the executor's flag is the trainer's too: one switch for the ops and the parts */
    if (!exec_profile(&tr->x, on))
        return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused the profiler's %d timers",
                         tr->plan->n_steps);
    return SNUG_OK;
}

/* Entry i of out, when there is room for it. */
static void put(snug_op_time *out, size_t cap, size_t i, snug_op_time t) {
    if (i < cap) out[i] = t;
}

size_t snug_trainer_op_times(const snug_trainer *tr, snug_op_time *out, size_t cap) {
    size_t n = 0;
    const plan *p = tr->plan;
    for (int s = 0; tr->x.op_calls && s < p->n_steps; s++) {
        if (tr->x.op_calls[s] == 0) continue;
        const graph_node *node = &tr->g->nodes[p->steps[s].node];
        put(out, cap, n++, (snug_op_time){.name = node->name, .op = node->op->kind, .phase = p->steps[s].phase,
                                          .seconds = tr->x.op_seconds[s], .calls = tr->x.op_calls[s]});
    }
    for (int i = 0; i < PART_COUNT; i++)
        if (tr->part_calls[i])
            put(out, cap, n++, (snug_op_time){.name = part_names[i], .op = "", .phase = part_phases[i],
                                              .seconds = tr->part_seconds[i], .calls = tr->part_calls[i]});
    return n;
}

void snug_trainer_data_timing(snug_trainer *tr, snug_data_timing *out) {
    *out = (snug_data_timing){.wait_seconds = tr->data_wait_s, .micro_batches = tr->data_takes,
                              .read_ahead_misses = tr->data_misses};
    double busy = 0;
    size_t samples = 0;
    if (tr->pf) prefetch_counts(tr->pf, &busy, &samples); /* the reader of a fit in progress */
    out->read_ahead_seconds = tr->read_ahead_s + busy;
    out->read_ahead_samples = tr->read_ahead_samples + samples;
}

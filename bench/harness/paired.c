/* A variant timed against full batch in one process. Separate processes measured minutes apart see different
 * machines on a small virtual host: its two vCPUs move between cores that share a last-level cache and cores
 * on two chiplets within seconds to minutes, and a step can take half as long again in the second state
 * (docs/performance.md, "Cache state"), so the ratio of two processes measures the host as much as snug. Here
 * both trainers are built first, then blocks of about a quarter second alternate, in the order full, v, v, full,
 * full, v, ... (a drift in the machine's speed during a pair hits each side alike over two pairs). Each block
 * starts with one untimed step: the other trainer's memory has just gone through the caches, and a block
 * should time its own trainer warm as a training run has it. A pair's ratio is the full block's ms per step
 * over the variant's (the variant's samples/s over full batch's: both train the same global batch); the result
 * is their median. No memory is reported: two trainers share the process. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/error.h"

/* One block (bench_case_block): *ms per step. */
static snug_status block(bench_case *c, int steps, double *ms, snug_error *err) {
    double seconds = 0;
    snug_status st = bench_case_block(c, steps, &seconds, err);
    *ms = 1e3 * seconds / steps;
    return st;
}

/* Pair i: full first where i is even, the variant first where it is odd. */
static snug_status time_pairs(bench_case *full, bench_case *var, bench_pair_result *r, double *full_ms,
                              double *ms, snug_error *err) {
    snug_status st = SNUG_OK;
    for (int i = 0; i < r->pairs && st == SNUG_OK; i++) {
        if (i % 2 == 0) {
            st = block(full, r->full_steps, &full_ms[i], err);
            if (st == SNUG_OK) st = block(var, r->steps, &ms[i], err);
        } else {
            st = block(var, r->steps, &ms[i], err);
            if (st == SNUG_OK) st = block(full, r->full_steps, &full_ms[i], err);
        }
        if (st == SNUG_OK) r->ratios[i] = full_ms[i] / ms[i];
    }
    return st;
}

static void summarize(bench_pair_result *r, double *full_ms, double *ms, double *sorted) {
    const size_t n = (size_t)r->pairs;
    memcpy(sorted, r->ratios, n * sizeof *sorted);
    r->ratio = bench_median(sorted, n);
    r->ratio_lo = sorted[0];
    r->ratio_hi = sorted[n - 1];
    r->full_ms = bench_median(full_ms, n);
    r->ms = bench_median(ms, n);
}

snug_status bench_pair_measure(const bench_options *opt, const bench_workload *w, bench_variant v,
                               bench_pair_result *r, snug_error *err) {
    *r = (bench_pair_result){.w = w, .v = v, .micro_batch = bench_micro_batch(v, w->batch), .pairs = (int)opt->repeats};
    bench_case full = {.w = w, .v = BENCH_FULL}, var = {.w = w, .v = v, .precision = (snug_precision)opt->precision};
    bench_result full_figures, figures;
    const size_t n = (size_t)r->pairs;
    double *times = calloc(3 * n, sizeof *times);
    r->ratios = calloc(n, sizeof *r->ratios);
    snug_status st = times && r->ratios ? SNUG_OK : snug_fail(err, SNUG_E_OOM, "cannot hold %zu timings", 4 * n);
    if (st == SNUG_OK) st = bench_case_open(&full, &full_figures, err);
    if (st == SNUG_OK) st = bench_case_open(&var, &figures, err);
    if (st == SNUG_OK)
        st = bench_case_warm_up(&full, opt->warmup, opt->steps, BENCH_BLOCK_SECONDS, BENCH_BLOCK_MIN_STEPS,
                                &r->full_steps, err);
    if (st == SNUG_OK)
        st = bench_case_warm_up(&var, opt->warmup, opt->steps, BENCH_BLOCK_SECONDS, BENCH_BLOCK_MIN_STEPS,
                                &r->steps, err);
    if (st == SNUG_OK && opt->profile) st = bench_profile_start(&full, err);
    if (st == SNUG_OK && opt->profile) st = bench_profile_start(&var, err);
    if (st == SNUG_OK) st = time_pairs(&full, &var, r, times, times + n, err);
    if (st == SNUG_OK) {
        summarize(r, times, times + n, times + 2 * n);
        bench_print_pair_row(stdout, r);
        if (opt->profile) bench_print_profile(stdout, &var, &full);
    }
    bench_case_close(&var);
    bench_case_close(&full);
    free(times);
    return st;
}

void bench_pair_results_free(bench_pair_result *r, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(r[i].ratios);
        r[i].ratios = NULL;
    }
}

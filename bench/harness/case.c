/* A benchmark workload in one variant: its graph, its synthetic data and its trainer, built through the public
 * API exactly as `snug train` builds them, stepped on the whole synthetic batch, and released. main.c
 * times one such case per process measurement; paired.c keeps two alive and alternates them. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "bench.h"
#include "core/error.h"

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Planned bytes and FLOPs of one optimizer step: a micro-batch's FLOPs scale with its samples, so a step of B
 * samples costs step_flops * B / m whatever the split. */
static void plan_figures(const bench_case *c, bench_result *r) {
    snug_plan_summary s;
    snug_plan_summarize(c->plan, &s);
    r->planned_total = s.total;
    r->planned_activations = s.bytes[SNUG_MEM_ACTIVATIONS];
    r->planned_workspace = s.bytes[SNUG_MEM_WORKSPACE];
    r->persistent = s.bytes[SNUG_MEM_PARAMS] + s.bytes[SNUG_MEM_GRADS] + s.bytes[SNUG_MEM_OPTIM];
    r->step_flops = s.step_flops * (double)c->w->batch / (double)r->micro_batch;
}

static size_t trainable_params(const snug_trainer *tr) {
    size_t total = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t numel = 0;
        float *grads = NULL;
        snug_trainer_param(tr, i, &numel, NULL, &grads);
        if (grads) total += numel;
    }
    return total;
}

snug_status bench_case_open(bench_case *c, bench_result *r, snug_error *err) {
    const bench_workload *w = c->w;
    const snug_train_config cfg = bench_config(w);
    const snug_plan_request req = bench_request(w, c->v, c->precision);
    *r = (bench_result){.w = w, .v = c->v, .micro_batch = req.micro_batch};
    size_t hwm;
    snug_status st = bench_build_graph(w, &c->graph, err);
    if (st == SNUG_OK) st = snug_graph_check(c->graph, err);
    if (st == SNUG_OK) st = bench_dataset_new(w, c->graph, w->batch, 1, &c->data, err);
    if (st == SNUG_OK) st = snug_plan_new(c->graph, &req, &c->plan, NULL, err);
    if (st == SNUG_OK) {
        snug_plan_summary s;
        snug_plan_summarize(c->plan, &s);
        r->micro_batches = s.micro_batches;
        plan_figures(c, r);
    }
    c->indices = st == SNUG_OK ? malloc(w->batch * sizeof *c->indices) : NULL;
    if (st == SNUG_OK && !c->indices) st = snug_fail(err, SNUG_E_OOM, "cannot hold %zu sample indices", w->batch);
    for (size_t i = 0; st == SNUG_OK && i < w->batch; i++) c->indices[i] = i;
    if (st == SNUG_OK) {
        bench_rss_release_freed();
        bench_rss_read(&r->rss_start, &hwm);
    }
    if (st == SNUG_OK) st = snug_trainer_new(c->plan, &cfg, &c->trainer, err);
    if (st == SNUG_OK) st = snug_trainer_check_dataset(c->trainer, c->data, err);
    if (st == SNUG_OK) {
        r->params = trainable_params(c->trainer);
        bench_rss_read(&r->rss_before, &hwm);
    }
    return st;
}

snug_status bench_case_steps(bench_case *c, long steps, double *seconds, snug_error *err) {
    snug_step_stats st;
    double t0 = omp_get_wtime();
    for (long i = 0; i < steps; i++) {
        snug_status s = snug_trainer_step(c->trainer, c->data, c->indices, c->w->batch, &st, err);
        if (s != SNUG_OK) return s;
        c->steps_run++;
    }
    *seconds = omp_get_wtime() - t0;
    return SNUG_OK;
}

snug_status bench_case_block(bench_case *c, long steps, double *seconds, snug_error *err) {
    double untimed = 0;
    snug_status s = bench_case_steps(c, 1, &untimed, err);
    return s == SNUG_OK ? bench_case_steps(c, steps, seconds, err) : s;
}

snug_status bench_case_warm_up(bench_case *c, long warmup, long steps, double target_seconds, int min_steps,
                               int *out_steps, snug_error *err) {
    double seconds = 0;
    if (warmup > 1) {
        snug_status s = bench_case_steps(c, warmup - 1, &seconds, err);
        if (s != SNUG_OK) return s;
    }
    if (warmup > 0 || steps == 0) {
        snug_status s = bench_case_steps(c, 1, &seconds, err);
        if (s != SNUG_OK) return s;
    }
    if (steps > 0) {
        *out_steps = (int)steps;
    } else {
        double n = seconds > 0 ? ceil(target_seconds / seconds) : BENCH_MAX_STEPS;
        *out_steps = (int)fmin(fmax(n, min_steps), BENCH_MAX_STEPS);
    }
    return SNUG_OK;
}

void bench_case_close(bench_case *c) {
    /* the trainer points into the plan, the plan into the graph */
    if (c->trainer) snug_trainer_free(c->trainer);
    snug_plan_free(c->plan);
    snug_dataset_free(c->data);
    if (c->graph) snug_graph_free(c->graph);
    free(c->indices);
    c->trainer = NULL, c->plan = NULL, c->data = NULL, c->graph = NULL, c->indices = NULL;
}

/* `snug bench`: per workload and variant, build the trainer, run warm-up steps, then time repeats of optimizer
 * steps on synthetic in-memory data, through the public API exactly as `snug train` drives it. The SGEMM rate
 * is measured once at the start, with the same threads, so every GFLOP/s figure has its ceiling from the same
 * run (bench.h lists the parts).
 *
 * Memory, measured as the kernel sees it (bench_rss.c), at three moments:
 *   rss_start   the graph and the synthetic data exist, the trainer does not;
 *   rss_before  the trainer exists (all planned memory reserved and zeroed), just before the first step;
 *   rss_peak    the high-water mark over the timed steps (reset just before them).
 * snug reserves and touches every planned byte in snug_trainer_new, so peak - rss_before is close to nothing
 * by construction; PyTorch creates gradients, optimizer state and activations during its first steps. The
 * comparable figure is therefore "activation RSS": peak - rss_start - (parameters + gradients + optimizer
 * state), computed the same way by bench/pytorch_bench.py: the resident
 * memory a step needs beyond the model's persistent state, for both. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "core/error.h"

#define AUTO_REPEAT_SECONDS 1.0
#define AUTO_MIN_STEPS 3
#define AUTO_MAX_STEPS 200
#define SGEMM_TRIES 3

typedef struct bench_case {
    const bench_options *opt;
    const bench_machine *machine;
    const bench_workload *w;
    bench_variant v;
    snug_graph *graph;
    snug_dataset *data;
    snug_trainer *trainer;
    size_t *indices;   /* 0 .. B-1: every step trains on the whole synthetic set */
} bench_case;

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Planned bytes and FLOPs of one optimizer step: a micro-batch's FLOPs scale with its samples, so a step of B
 * samples costs step_flops * B / m whatever the split. */
static snug_status plan_figures(bench_case *c, const snug_train_config *cfg, bench_result *r, snug_error *err) {
    snug_plan *p = NULL;
    snug_status st = snug_plan_new(c->graph, cfg, r->micro_batch, cfg->checkpoint, 0, &p, err);
    if (st != SNUG_OK) return st;
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    snug_plan_free(p);
    r->planned_total = s.total;
    r->planned_activations = s.bytes[SNUG_MEM_ACTIVATIONS];
    r->planned_workspace = s.bytes[SNUG_MEM_WORKSPACE];
    r->persistent = s.bytes[SNUG_MEM_PARAMS] + s.bytes[SNUG_MEM_GRADS] + s.bytes[SNUG_MEM_OPTIM];
    r->step_flops = s.step_flops * (double)c->w->batch / (double)r->micro_batch;
    return SNUG_OK;
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

/* Runs `steps` optimizer steps on the whole synthetic batch; *seconds is their wall time. */
static snug_status run_steps(bench_case *c, long steps, double *seconds, snug_error *err) {
    snug_step_stats st;
    double t0 = omp_get_wtime();
    for (long i = 0; i < steps; i++) {
        snug_status s = snug_trainer_step(c->trainer, c->data, c->indices, c->w->batch, &st, err);
        if (s != SNUG_OK) return s;
    }
    *seconds = omp_get_wtime() - t0;
    return SNUG_OK;
}

/* Warm-up; with --steps 0, the last warm-up step sets how many steps make about a second. */
static snug_status warm_up(bench_case *c, int *steps, snug_error *err) {
    long warmup = c->opt->warmup;
    double seconds = 0;
    if (warmup > 1) {
        snug_status s = run_steps(c, warmup - 1, &seconds, err);
        if (s != SNUG_OK) return s;
    }
    if (warmup > 0 || c->opt->steps == 0) {
        snug_status s = run_steps(c, 1, &seconds, err);
        if (s != SNUG_OK) return s;
    }
    if (c->opt->steps > 0) {
        *steps = (int)c->opt->steps;
    } else {
        double n = seconds > 0 ? ceil(AUTO_REPEAT_SECONDS / seconds) : AUTO_MAX_STEPS;
        *steps = (int)fmin(fmax(n, AUTO_MIN_STEPS), AUTO_MAX_STEPS);
    }
    return SNUG_OK;
}

static snug_status time_repeats(bench_case *c, bench_result *r, snug_error *err) {
    snug_status st = warm_up(c, &r->steps, err);
    if (st != SNUG_OK) return st;
    r->repeats = (int)c->opt->repeats;
    double *ms = calloc((size_t)r->repeats, sizeof *ms);
    if (!ms) return snug_fail(err, SNUG_E_OOM, "cannot hold %d timings in memory", r->repeats);
    bench_rss_reset_peak();
    for (int i = 0; i < r->repeats && st == SNUG_OK; i++) {
        double seconds = 0;
        st = run_steps(c, r->steps, &seconds, err);
        ms[i] = 1e3 * seconds / r->steps;
    }
    size_t rss_now = 0;
    bench_rss_read(&rss_now, &r->rss_peak);
    if (st == SNUG_OK) r->ms_per_step = median(ms, (size_t)r->repeats);
    free(ms);
    return st;
}

static void derive(const bench_case *c, bench_result *r) {
    r->samples_per_s = r->ms_per_step > 0 ? 1e3 * (double)c->w->batch / r->ms_per_step : 0;
    r->gflops = r->ms_per_step > 0 ? r->step_flops * 1e-9 / (r->ms_per_step * 1e-3) : 0;
    r->sgemm_fraction = c->machine->sgemm_gflops > 0 ? r->gflops / c->machine->sgemm_gflops : 0;
    size_t base = r->rss_start + r->persistent;
    r->activation_rss = r->rss_peak > base ? r->rss_peak - base : 0;
}

static snug_status measure(bench_case *c, bench_result *r, snug_error *err) {
    const bench_workload *w = c->w;
    snug_train_config cfg = bench_config(w, c->v);
    *r = (bench_result){.w = w, .v = c->v, .micro_batch = bench_micro_batch(c->v, w->batch)};
    r->micro_batches = (w->batch + r->micro_batch - 1) / r->micro_batch;
    size_t hwm;
    c->graph = bench_build_graph(w, err);
    if (!c->graph) return err->status != SNUG_OK ? err->status : SNUG_E_ARG;
    snug_status st = snug_graph_check(c->graph, err);
    if (st == SNUG_OK) st = bench_dataset_new(w, c->graph, w->batch, 1, &c->data, err);
    if (st == SNUG_OK) st = plan_figures(c, &cfg, r, err);
    c->indices = st == SNUG_OK ? malloc(w->batch * sizeof *c->indices) : NULL;
    if (st == SNUG_OK && !c->indices) st = snug_fail(err, SNUG_E_OOM, "cannot hold %zu sample indices", w->batch);
    for (size_t i = 0; st == SNUG_OK && i < w->batch; i++) c->indices[i] = i;
    if (st == SNUG_OK) {
        bench_rss_release_freed();
        bench_rss_read(&r->rss_start, &hwm);
    }
    if (st == SNUG_OK) st = snug_trainer_new(c->graph, &cfg, &c->trainer, err);
    if (st == SNUG_OK) st = snug_trainer_check_dataset(c->trainer, c->data, err);
    if (st == SNUG_OK) {
        r->params = trainable_params(c->trainer);
        bench_rss_read(&r->rss_before, &hwm);
        st = time_repeats(c, r, err);
    }
    if (st == SNUG_OK) derive(c, r);
    return st;
}

static void release(bench_case *c) {
    /* the trainer points into the graph, so it goes first */
    if (c->trainer) snug_trainer_free(c->trainer);
    snug_dataset_free(c->data);
    if (c->graph) snug_graph_free(c->graph);
    free(c->indices);
    c->trainer = NULL, c->data = NULL, c->graph = NULL, c->indices = NULL;
}

/* Every (workload, variant) the flags select, in table order. */
static snug_status run_all(const bench_options *opt, const bench_machine *m, bench_result *results, size_t *n,
                           snug_error *err) {
    size_t nw;
    const bench_workload *ws = bench_workloads(&nw);
    *n = 0;
    for (size_t i = 0; i < nw; i++) {
        if (strcmp(opt->workload, "all") != 0 && strcmp(opt->workload, ws[i].name) != 0) continue;
        for (int v = 0; v < BENCH_NVARIANTS; v++) {
            if (opt->variant != BENCH_NVARIANTS && opt->variant != v) continue;
            bench_case c = {.opt = opt, .machine = m, .w = &ws[i], .v = (bench_variant)v};
            snug_status st = measure(&c, &results[*n], err);
            release(&c);
            if (st != SNUG_OK) return st;
            bench_print_row(stdout, &results[(*n)++]);
        }
    }
    return SNUG_OK;
}

static int write_reports(const bench_options *opt, const bench_machine *m, const bench_result *r, size_t n) {
    snug_error err = {0};
    if (opt->csv && bench_write_csv(opt->csv, m, r, n, &err) != SNUG_OK) return cli_runtime_error(&err);
    if (opt->markdown && bench_write_markdown(opt->markdown, m, r, n, &err) != SNUG_OK)
        return cli_runtime_error(&err);
    return CLI_EXIT_OK;
}

int cmd_bench(int argc, char **argv) {
    bench_options opt;
    char msg[512];
    if (!bench_parse(argc, argv, &opt, msg, sizeof msg)) return cli_usage_error("bench", CLI_BENCH_USAGE, msg);
    if (opt.help) {
        cli_bench_help(stdout);
        return CLI_EXIT_OK;
    }
    snug_set_threads((int)opt.threads);
    bench_machine m;
    bench_machine_describe(&m);
    m.sgemm_n = (size_t)opt.sgemm_n;
    bench_sgemm_probe(m.sgemm_n, SGEMM_TRIES, &m.blas_gflops, &m.own_gflops);
    m.sgemm_gflops = m.blas_gflops > m.own_gflops ? m.blas_gflops : m.own_gflops;
    bench_print_header(stdout, &m);
    size_t nw, n = 0;
    bench_workloads(&nw);
    bench_result *results = calloc(nw * BENCH_NVARIANTS, sizeof *results);
    if (!results) {
        snug_error err = {.status = SNUG_E_OOM};
        snprintf(err.message, sizeof err.message, "cannot hold the benchmark's results in memory");
        return cli_runtime_error(&err);
    }
    snug_error err = {0};
    int rc = run_all(&opt, &m, results, &n, &err) == SNUG_OK ? write_reports(&opt, &m, results, n)
                                                              : cli_runtime_error(&err);
    free(results);
    return rc;
}

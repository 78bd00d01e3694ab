/* snug-bench, the benchmark program: per workload and variant, build the trainer, run warm-up steps, then time
 * repeats of optimizer steps on synthetic in-memory data, through the public API exactly as `snug train` drives
 * it. The SGEMM rate is measured once at the start, with the same threads, so every GFLOP/s figure has its
 * ceiling from the same run (bench.h lists the parts).
 *
 * Memory, measured as the kernel sees it (rss.c), at three moments:
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

#include "bench.h"
#include "cli/process_start.h"
#include "cli/errors.h"
#include "core/error.h"
#include "kernels/isa.h"

#define AUTO_REPEAT_SECONDS 1.0
#define AUTO_MIN_STEPS 3
#define SGEMM_TRIES 3

static snug_status time_repeats(const bench_options *opt, bench_case *c, bench_result *r, snug_error *err) {
    snug_status st =
        bench_case_warm_up(c, opt->warmup, opt->steps, AUTO_REPEAT_SECONDS, AUTO_MIN_STEPS, &r->steps, err);
    if (st != SNUG_OK) return st;
    r->repeats = (int)opt->repeats;
    double *ms = calloc((size_t)r->repeats, sizeof *ms);
    if (!ms) return snug_fail(err, SNUG_E_OOM, "cannot hold %d timings in memory", r->repeats);
    bench_rss_reset_peak();
    for (int i = 0; i < r->repeats && st == SNUG_OK; i++) {
        double seconds = 0;
        st = bench_case_steps(c, r->steps, &seconds, err);
        ms[i] = 1e3 * seconds / r->steps;
    }
    size_t rss_now = 0;
    bench_rss_read(&rss_now, &r->rss_peak);
    if (st == SNUG_OK) r->ms_per_step = bench_median(ms, (size_t)r->repeats);
    free(ms);
    return st;
}

static void derive(const bench_machine *m, bench_result *r) {
    r->samples_per_s = r->ms_per_step > 0 ? 1e3 * (double)r->w->batch / r->ms_per_step : 0;
    r->gflops = r->ms_per_step > 0 ? r->step_flops * 1e-9 / (r->ms_per_step * 1e-3) : 0;
    r->sgemm_fraction = m->sgemm_gflops > 0 ? r->gflops / m->sgemm_gflops : 0;
    size_t base = r->rss_start + r->persistent;
    r->activation_rss = r->rss_peak > base ? r->rss_peak - base : 0;
}

static snug_status measure(const bench_options *opt, const bench_machine *m, bench_case *c, bench_result *r,
                           snug_error *err) {
    snug_status st = bench_case_open(c, r, err);
    if (st == SNUG_OK) st = time_repeats(opt, c, r, err);
    if (st == SNUG_OK) derive(m, r);
    return st;
}

/* --profile: one more repeat's steps with the trainer's op timers on, after the timed ones (which ran without). */
static snug_status profile(bench_case *c, int steps, snug_error *err) {
    double seconds;
    snug_status st = bench_profile_start(c, err);
    if (st == SNUG_OK) st = bench_case_steps(c, steps, &seconds, err);
    if (st == SNUG_OK) bench_print_profile(stdout, c, NULL);
    return st;
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
            bench_case c = {.w = &ws[i], .v = (bench_variant)v, .precision = (snug_precision)opt->precision};
            snug_status st = measure(opt, m, &c, &results[*n], err);
            if (st == SNUG_OK) bench_print_row(stdout, &results[(*n)++]);
            if (st == SNUG_OK && opt->profile) st = profile(&c, results[*n - 1].steps, err);
            bench_case_close(&c);
            if (st != SNUG_OK) return st;
        }
    }
    return SNUG_OK;
}

/* --paired: every chosen (workload, variant) but full batch, each against full batch; in bf16 full batch too,
 * against full batch in fp32. */
static snug_status run_paired(const bench_options *opt, bench_pair_result *results, size_t *n, snug_error *err) {
    size_t nw;
    const bench_workload *ws = bench_workloads(&nw);
    *n = 0;
    for (size_t i = 0; i < nw; i++) {
        if (strcmp(opt->workload, "all") != 0 && strcmp(opt->workload, ws[i].name) != 0) continue;
        for (int v = opt->precision == SNUG_PRECISION_BF16 ? BENCH_FULL : BENCH_FULL + 1; v < BENCH_NVARIANTS; v++) {
            if (opt->variant != BENCH_NVARIANTS && opt->variant != v) continue;
            snug_status st = bench_pair_measure(opt, &ws[i], (bench_variant)v, &results[*n], err);
            (*n)++;
            if (st != SNUG_OK) return st;
        }
    }
    return SNUG_OK;
}

static int write_pair_reports(const bench_options *opt, const bench_machine *m, const bench_pair_result *r,
                              size_t n) {
    snug_error err = {0};
    if (opt->csv && bench_write_pair_csv(opt->csv, m, r, n, &err) != SNUG_OK) return cli_runtime_error(&err);
    if (opt->markdown && bench_write_pair_markdown(opt->markdown, m, r, n, &err) != SNUG_OK)
        return cli_runtime_error(&err);
    return CLI_EXIT_OK;
}

static int bench_paired(const bench_options *opt, const bench_machine *m) {
    size_t nw, n = 0;
    bench_workloads(&nw);
    bench_pair_result *results = calloc(nw * BENCH_NVARIANTS, sizeof *results);
    snug_error err = {0};
    if (!results) {
        snug_fail(&err, SNUG_E_OOM, "cannot hold the benchmark's results in memory");
        return cli_runtime_error(&err);
    }
    bench_print_pair_header(stdout, m, (snug_precision)opt->precision);
    int rc = run_paired(opt, results, &n, &err) == SNUG_OK ? write_pair_reports(opt, m, results, n)
                                                          : cli_runtime_error(&err);
    bench_pair_results_free(results, n);
    free(results);
    return rc;
}

static int write_reports(const bench_options *opt, const bench_machine *m, const bench_result *r, size_t n) {
    snug_error err = {0};
    if (opt->csv && bench_write_csv(opt->csv, m, r, n, &err) != SNUG_OK) return cli_runtime_error(&err);
    if (opt->markdown && bench_write_markdown(opt->markdown, m, r, n, &err) != SNUG_OK)
        return cli_runtime_error(&err);
    return CLI_EXIT_OK;
}

/* --turns: one workload in one variant, and nothing the protocol's standard output could not carry. */
static int bench_turns_checked(const bench_options *opt) {
    const bench_workload *w = bench_find_workload(opt->workload);
    if (!w || opt->variant == BENCH_NVARIANTS)
        return cli_usage_error(NULL, BENCH_USAGE,
                               "--turns times one trainer: choose one --workload and one --variant");
    if (opt->paired || opt->profile || opt->csv || opt->markdown)
        return cli_usage_error(NULL, BENCH_USAGE,
                               "--turns prints only its protocol's lines: it takes no --paired, --profile, --csv or "
                               "--markdown");
    return bench_turns(opt, w, (bench_variant)opt->variant);
}

/* --isa: the kernels run as on a smaller CPU from here on (before anything is planned: a plan sizes its
 * workspace for the kernels it will run). A larger set than this CPU's cannot be emulated. */
static bool bench_cap_isa(kernel_isa most, char *msg, size_t len) {
    if (most > kernel_isa_cpu()) {
        snprintf(msg, len, "--isa %s: this CPU (and build) runs at most %s; choose that or a smaller set",
                 kernel_isa_name(most), kernel_isa_name(kernel_isa_cpu()));
        return false;
    }
    kernel_isa_cap(most);
    return true;
}

int main(int argc, char **argv) {
    cli_blas_kernel_reexec(argv);
    if (!cli_gemm_products(NULL)) return CLI_EXIT_USAGE;
    bench_options opt;
    char msg[512];
    if (!bench_parse(argc, argv, &opt, msg, sizeof msg)) return cli_usage_error(NULL, BENCH_USAGE, msg);
    if (opt.help) {
        bench_help(stdout);
        return CLI_EXIT_OK;
    }
    if (opt.paired && opt.variant == BENCH_FULL && opt.precision != SNUG_PRECISION_BF16)
        return cli_usage_error(NULL, BENCH_USAGE,
                               "--paired times a variant against full batch: choose --variant cheap, accum4, sqrt, "
                               "micro1 or all (or --precision bf16, against full batch in fp32)");
    if (opt.isa >= 0 && !bench_cap_isa((kernel_isa)opt.isa, msg, sizeof msg))
        return cli_usage_error(NULL, BENCH_USAGE, msg);
    snug_set_threads((int)opt.threads);
    if (opt.turns) return bench_turns_checked(&opt);
    bench_machine m;
    bench_machine_describe(&m);
    if (opt.paired) return bench_paired(&opt, &m); /* ratios of its own steps: no SGEMM rate to compare with */
    m.sgemm_n = (size_t)opt.sgemm_n;
    bench_sgemm_probe(m.sgemm_n, SGEMM_TRIES, &m.blas_gflops, &m.own_gflops);
    m.sgemm_gflops = m.blas_gflops > m.own_gflops ? m.blas_gflops : m.own_gflops;
    bench_print_header(stdout, &m, (snug_precision)opt.precision);
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

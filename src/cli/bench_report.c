/* The reports of `snug bench`: a table on stdout as the measurements come, and the same results as CSV (the
 * columns bench/pytorch_bench.py writes too, so bench/compare.py reads both alike) and as Markdown. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "cli/bench.h"
#include "core/error.h"

#define MIB (1024.0 * 1024.0)

static double mib(size_t bytes) { return (double)bytes / MIB; }

void bench_print_header(FILE *out, const bench_machine *m) {
    char line[512];
    bench_machine_line(m, line, sizeof line);
    fprintf(out, "machine: %s\n", line);
    fprintf(out, "SGEMM %zux%zu: %.1f GFLOP/s (best of the probe, %d threads; the BLAS %.1f, snug's own %.1f)\n",
            m->sgemm_n, m->sgemm_n, m->sgemm_gflops, m->threads, m->blas_gflops, m->own_gflops);
    fprintf(out, "%-9s %-7s %5s %5s %10s %10s %8s %6s %10s %10s %10s %10s\n", "workload", "variant", "B", "m",
            "ms/step", "samples/s", "GFLOP/s", "SGEMM", "plan MiB", "act MiB", "RSS MiB", "act RSS");
}

void bench_print_row(FILE *out, const bench_result *r) {
    fprintf(out, "%-9s %-7s %5zu %5zu %10.2f %10.1f %8.1f %5.0f%% %10.1f %10.1f %10.1f %10.1f\n", r->w->name,
            bench_variant_name(r->v), r->w->batch, r->micro_batch, r->ms_per_step, r->samples_per_s, r->gflops,
            100.0 * r->sgemm_fraction, mib(r->planned_total), mib(r->planned_activations), mib(r->rss_peak),
            mib(r->activation_rss));
    fflush(out);
}

#define CSV_HEADER                                                                                              \
    "framework,workload,variant,batch,micro_batch,micro_batches,threads,params,steps,repeats,ms_per_step,"       \
    "samples_per_s,step_gflop,gflops,sgemm_gflops,sgemm_fraction,planned_total_bytes,planned_activation_bytes,"  \
    "persistent_bytes,rss_start_bytes,rss_before_bytes,rss_peak_bytes,activation_rss_bytes,config,machine\n"

/* The machine description quoted as one CSV field (it holds commas; it holds no quotes). */
static void csv_row(FILE *f, const bench_machine *m, const char *machine, const bench_result *r) {
    fprintf(f, "snug,%s,%s,%zu,%zu,%zu,%d,%zu,%d,%d,%.4f,%.3f,%.6f,%.3f,%.3f,%.4f,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%s,\"%s\"\n",
            r->w->name, bench_variant_name(r->v), r->w->batch, r->micro_batch, r->micro_batches, m->threads,
            r->params, r->steps, r->repeats, r->ms_per_step, r->samples_per_s, r->step_flops * 1e-9, r->gflops,
            m->sgemm_gflops, r->sgemm_fraction, r->planned_total, r->planned_activations, r->persistent,
            r->rss_start, r->rss_before, r->rss_peak, r->activation_rss, r->v == BENCH_SQRT    ? "checkpoint sqrt"
            : r->v == BENCH_CHEAP ? "checkpoint cheap"
                                  : "-",
            machine);
}

static snug_status close_checked(FILE *f, const char *path, snug_error *err) {
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return snug_fail(err, SNUG_E_IO, "cannot write '%s': the disk may be full or the folder read-only", path);
    return SNUG_OK;
}

static FILE *open_out(const char *path, snug_error *err) {
    FILE *f = fopen(path, "w");
    if (!f) snug_fail(err, SNUG_E_IO, "cannot create '%s': does its folder exist, and may it be written?", path);
    return f;
}

snug_status bench_write_csv(const char *path, const bench_machine *m, const bench_result *r, size_t n,
                            snug_error *err) {
    FILE *f = open_out(path, err);
    if (!f) return SNUG_E_IO;
    char machine[512];
    bench_machine_line(m, machine, sizeof machine);
    fputs(CSV_HEADER, f);
    for (size_t i = 0; i < n; i++) csv_row(f, m, machine, &r[i]);
    return close_checked(f, path, err);
}

snug_status bench_write_markdown(const char *path, const bench_machine *m, const bench_result *r, size_t n,
                                 snug_error *err) {
    FILE *f = open_out(path, err);
    if (!f) return SNUG_E_IO;
    char machine[512];
    bench_machine_line(m, machine, sizeof machine);
    fprintf(f, "# snug bench\n\nMachine: %s.\n\nSGEMM %zux%zu measured in this run: %.1f GFLOP/s (the faster of the "
               "BLAS, %.1f, and snug's own, %.1f).\n\n", machine, m->sgemm_n, m->sgemm_n, m->sgemm_gflops,
            m->blas_gflops, m->own_gflops);
    fprintf(f, "| workload | variant | B | m | ms/step | samples/s | GFLOP/s | of SGEMM | planned MiB | planned "
               "activations MiB | RSS before MiB | peak RSS MiB | activation RSS MiB |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "| %s | %s | %zu | %zu | %.2f | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                r[i].w->name, bench_variant_name(r[i].v), r[i].w->batch, r[i].micro_batch, r[i].ms_per_step,
                r[i].samples_per_s, r[i].gflops, 100.0 * r[i].sgemm_fraction, mib(r[i].planned_total),
                mib(r[i].planned_activations), mib(r[i].rss_before), mib(r[i].rss_peak), mib(r[i].activation_rss));
    fprintf(f, "\nMedians of %d repeats. Activation RSS: the peak RSS of the timed steps minus the RSS before the "
               "trainer existed, minus the planned parameters, gradients and optimizer state.\n",
            n ? r[0].repeats : 0);
    return close_checked(f, path, err);
}

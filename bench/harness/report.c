/* The reports of snug-bench: a table on stdout as the measurements come, and the same results as CSV (the
 * columns bench/pytorch_bench.py writes too, so bench/compare.py reads both alike) and as Markdown. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "bench.h"
#include "core/error.h"

#define MIB (1024.0 * 1024.0)

static double mib(size_t bytes) { return (double)bytes / MIB; }

void bench_print_header(FILE *out, const bench_machine *m, snug_precision precision) {
    char line[512];
    bench_machine_line(m, line, sizeof line);
    fprintf(out, "machine: %s\nprecision: %s\n", line, snug_precision_name(precision));
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

/* The report file at path, its first line `header` written (none where NULL), and the machine's description
 * for it in machine[512]. */
static FILE *open_out(const char *path, const char *header, const bench_machine *m, char machine[512],
                      snug_error *err) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snug_fail(err, SNUG_E_IO, "cannot create '%s': does its folder exist, and may it be written?", path);
        return NULL;
    }
    bench_machine_line(m, machine, 512);
    if (header) fputs(header, f);
    return f;
}

snug_status bench_write_csv(const char *path, const bench_machine *m, const bench_result *r, size_t n,
                            snug_error *err) {
    char machine[512];
    FILE *f = open_out(path, CSV_HEADER, m, machine, err);
    if (!f) return SNUG_E_IO;
    for (size_t i = 0; i < n; i++) csv_row(f, m, machine, &r[i]);
    return close_checked(f, path, err);
}

snug_status bench_write_markdown(const char *path, const bench_machine *m, const bench_result *r, size_t n,
                                 snug_error *err) {
    char machine[512];
    FILE *f = open_out(path, NULL, m, machine, err);
    if (!f) return SNUG_E_IO;
    fprintf(f, "# snug-bench\n\nMachine: %s.\n\nSGEMM %zux%zu measured in this run: %.1f GFLOP/s (the faster of the "
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

/* ---- paired measurements (paired.c) ---- */

void bench_print_pair_header(FILE *out, const bench_machine *m, snug_precision precision) {
    char line[512];
    bench_machine_line(m, line, sizeof line);
    fprintf(out, "machine: %s\n", line);
    fprintf(out, "each variant (%s) against full batch (fp32) in one process, blocks of steps alternating; ratio: the "
                 "variant's samples/s over full batch's\n", snug_precision_name(precision));
    fprintf(out, "%-9s %-7s %5s %5s %6s %12s %12s %7s %7s %7s\n", "workload", "variant", "B", "m", "pairs",
            "full ms/step", "ms/step", "ratio", "lowest", "highest");
}

void bench_print_pair_row(FILE *out, const bench_pair_result *r) {
    fprintf(out, "%-9s %-7s %5zu %5zu %6d %12.2f %12.2f %7.3f %7.3f %7.3f\n", r->w->name, bench_variant_name(r->v),
            r->w->batch, r->micro_batch, r->pairs, r->full_ms, r->ms, r->ratio, r->ratio_lo, r->ratio_hi);
    fflush(out);
}

#define PAIR_CSV_HEADER                                                                                         \
    "framework,workload,variant,batch,micro_batch,threads,pairs,full_steps,steps,full_ms_per_step,ms_per_step,"  \
    "ratio,ratio_lowest,ratio_highest,pair_ratios,machine\n"

snug_status bench_write_pair_csv(const char *path, const bench_machine *m, const bench_pair_result *r, size_t n,
                                 snug_error *err) {
    char machine[512];
    FILE *f = open_out(path, PAIR_CSV_HEADER, m, machine, err);
    if (!f) return SNUG_E_IO;
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "snug,%s,%s,%zu,%zu,%d,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,", r[i].w->name,
                bench_variant_name(r[i].v), r[i].w->batch, r[i].micro_batch, m->threads, r[i].pairs,
                r[i].full_steps, r[i].steps, r[i].full_ms, r[i].ms, r[i].ratio, r[i].ratio_lo, r[i].ratio_hi);
        for (int k = 0; k < r[i].pairs; k++) fprintf(f, "%s%.4f", k ? " " : "", r[i].ratios[k]);
        fprintf(f, ",\"%s\"\n", machine);
    }
    return close_checked(f, path, err);
}

snug_status bench_write_pair_markdown(const char *path, const bench_machine *m, const bench_pair_result *r,
                                      size_t n, snug_error *err) {
    char machine[512];
    FILE *f = open_out(path, NULL, m, machine, err);
    if (!f) return SNUG_E_IO;
    fprintf(f, "# snug-bench --paired\n\nMachine: %s.\n\nEach variant against full batch in one process: both "
               "trainers built, then blocks of steps alternating (full, variant, variant, full, ...), each after "
               "one untimed step. Ratio: the variant's samples/s over full batch's, the median over the pairs.\n\n",
            machine);
    fprintf(f, "| workload | variant | B | m | pairs | full ms/step | ms/step | ratio | lowest | highest |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "| %s | %s | %zu | %zu | %d | %.2f | %.2f | %.3f | %.3f | %.3f |\n", r[i].w->name,
                bench_variant_name(r[i].v), r[i].w->batch, r[i].micro_batch, r[i].pairs, r[i].full_ms, r[i].ms,
                r[i].ratio, r[i].ratio_lo, r[i].ratio_hi);
    return close_checked(f, path, err);
}

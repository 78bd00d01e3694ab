/* `snug-bench --profile`: where a step's time goes, from the trainer's own op timers (snug_trainer_profile), in
 * ms per optimizer step: every forward, recompute and backward call of each node in schedule order, then the
 * parts around the ops (data, deferred weight gradients, update). Beside a variant measured with --paired, the
 * full-batch trainer's time for the same node and phase, and the difference: what the variant costs, and where
 * (the way docs/performance.md read accumulation's price op by op). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/error.h"

/* Below this share of the step a line joins the "smaller" line. */
#define PROFILE_MIN_SHARE 0.005

snug_status bench_profile_start(bench_case *c, snug_error *err) {
    c->profiled_from = c->steps_run;
    return snug_trainer_profile(c->trainer, true, err);
}

/* c's op times (malloc'd; *n entries) and the optimizer steps they cover. NULL with *n = 0 when none. */
static snug_op_time *times_of(const bench_case *c, size_t *n, long *steps) {
    *steps = c->steps_run - c->profiled_from;
    *n = snug_trainer_op_times(c->trainer, NULL, 0);
    snug_op_time *t = *n ? malloc(*n * sizeof *t) : NULL;
    if (!t) *n = 0;
    else snug_trainer_op_times(c->trainer, t, *n);
    return t;
}

/* The entry of t[0..n) for the same node and phase as key, or NULL. */
static const snug_op_time *same_line(const snug_op_time *t, size_t n, const snug_op_time *key) {
    for (size_t i = 0; i < n; i++)
        if (t[i].phase == key->phase && strcmp(t[i].name, key->name) == 0) return &t[i];
    return NULL;
}

static double ms_per_step(const snug_op_time *t, long steps) { return t ? 1e3 * t->seconds / (double)steps : 0; }

static void print_line(FILE *out, const char *name, const char *op, const char *phase, double ms, double share,
                       const double *full_ms) {
    fprintf(out, "  %-28s %-22s %-9s %9.3f %6.1f%%", name, op, phase, ms, 100 * share);
    if (full_ms) fprintf(out, " %9.3f %+9.3f", *full_ms, ms - *full_ms);
    fputc('\n', out);
}

void bench_print_profile(FILE *out, const bench_case *c, const bench_case *full) {
    size_t n, fn = 0;
    long steps, fsteps = 0;
    snug_op_time *t = times_of(c, &n, &steps), *ft = full ? times_of(full, &fn, &fsteps) : NULL;
    if (!t || steps <= 0) {
        fprintf(out, "%s %s: nothing profiled\n", c->w->name, bench_variant_name(c->v));
        free(t);
        free(ft);
        return;
    }
    double total = 0, ftotal = 0, small = 0, fsmall = 0;
    for (size_t i = 0; i < n; i++) total += ms_per_step(&t[i], steps);
    for (size_t i = 0; i < fn; i++) ftotal += ms_per_step(&ft[i], fsteps);
    fprintf(out, "where the time goes: %s %s, ms per optimizer step over %ld steps%s\n", c->w->name,
            bench_variant_name(c->v), steps, ft ? "; beside it full batch's, and the difference" : "");
    fprintf(out, "  %-28s %-22s %-9s %9s %7s%s\n", "node", "op", "phase", "ms/step", "share",
            ft ? "      full      diff" : "");
    size_t n_small = 0;
    for (size_t i = 0; i < n; i++) {
        const double ms = ms_per_step(&t[i], steps);
        const snug_op_time *f = ft ? same_line(ft, fn, &t[i]) : NULL;
        const double fms = ms_per_step(f, fsteps);
        if (ms < PROFILE_MIN_SHARE * total && fms < PROFILE_MIN_SHARE * ftotal) {
            small += ms, fsmall += fms, n_small++;
            continue;
        }
        print_line(out, t[i].name, t[i].op, snug_phase_name(t[i].phase), ms, ms / total, ft ? &fms : NULL);
    }
    for (size_t i = 0; i < fn; i++) /* full batch's lines the variant has not (a variant replays nothing) */
        if (!same_line(t, n, &ft[i])) fsmall += ms_per_step(&ft[i], fsteps), n_small++;
    if (n_small) {
        char what[64];
        snprintf(what, sizeof what, "(%zu smaller lines)", n_small);
        print_line(out, what, "", "", small, small / total, ft ? &fsmall : NULL);
    }
    print_line(out, "(total)", "", "", total, 1.0, ft ? &ftotal : NULL);
    free(t);
    free(ft);
}

/* snug-bench, the benchmark program: the five benchmark workloads of bench/ (mlp, cnn, resnet20, unet, gpt) in
 * five variants, timed through the public trainer API on synthetic in-memory data. The parts, one concern per file:
 *   args.c       the flags (src/cli/flags.c's table parser; the same messages and exit statuses as `snug`)
 *   workloads.c  the workload table, the graphs, the variants' configurations
 *   data.c       the synthetic data set of a workload (random inputs, random valid targets)
 *   sgemm.c      the SGEMM rate of this machine, measured in the same run
 *   rss.c        resident memory from /proc/self/status, and resetting its high-water mark
 *   machine.c    the machine's description (CPU, cores, threads, BLAS and its kernel)
 *   case.c       a workload's trainer in one variant on its data: built, stepped, released
 *   report.c     the table on stdout, the CSV and the Markdown files
 *   paired.c     a variant timed against full batch in one process, blocks of steps alternating
 *   turns.c      one trainer timed in blocks on request, taking turns with another process
 *   profile.c    where the time goes: the ops' times, printed per optimizer step
 *   main.c       one measurement per (workload, variant), and the program itself
 * bench/pytorch_bench.py measures the same workloads in PyTorch with the same method and CSV columns;
 * bench/compare.py merges both into bench/results/ (make bench). */
#ifndef SNUG_BENCH_H
#define SNUG_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "snug.h"

/* ---- workloads and variants ---- */
typedef enum bench_variant {
    BENCH_FULL = 0,  /* the whole batch in one forward/backward pass */
    BENCH_CHEAP,     /* the whole batch with the cheap policy: norms and element-wise layers replayed */
    BENCH_ACCUM4,    /* the same global batch as 4 micro-batches */
    BENCH_SQRT,      /* the whole batch with sqrt checkpointing */
    BENCH_MICRO1,    /* the same global batch as B micro-batches of 1 */
    BENCH_NVARIANTS
} bench_variant;

typedef struct bench_workload {
    const char *name;        /* "resnet20" */
    const char *model;       /* the built-in model file it is built from */
    const char *input;       /* NULL, or the value that replaces the file's [model] `input` ("image 3 32 32") */
    size_t batch;            /* the global batch of every variant */
    snug_optim_kind optim;   /* SGD with momentum 0.9, or AdamW */
    size_t classes;          /* of the loss */
    size_t targets;          /* targets per sample: 1, one per pixel, one per token */
    bool tokens;             /* the inputs are token ids in [0, classes) rather than U(-1, 1) values */
    const char *about;       /* one line for the report */
} bench_workload;

/* The five workloads, in the order the reports list them. */
const bench_workload *bench_workloads(size_t *n);
/* The workload called name, or NULL. */
const bench_workload *bench_find_workload(const char *name);
/* The variants' names in enum order, then "all", then NULL: the --variant choices. */
extern const char *const bench_variant_choices[BENCH_NVARIANTS + 2];
/* "full", "cheap", "accum4", "sqrt", "micro1". */
const char *bench_variant_name(bench_variant v);
/* The graph of w: its built-in model file, with the [model] input replaced when w->input is set. */
snug_status bench_build_graph(const bench_workload *w, snug_graph **out, snug_error *err);
/* The plan request of w in variant v (batch, micro-batch, checkpoint policy, optimizer; no budget). */
snug_plan_request bench_request(const bench_workload *w, bench_variant v, snug_precision precision);
/* The run configuration of w (optimizer, no shuffling). */
snug_train_config bench_config(const bench_workload *w);
/* Micro-batch size of variant v for a global batch b: b, b/4 (rounded up), or 1. */
size_t bench_micro_batch(bench_variant v, size_t b);

/* A data set of n samples for w in memory: inputs U(-1, 1) (token ids for w->tokens), targets uniform in
 * [0, classes), drawn from the counter-based RNG with seed. Its shape is the input's of g. */
snug_status bench_dataset_new(const bench_workload *w, const snug_graph *g, size_t n, uint64_t seed,
                              snug_dataset **out, snug_error *err);

/* ---- the machine ---- */
/* The best GFLOP/s of `tries` products of n x n matrices with the current thread count, through the BLAS and
 * through snug's own sgemm (0 where it is not enabled). */
void bench_sgemm_probe(size_t n, int tries, double *blas_gflops, double *own_gflops);

/* Resident memory of this process in bytes: now (VmRSS) and the high-water mark (VmHWM). False when
 * /proc/self/status cannot be read. */
bool bench_rss_read(size_t *rss, size_t *hwm);
/* Sets the high-water mark back to the current RSS; false when the kernel does not allow it. */
bool bench_rss_reset_peak(void);
/* Returns freed heap memory to the system (glibc's malloc_trim), so that a baseline RSS counts live memory only. */
void bench_rss_release_freed(void);

typedef struct bench_machine {
    char cpu[128];           /* model name from /proc/cpuinfo */
    int cores;               /* online processors */
    int threads;             /* the engine's and the BLAS's */
    const char *simd, *blas, *blas_kernel;
    bool blas_kernel_slow;
    const char *gemm;        /* what multiplies the linear layers (snug_system_info.gemm) */
    const char *isa, *isa_cpu; /* the instruction set snug's kernels run (--isa may cap it) and the CPU's best */
    size_t sgemm_n;
    double sgemm_gflops;     /* measured in this run: the faster of the two below */
    double blas_gflops;      /* cblas_sgemm */
    double own_gflops;       /* snug's own (kernels/sgemm.h), 0 where not enabled */
} bench_machine;

void bench_machine_describe(bench_machine *m);
/* "AMD EPYC, 2 cores, 2 threads, AVX-512, OpenBLAS ... (kernel SkylakeX)" */
void bench_machine_line(const bench_machine *m, char *buf, size_t len);

/* ---- one measurement ---- */
typedef struct bench_result {
    const bench_workload *w;
    bench_variant v;
    size_t micro_batch, micro_batches;
    size_t params;             /* trainable elements */
    int steps, repeats;        /* timed steps per repeat */
    double ms_per_step;        /* median over the repeats */
    double samples_per_s;
    double step_flops;         /* the plan's forward + backward + recompute FLOPs of one optimizer step */
    double gflops;             /* step_flops / time */
    double sgemm_fraction;     /* gflops / the SGEMM rate of this run */
    size_t planned_total, planned_activations, planned_workspace;
    size_t persistent;         /* params + grads + optimizer state, planned */
    size_t rss_start;          /* before the trainer existed: the graph and the data only */
    size_t rss_before;         /* just before the first step */
    size_t rss_peak;           /* the high-water mark over the timed steps */
    size_t activation_rss;     /* rss_peak - rss_start - persistent: see main.c */
} bench_result;

/* ---- flags ---- */
typedef struct bench_options {
    const char *workload;    /* a workload name or "all" */
    int variant;             /* a bench_variant, or BENCH_NVARIANTS for all */
    long steps;              /* timed steps per repeat; 0: about one second's worth, at least 3 */
    long warmup;             /* untimed steps first */
    long repeats;
    long threads;            /* 0: every core */
    long sgemm_n;
    const char *csv, *markdown;
    bool paired;             /* time each variant against full batch in one process (paired.c) */
    bool turns;              /* time blocks on request, taking turns with another process (turns.c) */
    bool profile;            /* print where the time goes, op by op (profile.c) */
    int precision;           /* a snug_precision: the measured trainers' (paired: the variant's; full batch
                                stays fp32, so the ratio is bf16's against fp32's) */
    int isa;                 /* a kernel_isa the kernels are capped at, or -1 for this CPU's */
    bool help;
} bench_options;

/* ---- one workload in one variant, built and ready to step (case.c) ---- */
typedef struct bench_case {
    const bench_workload *w;
    bench_variant v;
    snug_precision precision;
    snug_graph *graph;
    snug_dataset *data;
    snug_plan *plan;
    snug_trainer *trainer;
    size_t *indices;   /* 0 .. B-1: every step trains on the whole synthetic set */
    long steps_run;    /* optimizer steps so far */
    long profiled_from; /* steps_run when profiling started (bench_profile_start) */
} bench_case;

/* Builds c->w's graph, its synthetic data and the trainer of variant c->v, and fills r's configuration, plan
 * figures, parameter count and the resident memory before and after the trainer existed (r->rss_start,
 * r->rss_before). On failure what was built stays in c for bench_case_close. */
snug_status bench_case_open(bench_case *c, bench_result *r, snug_error *err);
/* Runs `steps` optimizer steps on the whole synthetic batch; *seconds is their wall time. */
snug_status bench_case_steps(bench_case *c, long steps, double *seconds, snug_error *err);
/* A block of a paired or turn-taking measurement: one untimed step (another trainer's memory has just gone
 * through the caches, and a block times its own trainer warm, as a training run has it), then `steps` timed
 * ones; *seconds is theirs. */
snug_status bench_case_block(bench_case *c, long steps, double *seconds, snug_error *err);
/* `warmup` untimed steps (at least one where steps == 0); *steps is `steps`, or where it is 0 as many as take
 * about target_seconds by the last warm-up step, from min_steps to BENCH_MAX_STEPS. */
snug_status bench_case_warm_up(bench_case *c, long warmup, long steps, double target_seconds, int min_steps,
                               int *out_steps, snug_error *err);
void bench_case_close(bench_case *c);
#define BENCH_MAX_STEPS 200

/* ---- where the time goes (profile.c) ---- */
/* Starts timing c's ops (snug_trainer_profile) from its next step. */
snug_status bench_profile_start(bench_case *c, snug_error *err);
/* Prints c's ops in schedule order, ms per optimizer step since bench_profile_start, and the parts around them;
 * with full (the full-batch case timed alongside, or NULL) its ms per step beside each of c's and the
 * difference. Lines below 0.5% of the step are summed into one. */
void bench_print_profile(FILE *out, const bench_case *c, const bench_case *full);

/* The median of v[0..n) (n >= 1); sorts v. */
double bench_median(double *v, size_t n);

/* ---- blocks of steps (paired.c, turns.c) ---- */
/* A block's length where --steps is 0: about this long, and at least BENCH_BLOCK_MIN_STEPS timed steps. Short,
 * so that the host's state rarely changes inside a pair of blocks; long enough that the untimed step before
 * each block is the only one paying for the other block's traffic through the caches. */
#define BENCH_BLOCK_SECONDS 0.25
#define BENCH_BLOCK_MIN_STEPS 1

/* --turns: builds w's trainer in variant v, warms it up, then times a block of steps for every "go" line on
 * stdin (turns.c has the protocol). Returns the exit status. */
int bench_turns(const bench_options *opt, const bench_workload *w, bench_variant v);

/* ---- a variant against full batch in one process (paired.c) ---- */
typedef struct bench_pair_result {
    const bench_workload *w;
    bench_variant v;
    size_t micro_batch;
    int pairs;                 /* pairs of blocks */
    int full_steps, steps;     /* timed steps per block: full batch's, the variant's */
    double full_ms, ms;        /* ms per step, medians over their blocks */
    double ratio;              /* the variant's samples/s over full batch's: the median of the pairs' ratios */
    double ratio_lo, ratio_hi; /* the lowest and highest pair */
    double *ratios;            /* every pair's, in order (owned; bench_pair_results_free) */
} bench_pair_result;

/* Times variant v of w against full batch: both trainers live in this process, and blocks of steps alternate
 * (full, v, v, full, full, v, ...), each after one untimed step that brings its own trainer's memory back
 * into the caches; a pair's ratio compares two blocks run within a second of each other. Prints its row (and
 * with opt->profile where the time goes, beside full batch's) on stdout. */
snug_status bench_pair_measure(const bench_options *opt, const bench_workload *w, bench_variant v,
                               bench_pair_result *r, snug_error *err);
void bench_pair_results_free(bench_pair_result *r, size_t n);

/* ---- reports ---- */
void bench_print_header(FILE *out, const bench_machine *m, snug_precision precision);
void bench_print_row(FILE *out, const bench_result *r);
/* CSV: a header line, then one row per result; the columns are pytorch_bench.py's. */
snug_status bench_write_csv(const char *path, const bench_machine *m, const bench_result *r, size_t n,
                            snug_error *err);
snug_status bench_write_markdown(const char *path, const bench_machine *m, const bench_result *r, size_t n,
                                 snug_error *err);
/* The paired measurements: a header and one line per variant; CSV and Markdown with their own columns. */
void bench_print_pair_header(FILE *out, const bench_machine *m, snug_precision precision);
void bench_print_pair_row(FILE *out, const bench_pair_result *r);
snug_status bench_write_pair_csv(const char *path, const bench_machine *m, const bench_pair_result *r, size_t n,
                                 snug_error *err);
snug_status bench_write_pair_markdown(const char *path, const bench_machine *m, const bench_pair_result *r,
                                      size_t n, snug_error *err);

/* ---- flags (args.c) ---- */
/* Fills opt from argv[1..argc); false with one line in msg on a usage error. */
bool bench_parse(int argc, char **argv, bench_options *opt, char *msg, size_t len);
/* The full help: what is measured, and every flag. */
void bench_help(FILE *out);
#define BENCH_USAGE                                                                                              \
    "usage: snug-bench [--workload mlp|cnn|resnet20|unet|gpt|all] [--variant full|cheap|accum4|sqrt|micro1|all] "     \
    "[--steps N] [--repeats R] [--threads N] [--paired] [--turns] [--profile] [--csv FILE] [--markdown FILE]"

#endif

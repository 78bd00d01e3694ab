/* The flags of snug-bench: one table (src/cli/flags.h) drives the parser and the help, as for `snug`'s commands. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>

#include "bench.h"
#include "cli/flags.h"

static const char *const *workload_names(void) {
    static const char *const names[] = {"mlp", "cnn", "resnet20", "unet", "gpt", "all", NULL};
    return names;
}

static const char *const precision_choices[] = {"fp32", "bf16", NULL}; /* in snug_precision's order */
static const char *const isa_choices[] = {"portable", "avx2", "avx512", "avx512_bf16", "amx_bf16", NULL}; /* kernel_isa's */

#define OPT(field) offsetof(bench_options, field)
#define FLAG(n, k, field, mv, h) .name = (n), .kind = (k), .offset = OPT(field), .metavar = (mv), .help = (h)

static const flag bench_flags[] = {
    {FLAG("workload", F_NAME, workload, NULL, "the workload to measure, or all five in turn [all]"),
     .names = workload_names, .what = "workload"},
    {FLAG("variant", F_CHOICE, variant, "full|cheap|accum4|sqrt|micro1|all",
          "full: the batch in one pass; cheap: the same with the cheap checkpoint policy (norms and element-wise "
          "layers replayed); accum4: the same batch as 4 micro-batches; sqrt: the batch with sqrt "
          "checkpointing; micro1: micro-batches of 1; all: the five in turn [all]"),
     .choices = bench_variant_choices},
    {FLAG("steps", F_LONG, steps, "N", "timed optimizer steps per repeat; 0: about one second's worth, at least 3 [0]"),
     .min = 0, .max = 100000},
    {FLAG("warmup", F_LONG, warmup, "N", "untimed optimizer steps before the first repeat [2]"), .min = 0,
     .max = 100000},
    {FLAG("repeats", F_LONG, repeats, "R", "timed repeats; the figures are their medians [3]"), .min = 1, .max = 1000},
    {FLAG("threads", F_LONG, threads, "N", "threads for the engine, the BLAS and the SGEMM probe [all cores]"),
     .min = 1, .max = 4096},
    {FLAG("sgemm-size", F_LONG, sgemm_n, "N", "the side of the square matrices of the SGEMM probe [2048]"),
     .min = 64, .max = 16384},
    {FLAG("csv", F_STRING, csv, "FILE", "also write the results as CSV (the columns of bench/pytorch_bench.py) [none]")},
    {FLAG("markdown", F_STRING, markdown, "FILE", "also write the results as a Markdown table [none]")},
    {FLAG("paired", F_SWITCH, paired, NULL,
          "time each chosen variant but full against full batch in one process: both trainers built, then "
          "blocks of about a quarter second (--steps) alternating, --repeats pairs; prints the variant's "
          "samples/s over full batch's per pair and their median, no memory [off]")},
    {FLAG("turns", F_SWITCH, turns, NULL,
          "take turns with another process on the same cores: build one workload's trainer in one variant, warm "
          "it up, print \"ready STEPS\", then for every \"go\" line on standard input time a block of about a "
          "quarter second (--steps) after one untimed step and print \"block STEPS SECONDS\"; ends at the end "
          "of input (bench/compare.py's duel with PyTorch) [off]")},
    {FLAG("profile", F_SWITCH, profile, NULL,
          "also print where the time goes: each node's forward, recompute and backward and the parts around "
          "them (data, update) in ms per optimizer step, from the trainer's op timers; with --paired full "
          "batch's beside each line [off]")},
    {FLAG("precision", F_CHOICE, precision, "fp32|bf16",
          "the trainers' precision; with --paired the variant's, against full batch in fp32 [fp32]"),
     .choices = precision_choices},
    {FLAG("isa", F_CHOICE, isa, "portable|avx2|avx512|avx512_bf16|amx_bf16",
          "run snug's kernels as on a CPU with at most this instruction set (what a CPU without AVX-512, or "
          "without AVX512_BF16, runs, measured on this one; the BLAS keeps its own kernel) [this CPU's]"),
     .choices = isa_choices},
    {FLAG("help", F_HELP, help, NULL, "show this help and exit")},
};

static const flag_table bench_table = {bench_flags, sizeof bench_flags / sizeof bench_flags[0], OPT(help)};

bool bench_parse(int argc, char **argv, bench_options *opt, char *msg, size_t len) {
    *opt = (bench_options){.workload = "all", .variant = BENCH_NVARIANTS, .steps = 0, .warmup = 2, .repeats = 3,
                           .threads = 0, .sgemm_n = 2048, .isa = -1};
    return flags_parse(&bench_table, argc, argv, opt, msg, len);
}

void bench_help(FILE *out) {
    fprintf(out,
            "usage: snug-bench [options]\n\n"
            "Time the five benchmark workloads (mlp, cnn, resnet20, unet, gpt: docs/performance.md) on synthetic\n"
            "in-memory data, per variant: full batch, full batch replaying only cheap layers (cheap), 4\n"
            "micro-batches, sqrt checkpointing, micro-batches of 1.\n"
            "After warm-up steps, each repeat times a number of optimizer steps; the figures are medians over the\n"
            "repeats: ms per step, samples/s, GFLOP/s (the plan's FLOPs, recompute included) and their fraction of\n"
            "the SGEMM rate measured at the start of the run, planned bytes, and resident memory (RSS) before the\n"
            "first step and at its peak during the timed steps. `make bench` runs it beside PyTorch.\n\n");
    flags_print_help(out, &bench_table);
    fprintf(out, "\nEvery flag also takes the form --flag=value. Exit status: 0 done, 1 runtime error, 2 usage error.\n"
                 "Example: snug-bench --workload cnn --variant full --repeats 5 --csv cnn.csv\n"
                 "         snug-bench --workload mlp --variant accum4 --paired --repeats 8\n"
                 "         printf 'go\\ngo\\n' | snug-bench --workload mlp --variant full --turns\n");
}

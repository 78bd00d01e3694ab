/* The flags of `snug bench`: one table drives the parser and the help, as in args.c, whose messages these
 * follow ("unknown flag '--x'", "--steps must be a whole number >= 0, got 'x'"). args.c keeps its flag machinery
 * private to the commands it serves, so this small table parser stands beside it rather than inside it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/commands.h"

typedef enum bench_flag_kind { BF_LONG, BF_WORKLOAD, BF_VARIANT, BF_FILE, BF_HELP } bench_flag_kind;

typedef struct bench_flag {
    const char *name;
    bench_flag_kind kind;
    size_t offset;       /* of the field in bench_options */
    const char *metavar;
    const char *help;    /* ends with the default in brackets */
    long min, max;       /* BF_LONG */
} bench_flag;

#define OPT(field) offsetof(bench_options, field)

static const bench_flag bench_flags[] = {
    {"workload", BF_WORKLOAD, OPT(workload), "mlp|cnn|resnet20|unet|gpt|all",
     "the workload to measure, or all five in turn [all]", 0, 0},
    {"variant", BF_VARIANT, OPT(variant), "full|cheap|accum4|sqrt|micro1|all",
     "full: the batch in one pass; cheap: the same with the cheap checkpoint policy; accum4: the same batch as 4 micro-batches; sqrt: the batch with sqrt "
     "checkpointing; micro1: micro-batches of 1; all: the five in turn [all]", 0, 0},
    {"steps", BF_LONG, OPT(steps), "N",
     "timed optimizer steps per repeat; 0: about one second's worth, at least 3 [0]", 0, 100000},
    {"warmup", BF_LONG, OPT(warmup), "N", "untimed optimizer steps before the first repeat [2]", 0, 100000},
    {"repeats", BF_LONG, OPT(repeats), "R", "timed repeats; the figures are their medians [3]", 1, 1000},
    {"threads", BF_LONG, OPT(threads), "N", "threads for the engine, the BLAS and the SGEMM probe [all cores]", 1,
     4096},
    {"sgemm-size", BF_LONG, OPT(sgemm_n), "N", "the side of the square matrices of the SGEMM probe [2048]", 64,
     16384},
    {"csv", BF_FILE, OPT(csv), "FILE", "also write the results as CSV (the columns of bench/pytorch_bench.py) [none]",
     0, 0},
    {"markdown", BF_FILE, OPT(markdown), "FILE", "also write the results as a Markdown table [none]", 0, 0},
    {"help", BF_HELP, OPT(help), NULL, "show this help and exit", 0, 0},
};

#define NFLAGS (sizeof bench_flags / sizeof bench_flags[0])

static bool failf(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool failf(char *msg, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return false;
}

static bool set_long(const bench_flag *f, long *field, const char *value, char *msg, size_t len) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (value[0] == '\0' || value[0] == ' ' || errno != 0 || *end != '\0' || v < f->min || v > f->max)
        return failf(msg, len, "--%s must be a whole number from %ld to %ld, got '%s'", f->name, f->min, f->max,
                     value);
    *field = v;
    return true;
}

static bool set_workload(const bench_flag *f, const char **field, const char *value, char *msg, size_t len) {
    if (strcmp(value, "all") != 0 && !bench_find_workload(value))
        return failf(msg, len, "unknown workload '%s' for --%s (choose from mlp, cnn, resnet20, unet, gpt, all)",
                     value, f->name);
    *field = value;
    return true;
}

static bool set_variant(const bench_flag *f, int *field, const char *value, char *msg, size_t len) {
    for (int v = 0; v < BENCH_NVARIANTS; v++)
        if (strcmp(value, bench_variant_name((bench_variant)v)) == 0) return *field = v, true;
    if (strcmp(value, "all") == 0) return *field = BENCH_NVARIANTS, true;
    return failf(msg, len, "--%s must be one of full, cheap, accum4, sqrt, micro1, all, got '%s'", f->name, value);
}

static bool set_flag(const bench_flag *f, bench_options *opt, const char *value, char *msg, size_t len) {
    void *field = (char *)opt + f->offset;
    switch (f->kind) {
    case BF_LONG: return set_long(f, field, value, msg, len);
    case BF_WORKLOAD: return set_workload(f, field, value, msg, len);
    case BF_VARIANT: return set_variant(f, field, value, msg, len);
    case BF_FILE:
        if (value[0] == '\0') return failf(msg, len, "--%s needs a non-empty value", f->name);
        *(const char **)field = value;
        return true;
    case BF_HELP: *(bool *)field = true; return true;
    }
    return failf(msg, len, "internal error: flag --%s has no parser", f->name);
}

static const bench_flag *find_flag(const char *name, size_t name_len) {
    for (size_t i = 0; i < NFLAGS; i++)
        if (strlen(bench_flags[i].name) == name_len && strncmp(bench_flags[i].name, name, name_len) == 0)
            return &bench_flags[i];
    return NULL;
}

/* One argument at argv[*i] and its value, from "=value" or the next argument. */
static bool parse_one(int argc, char **argv, int *i, bench_options *opt, char *msg, size_t len) {
    const char *arg = strcmp(argv[*i], "-h") == 0 ? "--help" : argv[*i];
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') return failf(msg, len, "unexpected argument '%s'", arg);
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
    const bench_flag *f = find_flag(name, name_len);
    if (!f) return failf(msg, len, "unknown flag '--%.*s'", (int)name_len, name);
    if (f->kind == BF_HELP) return eq ? failf(msg, len, "--%s takes no value", f->name) : set_flag(f, opt, NULL, msg, len);
    const char *value = eq ? eq + 1 : NULL;
    if (!eq && *i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0) value = argv[++*i];
    if (!value) return failf(msg, len, "--%s needs a value (%s)", f->name, f->metavar);
    return set_flag(f, opt, value, msg, len);
}

bool bench_parse(int argc, char **argv, bench_options *opt, char *msg, size_t len) {
    *opt = (bench_options){.workload = "all", .variant = BENCH_NVARIANTS, .steps = 0, .warmup = 2, .repeats = 3,
                           .threads = 0, .sgemm_n = 2048};
    for (int i = 1; i < argc && !opt->help; i++)
        if (!parse_one(argc, argv, &i, opt, msg, len)) return false;
    return true;
}

#define HELP_INDENT 28

void cli_bench_help(FILE *out) {
    fprintf(out,
            "usage: snug bench [options]\n\n"
            "Time the five benchmark workloads (mlp, cnn, resnet20, unet, gpt: docs/performance.md) on synthetic\n"
            "in-memory data, per variant: full batch, full batch replaying only cheap layers (cheap), 4\n"
            "micro-batches, sqrt checkpointing, micro-batches of 1.\n"
            "After warm-up steps, each repeat times a number of optimizer steps; the figures are medians over the\n"
            "repeats: ms per step, samples/s, GFLOP/s (the plan's FLOPs, recompute included) and their fraction of\n"
            "the SGEMM rate measured at the start of the run, planned bytes, and resident memory (RSS) before the\n"
            "first step and at its peak during the timed steps. `make bench` runs it beside PyTorch.\n\n");
    for (size_t i = 0; i < NFLAGS; i++) {
        const bench_flag *f = &bench_flags[i];
        int col = fprintf(out, "  --%s%s%s", f->name, f->metavar ? " " : "", f->metavar ? f->metavar : "");
        if (col >= HELP_INDENT - 1) col = fprintf(out, "\n") - 1;
        fprintf(out, "%*s%s\n", HELP_INDENT - col, "", f->help);
    }
    fprintf(out,
            "\nEvery flag also takes the form --flag=value. Exit status: 0 done, 1 runtime error, 2 usage error.\n"
            "Example: snug bench --workload cnn --variant full --repeats 5 --csv cnn.csv\n");
}

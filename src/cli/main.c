/* `snug <command> [options]`: a table of subcommands over the public API in snug.h. A new command adds one row
 * here (name, one-line summary, entry point, help printer). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/process_start.h"

typedef struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);   /* argv[0] is the command name */
    void (*help)(FILE *out);
} command;

static const command commands[] = {
    {"train", "train a model on a data set inside a memory budget", cmd_train, cli_train_help},
    {"plan", "show the memory plans of a model per micro-batch and checkpoint policy, without training",
     cmd_plan, cli_plan_help},
    {"eval", "score saved weights on a data set's evaluation part, without training", cmd_eval, cli_eval_help},
    {"curve", "draw a run's log (train --log) as training and evaluation curves in an SVG", cmd_curve,
     cli_curve_help},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])
#define TOP_USAGE "usage: snug <command> [options]   (commands: train, plan, eval, curve; 'snug help' lists them)"

static const command *find_command(const char *name) {
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static void print_help(FILE *out) {
    fprintf(out,
            "snug %s: train with the batch you want in the memory you have.\n\n"
            "usage: snug <command> [options]\n\n"
            "commands:\n",
            SNUG_VERSION);
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n'snug <command> --help' or 'snug help <command>' describes a command and its flags.\n"
            "  --help, -h      show this help\n"
            "  --version       print the version\n\n"
            "environment:\n"
            "  SNUG_DATA_DIR       default --data-dir\n"
            "  OPENBLAS_CORETYPE   the OpenBLAS kernel; when unset and OpenBLAS falls back to a slow generic\n"
            "                      kernel, snug sets it for this CPU and restarts itself\n"
            "  SNUG_NO_REEXEC      set to keep OpenBLAS's own choice of kernel\n"
            "  SNUG_GEMM           the linear layers' products: 'auto' (default: snug's own where the CPU has\n"
            "                      AVX-512, in bf16 runs AMX tiles or AVX512_BF16 on AMD; their bits never\n"
            "                      depend on the thread count), 'blas' (the BLAS: its bits may) or 'snug' (snug's\n"
            "                      own wherever it has one)\n\n"
            "exit status: 0 done, 1 runtime error, 2 usage error\n"
            "examples: snug train --model cnn --batch 256 --micro-batch 32 --mem 64MiB --epochs 2\n"
            "          snug plan --model cnn --batch 256 --mem 8MiB --timeline cnn.svg\n"
            "          snug eval --model cnn --data mnist --weights cnn.safetensors\n");
}

/* An unknown command or option. The benchmarks, once `snug bench`, are a program of their own: say where. */
static int unknown_command(const char *name) {
    char msg[256];
    if (strcmp(name, "bench") == 0)
        snprintf(msg, sizeof msg, "unknown command 'bench': the benchmarks are a program of their own, snug-bench, "
                                  "built beside snug (./build/bench/snug-bench --help)");
    else snprintf(msg, sizeof msg, name[0] == '-' ? "unknown option '%s'" : "unknown command '%s'", name);
    return cli_usage_error(NULL, TOP_USAGE, msg);
}

/* `snug help [command]` */
static int help_command(int argc, char **argv) {
    if (argc < 2) {
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    const command *c = find_command(argv[1]);
    if (!c) return unknown_command(argv[1]);
    c->help(stdout);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv) {
    cli_blas_kernel_reexec(argv);
    if (!cli_gemm_products(NULL)) return CLI_EXIT_USAGE;
    if (argc < 2) return cli_usage_error(NULL, TOP_USAGE, "no command given");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) return help_command(1, argv + 1);
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("snug %s\n", SNUG_VERSION);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "help") == 0) return help_command(argc - 1, argv + 1);
    const command *c = find_command(name);
    if (!c) return unknown_command(name);
    return c->run(argc - 1, argv + 1);
}

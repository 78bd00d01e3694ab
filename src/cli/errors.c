/* The error printers of snug's programs (cli/errors.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/errors.h"

#include <stdio.h>
#include <string.h>

/* The name messages start with: set per program by its build (cmake/SnugCli.cmake, cmake/SnugBench.cmake). */
#ifndef CLI_PROGRAM
#define CLI_PROGRAM "snug"
#endif

int cli_usage_error(const char *command, const char *usage, const char *message) {
    if (command) fprintf(stderr, CLI_PROGRAM ": %s (see '" CLI_PROGRAM " %s --help')\n", message, command);
    else fprintf(stderr, CLI_PROGRAM ": %s (see '" CLI_PROGRAM " --help')\n", message);
    fprintf(stderr, "%s\n", usage);
    return CLI_EXIT_USAGE;
}

int cli_job_error(int rank, int ranks, const snug_error *err) {
    if (ranks <= 1) return cli_runtime_error(err);
    char line[sizeof err->message + 64];
    const char *name = snug_status_name(err->status);
    if (strncmp(err->message, name, strlen(name)) == 0)
        snprintf(line, sizeof line, CLI_PROGRAM ": rank %d: %s", rank, err->message);
    else snprintf(line, sizeof line, CLI_PROGRAM ": rank %d: %s: %s", rank, name, err->message);
    snug_dist_abort(line);
    return CLI_EXIT_RUNTIME;
}

int cli_runtime_error(const snug_error *err) {
    fflush(stdout);
    const char *name = snug_status_name(err->status);
    if (strncmp(err->message, name, strlen(name)) == 0) fprintf(stderr, CLI_PROGRAM ": %s\n", err->message);
    else fprintf(stderr, CLI_PROGRAM ": %s: %s\n", name, err->message);
    return CLI_EXIT_RUNTIME;
}

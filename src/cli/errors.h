/* Exit statuses and the two error printers that snug's programs share: the `snug` command and the benchmark
 * program `snug-bench` (bench/harness/, which compiles this file into itself). Messages start with the program's
 * name, CLI_PROGRAM, which each program's build defines ("snug" when none is given).
 *
 * Exit statuses: 0 done, 1 a runtime error (bad data file, out of memory, non-finite loss), 2 a usage error
 * (unknown command or flag, a missing or bad value). */
#ifndef SNUG_CLI_ERRORS_H
#define SNUG_CLI_ERRORS_H

#include "snug.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_RUNTIME = 1, CLI_EXIT_USAGE = 2 };

/* Prints `<program>: <message> (see '<program> <command> --help')` and a short usage line to stderr; returns
 * CLI_EXIT_USAGE. command may be NULL for errors before a command is known, or in a program without commands. */
int cli_usage_error(const char *command, const char *usage, const char *message);
/* Prints `<program>: <status name>: <message>` to stderr (the name left out when the message starts with it),
 * after flushing stdout; returns CLI_EXIT_RUNTIME. */
int cli_runtime_error(const snug_error *err);
/* cli_runtime_error in a job of one; over several ranks (mpirun), `<program>: rank R: ...` and the end of the
 * whole job (snug_dist_abort: it does not return), so that no rank is left waiting in a collective. */
int cli_job_error(int rank, int ranks, const snug_error *err);

#endif

/* SNUG_GEMM, checked at process start by snug's programs (the `snug` command and `snug-bench`, which compiles
 * gemm_choice.c into itself): the library reads it when it first multiplies, and takes anything but 'blas' as
 * the default, so a typo would go unnoticed. */
#ifndef SNUG_CLI_GEMM_CHOICE_H
#define SNUG_CLI_GEMM_CHOICE_H

#include <stdbool.h>

/* True when SNUG_GEMM is unset, 'blas' or 'snug'; otherwise prints what it takes to stderr and returns false
 * (the caller exits with CLI_EXIT_USAGE). */
bool cli_gemm_choice_ok(void);

#endif

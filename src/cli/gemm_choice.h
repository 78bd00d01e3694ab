/* SNUG_GEMM, read at process start by snug's programs (the `snug` command and `snug-bench`, which compiles
 * gemm_choice.c into itself) and handed to the library (snug_set_gemm); a value that is neither 'blas' nor
 * 'snug' is a typo that would otherwise go unnoticed. */
#ifndef SNUG_CLI_GEMM_CHOICE_H
#define SNUG_CLI_GEMM_CHOICE_H

#include <stdbool.h>

/* True when SNUG_GEMM is unset, 'blas' (the library is told to use the BLAS) or 'snug'; otherwise prints what
 * it takes to stderr and returns false (the caller exits with CLI_EXIT_USAGE). */
bool cli_gemm_choice_ok(void);

#endif

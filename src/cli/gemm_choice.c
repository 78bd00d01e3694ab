/* SNUG_GEMM's values (cli/gemm_choice.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/gemm_choice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snug.h"

/* The name messages start with, as in errors.c. */
#ifndef CLI_PROGRAM
#define CLI_PROGRAM "snug"
#endif

bool cli_gemm_choice_ok(void) {
    const char *choice = getenv("SNUG_GEMM");
    if (!choice || strcmp(choice, "snug") == 0) return true;
    if (strcmp(choice, "blas") == 0) {
        snug_set_gemm(SNUG_GEMM_BLAS);
        return true;
    }
    fprintf(stderr, CLI_PROGRAM ": SNUG_GEMM='%s' is not a product snug knows: set it to 'blas' (the BLAS multiplies "
                    "the linear layers) or 'snug' (snug's own AVX-512 product, the default), or unset it\n", choice);
    return false;
}

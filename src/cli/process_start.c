/* What snug's programs (the `snug` command and `snug-bench`, which compiles this file into itself) do when the
 * process starts (cli/process_start.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/process_start.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "snug.h"

/* The name messages start with, as in errors.c. */
#ifndef CLI_PROGRAM
#define CLI_PROGRAM "snug"
#endif

const char *cli_blas_best_core(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
    if (__builtin_cpu_supports("avx2")) return "Haswell";
#endif
    return NULL;
}

void cli_blas_kernel_reexec(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("SNUG_NO_REEXEC")) return;
    snug_system_info info;
    snug_system_info_get(&info);
    const char *core = cli_blas_best_core();
    if (!info.blas_kernel_slow || !core) return;
    if (setenv("OPENBLAS_CORETYPE", core, 1) != 0 || setenv("SNUG_NO_REEXEC", "1", 1) != 0) return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* The exec failed (no /proc, say): carry on with the slow kernel; the run header warns about it. The
     * variable is dropped again because it no longer describes the loaded library. */
    unsetenv("OPENBLAS_CORETYPE");
}

bool cli_gemm_products(snug_products *out) {
    const char *choice = getenv("SNUG_GEMM");
    snug_products p = SNUG_PRODUCTS_AUTO;
    snug_error err = {0};
    if (choice && snug_parse_products(choice, &p, &err) != SNUG_OK) {
        fprintf(stderr, CLI_PROGRAM ": SNUG_GEMM=%s\n", err.message);
        return false;
    }
    if (out) *out = p;
    return true;
}

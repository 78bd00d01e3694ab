/* Gives OpenBLAS the kernel this CPU deserves. Debian's OpenBLAS 0.3.21 does not recognise some newer CPUs and
 * silently falls back to a generic pre-AVX2 kernel (Prescott: about 7x slower matrix products). OpenBLAS reads
 * OPENBLAS_CORETYPE only while the library loads, before main, so the fix is to set it and execute this program
 * again. SNUG_NO_REEXEC (set for the second run) rules out a loop; a user who sets OPENBLAS_CORETYPE or
 * SNUG_NO_REEXEC keeps the choice. */
#define _POSIX_C_SOURCE 200809L
#include "cli/blas_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "snug.h"

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

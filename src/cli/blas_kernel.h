/* The OpenBLAS kernel at process start, for snug's programs (the `snug` command and `snug-bench`, which compiles
 * blas_kernel.c into itself). Debian's OpenBLAS 0.3.21 does not know some newer CPUs and silently falls back to
 * a generic pre-AVX2 kernel. OpenBLAS reads OPENBLAS_CORETYPE only while it loads, so the fix is to set it and
 * re-execute the program. */
#ifndef SNUG_CLI_BLAS_KERNEL_H
#define SNUG_CLI_BLAS_KERNEL_H

/* Call first thing in main; returns only when no re-exec was needed or the exec failed. */
void cli_blas_kernel_reexec(char **argv);
/* The OpenBLAS core type this CPU deserves ("SkylakeX" with AVX-512, "Haswell" with AVX2), or NULL. */
const char *cli_blas_best_core(void);

#endif

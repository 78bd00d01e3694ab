/* What snug's programs do when the process starts, before anything else.
 *
 * The OpenBLAS kernel: Debian's OpenBLAS 0.3.21 does not recognise some newer CPUs and silently falls back to a
 * generic pre-AVX2 kernel (Prescott: about 7x slower matrix products). OpenBLAS reads OPENBLAS_CORETYPE only
 * while the library loads, before main, so the fix is to set it and execute the program again. SNUG_NO_REEXEC
 * (set for the second run) rules out a loop; a user who sets OPENBLAS_CORETYPE or SNUG_NO_REEXEC keeps the
 * choice.
 *
 * SNUG_GEMM: the plan requests' products (snug_plan_request.products); a value snug does not know is refused. */
#ifndef SNUG_CLI_PROCESS_START_H
#define SNUG_CLI_PROCESS_START_H

#include "snug.h"

/* Returns only when no re-exec was needed or the exec failed. */
void cli_blas_kernel_reexec(char **argv);
/* The OpenBLAS core type this CPU deserves ("SkylakeX" with AVX-512, "Haswell" with AVX2), or NULL. */
const char *cli_blas_best_core(void);

/* SNUG_GEMM (auto where unset) into *out (if not NULL); false, saying why on stderr, where snug does not know it. */
bool cli_gemm_products(snug_products *out);

#endif

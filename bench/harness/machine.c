/* The machine a benchmark ran on, for the reports: the CPU's model name, its cores, the threads used, and the
 * BLAS with the kernel it picked (a generic kernel makes every matrix product several times slower, so a
 * figure without it cannot be compared). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "kernels/isa.h"

/* "model name	: AMD EPYC 7B13" -> "AMD EPYC 7B13" */
static void cpu_model(char *buf, size_t len) {
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += strspn(colon + 1, " \t") + 1;
        snprintf(buf, len, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    fclose(f);
}

void bench_machine_describe(bench_machine *m) {
    memset(m, 0, sizeof *m);
    cpu_model(m->cpu, sizeof m->cpu);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    m->cores = cores > 0 ? (int)cores : 0;
    snug_system_info info;
    snug_system_info_get(&info);
    m->threads = info.threads;
    m->simd = info.simd;
    m->blas = info.blas ? info.blas : "unknown BLAS";
    m->blas_kernel = info.blas_kernel ? info.blas_kernel : "unknown";
    m->blas_kernel_slow = info.blas_kernel_slow;
    m->gemm = info.gemm;
    m->isa = kernel_isa_name(kernel_isa_now());
    m->isa_cpu = kernel_isa_name(kernel_isa_cpu());
}

void bench_machine_line(const bench_machine *m, char *buf, size_t len) {
    int n = snprintf(buf, len, "%s, %d cores, %d threads, %s, %s (kernel %s%s), linear layers: %s, snug's kernels: %s",
                     m->cpu, m->cores, m->threads, m->simd, m->blas, m->blas_kernel,
                     m->blas_kernel_slow ? ", a slow generic fallback" : "", m->gemm, m->isa);
    if (strcmp(m->isa, m->isa_cpu) != 0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " (capped: this CPU runs %s)", m->isa_cpu);
}

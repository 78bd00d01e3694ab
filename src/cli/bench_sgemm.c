/* The SGEMM rate of this machine, measured in the same run as the workloads so that "fraction of the SGEMM
 * rate" compares figures taken under the same load, thread count and BLAS kernel. Large square matrices are the
 * BLAS's best case: the rate is the ceiling that GEMM-shaped work (linear layers, im2col convolutions) can reach. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "cli/bench.h"

double bench_sgemm_gflops(size_t n, int tries) {
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < n * n; i++) {
            a[i] = (float)(i % 7) * 0.25f - 0.75f;
            b[i] = (float)(i % 5) * 0.25f - 0.5f;
            c[i] = 0;
        }
        const int ni = (int)n;
        /* the first call also pays for the BLAS's thread start and buffers: it is a warm-up, not a try */
        for (int t = 0; t <= tries; t++) {
            double t0 = omp_get_wtime();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f, c, ni);
            double s = omp_get_wtime() - t0;
            double rate = 2.0 * (double)n * (double)n * (double)n / s * 1e-9;
            if (t > 0 && rate > best) best = rate;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

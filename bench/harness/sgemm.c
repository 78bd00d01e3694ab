/* The SGEMM rate of this machine, measured in the same run as the workloads so that "fraction of the SGEMM
 * rate" compares figures taken under the same load and thread count. Large square matrices are a GEMM's best
 * case: the rate is the ceiling that GEMM-shaped work (linear layers, lowered convolutions) can reach. Both
 * products this build can run are measured, the BLAS (whatever kernel it picked for this CPU) and snug's own
 * (kernels/sgemm.h, where enabled: the linear layers' on AVX-512 CPUs), and the ceiling is the faster of the two, so
 * a slow BLAS kernel cannot flatter the fractions. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "bench.h"
#include "kernels/sgemm.h"

static void blas_product(size_t n, const float *a, const float *b, float *c, float *work) {
    (void)work;
    const int ni = (int)n;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f, c, ni);
}

static void own_product(size_t n, const float *a, const float *b, float *c, float *work) {
    sgemm(n, n, n, (sgemm_mat){a, n, 1}, (sgemm_mat){b, n, 1}, c, n, NULL, false, work, omp_get_max_threads());
}

/* The best rate of `tries` products after one warm-up (the first call also pays for thread start and
 * buffers). */
static double best_rate(void (*product)(size_t, const float *, const float *, float *, float *), size_t n,
                        int tries, const float *a, const float *b, float *c, float *work) {
    double best = 0;
    for (int t = 0; t <= tries; t++) {
        double t0 = omp_get_wtime();
        product(n, a, b, c, work);
        double s = omp_get_wtime() - t0;
        double rate = 2.0 * (double)n * (double)n * (double)n / s * 1e-9;
        if (t > 0 && rate > best) best = rate;
    }
    return best;
}

void bench_sgemm_probe(size_t n, int tries, double *blas_gflops, double *own_gflops) {
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    const bool own = sgemm_enabled();
    float *work = own ? malloc(sgemm_workspace_floats(n, n, n, omp_get_max_threads()) * sizeof *work) : NULL;
    *blas_gflops = *own_gflops = 0;
    if (a && b && c && (work || !own)) {
        for (size_t i = 0; i < n * n; i++) {
            a[i] = (float)(i % 7) * 0.25f - 0.75f;
            b[i] = (float)(i % 5) * 0.25f - 0.5f;
            c[i] = 0;
        }
        *blas_gflops = best_rate(blas_product, n, tries, a, b, c, work);
        if (own) *own_gflops = best_rate(own_product, n, tries, a, b, c, work);
    }
    free(a);
    free(b);
    free(c);
    free(work);
}

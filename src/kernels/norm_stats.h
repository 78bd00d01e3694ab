/* The statistics BatchNorm and GroupNorm share: mean and biased variance over a set of planes. */
#ifndef SNUG_KERNELS_NORM_STATS_H
#define SNUG_KERNELS_NORM_STATS_H

#include <stddef.h>

/* Mean and biased variance (*var) of `planes` planes of hw values, plane j at x + j * stride. Shifted by the
 * first value so that a large mean does not cancel the variance in the one-pass sums. Each plane in vector
 * float partial sums (a double accumulator does not vectorise), the planes in double: the same order every
 * run. */
static inline double norm_plane_moments(const float *x, size_t planes, size_t stride, size_t hw, double *var) {
    const float shift = x[0];
    double s1 = 0.0, s2 = 0.0;
    for (size_t j = 0; j < planes; j++) {
        const float *xp = x + j * stride;
        float p1 = 0.0f, p2 = 0.0f;
        #pragma omp simd reduction(+ : p1, p2)
        for (size_t k = 0; k < hw; k++) {
            const float d = xp[k] - shift;
            p1 += d;
            p2 += d * d;
        }
        s1 += p1;
        s2 += p2;
    }
    const double n = (double)(planes * hw), dm = s1 / n, v = s2 / n - dm * dm;
    *var = v > 0.0 ? v : 0.0;
    return shift + dm;
}

#endif

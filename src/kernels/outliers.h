/* The few elements of an array outside (-1, 1) once scaled, gathered: for an element-wise function that has a
 * cheap form inside and an expensive one outside (erf: a polynomial near 0, an exp beyond), so that the cheap
 * form runs over every element in one vector loop, the expensive one over the gathered few, and their results
 * go back to their places. Which elements are gathered depends on each element alone (never on its neighbours
 * or the vector width), so a caller's bits do not either. */
#ifndef SNUG_KERNELS_OUTLIERS_H
#define SNUG_KERNELS_OUTLIERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether outliers_gather compresses a vector at a time (AVX-512 in use: kernel_isa_now), so that it costs a few
 * instructions a vector; elsewhere it scans element by element, and a caller does better to decide per block. */
bool outliers_compress(void);

/* For every i in [0, n) where !(fabsf(x[i] * scale) < 1.0f) (NaN included), in order: its index into idx and
 * x[i] into out. Returns their count, or, as soon as it exceeds `most`, some count above most (the caller then
 * has no use for them: so many that the expensive form over all n costs less). idx and out hold
 * OUTLIERS_ROOM(n) each (whole vectors are stored past the count); n < 2^31. */
#define OUTLIERS_ROOM(n) ((n) + 16)
size_t outliers_gather(uint32_t *idx,     // (n)
                       float *out,        // (n)
                       const float *x,    // (n)
                       size_t n, float scale, size_t most);

#endif

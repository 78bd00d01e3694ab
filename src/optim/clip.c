/* The global gradient norm and clipping by it, as torch.nn.utils.clip_grad_norm_ over all parameters at once
 * (the gradients are one contiguous block). */
#include <math.h>

#include "core/parallel.h"
#include "optim/optim.h"
#include "optim/optim_impl.h"

/* The norm is summed in at most NORM_BLOCKS blocks whose bounds depend on n only; each block is summed by one
 * thread and the partial sums are added in block order. So the result is the same bitwise for any thread
 * count (an OpenMP reduction combines in an unspecified order), which keeps the clip factor, and hence runs
 * and resumed runs, reproducible. */
#define NORM_BLOCKS 256
#define NORM_MIN_BLOCK ((size_t)8192)

double grad_global_norm(const float *grads,  // (n)
                        size_t n) {
    if (n == 0) return 0.0;
    size_t block = n / NORM_BLOCKS + (n % NORM_BLOCKS != 0);
    if (block < NORM_MIN_BLOCK) block = NORM_MIN_BLOCK;
    const int nblocks = (int)(n / block + (n % block != 0));  /* <= NORM_BLOCKS */
    double part[NORM_BLOCKS];

#pragma omp parallel for schedule(static) if (nblocks > 1 && par_pays_floats(n))
    for (int b = 0; b < nblocks; b++) {
        const size_t lo = (size_t)b * block;
        const size_t hi = n - lo < block ? n : lo + block;
        double s = 0.0;
        /* Squares of floats are finite in double, so the sum is not finite only when an element is not:
         * NaN stays NaN, and an infinity gives +inf (squares are never negative, so never inf - inf). */
#pragma omp simd reduction(+ : s)
        for (size_t i = lo; i < hi; i++) s += (double)grads[i] * (double)grads[i];
        part[b] = s;
    }
    double sum = 0.0;
    for (int b = 0; b < nblocks; b++) sum += part[b];
    return sqrt(sum);
}

/* max_norm <= 0 (or NaN) means clipping is off. A norm that is not finite leaves the gradients as they are and
 * returns 1: PyTorch would turn them all into NaN; the trainer instead skips such a step, and it needs the
 * gradients unscaled to report them. */
float grad_clip(float *grads,  // (n)
                size_t n, double norm, float max_norm) {
    if (!(max_norm > 0.0f) || !isfinite(norm)) return 1.0f;
    const double factor = (double)max_norm / (norm + 1e-6);
    if (!(factor < 1.0)) return 1.0f;
    const float f = (float)factor;
#pragma omp parallel for simd if (n >= OPTIM_PARALLEL_MIN && par_pays_floats(2 * n))
    for (size_t i = 0; i < n; i++) grads[i] *= f;
    return f;
}

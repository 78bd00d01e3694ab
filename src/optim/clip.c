/* The global gradient norm and clipping by it, as torch.nn.utils.clip_grad_norm_ over all parameters at once
 * (the gradients are one contiguous block). */
#include <math.h>
#include <omp.h>

#include "core/clones.h"
#include "core/parallel.h"
#include "optim/optim.h"
#include "optim/optim_impl.h"

/* The norm is summed in at most NORM_BLOCKS blocks whose bounds depend on n only; each block is summed by one
 * thread and the partial sums are added in block order. So the result is the same bitwise for any thread
 * count (an OpenMP reduction combines in an unspecified order), which keeps the clip factor, and hence runs
 * and resumed runs, reproducible. */
#define NORM_BLOCKS 256
#define NORM_MIN_BLOCK ((size_t)8192)
/* Inside a block, NORM_LANES partial sums, element i going to sum i % NORM_LANES, combined in a fixed order:
 * the same bits from every VM_KERNEL clone (two AVX-512 vectors of doubles, four AVX2, eight SSE2). */
#define NORM_LANES 16

/* Squares of floats are finite in double, so the sum is not finite only when an element is not: NaN stays
 * NaN, and an infinity gives +inf (squares are never negative, so never inf - inf). */
VM_KERNEL static double sum_squares(const float *restrict g, size_t n) {
    double acc[NORM_LANES] = {0};
    size_t i = 0;
    for (; i + NORM_LANES <= n; i += NORM_LANES)
        for (size_t j = 0; j < NORM_LANES; j++) acc[j] += (double)g[i + j] * (double)g[i + j];
    for (size_t j = 0; i + j < n; j++) acc[j] += (double)g[i + j] * (double)g[i + j];
    for (size_t w = NORM_LANES / 2; w > 0; w /= 2)
        for (size_t j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

double grad_global_norm(const float *grads,  // (n)
                        size_t n, const optim_span *spans, int n_spans) {
    if (n == 0) return 0.0;
    size_t block = n / NORM_BLOCKS + (n % NORM_BLOCKS != 0);
    if (block < NORM_MIN_BLOCK) block = NORM_MIN_BLOCK;
    const int nblocks = (int)(n / block + (n % block != 0));  /* <= NORM_BLOCKS */
    double part[NORM_BLOCKS];
    optim_span whole;
    spans = optim_spans_or_whole(spans, &n_spans, n, &whole);

    /* Each block to the thread whose share (optim_share) holds its middle: the thread that will update those
     * elements, and (optim.h) the one whose product wrote them. */
#pragma omp parallel if (nblocks > 1 && par_pays_floats(n))
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        for (int b = 0; b < nblocks; b++) {
            const size_t lo = (size_t)b * block;
            const size_t hi = n - lo < block ? n : lo + block;
            if (optim_owner(spans, n_spans, lo + (hi - lo) / 2, T) == t) part[b] = sum_squares(grads + lo, hi - lo);
        }
    }
    double sum = 0.0;
    for (int b = 0; b < nblocks; b++) sum += part[b];
    return sqrt(sum);
}

/* max_norm <= 0 (or NaN) means clipping is off. A norm that is not finite gives 1: PyTorch would turn the
 * gradients all into NaN; the trainer instead skips such a step, and it needs them unscaled to report them. */
float grad_clip_factor(double norm, float max_norm) {
    if (!(max_norm > 0.0f) || !isfinite(norm)) return 1.0f;
    const double factor = (double)max_norm / (norm + 1e-6);
    return factor < 1.0 ? (float)factor : 1.0f;
}

VM_KERNEL static void scale_floats(float *restrict x, size_t n, float f) {
    for (size_t i = 0; i < n; i++) x[i] *= f;
}

float grad_clip(float *grads,  // (n)
                size_t n, double norm, float max_norm) {
    const float f = grad_clip_factor(norm, max_norm);
    if (f == 1.0f) return f;
    const size_t chunks = (n + NORM_MIN_BLOCK - 1) / NORM_MIN_BLOCK;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN && par_pays_floats(2 * n))
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * NORM_MIN_BLOCK;
        scale_floats(grads + lo, n - lo < NORM_MIN_BLOCK ? n - lo : NORM_MIN_BLOCK, f);
    }
    return f;
}

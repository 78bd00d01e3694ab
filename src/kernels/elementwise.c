/* Chunked, optionally parallel application of span kernels (elementwise.h). */
#include "kernels/elementwise.h"

#include "core/parallel.h"
#include "kernels/vmath.h"

static size_t span_len(size_t len, size_t lo, size_t chunk) { return len - lo < chunk ? len - lo : chunk; }

void ew_apply_unary(ew_split s, ew_unary_fn f, float *y, const float *x, size_t len) {
    if (len < s.par_min || !par_pays_floats(2 * len)) { /* one read, one write */
        f(y, x, len);
        return;
    }
    const size_t chunks = (len + s.chunk - 1) / s.chunk;
    #pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * s.chunk;
        f(y + lo, x + lo, span_len(len, lo, s.chunk));
    }
}

void ew_apply_binary(ew_split s, ew_binary_fn f, float *out, const float *a, const float *b, size_t len) {
    if (len < s.par_min || !par_pays_floats(4 * len)) { /* three reads, one write */
        f(out, a, b, len);
        return;
    }
    const size_t chunks = (len + s.chunk - 1) / s.chunk;
    #pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) {
        const size_t lo = k * s.chunk;
        f(out + lo, a + lo, b + lo, span_len(len, lo, s.chunk));
    }
}

VM_KERNEL static void accumulate_span(float *din, const float *dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) din[i] = din[i] + dy[i];
}

VM_KERNEL static void accumulate_fresh_span(float *din, const float *dy, size_t n) {
    #pragma omp simd
    for (size_t i = 0; i < n; i++) din[i] = 0.0f + dy[i];
}

void ew_accumulate(ew_split s, float *din, const float *dy, size_t len, bool fresh) {
    ew_apply_unary(s, fresh ? accumulate_fresh_span : accumulate_span, din, dy, len);
}

/* Chunked, optionally parallel application of span kernels (elementwise.h). */
#include "kernels/elementwise.h"

#include "core/parallel.h"
#include "kernels/vmath.h"

static size_t span_len(size_t len, size_t lo, size_t chunk) { return len - lo < chunk ? len - lo : chunk; }

void ew_apply_spans(ew_split s, size_t len, size_t floats, ew_span_fn span, const void *args) {
    if (len < s.par_min || !par_pays_floats(floats)) {
        span(args, 0, len);
        return;
    }
    const size_t chunks = (len + s.chunk - 1) / s.chunk;
    #pragma omp parallel for schedule(static)
    for (size_t k = 0; k < chunks; k++) span(args, k * s.chunk, span_len(len, k * s.chunk, s.chunk));
}

typedef struct unary_args {
    ew_unary_fn f;
    float *y;
    const float *x;
} unary_args;

static void unary_span(const void *args, size_t lo, size_t n) {
    const unary_args *u = args;
    u->f(u->y + lo, u->x + lo, n);
}

void ew_apply_unary(ew_split s, ew_unary_fn f, float *y, const float *x, size_t len) {
    ew_apply_spans(s, len, 2 * len, unary_span, &(unary_args){f, y, x}); /* one read, one write */
}

typedef struct binary_args {
    ew_binary_fn f;
    float *out;
    const float *a, *b;
} binary_args;

static void binary_span(const void *args, size_t lo, size_t n) {
    const binary_args *u = args;
    u->f(u->out + lo, u->a + lo, u->b + lo, n);
}

void ew_apply_binary(ew_split s, ew_binary_fn f, float *out, const float *a, const float *b, size_t len) {
    ew_apply_spans(s, len, 4 * len, binary_span, &(binary_args){f, out, a, b}); /* three reads, one write */
}

typedef struct binary_packed_args {
    ew_binary_packed_fn f;
    float *out;
    const uint16_t *a;
    const float *b;
} binary_packed_args;

static void binary_packed_span(const void *args, size_t lo, size_t n) {
    const binary_packed_args *u = args;
    u->f(u->out + lo, u->a + lo, u->b + lo, n);
}

void ew_apply_binary_packed(ew_split s, ew_binary_packed_fn f, float *out, const uint16_t *a, const float *b,
                            size_t len) {
    /* two reads, a half read, one write */
    ew_apply_spans(s, len, 3 * len + len / 2, binary_packed_span, &(binary_packed_args){f, out, a, b});
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

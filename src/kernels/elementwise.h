/* The driver of element-wise kernels (ReLU, GELU): a kernel over one contiguous span is applied to [0, len) in
 * chunks, in parallel once there are enough elements and the work outweighs opening a team (core/parallel.h),
 * and called directly below that, so that a small call never enters the OpenMP runtime. Every element is
 * computed the same way wherever its chunk starts, so the bits do not depend on the thread count. */
#ifndef SNUG_KERNELS_ELEMENTWISE_H
#define SNUG_KERNELS_ELEMENTWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The sizes one op tunes: below par_min elements one direct call; above, chunks of `chunk` elements. */
typedef struct ew_split {
    size_t par_min;
    size_t chunk;
} ew_split;

/* y = f(x) over n elements (y may be x). */
typedef void (*ew_unary_fn)(float *y, const float *x, size_t n);
/* out += f(a, b) over n elements (a backward: dx += g(kept, dy)). */
typedef void (*ew_binary_fn)(float *out, const float *a, const float *b, size_t n);

void ew_apply_unary(ew_split s, ew_unary_fn f, float *y, const float *x, size_t len);

/* The driver under the others: span(args, lo, n) over [0, len), one call below s.par_min or where moving
 * `floats` floats does not pay for a team, else chunks of s.chunk spread over the threads (a caller whose span
 * does more than one kernel's work: an op computing and rounding each chunk while it is in cache). */
typedef void (*ew_span_fn)(const void *args, size_t lo, size_t n);
void ew_apply_spans(ew_split s, size_t len, size_t floats, ew_span_fn span, const void *args);

/* din += dy over len elements, or din = 0 + dy where din is fresh (op_call.din_fresh: the bits of adding into
 * zeros): a gradient passed on unchanged (add, an inactive dropout). */
void ew_accumulate(ew_split s, float *din, const float *dy, size_t len, bool fresh);
void ew_apply_binary(ew_split s, ew_binary_fn f, float *out, const float *a, const float *b, size_t len);

/* The same where a is read from its bfloat16 copy (a backward whose kept input is packed): f unpacks what it
 * reads. */
typedef void (*ew_binary_packed_fn)(float *out, const uint16_t *a, const float *b, size_t n);
void ew_apply_binary_packed(ew_split s, ew_binary_packed_fn f, float *out, const uint16_t *a, const float *b,
                            size_t len);

#endif

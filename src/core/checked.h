/* Size arithmetic that cannot overflow silently: every product of dimensions goes through these. */
#ifndef SNUG_CORE_CHECKED_H
#define SNUG_CORE_CHECKED_H

#include <stdbool.h>
#include <stddef.h>

/* *out = a * b; false on overflow (and *out is left as SIZE_MAX). */
static inline bool size_mul(size_t a, size_t b, size_t *out) {
    if (__builtin_mul_overflow(a, b, out)) { *out = (size_t)-1; return false; }
    return true;
}

/* *out = a + b; false on overflow. */
static inline bool size_add(size_t a, size_t b, size_t *out) {
    if (__builtin_add_overflow(a, b, out)) { *out = (size_t)-1; return false; }
    return true;
}

/* Product of n factors; false on overflow. */
static inline bool size_prod(const size_t *f, int n, size_t *out) {
    size_t p = 1;
    for (int i = 0; i < n; i++)
        if (!size_mul(p, f[i], &p)) { *out = p; return false; }
    *out = p;
    return true;
}

/* Rounds up to a multiple of align (a power of two); false on overflow. */
static inline bool size_align(size_t a, size_t align, size_t *out) {
    if (!size_add(a, align - 1, out)) return false;
    *out &= ~(align - 1);
    return true;
}

#endif

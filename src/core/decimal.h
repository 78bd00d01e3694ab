/* Decimal numbers as users write them in sizes and model files: [sign] digits [. digits] [e|E [sign] digits],
 * with at least one digit before the exponent. strtod alone would also read hexadecimal floats ("0x1p-3"),
 * "inf", "nan" and leading blanks, which snug's inputs do not promise. */
#ifndef SNUG_CORE_DECIMAL_H
#define SNUG_CORE_DECIMAL_H

#include <stdbool.h>
#include <string.h>

/* The length of the decimal number s starts with, or 0 when it starts with none. */
static inline size_t decimal_length(const char *s) {
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    size_t digits = strspn(p, "0123456789");
    p += digits;
    if (*p == '.') {
        size_t frac = strspn(p + 1, "0123456789");
        digits += frac;
        p += 1 + frac;
    }
    if (digits == 0) return 0;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-') q++;
        size_t exp = strspn(q, "0123456789");
        if (exp > 0) p = q + exp; /* "5e" is the number 5 followed by the unit "e" */
    }
    return (size_t)(p - s);
}

/* True when there is a nonzero digit before the exponent: the value is not 0, whatever it rounds to. */
static inline bool decimal_nonzero(const char *s, size_t len) {
    for (size_t i = 0; i < len && s[i] != 'e' && s[i] != 'E'; i++)
        if (s[i] >= '1' && s[i] <= '9') return true;
    return false;
}

#endif

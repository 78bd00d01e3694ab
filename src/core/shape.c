/* Per-sample shapes in messages. */
#include "core/shape.h"

#include <stdio.h>

char *snug_shape_format(const snug_shape *s, char *buf, size_t len) {
    int n = snprintf(buf, len, "(");
    for (int i = 0; i < s->rank && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - (size_t)n, i ? ", %zu" : "%zu", s->dims[i]);
    if (n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, ")");
    return buf;
}

bool shape_same(const snug_shape *a, const snug_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

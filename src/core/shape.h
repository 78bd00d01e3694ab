/* Per-sample tensor shapes (snug_shape, public) as text for messages. */
#ifndef SNUG_CORE_SHAPE_H
#define SNUG_CORE_SHAPE_H

#include <stddef.h>

#include "snug.h"

#include <stdbool.h>

/* "(32, 28, 28)". Returns buf. */
char *snug_shape_format(const snug_shape *s, char *buf, size_t len);
/* The same rank and dimensions. Not memcmp: the struct's padding after rank need not match between copies. */
bool shape_same(const snug_shape *a, const snug_shape *b);

#endif

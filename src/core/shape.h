/* Per-sample tensor shapes (snug_shape, public) as text for messages. */
#ifndef SNUG_CORE_SHAPE_H
#define SNUG_CORE_SHAPE_H

#include <stddef.h>

#include "snug.h"

/* "(32, 28, 28)". Returns buf. */
char *snug_shape_format(const snug_shape *s, char *buf, size_t len);

#endif

/* Filling a snug_error: one message that says what failed, where, and what to do. */
#ifndef SNUG_CORE_ERROR_H
#define SNUG_CORE_ERROR_H

#include "snug.h"

/* Sets err (if non-NULL) to status and a printf-formatted message; returns status, so callers can write
 * `return snug_fail(err, SNUG_E_ARG, "...", ...);`. */
snug_status snug_fail(snug_error *err, snug_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends printf-formatted text to an error message already set (for hints). */
void snug_error_append(snug_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

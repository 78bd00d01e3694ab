/* Filling a snug_error. */
#define _POSIX_C_SOURCE 200809L
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

snug_status snug_fail(snug_error *err, snug_status status, const char *fmt, ...) {
    if (err) {
        err->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

void snug_error_append(snug_error *err, const char *fmt, ...) {
    if (!err) return;
    size_t used = strnlen(err->message, sizeof err->message);
    if (used + 1 >= sizeof err->message) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + used, sizeof err->message - used, fmt, ap);
    va_end(ap);
}

const char *snug_status_name(snug_status s) {
    switch (s) {
    case SNUG_OK: return "ok";
    case SNUG_E_ARG: return "bad argument";
    case SNUG_E_SHAPE: return "shape mismatch";
    case SNUG_E_OOM: return "out of memory";
    case SNUG_E_IO: return "I/O error";
    case SNUG_E_FORMAT: return "bad format";
    case SNUG_E_NONFINITE: return "non-finite values";
    case SNUG_E_OVERFLOW: return "size overflow";
    case SNUG_E_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

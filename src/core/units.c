/* Human sizes, durations and counts: "256MiB" in (a decimal number and a unit; without a unit, a whole number of
 * bytes), "44.00 MiB" out; "10m" in, "1:02:03" out; "1,234,567" and "25.1 MFLOP" out. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/decimal.h"
#include "core/error.h"
#include "snug.h"

typedef struct unit { const char *suffix; double factor; } unit;

/* Binary units are what memory is sold and reported in; decimal ones are accepted for completeness. */
static const unit units[] = {
    {"", 1},           {"b", 1},
    {"k", 1024.0},     {"kib", 1024.0},     {"kb", 1e3},
    {"m", 1048576.0},  {"mib", 1048576.0},  {"mb", 1e6},
    {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
    {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
};

snug_status snug_parse_size(const char *text, size_t *bytes, snug_error *err) {
    if (!text || !*text) return snug_fail(err, SNUG_E_ARG, "empty size: give a size such as 256MiB or 1.5GiB");
    const size_t len = decimal_length(text);
    errno = 0;
    double value = len ? strtod(text, NULL) : 0;
    if (len == 0 || errno == ERANGE || !isfinite(value))
        return snug_fail(err, SNUG_E_ARG, "bad size '%s': give a decimal number and a unit, such as 256MiB or "
                         "1.5GiB", text);
    const char *end = text + len;
    while (isspace((unsigned char)*end)) end++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(end, units[i].suffix) != 0) continue;
        double b = value * units[i].factor;
        if (!(b >= 1)) return snug_fail(err, SNUG_E_ARG, "bad size '%s': it must be at least 1 byte", text);
        /* a number without a unit counts bytes: 1.5 is not a size, and rounding it would be a guess */
        if (units[i].factor == 1 && b != floor(b))
            return snug_fail(err, SNUG_E_ARG, "bad size '%s': a byte count is a whole number; give a unit for a "
                             "fraction (%sMiB, %sGiB)", text, text, text);
        if (b >= 18446744073709551615.0)
            return snug_fail(err, SNUG_E_OVERFLOW, "bad size '%s': too large for this machine", text);
        *bytes = (size_t)b;
        return SNUG_OK;
    }
    return snug_fail(err, SNUG_E_ARG, "bad size '%s': unknown unit '%s' (use KiB, MiB, GiB, TiB, or kB, MB, GB)",
                     text, end);
}

/* bytes in the largest unit under it, two decimals: to nearest, or up (a budget to give: read back by
 * snug_parse_size it is at least bytes). */
static char *format_bytes(size_t bytes, bool up, char *buf, size_t len) {
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) { v /= 1024.0; u++; }
    if (up) v = ceil(v * 100 - 1e-9) / 100; /* 1e-9: an exact 9.30 stays 9.30 */
    if (u == 0) snprintf(buf, len, "%zu B", bytes);
    else snprintf(buf, len, "%.2f %s", v, names[u]);
    return buf;
}

char *snug_format_bytes(size_t bytes, char *buf, size_t len) { return format_bytes(bytes, false, buf, len); }

char *snug_format_bytes_up(size_t bytes, char *buf, size_t len) { return format_bytes(bytes, true, buf, len); }

snug_status snug_parse_duration(const char *text, double *seconds, snug_error *err) {
    const size_t len = text ? decimal_length(text) : 0;
    const char *unit = len ? text + len : "";
    const double factor = !strcmp(unit, "") || !strcmp(unit, "s") ? 1 : !strcmp(unit, "m") ? 60
                          : !strcmp(unit, "h") ? 3600 : -1;
    const double v = len ? strtod(text, NULL) * factor : -1;
    if (len == 0 || factor < 0 || !(v >= 0 && v <= 1e7))
        return snug_fail(err, SNUG_E_ARG, "bad duration '%s': give a number of seconds, minutes or hours such as "
                         "90s, 10m or 2h (at most 1e7 seconds)", text ? text : "");
    *seconds = v;
    return SNUG_OK;
}

char *snug_format_count(double value, char *buf, size_t len) {
    if (value > 0 && value < 10 && value != floor(value)) { /* a slow rate: its digits, not "0" */
        snprintf(buf, len, "%.2g", value);
        return buf;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", value < 0 || !isfinite(value) ? 0.0 : value);
    size_t n = strlen(digits), o = 0;
    for (size_t i = 0; i < n && o + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

char *snug_format_duration(double seconds, char *buf, size_t len) {
    if (!isfinite(seconds) || seconds < 0) seconds = 0;
    unsigned long s = (unsigned long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, len, "%lu:%02lu", s / 60, s % 60);
    return buf;
}

char *snug_format_flops(double flops, char *buf, size_t len) {
    static const char *const units[] = {"", "k", "M", "G", "T", "P"};
    int u = 0;
    while (flops >= 1000.0 && u < 5) flops /= 1000.0, u++;
    snprintf(buf, len, "%.*f %sFLOP", u ? 1 : 0, flops, units[u]);
    return buf;
}

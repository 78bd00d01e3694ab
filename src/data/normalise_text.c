/* The text form of snug_normalise: "MEAN/STD" with one value per channel on each side, comma-separated
 * ("0.5/0.25", "0.485,0.456,0.406/0.229,0.224,0.225"), what a command line takes and a saved run records. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "snug.h"

/* Up to 3 comma-separated finite numbers from s (ending at end); their count, or 0 when s is not such a list. */
static size_t number_list(const char *s, const char *end, float *out) {
    size_t n = 0;
    while (s < end && n < 3) {
        char *stop;
        errno = 0;
        const double v = strtod(s, &stop);
        if (stop == s || stop > end || errno != 0 || !isfinite(v)) return 0;
        out[n++] = (float)v;
        if (stop == end) return n;
        if (*stop != ',') return 0;
        s = stop + 1;
    }
    return 0;
}

snug_status snug_parse_normalise(const char *text, snug_normalise *out, snug_error *err) {
    *out = (snug_normalise){0};
    const char *slash = text ? strchr(text, '/') : NULL;
    size_t nm = slash ? number_list(text, slash, out->mean) : 0;
    size_t ns = slash ? number_list(slash + 1, slash + strlen(slash), out->std) : 0;
    bool positive = ns > 0;
    for (size_t c = 0; c < ns; c++) positive = positive && out->std[c] > 0;
    if (nm == 0 || nm != ns || nm == 2 || !positive)
        return snug_fail(err, SNUG_E_ARG, "normalisation '%s': give MEAN/STD with 1 or 3 values on each side, "
                         "the stds > 0, in pixel units of [0, 1] (e.g. 0.5/0.25 or 0.485,0.456,0.406/0.229,0.224,"
                         "0.225)", text ? text : "");
    out->channels = nm;
    return SNUG_OK;
}

const char *snug_normalise_format(const snug_normalise *n, char *buf, size_t len) {
    if (n->channels == 3)
        snprintf(buf, len, "%.9g,%.9g,%.9g/%.9g,%.9g,%.9g", (double)n->mean[0], (double)n->mean[1],
                 (double)n->mean[2], (double)n->std[0], (double)n->std[1], (double)n->std[2]);
    else snprintf(buf, len, "%.9g/%.9g", (double)n->mean[0], (double)n->std[0]);
    return buf;
}

/* Writing SVG by hand (svg.h): formatted output that remembers a failure, escaped text, tick spacing. */
#include "report/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>

void svg_put(svg_out *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (vfprintf(s->out, fmt, ap) < 0) s->failed = true;
    va_end(ap);
}

/* The length of the well-formed UTF-8 sequence at c (2 to 4 bytes), or 0 when it is not one (an overlong form,
 * a surrogate, a code point past U+10FFFF, a missing continuation byte). */
static size_t utf8_length(const unsigned char *c) {
    size_t n = c[0] >= 0xf0 && c[0] <= 0xf4 ? 4 : c[0] >= 0xe0 ? 3 : c[0] >= 0xc2 && c[0] <= 0xdf ? 2 : 0;
    if (n == 0 || (n == 4 && c[0] > 0xf4)) return 0;
    for (size_t i = 1; i < n; i++)
        if ((c[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && c[0] == 0xe0 && c[1] < 0xa0) return 0; /* overlong */
    if (n == 3 && c[0] == 0xed && c[1] >= 0xa0) return 0; /* a surrogate */
    if (n == 4 && c[0] == 0xf0 && c[1] < 0x90) return 0; /* overlong */
    if (n == 4 && c[0] == 0xf4 && c[1] >= 0x90) return 0; /* past U+10FFFF */
    return n;
}

void svg_text(svg_out *s, const char *text) {
    const unsigned char *c = (const unsigned char *)(text ? text : "");
    while (*c) {
        switch (*c) {
        case '&': svg_put(s, "&amp;"); break;
        case '<': svg_put(s, "&lt;"); break;
        case '>': svg_put(s, "&gt;"); break;
        case '"': svg_put(s, "&quot;"); break;
        case '\'': svg_put(s, "&apos;"); break;
        default:
            if (*c >= 0x80) {
                size_t n = utf8_length(c);
                svg_put(s, "%.*s", n ? (int)n : 1, n ? (const char *)c : "?");
                c += n ? n : 1;
                continue;
            }
            svg_put(s, "%c", *c < 0x20 || *c == 0x7f ? '?' : *c);
        }
        c++;
    }
}

void svg_label(svg_out *s, double x, double y, const char *attrs, const char *text) {
    svg_put(s, "<text x=\"%.1f\" y=\"%.1f\" %s>", x, y, attrs);
    svg_text(s, text);
    svg_put(s, "</text>\n");
}

double svg_nice_step(double range, int ticks) {
    if (!(range > 0)) return 1;
    double raw = range / ticks, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* Writing SVG by hand: what every picture snug draws shares (the memory timeline, the training curve). Text that
 * comes from the user (layer names, a log's file name, an evaluation set's name) is escaped so that the picture
 * stays well-formed XML whatever the text holds. */
#ifndef SNUG_REPORT_SVG_H
#define SNUG_REPORT_SVG_H

#include <stdbool.h>
#include <stdio.h>

/* The file a picture goes to; failed is set by the first write that fails, so a writer checks once at the end. */
typedef struct svg_out {
    FILE *out;
    bool failed;
} svg_out;

void svg_put(svg_out *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Text content or an attribute value: XML's five special characters escaped, and every byte that XML 1.0 does
 * not allow there (control characters, bytes that are not well-formed UTF-8) written as '?'. NULL writes
 * nothing. */
void svg_text(svg_out *s, const char *text);

/* <text x y [attrs]>escaped text</text> */
void svg_label(svg_out *s, double x, double y, const char *attrs, const char *text);

/* A round tick spacing: 1, 2 or 5 times a power of ten, giving about `ticks` intervals over `range` (1 for a
 * range that is not positive). */
double svg_nice_step(double range, int ticks);

#endif

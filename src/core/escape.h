/* Text that comes from a file (a tensor name in a weights file, a key or value in a model file), made safe to
 * print: a message that echoed it raw would let the file drive the reader's terminal (an escape sequence that
 * clears the screen or rewrites the lines above it). */
#ifndef SNUG_CORE_ESCAPE_H
#define SNUG_CORE_ESCAPE_H

#include <stddef.h>

#define ESCAPED_MAX 256 /* bytes of an escaped text, its NUL included; a longer one ends in "..." */

typedef struct escaped {
    char text[ESCAPED_MAX];
} escaped;

/* The text with every byte outside printable ASCII (0x20..0x7e: control characters, DEL, and every byte of a
 * multi-byte UTF-8 character) written as \xNN, and a backslash as \\, so that what is printed is unambiguous.
 * Returned by value, for use inside one call: snug_fail(err, s, "tensor '%s'", escape_text(name).text).
 * NULL gives "(null)". */
escaped escape_text(const char *text);
/* The same for the n bytes at text (which need not end in a NUL before them). */
escaped escape_range(const char *text, size_t n);

#endif

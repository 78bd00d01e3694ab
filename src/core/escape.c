/* Escaping text from files for messages (escape.h). */
#include "core/escape.h"

#include <stdio.h>
#include <string.h>

escaped escape_range(const char *text, size_t n) {
    escaped e;
    static const char more[] = "...";
    const size_t room = sizeof e.text - sizeof more; /* what is left for the text once "..." fits */
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        const unsigned char c = (unsigned char)text[i];
        const size_t need = c == '\\' ? 2 : c >= 0x20 && c <= 0x7e ? 1 : 4;
        if (o + need > room) break;
        if (c == '\\') e.text[o++] = '\\', e.text[o++] = '\\';
        else if (need == 1) e.text[o++] = (char)c;
        else o += (size_t)snprintf(e.text + o, 5, "\\x%02x", c);
    }
    if (i < n) memcpy(e.text + o, more, sizeof more - 1), o += sizeof more - 1;
    e.text[o] = '\0';
    return e;
}

escaped escape_text(const char *text) {
    if (!text) return escape_range("(null)", 6);
    return escape_range(text, strlen(text));
}

/* A parsed model file's accessors and its one message form, shared by the reader (model_file.c) and the layer
 * table (model_layers.c). */
#define _POSIX_C_SOURCE 200809L
#include "graph/model_file.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/escape.h"

snug_status mf_fail(snug_error *err, snug_status status, const mf_doc *d, int line, const char *layer,
                    const char *fmt, ...) {
    if (!err) return status;
    err->status = status;
    char *m = err->message;
    const size_t len = sizeof err->message;
    int n;
    if (!layer) n = snprintf(m, len, "%s:%d: ", d->file, line);
    else if (strcmp(layer, "model") == 0) n = snprintf(m, len, "%s:%d: [model]: ", d->file, line);
    else n = snprintf(m, len, "%s:%d: layer '%s': ", d->file, line, escape_text(layer).text);
    if (n < 0 || (size_t)n >= len) return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

mf_entry *mf_take(mf_section *s, const char *key) {
    for (int i = 0; i < s->n_entries; i++)
        if (strcmp(s->entries[i].key, key) == 0) {
            s->entries[i].used = true;
            return &s->entries[i];
        }
    return NULL;
}

int mf_section_index(const mf_doc *d, const char *name) {
    for (int i = 0; i < d->n_sections; i++)
        if (strcmp(d->sections[i].name, name) == 0) return i;
    return -1;
}

bool mf_is_path(const char *name) {
    size_t n = strlen(name);
    return strchr(name, '/') != NULL || (n > 4 && strcmp(name + n - 4, ".ini") == 0) || mf_is_onnx(name);
}

bool mf_is_onnx(const char *name) {
    size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".onnx") == 0;
}

/* A model file's class count set from outside (snug_model_builtin_classes): the zoo's files say 10 classes
 * (MNIST) or 1000 (ImageNet), and a user with 3 classes should not have to copy a file to change one number.
 * The classes are the outputs of the layer the loss reads, so that layer's `out` (linear) or `out_channels`
 * (conv2d: a class per pixel) is rewritten in the parsed file before the graph is built; every shape after it
 * follows from the builders, and every message still names the file's lines. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/escape.h"
#include "graph/model_file.h"

static mf_entry *find_entry(mf_section *s, const char *key) {
    for (int i = 0; i < s->n_entries; i++)
        if (strcmp(s->entries[i].key, key) == 0) return &s->entries[i];
    return NULL;
}

/* The section the loss reads: its `input`, else the section above it (the default of every layer). -1: none. */
static int logits_section(mf_doc *d, int *loss) {
    *loss = -1;
    for (int i = 0; i < d->n_sections; i++) {
        const mf_entry *type = find_entry(&d->sections[i], "type");
        if (type && strcmp(type->value, "softmax_cross_entropy") == 0) *loss = i;
    }
    if (*loss < 0) return -1;
    const mf_entry *in = find_entry(&d->sections[*loss], "input");
    return in ? mf_section_index(d, in->value) : *loss - 1;
}

snug_status mf_set_classes(mf_doc *d, size_t classes, snug_error *err) {
    int loss;
    const int at = logits_section(d, &loss);
    if (loss < 0 || at < 0)
        return mf_fail(err, SNUG_E_FORMAT, d, d->last_line, NULL, "the class count cannot be set: the model has no "
                       "softmax_cross_entropy loss reading a layer (see docs/model-files.md)");
    mf_section *s = &d->sections[at];
    const mf_entry *type = find_entry(s, "type");
    const char *key = !type ? NULL : strcmp(type->value, "linear") == 0 ? "out"
                      : strcmp(type->value, "conv2d") == 0            ? "out_channels" : NULL;
    mf_entry *e = key ? find_entry(s, key) : NULL;
    if (!e)
        return mf_fail(err, SNUG_E_ARG, d, s->line, s->name, "the class count cannot be set: the loss reads a "
                       "layer of type %s, whose outputs are not a number of the file (only a linear's `out` or a "
                       "conv2d's `out_channels` can be the classes); edit the model file instead",
                       type ? escape_text(type->value).text : "(none)");
    char text[32];
    snprintf(text, sizeof text, "%zu", classes);
    char *value = strdup(text);
    if (!value) return snug_fail(err, SNUG_E_OOM, "%s: out of memory while setting the class count", d->file);
    free(e->value);
    e->value = value;
    return SNUG_OK;
}

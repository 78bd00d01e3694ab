/* Model files: the parsed form of an INI-like layer list (docs/model-files.md), shared by the reader
 * (model_file.c: text -> sections, with line numbers), the layer table (model_layers.c: sections -> builder
 * calls) and the built-in zoo (model_zoo.c: the files of models/, embedded at build time). */
#ifndef SNUG_GRAPH_MODEL_FILE_H
#define SNUG_GRAPH_MODEL_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "snug.h"

/* One `key = value` line of a section. */
typedef struct mf_entry {
    char *key;
    char *value;   /* as libinih hands it over: trimmed, inline comment removed */
    int line;      /* 1-based line of the key in the file */
    bool used;     /* consumed by the section's type: whatever is left is an unknown key */
} mf_entry;

/* One [section]: the [model] header or a layer. */
typedef struct mf_section {
    char *name;
    int line;      /* the line of its [header] */
    mf_entry *entries;
    int n_entries, cap_entries;
} mf_section;

/* A parsed file: its sections in file order. */
typedef struct mf_doc {
    const char *file;      /* the name messages start with */
    mf_section *sections;
    int n_sections, cap_sections;
    int last_line;         /* the file's last line, for messages about what is missing at the end */
} mf_doc;

/* Every message reads "FILE:LINE: layer 'NAME': problem (what to do)"; layer NULL leaves the layer part out,
 * layer "model" (a reserved name) writes "[model]" instead. Returns status. */
snug_status mf_fail(snug_error *err, snug_status status, const mf_doc *d, int line, const char *layer,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The entry `key` of section s, marked used, or NULL. */
mf_entry *mf_take(mf_section *s, const char *key);
/* The first section called name, or -1. */
int mf_section_index(const mf_doc *d, const char *name);

/* Builds the graph a parsed file describes (model_layers.c): the [model] section first, then one builder call
 * per layer section, in file order. NULL and err filled on the first problem. */
snug_graph *mf_build(mf_doc *d, snug_error *err);

/* Sets the class count: the outputs of the layer the loss reads (a linear's `out`, a conv2d's `out_channels`),
 * rewritten in d before mf_build (model_classes.c). SNUG_E_ARG when that layer has no such number. */
snug_status mf_set_classes(mf_doc *d, size_t classes, snug_error *err);
/* snug_model_parse with mf_set_classes applied when classes > 0. */
snug_status mf_parse(const char *text, const char *name_for_messages, size_t classes, snug_graph **out,
                     snug_error *err);
/* snug_model_load the same way. */
snug_status mf_load(const char *path, size_t classes, snug_graph **out, snug_error *err);

/* The layer types a model file can name, in the order docs/model-files.md lists them, NULL-terminated. */
const char *const *mf_layer_types(void);

/* True when a model name names a file rather than a built-in: it contains '/' or ends in ".ini". */
bool mf_is_path(const char *name);
/* Whether a model file is an ONNX model (its name ends in ".onnx"): read by snug_graph_from_onnx. */
bool mf_is_onnx(const char *name);

/* The model files of models/, embedded into the library by cmake/SnugModels.cmake (a generated source). */
typedef struct mf_embedded {
    const char *name;      /* "cnn": the file name without .ini */
    const char *path;      /* "models/cnn.ini": what messages name */
    const char *text;      /* the whole file, NUL-terminated */
} mf_embedded;

extern const mf_embedded mf_embedded_models[];  /* terminated by an entry with name NULL */
extern const char *const mf_embedded_names[];   /* the names, NULL-terminated */

#endif

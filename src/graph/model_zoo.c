/* The built-in models: the model files of models/ (mlp.ini, cnn.ini, ...), embedded into the library at build
 * time by cmake/SnugModels.cmake, so a name works without any install path. They go through the same parser as
 * a user's file (snug_model_parse); docs/model-files.md describes the format and the zoo. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "graph/model_file.h"
#include "snug.h"

const char *const *snug_model_names(void) { return mf_embedded_names; }

bool snug_model_is_file(const char *name) { return name && mf_is_path(name); }

/* "unknown model 'x': the built-in models are mlp, cnn, ...". */
static snug_status unknown_model(const char *name, snug_error *err) {
    char list[512];
    int n = 0;
    list[0] = '\0';
    for (size_t i = 0; mf_embedded_names[i] && n >= 0 && (size_t)n < sizeof list; i++)
        n += snprintf(list + n, sizeof list - (size_t)n, "%s%s", i ? ", " : "", mf_embedded_names[i]);
    return snug_fail(err, SNUG_E_ARG, "unknown model '%s': the built-in models are %s; a model file is named by its "
                     "path (one with a '/' or ending in .ini or .onnx)", name, list);
}

snug_status snug_model_builtin_classes(const char *name, size_t classes, snug_graph **out, snug_error *err) {
    *out = NULL;
    if (name && mf_is_onnx(name) && classes)
        return snug_fail(err, SNUG_E_ARG, "%s: an ONNX model's classes are its output's; export it with %zu "
                         "outputs instead of setting the count here", name, classes);
    if (name && mf_is_onnx(name)) return snug_graph_from_onnx(name, out, err);
    if (name && mf_is_path(name)) return mf_load(name, classes, out, err);
    for (size_t i = 0; name && mf_embedded_models[i].name; i++)
        if (strcmp(name, mf_embedded_models[i].name) == 0)
            return mf_parse(mf_embedded_models[i].text, mf_embedded_models[i].path, classes, out, err);
    return unknown_model(name ? name : "", err);
}

snug_status snug_model_builtin(const char *name, snug_graph **out, snug_error *err) {
    return snug_model_builtin_classes(name, 0, out, err);
}

/* What a run's weights say of the data they were trained on: the class names and the normalisation of the
 * training set, remembered by snug_trainer_fit and written by snug_trainer_save as metadata ("classes": a JSON
 * array of the names, "normalise": snug_normalise_format's text), so that scoring the weights later reads images
 * as training did and names the classes (snug_weights_data_read). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "train/trainer.h"

/* ds's class names as a JSON array, or NULL when it has none (or memory is short: the metadata is optional). */
static char *names_json(const snug_dataset *ds) {
    const size_t n = snug_dataset_classes(ds);
    if (n == 0 || !snug_dataset_class_name(ds, 0)) return NULL;
    cJSON *a = cJSON_CreateArray();
    for (size_t c = 0; a && c < n; c++) {
        const char *name = snug_dataset_class_name(ds, c);
        cJSON *s = name ? cJSON_CreateString(name) : NULL;
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    char *text = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    return text;
}

void trainer_remember_data(snug_trainer *tr, const snug_dataset *ds) {
    free(tr->data_classes);
    tr->data_classes = names_json(ds);
    snug_normalise n;
    tr->data_normalise[0] = '\0';
    if (snug_dataset_normalisation(ds, &n)) snug_normalise_format(&n, tr->data_normalise, sizeof tr->data_normalise);
}

static snug_status read_names(const char *path, const char *text, snug_weights_data *out, snug_error *err) {
    cJSON *a = cJSON_Parse(text);
    const size_t n = cJSON_IsArray(a) ? (size_t)cJSON_GetArraySize(a) : 0;
    out->class_names = n ? calloc(n, sizeof *out->class_names) : NULL;
    snug_status s = n && out->class_names ? SNUG_OK : SNUG_E_FORMAT;
    for (size_t c = 0; s == SNUG_OK && c < n; c++) {
        const cJSON *v = cJSON_GetArrayItem(a, (int)c);
        if (!cJSON_IsString(v) || !(out->class_names[c] = strdup(v->valuestring))) s = SNUG_E_FORMAT;
        else out->classes = c + 1;
    }
    cJSON_Delete(a);
    return s == SNUG_OK ? s : snug_fail(err, s, "%s: its metadata \"classes\" is not a list of class names", path);
}

snug_status snug_weights_data_read(const char *path, snug_weights_data *out, snug_error *err) {
    memset(out, 0, sizeof *out);
    st_file sf;
    snug_status s = st_file_open(&sf, path, err);
    if (s != SNUG_OK) return s;
    const char *names = st_metadata(&sf, "classes"), *norm = st_metadata(&sf, "normalise");
    if (names) s = read_names(path, names, out, err);
    if (s == SNUG_OK && norm) {
        snug_error why;
        out->has_normalise = snug_parse_normalise(norm, &out->normalise, &why) == SNUG_OK;
        if (!out->has_normalise)
            s = snug_fail(err, SNUG_E_FORMAT, "%s: its metadata \"normalise\" does not read: %s", path, why.message);
    }
    st_file_close(&sf);
    if (s != SNUG_OK) snug_weights_data_free(out);
    return s;
}

void snug_weights_data_free(snug_weights_data *d) {
    for (size_t c = 0; d->class_names && c < d->classes; c++) free(d->class_names[c]);
    free(d->class_names);
    memset(d, 0, sizeof *d);
}

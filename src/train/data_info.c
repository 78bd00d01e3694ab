/* What a run's weights say of the data they were trained on: the class names and the normalisation of the
 * training set, remembered by snug_trainer_fit and written by snug_trainer_save as metadata ("classes": a JSON
 * array of the names, "normalise": snug_normalise_format's text, "standardise": a CSV table's columns and
 * statistics as JSON), so that scoring the weights later reads images and tables as training did and names the
 * classes (snug_weights_data_read). The doubles are printed as cJSON prints them: exactly (17 digits). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <math.h>
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

/* A standardised CSV table's record: {"columns": [...], "label": k, "classes": n, "mean": [...], "std": [...]};
 * NULL when ds is none (or memory is short: the metadata is optional). */
static char *table_json(const snug_dataset *ds) {
    snug_table_stats t;
    if (!snug_dataset_table_stats(ds, &t)) return NULL;
    cJSON *o = cJSON_CreateObject();
    const int f = (int)t.columns - 1;
    bool ok = o && cJSON_AddItemToObject(o, "columns", cJSON_CreateStringArray((const char *const *)t.names,
                                                                              (int)t.columns)) &&
              cJSON_AddNumberToObject(o, "label", (double)t.label) &&
              cJSON_AddNumberToObject(o, "classes", (double)t.classes) &&
              cJSON_AddItemToObject(o, "mean", cJSON_CreateDoubleArray(t.mean, f)) &&
              cJSON_AddItemToObject(o, "std", cJSON_CreateDoubleArray(t.std, f));
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}

void trainer_remember_data(snug_trainer *tr, const snug_dataset *ds) {
    free(tr->data_classes);
    tr->data_classes = names_json(ds);
    free(tr->data_table);
    tr->data_table = table_json(ds);
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

/* A whole number in [0, limit) from o's member name, or -1. */
static double whole_below(const cJSON *o, const char *name, double limit) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    const double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
    return x >= 0 && x < limit && x == floor(x) ? x : -1;
}

/* n doubles of the array a into a new array; std: each > 0. NULL when a is not that. */
static double *read_doubles(const cJSON *a, size_t n, bool positive) {
    double *v = cJSON_IsArray(a) && (size_t)cJSON_GetArraySize(a) == n ? malloc(n * sizeof *v) : NULL;
    for (size_t i = 0; v && i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(a, (int)i);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || (positive && !(x->valuedouble > 0))) {
            free(v);
            return NULL;
        }
        v[i] = x->valuedouble;
    }
    return v;
}

static snug_status read_table(const char *path, const char *text, snug_table_stats *t, snug_error *err) {
    cJSON *o = cJSON_Parse(text);
    const cJSON *cols = cJSON_GetObjectItemCaseSensitive(o, "columns");
    const size_t n = cJSON_IsArray(cols) ? (size_t)cJSON_GetArraySize(cols) : 0;
    const double label = whole_below(o, "label", (double)n), classes = whole_below(o, "classes", 65537);
    bool ok = n >= 2 && label >= 0 && classes >= 1 && (t->names = calloc(n, sizeof *t->names));
    for (size_t c = 0; ok && c < n; c++) {
        const cJSON *v = cJSON_GetArrayItem(cols, (int)c);
        ok = cJSON_IsString(v) && (t->names[c] = strdup(v->valuestring));
        if (ok) t->columns = c + 1;
    }
    ok = ok && (t->mean = read_doubles(cJSON_GetObjectItemCaseSensitive(o, "mean"), n - 1, false)) &&
         (t->std = read_doubles(cJSON_GetObjectItemCaseSensitive(o, "std"), n - 1, true));
    t->label = ok ? (size_t)label : 0;
    t->classes = ok ? (size_t)classes : 0;
    cJSON_Delete(o);
    return ok ? SNUG_OK : snug_fail(err, SNUG_E_FORMAT, "%s: its metadata \"standardise\" is not a table's columns "
                                    "and statistics", path);
}

snug_status snug_weights_data_read(const char *path, snug_weights_data *out, snug_error *err) {
    memset(out, 0, sizeof *out);
    st_file sf;
    snug_status s = st_file_open(&sf, path, err);
    if (s != SNUG_OK) return s;
    const char *names = st_metadata(&sf, "classes"), *norm = st_metadata(&sf, "normalise");
    const char *table = st_metadata(&sf, "standardise");
    if (names) s = read_names(path, names, out, err);
    if (s == SNUG_OK && table) s = read_table(path, table, &out->table, err);
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
    for (size_t c = 0; d->table.names && c < d->table.columns; c++) free(d->table.names[c]);
    free(d->table.names);
    free(d->table.mean);
    free(d->table.std);
    memset(d, 0, sizeof *d);
}

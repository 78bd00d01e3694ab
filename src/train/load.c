/* Loading weights (snug_trainer_load) from a safetensors file that io/safetensors_read.c has opened and checked
 * on its own: the names against the model (none missing, none extra: a file of another model, or one that lost a
 * tensor, is named as such rather than by its byte counts), each tensor's dtype and shape, then every value
 * (finite); the parameters change only after all of it has passed. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/escape.h"
#include "io/safetensors.h"
#include "io/state.h"
#include "train/trainer.h"

#define NAMES_LISTED 4                   /* missing or extra names named in a message; the rest counted */
#define SKIPPED_SUFFIX ".num_batches_tracked"

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool model_has(const snug_graph *g, const char *name) {
    for (int i = 0; i < g->n_params; i++)
        if (strcmp(g->params[i].name, name) == 0) return true;
    return false;
}

/* "'a', 'b', 'c', 'd' and 3 more" into buf; *count is the total. */
typedef struct name_list {
    char text[384];
    size_t count;
} name_list;

static void list_add(name_list *l, const char *name) {
    size_t used = strlen(l->text);
    if (l->count < NAMES_LISTED)
        snprintf(l->text + used, sizeof l->text - used, "%s'%s'", l->count ? ", " : "", escape_text(name).text);
    l->count++;
}

static void list_finish(name_list *l) {
    size_t used = strlen(l->text);
    if (l->count > NAMES_LISTED)
        snprintf(l->text + used, sizeof l->text - used, " and %zu more", l->count - NAMES_LISTED);
}

/* The model's names and the file's, both ways. */
static snug_status match_names(const st_file *sf, const snug_graph *g, snug_error *err) {
    name_list missing = {0}, extra = {0};
    for (int i = 0; i < g->n_params; i++)
        if (!cJSON_GetObjectItemCaseSensitive(sf->root, g->params[i].name)) list_add(&missing, g->params[i].name);
    for (size_t i = 0; i < sf->n; i++)
        if (!model_has(g, sf->entries[i].name) && !ends_with(sf->entries[i].name, SKIPPED_SUFFIX) &&
            !(st_metadata(sf, STATE_KEY) && strncmp(sf->entries[i].name, "optim.", 6) == 0)) /* a state's */
            list_add(&extra, sf->entries[i].name);
    if (missing.count == 0 && extra.count == 0) return SNUG_OK;
    list_finish(&missing);
    list_finish(&extra);
    snug_fail(err, SNUG_E_FORMAT, "'%s' does not hold the weights of model '%s':", sf->path, g->name);
    if (missing.count)
        snug_error_append(err, " %zu missing (%s)%s", missing.count, missing.text, extra.count ? ";" : "");
    if (extra.count) snug_error_append(err, " %zu not in the model (%s)", extra.count, extra.text);
    snug_error_append(err, ". Was it saved from another model or version of the model file?");
    return SNUG_E_FORMAT;
}

/* "[32, 1, 3, 3]" */
static void format_dims(const size_t *dims, int rank, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%zu", i ? ", " : "", dims[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

/* The file's dtype and shape of tensor `name` (which exists in the file), as parameter p's. */
static snug_status check_tensor_as(const st_file *sf, const snug_graph *g, const graph_param *p, const char *name,
                                   snug_error *err) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(sf->root, name);
    const char *dtype = cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring;
    if (strcmp(dtype, "F32") != 0)
        return snug_fail(err, SNUG_E_FORMAT, "'%s': tensor '%s' is %s; snug loads F32 only (convert with "
                         "tensor.float() before saving)", sf->path, name, escape_text(dtype).text);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    size_t dims[SNUG_MAX_DIMS + 1] = {0};
    int rank = cJSON_GetArraySize(shape);
    bool same = rank == p->shape.rank;
    for (int i = 0; i < rank && i <= SNUG_MAX_DIMS; i++) {
        dims[i] = (size_t)cJSON_GetArrayItem(shape, i)->valuedouble;
        same = same && dims[i] == p->shape.dims[i];
    }
    if (same) return SNUG_OK;
    char have[96], want[96];
    format_dims(dims, rank <= SNUG_MAX_DIMS ? rank : SNUG_MAX_DIMS + 1, have, sizeof have);
    format_dims(p->shape.dims, p->shape.rank, want, sizeof want);
    return snug_fail(err, SNUG_E_SHAPE, "'%s': tensor '%s' has shape %s%s in the file but %s in model '%s'",
                     sf->path, name, have, rank > SNUG_MAX_DIMS ? "..." : "", want, g->name);
}

static snug_status check_tensor(const st_file *sf, const snug_graph *g, const graph_param *p, snug_error *err) {
    return check_tensor_as(sf, g, p, p->name, err);
}

static uint64_t data_begin(const st_file *sf, const graph_param *p) { return st_tensor_begin(sf, p->name); }

/* Every value is read and checked before any is copied: a NaN or an infinity (which would make every loss NaN)
 * refuses the file with the parameters unchanged, like every other problem. */
static snug_status check_values(st_file *sf, const snug_graph *g, snug_error *err) {
    for (int i = 0; i < g->n_params; i++) {
        const graph_param *p = &g->params[i];
        st_first_bad bad;
        if (!st_read_floats(sf, data_begin(sf, p), NULL, p->numel, &bad))
            return snug_fail(err, SNUG_E_IO, "cannot read tensor '%s' from '%s': %s; the parameters are "
                             "unchanged", p->name, sf->path, ferror(sf->f) ? strerror(errno) : "unexpected end of "
                             "file");
        if (bad.index < p->numel)
            return snug_fail(err, SNUG_E_NONFINITE, "'%s': tensor '%s' holds %s at index %zu (of %zu, row-major): "
                             "weights must be finite; the parameters are unchanged", sf->path, p->name,
                             isnan(bad.value) ? "NaN" : bad.value > 0 ? "+infinity" : "-infinity", bad.index,
                             p->numel);
    }
    return SNUG_OK;
}

static snug_status read_values(st_file *sf, snug_trainer *tr, snug_error *err) {
    for (int i = 0; i < tr->g->n_params; i++) {
        const graph_param *p = &tr->g->params[i];
        float *v = (p->buffer ? tr->x.state : tr->x.params) + p->offset;
        st_first_bad bad;
        if (!st_read_floats(sf, data_begin(sf, p), v, p->numel, &bad))
            return snug_fail(err, SNUG_E_IO, "cannot read tensor '%s' from '%s': %s; the parameters are partly "
                             "loaded", p->name, sf->path, ferror(sf->f) ? strerror(errno) : "unexpected end of file");
        if (bad.index < p->numel)
            return snug_fail(err, SNUG_E_NONFINITE, "'%s' changed while it was read: tensor '%s' now holds a "
                             "non-finite value at index %zu; the parameters are partly loaded", sf->path, p->name,
                             bad.index);
    }
    return SNUG_OK;
}

snug_status trainer_read_tensor(st_file *sf, const snug_graph *g, const graph_param *p, const char *name, float *v,
                                snug_error *err) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(sf->root, name);
    if (!t) return snug_fail(err, SNUG_E_FORMAT, "'%s' holds no tensor '%s'", sf->path, name);
    snug_status s = check_tensor_as(sf, g, p, name, err);
    st_first_bad bad;
    if (s == SNUG_OK && !st_read_floats(sf, st_tensor_begin(sf, name), v, p->numel, &bad))
        s = snug_fail(err, SNUG_E_IO, "cannot read tensor '%s' from '%s': %s", name, sf->path,
                      ferror(sf->f) ? strerror(errno) : "unexpected end of file");
    else if (s == SNUG_OK && bad.index < p->numel)
        s = snug_fail(err, SNUG_E_NONFINITE, "'%s': tensor '%s' holds a non-finite value at index %zu", sf->path, name,
                      bad.index);
    return s;
}

/* Everything up to the values: the file on its own, its names against the model, then its layout. */
static snug_status check_file(st_file *sf, const char *path, const snug_graph *g, snug_error *err) {
    snug_status s = st_file_open(sf, path, err);
    if (s == SNUG_OK) s = match_names(sf, g, err); /* before the tiling: a file of another model says so */
    if (s == SNUG_OK) s = st_file_check_layout(sf, err);
    for (int i = 0; s == SNUG_OK && i < g->n_params; i++) s = check_tensor(sf, g, &g->params[i], err);
    return s;
}

snug_status snug_trainer_load(snug_trainer *tr, const char *path, snug_error *err) {
    st_file sf;
    snug_status s = check_file(&sf, path, tr->g, err);
    if (s == SNUG_OK) s = check_values(&sf, tr->g, err);
    trainer_copies_stale(tr); /* even a partial load changes parameters */
    if (s == SNUG_OK) s = read_values(&sf, tr, err);
    st_file_close(&sf);
    return s;
}

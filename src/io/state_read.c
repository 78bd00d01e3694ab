/* Reading a run's state (state_write.c writes it): which state of a folder is the newest whole one and what it
 * says about its run (train/state_load.c continues a trainer from it). A state file is untrusted input like a
 * weights file (safetensors_read.c checks the bytes, the checksum and the header); here the metadata's every
 * field is checked too. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/state.h"

/* A number field of o that must be a whole number in [lo, hi]. */
static bool whole(const cJSON *o, const char *key, double lo, double hi, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != (double)(long long)v->valuedouble)
        return false;
    *out = v->valuedouble;
    return true;
}

static bool real(const cJSON *o, const char *key, float *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return false;
    *out = (float)v->valuedouble;
    return true;
}

static bool flag(const cJSON *o, const char *key, bool *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsBool(v)) return false;
    *out = cJSON_IsTrue(v);
    return true;
}

static bool text_is(const cJSON *o, const char *key, const char *a, const char *b, bool *is_b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || (strcmp(v->valuestring, a) != 0 && strcmp(v->valuestring, b) != 0)) return false;
    *is_b = strcmp(v->valuestring, b) == 0;
    return true;
}

static bool u64_text(const cJSON *o, const char *key, uint64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char *end;
    if (!cJSON_IsString(v) || !v->valuestring[0] || v->valuestring[0] == '-') return false;
    *out = strtoull(v->valuestring, &end, 10);
    return *end == '\0';
}

#define LONG_LIMIT 9007199254740992.0 /* 2^53: whole numbers a JSON double holds exactly */

/* A state written before augmentation existed has none. */
static bool read_augment(const cJSON *o, snug_augment *a) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "augment");
    snug_error ignored;
    *a = (snug_augment){0};
    if (!v) return true;
    return cJSON_IsString(v) && snug_parse_augment(v->valuestring, a, &ignored) == SNUG_OK;
}

static bool read_run(const cJSON *o, snug_train_config *c) {
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(o, "optim");
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(o, "schedule");
    double epochs, max_steps, max_nonfinite, warmup, ref;
    bool adamw, cosine;
    *c = snug_train_config_default();
    if (!whole(o, "epochs", 0, LONG_LIMIT, &epochs) || !whole(o, "max_steps", 0, LONG_LIMIT, &max_steps) ||
        !flag(o, "drop_last", &c->drop_last) || !flag(o, "shuffle", &c->shuffle) || !u64_text(o, "seed", &c->seed) ||
        !real(o, "clip_norm", &c->clip_norm) || !whole(o, "max_nonfinite", 0, 1e9, &max_nonfinite) ||
        !text_is(opt, "kind", "sgd", "adamw", &adamw) || !real(opt, "lr", &c->optim.lr) ||
        !real(opt, "momentum", &c->optim.momentum) || !flag(opt, "nesterov", &c->optim.nesterov) ||
        !real(opt, "weight_decay", &c->optim.weight_decay) || !real(opt, "beta1", &c->optim.beta1) ||
        !real(opt, "beta2", &c->optim.beta2) || !real(opt, "eps", &c->optim.eps) ||
        !text_is(sch, "kind", "constant", "cosine", &cosine) || !whole(sch, "warmup_steps", 0, LONG_LIMIT, &warmup) ||
        !real(sch, "min_lr_ratio", &c->schedule.min_lr_ratio) ||
        !flag(sch, "linear_scaling", &c->schedule.linear_scaling) ||
        !whole(sch, "reference_batch", 0, LONG_LIMIT, &ref))
        return false;
    c->epochs = (long)epochs;
    c->max_steps = (long)max_steps;
    c->max_nonfinite = (int)max_nonfinite;
    c->optim.kind = adamw ? SNUG_OPTIM_ADAMW : SNUG_OPTIM_SGD;
    c->schedule.kind = cosine ? SNUG_SCHEDULE_COSINE : SNUG_SCHEDULE_CONSTANT;
    c->schedule.warmup_steps = (long)warmup;
    c->schedule.reference_batch = (size_t)ref;
    return read_augment(o, &c->augment);
}

static bool read_counters(const cJSON *o, state_counters *k) {
    double step, epoch, window, run, seen, t;
    if (!whole(o, "step", 0, LONG_LIMIT, &step) || !u64_text(o, "windows", &k->windows) ||
        !whole(o, "epoch", 0, LONG_LIMIT, &epoch) || !whole(o, "window", 0, LONG_LIMIT, &window) ||
        !whole(o, "nonfinite_run", 0, 1e9, &run) || !whole(o, "samples_seen", 0, LONG_LIMIT, &seen) ||
        !whole(o, "optim_steps", 0, LONG_LIMIT, &t))
        return false;
    *k = (state_counters){.step = (long)step, .epoch = (long)epoch, .window = (long)window, .optim_steps = (long)t,
                          .windows = k->windows, .nonfinite_run = (int)run, .samples_seen = (size_t)seen};
    /* A state written before the training time was kept has none: its run's time then counts from the resume. */
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(o, "train_seconds");
    if (secs && !(cJSON_IsNumber(secs) && secs->valuedouble >= 0 && secs->valuedouble < 1e15)) return false;
    k->train_seconds = secs ? secs->valuedouble : 0;
    return true;
}

/* The metadata of an open file: it is a state of this version, and every field reads. */
static snug_status read_metadata(const st_file *sf, snug_state_info *info, state_counters *k, snug_error *err) {
    const char *text = st_metadata(sf, STATE_KEY);
    if (!text)
        return snug_fail(err, SNUG_E_FORMAT, "%s is a weights file, not a training state (no %s in its metadata)",
                         sf->path, STATE_KEY);
    cJSON *root = cJSON_Parse(text);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    double version, batch;
    bool ok = root && whole(root, "version", 0, 1e9, &version) && version == STATE_VERSION &&
                    cJSON_IsString(model) && strlen(model->valuestring) < sizeof info->model &&
                    whole(root, "batch", 1, LONG_LIMIT, &batch) &&
                    read_run(cJSON_GetObjectItemCaseSensitive(root, "run"), &info->run) &&
                    read_counters(cJSON_GetObjectItemCaseSensitive(root, "counters"), k);
    /* a state without "precision" ran in float32, the only precision there was */
    const cJSON *precision = cJSON_GetObjectItemCaseSensitive(root, "precision");
    const bool precision_ok = !precision || (cJSON_IsString(precision) &&
                                             snug_parse_precision(precision->valuestring, &info->precision, NULL) == SNUG_OK);
    if (!precision) info->precision = SNUG_PRECISION_FP32;
    ok = ok && precision_ok;
    if (ok) {
        snprintf(info->model, sizeof info->model, "%s", model->valuestring);
        info->batch = (size_t)batch;
        info->step = k->step;
        info->epoch = k->epoch;
    }
    cJSON_Delete(root);
    if (!ok)
        return snug_fail(err, SNUG_E_FORMAT, "%s: its %s metadata is not a snug training state of version %d (from "
                         "another version of snug, or damaged)", sf->path, STATE_KEY, STATE_VERSION);
    const char *extra = st_metadata(sf, STATE_EXTRA_KEY);
    info->extra = strdup(extra ? extra : "");
    return info->extra ? SNUG_OK : snug_fail(err, SNUG_E_OOM, "out of memory reading %s", sf->path);
}

snug_status state_read_info(const char *path, snug_state_info *info, state_counters *k, st_file *keep_open,
                            snug_error *err) {
    st_file sf;
    snug_status s = st_file_open(&sf, path, err);
    if (s == SNUG_OK) s = st_file_check_layout(&sf, err);
    if (s == SNUG_OK) s = read_metadata(&sf, info, k, err);
    if (s == SNUG_OK) snprintf(info->path, sizeof info->path, "%s", path);
    if (s == SNUG_OK && keep_open) *keep_open = sf;
    else st_file_close(&sf);
    return s;
}

snug_status snug_state_read(const char *path, snug_state_info *info, snug_error *err) {
    memset(info, 0, sizeof *info);
    state_counters k;
    snug_status s = state_read_info(path, info, &k, NULL, err);
    if (s != SNUG_OK) snug_state_info_free(info);
    return s;
}

void snug_state_info_free(snug_state_info *info) {
    free(info->extra);
    info->extra = NULL;
}

static void note_skipped(snug_state_info *info, const snug_error *why) {
    const size_t used = strlen(info->skipped);
    snprintf(info->skipped + used, sizeof info->skipped - used, "%s%s", used ? "; " : "", why->message);
}

snug_status snug_state_latest(const char *dir, snug_state_info *info, snug_error *err) {
    memset(info, 0, sizeof *info);
    uint64_t *v;
    const size_t n = state_list(dir, &v);
    if (n == 0) {
        free(v);
        return snug_fail(err, SNUG_E_IO, "'%s' holds no training state (no %s<N>%s file)", dir, STATE_PREFIX,
                         STATE_SUFFIX);
    }
    snug_status s = SNUG_E_FORMAT;
    for (size_t i = 0; i < n && s != SNUG_OK; i++) {
        char path[4096];
        state_path_of(dir, v[i], path, sizeof path);
        snug_error why = {0};
        state_counters k;
        s = state_read_info(path, info, &k, NULL, &why);
        if (s != SNUG_OK) note_skipped(info, &why);
    }
    free(v);
    if (s != SNUG_OK)
        snug_fail(err, SNUG_E_FORMAT, "no valid training state in '%s': %.900s", dir, info->skipped);
    return s;
}

/* Reading a run's state (state_save.c writes it): which state of a folder is the newest whole one, what it says
 * about its run, and the trainer continued from it. A state file is untrusted input like a weights file
 * (load.c checks the bytes, the checksum and the header); here the metadata's every field is checked too, and
 * nothing of the trainer changes until everything has been read into scratch memory. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "optim/optim.h"
#include "io/safetensors.h"
#include "io/state.h"
#include "train/trainer.h"

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

/* The counters the next step reads. */
typedef struct state_counters {
    long step, epoch, window, optim_steps;
    uint64_t windows;
    int nonfinite_run;
    size_t samples_seen;
} state_counters;

static bool read_counters(const cJSON *o, state_counters *k) {
    double step, epoch, window, run, seen, t;
    if (!whole(o, "step", 0, LONG_LIMIT, &step) || !u64_text(o, "windows", &k->windows) ||
        !whole(o, "epoch", 0, LONG_LIMIT, &epoch) || !whole(o, "window", 0, LONG_LIMIT, &window) ||
        !whole(o, "nonfinite_run", 0, 1e9, &run) || !whole(o, "samples_seen", 0, LONG_LIMIT, &seen) ||
        !whole(o, "optim_steps", 0, LONG_LIMIT, &t))
        return false;
    *k = (state_counters){.step = (long)step, .epoch = (long)epoch, .window = (long)window, .optim_steps = (long)t,
                          .windows = k->windows, .nonfinite_run = (int)run, .samples_seen = (size_t)seen};
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

static snug_status read_info(const char *path, snug_state_info *info, state_counters *k, st_file *keep_open,
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
    snug_status s = read_info(path, info, &k, NULL, err);
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
        s = read_info(path, info, &k, NULL, &why);
        if (s != SNUG_OK) note_skipped(info, &why);
    }
    free(v);
    if (s != SNUG_OK)
        snug_fail(err, SNUG_E_FORMAT, "no valid training state in '%s': %.900s", dir, info->skipped);
    return s;
}

/* The setting of the trainer that differs from the state's (those that define the run's result), or NULL. */
static const char *differs(const snug_trainer *tr, const snug_state_info *info, char *both, size_t len) {
    const snug_train_config *a = &tr->cfg, *b = &info->run;
#define SAME(field, fmt, cast)                                                                                      \
    if (a->field != b->field) {                                                                                     \
        snprintf(both, len, fmt " in the state, " fmt " in this run", (cast)b->field, (cast)a->field);                \
        return #field;                                                                                               \
    }
    if (tr->batch != info->batch) {
        snprintf(both, len, "%zu in the state, %zu in this run", info->batch, tr->batch);
        return "batch";
    }
    const snug_precision mine = tr->plan->variant.bf16 ? SNUG_PRECISION_BF16 : SNUG_PRECISION_FP32;
    if (mine != info->precision) {
        snprintf(both, len, "%s in the state, %s in this run", snug_precision_name(info->precision),
                 snug_precision_name(mine));
        return "precision";
    }
    SAME(seed, "%" PRIu64, uint64_t)
    char mine_aug[96], theirs_aug[96];
    snug_augment_format(&a->augment, mine_aug, sizeof mine_aug);
    if (strcmp(mine_aug, snug_augment_format(&b->augment, theirs_aug, sizeof theirs_aug)) != 0) {
        snprintf(both, len, "%.60s in the state, %.60s in this run", theirs_aug, mine_aug);
        return "augment";
    }
    SAME(shuffle, "%d", int)
    SAME(drop_last, "%d", int)
    SAME(clip_norm, "%g", double)
    SAME(optim.kind, "%d", int)
    SAME(optim.lr, "%g", double)
    SAME(optim.momentum, "%g", double)
    SAME(optim.nesterov, "%d", int)
    SAME(optim.weight_decay, "%g", double)
    SAME(optim.beta1, "%g", double)
    SAME(optim.beta2, "%g", double)
    SAME(optim.eps, "%g", double)
    SAME(schedule.kind, "%d", int)
    SAME(schedule.warmup_steps, "%ld", long)
    SAME(schedule.min_lr_ratio, "%g", double)
    SAME(schedule.linear_scaling, "%d", int)
    SAME(schedule.reference_batch, "%zu", size_t)
#undef SAME
    return NULL;
}

/* Every tensor of the state into scratch memory: parameters, buffers, optimizer state. */
static snug_status read_tensors(st_file *sf, const snug_trainer *tr, float *params, float *state, float *optim,
                                snug_error *err) {
    const snug_graph *g = tr->g;
    const int slots = optim_state_slots(&tr->cfg.optim);
    snug_status s = SNUG_OK;
    for (int i = 0; i < g->n_params && s == SNUG_OK; i++) {
        const graph_param *p = &g->params[i];
        s = st_file_read_param(sf, g, p, p->name, (p->buffer ? state : params) + p->offset, err);
        for (int k = 0; k < slots && s == SNUG_OK && !p->buffer; k++) {
            char name[STATE_NAME_MAX];
            snprintf(name, sizeof name, "optim.%s.%s", p->name, state_slot_name(tr->cfg.optim.kind, k));
            s = st_file_read_param(sf, g, p, name, optim + (size_t)k * g->param_numel + p->offset, err);
        }
    }
    return s;
}

static snug_status take_state(snug_trainer *tr, st_file *sf, const state_counters *k, snug_error *err) {
    const snug_graph *g = tr->g;
    const size_t np = g->param_numel, ns = g->state_numel, no = (size_t)optim_state_slots(&tr->cfg.optim) * np;
    float *scratch = malloc((np + ns + no + 1) * sizeof *scratch);
    if (!scratch) return snug_fail(err, SNUG_E_OOM, "out of memory: the system refused scratch space for a state");
    snug_status s = read_tensors(sf, tr, scratch, scratch + np, scratch + np + ns, err);
    if (s == SNUG_OK) { /* everything read: now the trainer changes */
        memcpy(tr->x.params, scratch, np * sizeof *scratch);
        if (ns) memcpy(tr->x.state, scratch + np, ns * sizeof *scratch);
        if (no) memcpy(tr->x.optim_state, scratch + np + ns, no * sizeof *scratch);
        tr->step = k->step;
        tr->windows = k->windows;
        tr->epoch = k->epoch;
        tr->window = k->window;
        tr->nonfinite_run = k->nonfinite_run;
        tr->samples_seen = k->samples_seen;
        tr->opt.t = k->optim_steps;
        exec_weights_changed(&tr->x);
    }
    free(scratch);
    return s;
}

snug_status snug_trainer_load_state(snug_trainer *tr, const char *path, snug_error *err) {
    snug_state_info info = {0};
    state_counters k;
    st_file sf = {0};
    snug_status s = read_info(path, &info, &k, &sf, err);
    char both[160];
    const char *field = s == SNUG_OK ? differs(tr, &info, both, sizeof both) : NULL;
    if (field)
        s = snug_fail(err, SNUG_E_ARG, "%s: the run's %s differs (%s): a state continues the run that wrote it",
                      path, field, both);
    else if (s == SNUG_OK && strcmp(info.model, tr->g->name) != 0)
        s = snug_fail(err, SNUG_E_ARG, "%s is a state of model '%s', not of '%s'", path, info.model, tr->g->name);
    if (s == SNUG_OK) s = take_state(tr, &sf, &k, err);
    st_file_close(&sf);
    snug_state_info_free(&info);
    return s;
}

/* Writing a run's state (train/state_save.c gathers it from the trainer): in the metadata, as JSON text, the
 * batch, the run's configuration and every counter the next step reads (optimizer steps, windows: the dropout key, the epoch and its next window:
 * the shuffle, consecutive skips, AdamW's step count). The RNG needs no state of its own: every draw is a
 * function of the seed and those counters.
 *
 * In a state folder each state is one file, state-<windows>.safetensors (windows zero-padded, so that the names
 * sort by age), written beside as .state-<windows>.tmp, synced, renamed, and the folder synced; then the oldest
 * beyond `keep` are removed, so the newest `keep` states are always whole on disk. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/state.h"

const char *state_slot_name(snug_optim_kind kind, int slot) {
    if (kind == SNUG_OPTIM_ADAMW) return slot == 0 ? "exp_avg" : "exp_avg_sq";
    return "momentum_buffer";
}

static bool add_run(cJSON *o, const snug_train_config *c) {
    char seed[32], augment[96];
    snprintf(seed, sizeof seed, "%" PRIu64, c->seed);
    if (!cJSON_AddStringToObject(o, "augment", snug_augment_format(&c->augment, augment, sizeof augment)))
        return false;
    cJSON *opt = cJSON_AddObjectToObject(o, "optim"), *sch = cJSON_AddObjectToObject(o, "schedule");
    return opt && sch && cJSON_AddNumberToObject(o, "epochs", (double)c->epochs) &&
           cJSON_AddNumberToObject(o, "max_steps", (double)c->max_steps) &&
           cJSON_AddBoolToObject(o, "drop_last", c->drop_last) && cJSON_AddBoolToObject(o, "shuffle", c->shuffle) &&
           cJSON_AddStringToObject(o, "seed", seed) && cJSON_AddNumberToObject(o, "clip_norm", c->clip_norm) &&
           cJSON_AddNumberToObject(o, "max_nonfinite", c->max_nonfinite) &&
           cJSON_AddStringToObject(opt, "kind", c->optim.kind == SNUG_OPTIM_ADAMW ? "adamw" : "sgd") &&
           cJSON_AddNumberToObject(opt, "lr", c->optim.lr) &&
           cJSON_AddNumberToObject(opt, "momentum", c->optim.momentum) &&
           cJSON_AddBoolToObject(opt, "nesterov", c->optim.nesterov) &&
           cJSON_AddNumberToObject(opt, "weight_decay", c->optim.weight_decay) &&
           cJSON_AddNumberToObject(opt, "beta1", c->optim.beta1) &&
           cJSON_AddNumberToObject(opt, "beta2", c->optim.beta2) &&
           cJSON_AddNumberToObject(opt, "eps", c->optim.eps) &&
           cJSON_AddStringToObject(sch, "kind", c->schedule.kind == SNUG_SCHEDULE_COSINE ? "cosine" : "constant") &&
           cJSON_AddNumberToObject(sch, "warmup_steps", (double)c->schedule.warmup_steps) &&
           cJSON_AddNumberToObject(sch, "min_lr_ratio", c->schedule.min_lr_ratio) &&
           cJSON_AddBoolToObject(sch, "linear_scaling", c->schedule.linear_scaling) &&
           cJSON_AddNumberToObject(sch, "reference_batch", (double)c->schedule.reference_batch);
}

static bool add_counters(cJSON *o, const state_counters *k) {
    char windows[32];
    snprintf(windows, sizeof windows, "%" PRIu64, k->windows);
    return cJSON_AddNumberToObject(o, "step", (double)k->step) && cJSON_AddStringToObject(o, "windows", windows) &&
           cJSON_AddNumberToObject(o, "epoch", (double)k->epoch) &&
           cJSON_AddNumberToObject(o, "window", (double)k->window) &&
           cJSON_AddNumberToObject(o, "nonfinite_run", k->nonfinite_run) &&
           cJSON_AddNumberToObject(o, "samples_seen", (double)k->samples_seen) &&
           cJSON_AddNumberToObject(o, "train_seconds", k->train_seconds) &&
           cJSON_AddNumberToObject(o, "optim_steps", (double)k->optim_steps);
}

char *state_text(const state_meta *m) {
    cJSON *root = cJSON_CreateObject();
    cJSON *run = root ? cJSON_AddObjectToObject(root, "run") : NULL;
    cJSON *counters = root ? cJSON_AddObjectToObject(root, "counters") : NULL;
    bool ok = run && counters && cJSON_AddNumberToObject(root, "version", STATE_VERSION) &&
              cJSON_AddStringToObject(root, "model", m->model) &&
              cJSON_AddNumberToObject(root, "batch", (double)m->batch) &&
              cJSON_AddStringToObject(root, "precision", m->bf16 ? "bf16" : "fp32") &&
              add_run(run, m->run) &&
              add_counters(counters, &m->counters);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

void state_path(const char *dir, uint64_t windows, bool tmp, char *buf, size_t len) {
    snprintf(buf, len, tmp ? "%s/.%s%012" PRIu64 ".tmp" : "%s/%s%012" PRIu64 "%s", dir, STATE_PREFIX, windows,
             STATE_SUFFIX);
}

static int by_number_desc(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

size_t state_list(const char *dir, uint64_t **out) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        uint64_t v;
        if (!state_name_number(e->d_name, &v)) continue;
        if (n == cap) {
            uint64_t *p = realloc(*out, (cap = cap ? 2 * cap : 16) * sizeof *p);
            if (!p) break;
            *out = p;
        }
        (*out)[n++] = v;
    }
    closedir(d);
    if (n) qsort(*out, n, sizeof **out, by_number_desc);
    return n;
}

bool state_name_number(const char *name, uint64_t *v) {
    const size_t lp = strlen(STATE_PREFIX), ls = strlen(STATE_SUFFIX), n = strlen(name);
    if (n != lp + 12 + ls || strncmp(name, STATE_PREFIX, lp) != 0 || strcmp(name + lp + 12, STATE_SUFFIX) != 0)
        return false;
    uint64_t x = 0;
    for (size_t i = lp; i < lp + 12; i++) {
        if (name[i] < '0' || name[i] > '9') return false;
        x = 10 * x + (uint64_t)(name[i] - '0');
    }
    *v = x;
    return true;
}

void state_path_of(const char *dir, uint64_t windows, char *buf, size_t len) {
    state_path(dir, windows, false, buf, len);
}

void state_prune(const char *dir, int keep) {
    uint64_t *v;
    const size_t n = state_list(dir, &v);
    char path[4096];
    for (size_t i = (size_t)keep; i < n; i++) {
        state_path(dir, v[i], false, path, sizeof path);
        remove(path);
    }
    free(v);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "." STATE_PREFIX, strlen("." STATE_PREFIX)) == 0 && len > 4 &&
            strcmp(e->d_name + len - 4, ".tmp") == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove(path);
        }
    }
    if (d) closedir(d);
}

/* mkdir -p: the folder and every missing folder above it; false with errno set when one cannot be made. */
static bool make_folders(const char *dir) {
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return errno = ENAMETOOLONG, false;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (stat(path, &st) != 0 && mkdir(path, 0777) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return stat(path, &st) == 0 || mkdir(path, 0777) == 0 || errno == EEXIST;
}

snug_status state_folder(const char *dir, snug_error *err) {
    struct stat st;
    if (!make_folders(dir))
        return snug_fail(err, SNUG_E_IO, "cannot create the state folder '%s': %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return snug_fail(err, SNUG_E_IO, "'%s' is not a folder: the state is kept in a folder of its own", dir);
    return SNUG_OK;
}

/* `snug train --state DIR` and `--resume DIR` (cli/resume.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/resume.h"

#include <cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

#define MODEL_TEXT_MAX (16u << 20)

/* The whole file as text, or NULL. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text = f ? calloc(1, MODEL_TEXT_MAX + 1) : NULL;
    if (text) fread(text, 1, MODEL_TEXT_MAX, f);
    if (f) fclose(f);
    return text;
}

char *cli_state_extra(int argc, char **argv, const char *model, size_t train_samples) {
    cJSON *root = cJSON_CreateObject(), *args = root ? cJSON_AddArrayToObject(root, "argv") : NULL;
    bool ok = args && cJSON_AddNumberToObject(root, "train_samples", (double)train_samples) &&
              cJSON_AddStringToObject(root, "model", model);
    for (int i = 1; ok && i < argc; i++) ok = cJSON_AddItemToArray(args, cJSON_CreateString(argv[i]));
    char *model_text = snug_model_is_file(model) ? read_text(model) : NULL;
    if (ok && model_text) ok = cJSON_AddStringToObject(root, "model_text", model_text) != NULL;
    free(model_text);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* The stored flags of the run, then the flags given now: the later of each wins, as on one command line. */
static snug_status merged_argv(const cJSON *stored, int argc, char **argv, cli_resume *r, snug_error *err) {
    const int n = cJSON_GetArraySize(stored);
    r->argv = calloc((size_t)n + (size_t)argc + 1, sizeof *r->argv);
    if (!r->argv) return snug_fail(err, SNUG_E_OOM, "out of memory rebuilding the run's flags");
    r->argv[r->argc++] = strdup(argv[0]);
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(stored, i);
        if (!cJSON_IsString(a))
            return snug_fail(err, SNUG_E_FORMAT, "%s: the run's flags stored with it are damaged", r->info.path);
        /* the run goes on in the folder resumed, wherever the state was written (a copied or moved folder) */
        if (strcmp(a->valuestring, "--state") == 0) i++;
        else if (strncmp(a->valuestring, "--state=", 8) != 0) r->argv[r->argc++] = strdup(a->valuestring);
    }
    for (int i = 1; i < argc; i++) r->argv[r->argc++] = strdup(argv[i]);
    for (int i = 0; i < r->argc; i++)
        if (!r->argv[i]) return snug_fail(err, SNUG_E_OOM, "out of memory rebuilding the run's flags");
    return SNUG_OK;
}

snug_status cli_resume_open(const char *dir, int argc, char **argv, cli_resume *r, snug_error *err) {
    memset(r, 0, sizeof *r);
    snug_status s = snug_state_latest(dir, &r->info, err);
    if (s != SNUG_OK) return s;
    cJSON *extra = cJSON_Parse(r->info.extra);
    const cJSON *stored = cJSON_GetObjectItemCaseSensitive(extra, "argv");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(extra, "model_text");
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(extra, "train_samples");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(extra, "model");
    if (!cJSON_IsArray(stored) || !cJSON_IsNumber(samples))
        s = snug_fail(err, SNUG_E_FORMAT, "%s holds no command line of `snug train`: resume it from a program "
                      "through the library (snug_trainer_load_state)", r->info.path);
    if (s == SNUG_OK) s = merged_argv(stored, argc, argv, r, err);
    if (s == SNUG_OK && cJSON_IsString(text) && cJSON_IsString(model) &&
        (!(r->model_text = strdup(text->valuestring)) || !(r->model = strdup(model->valuestring))))
        s = snug_fail(err, SNUG_E_OOM, "out of memory reading %s", r->info.path);
    if (s == SNUG_OK) r->train_samples = (size_t)samples->valuedouble;
    cJSON_Delete(extra);
    return s;
}

void cli_resume_close(cli_resume *r) {
    for (int i = 0; i < r->argc; i++) free(r->argv[i]);
    free(r->argv);
    free(r->model_text);
    free(r->model);
    snug_state_info_free(&r->info);
    memset(r, 0, sizeof *r);
}

/* The flag that sets each setting the library compares (snug_trainer_load_state names the setting). */
static const struct {
    const char *setting, *flag;
} flag_of[] = {
    {"batch", "--batch"}, {"seed", "--seed"}, {"shuffle", "--shuffle"}, {"drop_last", "--drop-last"},
    {"clip_norm", "--clip"}, {"optim.kind", "--optim"}, {"optim.lr", "--lr"}, {"optim.momentum", "--momentum"},
    {"optim.nesterov", "--nesterov"}, {"optim.weight_decay", "--weight-decay"}, {"optim.beta1", "--beta1"},
    {"optim.beta2", "--beta2"}, {"optim.eps", "--eps"}, {"schedule.kind", "--schedule"},
    {"schedule.warmup_steps", "--warmup"}, {"schedule.min_lr_ratio", "--min-lr-ratio"},
    {"schedule.linear_scaling", "--lr-scaling"}, {"schedule.reference_batch", "--ref-batch"},
    {"precision", "--precision"},
};

snug_status cli_resume_load(const cli_resume *r, snug_trainer *tr, size_t train_samples, snug_error *err) {
    if (train_samples != r->train_samples)
        return snug_fail(err, SNUG_E_ARG, "the training set has %zu samples but the run of %s trained on %zu: a "
                         "resumed run reads the same data (--data, --data-dir, --train-samples)", train_samples,
                         r->info.path, r->train_samples);
    snug_status s = snug_trainer_load_state(tr, r->info.path, err);
    for (size_t i = 0; s == SNUG_E_ARG && i < sizeof flag_of / sizeof flag_of[0]; i++) {
        char setting[64];
        snprintf(setting, sizeof setting, "run's %s differs", flag_of[i].setting);
        if (strstr(err->message, setting))
            snug_error_append(err, ". %s defines the result: leave it out to continue the run as it was, or start a "
                              "new run with another --state folder", flag_of[i].flag);
    }
    return s;
}

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) {
    if (stop_signal && sig == SIGINT) _exit(130); /* a second Ctrl-C: at once; the last state is whole */
    stop_signal = sig;
}

volatile sig_atomic_t *cli_stop_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &stop_signal;
}

int cli_stopped(const char *dir) {
    const int sig = stop_signal;
    fflush(stdout);
    fprintf(stderr, "snug: stopped by %s after the step in progress; the state is in %s. Resume with: snug train "
                    "--resume %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM", dir, dir);
    return 128 + sig;
}

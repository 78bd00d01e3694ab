/* Prediction = reality: for each built-in model, checkpoint policy and micro-batch, the bytes the trainer's
 * allocator holds equal the plan, and the process's peak resident memory grows by the plan plus a small fixed
 * overhead. Each configuration runs in a fresh child process (fork), so peaks do not carry over: the child
 * reads VmHWM from /proc/self/status before creating the trainer and after three optimizer steps.
 *
 * usage: bench_memory [markdown-output-file] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "snug.h"

static size_t vm_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t v = 0, n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) v = strtoull(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

typedef struct measure {
    size_t planned, held;
    long long rss_growth; /* bytes */
} measure;

/* Runs in the child: plan, train three steps, measure. */
static measure measure_one(const char *model, snug_checkpoint_policy pol, size_t m) {
    measure r = {0};
    snug_graph *g = NULL;
    if (snug_model_builtin(model, &g, NULL) != SNUG_OK) return r;
    size_t n = 256, numel = (size_t)n * 784;
    float *x = malloc(numel * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < numel; i++) x[i] = (float)(i % 255) / 128.0f - 1.0f;
    for (size_t i = 0; i < n; i++) y[i] = (int32_t)(i % 10);
    snug_dataset *ds;
    snug_dataset_from_memory(x, y, n, 1, 28, 28, 10, &ds, NULL);
    free(x);
    free(y);
    snug_train_config cfg = snug_train_config_default();
    snug_plan_request req = snug_plan_request_default(256);
    req.micro_batch = m;
    req.checkpoint = pol;
    snug_plan *p = NULL;
    snug_plan_summary s;
    if (snug_plan_new(g, &req, &p, NULL, NULL) != SNUG_OK) return r;
    snug_plan_summarize(p, &s);
    r.planned = s.total;
    size_t before = vm_kib("VmHWM:");
    snug_trainer *tr;
    if (snug_trainer_new(p, &cfg, &tr, NULL) != SNUG_OK) return r;
    size_t idx[256];
    for (size_t i = 0; i < 256; i++) idx[i] = i;
    snug_step_stats st;
    for (int i = 0; i < 3; i++) snug_trainer_step(tr, ds, idx, 256, &st, NULL);
    snug_mem_report rep;
    snug_trainer_memory(tr, &rep);
    r.held = rep.peak;
    r.rss_growth = (long long)(vm_kib("VmHWM:") - before) * 1024;
    return r;
}

static measure in_child(const char *model, snug_checkpoint_policy pol, size_t m) {
    int fd[2];
    measure r = {0};
    if (pipe(fd) != 0) return r;
    pid_t pid = fork();
    if (pid == 0) {
        measure c = measure_one(model, pol, m);
        ssize_t w = write(fd[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    if (read(fd[0], &r, sizeof r) != (ssize_t)sizeof r) memset(&r, 0, sizeof r);
    waitpid(pid, NULL, 0);
    close(fd[0]);
    close(fd[1]);
    return r;
}

int main(int argc, char **argv) {
    FILE *out = argc > 1 ? fopen(argv[1], "w") : stdout;
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    snug_system_info info;
    snug_system_info_get(&info);
    fprintf(out, "# Planned memory vs measured memory\n\nBatch 256, three optimizer steps, %d threads. \"held\" is what the "
                 "engine's allocator holds (its peak); \"RSS growth\" is the process's peak resident set after the "
                 "steps minus before the trainer was created.\n\n", info.threads);
    fprintf(out, "| model | checkpoint | micro-batch | planned (MiB) | held (MiB) | held = planned | RSS growth (MiB) | RSS - planned (MiB) |\n");
    fprintf(out, "|---|---|---:|---:|---:|---|---:|---:|\n");
    static const char *const models[] = {"mlp", "cnn", "resmlp"};
    static const snug_checkpoint_policy pols[] = {{SNUG_CHECKPOINT_NONE, 0}, {SNUG_CHECKPOINT_SQRT, 0}};
    static const size_t ms[] = {1, 16, 256};
    int bad = 0;
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 3; j++) {
                measure r = in_child(models[i], pols[k], ms[j]);
                if (!r.planned) continue;
                char pb[32];
                bad |= r.held != r.planned;
                fprintf(out, "| %s | %s | %zu | %.2f | %.2f | %s | %.2f | %+.2f |\n", models[i],
                        snug_format_checkpoint(pols[k], pb, sizeof pb), ms[j], r.planned / 1048576.0,
                        r.held / 1048576.0, r.held == r.planned ? "yes" : "NO", r.rss_growth / 1048576.0,
                        (r.rss_growth - (long long)r.planned) / 1048576.0);
            }
    if (out != stdout) fclose(out);
    return bad;
}

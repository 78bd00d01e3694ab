/* What keeping a run's state costs: for each benchmark workload at its batch, the size of a state file and the
 * time to write one (snug_trainer_save_state: every tensor with its checksum, synced to disk, renamed, the folder
 * synced), against the time of an optimizer step, so that the share of training time a state every N steps takes
 * is (write time) / (N x step time).
 *
 *   ./build/bench/bench_state [DIR] [RESULTS.md]     DIR: where the states are written (default /tmp); the
 *                                                    figures depend on that disk
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "snug.h"

typedef struct workload {
    const char *model;
    size_t batch;
    snug_optim_kind optim;
    size_t classes, targets;  /* of the loss: per sample, per pixel or per token */
} workload;

static const workload workloads[] = {
    {"mlp", 256, SNUG_OPTIM_SGD, 10, 1},          {"cnn", 64, SNUG_OPTIM_SGD, 10, 1},
    {"resnet20", 128, SNUG_OPTIM_SGD, 10, 1},     {"unet", 8, SNUG_OPTIM_ADAMW, 2, 256 * 256},
    {"gpt", 8, SNUG_OPTIM_ADAMW, 256, 256},
};

#define WRITES 5
#define STEPS 3

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Random inputs of the model's input shape (token ids below 256 for a sequence input) and targets in range. */
static snug_dataset *synthetic(const snug_graph *g, size_t n, size_t classes, size_t targets) {
    const snug_shape s = snug_tensor_shape(g, 0);
    size_t numel = 1;
    for (int d = 0; d < s.rank; d++) numel *= s.dims[d];
    float *x = malloc(n * numel * sizeof *x);
    int32_t *y = malloc(n * targets * sizeof *y);
    if (!x || !y) return NULL;
    for (size_t i = 0; i < n * numel; i++) x[i] = s.rank == 1 ? (float)(rand() % 256) : (float)rand() / RAND_MAX - 0.5f;
    for (size_t i = 0; i < n * targets; i++) y[i] = (int32_t)((size_t)rand() % classes);
    snug_dataset *ds = NULL;
    snug_dataset_from_arrays(x, s, y, targets, n, classes, &ds, NULL);
    free(x);
    free(y);
    return ds;
}

static int measure(const workload *w, const char *dir, FILE *out) {
    snug_error err = {0};
    snug_graph *g = NULL;
    snug_plan *plan = NULL;
    snug_trainer *tr = NULL;
    snug_dataset *ds = NULL;
    snug_train_config cfg = snug_train_config_default();
    cfg.optim.kind = w->optim;
    if (w->optim == SNUG_OPTIM_ADAMW) cfg.optim.lr = 1e-3f;
    snug_plan_request req = snug_plan_request_default(w->batch);
    req.optim = cfg.optim;
    if (snug_model_builtin(w->model, &g, &err) != SNUG_OK || snug_plan_new(g, &req, &plan, NULL, &err) != SNUG_OK ||
        snug_trainer_new(plan, &cfg, &tr, &err) != SNUG_OK) {
        fprintf(stderr, "bench_state: %s: %s\n", w->model, err.message);
        return 1;
    }
    ds = synthetic(g, w->batch, w->classes, w->targets);
    size_t *idx = malloc(w->batch * sizeof *idx);
    for (size_t i = 0; i < w->batch; i++) idx[i] = i;
    double step[STEPS], write[WRITES];
    snug_step_stats st;
    snug_trainer_step(tr, ds, idx, w->batch, &st, NULL); /* warm */
    for (int i = 0; i < STEPS; i++) {
        const double t0 = now();
        snug_trainer_step(tr, ds, idx, w->batch, &st, NULL);
        step[i] = now() - t0;
    }
    char path[4096] = "";
    for (int i = 0; i < WRITES; i++) {
        const double t0 = now();
        if (snug_trainer_save_state(tr, dir, 1, NULL, path, sizeof path, &err) != SNUG_OK) {
            fprintf(stderr, "bench_state: %s\n", err.message);
            return 1;
        }
        write[i] = now() - t0;
    }
    struct stat sb;
    stat(path, &sb);
    remove(path);
    qsort(step, STEPS, sizeof *step, by_value);
    qsort(write, WRITES, sizeof *write, by_value);
    const double s = step[STEPS / 2], wr = write[WRITES / 2];
    fprintf(out, "| %-8s | %5zu | %-5s | %9.1f | %10.1f | %8.1f | %6.2f%% |\n", w->model, w->batch,
            w->optim == SNUG_OPTIM_ADAMW ? "adamw" : "sgd", (double)sb.st_size / (1 << 20), 1e3 * wr, 1e3 * s,
            100.0 * wr / (100.0 * s));
    free(idx);
    snug_dataset_free(ds);
    snug_trainer_free(tr);
    snug_plan_free(plan);
    snug_graph_free(g);
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char folder[4096];
    snprintf(folder, sizeof folder, "%s/snug-bench-state-%d", dir, (int)getpid());
    FILE *out = argc > 2 ? fopen(argv[2], "w") : stdout;
    if (!out) return 1;
    snug_system_info info;
    snug_system_info_get(&info);
    fprintf(out, "# The training state's cost\n\n`./build/bench/bench_state %s`: %d threads, %s; states written to %s "
                 "(median of %d writes; a step: median of %d).\n\n", dir, info.threads, info.simd, dir, WRITES, STEPS);
    fprintf(out, "| workload | batch | optim | state MiB | write (ms) | step (ms) | every 100 steps |\n");
    fprintf(out, "|---|---:|---|---:|---:|---:|---:|\n");
    int rc = 0;
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) rc |= measure(&workloads[i], folder, out);
    rmdir(folder);
    if (out != stdout) fclose(out);
    return rc;
}

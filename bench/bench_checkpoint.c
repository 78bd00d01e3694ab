/* Checkpointing on a deep chain: a 32-block residual MLP (blocks x + dropout(fc2(relu(fc1(x)))), width 256,
 * hidden 1024), batch 64 in one micro-batch, trained with no checkpointing, with sqrt, and with auto under a
 * budget of twice the sqrt plan's activations. Prints, per policy: the activation arena, the step time (median
 * of repeated steps) and the recompute share of the step's FLOPs, and the ratios to no checkpointing.
 *
 * usage: bench_checkpoint [steps] [markdown-output-file] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snug.h"

#define BLOCKS 32
#define WIDTH 256
#define BATCH 64

static snug_graph *deep_chain(void) {
    snug_graph *g = snug_graph_new("resmlp-32x256");
    snug_tensor x = snug_linear(g, "in", snug_flatten(g, "flat", snug_input(g, "input", 1, 28, 28)), WIDTH);
    for (int b = 0; b < BLOCKS; b++) {
        char n[5][32];
        static const char *const part[5] = {"fc1", "relu", "fc2", "drop", "add"};
        for (int i = 0; i < 5; i++) snprintf(n[i], sizeof n[i], "b%d.%s", b, part[i]);
        snug_tensor h = snug_relu(g, n[1], snug_linear(g, n[0], x, 4 * WIDTH));
        h = snug_dropout(g, n[3], snug_linear(g, n[2], h, WIDTH), 0.1f);
        x = snug_add(g, n[4], x, h);
    }
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", x, 10));
    return g;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct result {
    const char *name;
    char resolved[64];
    size_t arena, total;
    double ms, recompute_pct;
} result;

static int run(snug_graph *g, const snug_dataset *ds, snug_checkpoint_policy pol, size_t budget, int steps,
               result *r) {
    snug_train_config cfg = snug_train_config_default();
    cfg.optim.lr = 0.01f;
    snug_plan_request req = snug_plan_request_default(BATCH);
    req.checkpoint = pol;
    req.budget = budget;
    req.optim = cfg.optim;
    snug_error err;
    snug_plan *p = NULL;
    snug_trainer *tr = NULL;
    if (snug_plan_new(g, &req, &p, NULL, &err) != SNUG_OK || snug_trainer_new(p, &cfg, &tr, &err) != SNUG_OK) {
        fprintf(stderr, "bench_checkpoint: %s\n", err.message);
        snug_plan_free(p);
        return 1;
    }
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    r->arena = s.activation_peak;
    r->total = s.total;
    r->recompute_pct = 100.0 * s.recompute_flops / s.step_flops;
    char pb[32];
    snprintf(r->resolved, sizeof r->resolved, "%s%s, %zu segments", snug_format_checkpoint(s.policy, pb, sizeof pb),
             s.selective && s.policy.kind != SNUG_CHECKPOINT_CHEAP ? " selective" : "", s.segments);
    size_t idx[BATCH];
    double *t = malloc((size_t)steps * sizeof *t);
    snug_step_stats st;
    for (int i = -2; i < steps; i++) { /* two warm-up steps */
        for (size_t j = 0; j < BATCH; j++) idx[j] = ((size_t)(i + 2) * BATCH + j) % 1024;
        double t0 = now();
        snug_trainer_step(tr, ds, idx, BATCH, &st, NULL);
        if (i >= 0) t[i] = now() - t0;
    }
    qsort(t, (size_t)steps, sizeof *t, by_value);
    r->ms = 1e3 * t[steps / 2];
    free(t);
    snug_trainer_free(tr);
    snug_plan_free(p);
    return 0;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    if (steps < 1) steps = 20;
    snug_graph *g = deep_chain();
    float *x = malloc((size_t)1024 * 784 * sizeof *x);
    int32_t *y = malloc(1024 * sizeof *y);
    for (size_t i = 0; i < (size_t)1024 * 784; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (size_t i = 0; i < 1024; i++) y[i] = (int32_t)(i % 10);
    snug_dataset *ds;
    snug_dataset_from_memory(x, y, 1024, 1, 28, 28, 10, &ds, NULL);
    free(x);
    free(y);

    result r[3] = {{.name = "none"}, {.name = "sqrt"}, {.name = "auto (budget: 2x sqrt activations)"}};
    snug_system_info info;
    snug_system_info_get(&info);
    if (run(g, ds, (snug_checkpoint_policy){SNUG_CHECKPOINT_NONE, 0}, 0, steps, &r[0]) ||
        run(g, ds, (snug_checkpoint_policy){SNUG_CHECKPOINT_SQRT, 0}, 0, steps, &r[1]))
        return 1;
    size_t budget = r[1].total + r[1].arena; /* the sqrt plan with its activation arena doubled */
    if (run(g, ds, (snug_checkpoint_policy){SNUG_CHECKPOINT_AUTO, 0}, budget, steps, &r[2])) return 1;

    FILE *out = argc > 2 ? fopen(argv[2], "w") : stdout;
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    fprintf(out, "# Checkpointing a deep chain\n\n32-block residual MLP (width 256, hidden 1024, dropout 0.1, %d "
                 "layers), batch %d in one micro-batch, median of %d steps; %d threads, %s, BLAS kernel %s.\n\n",
            BLOCKS * 5 + 2, BATCH, steps, info.threads, info.simd, info.blas_kernel);
    fprintf(out, "| policy | resolved | activations (MiB) | vs none | step (ms) | vs none | recompute (%% of step FLOPs) |\n");
    fprintf(out, "|---|---|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < 3; i++)
        fprintf(out, "| %s | %s | %.2f | %.2fx smaller | %.1f | %+.0f%% | %.1f |\n", r[i].name, r[i].resolved,
                (double)r[i].arena / (1 << 20), (double)r[0].arena / (double)r[i].arena, r[i].ms,
                100.0 * (r[i].ms / r[0].ms - 1), r[i].recompute_pct);
    if (out != stdout) fclose(out);
    snug_dataset_free(ds);
    snug_graph_free(g);
    return 0;
}

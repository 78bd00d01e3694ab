/* Planning time against depth, through the public API: ReLU chains (input `image 4 1 1`, n ReLUs, flatten,
 * linear(10), loss) of 2,500, 10,000 and 100,000 layers, in which every ReLU output lives until its backward, so
 * the buffers live at once grow with n. For each depth:
 *   - one plan: snug_plan_new at micro-batch 1, checkpoint none;
 *   - the table: that plan and its candidates (snug_plan_set_new: micro-batches 1, 2, 4, 8 under none, cheap
 *     and sqrt), what `snug plan --batch 8 --micro-batch 1` computes;
 *   - the table with a budget: micro-batch and policy chosen for a budget, then the candidates with auto
 *     among them, what `snug plan --batch 8 --mem BUDGET` computes. The budget lies halfway between the
 *     sqrt and the none plan of the whole batch, so that the choice needs recompute.
 * Times are seconds of this process's CPU (planning runs on one thread), the best of up to three runs (one
 * where a run takes over a second), and the wall-clock seconds of that run.
 *
 * usage: bench_plan_time [OUT.md [largest-depth]]   (the table goes to stdout, and to OUT.md when given and not "") */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "snug.h"

#define BATCH 8

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static snug_graph *relu_chain(size_t layers) {
    snug_graph *g = snug_graph_new("relu-chain");
    snug_tensor x = snug_input(g, "input", 4, 1, 1);
    char name[32];
    for (size_t i = 0; i < layers; i++) {
        snprintf(name, sizeof name, "r%zu", i);
        x = snug_relu(g, name, x);
    }
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", snug_flatten(g, "flat", x), 10));
    return g;
}

typedef enum task { ONE_PLAN, TABLE, TABLE_BUDGET, N_TASKS } task;

static snug_plan_request request_for(task t, size_t budget) {
    snug_plan_request req = snug_plan_request_default(BATCH);
    req.threads = 2; /* the plan's workspace only; fixed so that figures compare across machines */
    req.micro_batch = t == TABLE_BUDGET ? SNUG_MICRO_BATCH_AUTO : 1;
    if (t == TABLE_BUDGET) {
        req.budget = budget;
        req.checkpoint = (snug_checkpoint_policy){SNUG_CHECKPOINT_AUTO, 0};
    }
    return req;
}

/* Plans g for task t; *total: the chosen plan's bytes. Returns 0, or 1 after printing why not. */
static int plan_once(const snug_graph *g, task t, size_t budget, size_t *total) {
    const snug_plan_request req = request_for(t, budget);
    snug_plan *p = NULL;
    snug_plan_set *set = NULL;
    snug_error err;
    snug_status s = snug_plan_new(g, &req, &p, NULL, &err);
    if (s == SNUG_OK && t != ONE_PLAN) s = snug_plan_set_new(p, &set, &err); /* the set owns p, even on failure */
    if (s != SNUG_OK) {
        fprintf(stderr, "bench_plan_time: %s\n", err.message);
        if (t == ONE_PLAN) snug_plan_free(p);
        return 1;
    }
    snug_plan_summary sum;
    snug_plan_summarize(set ? snug_plan_set_at(set, snug_plan_set_chosen(set)) : p, &sum);
    *total = sum.total;
    if (set) snug_plan_set_free(set);
    else snug_plan_free(p);
    return 0;
}

typedef struct timing {
    double cpu, wall;
} timing;

static int time_best(const snug_graph *g, task t, size_t budget, timing *best) {
    for (int r = 0; r < 3; r++) {
        const double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        size_t total;
        if (plan_once(g, t, budget, &total)) return 1;
        const timing now = {clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0, clock_s(CLOCK_MONOTONIC) - w0};
        if (r == 0 || now.cpu < best->cpu) *best = now;
        if (now.cpu > 1.0) break;
    }
    return 0;
}

/* Halfway between the whole batch's sqrt plan and its none plan. */
static int budget_for(const snug_graph *g, size_t *budget) {
    size_t totals[2];
    for (int k = 0; k < 2; k++) {
        snug_plan_request req = request_for(ONE_PLAN, 0);
        req.micro_batch = BATCH;
        req.checkpoint = (snug_checkpoint_policy){k ? SNUG_CHECKPOINT_SQRT : SNUG_CHECKPOINT_NONE, 0};
        snug_plan *p;
        snug_error err;
        if (snug_plan_new(g, &req, &p, NULL, &err) != SNUG_OK) {
            fprintf(stderr, "bench_plan_time: %s\n", err.message);
            return 1;
        }
        snug_plan_summary sum;
        snug_plan_summarize(p, &sum);
        totals[k] = sum.total;
        snug_plan_free(p);
    }
    *budget = totals[1] + (totals[0] - totals[1]) / 2;
    return 0;
}

static void print_header(FILE *out, const char *machine) {
    fprintf(out, "# Planning time\n\n");
    fprintf(out, "ReLU chains (every output kept until its backward), batch %d; seconds of CPU, the best of up to "
            "3 runs (wall-clock in brackets). Machine: %s.\n\n", BATCH, machine);
    fprintf(out, "| layers | one plan (m = 1, none) | table (`snug plan --micro-batch 1`) | budget | table with the "
            "budget (`snug plan --mem`) | with / without the budget |\n");
    fprintf(out, "|---:|---:|---:|---:|---:|---:|\n");
}

static void print_row(FILE *out, size_t layers, const timing *t, size_t budget) {
    char b[32];
    snug_format_bytes(budget, b, sizeof b);
    fprintf(out, "| %zu | %.3f (%.3f) | %.3f (%.3f) | %s | %.3f (%.3f) | %.1fx |\n", layers, t[ONE_PLAN].cpu,
            t[ONE_PLAN].wall, t[TABLE].cpu, t[TABLE].wall, b, t[TABLE_BUDGET].cpu, t[TABLE_BUDGET].wall,
            t[TABLE_BUDGET].cpu / t[TABLE].cpu);
}

int main(int argc, char **argv) {
    const char *out_path = argc > 1 && argv[1][0] ? argv[1] : NULL; /* "": stdout only */
    const size_t largest = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000;
    static const size_t depths[] = {2500, 10000, 100000};
    FILE *out = out_path ? fopen(out_path, "w") : NULL;
    if (out_path && !out) {
        perror(out_path);
        return 1;
    }
    bench_machine m;
    bench_machine_describe(&m);
    char machine[512];
    snprintf(machine, sizeof machine, "%s, %d cores, %s", m.cpu, m.cores, m.simd);
    print_header(stdout, machine);
    if (out) print_header(out, machine);
    for (size_t i = 0; i < sizeof depths / sizeof depths[0] && depths[i] <= largest; i++) {
        snug_graph *g = relu_chain(depths[i]);
        timing t[N_TASKS];
        size_t budget = 0;
        int failed = budget_for(g, &budget);
        for (int k = 0; k < N_TASKS && !failed; k++) failed = time_best(g, (task)k, budget, &t[k]);
        snug_graph_free(g);
        if (failed) return 1;
        print_row(stdout, depths[i], t, budget);
        fflush(stdout);
        if (out) print_row(out, depths[i], t, budget);
    }
    if (out && fclose(out) != 0) {
        perror(out_path);
        return 1;
    }
    return 0;
}

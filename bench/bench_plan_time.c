/* Planning time against the number of nodes, through the public API: building a graph (snug_graph_new, the
 * builders) and planning it (snug_plan_new with snug_plan_request_default: batch 32, no checkpointing, this
 * machine's threads), for two deep chains: ReLUs over 16 features, and blocks of linear(16) + ReLU. Each
 * figure is the best of a few runs (one where a run takes over a second). A size whose previous size took over
 * `limit` seconds is skipped.
 *
 * usage: bench_plan_time [largest-node-count [limit-seconds [checkpoint-policy]]]
 *        (defaults: 100000, 30, none) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "snug.h"

#define FEATURES 16
#define BATCH 32

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* input -> flatten -> layers -> loss: ReLUs (blocks = false) or linear + ReLU pairs (blocks = true), n nodes in all. */
static snug_graph *chain(size_t nodes, bool blocks) {
    snug_graph *g = snug_graph_new(blocks ? "linear-relu-chain" : "relu-chain");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", FEATURES, 1, 1));
    char name[32];
    for (size_t i = 0; i + 3 < nodes; i++) {
        snprintf(name, sizeof name, "l%zu", i);
        x = blocks && i % 2 == 0 ? snug_linear(g, name, x, FEATURES) : snug_relu(g, name, x);
    }
    snug_softmax_cross_entropy(g, "loss", x);
    return g;
}

typedef struct timing {
    double build, plan;
    size_t total;
} timing;

static int time_once(size_t nodes, bool blocks, snug_checkpoint_policy policy, timing *t) {
    const double t0 = now();
    snug_graph *g = chain(nodes, blocks);
    const double t1 = now();
    snug_plan_request req = snug_plan_request_default(BATCH);
    req.checkpoint = policy;
    snug_plan *p = NULL;
    snug_error err;
    const snug_status s = snug_plan_new(g, &req, &p, NULL, &err);
    const double t2 = now();
    if (s != SNUG_OK) {
        fprintf(stderr, "bench_plan_time: %zu nodes: %s\n", nodes, err.message);
        snug_graph_free(g);
        return 1;
    }
    snug_plan_summary sum;
    snug_plan_summarize(p, &sum);
    *t = (timing){.build = t1 - t0, .plan = t2 - t1, .total = sum.total};
    snug_plan_free(p);
    snug_graph_free(g);
    return 0;
}

/* The best of up to three runs, or of one when a run takes over a second. */
static int time_best(size_t nodes, bool blocks, snug_checkpoint_policy policy, timing *best) {
    for (int r = 0; r < 3; r++) {
        timing t;
        if (time_once(nodes, blocks, policy, &t)) return 1;
        if (r == 0 || t.build < best->build) best->build = t.build;
        if (r == 0 || t.plan < best->plan) best->plan = t.plan;
        best->total = t.total;
        if (t.build + t.plan > 1.0) break;
    }
    return 0;
}

int main(int argc, char **argv) {
    const size_t largest = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000;
    const double limit = argc > 2 ? atof(argv[2]) : 30.0;
    snug_checkpoint_policy policy = {SNUG_CHECKPOINT_NONE, 0};
    snug_error err;
    if (argc > 3 && snug_parse_checkpoint(argv[3], &policy, &err) != SNUG_OK) {
        fprintf(stderr, "bench_plan_time: %s\n", err.message);
        return 2;
    }
    snug_system_info info;
    snug_system_info_get(&info);
    char pol[32];
    printf("Planning time: batch %d, checkpoint %s, %d threads; best of up to 3 runs, seconds.\n\n", BATCH,
           snug_format_checkpoint(policy, pol, sizeof pol), info.threads);
    printf("| nodes | ReLU chain: build | plan | linear+ReLU chain: build | plan |\n");
    printf("|---:|---:|---:|---:|---:|\n");
    bool over[2] = {false, false};
    for (size_t nodes = 100; nodes <= largest; nodes *= 10) {
        printf("| %zu |", nodes);
        for (int blocks = 0; blocks < 2; blocks++) {
            timing t = {0};
            if (over[blocks]) {
                printf(" skipped | skipped |");
                continue;
            }
            if (time_best(nodes, blocks, policy, &t)) return 1;
            printf(" %.4f | %.4f |", t.build, t.plan);
            over[blocks] = t.build + t.plan > limit;
        }
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

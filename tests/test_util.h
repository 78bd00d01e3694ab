/* What many tests share, over the public API: a graph by name or text, and a trainer made as `snug train` makes
 * one (a plan request, its plan, a trainer running a configuration on it). Header-only, so that each test stays
 * one executable of its own file. */
#ifndef SNUG_TESTS_TEST_UTIL_H
#define SNUG_TESTS_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "snug.h"

/* Skips the running cmocka test where a promise exists only on an instruction set this process lacks (or was
 * capped below: tests/isa_cap.c), saying so: cmocka's own skip() is silent, and a silent skip reads as a pass. */
#define SKIP_UNLESS(available, needs)                                                                         \
    do {                                                                                                      \
        if (!(available)) {                                                                                   \
            printf("# skipped: needs %s, which this CPU (or the kernels' cap) lacks\n", needs);              \
            skip();                                                                                           \
        }                                                                                                     \
    } while (0)

/* snug_model_builtin / snug_model_parse / snug_model_load, returning the graph or NULL. */
/* n values in [-1, 1) from a small linear congruential sequence of `seed`: the same values on every machine,
 * for the kernels' tests. */
static inline void test_fill(float *v, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
    }
}

static inline snug_graph *model_named(const char *name, snug_error *err) {
    snug_graph *g = NULL;
    snug_model_builtin(name, &g, err);
    return g;
}
static inline snug_graph *model_text(const char *text, const char *file, snug_error *err) {
    snug_graph *g = NULL;
    snug_model_parse(text, file, &g, err);
    return g;
}
static inline snug_graph *model_file(const char *path, snug_error *err) {
    snug_graph *g = NULL;
    snug_model_load(path, &g, err);
    return g;
}

/* The request for batch B in micro-batches of m (m = B: one pass) under policy and budget (0: none), with the
 * optimizer of cfg. */
static inline snug_plan_request request_for(size_t batch, size_t m, snug_checkpoint_policy policy, size_t budget,
                                            const snug_train_config *cfg) {
    snug_plan_request r = snug_plan_request_default(batch);
    r.micro_batch = m;
    r.checkpoint = policy;
    r.budget = budget;
    r.optim = cfg->optim;
    return r;
}

static const snug_checkpoint_policy NO_CHECKPOINT = {SNUG_CHECKPOINT_NONE, 0};

/* Plans req for g and makes a trainer running cfg on it; the trainer's plan is freed with it (trainer_done). */
static inline snug_status trainer_for(const snug_graph *g, const snug_plan_request *req, const snug_train_config *cfg,
                                      snug_trainer **tr, snug_error *err) {
    snug_plan *plan = NULL;
    *tr = NULL;
    snug_status s = snug_plan_new(g, req, &plan, NULL, err);
    if (s == SNUG_OK) s = snug_trainer_new(plan, cfg, tr, err);
    if (s != SNUG_OK) snug_plan_free(plan);
    return s;
}

/* trainer_for with batch B in micro-batches of m, no checkpointing, no budget. */
static inline snug_status trainer_simple(const snug_graph *g, size_t batch, size_t m, const snug_train_config *cfg,
                                         snug_trainer **tr, snug_error *err) {
    const snug_plan_request req = request_for(batch, m, NO_CHECKPOINT, 0, cfg);
    return trainer_for(g, &req, cfg, tr, err);
}

/* n images (c, h, w) of a fixed pattern in [-1, 1], image i labelled i % classes; NULL when it fails. */
static inline snug_dataset *pattern_images(size_t n, size_t c, size_t h, size_t w, size_t classes) {
    const size_t numel = n * c * h * w;
    float *x = malloc(numel * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    snug_dataset *ds = NULL;
    for (size_t i = 0; x && i < numel; i++) x[i] = (float)((i * 7919u) % 211u) / 105.0f - 1.0f;
    for (size_t i = 0; y && i < n; i++) y[i] = (int32_t)(i % classes);
    if (x && y) snug_dataset_from_memory(x, y, n, c, h, w, classes, &ds, NULL);
    free(x);
    free(y);
    return ds;
}

/* Frees a trainer of trainer_for and its plan. */
static inline void trainer_done(snug_trainer *tr) {
    if (!tr) return;
    snug_plan *plan = (snug_plan *)snug_trainer_plan(tr);
    snug_trainer_free(tr);
    snug_plan_free(plan);
}

#endif

/* bench_onnx_twin: an exported twin against its zoo model in one process. Both trainers are built first, then
 * blocks of optimizer steps alternate in the order zoo, export, export, zoo, ... (a drift in the machine's speed
 * during a pair hits each side alike over two pairs), each block after one untimed step, on the same batches of
 * the same data set. A pair's ratio is the zoo's seconds per step over the export's: the export's samples/s
 * over the zoo's. Separate processes see the machine in different states, and a machine shared with other work
 * swings their times by more than the difference sought; taking turns inside one process does not remove the
 * noise but puts both sides in it alike. bench/onnx_twins.py times the `snug train` command the same way.
 *
 *   bench_onnx_twin ZOO EXPORT.onnx DATA [DATA_DIR] [--batch N] [--steps N] [--pairs N]
 *   e.g. bench_onnx_twin unet build/onnx/unet.onnx shapes --batch 8 --steps 2 --pairs 10
 *
 * DATA is a data set name as `snug train --data` takes it (mnist32, shapes, brown, ...). Prints one line per
 * pair and the median ratio; exit status 0, 1 on a failure, 2 on bad arguments. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snug.h"

typedef struct side {
    snug_graph *g;
    snug_plan *plan;
    snug_trainer *tr;
} side;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what, const snug_error *err) {
    fprintf(stderr, "bench_onnx_twin: %s: %s\n", what, err->message);
    return 1;
}

/* A trainer of g at `batch` in one pass (no budget), as `snug train --batch N` without --mem plans it. */
static snug_status side_new(side *s, size_t batch, snug_error *err) {
    snug_plan_request req = snug_plan_request_default(batch);
    snug_status st = snug_plan_new(s->g, &req, &s->plan, NULL, err);
    if (st != SNUG_OK) return st;
    snug_train_config cfg = snug_train_config_default();
    return snug_trainer_new(s->plan, &cfg, &s->tr, err);
}

static void side_free(side *s) {
    snug_trainer_free(s->tr);
    snug_plan_free(s->plan);
    snug_graph_free(s->g);
}

/* Seconds per step of a block of `steps` steps after one untimed one, the batches taken in turn from ds. */
static snug_status block(side *s, const snug_dataset *ds, size_t batch, int steps, size_t *next, double *sec,
                         snug_error *err) {
    size_t *idx = malloc(batch * sizeof *idx);
    if (!idx) return SNUG_E_OOM;
    snug_status st = SNUG_OK;
    double t0 = 0;
    for (int k = 0; k <= steps && st == SNUG_OK; k++) {
        if (k == 1) t0 = now_s();
        for (size_t i = 0; i < batch; i++) idx[i] = (*next + i) % snug_dataset_size(ds);
        *next += batch;
        snug_step_stats stats;
        st = snug_trainer_step(s->tr, ds, idx, batch, &stats, err);
    }
    *sec = (now_s() - t0) / steps;
    free(idx);
    return st;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t batch = 8;
    int steps = 2, pairs = 10, positional = 0;
    const char *arg[4] = {NULL, NULL, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--batch") == 0) batch = (size_t)atol(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) steps = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--pairs") == 0) pairs = atoi(argv[++i]);
        else if (positional < 4) arg[positional++] = argv[i];
    }
    if (positional < 3 || batch == 0 || steps < 1 || pairs < 1 || pairs > 1000) {
        fprintf(stderr, "usage: bench_onnx_twin ZOO EXPORT.onnx DATA [DATA_DIR] [--batch N] [--steps N] "
                        "[--pairs N]\n");
        return 2;
    }
    snug_error err = {0};
    side zoo = {0}, twin = {0};
    if (snug_model_builtin(arg[0], &zoo.g, &err) != SNUG_OK) return fail(arg[0], &err);
    if (snug_graph_from_onnx(arg[1], &twin.g, &err) != SNUG_OK) return fail(arg[1], &err);
    snug_data data;
    if (snug_data_open(arg[2], arg[3], snug_graph_input_shape(zoo.g), true, NULL, &data, &err) != SNUG_OK)
        return fail(arg[2], &err);
    if (side_new(&zoo, batch, &err) != SNUG_OK) return fail(arg[0], &err);
    if (side_new(&twin, batch, &err) != SNUG_OK) return fail(arg[1], &err);
    double *ratio = malloc((size_t)pairs * sizeof *ratio);
    if (!ratio) return 1;
    size_t next_zoo = 0, next_twin = 0;
    printf("pair,first,zoo_s_per_step,export_s_per_step,ratio\n");
    for (int p = 0; p < pairs; p++) {
        double z = 0, t = 0;
        snug_status st = p % 2 == 0 ? block(&zoo, data.train, batch, steps, &next_zoo, &z, &err)
                                    : block(&twin, data.train, batch, steps, &next_twin, &t, &err);
        if (st == SNUG_OK)
            st = p % 2 == 0 ? block(&twin, data.train, batch, steps, &next_twin, &t, &err)
                            : block(&zoo, data.train, batch, steps, &next_zoo, &z, &err);
        if (st != SNUG_OK) return fail("a step", &err);
        ratio[p] = z / t;
        printf("%d,%s,%.4f,%.4f,%.4f\n", p, p % 2 == 0 ? "zoo" : "export", z, t, ratio[p]);
        fflush(stdout);
    }
    qsort(ratio, (size_t)pairs, sizeof *ratio, by_value);
    const double median = pairs % 2 ? ratio[pairs / 2] : 0.5 * (ratio[pairs / 2 - 1] + ratio[pairs / 2]);
    printf("# %s against %s: batch %zu, %d steps per block, %d pairs: the export's samples/s over the zoo's, "
           "median %.3f (min %.3f, max %.3f)\n", arg[1], arg[0], batch, steps, pairs, median, ratio[0],
           ratio[pairs - 1]);
    free(ratio);
    snug_data_close(&data);
    side_free(&zoo);
    side_free(&twin);
    return 0;
}

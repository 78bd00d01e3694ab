/* Training a model on your own data, through the public API only.
 *
 * The data lives in your program (here: points in the plane, labelled by which of three rings they fall in) and
 * reaches snug through two callbacks that copy the samples a micro-batch needs. snug plans the run for a memory
 * budget, choosing the micro-batch itself, and the gradient of every optimizer step is the gradient of the whole
 * batch of 256, however many micro-batches that takes.
 *
 *   cc own_data.c $(pkg-config --cflags --libs snug) -o own_data && ./own_data
 *
 * Exits 0 when the model classifies at least 90% of the held-out points correctly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <snug.h>

enum { TRAIN = 4096, TEST = 1024, CLASSES = 3 };

typedef struct points {
    size_t n;
    float *xy;       /* (n, 2) */
    int32_t *label;  /* (n) */
} points;

/* Uniform points in [-1, 1]^2; class = ring: r < 0.45, r < 0.8, beyond. */
static int make_points(points *p, size_t n, unsigned seed) {
    p->n = n;
    p->xy = malloc(n * 2 * sizeof *p->xy);
    p->label = malloc(n * sizeof *p->label);
    if (!p->xy || !p->label) return -1;
    srand(seed);
    for (size_t i = 0; i < n; i++) {
        const float x = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f, y = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
        const float r = sqrtf(x * x + y * y);
        p->xy[2 * i] = x;
        p->xy[2 * i + 1] = y;
        p->label[i] = r < 0.45f ? 0 : r < 0.8f ? 1 : 2;
    }
    return 0;
}

static bool read_inputs(void *user, const size_t *indices, size_t n, float *inputs, snug_error *err) {
    const points *p = user;
    (void)err;
    for (size_t i = 0; i < n; i++) {
        inputs[2 * i] = p->xy[2 * indices[i]];
        inputs[2 * i + 1] = p->xy[2 * indices[i] + 1];
    }
    return true;
}

static bool read_targets(void *user, const size_t *indices, size_t n, int32_t *targets, snug_error *err) {
    const points *p = user;
    (void)err;
    for (size_t i = 0; i < n; i++) targets[i] = p->label[indices[i]];
    return true;
}

static snug_status open_points(points *p, snug_dataset **out, snug_error *err) {
    const snug_dataset_source src = {
        .size = p->n,
        .sample_shape = {.rank = 3, .dims = {2, 1, 1}},
        .targets_per_sample = 1,
        .classes = CLASSES,
        .read_inputs = read_inputs,
        .read_targets = read_targets,
        .user = p,
    };
    return snug_dataset_from_source(&src, out, err);
}

/* 2 -> 64 -> 64 -> 3, ReLU. */
static snug_graph *build_model(void) {
    snug_graph *g = snug_graph_new("rings");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 2, 1, 1));
    x = snug_relu(g, "act1", snug_linear(g, "fc1", x, 64));
    x = snug_relu(g, "act2", snug_linear(g, "fc2", x, 64));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "out", x, CLASSES));
    return g;
}

/* A budget for the whole process, as `snug train --mem` has: what the data sets and the libraries hold beside
 * the engine (the libraries' allowance grows with the threads, so it is added, not guessed), and 256 KiB for
 * everything the engine holds. */
static void plan_whole_process(snug_plan_request *req, const snug_dataset *train, const snug_dataset *test) {
    snug_plan_request_whole_process(req, train, test);
    req->budget = req->data_bytes + req->runtime_bytes + (256u << 10);
}

static int fail(const char *what, const snug_error *err) {
    fprintf(stderr, "own_data: %s: %s\n", what, err->message);
    return 1;
}

int main(void) {
    snug_error err = {0};
    points train_pts, test_pts;
    if (make_points(&train_pts, TRAIN, 1) != 0 || make_points(&test_pts, TEST, 2) != 0) {
        fprintf(stderr, "own_data: out of memory\n");
        return 1;
    }
    snug_dataset *train = NULL, *test = NULL;
    snug_graph *g = build_model();
    snug_plan *plan = NULL;
    snug_trainer *tr = NULL;
    int rc = 1;

    snug_train_config cfg = snug_train_config_default();
    cfg.epochs = 30;
    cfg.optim.kind = SNUG_OPTIM_ADAMW;
    cfg.optim.lr = 3e-3f;

    snug_plan_request req = snug_plan_request_default(256);
    req.micro_batch = SNUG_MICRO_BATCH_AUTO; /* the micro-batch (and checkpointing) that fit the budget best */
    req.optim = cfg.optim;                   /* one optimizer for the plan and the run (snug_trainer_new checks) */

    snug_plan_shortfall why;
    snug_plan_summary s;
    snug_eval_result res;
    if (snug_graph_check(g, &err) != SNUG_OK) rc = fail("model", &err);
    else if (open_points(&train_pts, &train, &err) != SNUG_OK || open_points(&test_pts, &test, &err) != SNUG_OK)
        rc = fail("data", &err);
    else if (plan_whole_process(&req, train, test), snug_plan_new(g, &req, &plan, &why, &err) != SNUG_OK)
        rc = fail("plan", &err);
    else if (snug_trainer_new(plan, &cfg, &tr, &err) != SNUG_OK) rc = fail("trainer", &err);
    else {
        snug_plan_summarize(plan, &s);
        printf("batch %zu as %zu micro-batch%s of %zu; %zu bytes planned of a %zu-byte budget\n", s.batch,
               s.micro_batches, s.micro_batches == 1 ? "" : "es", s.micro_batch, s.total, s.budget);
        if (snug_trainer_fit(tr, train, &err) != SNUG_OK) rc = fail("training", &err);
        else if (snug_trainer_evaluate(tr, test, &res, &err) != SNUG_OK) rc = fail("evaluation", &err);
        else {
            printf("held-out accuracy %.2f%% (loss %.4f) on %zu points\n", 100.0 * res.accuracy, res.loss, res.items);
            rc = res.accuracy >= 0.9 ? 0 : 1;
        }
    }
    snug_trainer_free(tr);
    snug_plan_free(plan);
    snug_graph_free(g);
    snug_dataset_free(train);
    snug_dataset_free(test);
    free(train_pts.xy), free(train_pts.label), free(test_pts.xy), free(test_pts.label);
    return rc;
}

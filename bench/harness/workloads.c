/* The five benchmark workloads (the team's design notes, "Benchmark workloads"): the built-in model files with
 * the batches and optimizers the benchmarks fix, so that figures compare across time and against PyTorch
 * (bench/pytorch_bench.py holds the same table). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli/process_start.h"
#include "core/error.h"
#include "graph/model_file.h"

/* resnet20: the model file is written for padded MNIST (1x32x32); the benchmark is CIFAR-shaped (3x32x32), so
 * its graph is built from the same file text with the input line replaced: one model definition, two inputs. */
static const bench_workload workloads[] = {
    {"mlp", "mlp", NULL, 256, SNUG_OPTIM_SGD, 10, 1, false, "MNIST shapes, 784-1024-1024-10, ReLU, SGD momentum"},
    {"cnn", "cnn", NULL, 64, SNUG_OPTIM_SGD, 10, 1, false,
     "1x28x28, 2 x (conv3x3 + ReLU + maxpool2), linear 3136-128-10, SGD momentum"},
    {"resnet20", "resnet20", "image 3 32 32", 128, SNUG_OPTIM_SGD, 10, 1, false,
     "3x32x32, CIFAR ResNet-20 (BatchNorm, 1x1 conv shortcut), SGD momentum"},
    {"unet", "unet", NULL, 8, SNUG_OPTIM_ADAMW, 2, 256 * 256, false,
     "1x256x256, 2 classes per pixel, GroupNorm UNet, AdamW"},
    {"gpt", "gpt", NULL, 8, SNUG_OPTIM_ADAMW, 256, 256, true, "bytes, context 256, 4 layers, d 256, AdamW"},
};

#define NWORKLOADS (sizeof workloads / sizeof workloads[0])

/* In bench_variant order, then "all" (BENCH_NVARIANTS) for --variant. */
const char *const bench_variant_choices[BENCH_NVARIANTS + 2] = {"full", "cheap", "accum4", "sqrt", "micro1", "all",
                                                                NULL};

const bench_workload *bench_workloads(size_t *n) {
    *n = NWORKLOADS;
    return workloads;
}

const bench_workload *bench_find_workload(const char *name) {
    for (size_t i = 0; i < NWORKLOADS; i++)
        if (strcmp(workloads[i].name, name) == 0) return &workloads[i];
    return NULL;
}

const char *bench_variant_name(bench_variant v) {
    return (unsigned)v < BENCH_NVARIANTS ? bench_variant_choices[v] : "?";
}

static const mf_embedded *find_embedded(const char *name) {
    for (size_t i = 0; mf_embedded_models[i].name; i++)
        if (strcmp(mf_embedded_models[i].name, name) == 0) return &mf_embedded_models[i];
    return NULL;
}

/* The start of the `input = ...` line of the [model] section, or NULL. */
static const char *find_input_line(const char *text) {
    const char *p = strstr(text, "[model]");
    for (p = p ? strchr(p, '\n') : NULL; p; p = strchr(p, '\n')) {
        p++;
        if (*p == '[') return NULL;  /* the next section */
        size_t key = strcspn(p, " \t=\n");
        if (key == 5 && strncmp(p, "input", 5) == 0 && p[key + strspn(p + key, " \t")] == '=') return p;
    }
    return NULL;
}

/* The file text with its [model] input line replaced by `input = <input>`; malloc'd. */
static char *replace_input(const mf_embedded *e, const char *input, snug_error *err) {
    const char *line = find_input_line(e->text);
    if (!line) {
        snug_fail(err, SNUG_E_FORMAT, "%s: no `input = ...` line in its [model] section, so the benchmark cannot "
                  "set its input to '%s' (bench/harness/workloads.c expects one)", e->path, input);
        return NULL;
    }
    const char *end = line + strcspn(line, "\n");
    size_t head = (size_t)(line - e->text), tail = strlen(end), mid = strlen("input = ") + strlen(input);
    char *text = malloc(head + mid + tail + 1);
    if (!text) {
        snug_fail(err, SNUG_E_OOM, "cannot copy the %zu bytes of %s", head + tail, e->path);
        return NULL;
    }
    memcpy(text, e->text, head);
    snprintf(text + head, mid + 1, "input = %s", input);
    memcpy(text + head + mid, end, tail + 1);
    return text;
}

snug_status bench_build_graph(const bench_workload *w, snug_graph **out, snug_error *err) {
    *out = NULL;
    if (!w->input) return snug_model_builtin(w->model, out, err);
    const mf_embedded *e = find_embedded(w->model);
    if (!e) return snug_fail(err, SNUG_E_ARG, "the benchmark needs the built-in model '%s', which this build lacks",
                             w->model);
    char *text = replace_input(e, w->input, err);
    if (!text) return err && err->status != SNUG_OK ? err->status : SNUG_E_OOM;
    snug_status st = snug_model_parse(text, e->path, out, err);
    free(text);
    return st;
}

size_t bench_micro_batch(bench_variant v, size_t b) {
    switch (v) {
    case BENCH_ACCUM4: return (b + 3) / 4;
    case BENCH_MICRO1: return 1;
    default: return b;
    }
}

/* SGD lr 0.01 momentum 0.9; AdamW lr 1e-3, weight decay 0.01 (PyTorch's AdamW default). The rates do not change
 * the speed; bench/pytorch_bench.py uses the same. */
static snug_optim_config bench_optim(const bench_workload *w) {
    if (w->optim == SNUG_OPTIM_ADAMW)
        return (snug_optim_config){.kind = SNUG_OPTIM_ADAMW, .lr = 1e-3f, .weight_decay = 0.01f, .beta1 = 0.9f,
                                   .beta2 = 0.999f, .eps = 1e-8f};
    return (snug_optim_config){.kind = w->optim, .lr = 0.01f, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f,
                               .eps = 1e-8f};
}

snug_plan_request bench_request(const bench_workload *w, bench_variant v, snug_precision precision) {
    snug_plan_request r = snug_plan_request_default(w->batch);
    (void)cli_gemm_products(&r.products); /* main refused a value it does not know */
    r.precision = precision;
    r.micro_batch = bench_micro_batch(v, w->batch);
    r.checkpoint = (snug_checkpoint_policy){.kind = v == BENCH_SQRT    ? SNUG_CHECKPOINT_SQRT
                                                    : v == BENCH_CHEAP ? SNUG_CHECKPOINT_CHEAP
                                                                       : SNUG_CHECKPOINT_NONE};
    r.optim = bench_optim(w);
    return r;
}

snug_train_config bench_config(const bench_workload *w) {
    snug_train_config c = snug_train_config_default();
    c.shuffle = false;
    c.seed = 1;
    c.clip_norm = 0;
    c.optim = bench_optim(w);
    c.schedule = (snug_schedule_config){.kind = SNUG_SCHEDULE_CONSTANT, .reference_batch = 256};
    return c;
}

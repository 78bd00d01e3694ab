/* The built-in models, with the shapes of the benchmark workloads in docs/architecture.md. They are built
 * through the public builder API, exactly as a user would build their own. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "snug.h"

/* MNIST, 784-1024-1024-10 with ReLU. */
static snug_graph *build_mlp(void) {
    snug_graph *g = snug_graph_new("mlp");
    if (!g) return NULL;
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_flatten(g, "flatten", x);
    x = snug_relu(g, "relu1", snug_linear(g, "fc1", x, 1024));
    x = snug_relu(g, "relu2", snug_linear(g, "fc2", x, 1024));
    x = snug_linear(g, "fc3", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    return g;
}

/* MNIST, conv3x3(1->32, pad 1)-ReLU-maxpool2-conv3x3(32->64, pad 1)-ReLU-maxpool2-linear(3136->128)-ReLU-
 * linear(128->10). */
static snug_graph *build_cnn(void) {
    snug_graph *g = snug_graph_new("cnn");
    if (!g) return NULL;
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_relu(g, "relu1", snug_conv2d(g, "conv1", x, 32, 3, 1, 1));
    x = snug_maxpool2d(g, "pool1", x, 2, 2);
    x = snug_relu(g, "relu2", snug_conv2d(g, "conv2", x, 64, 3, 1, 1));
    x = snug_maxpool2d(g, "pool2", x, 2, 2);
    x = snug_flatten(g, "flatten", x);
    x = snug_relu(g, "relu3", snug_linear(g, "fc1", x, 128));
    x = snug_linear(g, "fc2", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    return g;
}

#define RESMLP_WIDTH 256
#define RESMLP_BLOCKS 32

/* A deep chain for checkpointing: flatten, linear 784->256, then 32 residual blocks
 * x = x + dropout(fc2(relu(fc1(x))), 0.1) with fc1 256->1024 and fc2 1024->256 (a transformer's MLP), then
 * linear 256->10. Every block's output feeds the next block twice (its fc1 and its add), so the residuals cross
 * any segment boundary a checkpoint policy draws. */
static snug_graph *build_resmlp(void) {
    snug_graph *g = snug_graph_new("resmlp");
    if (!g) return NULL;
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_flatten(g, "flatten", x);
    x = snug_linear(g, "fc_in", x, RESMLP_WIDTH);
    for (int i = 1; i <= RESMLP_BLOCKS; i++) {
        char name[5][32];
        static const char *const part[5] = {"fc1", "relu", "fc2", "drop", "add"};
        for (int k = 0; k < 5; k++) snprintf(name[k], sizeof name[k], "block%d.%s", i, part[k]);
        snug_tensor h = snug_relu(g, name[1], snug_linear(g, name[0], x, 4 * RESMLP_WIDTH));
        h = snug_dropout(g, name[3], snug_linear(g, name[2], h, RESMLP_WIDTH), 0.1f);
        x = snug_add(g, name[4], x, h);
    }
    x = snug_linear(g, "fc_out", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    return g;
}

/* VGG-16 (Simonyan and Zisserman 2014) for 3x224x224 images and 1000 classes, 138M parameters: far larger than
 * the machines snug's tests run on, for planning (snug plan) rather than training here. */
static snug_graph *build_vgg16(void) {
    static const int channels[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
    snug_graph *g = snug_graph_new("vgg16");
    if (!g) return NULL;
    snug_tensor x = snug_input(g, "input", 3, 224, 224);
    int conv = 0, pool = 0;
    char name[32];
    for (size_t i = 0; i < sizeof channels / sizeof channels[0]; i++) {
        if (!channels[i]) {
            snprintf(name, sizeof name, "pool%d", ++pool);
            x = snug_maxpool2d(g, name, x, 2, 2);
            continue;
        }
        snprintf(name, sizeof name, "conv%d", ++conv);
        x = snug_conv2d(g, name, x, (size_t)channels[i], 3, 1, 1);
        snprintf(name, sizeof name, "relu%d", conv);
        x = snug_relu(g, name, x);
    }
    x = snug_flatten(g, "flatten", x);
    x = snug_dropout(g, "drop1", snug_relu(g, "relu14", snug_linear(g, "fc1", x, 4096)), 0.5f);
    x = snug_dropout(g, "drop2", snug_relu(g, "relu15", snug_linear(g, "fc2", x, 4096)), 0.5f);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc3", x, 1000));
    return g;
}

typedef struct builtin_model {
    const char *name;
    snug_graph *(*build)(void);
} builtin_model;

static const builtin_model models[] = {
    {"mlp", build_mlp}, {"cnn", build_cnn}, {"resmlp", build_resmlp}, {"vgg16", build_vgg16}};
static const char *const model_names[] = {"mlp", "cnn", "resmlp", "vgg16", NULL};

const char *const *snug_model_names(void) { return model_names; }

snug_graph *snug_model_builtin(const char *name, snug_error *err) {
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        if (!name || strcmp(name, models[i].name) != 0) continue;
        snug_graph *g = models[i].build();
        if (snug_graph_check(g, err) != SNUG_OK) {
            snug_graph_free(g);
            return NULL;
        }
        return g;
    }
    snug_fail(err, SNUG_E_ARG, "unknown model '%s': the built-in models are mlp, cnn, resmlp and vgg16", name ? name : "");
    return NULL;
}

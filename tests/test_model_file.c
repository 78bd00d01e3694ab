/* Model files (src/graph/model_file.c, model_layers.c; docs/model-files.md): the built-in zoo parses into the
 * expected graphs (mlp, cnn, resmlp and vgg16 node for node identical to the same models built in C), every key
 * and default reaches its builder, and every kind of bad file gets a message "FILE:LINE: layer 'NAME': problem"
 * that points at the right line. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/escape.h"
#include "graph/graph.h"
#include "graph/model_file.h"
#include "ops/op.h"
#include "snug.h"
#include "test_util.h"

/* ---- helpers ---------------------------------------------------------------------------------------------- */

static snug_graph *parse_ok(const char *text) {
    snug_error err = {0};
    snug_graph *g = model_text(text, "test.ini", &err);
    if (!g) print_error("unexpected error: %s\n", err.message);
    assert_non_null(g);
    return g;
}

/* The text must fail with status st, and the message must hold `where` ("bad.ini:7: layer 'x':") and phrase. */
static void expect_error(const char *text, snug_status st, const char *where, const char *phrase) {
    snug_error err = {0};
    snug_graph *g = model_text(text, "bad.ini", &err);
    if (g || err.status != st || !strstr(err.message, where) || !strstr(err.message, phrase) ||
        strncmp(err.message, "bad.ini:", 8) != 0)
        print_error("expected status %d with '%s' ... '%s', got status %d: %s\n", (int)st, where, phrase,
                    (int)err.status, err.message);
    assert_null(g);
    assert_int_equal(err.status, st);
    assert_non_null(strstr(err.message, where));
    assert_non_null(strstr(err.message, phrase));
    assert_int_equal(strncmp(err.message, "bad.ini:", 8), 0);
}

static const graph_node *node_named(const snug_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return &g->nodes[i];
    fail_msg("no node '%s'", name);
    return NULL;
}

static snug_graph *builtin(const char *name) {
    snug_error err = {0};
    snug_graph *g = model_named(name, &err);
    if (!g) print_error("%s: %s\n", name, err.message);
    assert_non_null(g);
    return g;
}

/* Whole file into a string (tests only: small files). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* ---- the same models built through the C builder API ------------------------------------------------------- */

static snug_graph *c_mlp(void) {
    snug_graph *g = snug_graph_new("mlp");
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_flatten(g, "flatten", x);
    x = snug_relu(g, "relu1", snug_linear(g, "fc1", x, 1024));
    x = snug_relu(g, "relu2", snug_linear(g, "fc2", x, 1024));
    x = snug_linear(g, "fc3", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    return g;
}

static snug_graph *c_cnn(void) {
    snug_graph *g = snug_graph_new("cnn");
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

static snug_graph *c_resmlp(void) {
    snug_graph *g = snug_graph_new("resmlp");
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_flatten(g, "flatten", x);
    x = snug_linear(g, "fc_in", x, 256);
    for (int i = 1; i <= 32; i++) {
        char name[5][32];
        static const char *const part[5] = {"fc1", "relu", "fc2", "drop", "add"};
        for (int k = 0; k < 5; k++) snprintf(name[k], sizeof name[k], "block%d.%s", i, part[k]);
        snug_tensor h = snug_relu(g, name[1], snug_linear(g, name[0], x, 1024));
        h = snug_dropout(g, name[3], snug_linear(g, name[2], h, 256), 0.1f);
        x = snug_add(g, name[4], x, h);
    }
    x = snug_linear(g, "fc_out", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    return g;
}

static snug_graph *c_vgg16(void) {
    static const int channels[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
    snug_graph *g = snug_graph_new("vgg16");
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

static void assert_same_shape(const snug_shape *a, const snug_shape *b) {
    assert_int_equal(a->rank, b->rank);
    for (int d = 0; d < a->rank; d++) assert_int_equal(a->dims[d], b->dims[d]);
}

/* The op parameters that the C builders of these four models set. */
static void assert_same_op_params(const graph_node *a, const graph_node *b) {
    if (a->op == &op_linear) assert_int_equal(a->p.linear.out_features, b->p.linear.out_features);
    if (a->op == &op_conv2d) {
        const conv2d_params *x = &a->p.conv2d, *y = &b->p.conv2d;
        assert_int_equal(x->out_channels, y->out_channels);
        assert_int_equal(x->kernel, y->kernel);
        assert_int_equal(x->stride, y->stride);
        assert_int_equal(x->padding, y->padding);
        assert_int_equal(x->groups, y->groups);
    }
    if (a->op == &op_maxpool2d) {
        assert_int_equal(a->p.pool2d.kernel, b->p.pool2d.kernel);
        assert_int_equal(a->p.pool2d.stride, b->p.pool2d.stride);
    }
    if (a->op == &op_dropout) assert_true(a->p.dropout.p == b->p.dropout.p);
}

/* Node for node, tensor for tensor, parameter for parameter: the same graph. */
static void assert_same_graph(const snug_graph *a, const snug_graph *b) {
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->n_nodes, b->n_nodes);
    assert_int_equal(a->n_tensors, b->n_tensors);
    assert_int_equal(a->n_params, b->n_params);
    assert_int_equal(a->param_numel, b->param_numel);
    assert_int_equal(a->state_numel, b->state_numel);
    assert_int_equal(a->input_node, b->input_node);
    assert_int_equal(a->loss_node, b->loss_node);
    for (int i = 0; i < a->n_nodes; i++) {
        const graph_node *x = &a->nodes[i], *y = &b->nodes[i];
        assert_string_equal(x->name, y->name);
        assert_ptr_equal(x->op, y->op);
        assert_int_equal(x->n_inputs, y->n_inputs);
        for (int k = 0; k < x->n_inputs; k++) assert_int_equal(x->inputs[k], y->inputs[k]);
        assert_int_equal(x->output, y->output);
        assert_int_equal(x->n_params, y->n_params);
        for (int k = 0; k < x->n_params; k++) assert_int_equal(x->params[k], y->params[k]);
        assert_same_op_params(x, y);
    }
    for (int t = 0; t < a->n_tensors; t++) {
        assert_same_shape(&a->tensors[t].shape, &b->tensors[t].shape);
        assert_int_equal(a->tensors[t].producer, b->tensors[t].producer);
    }
    for (int p = 0; p < a->n_params; p++) {
        const graph_param *x = &a->params[p], *y = &b->params[p];
        assert_string_equal(x->name, y->name);
        assert_same_shape(&x->shape, &y->shape);
        assert_int_equal(x->offset, y->offset);
        assert_int_equal(x->fan_in, y->fan_in);
        assert_int_equal(x->init, y->init);
        assert_int_equal(x->buffer, y->buffer);
    }
}

static void test_builtins_identical_to_c_builders(void **state) {
    (void)state;
    static const char *const names[] = {"mlp", "cnn", "resmlp", "vgg16"};
    snug_graph *(*const build[])(void) = {c_mlp, c_cnn, c_resmlp, c_vgg16};
    for (int i = 0; i < 4; i++) {
        snug_graph *file = builtin(names[i]), *ref = build[i]();
        assert_int_equal(snug_graph_check(ref, NULL), SNUG_OK);
        assert_same_graph(file, ref);
        snug_graph_free(file);
        snug_graph_free(ref);
    }
}

/* ---- the zoo: node and parameter counts from the architectures' formulas ------------------------------------ */

static size_t conv_params(size_t ci, size_t co, size_t k) { return co * ci * k * k + co; }
static size_t unet_level(size_t ci, size_t co) { return conv_params(ci, co, 3) + conv_params(co, co, 3) + 4 * co; }

static void check_counts(const char *name, int nodes, size_t params, size_t state) {
    snug_graph *g = builtin(name);
    if (g->n_nodes != nodes || g->param_numel != params || g->state_numel != state)
        print_error("%s: %d nodes, %zu params, %zu state\n", name, g->n_nodes, g->param_numel, g->state_numel);
    assert_string_equal(g->name, name);
    assert_int_equal(g->n_nodes, nodes);
    assert_int_equal(g->param_numel, params);
    assert_int_equal(g->state_numel, state);
    assert_int_equal(g->loss_node, g->n_nodes - 1);
    snug_graph_free(g);
}

static void test_zoo_counts(void **state) {
    (void)state;
    check_counts("mlp", 8, 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10, 0);
    check_counts("cnn", 12, conv_params(1, 32, 3) + conv_params(32, 64, 3) + 3136 * 128 + 128 + 128 * 10 + 10, 0);
    /* input, 13 x (conv, relu), 5 pools, flatten, 3 linear, 2 relu, 2 dropout, loss; VGG-16's 138,357,544 */
    check_counts("vgg16", 41, 138357544, 0);

    /* resnet20: stem (conv, norm, relu), 9 basic blocks of 7 nodes, 2 shortcuts of 2, pool, fc, loss */
    size_t res = conv_params(1, 16, 3) + 32, norm_channels = 16;
    const size_t widths[] = {16, 32, 64};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) {
            size_t ci = s > 0 && b == 0 ? widths[s - 1] : widths[s], co = widths[s];
            res += conv_params(ci, co, 3) + conv_params(co, co, 3) + 4 * co;
            norm_channels += 2 * co;
            if (ci != co) res += conv_params(ci, co, 1) + 2 * co, norm_channels += co;
        }
    res += 64 * 10 + 10;
    assert_int_equal(res, 272970);
    check_counts("resnet20", 1 + 3 + 9 * 7 + 2 * 2 + 3, res, 2 * norm_channels); /* running mean and var */
    check_counts("resnet20-gn", 1 + 3 + 9 * 7 + 2 * 2 + 3, res, 0);

    /* unet: 9 levels of 6 nodes, 4 pools, 4 x (up, concat), head, loss */
    size_t unet = unet_level(1, 16) + unet_level(16, 32) + unet_level(32, 64) + unet_level(64, 128) +
                  unet_level(128, 256);
    for (size_t c = 16; c <= 128; c *= 2) unet += 2 * c * c * 4 + c + unet_level(2 * c, c);
    unet += conv_params(16, 2, 1);
    check_counts("unet", 1 + 9 * 6 + 4 + 4 * 2 + 2, unet, 0);
    check_counts("unet-hires", 1 + 9 * 6 + 4 + 4 * 2 + 2, unet, 0);

    /* gpt: input, wte, wpe, 4 blocks of 10, ln_f, head, loss; the tied head adds no parameter */
    const size_t d = 256, block = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) +
                                  (4 * d * d + d);
    check_counts("gpt", 3 + 4 * 10 + 3, 256 * d + 256 * d + 4 * block + 2 * d, 0);

    /* resnet50: stem 4 nodes, 16 bottlenecks of 10 nodes, 4 shortcuts of 2, pool, fc, loss; torchvision's
     * 25,557,032 parameters plus a bias on each of its convolutions (the sum of their output channels) */
    size_t biases = 64;
    const size_t bw[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
    for (int s = 0; s < 4; s++) biases += blocks[s] * 6 * bw[s] + 4 * bw[s];
    snug_graph *g = builtin("resnet50");
    assert_int_equal(g->n_nodes, 1 + 4 + 16 * 10 + 4 * 2 + 3);
    assert_int_equal(g->param_numel, 25557032 + biases);
    snug_graph_free(g);
}

/* The zoo's shapes: what each model reads and where its loss sits. */
/* --classes: the layer the loss reads gets the new count, every other layer stays the file's; a model file, a
 * built-in and a text all take it; a head without such a number (gpt's tied one) is refused by name. */
static void test_classes_override(void **state) {
    (void)state;
    snug_error err = {0};
    snug_graph *ten = builtin("cnn"), *three = NULL;
    assert_int_equal(snug_model_builtin_classes("cnn", 3, &three, &err), SNUG_OK);
    assert_int_equal(three->n_nodes, ten->n_nodes);
    assert_int_equal(ten->param_numel - three->param_numel, (10 - 3) * (128 + 1)); /* fc2: 128 -> 10 becomes 3 */
    snug_graph_free(three);
    snug_graph_free(ten);

    snug_graph *unet = NULL;                                  /* conv2d head: out_channels, a class per pixel */
    assert_int_equal(snug_model_builtin_classes("unet", 5, &unet, &err), SNUG_OK);
    snug_graph *unet2 = builtin("unet");
    assert_true(unet->param_numel > unet2->param_numel);     /* 3 more output channels of the head's weights */
    assert_int_equal((unet->param_numel - unet2->param_numel) % 3, 0);
    snug_graph_free(unet);
    snug_graph_free(unet2);

    const char *text = "[model]\ninput = image 1 4 4\n[flat]\ntype = flatten\n[fc]\ntype = linear\nout = 10\n"
                       "[loss]\ntype = softmax_cross_entropy\ninput = fc\n";
    snug_graph *g = NULL;                                     /* the layer named by the loss's input */
    assert_int_equal(snug_model_parse_classes(text, "t.ini", 4, &g, &err), SNUG_OK);
    assert_int_equal(g->param_numel, 16 * 4 + 4);
    snug_graph_free(g);

    assert_int_equal(snug_model_builtin_classes("gpt", 3, &g, &err), SNUG_E_ARG);
    assert_null(g);
    assert_non_null(strstr(err.message, "linear_tied"));
    assert_non_null(strstr(err.message, "models/gpt.ini"));
}

static void test_zoo_shapes(void **state) {
    (void)state;
    snug_graph *g = builtin("unet-hires");
    const snug_shape *in = &g->tensors[0].shape, *logits = &g->tensors[node_named(g, "head")->output].shape;
    assert_int_equal(in->dims[1], 1408);
    assert_int_equal(in->dims[2], 2112);
    assert_int_equal(logits->dims[0], 2);
    assert_int_equal(logits->dims[1], 1408);
    assert_int_equal(logits->dims[2], 2112);
    snug_graph_free(g);

    g = builtin("gpt");
    assert_int_equal(g->tensors[0].shape.rank, 1);
    assert_int_equal(g->tensors[0].shape.dims[0], 256);
    const graph_node *head = node_named(g, "head"), *wte = node_named(g, "wte");
    assert_ptr_equal(head->op, &op_linear_tied);
    assert_int_equal(head->params[0], wte->params[0]); /* tied */
    assert_true(node_named(g, "h2.attn")->p.attention.causal);
    assert_int_equal(node_named(g, "h2.attn")->p.attention.heads, 4);
    snug_graph_free(g);

    g = builtin("resnet20");
    assert_int_equal(g->tensors[0].shape.dims[0], 1);
    assert_int_equal(g->tensors[0].shape.dims[1], 32);
    const graph_node *add = node_named(g, "s2b1.add");
    assert_int_equal(add->inputs[1], node_named(g, "s2b1.down_bn")->output);
    assert_int_equal(node_named(g, "s2b1.conv1")->p.conv2d.stride, 2);
    snug_graph_free(g);

    g = builtin("resnet20-gn");
    assert_int_equal(node_named(g, "s1b1.gn1")->p.norm.groups, 8);
    snug_graph_free(g);
}

/* Every listed name parses, plans and is the same file as models/NAME.ini in the source tree (the embedded copy
 * is regenerated at build time). */
static void test_every_builtin_is_its_file(void **state) {
    (void)state;
    int n = 0;
    for (const char *const *name = snug_model_names(); *name; name++, n++) {
        snug_graph *g = builtin(*name);
        snug_plan *plan = NULL;
        snug_plan_request req = snug_plan_request_default(1);
        assert_int_equal(snug_plan_new(g, &req, &plan, NULL, NULL), SNUG_OK);
        snug_plan_free(plan);
        snug_graph_free(g);

        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s.ini", SNUG_SOURCE_DIR, *name);
        char *disk = slurp(path);
        const mf_embedded *e = mf_embedded_models;
        while (e->name && strcmp(e->name, *name) != 0) e++;
        assert_non_null(e->name);
        assert_string_equal(e->text, disk);
        free(disk);
    }
    assert_true(n >= 10);
}

/* docs/model-files.md documents every type (a "### `TYPE`" heading each). */
static void test_docs_list_every_type(void **state) {
    (void)state;
    char *doc = slurp(SNUG_SOURCE_DIR "/docs/model-files.md");
    for (const char *const *t = mf_layer_types(); *t; t++) {
        char heading[96];
        snprintf(heading, sizeof heading, "### `%s`", *t);
        if (!strstr(doc, heading)) print_error("docs/model-files.md has no heading %s\n", heading);
        assert_non_null(strstr(doc, heading));
    }
    free(doc);
}

/* ---- keys, defaults and references ------------------------------------------------------------------------- */

static void test_keys_and_defaults(void **state) {
    (void)state;
    snug_graph *g = parse_ok("[model]\n"
                             "input = image 4 8 8   ; inline comment\n"
                             "[c]\n"
                             "type = conv2d\n"
                             "out_channels = 8\n"
                             "kernel = 3\n"
                             "padding: 1\n"          /* libinih's name: value form */
                             "groups = 2\n"
                             "# a comment line\n"
                             "[bn]\ntype = batchnorm2d\n"
                             "[p]\ntype = maxpool2d\nkernel = 2\n"
                             "[gn]\ntype = groupnorm\ngroups = 4\neps = 1e-3\n"
                             "[d]\ntype = dropout\n"
                             "[skip]\ntype = conv2d\ninput = input\nout_channels = 8\nkernel = 2\nstride = 2\n"
                             "[cat]\ntype = concat\ninputs = d ,skip\n"
                             "[loss]\ntype = softmax_cross_entropy\n");
    const graph_node *c = node_named(g, "c");
    assert_int_equal(c->p.conv2d.stride, 1);
    assert_int_equal(c->p.conv2d.padding, 1);
    assert_int_equal(c->p.conv2d.groups, 2);
    assert_true(node_named(g, "bn")->p.norm.eps == 1e-5f);
    assert_true(node_named(g, "bn")->p.norm.momentum == 0.1f);
    assert_int_equal(node_named(g, "p")->p.pool2d.stride, 2); /* stride defaults to the kernel */
    assert_true(node_named(g, "gn")->p.norm.eps == 1e-3f);
    assert_true(node_named(g, "d")->p.dropout.p == 0.5f);
    const graph_node *cat = node_named(g, "cat");
    assert_int_equal(cat->inputs[0], node_named(g, "d")->output);
    assert_int_equal(cat->inputs[1], node_named(g, "skip")->output);
    assert_int_equal(node_named(g, "skip")->inputs[0], g->nodes[0].output);
    assert_int_equal(g->tensors[cat->output].shape.dims[0], 16);
    assert_string_equal(g->name, "test"); /* no `name`: the file name without .ini */
    snug_graph_free(g);

    g = parse_ok("\xEF\xBB\xBF[model]\r\nname = seq\r\ninput = tokens 8\r\n[e]\r\ntype = embedding\r\nvocab = 16\r\n"
                 "dim = 8\r\n[a]\r\ntype = linear\r\nout = 24\r\n[s]\r\ntype = self_attention\r\nheads = 2\r\n"
                 "[o]\r\ntype = linear_tied\r\nembedding = e\r\n[loss]\r\ntype = softmax_cross_entropy\r\n");
    assert_string_equal(g->name, "seq");
    assert_false(node_named(g, "s")->p.attention.causal); /* the default */
    snug_graph_free(g);

    g = parse_ok("[model]\ninput = image 2 3 5\n[u]\ntype = upsample_nearest2d\n[v]\ntype = upsample_nearest2d\n"
                 "scale = 3\n[loss]\ntype = softmax_cross_entropy\n");
    assert_int_equal(node_named(g, "u")->p.pool2d.stride, 2); /* the default scale */
    const snug_shape up = g->tensors[node_named(g, "v")->output].shape;
    assert_int_equal(up.dims[1], 3 * 2 * 3);
    assert_int_equal(up.dims[2], 5 * 2 * 3);
    snug_graph_free(g);
}

/* snug_model_load, and snug_model_builtin given a path. */
static void test_load_from_file(void **state) {
    (void)state;
    char path[] = "/tmp/snug-model-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char text[] = "[model]\ninput = image 1 2 2\n[f]\ntype = flatten\n[fc]\ntype = linear\nout = 3\n"
                               "[loss]\ntype = softmax_cross_entropy\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    snug_error err = {0};
    snug_graph *g = model_file(path, &err);
    assert_non_null(g);
    assert_int_equal(g->n_nodes, 4);
    assert_int_equal(strncmp(g->name, "snug-model-", 11), 0);
    snug_graph_free(g);
    g = model_named(path, &err);
    assert_non_null(g);
    snug_graph_free(g);

    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[model]\ninput = image 1 2 2\n[fc]\ntype = linear\nout = 3\n", f);
    fclose(f);
    assert_null(model_file(path, &err));
    char where[128];
    snprintf(where, sizeof where, "%s:3: layer 'fc':", path); /* messages name the path */
    assert_non_null(strstr(err.message, where));
    unlink(path);

    assert_null(model_file("/nonexistent/dir/net.ini", &err));
    assert_int_equal(err.status, SNUG_E_IO);
    assert_non_null(strstr(err.message, "cannot open model file '/nonexistent/dir/net.ini'"));
    assert_null(model_named("./nonexistent.ini", &err));
    assert_int_equal(err.status, SNUG_E_IO);
    assert_null(model_named("resnet9000", &err));
    assert_non_null(strstr(err.message, "unknown model 'resnet9000'"));
    assert_non_null(strstr(err.message, "resnet20-gn"));
}

#define HEAD "[model]\ninput = image 1 4 4\n" /* lines 1-2 */

/* ---- init_scale: scales the layer's weight, refused where there is none ----------------------------------- */

static void test_init_scale(void **state) {
    (void)state;
    snug_graph *g = parse_ok("[model]\ninput = image 1 4 4\n[f]\ntype = flatten\n[l]\ntype = linear\nout = 3\n"
                             "init_scale = 0.25\n[n]\ntype = layernorm\ninit_scale = 0\n"
                             "[loss]\ntype = softmax_cross_entropy\n");
    float want[] = {0.25f, 1.0f, 0.0f, 1.0f}; /* l.weight, l.bias, n.weight, n.bias */
    assert_int_equal(g->n_params, 4);
    for (int i = 0; i < 4; i++) assert_true(g->params[i].init_scale == want[i]);
    /* the trainer's initial values: layernorm's gain starts at 0, the linear weight within 0.25 of its bound */
    snug_train_config cfg = snug_train_config_default();
    snug_error err = {0};
    snug_trainer *tr = NULL;
    if (trainer_simple(g, 1, 1, &cfg, &tr, &err) != SNUG_OK) print_error("%s\n", err.message);
    assert_non_null(tr);
    size_t numel;
    float *v, *grad;
    assert_string_equal(snug_trainer_param(tr, 2, &numel, &v, &grad), "n.weight");
    for (size_t j = 0; j < numel; j++) assert_true(v[j] == 0.0f);
    assert_string_equal(snug_trainer_param(tr, 0, &numel, &v, &grad), "l.weight");
    float bound = 0.25f / 4.0f, biggest = 0.0f; /* 1/sqrt(fan_in 16) = 0.25, scaled by 0.25 */
    for (size_t j = 0; j < numel; j++) biggest = fabsf(v[j]) > biggest ? fabsf(v[j]) : biggest;
    assert_true(biggest <= bound && biggest > 0.5f * bound);
    trainer_done(tr);
    snug_graph_free(g);

    expect_error(HEAD "[f]\ntype = flatten\n[l]\ntype = linear\nout = 2\ninit_scale = -1\n", SNUG_E_FORMAT,
                 "bad.ini:8: layer 'l':", "init_scale = '-1' is not a finite number >= 0");
    expect_error(HEAD "[f]\ntype = flatten\n[l]\ntype = linear\nout = 2\ninit_scale = nan\n", SNUG_E_FORMAT,
                 "bad.ini:8: layer 'l':", "init_scale = 'nan' is not a finite decimal number");
    expect_error(HEAD "[r]\ntype = relu\ninit_scale = 0\n", SNUG_E_ARG, "bad.ini:5: layer 'r':",
                 "a relu layer has no weight of its own to scale");
    expect_error(HEAD "[r]\ntype = relu\nint_scale = 0\n", SNUG_E_FORMAT, "bad.ini:5: layer 'r':",
                 "unknown key 'int_scale' for type relu (it takes: type, input; and any layer with a weight: "
                 "init_scale)");
    /* the C API: unknown layer, bad scale */
    snug_graph *c = snug_graph_new("c");
    snug_init_scale(c, "nope", 1.0f);
    assert_int_equal(snug_graph_check(c, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "there is no layer 'nope'"));
    snug_graph_free(c);
    c = snug_graph_new("c");
    snug_tensor x = snug_input(c, "x", 1, 2, 2);
    snug_linear(c, "l", snug_flatten(c, "f", x), 2);
    snug_init_scale(c, "l", -0.5f);
    assert_int_equal(snug_graph_check(c, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "expected a finite number >= 0"));
    snug_graph_free(c);
}

/* ---- bad files: one message each, at the right line -------------------------------------------------------- */

static void test_errors_types_and_keys(void **state) {
    (void)state;
    expect_error(HEAD "\n[a]\ntype = conv3d\n", SNUG_E_FORMAT, "bad.ini:5: layer 'a':",
                 "unknown layer type 'conv3d' (choose from: linear, conv2d, conv_transpose2d");
    expect_error(HEAD "[c]\ntype = conv2d\nout_channels = 2\nkernel = 3\nstrides = 2\n", SNUG_E_FORMAT,
                 "bad.ini:7: layer 'c':",
                 "unknown key 'strides' for type conv2d (it takes: type, input, out_channels, kernel, stride, "
                 "padding, groups, dilation, kernel_w, stride_w, padding_w; and any layer with a weight: init_scale)");
    expect_error(HEAD "[a]\ntype = add\ninput = input\n", SNUG_E_FORMAT, "bad.ini:5: layer 'a':",
                 "unknown key 'input' for type add (it takes: type, inputs;");
    expect_error(HEAD "[c]\ntype = conv2d\nkernel = 3\n", SNUG_E_FORMAT, "bad.ini:3: layer 'c':",
                 "type conv2d needs 'out_channels' (add out_channels = a whole number");
    expect_error(HEAD "[a]\ninput = input\n", SNUG_E_FORMAT, "bad.ini:3: layer 'a':", "no 'type' (add type = ");
    expect_error(HEAD "[a]\ntype = relu\ntype = gelu\n", SNUG_E_FORMAT, "bad.ini:5: layer 'a':",
                 "'type' is given twice (first on line 4)");
    expect_error(HEAD "[a]\ntype = add\n", SNUG_E_FORMAT, "bad.ini:3: layer 'a':", "type add needs 'inputs = A, B'");
    expect_error(HEAD "[f]\ntype = flatten\n[a]\ntype = add\ninputs = f\n", SNUG_E_FORMAT, "bad.ini:7: layer 'a':",
                 "give two layer names separated by a comma");
}

/* conv2d's `dilation` reaches the layer (its output side is PyTorch's); 0 is refused, naming the line. */
static void test_conv2d_dilation_key(void **state) {
    (void)state;
    snug_graph *g = parse_ok("[model]\ninput = image 2 9 9\n[c]\ntype = conv2d\nout_channels = 3\nkernel = 3\n"
                             "padding = 1\ndilation = 2\n[f]\ntype = flatten\n[l]\ntype = linear\nout = 2\n"
                             "[loss]\ntype = softmax_cross_entropy\n");
    const graph_node *c = node_named(g, "c");
    assert_int_equal(c->p.conv2d.dilation, 2);
    const snug_shape *out = &g->tensors[c->output].shape;
    assert_int_equal(out->dims[1], (9 + 2 * 1 - 2 * (3 - 1) - 1) / 1 + 1);
    snug_graph_free(g);
    expect_error(HEAD "[c]\ntype = conv2d\nout_channels = 2\nkernel = 3\ndilation = 0\n", SNUG_E_ARG,
                 "bad.ini:3: layer 'c':", "dilation 0");
}

/* conv2d's kernel_w, stride_w and padding_w give the width axis its own; left out, the height's. */
static void test_conv2d_width_keys(void **state) {
    (void)state;
    snug_graph *g = parse_ok("[model]\ninput = image 2 9 10\n[c]\ntype = conv2d\nout_channels = 3\nkernel = 3\n"
                             "padding = 1\nkernel_w = 1\nstride_w = 2\npadding_w = 0\n[s]\ntype = conv2d\n"
                             "out_channels = 3\nkernel = 3\nkernel_w = 3\n[f]\ntype = flatten\n[l]\ntype = linear\n"
                             "out = 2\n[loss]\ntype = softmax_cross_entropy\n");
    const graph_node *c = node_named(g, "c"), *sq = node_named(g, "s");
    const snug_shape *out = &g->tensors[c->output].shape;
    assert_int_equal(out->dims[1], 9);                /* (9 + 2 - 3) / 1 + 1 */
    assert_int_equal(out->dims[2], (10 - 1) / 2 + 1); /* (10 + 0 - 1) / 2 + 1 */
    assert_int_equal(g->params[c->params[0]].shape.dims[3], 1);
    assert_int_equal(sq->p.conv2d.kernel_w, 0); /* the same as the height's: a square layer */
    snug_graph_free(g);
    expect_error(HEAD "[c]\ntype = conv2d\nout_channels = 2\nkernel = 1\nkernel_w = 3\nstride_w = 0\n", SNUG_E_ARG,
                 "bad.ini:3: layer 'c':", "stride_w 0");
}

static void test_errors_numbers(void **state) {
    (void)state;
    static const char *const bad_sizes[] = {"ten", "-3", "2.5", "1e3", "", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        char text[256], phrase[96];
        snprintf(text, sizeof text, HEAD "[f]\ntype = flatten\n[l]\ntype = linear\nout = %s\n", bad_sizes[i]);
        snprintf(phrase, sizeof phrase, "out = '%s' is not a whole number >= 0", bad_sizes[i]);
        expect_error(text, SNUG_E_FORMAT, "bad.ini:7: layer 'l':", phrase);
    }
    expect_error(HEAD "[d]\ntype = dropout\np = half\n", SNUG_E_FORMAT, "bad.ini:5: layer 'd':",
                 "p = 'half' is not a finite decimal number, e.g. 0.1 or 1e-5");
    expect_error(HEAD "[d]\ntype = dropout\np = 1e400\n", SNUG_E_FORMAT, "bad.ini:5: layer 'd':",
                 "p = '1e400' is too large for a float");
    expect_error("[model]\ninput = tokens 4\n[e]\ntype = embedding\nvocab = 8\ndim = 6\n[a]\ntype = linear\n"
                 "out = 18\n[s]\ntype = self_attention\nheads = 2\ncausal = maybe\n",
                 SNUG_E_FORMAT, "bad.ini:13: layer 's':", "causal = 'maybe' is not true or false");
    /* a value the builder refuses comes back with the file's prefix, without the builder's own */
    expect_error(HEAD "[d]\ntype = dropout\np = 1.5\n", SNUG_E_ARG, "bad.ini:3: layer 'd': ",
                 "drop probability p = 1.5 is outside [0, 1)");
    /* real numbers are decimal: a hexadecimal float is refused, not read */
    expect_error(HEAD "[n]\ntype = batchnorm2d\neps = 0x1p-3\n", SNUG_E_FORMAT, "bad.ini:5: layer 'n':",
                 "eps = '0x1p-3' is not a finite decimal number");
    expect_error(HEAD "[n]\ntype = batchnorm2d\neps = 0X1P-3\n", SNUG_E_FORMAT, "bad.ini:5: layer 'n':",
                 "is not a finite decimal number");
    expect_error(HEAD "[n]\ntype = batchnorm2d\neps = infinity\n", SNUG_E_FORMAT, "bad.ini:5: layer 'n':",
                 "eps = 'infinity' is not a finite decimal number");
    expect_error(HEAD "[n]\ntype = batchnorm2d\neps = 1e-5x\n", SNUG_E_FORMAT, "bad.ini:5: layer 'n':",
                 "is not a finite decimal number");
    /* a value a float cannot hold is reported as written, not as what it rounds to */
    expect_error(HEAD "[n]\ntype = batchnorm2d\neps = 1e-50\n", SNUG_E_FORMAT, "bad.ini:5: layer 'n':",
                 "eps = '1e-50' underflows a float (to 0)");
    expect_error(HEAD "[n]\ntype = batchnorm2d\nmomentum = -1e39\n", SNUG_E_FORMAT, "bad.ini:5: layer 'n':",
                 "momentum = '-1e39' is too large for a float");
    /* stride 0 is refused wherever it is written; maxpool2d's stride defaults to the kernel only when left out */
    expect_error(HEAD "[p]\ntype = maxpool2d\nkernel = 2\nstride = 0\n", SNUG_E_ARG, "bad.ini:3: layer 'p':",
                 "stride 0");
    /* a window's argmax is kept as its position in the window, one byte: 16x16 positions at most */
    expect_error("[model]\ninput = image 1 32 32\n[p]\ntype = maxpool2d\nkernel = 17\n", SNUG_E_ARG, "bad.ini:3: layer 'p':",
                 "kernel 17x17 is larger than 16x16");
    expect_error(HEAD "[c]\ntype = conv2d\nout_channels = 2\nkernel = 3\nstride = 0\n", SNUG_E_ARG,
                 "bad.ini:3: layer 'c':", "stride 0");
    expect_error(HEAD "[c]\ntype = conv_transpose2d\nout_channels = 2\nkernel = 2\nstride = 0\n", SNUG_E_ARG,
                 "bad.ini:3: layer 'c':", "stride 0");
}

static void test_errors_references(void **state) {
    (void)state;
    expect_error(HEAD "[r]\ntype = relu\ninput = nothere\n", SNUG_E_FORMAT, "bad.ini:5: layer 'r':",
                 "input = nothere: there is no layer 'nothere'");
    expect_error(HEAD "[a]\ntype = relu\ninput = b\n[b]\ntype = relu\ninput = a\n", SNUG_E_FORMAT,
                 "bad.ini:5: layer 'a':", "cycle or forward reference: 'b' is defined later (line 6)");
    expect_error(HEAD "[a]\ntype = relu\ninput = a\n", SNUG_E_FORMAT, "bad.ini:5: layer 'a':",
                 "reads its own output (a cycle)");
    expect_error(HEAD "[f]\ntype = flatten\n[a]\ntype = add\ninputs = f, z\n[z]\ntype = relu\n", SNUG_E_FORMAT,
                 "bad.ini:7: layer 'a':", "cycle or forward reference: 'z' is defined later (line 8)");
    expect_error("[model]\ninput = tokens 4\n[h]\ntype = linear_tied\nembedding = e\n[e]\ntype = embedding\n"
                 "vocab = 8\ndim = 4\n",
                 SNUG_E_FORMAT, "bad.ini:5: layer 'h':", "cycle or forward reference: 'e' is defined later");
    expect_error("[model]\ninput = tokens 4\n[e]\ntype = embedding\nvocab = 8\ndim = 4\n[n]\ntype = layernorm\n"
                 "[h]\ntype = linear_tied\nembedding = n\n",
                 SNUG_E_ARG, "bad.ini:9: layer 'h': ", "layer 'n' is a layernorm, not an embedding");
    expect_error(HEAD "[a]\ntype = relu\n[a]\ntype = gelu\n", SNUG_E_FORMAT, "bad.ini:5: layer 'a':",
                 "duplicate name: a section [a] is already on line 3");
    expect_error(HEAD "[input]\ntype = relu\n", SNUG_E_FORMAT, "bad.ini:3: layer 'input':", "names the model input");
    expect_error(HEAD "[a b]\ntype = relu\n", SNUG_E_FORMAT, "bad.ini:3: layer 'a b':",
                 "letters, digits, '_', '.' and '-' only (found ' ')");
    expect_error(HEAD "[]\ntype = relu\n", SNUG_E_FORMAT, "bad.ini:3:", "a section without a name");
}

static void test_errors_shapes_and_loss(void **state) {
    (void)state;
    expect_error(HEAD "[l]\ntype = linear\nout = 3\n", SNUG_E_SHAPE, "bad.ini:3: layer 'l':",
                 "expects (features) or (tokens, features), got (1, 4, 4): add a flatten");
    expect_error(HEAD "[f]\ntype = flatten\n[l]\ntype = linear\nout = 3\n[s]\ntype = add\ninputs = f, l\n",
                 SNUG_E_SHAPE, "bad.ini:8: layer 's':", "(16)");
    expect_error(HEAD "[c]\ntype = conv2d\nout_channels = 2\nkernel = 9\n", SNUG_E_SHAPE, "bad.ini:3: layer 'c':",
                 "is larger than its input");
    expect_error(HEAD "[f]\ntype = flatten\n", SNUG_E_FORMAT, "bad.ini:3: layer 'f':",
                 "the model has no loss: end the layer list with a layer of type softmax_cross_entropy");
    expect_error(HEAD, SNUG_E_FORMAT, "bad.ini:2: ", "the model has no loss");
    expect_error(HEAD "[f]\ntype = flatten\n[loss]\ntype = softmax_cross_entropy\n[r]\ntype = relu\n",
                 SNUG_E_FORMAT, "bad.ini:7: layer 'r':", "comes after the loss 'loss' (line 5)");
}

static void test_errors_model_section(void **state) {
    (void)state;
    expect_error("[a]\ntype = relu\n", SNUG_E_FORMAT, "bad.ini:1: ", "the first section must be [model]");
    expect_error("[model]\nname = x\n[loss]\ntype = softmax_cross_entropy\n", SNUG_E_FORMAT, "bad.ini:1: [model]:",
                 "no 'input' (add input = image C H W");
    expect_error("[model]\ninput = picture 1 2 3\n", SNUG_E_FORMAT, "bad.ini:2: [model]:",
                 "input = picture 1 2 3: write 'input = image C H W'");
    expect_error("[model]\ninput = image 1 -2 3\n", SNUG_E_FORMAT, "bad.ini:2: [model]:", "write 'input = image");
    expect_error("[model]\ninput = tokens 4 4\n", SNUG_E_FORMAT, "bad.ini:2: [model]:", "input = tokens T");
    expect_error("[model]\ninput = image 0 4 4\n", SNUG_E_ARG, "bad.ini:2: [model]:", "at least 1");
    expect_error("[model]\ninput = tokens 4\nbatch = 3\n", SNUG_E_FORMAT, "bad.ini:3: [model]:",
                 "unknown key 'batch' (it takes: name, input)");
    expect_error("[model]\ninput = tokens 4\n[model]\n", SNUG_E_FORMAT, "bad.ini:3: [model]:",
                 "duplicate name: a section [model] is already on line 1");
}

static void test_errors_syntax_and_files(void **state) {
    (void)state;
    expect_error("", SNUG_E_FORMAT, "bad.ini:1: ", "the model file is empty");
    expect_error("; only a comment\n\n   \n# another\n", SNUG_E_FORMAT, "bad.ini:1: ", "the model file is empty");
    expect_error(HEAD "[f]\ntype flatten\n", SNUG_E_FORMAT, "bad.ini:4: ", "syntax error (libinih)");
    expect_error(HEAD "[f\ntype = flatten\n", SNUG_E_FORMAT, "bad.ini:3: ", "syntax error (libinih)");
    /* the first problem by line wins, whoever finds it: libinih's syntax error on line 4, a duplicate on 7 */
    expect_error(HEAD "[a]\noops\n[b]\ntype = relu\n[a]\n", SNUG_E_FORMAT, "bad.ini:4: ", "syntax error");
    expect_error("input = image 1 2 2\n[model]\n", SNUG_E_FORMAT, "bad.ini:1: ", "'input' comes before any section");
    expect_error(HEAD "[d]\ntype = dropout\np = 0.1\n  0.2\n", SNUG_E_FORMAT, "bad.ini:6: ",
                 "an indented line continues the value of the key above");
    char text[512];
    snprintf(text, sizeof text, HEAD "[a]\ntype = relu\n; %0250d\n", 7);
    expect_error(text, SNUG_E_FORMAT, "bad.ini:5: ", "the line is longer than 197 characters");
    snug_error err = {0};
    assert_null(model_text(NULL, "x.ini", &err));
    assert_int_equal(err.status, SNUG_E_ARG);
}

/* ---- a layer whose output nothing reads ------------------------------------------------------------------ */

/* A layer nobody reads (almost always a typo in `input = NAME`) is refused by name, in a file at its line and in a
 * graph built in C by snug_graph_check once the loss is there; the loss itself is read by nobody. */
static void test_unread_layers_refused(void **state) {
    (void)state;
    expect_error(HEAD "[f]\ntype = flatten\n[a]\ntype = linear\nout = 3\n[b]\ntype = linear\ninput = f\nout = 3\n"
                      "[loss]\ntype = softmax_cross_entropy\n",
                 SNUG_E_FORMAT, "bad.ini:5: layer 'a':", "its output is never read");
    expect_error(HEAD "[r]\ntype = relu\n[f]\ntype = flatten\ninput = input\n[loss]\ntype = softmax_cross_entropy\n",
                 SNUG_E_FORMAT, "bad.ini:3: layer 'r':", "its output is never read");
    snug_graph_free(parse_ok(HEAD "[f]\ntype = flatten\n[a]\ntype = linear\nout = 3\n[b]\ntype = linear\n"
                                  "input = f\nout = 3\n[s]\ntype = add\ninputs = a, b\n"
                                  "[loss]\ntype = softmax_cross_entropy\n"));

    snug_graph *g = snug_graph_new("c");
    snug_tensor x = snug_flatten(g, "f", snug_input(g, "x", 1, 2, 2));
    snug_linear(g, "stray", x, 5);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK); /* still being built: a later layer may read it */
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", x, 3));
    snug_error err = {0};
    assert_int_equal(snug_graph_check(g, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "model 'c': the output of layer 'stray' (linear) is never read"));
    snug_plan_request req = snug_plan_request_default(4);
    snug_plan *plan = NULL;
    assert_int_equal(snug_plan_new(g, &req, &plan, NULL, &err), SNUG_E_ARG);
    assert_null(plan);
    snug_graph_free(g);
}

/* ---- text from the file reaches messages escaped -------------------------------------------------------- */

/* The text must fail like expect_error, with every byte of the message printable ASCII. */
static void expect_escaped(const char *text, snug_status st, const char *where, const char *phrase) {
    expect_error(text, st, where, phrase);
    snug_error err = {0};
    snug_graph *g = model_text(text, "bad.ini", &err);
    assert_null(g);
    for (const unsigned char *c = (const unsigned char *)err.message; *c; c++)
        if (*c < 0x20 || *c > 0x7e) fail_msg("byte 0x%02x in: %s", *c, err.message);
}

/* Keys, values, section names and types from the file are printed with \xNN for every byte outside printable
 * ASCII (and a backslash doubled): an escape sequence in a model file cannot drive the terminal. */
static void test_errors_escape_file_text(void **state) {
    (void)state;
    expect_escaped(HEAD "[f]\ntype = flatten\n[l]\ntype = linear\nout = \x1b[2J\n", SNUG_E_FORMAT,
                   "bad.ini:7: layer 'l':", "out = '\\x1b[2J' is not a whole number");
    expect_escaped(HEAD "[l]\ntype = \x1b[31mlinear\n", SNUG_E_FORMAT, "bad.ini:4: layer 'l':",
                   "unknown layer type '\\x1b[31mlinear'");
    expect_escaped(HEAD "[l]\ntype = relu\n\x1b[2J = 3\n", SNUG_E_FORMAT, "bad.ini:5: layer 'l':",
                   "unknown key '\\x1b[2J' for type relu");
    expect_escaped(HEAD "[l]\ntype = relu\nk\xc3\xa9y = 3\n", SNUG_E_FORMAT, "bad.ini:5: layer 'l':",
                   "unknown key 'k\\xc3\\xa9y'");
    expect_escaped(HEAD "[l]\ntype = relu\ninput = a\\b\x07\n", SNUG_E_FORMAT, "bad.ini:5: layer 'l':",
                   "input = a\\\\b\\x07: there is no layer 'a\\\\b\\x07'");
    expect_escaped(HEAD "[f]\ntype = flatten\n[a]\ntype = add\ninputs = \x1b\n", SNUG_E_FORMAT,
                   "bad.ini:7: layer 'a':", "inputs = \\x1b: give two layer names");
    expect_escaped(HEAD "[r]\ntype = relu\n\x1b = 1\n\x1b = 2\n", SNUG_E_FORMAT, "bad.ini:6: layer 'r':",
                   "'\\x1b' is given twice");
    expect_escaped(HEAD "[a\x1b[2Jb]\ntype = relu\n", SNUG_E_FORMAT, "bad.ini:3: layer 'a\\x1b[2Jb':",
                   "(found '\\x1b')");
    expect_escaped("\x1b[2J = 1\n[model]\n", SNUG_E_FORMAT, "bad.ini:1: ", "'\\x1b[2J' comes before any section");
    expect_escaped("[model]\ninput = image 1 \x1b 2\n", SNUG_E_FORMAT, "bad.ini:2: [model]:",
                   "input = image 1 \\x1b 2: write");
    expect_escaped("[model]\ninput = tokens 4\n\x9b = 1\n", SNUG_E_FORMAT, "bad.ini:3: [model]:",
                   "unknown key '\\x9b'");
    expect_escaped(HEAD "[f]\ntype = flatten\n[l]\ntype = linear\nout = 2\ninit_scale = \x1b\n", SNUG_E_FORMAT,
                   "bad.ini:8: layer 'l':", "init_scale = '\\x1b' is not");
    /* the helper itself: a text too long for it is cut, and says so */
    char long_text[300];
    memset(long_text, 0x1b, sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    const escaped cut = escape_text(long_text);
    assert_true(strlen(cut.text) < ESCAPED_MAX);
    assert_string_equal(cut.text + strlen(cut.text) - 7, "\\x1b...");
    assert_string_equal(escape_range("a\0b", 3).text, "a\\x00b");
    assert_string_equal(escape_text(NULL).text, "(null)");
    /* the model's name is printed by every message about the model: it is refused unless printable */
    expect_escaped("[model]\nname = net\x1b[2J\ninput = tokens 4\n", SNUG_E_FORMAT, "bad.ini:2: [model]:",
                   "name = 'net\\x1b[2J'");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_identical_to_c_builders),
        cmocka_unit_test(test_zoo_counts),
        cmocka_unit_test(test_zoo_shapes),
        cmocka_unit_test(test_classes_override),
        cmocka_unit_test(test_every_builtin_is_its_file),
        cmocka_unit_test(test_docs_list_every_type),
        cmocka_unit_test(test_keys_and_defaults),
        cmocka_unit_test(test_load_from_file),
        cmocka_unit_test(test_init_scale),
        cmocka_unit_test(test_errors_types_and_keys),
        cmocka_unit_test(test_conv2d_dilation_key),
        cmocka_unit_test(test_conv2d_width_keys),
        cmocka_unit_test(test_errors_numbers),
        cmocka_unit_test(test_errors_references),
        cmocka_unit_test(test_errors_shapes_and_loss),
        cmocka_unit_test(test_errors_model_section),
        cmocka_unit_test(test_errors_syntax_and_files),
        cmocka_unit_test(test_errors_escape_file_text),
        cmocka_unit_test(test_unread_layers_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

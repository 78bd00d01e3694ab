/* ONNX models (snug_graph_from_onnx) against the same networks built with snug's builders: tests/data/onnx/,
 * written by scripts/export_onnx.py. For mlp.onnx, squash_mlp.onnx (Sigmoid, Tanh), arith_mlp.onnx (Mul, Sub, Div,
 * Add of constant scalars), cnn.onnx and small_unet.onnx
 * (the image ops: the GroupNorm PyTorch exports, ConvTranspose, Resize, Concat, InstanceNormalization):
 *   - the plan (JSON with every buffer) equals the builder graph's, byte for byte;
 *   - the parameters start from the initializers: per tensor, element count, sum and sum of squares against the
 *     float64 values the script wrote beside the model (.sums), within float32 rounding of those sums;
 *   - given the same weights, one batch's loss and every gradient equal the builder graph's (the same ops on the
 *     same values: equal up to float rounding, checked at 1e-6 of each tensor's largest magnitude);
 *   - the parameters carry the initializers' names (the exporting module's state_dict keys).
 * And every refusal class of tests/data/onnx/bad/ gives its status with a message naming the node and op. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "graph/graph.h"
#include "ops/op.h"
#include "snug.h"

#define BATCH 8
#define SEED 41

static const char *data_path(const char *name, char *buf, size_t len) {
    const char *src = getenv("SNUG_SOURCE_DIR");
    snprintf(buf, len, "%s/tests/data/onnx/%s", src ? src : SNUG_SOURCE_DIR, name);
    return buf;
}

static snug_graph *load(const char *name) {
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_graph_from_onnx(data_path(name, path, sizeof path), &g, &err) != SNUG_OK) fail_msg("%s", err.message);
    return g;
}

/* The networks of scripts/export_onnx.py, through the builders, with the names the loader gives. */
static snug_graph *builder_mlp(void) {
    snug_graph *g = snug_graph_new("mlp");
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_flatten(g, "/flatten/Flatten", x);
    x = snug_linear(g, "fc1", x, 64);
    x = snug_relu(g, "/relu/Relu", x);
    x = snug_dropout(g, "/drop/Dropout", x, 0.25f);
    x = snug_linear(g, "/fc2/MatMul", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_graph *builder_squash_mlp(void) {
    snug_graph *g = snug_graph_new("squash_mlp");
    snug_tensor x = snug_flatten(g, "/flatten/Flatten", snug_input(g, "input", 1, 28, 28));
    x = snug_sigmoid(g, "/sigmoid/Sigmoid", snug_linear(g, "fc1", x, 32));
    x = snug_tanh(g, "/tanh/Tanh", snug_linear(g, "fc2", x, 16));
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc3", x, 10));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_graph *builder_arith_mlp(void) {
    snug_graph *g = snug_graph_new("arith_mlp");
    snug_tensor x = snug_flatten(g, "/flatten/Flatten", snug_input(g, "input", 1, 28, 28));
    x = snug_tanh(g, "/tanh/Tanh", snug_scale_shift(g, "/Mul", snug_linear(g, "fc1", x, 32), 0.5f, 0.0f));
    x = snug_scale_shift(g, "/Add", snug_scale_shift(g, "/Div", snug_scale_shift(g, "/Sub", x, -1.0f, 1.0f), 0.25f,
                                                     0.0f), 1.0f, 0.25f);
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc2", x, 10));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_graph *builder_cnn(void) {
    snug_graph *g = snug_graph_new("cnn");
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_conv2d(g, "conv1", x, 8, 3, 1, 1);
    x = snug_batchnorm2d(g, "bn1", x, 1e-5f, 0.1f);
    x = snug_relu(g, "/relu1/Relu", x);
    snug_tensor p = snug_maxpool2d(g, "/pool/MaxPool", x, 2, 2);
    x = snug_conv2d_no_bias(g, "conv2", p, 8, 3, 1, 1, 1);
    x = snug_batchnorm2d(g, "bn2", x, 1e-5f, 0.1f);
    x = snug_add(g, "/Add", x, p);
    x = snug_relu(g, "/relu2/Relu", x);
    x = snug_conv2d(g, "conv3", x, 16, 3, 2, 1);
    x = snug_relu(g, "/relu3/Relu", x);
    x = snug_global_avgpool(g, "/gap/GlobalAveragePool", x);
    x = snug_linear(g, "fc", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

/* small_unet.onnx: the GroupNorm PyTorch exports, ConvTranspose, Resize, Concat of three and InstanceNormalization. */
static snug_graph *builder_small_unet(void) {
    snug_graph *g = snug_graph_new("small_unet");
    snug_tensor x = snug_input(g, "input", 1, 28, 28);
    x = snug_conv2d(g, "enc.conv", x, 8, 3, 1, 1);
    x = snug_groupnorm(g, "enc.gn", x, 2, 1e-5f);
    snug_tensor skip = snug_relu(g, "/enc/relu/Relu", x);
    snug_tensor pooled = snug_maxpool2d(g, "/pool/MaxPool", skip, 2, 2);
    x = snug_conv_transpose2d(g, "up", pooled, 8, 2, 2, 0);
    snug_tensor z = snug_upsample_nearest2d(g, "/upsample/Resize", pooled, 2);
    x = snug_concat(g, "Concat_0", snug_concat(g, "/Concat", skip, x), z);
    x = snug_groupnorm(g, "inorm", x, 24, 1e-5f);
    x = snug_relu(g, "/relu/Relu", x);
    x = snug_global_avgpool(g, "/gap/GlobalAveragePool", x);
    x = snug_linear(g, "fc", x, 10);
    snug_softmax_cross_entropy(g, "loss", x);
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    return g;
}

static snug_plan *plan_of(const snug_graph *g) {
    snug_plan_request req = snug_plan_request_default(BATCH);
    req.micro_batch = BATCH;
    req.checkpoint.kind = SNUG_CHECKPOINT_NONE;
    snug_plan *p = NULL;
    snug_error err = {0};
    if (snug_plan_new(g, &req, &p, NULL, &err) != SNUG_OK) fail_msg("%s", err.message);
    return p;
}

static char *plan_json(const snug_graph *g) {
    snug_plan_set *s = NULL;
    snug_error err = {0};
    if (snug_plan_set_new(plan_of(g), &s, &err) != SNUG_OK) fail_msg("%s", err.message);
    char *json = snug_plan_set_json(s, "model", true);
    snug_plan_set_free(s);
    assert_non_null(json);
    return json;
}

static void plans_equal(const char *file, snug_graph *(*build)(void)) {
    snug_graph *a = load(file), *b = build();
    char *ja = plan_json(a), *jb = plan_json(b);
    assert_string_equal(ja, jb);
    free(ja);
    free(jb);
    snug_graph_free(a);
    snug_graph_free(b);
}

static void test_mlp_plan(void **state) { (void)state; plans_equal("mlp.onnx", builder_mlp); }
static void test_squash_mlp_plan(void **state) { (void)state; plans_equal("squash_mlp.onnx", builder_squash_mlp); }
static void test_arith_mlp_plan(void **state) { (void)state; plans_equal("arith_mlp.onnx", builder_arith_mlp); }
static void test_cnn_plan(void **state) { (void)state; plans_equal("cnn.onnx", builder_cnn); }
static void test_small_unet_plan(void **state) { (void)state; plans_equal("small_unet.onnx", builder_small_unet); }

static snug_trainer *trainer_of(snug_plan *p) {
    snug_train_config cfg = snug_train_config_default();
    cfg.seed = SEED;
    snug_trainer *tr = NULL;
    snug_error err = {0};
    if (snug_trainer_new(p, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    return tr;
}

/* Every initializer of the .sums file is a parameter of that name whose start values have its sums. */
static void check_initial_values(snug_trainer *tr, const char *sums_file) {
    char path[1024], name[256];
    FILE *f = fopen(data_path(sums_file, path, sizeof path), "r");
    assert_non_null(f);
    size_t numel;
    double sum, sq;
    int found = 0;
    while (fscanf(f, "%255s %zu %lf %lf", name, &numel, &sum, &sq) == 4) {
        bool seen = false;
        for (size_t i = 0; i < snug_trainer_param_count(tr) && !seen; i++) {
            size_t n;
            float *v, *g;
            if (strcmp(snug_trainer_param(tr, i, &n, &v, &g), name) != 0) continue;
            seen = true;
            assert_int_equal(n, numel);
            double s = 0, q = 0, l1 = 0;
            for (size_t j = 0; j < n; j++) s += v[j], q += (double)v[j] * v[j], l1 += fabs(v[j]);
            /* the file's sums are of the same float32 values in float64: only summation order differs */
            assert_true(fabs(s - sum) <= 1e-9 * l1 + 1e-12);
            assert_true(fabs(q - sq) <= 1e-9 * sq + 1e-12);
        }
        if (!seen) fail_msg("no parameter named '%s'", name);
        found++;
    }
    fclose(f);
    assert_true(found > 0);
}

static snug_dataset *random_batch(void) {
    static float inputs[BATCH * 784];
    static int32_t labels[BATCH];
    for (size_t i = 0; i < BATCH * 784; i++) inputs[i] = (float)snug_rng_uniform(SEED, 1, i);
    for (size_t i = 0; i < BATCH; i++) labels[i] = (int32_t)(snug_rng_uniform(SEED, 2, i) * 10) % 10;
    snug_dataset *ds = NULL;
    snug_error err = {0};
    if (snug_dataset_from_memory(inputs, labels, BATCH, 1, 28, 28, 10, &ds, &err) != SNUG_OK) fail_msg("%s", err.message);
    return ds;
}

static double gradients(snug_trainer *tr, const snug_dataset *ds) {
    size_t idx[BATCH];
    for (size_t i = 0; i < BATCH; i++) idx[i] = i;
    double loss = 0;
    snug_error err = {0};
    if (snug_trainer_gradients(tr, ds, idx, BATCH, &loss, &err) != SNUG_OK) fail_msg("%s", err.message);
    return loss;
}

static void same_training(const char *file, const char *sums, snug_graph *(*build)(void)) {
    snug_graph *ga = load(file), *gb = build();
    snug_plan *pa = plan_of(ga), *pb = plan_of(gb);
    snug_trainer *a = trainer_of(pa), *b = trainer_of(pb);
    check_initial_values(a, sums);
    assert_int_equal(snug_trainer_param_count(a), snug_trainer_param_count(b));
    for (size_t i = 0; i < snug_trainer_param_count(a); i++) { /* b starts from a's weights */
        size_t na, nb;
        float *va, *vb, *g;
        snug_trainer_param(a, i, &na, &va, &g);
        snug_trainer_param(b, i, &nb, &vb, &g);
        assert_int_equal(na, nb);
        memcpy(vb, va, na * sizeof *va);
    }
    snug_dataset *ds = random_batch();
    const double la = gradients(a, ds), lb = gradients(b, ds);
    assert_true(isfinite(la) && fabs(la - lb) <= 1e-6 * fabs(lb));
    for (size_t i = 0; i < snug_trainer_param_count(a); i++) {
        size_t n;
        float *va, *vb, *ga_, *gb_;
        snug_trainer_param(a, i, &n, &va, &ga_);
        snug_trainer_param(b, i, &n, &vb, &gb_);
        float *x = ga_ ? ga_ : va, *y = gb_ ? gb_ : vb; /* buffers: the running statistics after forward */
        double maxabs = 0, diff = 0;
        for (size_t j = 0; j < n; j++) {
            maxabs = fmax(maxabs, fabs(y[j]));
            diff = fmax(diff, fabs((double)x[j] - y[j]));
        }
        if (diff > 1e-6 * maxabs) fail_msg("%s: differs by %g (largest %g)", snug_trainer_param(a, i, NULL, NULL, NULL),
                                           diff, maxabs);
    }
    snug_dataset_free(ds);
    snug_trainer_free(a);
    snug_trainer_free(b);
    snug_plan_free(pa);
    snug_plan_free(pb);
    snug_graph_free(ga);
    snug_graph_free(gb);
}

static void test_mlp_training(void **state) { (void)state; same_training("mlp.onnx", "mlp.sums", builder_mlp); }
static void test_squash_mlp_training(void **state) {
    (void)state;
    same_training("squash_mlp.onnx", "squash_mlp.sums", builder_squash_mlp);
}
static void test_arith_mlp_training(void **state) {
    (void)state;
    same_training("arith_mlp.onnx", "arith_mlp.sums", builder_arith_mlp);
}
static void test_cnn_training(void **state) { (void)state; same_training("cnn.onnx", "cnn.sums", builder_cnn); }
static void test_small_unet_training(void **state) {
    (void)state;
    same_training("small_unet.onnx", "small_unet.sums", builder_small_unet);
}

/* A layer without bias in the file (conv2) has none in snug either: its weight is its only parameter, so the
 * saved weights are the module's state_dict keys, no more. */
static void test_missing_bias_stays_missing(void **state) {
    (void)state;
    snug_graph *g = load("cnn.onnx");
    snug_plan *p = plan_of(g);
    snug_trainer *tr = trainer_of(p);
    bool weight = false;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        const char *name = snug_trainer_param(tr, i, NULL, NULL, NULL);
        assert_string_not_equal(name, "conv2.bias");
        weight |= strcmp(name, "conv2.weight") == 0;
    }
    assert_true(weight);
    snug_trainer_free(tr);
    snug_plan_free(p);
    snug_graph_free(g);
}

/* Each bad file: its status, and a message holding every expected piece. */
static void refused(const char *file, snug_status want, int n, ...) {
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    snug_status s = snug_graph_from_onnx(data_path(file, path, sizeof path), &g, &err);
    assert_null(g);
    if (s != want) fail_msg("%s: status %d, want %d: %s", file, s, want, err.message);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *piece = va_arg(ap, const char *);
        if (!strstr(err.message, piece)) fail_msg("%s: the message lacks '%s': %s", file, piece, err.message);
    }
    va_end(ap);
}

static void test_refusals(void **state) {
    (void)state;
    refused("bad/unknown_op.onnx", SNUG_E_ARG, 4, "node 2", "/relu1/Relu", "Elu, opset 15",
            "do_constant_folding=False");
    refused("bad/bad_attribute.onnx", SNUG_E_ARG, 3, "/conv1/Conv", "Conv, opset 15", "one dilation for both axes");
    refused("bad/dynamic_shape.onnx", SNUG_E_ARG, 2, "input 'input'", "dynamic");
    refused("bad/old_opset.onnx", SNUG_E_ARG, 2, "opset 11", "opset_version=13");
    refused("bad/overpadded_maxpool.onnx", SNUG_E_ARG, 3, "/pool/MaxPool", "MaxPool", "at most half the kernel");
    refused("bad/truncated.onnx", SNUG_E_FORMAT, 1, "not an ONNX model");
    refused("bad/garbage.onnx", SNUG_E_FORMAT, 1, "not an ONNX model");
    refused("bad/resize_linear.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Resize, opset 15", "not bilinear");
    refused("bad/conv_transpose_output_padding.onnx", SNUG_E_ARG, 3, "/conv1/Conv", "ConvTranspose, opset 15",
            "no output_padding");
    refused("bad/groupnorm_without_affine.onnx", SNUG_E_ARG, 3, "/gn1/InstanceNormalization",
            "InstanceNormalization, opset 15", "affine=True");
    refused("bad/add_constant.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Add, opset 15", "learned nn.Parameter");
    refused("bad/mul_per_channel.onnx", SNUG_E_ARG, 4, "/relu1/Relu", "Mul, opset 15", "initializer 'gain'",
            "persistent=False");
    refused("bad/mul_batch_constant.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Mul, opset 15", "along the batch");
    refused("bad/softmax_batch.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Softmax, opset 15", "along the batch axis");
    refused("bad/transpose_batch.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Transpose, opset 15",
            "keep the batch axis first");
    refused("bad/slice_negative_step.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Slice, opset 15", "positive steps only");
    refused("bad/split_batch.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Split, opset 15", "along the batch axis");
    refused("bad/unsqueeze_batch.onnx", SNUG_E_ARG, 3, "/relu1/Relu", "Unsqueeze, opset 15", "along the batch axis");
    refused("bad/softmax_output.onnx", SNUG_E_ARG, 3, "/softmax/Softmax", "Softmax, opset 15",
            "without its final Softmax");
    refused("no-such-file.onnx", SNUG_E_IO, 1, "cannot open");
}

/* Softmax, Transpose and Slice of computed tensors outside the patterns: snug's softmax and permute layers
 * under the node's name, a Slice of a whole axis nothing; each file plans. */
static void test_layout_ops(void **state) {
    (void)state;
    const struct { const char *file, *kind; } cases[] = {
        {"softmax_channels.onnx", "softmax"}, {"transpose_plane.onnx", "permute"}, {"slice_channels.onnx", NULL}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snug_graph *g = load(cases[k].file);
        const int at = graph_find_node(g, "/relu1/Relu");
        if (cases[k].kind) assert_string_equal(g->nodes[at].op->kind, cases[k].kind);
        else assert_int_equal(at, -1);
        snug_plan_request req = snug_plan_request_default(8);
        snug_plan *p = NULL;
        snug_error err = {0};
        if (snug_plan_new(g, &req, &p, NULL, &err) != SNUG_OK) fail_msg("%s: %s", cases[k].file, err.message);
        snug_plan_free(p);
        snug_graph_free(g);
    }
}

/* The zoo's entry point reads a name ending in .onnx as an ONNX model. */
static void test_model_builtin_reads_onnx(void **state) {
    (void)state;
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    assert_true(snug_model_is_file("x.onnx"));
    assert_int_equal(snug_model_builtin(data_path("mlp.onnx", path, sizeof path), &g, &err), SNUG_OK);
    assert_string_equal(snug_graph_name(g), "mlp");
    snug_graph_free(g);
    assert_int_equal(snug_model_builtin_classes(path, 3, &g, &err), SNUG_E_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_plan),
        cmocka_unit_test(test_cnn_plan),
        cmocka_unit_test(test_mlp_training),
        cmocka_unit_test(test_squash_mlp_plan),
        cmocka_unit_test(test_squash_mlp_training),
        cmocka_unit_test(test_arith_mlp_plan),
        cmocka_unit_test(test_arith_mlp_training),
        cmocka_unit_test(test_cnn_training),
        cmocka_unit_test(test_small_unet_plan),
        cmocka_unit_test(test_small_unet_training),
        cmocka_unit_test(test_missing_bias_stays_missing),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_layout_ops),
        cmocka_unit_test(test_model_builtin_reads_onnx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

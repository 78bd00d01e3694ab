/* The comparison with PyTorch's reference of one step (onnx_torch_ref.h). */
#include "onnx_torch_ref.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

const char *torch_ref_path(const char *name, char *buf, size_t len) {
    const char *d = getenv("SNUG_ONNX_TORCH_DIR");
    if (!d) fail_msg("SNUG_ONNX_TORCH_DIR is not set: run this test through ctest (its fixture exports the model)");
    snprintf(buf, len, "%s/%s", d, name);
    return buf;
}

static void *read_whole(const char *name, size_t *len) {
    char path[1024];
    FILE *f = fopen(torch_ref_path(name, path, sizeof path), "rb");
    if (!f) fail_msg("%s: missing; the CTest fixture writes it (scripts/export_onnx.py)", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, *len, f), *len);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

void torch_ref_load(torch_ref *r, const char *stem) {
    char name[256];
    size_t len;
    snprintf(name, sizeof name, "%s.json", stem);
    r->text = read_whole(name, &len);
    snprintf(name, sizeof name, "%s.f64", stem);
    r->values = read_whole(name, &len);
    r->index = cJSON_Parse(r->text);
    assert_non_null(r->index);
}

void torch_ref_free(torch_ref *r) {
    cJSON_Delete(r->index);
    free(r->text);
    free(r->values);
}

size_t torch_ref_micro_batch(const torch_ref *r, const char *onnx_case) {
    return (size_t)cJSON_GetObjectItem(cJSON_GetObjectItem(r->index, "micro_batch"), onnx_case)->valueint;
}

/* ||x - r|| / ||r|| (over 1 where r is 0), of snug's float32 values and of PyTorch float32's (stored as float64). */
static double rel_l2_float(const float *x, const double *r, size_t n) {
    double diff = 0, norm = 0;
    for (size_t j = 0; j < n; j++) diff += (x[j] - r[j]) * (x[j] - r[j]), norm += r[j] * r[j];
    return sqrt(diff) / (norm > 0 ? sqrt(norm) : 1.0);
}

static double rel_l2_double(const double *x, const double *r, size_t n) {
    double diff = 0, norm = 0;
    for (size_t j = 0; j < n; j++) diff += (x[j] - r[j]) * (x[j] - r[j]), norm += r[j] * r[j];
    return sqrt(diff) / (norm > 0 ? sqrt(norm) : 1.0);
}

static double bound_of(double torch32_rel) { return TORCH_REF_YARDSTICK * torch32_rel + TORCH_REF_FLOOR; }

/* The reference entry of tensor `name`, or NULL. */
static const cJSON *entry_of(const cJSON *tensors, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors) if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name) == 0) return t;
    return NULL;
}

/* PyTorch float32's relative deviation from float64 on tensor `name` in a case. */
static double torch32_dev(const torch_ref *r, const char *name, const char *onnx_case, const char *f32_case) {
    const cJSON *e = entry_of(cJSON_GetObjectItem(r->index, "tensors"), name);
    if (!e) fail_msg("'%s': not in the reference", name);
    const size_t n = (size_t)cJSON_GetObjectItem(e, "numel")->valuedouble;
    return rel_l2_double(r->values + (size_t)cJSON_GetObjectItem(e, f32_case)->valuedouble,
                         r->values + (size_t)cJSON_GetObjectItem(e, onnx_case)->valuedouble, n);
}

static void check_loss(const torch_ref *r, double loss, const char *onnx_case, const char *f32_case,
                       const char *yardstick_tensor) {
    const cJSON *losses = cJSON_GetObjectItem(r->index, "loss");
    const double want = cJSON_GetObjectItem(losses, onnx_case)->valuedouble;
    const double torch32 = cJSON_GetObjectItem(losses, f32_case)->valuedouble;
    const double limit = bound_of(fmax(fabs(torch32 - want) / fabs(want),
                                       torch32_dev(r, yardstick_tensor, onnx_case, f32_case)));
    printf("%s (micro-batch %zu): loss %.9f, PyTorch float64 %.9f, float32 %.9f (limit %.3g relative)\n", onnx_case,
           torch_ref_micro_batch(r, onnx_case), loss, want, torch32, limit);
    assert_true(fabs(loss - want) <= limit * fabs(want));
}

void torch_ref_check(const torch_ref *r, snug_trainer *tr, double loss, const char *onnx_case,
                     const char *loss_yardstick_tensor) {
    char f32_case[64];
    snprintf(f32_case, sizeof f32_case, "%s_float32", onnx_case);
    check_loss(r, loss, onnx_case, f32_case, loss_yardstick_tensor);
    const cJSON *tensors = cJSON_GetObjectItem(r->index, "tensors");
    double worst = 0, worst_share = 0;
    const char *worst_name = "", *share_name = "";
    int over = 0;
    assert_int_equal(snug_trainer_param_count(tr), (size_t)cJSON_GetArraySize(tensors));
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t n;
        float *v, *gr;
        const char *name = snug_trainer_param(tr, i, &n, &v, &gr);
        const cJSON *e = entry_of(tensors, name);
        if (!e) fail_msg("'%s': not in PyTorch's state_dict", name);
        assert_int_equal(cJSON_GetObjectItem(e, "numel")->valuedouble, (double)n);
        const double *ref = r->values + (size_t)cJSON_GetObjectItem(e, onnx_case)->valuedouble;
        const double *r32 = r->values + (size_t)cJSON_GetObjectItem(e, f32_case)->valuedouble;
        const float *x = gr ? gr : v; /* buffers: the running statistics after the forwards */
        const double rel = rel_l2_float(x, ref, n), limit = bound_of(rel_l2_double(r32, ref, n));
        if (rel > worst) worst = rel, worst_name = name;
        if (rel / limit > worst_share) worst_share = rel / limit, share_name = name;
        if (rel > limit) {
            printf("%s, '%s': relative L2 difference %.3g from PyTorch's float64 (limit %.3g: PyTorch float32 "
                   "%.3g)\n", onnx_case, name, rel, limit, rel_l2_double(r32, ref, n));
            over++;
        }
    }
    printf("%s: %zu tensors, the largest relative L2 difference %.3g ('%s'); the closest to its limit %.2f of it "
           "('%s')\n", onnx_case, snug_trainer_param_count(tr), worst, worst_name, worst_share, share_name);
    assert_int_equal(over, 0);
}

uint64_t torch_ref_lcg(uint64_t *state) {
    return *state = *state * 6364136223846793005ull + 1442695040888963407ull;
}

void torch_ref_check_step(const torch_ref *r, const char *file, const snug_dataset *ds, size_t batch,
                          const char *onnx_case, const char *loss_yardstick_tensor) {
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_graph_from_onnx(torch_ref_path(file, path, sizeof path), &g, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    snug_plan_request req = snug_plan_request_default(batch);
    req.micro_batch = torch_ref_micro_batch(r, onnx_case);
    req.checkpoint.kind = SNUG_CHECKPOINT_NONE;
    snug_plan *plan = NULL;
    if (snug_plan_new(g, &req, &plan, NULL, &err) != SNUG_OK) fail_msg("%s", err.message);
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr = NULL;
    if (snug_trainer_new(plan, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    size_t *idx = malloc(batch * sizeof *idx);
    assert_non_null(idx);
    for (size_t i = 0; i < batch; i++) idx[i] = i;
    double loss = 0;
    if (snug_trainer_gradients(tr, ds, idx, batch, &loss, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    torch_ref_check(r, tr, loss, onnx_case, loss_yardstick_tensor);
    free(idx);
    snug_trainer_free(tr);
    snug_plan_free(plan);
    snug_graph_free(g);
}

/* The token batch the reference describes (token_reference.py's batch): the LCG's state >> shift per token, then
 * per token the next state's as its target. tokens and targets hold sequences * context entries. */
static snug_dataset *token_batch(const cJSON *batch, size_t sequences, size_t context, size_t vocab, int shift,
                                 float *tokens, int32_t *targets) {
    uint64_t state = (uint64_t)cJSON_GetObjectItem(batch, "seed")->valuedouble;
    assert_string_equal(cJSON_GetObjectItem(batch, "generator")->valuestring, "lcg64");
    assert_int_equal(cJSON_GetObjectItem(batch, "sequences")->valueint, sequences);
    assert_int_equal(cJSON_GetObjectItem(batch, "tokens")->valueint, context);
    for (size_t i = 0; i < sequences * context; i++) tokens[i] = (float)(torch_ref_lcg(&state) >> shift);
    for (size_t i = 0; i < sequences * context; i++) targets[i] = (int32_t)(torch_ref_lcg(&state) >> shift);
    snug_dataset *ds = NULL;
    snug_error err = {0};
    const snug_shape sample = {.rank = 1, .dims = {context}};
    if (snug_dataset_from_arrays(tokens, sample, targets, context, sequences, vocab, &ds, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    return ds;
}

/* The batch the reference describes: the LCG's top 24 bits as k / 2^23 - 1 per input value (exact in float32),
 * the labels as listed. */
static snug_dataset *lcg_images(const cJSON *batch, size_t images, size_t c, size_t side, float *inputs,
                                int32_t *labels) {
    const cJSON *lab = cJSON_GetObjectItem(batch, "labels");
    uint64_t state = (uint64_t)cJSON_GetObjectItem(batch, "seed")->valuedouble;
    assert_string_equal(cJSON_GetObjectItem(batch, "generator")->valuestring, "lcg64");
    assert_int_equal(cJSON_GetObjectItem(batch, "images")->valueint, images);
    assert_int_equal(cJSON_GetArraySize(lab), images);
    for (size_t i = 0; i < images * c * side * side; i++)
        inputs[i] = (float)((double)(torch_ref_lcg(&state) >> 40) / 8388608.0 - 1.0);
    for (size_t i = 0; i < images; i++) labels[i] = (int32_t)cJSON_GetArrayItem(lab, (int)i)->valueint;
    snug_dataset *ds = NULL;
    snug_error err = {0};
    if (snug_dataset_from_memory(inputs, labels, images, c, side, side, 10, &ds, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    return ds;
}

void torch_ref_check_token_step(const char *stem, const char *file, size_t sequences, size_t context, size_t vocab,
                                int shift, const char *onnx_case, const char *loss_yardstick_tensor) {
    torch_ref ref;
    torch_ref_load(&ref, stem);
    float *tokens = malloc(sequences * context * sizeof *tokens);
    int32_t *targets = malloc(sequences * context * sizeof *targets);
    assert_true(tokens && targets);
    snug_dataset *ds = token_batch(cJSON_GetObjectItem(ref.index, "batch"), sequences, context, vocab, shift, tokens,
                                   targets);
    torch_ref_check_step(&ref, file, ds, sequences, onnx_case, loss_yardstick_tensor);
    snug_dataset_free(ds);
    free(tokens), free(targets);
    torch_ref_free(&ref);
}

void torch_ref_check_image_case(const char *stem, const char *file, size_t images, size_t c, size_t side,
                                const char *onnx_case, const char *loss_yardstick_tensor) {
    torch_ref ref;
    torch_ref_load(&ref, stem);
    float *inputs = malloc(images * c * side * side * sizeof *inputs);
    int32_t *labels = malloc(images * sizeof *labels);
    assert_true(inputs && labels);
    snug_dataset *ds = lcg_images(cJSON_GetObjectItem(ref.index, "batch"), images, c, side, inputs, labels);
    torch_ref_check_step(&ref, file, ds, images, onnx_case, loss_yardstick_tensor);
    snug_dataset_free(ds);
    free(inputs);
    free(labels);
    torch_ref_free(&ref);
}

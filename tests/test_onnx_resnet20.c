/* The zoo's resnet20 as a PyTorch module (scripts/resnet20_reference.py), exported by PyTorch at 1x16x16 (the
 * CTest fixture onnx_resnet20_export writes $SNUG_ONNX_TORCH_DIR/resnet20_16.onnx beside resnet20.onnx, the
 * zoo's 1x32x32 that cli_onnx_resnet20 plans against `--model resnet20`), against PyTorch's float64 reference of
 * one step from the same weights: 4 images in one pass and as 2 micro-batches of 2 (each normalising over its
 * own statistics, as PyTorch's forwards of 2 do), the loss, every gradient and every running statistic per
 * tensor within 4 times PyTorch float32's own deviation plus 1e-5 (onnx_torch_ref.h). The script checked that
 * every ReLU decision of every forward lies far from its tie, so that every float32 engine takes float64's
 * branch. The convolutions' biases feed BatchNorms, so their gradients are 0 but for rounding, and so are their
 * limits: PyTorch float32's deviation there is as large as its value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "onnx_torch_ref.h"
#include "snug.h"

#define BATCH 4
#define SIDE 16
#define PIXELS (SIDE * SIDE)

/* The batch the reference describes: the LCG's top 24 bits as k / 2^23 - 1 per input value (exact in float32),
 * the labels as listed. */
static snug_dataset *reference_batch(const cJSON *batch, float *inputs, int32_t *labels) {
    const cJSON *lab = cJSON_GetObjectItem(batch, "labels");
    uint64_t state = (uint64_t)cJSON_GetObjectItem(batch, "seed")->valuedouble;
    assert_string_equal(cJSON_GetObjectItem(batch, "generator")->valuestring, "lcg64");
    assert_int_equal(cJSON_GetObjectItem(batch, "images")->valueint, BATCH);
    assert_int_equal(cJSON_GetArraySize(lab), BATCH);
    for (size_t i = 0; i < BATCH * PIXELS; i++)
        inputs[i] = (float)((double)(torch_ref_lcg(&state) >> 40) / 8388608.0 - 1.0);
    for (int i = 0; i < BATCH; i++) labels[i] = (int32_t)cJSON_GetArrayItem(lab, i)->valueint;
    snug_dataset *ds = NULL;
    snug_error err = {0};
    if (snug_dataset_from_memory(inputs, labels, BATCH, 1, SIDE, SIDE, 10, &ds, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    return ds;
}

static void check_case(const char *onnx_case) {
    torch_ref ref;
    torch_ref_load(&ref, "resnet20_16_ref");
    static float inputs[BATCH * PIXELS];
    int32_t labels[BATCH];
    snug_dataset *ds = reference_batch(cJSON_GetObjectItem(ref.index, "batch"), inputs, labels);
    torch_ref_check_step(&ref, "resnet20_16.onnx", ds, BATCH, onnx_case, "fc.bias");
    snug_dataset_free(ds);
    torch_ref_free(&ref);
}

static void test_one_pass(void **state) { (void)state, check_case("one_pass"); }
static void test_micro_batches(void **state) { (void)state, check_case("micro_batches"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_pass),
        cmocka_unit_test(test_micro_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The zoo's unet as a PyTorch module (scripts/unet_reference.py), exported by PyTorch at 1x32x32 (the CTest
 * fixture onnx_unet_export writes $SNUG_ONNX_TORCH_DIR/unet32.onnx), against PyTorch's float64 reference of one
 * step from the same weights: 2 images with a target per pixel, in one pass and as 2 micro-batches of 1, the loss
 * and every gradient per tensor within 4 times PyTorch float32's own deviation plus 1e-5 (onnx_torch_ref.h).
 * It exercises what a UNet export needs: ConvTranspose, Concat of the skips, the GroupNorm PyTorch exports
 * (Reshape, InstanceNormalization, Reshape, Mul, Add) as one groupnorm with the module's weight and bias, and the
 * per-pixel cross-entropy an image-shaped output feeds. Then the same for its variant unet32_nearest.onnx,
 * which up-samples with nn.Upsample(scale_factor=2) (Resize, snug's upsample_nearest2d). The script checked
 * that every ReLU and max-pool decision of the batch lies far from its tie, so that every float32 engine takes
 * float64's branch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "onnx_torch_ref.h"
#include "snug.h"

#define BATCH 2
#define SIDE 32
#define PIXELS (SIDE * SIDE)

/* The batch the reference describes: the LCG's top 24 bits as k / 2^23 - 1 per input value, then per pixel the
 * next state's top bit as its class. */
static snug_dataset *reference_batch(const cJSON *batch, float *inputs, int32_t *targets) {
    uint64_t state = (uint64_t)cJSON_GetObjectItem(batch, "seed")->valuedouble;
    const uint64_t mul = 6364136223846793005ull, add = 1442695040888963407ull;
    assert_string_equal(cJSON_GetObjectItem(batch, "generator")->valuestring, "lcg64");
    assert_int_equal(cJSON_GetObjectItem(batch, "images")->valueint, BATCH);
    for (size_t i = 0; i < BATCH * PIXELS; i++) {
        state = state * mul + add;
        inputs[i] = (float)((double)(state >> 40) / 8388608.0 - 1.0);
    }
    for (size_t i = 0; i < BATCH * PIXELS; i++) {
        state = state * mul + add;
        targets[i] = (int32_t)(state >> 63);
    }
    snug_dataset *ds = NULL;
    snug_error err = {0};
    const snug_shape sample = {.rank = 3, .dims = {1, SIDE, SIDE}};
    if (snug_dataset_from_arrays(inputs, sample, targets, PIXELS, BATCH, 2, &ds, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    return ds;
}

/* The export STEM.onnx against its reference STEM_ref in one case. */
static void check_case(const char *stem, const char *onnx_case) {
    torch_ref ref;
    char name[256];
    snprintf(name, sizeof name, "%s_ref", stem);
    torch_ref_load(&ref, name);
    static float inputs[BATCH * PIXELS];
    static int32_t targets[BATCH * PIXELS];
    snug_dataset *ds = reference_batch(cJSON_GetObjectItem(ref.index, "batch"), inputs, targets);
    snprintf(name, sizeof name, "%s.onnx", stem);
    torch_ref_check_step(&ref, name, ds, BATCH, onnx_case, "head.bias");
    snug_dataset_free(ds);
    torch_ref_free(&ref);
}

static void test_one_pass(void **state) { (void)state, check_case("unet32", "one_pass"); }
static void test_micro_batches(void **state) { (void)state, check_case("unet32", "micro_batches"); }
static void test_nearest_one_pass(void **state) { (void)state, check_case("unet32_nearest", "one_pass"); }
static void test_nearest_micro_batches(void **state) { (void)state, check_case("unet32_nearest", "micro_batches"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_pass),
        cmocka_unit_test(test_micro_batches),
        cmocka_unit_test(test_nearest_one_pass),
        cmocka_unit_test(test_nearest_micro_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

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

static void check_case(const char *onnx_case) {
    torch_ref_check_image_case("resnet20_16_ref", "resnet20_16.onnx", BATCH, 1, SIDE, onnx_case, "fc.bias");
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

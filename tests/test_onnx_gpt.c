/* The zoo's gpt as a PyTorch module (scripts/gpt_twin.py), exported by PyTorch at opsets 13 and 17 (the CTest
 * fixture onnx_gpt_export writes $SNUG_ONNX_TORCH_DIR/gpt_opset13.onnx and gpt_opset17.onnx), against PyTorch's
 * float64 reference of one step from the same weights: 2 sequences of 256 tokens with a target per token, in one
 * pass and as 2 micro-batches of 1, the loss and every gradient per tensor within 4 times PyTorch float32's own
 * deviation plus 1e-5 (onnx_torch_ref.h). It exercises what a GPT export needs: nn.Embedding (Gather), wpe[:T],
 * the LayerNorm pattern (opset 13) and LayerNormalization (opset 17), nn.Linear on sequences, the causal
 * attention fused into snug's self_attention, the Erf GELU, and the head tied to wte, whose gradient sums the
 * embedding's and the head's. The network is smooth, so no decision of the batch needs to be kept from a tie. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "onnx_torch_ref.h"
#include "snug.h"

#define BATCH 2
#define CONTEXT 256
#define VOCAB 256

/* The export FILE against the reference gpt_ref in one case, on its batch of tokens of 8 bits; the loss's
 * yardstick is ln_f.bias's gradient, a function of the softmax probabilities through the tied head. */
static void check_case(const char *file, const char *onnx_case) {
    torch_ref_check_token_step("gpt_ref", file, BATCH, CONTEXT, VOCAB, 56, onnx_case, "ln_f.bias");
}

static void test_opset13_one_pass(void **state) { (void)state, check_case("gpt_opset13.onnx", "one_pass"); }
static void test_opset13_micro_batches(void **state) { (void)state, check_case("gpt_opset13.onnx", "micro_batches"); }
static void test_opset17_one_pass(void **state) { (void)state, check_case("gpt_opset17.onnx", "one_pass"); }
static void test_opset17_micro_batches(void **state) { (void)state, check_case("gpt_opset17.onnx", "micro_batches"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opset13_one_pass),
        cmocka_unit_test(test_opset13_micro_batches),
        cmocka_unit_test(test_opset17_one_pass),
        cmocka_unit_test(test_opset17_micro_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

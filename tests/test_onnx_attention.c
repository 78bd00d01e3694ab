/* Attention two ways (scripts/attention_twin.py), exported by PyTorch (the CTest fixture onnx_attention_export
 * writes $SNUG_ONNX_TORCH_DIR/attention.onnx): an encoder block without a mask, fused into snug's self_attention
 * with causal off, and a block written by hand that no pattern matches (a Split of the qkv projection in [C, 2C]
 * and Slices of the second part, Reshape and Transpose into heads, a batched MatMul, a Softmax over the queries, a
 * MatMul broadcast over the heads, v through an nn.Linear as (1, T, C)), mapped node by node onto snug's permute,
 * slice, reshape, softmax and matmul (the Linear: a linear over the rows of a reshape).
 * Against PyTorch's float64 reference of one step from the same weights: 4 sequences of 16 tokens with a target
 * per token, in one pass and as 2 micro-batches of 2, the loss and every gradient per tensor within 4 times
 * PyTorch float32's own deviation plus 1e-5 (onnx_torch_ref.h). The network is smooth (softmax, LayerNorm), so no
 * decision of the batch needs to be kept from a tie. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "onnx_torch_ref.h"
#include "ops/op.h"
#include "snug.h"

#define BATCH 4
#define CONTEXT 16
#define VOCAB 256

/* The export against the reference in one case, on its batch of tokens of 8 bits; the loss's yardstick is the
 * head's bias gradient, a function of the softmax probabilities. */
static void check_case(const char *onnx_case) {
    torch_ref_check_token_step("attention_ref", "attention.onnx", BATCH, CONTEXT, VOCAB, 56, onnx_case, "head.bias");
}

/* What the loader made of the two blocks: one attention layer, not causal (the encoder), and the hand-written
 * block's layers (Split [C, 2C] and two Slices: four slices; q and k^T permuted, the heads' outputs permuted
 * back; the Softmax; q k^T and the broadcast product). */
static void test_layers(void **state) {
    (void)state;
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_graph_from_onnx(torch_ref_path("attention.onnx", path, sizeof path), &g, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    const struct { const op_desc *op; int count; } want[] = {
        {&op_attention, 1}, {&op_slice, 4}, {&op_permute, 3}, {&op_softmax, 1}, {&op_matmul, 2}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int count = 0;
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].op == want[k].op) {
                count++;
                if (want[k].op == &op_attention) assert_false(g->nodes[i].p.attention.causal);
            }
        if (count != want[k].count) fail_msg("%d %s layers, %d expected", count, want[k].op->kind, want[k].count);
    }
    /* nn.Linear on v as (1, T, C): one linear over its rows */
    const int vmix = graph_find_node(g, "mix.vmix");
    assert_true(vmix >= 0 && g->nodes[vmix].op == &op_linear);
    snug_graph_free(g);
}

static void test_one_pass(void **state) { (void)state, check_case("one_pass"); }
static void test_micro_batches(void **state) { (void)state, check_case("micro_batches"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layers),
        cmocka_unit_test(test_one_pass),
        cmocka_unit_test(test_micro_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

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

/* The gradients of one step of the export on the batch ds under checkpoint policy `policy`, into grads (the
 * parameters' in order, concatenated); the loss into *loss. */
static void step_gradients(const snug_dataset *ds, snug_checkpoint_policy policy, float *grads, size_t cap,
                           double *loss) {
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_graph_from_onnx(torch_ref_path("attention.onnx", path, sizeof path), &g, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    snug_plan_request req = snug_plan_request_default(BATCH);
    req.micro_batch = BATCH;
    req.checkpoint = policy;
    snug_plan *plan = NULL;
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr = NULL;
    if (snug_plan_new(g, &req, &plan, NULL, &err) != SNUG_OK || snug_trainer_new(plan, &cfg, &tr, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    const size_t idx[BATCH] = {0, 1, 2, 3};
    if (snug_trainer_gradients(tr, ds, idx, BATCH, loss, &err) != SNUG_OK) fail_msg("%s", err.message);
    size_t at = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t n;
        float *v, *gr;
        snug_trainer_param(tr, i, &n, &v, &gr);
        assert_true(gr && at + n <= cap);
        memcpy(grads + at, gr, n * sizeof *gr);
        at += n;
    }
    snug_trainer_free(tr);
    snug_plan_free(plan);
    snug_graph_free(g);
}

/* Checkpointing recomputes the layout layers, the softmax and the products from their kept inputs: the same
 * loss and gradients, bit for bit, as keeping every activation. */
static void test_recompute_is_bitwise(void **state) {
    (void)state;
    static float tokens[BATCH * CONTEXT];
    static int32_t targets[BATCH * CONTEXT];
    uint64_t lcg = 57;
    for (size_t i = 0; i < BATCH * CONTEXT; i++) tokens[i] = (float)(torch_ref_lcg(&lcg) >> 56);
    for (size_t i = 0; i < BATCH * CONTEXT; i++) targets[i] = (int32_t)(torch_ref_lcg(&lcg) >> 56);
    snug_dataset *ds = NULL;
    snug_error err = {0};
    const snug_shape sample = {.rank = 1, .dims = {CONTEXT}};
    if (snug_dataset_from_arrays(tokens, sample, targets, CONTEXT, BATCH, VOCAB, &ds, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    enum { CAP = 1 << 17 };
    static float kept[CAP], again[CAP];
    double loss_kept, loss_again;
    step_gradients(ds, (snug_checkpoint_policy){.kind = SNUG_CHECKPOINT_NONE}, kept, CAP, &loss_kept);
    const snug_checkpoint_policy policies[] = {{.kind = SNUG_CHECKPOINT_EVERY, .every = 1},
                                               {.kind = SNUG_CHECKPOINT_SQRT}};
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++) {
        memset(again, 0, sizeof again);
        step_gradients(ds, policies[k], again, CAP, &loss_again);
        assert_memory_equal(&loss_again, &loss_kept, sizeof loss_kept);
        assert_memory_equal(again, kept, sizeof kept);
    }
    snug_dataset_free(ds);
}

static void test_one_pass(void **state) { (void)state, check_case("one_pass"); }
static void test_micro_batches(void **state) { (void)state, check_case("micro_batches"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layers),
        cmocka_unit_test(test_recompute_is_bitwise),
        cmocka_unit_test(test_one_pass),
        cmocka_unit_test(test_micro_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

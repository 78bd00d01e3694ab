/* Broadcasting arithmetic as PyTorch exports it (scripts/se_reference.py): a per-channel normalisation by
 * Constant nodes, SiLU written as x * sigmoid(x), a squeeze-excitation product (N, 8, 16, 16) * (N, 8, 1, 1) and a
 * residual Sub and Div of computed tensors, exported by PyTorch at 3x16x16 (the CTest fixture onnx_se_export
 * writes $SNUG_ONNX_TORCH_DIR/se.onnx), against PyTorch's float64 reference of one step from the same weights: 4
 * images in one pass and as 2 micro-batches of 2, the loss and every gradient per tensor within 4 times PyTorch
 * float32's own deviation plus 1e-5 (onnx_torch_ref.h). The script checked that every ReLU decision lies far from
 * its tie, so that every float32 engine takes float64's branch. The normalisation's mean and std are constants,
 * not parameters: the reference has no gradient for them, and torch_ref_check finds every parameter snug has.
 * Every checkpointing policy gives the gradients of none bit for bit (recompute replays the arithmetic). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "onnx_torch_ref.h"
#include "snug.h"

#define BATCH 4
#define CHANNELS 3
#define SIDE 16

static void check_case(const char *onnx_case) {
    torch_ref_check_image_case("se_ref", "se.onnx", BATCH, CHANNELS, SIDE, onnx_case, "fc.bias");
}

static void test_one_pass(void **state) { (void)state, check_case("one_pass"); }
static void test_micro_batches(void **state) { (void)state, check_case("micro_batches"); }

#define GRADS_MAX 4096 /* the model's 3,130 parameters, with room */

/* Every parameter's gradient of one step on the reference's batch in one pass under checkpoint `policy`, into
 * grads; how many. *segments: the segments the plan recomputes. */
static size_t step_grads(const char *policy, float *grads, size_t *segments) {
    char path[1024];
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_graph_from_onnx(torch_ref_path("se.onnx", path, sizeof path), &g, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    snug_plan_request req = snug_plan_request_default(BATCH);
    req.micro_batch = BATCH;
    if (snug_parse_checkpoint(policy, &req.checkpoint, &err) != SNUG_OK) fail_msg("%s", err.message);
    snug_plan *plan = NULL;
    if (snug_plan_new(g, &req, &plan, NULL, &err) != SNUG_OK) fail_msg("%s", err.message);
    snug_plan_summary sum;
    snug_plan_summarize(plan, &sum);
    *segments = sum.segments;
    snug_train_config cfg = snug_train_config_default();
    snug_trainer *tr = NULL;
    if (snug_trainer_new(plan, &cfg, &tr, &err) != SNUG_OK) fail_msg("%s", err.message);
    static float inputs[BATCH * CHANNELS * SIDE * SIDE];
    int32_t labels[BATCH];
    for (size_t i = 0; i < BATCH * CHANNELS * SIDE * SIDE; i++) inputs[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < BATCH; i++) labels[i] = 3 * i % 10;
    snug_dataset *ds = NULL;
    if (snug_dataset_from_memory(inputs, labels, BATCH, CHANNELS, SIDE, SIDE, 10, &ds, &err) != SNUG_OK)
        fail_msg("%s", err.message);
    const size_t idx[BATCH] = {0, 1, 2, 3};
    double loss = 0;
    if (snug_trainer_gradients(tr, ds, idx, BATCH, &loss, &err) != SNUG_OK) fail_msg("%s", err.message);
    size_t at = 0;
    for (size_t i = 0; i < snug_trainer_param_count(tr); i++) {
        size_t n;
        float *v, *gr;
        snug_trainer_param(tr, i, &n, &v, &gr);
        assert_true(at + n <= GRADS_MAX);
        for (size_t j = 0; j < n; j++) grads[at++] = gr[j];
    }
    snug_dataset_free(ds);
    snug_trainer_free(tr);
    snug_plan_free(plan);
    snug_graph_free(g);
    return at;
}

/* Recomputed segments replay the arithmetic (constants included) bit for bit: the gradients of every
 * checkpointing policy are those of keeping everything, to the bit. Some of them recompute (a segment of one
 * layer the planner spares is kept whole). */
static void test_checkpoints_bitwise(void **state) {
    (void)state;
    static float kept[GRADS_MAX], recomputed[GRADS_MAX];
    size_t segments = 0, recomputing = 0;
    const size_t n = step_grads("none", kept, &segments);
    assert_int_equal(segments, 0);
    static const char *const policies[] = {"every:2", "every:3", "every:4", "sqrt", "cheap"};
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++) {
        assert_int_equal(step_grads(policies[k], recomputed, &segments), n);
        recomputing += segments > 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&kept[i], &recomputed[i], sizeof kept[i]) != 0)
                fail_msg("%s: gradient %zu is %a, without checkpoints %a", policies[k], i, recomputed[i], kept[i]);
    }
    assert_true(recomputing > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_pass),
        cmocka_unit_test(test_micro_batches),
        cmocka_unit_test(test_checkpoints_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* ONNX models (snug_graph_from_onnx): the input is written to a file and read as a model; a graph that loads is
 * checked and planned once, so that every shape a file can declare reaches the planner's size arithmetic. The
 * seeds are tests/data/onnx/'s models (scripts/export_onnx.py), the refused ones included. */
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    snug_graph *g = NULL;
    snug_error err = {0};
    char path[512];
    fuzz_write(fuzz_path(path, "model.onnx"), data, size);
    if (snug_graph_from_onnx(path, &g, &err) == SNUG_OK && snug_graph_check(g, &err) == SNUG_OK) {
        snug_plan_request req = snug_plan_request_default(2);
        req.micro_batch = 1;
        req.checkpoint = (snug_checkpoint_policy){.kind = SNUG_CHECKPOINT_NONE};
        req.threads = 1;
        snug_plan *p = NULL;
        if (snug_plan_new(g, &req, &p, NULL, &err) == SNUG_OK) snug_plan_free(p);
    }
    snug_graph_free(g);
    return 0;
}

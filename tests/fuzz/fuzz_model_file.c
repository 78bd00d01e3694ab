/* Model files (snug_model_parse): the text is parsed and built into a graph, the graph checked, and a graph that
 * passes is planned three ways (no checkpointing, sqrt, and the automatic micro-batch and policy under a
 * budget), so that every shape a file can declare reaches the planner's size arithmetic. */
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snug_set_threads(1);
    return 0;
}

static void plan_once(const snug_graph *g, size_t batch, size_t micro, snug_checkpoint_kind kind, size_t budget) {
    snug_plan_request req = snug_plan_request_default(batch);
    req.micro_batch = micro;
    req.checkpoint = (snug_checkpoint_policy){.kind = kind};
    req.budget = budget;
    req.threads = 1;
    snug_plan *p = NULL;
    snug_plan_shortfall why;
    snug_error err = {0};
    if (snug_plan_new(g, &req, &p, &why, &err) == SNUG_OK) {
        snug_plan_summary s;
        snug_plan_summarize(p, &s);
        snug_plan_free(p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    snug_graph *g = NULL;
    snug_error err = {0};
    if (snug_model_parse(text, "fuzz.ini", &g, &err) == SNUG_OK) {
        if (snug_graph_check(g, &err) == SNUG_OK) {
            plan_once(g, 2, 1, SNUG_CHECKPOINT_NONE, 0);
            plan_once(g, 4, 2, SNUG_CHECKPOINT_SQRT, 0);
            plan_once(g, 8, SNUG_MICRO_BATCH_AUTO, SNUG_CHECKPOINT_AUTO, (size_t)64 << 20);
        }
        snug_graph_free(g);
    }
    free(text);
    return 0;
}

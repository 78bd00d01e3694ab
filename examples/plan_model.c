/* Planning a model file for a memory budget, without training and without allocating the model's memory: what
 * micro-batch and checkpointing snug would choose for a global batch, and every byte by category; or, when
 * nothing fits, by how much and what would.
 *
 *   cc plan_model.c $(pkg-config --cflags --libs snug) -o plan_model
 *   ./plan_model MODEL.ini BUDGET [BATCH]        e.g. ./plan_model models/unet.ini 256MiB 8
 *
 * MODEL.ini is a model file (docs/model-files.md) or a built-in name ("cnn", "resnet50"). Exits 0 when a plan
 * fits, 3 when none does, 1 on any other error. */
#include <stdio.h>
#include <stdlib.h>

#include <snug.h>

static void print_bytes(const size_t bytes[SNUG_MEM_NCATEGORIES]) {
    char buf[32];
    for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++)
        printf("  %-12s %12s\n", snug_mem_category_name((snug_mem_category)c),
               snug_format_bytes(bytes[c], buf, sizeof buf));
}

static void print_plan(const snug_plan *plan) {
    snug_plan_summary s;
    snug_plan_summarize(plan, &s);
    char policy[32], total[32];
    printf("batch %zu: %zu micro-batch%s of %zu (the last %zu), checkpoint %s (%zu segment%s recomputed)\n", s.batch,
           s.micro_batches, s.micro_batches == 1 ? "" : "es", s.micro_batch, s.last_micro_batch,
           snug_format_checkpoint(s.policy, policy, sizeof policy), s.segments, s.segments == 1 ? "" : "s");
    print_bytes(s.bytes);
    printf("  %-12s %12s, the most in use at %s (%s)\n", "total", snug_format_bytes(s.total, total, sizeof total),
           s.peak_op, snug_phase_name(s.peak_phase));
}

static void print_shortfall(const snug_plan_shortfall *why) {
    char need[32], least[32];
    printf("does not fit: needs %s\n", snug_format_bytes(why->needed, need, sizeof need));
    print_bytes(why->bytes);
    printf("the smallest budget that fits: %s\n", snug_format_bytes(why->smallest_budget, least, sizeof least));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.ini BUDGET [BATCH]\n", argv[0]);
        return 1;
    }
    snug_error err = {0};
    size_t budget = 0;
    snug_graph *g = NULL;
    if (snug_parse_size(argv[2], &budget, &err) != SNUG_OK || snug_model_builtin(argv[1], &g, &err) != SNUG_OK) {
        fprintf(stderr, "plan_model: %s\n", err.message);
        return 1;
    }
    snug_plan_request req = snug_plan_request_default(argc > 3 ? strtoul(argv[3], NULL, 10) : 64);
    req.budget = budget;
    req.micro_batch = SNUG_MICRO_BATCH_AUTO;
    req.checkpoint.kind = SNUG_CHECKPOINT_AUTO;
    snug_plan *plan = NULL;
    snug_plan_shortfall why;
    snug_status st = snug_plan_new(g, &req, &plan, &why, &err);
    int rc = 0;
    if (st == SNUG_OK) {
        print_plan(plan);
    } else if (st == SNUG_E_OOM) {
        print_shortfall(&why);
        rc = 3;
    } else {
        fprintf(stderr, "plan_model: %s\n", err.message);
        rc = 1;
    }
    snug_plan_free(plan);
    snug_graph_free(g);
    return rc;
}

/* The recompute of every leading-segment count from one segmentation (plan/leading.c) against the segments of
 * each count planned alone (plan_segment, plan_recompute_flops): equal to the bit, on the zoo's models, for
 * segment lengths 1 to 9, dropping every output of a segment or only the cheap ones, at two micro-batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "plan/plan.h"
#include "snug.h"
#include "test_util.h"

static const char *const models[] = {"mlp", "cnn", "resmlp", "resnet20", "resnet20-gn", "unet", "gpt"};
#define N_MODELS (sizeof models / sizeof models[0])

/* Every j of one segmentation; returns how many were compared. */
static int compare_counts(const snug_graph *g, const plan_reads *r, const plan_variant *v, size_t m,
                          const char *model) {
    int n = 0;
    double *upto = plan_leading_recompute(g, r, v, m, &n);
    assert_non_null(upto);
    for (int j = 0; j <= n; j++) {
        plan_variant u = *v;
        u.recomputed_segments = j;
        plan_segments seg;
        assert_int_equal(plan_segment(g, r, &u, &seg), SNUG_OK);
        const double alone = plan_recompute_flops(g, &seg, m);
        plan_segments_free(&seg);
        if (alone != upto[j])
            fail_msg("%s every:%zu selective %d m %zu: %d segments recompute %.17g alone, %.17g from one "
                     "segmentation", model, v->policy.every, v->selective, m, j, alone, upto[j]);
    }
    free(upto);
    return n + 1;
}

static void every_count_as_planned_alone(void **state) {
    (void)state;
    int compared = 0, nonzero = 0;
    for (size_t i = 0; i < N_MODELS; i++) {
        snug_error err;
        snug_graph *g = model_named(models[i], &err);
        if (!g) fail_msg("%s", err.message);
        plan_reads r;
        assert_true(plan_reads_init(g, &r));
        for (size_t every = 1; every <= 9; every++)
            for (int sel = 0; sel < 2; sel++)
                for (size_t m = 1; m <= 3; m += 2) {
                    const plan_variant v = {{SNUG_CHECKPOINT_EVERY, every}, sel == 1, -1, 0, false, false, false, false,
                                              plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO).product, false, false};
                    compared += compare_counts(g, &r, &v, m, models[i]);
                    plan_variant all = v;
                    plan_segments seg;
                    assert_int_equal(plan_segment(g, &r, &all, &seg), SNUG_OK);
                    nonzero += plan_recompute_flops(g, &seg, m) > 0;
                    plan_segments_free(&seg);
                }
        plan_reads_free(&r);
        snug_graph_free(g);
    }
    print_message("%d counts compared, %d segmentations recompute\n", compared, nonzero);
    assert_true(compared >= 1000 && nonzero >= 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_count_as_planned_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

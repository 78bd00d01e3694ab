/* The bound sparing rejects variants by (plan/spare_bound.c): for every segment a sqrt or every:N plan
 * recomputes, the bound is at most what the variant with that segment kept whole, planned in full, holds at the
 * end of forward beside its fixed blocks (so at most its total), on the zoo's models and a ReLU chain; the same
 * for AUTO's leading segments, fewer of them as more spared at once; and it rejects variants, so that sparing
 * plans fewer of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "plan/plan.h"
#include "plan/spare_bound.h"
#include "snug.h"
#include "test_util.h"

static const char *const models[] = {"mlp", "cnn", "resmlp", "resnet20", "resnet20-gn", "unet", "gpt"};
#define N_MODELS (sizeof models / sizeof models[0])

static snug_graph *zoo(size_t i) {
    snug_error err;
    snug_graph *g = model_named(models[i], &err);
    if (!g) fail_msg("%s", err.message);
    return g;
}

/* A model file of n ReLUs over a 4x1x1 input, then flatten, linear and the loss: every ReLU output lives until
 * its backward. */
static snug_graph *relu_chain(int n) {
    static char text[64 * 1024];
    int len = snprintf(text, sizeof text, "[model]\nname = relu-chain\ninput = image 4 1 1\n");
    for (int i = 0; i < n && len < (int)sizeof text; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "[r%d]\ntype = relu\n", i);
    snprintf(text + len, sizeof text - (size_t)len,
             "[flat]\ntype = flatten\n[fc]\ntype = linear\nout = 10\n[loss]\ntype = softmax_cross_entropy\n");
    snug_error err;
    snug_graph *g = model_text(text, "relu-chain.ini", &err);
    if (!g) fail_msg("%s", err.message);
    return g;
}

static bool recomputes_segment(const snug_graph *g, const plan *p, int s) {
    for (int i = 0; i < g->n_nodes; i++)
        if (p->seg.recompute[i] && p->seg.segment[i] == s) return true;
    return false;
}

/* Checks every bound of p's variants against the variant planned in full; returns how many of those variants
 * the bound rejects (passes p's total). */
/* What q holds at the end of forward beside its fixed blocks, with the least workspace of p's bound b. */
static size_t held_at_end(const spare_bound *b, const plan *p, const plan *q) {
    const size_t least_ws = b->fixed - (p->total - p->arena_bytes - p->workspace_bytes);
    return q->total - q->arena_bytes - q->workspace_bytes + least_ws + q->live_at[q->n_forward - 1];
}

static int checked; /* variants checked, so that a test that checks none fails */

static int check_bounds(const snug_graph *g, const plan *p, const char *what) {
    const snug_optim_config optim = snug_train_config_default().optim;
    spare_bound b;
    assert_true(spare_bound_init(&b, g, p));
    int rejected = 0;
    for (int s = 0; s < 64 && s < b.n_segments; s++) {
        if (!recomputes_segment(g, p, s)) continue;
        plan_variant v = p->variant;
        v.spared |= (uint64_t)1 << s;
        plan q;
        assert_int_equal(plan_build(g, p->m, p->threads, &optim, &v, &q, NULL), SNUG_OK);
        const size_t at_end = held_at_end(&b, p, &q);
        const size_t bound = spare_bound_total(&b, s);
        if (bound > at_end || bound > q.total)
            fail_msg("%s: segment %d spared: bound %zu over %zu at the end of forward (total %zu)", what, s, bound,
                     at_end, q.total);
        rejected += bound > p->total;
        checked++;
        assert_true(bound <= p->total || q.total > p->total); /* what the bound rejects, sparing rejects */
        plan_free(&q);
    }
    spare_bound_free(&b);
    return rejected;
}

static void check_policy(const snug_graph *g, const char *name, snug_checkpoint_policy policy, size_t m) {
    const snug_optim_config optim = snug_train_config_default().optim;
    plan p;
    const plan_variant v = plan_variant_of(policy);
    assert_int_equal(plan_build(g, m, 2, &optim, &v, &p, NULL), SNUG_OK);
    char what[96], checkpoint[32];
    snug_format_checkpoint(policy, checkpoint, sizeof checkpoint);
    snprintf(what, sizeof what, "%s %s m %zu", name, checkpoint, m);
    if (p.seg.n_segments) check_bounds(g, &p, what);
    plan_free(&p);
}

static const snug_checkpoint_policy policies[] = {{SNUG_CHECKPOINT_SQRT, 0}, {SNUG_CHECKPOINT_EVERY, 1},
                                                  {SNUG_CHECKPOINT_EVERY, 2}, {SNUG_CHECKPOINT_EVERY, 3}};
#define N_POLICIES (sizeof policies / sizeof policies[0])

static void bound_at_most_the_spared_plan(void **state) {
    (void)state;
    checked = 0;
    for (size_t i = 0; i < N_MODELS; i++) {
        snug_graph *g = zoo(i);
        for (size_t k = 0; k < N_POLICIES; k++)
            for (size_t m = 1; m <= 4; m += 3) check_policy(g, models[i], policies[k], m);
        snug_graph_free(g);
    }
    print_message("%d variants checked\n", checked);
    assert_true(checked >= 100);
}

/* AUTO's leading segments: the plan recomputing the first hi segments bounds every one recomputing fewer, j,
 * as the segments from j to hi spared at once. */
static void bound_of_fewer_leading_segments(void **state) {
    (void)state;
    const snug_optim_config optim = snug_train_config_default().optim;
    int compared = 0;
    for (size_t i = 0; i < N_MODELS; i++) {
        snug_graph *g = zoo(i);
        for (size_t every = 1; every <= 3; every++)
            for (int sel = 0; sel < 2; sel++) {
                plan_variant v = {{SNUG_CHECKPOINT_EVERY, every}, sel == 1, -1, 0, false, false, false, false,
                                    plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO).product, false, false};
                plan p;
                assert_int_equal(plan_build(g, 2, 2, &optim, &v, &p, NULL), SNUG_OK);
                int hi = 0;
                for (int k = 0; k < g->n_nodes; k++)
                    if (p.seg.segment[k] > hi) hi = p.seg.segment[k];
                plan_free(&p);
                v.recomputed_segments = hi;
                assert_int_equal(plan_build(g, 2, 2, &optim, &v, &p, NULL), SNUG_OK);
                spare_bound b;
                assert_true(spare_bound_init(&b, g, &p));
                for (int j = 0; j < hi; j++) {
                    plan_variant u = v;
                    u.recomputed_segments = j;
                    plan q;
                    assert_int_equal(plan_build(g, 2, 2, &optim, &u, &q, NULL), SNUG_OK);
                    const size_t bound = spare_bound_range(&b, j, hi), held = held_at_end(&b, &p, &q);
                    if (bound > held)
                        fail_msg("%s every:%zu selective %d: %d of %d leading segments: bound %zu over %zu held at the "
                                 "end of forward", models[i], every, sel, j, hi, bound, held);
                    compared++;
                    plan_free(&q);
                }
                spare_bound_free(&b);
                plan_free(&p);
            }
        snug_graph_free(g);
    }
    print_message("%d leading-segment counts compared\n", compared);
    assert_true(compared >= 100);
}

/* Where every output lives until its backward, keeping a segment whole puts it beside all that is live as forward
 * ends: the bound rejects every such variant. */
static void bound_rejects_the_relu_chain_s_variants(void **state) {
    (void)state;
    snug_graph *g = relu_chain(400);
    int all = 0;
    for (size_t k = 0; k < N_POLICIES; k++) {
        const plan_variant v = plan_variant_of(policies[k]);
        const snug_optim_config optim = snug_train_config_default().optim;
        plan p;
        assert_int_equal(plan_build(g, 4, 2, &optim, &v, &p, NULL), SNUG_OK);
        int recomputed = 0; /* none under every:1: each ReLU's output is a boundary */
        for (int s = 0; s < 64; s++) recomputed += recomputes_segment(g, &p, s);
        all += recomputed;
        if (recomputed) assert_int_equal(check_bounds(g, &p, "relu chain"), recomputed);
        plan_free(&p);
    }
    assert_true(all > 0);
    snug_graph_free(g);
}

static void no_bound_in_bf16(void **state) {
    (void)state;
    snug_graph *g = zoo(1);
    const snug_optim_config optim = snug_train_config_default().optim;
    plan_variant v = plan_variant_of(policies[0]);
    plan_variant_compute(&v, plan_compute_of(SNUG_PRECISION_BF16, SNUG_PRODUCTS_AUTO));
    plan p;
    assert_int_equal(plan_build(g, 4, 2, &optim, &v, &p, NULL), SNUG_OK);
    spare_bound b;
    assert_false(spare_bound_init(&b, g, &p));
    plan_free(&p);
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bound_at_most_the_spared_plan),
        cmocka_unit_test(bound_of_fewer_leading_segments),
        cmocka_unit_test(bound_rejects_the_relu_chain_s_variants),
        cmocka_unit_test(no_bound_in_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

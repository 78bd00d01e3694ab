/* Deep graphs: chains of 20,000 nodes (ReLUs; linear + ReLU pairs) build through the public API and plan
 * without checkpointing, and a tenth of that depth with sqrt; every plan is sound (no two buffers live at one
 * step share a byte, the live peak lies within the arena, the summary's total is the sum of its categories).
 * The name index still refuses a name used twice and finds a layer by name among thousands. No timing is
 * asserted here (bench/bench_plan_time.c measures it); the sizes are what a planner that scans every node or
 * every placed buffer per question cannot plan within the test timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/mem.h"
#include "plan/plan.h"
#include "snug.h"

#define DEEP 20000

/* input -> flatten -> layers -> loss, `nodes` nodes in all: ReLUs, or linear + ReLU pairs (blocks). */
static snug_graph *chain(int nodes, bool blocks) {
    snug_graph *g = snug_graph_new(blocks ? "linear-relu-chain" : "relu-chain");
    snug_tensor x = snug_flatten(g, "flat", snug_input(g, "input", 16, 1, 1));
    char name[32];
    for (int i = 0; i + 3 < nodes; i++) {
        snprintf(name, sizeof name, "l%d", i);
        x = blocks && i % 2 == 0 ? snug_linear(g, name, x, 16) : snug_relu(g, name, x);
    }
    snug_softmax_cross_entropy(g, "loss", x);
    return g;
}

static void check_sound(const snug_plan *sp, const char *what) {
    const plan *p = &sp->p;
    int a, b;
    if (plan_find_overlap(p, &a, &b))
        fail_msg("%s: buffers %d and %d overlap (offsets %zu+%zu, %zu+%zu; steps %d-%d, %d-%d)", what, a, b,
                 p->bufs[a].offset, p->bufs[a].bytes, p->bufs[b].offset, p->bufs[b].bytes, p->bufs[a].first,
                 p->bufs[a].last, p->bufs[b].first, p->bufs[b].last);
    snug_plan_summary s;
    snug_plan_summarize(sp, &s);
    assert_true(s.live_peak <= s.activation_peak);
    size_t sum = 0;
    for (int c = 0; c < SNUG_MEM_NCATEGORIES; c++) sum += s.bytes[c];
    assert_int_equal(sum, s.total);
    snug_plan_step_info st;
    snug_plan_step(sp, (size_t)p->live_peak_step, &st);
    assert_int_equal(st.bytes[SNUG_MEM_ACTIVATIONS], s.live_peak);
}

/* Without checkpointing at full depth; with sqrt (which plans once more for each segment it may spare, up to
 * 64) at a tenth of it. */
static void deep_chains_plan(void **state) {
    (void)state;
    for (int blocks = 0; blocks < 2; blocks++) {
        static const snug_checkpoint_policy policies[] = {{SNUG_CHECKPOINT_NONE, 0}, {SNUG_CHECKPOINT_SQRT, 0}};
        for (int k = 0; k < 2; k++) {
            snug_graph *g = chain(k ? DEEP / 10 : DEEP, blocks);
            snug_error err;
            assert_int_equal(snug_graph_check(g, &err), SNUG_OK);
            snug_plan_request req = snug_plan_request_default(32);
            req.threads = 2;
            req.checkpoint = policies[k];
            snug_plan *sp;
            if (snug_plan_new(g, &req, &sp, NULL, &err) != SNUG_OK) fail_msg("%s", err.message);
            check_sound(sp, blocks ? "linear+relu chain" : "relu chain");
            snug_plan_summary s;
            snug_plan_summarize(sp, &s);
            assert_true(k == 0 ? s.segments == 0 : s.segments > 10);
            snug_plan_free(sp);
            snug_graph_free(g);
        }
    }
}

/* The overlap check itself, on a deep plan: a buffer moved onto a neighbour live at the same time, or half
 * across it, is found; moved onto memory nothing live uses, it is not. */
static void overlaps_are_found(void **state) {
    (void)state;
    snug_graph *g = chain(DEEP, false);
    snug_plan_request req = snug_plan_request_default(32);
    req.threads = 1;
    snug_plan *sp;
    assert_int_equal(snug_plan_new(g, &req, &sp, NULL, NULL), SNUG_OK);
    plan *p = &sp->p;
    int a, b, x = -1, y = -1;
    assert_false(plan_find_overlap(p, &a, &b));
    for (int i = 0; i < p->n_bufs && y < 0; i++) { /* two forward values: live together until the backward */
        if (p->bufs[i].kind != ACT_VALUE || p->bufs[i].node < DEEP / 2 || p->bufs[i].shares >= 0) continue;
        if (x < 0) x = i;
        else y = i;
    }
    assert_true(y >= 0 && p->bufs[x].offset != p->bufs[y].offset);
    const size_t saved = p->bufs[y].offset;
    p->bufs[y].offset = p->bufs[x].offset;
    assert_true(plan_find_overlap(p, &a, &b));
    assert_true((a == x && b == y) || (a == y && b == x));
    p->bufs[y].offset = p->bufs[x].offset + p->bufs[x].bytes / 2 / 64 * 64; /* half above x */
    assert_true(plan_find_overlap(p, &a, &b));
    p->bufs[y].offset = p->bufs[x].offset - p->bufs[y].bytes / 2 / 64 * 64; /* half below x */
    assert_true(plan_find_overlap(p, &a, &b));
    p->bufs[y].offset = p->arena_bytes - p->bufs[y].bytes + 64; /* past the arena's end */
    assert_true(plan_find_overlap(p, &a, &b));
    assert_int_equal(a, y);
    p->bufs[y].offset = saved;
    assert_false(plan_find_overlap(p, &a, &b));
    snug_plan_free(sp);
    snug_graph_free(g);
}

/* The activation arena of a ReLU chain of `nodes` nodes at micro-batch m without checkpointing; checks that the
 * placement leaves no gap: the arena is the live peak. */
static size_t chain_arena(int nodes, size_t m) {
    snug_graph *g = chain(nodes, false);
    snug_plan_request req = snug_plan_request_default(m);
    req.threads = 2;
    snug_plan *sp;
    snug_error err;
    if (snug_plan_new(g, &req, &sp, NULL, &err) != SNUG_OK) fail_msg("%s", err.message);
    check_sound(sp, "relu chain");
    assert_int_equal(sp->p.arena_bytes, sp->p.live_peak);
    const size_t arena = sp->p.arena_bytes;
    snug_plan_free(sp);
    snug_graph_free(g);
    return arena;
}

/* Every ReLU output of a chain lives until its backward (ReLU's backward reads it, so the next ReLU cannot
 * write over it), so all of them are live at the loss, the peak: a chain DEEP / 2 ReLUs longer needs DEEP / 2
 * more outputs of 16 floats a sample, each rounded up to the arena's alignment, and nothing else. */
static void deep_chain_peak_is_its_outputs(void **state) {
    (void)state;
    const size_t m = 3, output = (16 * m * sizeof(float) + SNUG_MEM_ALIGN - 1) / SNUG_MEM_ALIGN * SNUG_MEM_ALIGN;
    const size_t deep = chain_arena(DEEP, m), half = chain_arena(DEEP / 2, m);
    assert_int_equal(deep - half, (size_t)(DEEP / 2) * output);
}

static void names_at_scale(void **state) {
    (void)state;
    snug_graph *g = chain(DEEP, false);
    snug_init_scale(g, "l17000", 0.5f); /* a ReLU: found, and refused for having no weight */
    snug_error err;
    assert_int_equal(snug_graph_check(g, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "'l17000': a relu layer has no weight"));
    snug_graph_free(g);

    g = chain(DEEP, true);
    snug_relu(g, "l12345", 1); /* after the loss, but the name is checked first */
    assert_int_equal(snug_graph_check(g, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "layer name 'l12345' is used twice"));
    snug_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deep_chains_plan),
        cmocka_unit_test(overlaps_are_found),
        cmocka_unit_test(deep_chain_peak_is_its_outputs),
        cmocka_unit_test(names_at_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

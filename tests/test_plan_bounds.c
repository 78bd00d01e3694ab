/* Plan requests at absurd sizes: a micro-batch (or a batch in one pass) whose samples would take more than any
 * machine addresses is refused before planning, with what and why; a plan whose buffers together pass the
 * address space is an overflow error, not undefined arithmetic (this test runs under UBSan in the sanitizer
 * build); a batch of billions with the micro-batch chosen for a budget gets its answer, the largest micro-batch
 * that fits; the chosen micro-batch and policy are those of the plain search over every k = 1, 2, ... (kept here
 * as the reference) wherever that search plans at most a few dozen micro-batches; and a batch past the samples a
 * data set has is fitted to them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plan/plan.h"
#include "snug.h"
#include "test_util.h"

/* How the plans here compute: float32, the products left to snug. */
#define FP32_AUTO plan_compute_of(SNUG_PRECISION_FP32, SNUG_PRODUCTS_AUTO)

static const snug_checkpoint_policy NONE = {SNUG_CHECKPOINT_NONE, 0}, AUTO = {SNUG_CHECKPOINT_AUTO, 0};

static void absurd_micro_batches_refused(void **state) {
    (void)state;
    snug_graph *g = model_named("cnn", NULL);
    snug_plan *p = NULL;
    snug_error err;
    snug_plan_request r = snug_plan_request_default((size_t)INT64_MAX); /* the batch in one pass */
    assert_int_equal(snug_plan_new(g, &r, &p, NULL, &err), SNUG_E_OVERFLOW);
    assert_null(p);
    assert_non_null(strstr(err.message, "batch 9223372036854775807 of model 'cnn' is too large to plan"));
    assert_non_null(strstr(err.message, "over 1 EiB"));
    assert_non_null(strstr(err.message, "plan at most"));

    r.micro_batch = (size_t)1 << 50;
    assert_int_equal(snug_plan_new(g, &r, &p, NULL, &err), SNUG_E_OVERFLOW);
    assert_non_null(strstr(err.message, "micro-batch 1125899906842624 of model 'cnn' is too large to plan"));

    /* the same batch in micro-batches that fit the address space is a plan (of very many passes) */
    r.micro_batch = 1000;
    assert_int_equal(snug_plan_new(g, &r, &p, NULL, &err), SNUG_OK);
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    assert_int_equal(s.micro_batches, (size_t)INT64_MAX / 1000 + 1);
    assert_int_equal(s.last_micro_batch, (size_t)INT64_MAX % 1000);
    snug_plan_free(p);
    snug_graph_free(g);
}

/* Below the request's check: buffers each within size_t whose sum is not. */
static void plan_past_the_address_space(void **state) {
    (void)state;
    snug_graph *g = model_named("mlp", NULL);
    snug_optim_config optim = snug_train_config_default().optim;
    plan_variant v = plan_variant_of(NONE);
    plan p;
    snug_error err;
    for (int threads = 1; threads <= 2; threads++) {
        assert_int_equal(plan_build(g, (size_t)1 << 50, threads, &optim, &v, &p, &err), SNUG_E_OVERFLOW);
        assert_non_null(strstr(err.message, "more memory than this machine can address"));
    }
    snug_graph_free(g);
}

/* A batch of 2^32 with the micro-batch and policy chosen for 1 GiB: the chosen plan fits, and the next larger
 * micro-batch that splits the batch as evenly does not fit without recompute. */
static void huge_batch_chooses_its_micro_batch(void **state) {
    (void)state;
    snug_graph *g = model_named("cnn", NULL);
    const size_t batch = (size_t)1 << 32, budget = (size_t)1 << 30;
    snug_plan_request r = snug_plan_request_default(batch);
    r.micro_batch = SNUG_MICRO_BATCH_AUTO;
    r.checkpoint = AUTO;
    r.budget = budget;
    snug_plan *p;
    snug_error err;
    assert_int_equal(snug_plan_new(g, &r, &p, NULL, &err), SNUG_OK);
    snug_plan_summary s;
    snug_plan_summarize(p, &s);
    assert_true(s.total <= budget);
    assert_true(s.micro_batch > 1000 && s.micro_batch < 100000);
    const size_t k = plan_micro_batches(batch, s.micro_batch);
    assert_int_equal(s.micro_batch, plan_micro_batches(batch, k)); /* evened out */
    snug_plan_request larger = r;
    larger.micro_batch = plan_micro_batches(batch, k - 1);
    larger.checkpoint = NONE;
    snug_plan *q;
    assert_int_equal(snug_plan_new(g, &larger, &q, NULL, &err), SNUG_E_OOM);
    snug_plan_free(p);
    snug_graph_free(g);
}

/* ---- the reference: every k = 1, 2, ... until a micro-batch fits without recompute ------------------------- */

static double throughput(const plan *p) {
    double m = (double)p->m, work = p->fwd_flops + p->bwd_flops;
    return m / (m + 8.0) / (1.0 + (work > 0 ? p->recompute_flops / work : 0));
}

static bool reference_choice(const snug_graph *g, const snug_plan_request *r, size_t *m_out,
                             snug_checkpoint_policy *policy_out) {
    double best = -1;
    size_t prev = 0;
    bool found = false;
    for (size_t k = 1; k <= r->batch; k++) {
        const size_t m = plan_micro_batches(r->batch, k);
        if (m == prev) continue;
        prev = m;
        bool plain_fits = false;
        for (int pass = 0; pass < 2 && !plain_fits; pass++) {
            plan p;
            assert_int_equal(plan_build_policy(g, m, r->threads, &r->optim, pass ? AUTO : NONE, FP32_AUTO, r->budget, &p, NULL),
                             SNUG_OK);
            const bool fits = p.total <= r->budget;
            if (fits && throughput(&p) > best) {
                best = throughput(&p);
                *m_out = m;
                *policy_out = p.seg.n_segments ? AUTO : NONE;
                found = true;
            }
            plain_fits = fits && pass == 0;
            plan_free(&p);
        }
        if (plain_fits) break;
    }
    return found;
}

static void choice_matches_reference(void **state) {
    (void)state;
    static const char *const models[] = {"mlp", "cnn", "gpt"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        snug_graph *g = model_named(models[i], NULL);
        assert_non_null(g);
        static const size_t batches[] = {8, 100};
        for (size_t b = 0; b < 2; b++) {
            snug_plan_request r = snug_plan_request_default(batches[b]);
            r.threads = 2;
            snug_plan *whole;
            assert_int_equal(snug_plan_new(g, &r, &whole, NULL, NULL), SNUG_OK);
            snug_plan_summary w;
            snug_plan_summarize(whole, &w);
            snug_plan_free(whole);
            const size_t fixed = w.bytes[SNUG_MEM_PARAMS] + w.bytes[SNUG_MEM_GRADS] + w.bytes[SNUG_MEM_OPTIM];
            for (int f = 1; f <= 9; f += 2) { /* budgets from a tenth of the activations to nine tenths */
                r.micro_batch = SNUG_MICRO_BATCH_AUTO;
                r.checkpoint = AUTO;
                r.budget = fixed + (w.total - fixed) / 10 * (size_t)f;
                size_t m = 0;
                snug_checkpoint_policy pol = NONE;
                const bool found = reference_choice(g, &r, &m, &pol);
                snug_plan *p;
                const snug_status st = snug_plan_new(g, &r, &p, NULL, NULL);
                if (!found) {
                    assert_int_equal(st, SNUG_E_OOM);
                    continue;
                }
                assert_int_equal(st, SNUG_OK);
                const snug_plan_request *got = snug_plan_request_of(p);
                if (got->micro_batch != m || got->checkpoint.kind != pol.kind)
                    fail_msg("%s batch %zu budget %zu: micro-batch %zu %s, reference %zu %s", models[i], batches[b],
                             r.budget, got->micro_batch, got->checkpoint.kind == SNUG_CHECKPOINT_AUTO ? "auto" : "none",
                             m, pol.kind == SNUG_CHECKPOINT_AUTO ? "auto" : "none");
                snug_plan_free(p);
            }
        }
        snug_graph_free(g);
    }
}

/* A batch past the samples a data set has becomes their count, its micro-batch with it; nothing else changes. */
static void batch_fits_the_samples(void **state) {
    (void)state;
    snug_plan_request r = snug_plan_request_default(100000);
    assert_int_equal(snug_plan_request_fit_samples(&r, 500), 100000);
    assert_int_equal(r.batch, 500);
    assert_int_equal(r.micro_batch, 500);
    r = snug_plan_request_default(100000);
    r.micro_batch = 64;
    snug_plan_request_fit_samples(&r, 500);
    assert_int_equal(r.batch, 500);
    assert_int_equal(r.micro_batch, 64);
    r.micro_batch = SNUG_MICRO_BATCH_AUTO;
    snug_plan_request_fit_samples(&r, 100);
    assert_int_equal(r.batch, 100);
    assert_true(r.micro_batch == SNUG_MICRO_BATCH_AUTO);
    assert_int_equal(snug_plan_request_fit_samples(&r, 0), 100);
    assert_int_equal(snug_plan_request_fit_samples(&r, 1000), 100);
    assert_int_equal(r.batch, 100);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(absurd_micro_batches_refused),
        cmocka_unit_test(plan_past_the_address_space),
        cmocka_unit_test(huge_batch_chooses_its_micro_batch),
        cmocka_unit_test(choice_matches_reference),
        cmocka_unit_test(batch_fits_the_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

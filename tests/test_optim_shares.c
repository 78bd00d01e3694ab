/* The threads' shares of the parameter tensors (src/optim/shares.c) and the passes that use them: every element
 * of a tensor in exactly one share, the cuts on cache lines, optim_owner agreeing with optim_share, and the
 * update and the norm giving the same bits with shares as without, for any thread count. A share that missed an
 * element or gave it to two threads would show here as a parameter left behind or moved twice. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "snug.h"

/* A model's layout in miniature: a weight, its bias, tensors just under and at OPTIM_SHARE_MIN, odd sizes that
 * leave tensors off line boundaries, and a large last weight. */
static const size_t sizes[] = {802816, 1024, 4095, 4096, 4097, 13, 70001, 1000003};
#define N_TENSORS ((int)(sizeof sizes / sizeof sizes[0]))

static size_t layout(optim_span *spans) {
    size_t at = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        spans[i] = (optim_span){.offset = at, .numel = sizes[i]};
        at += sizes[i];
    }
    return at;
}

static void shares_tile_each_tensor(void **unused) {
    (void)unused;
    optim_span spans[N_TENSORS];
    layout(spans);
    for (int T = 1; T <= 5; T++)
        for (int i = 0; i < N_TENSORS; i++) {
            const optim_span *s = &spans[i];
            size_t next = s->offset;
            for (int t = 0; t < T; t++) {
                size_t lo, hi;
                optim_share(s, t, T, &lo, &hi);
                assert_int_equal(lo, next);
                assert_true(hi >= lo);
                /* every inner cut on a line; a small tensor whole to thread 0 */
                if (hi != s->offset + s->numel && hi != s->offset) assert_int_equal(hi % 16, 0);
                if (s->numel < OPTIM_SHARE_MIN && t > 0) assert_int_equal(hi, lo);
                next = hi;
            }
            assert_int_equal(next, s->offset + s->numel);
        }
}

static void shares_are_even(void **unused) {
    (void)unused;
    const optim_span s = {.offset = 5, .numel = 1000003};
    for (int T = 2; T <= 4; T++)
        for (int t = 0; t < T; t++) {
            size_t lo, hi;
            optim_share(&s, t, T, &lo, &hi);
            const double part = (double)(hi - lo), even = (double)s.numel / T;
            assert_true(part > even - 2 * 16 && part < even + 2 * 16 + T);
        }
}

static void owner_agrees_with_shares(void **unused) {
    (void)unused;
    optim_span spans[N_TENSORS];
    layout(spans);
    for (int T = 1; T <= 4; T++)
        for (int i = 0; i < N_TENSORS; i++)
            for (int t = 0; t < T; t++) {
                size_t lo, hi;
                optim_share(&spans[i], t, T, &lo, &hi);
                if (lo == hi) continue;
                /* the ends and a few inside */
                const size_t probe[] = {lo, hi - 1, lo + (hi - lo) / 2, lo + (hi - lo) / 3};
                for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++)
                    assert_int_equal(optim_owner(spans, N_TENSORS, probe[k], T), t);
            }
    assert_int_equal(optim_owner(NULL, 0, 12345, 4), 0);
}

static void spans_tile_checks(void **unused) {
    (void)unused;
    optim_span spans[N_TENSORS];
    const size_t n = layout(spans);
    assert_true(optim_spans_tile(spans, N_TENSORS, n));
    assert_false(optim_spans_tile(spans, N_TENSORS, n + 1));        /* the block is longer */
    assert_false(optim_spans_tile(spans, N_TENSORS - 1, n));        /* a tensor left out */
    optim_span gap[2] = {{.offset = 0, .numel = 10}, {.offset = 11, .numel = 5}},
               overlap[2] = {{.offset = 0, .numel = 10}, {.offset = 9, .numel = 6}},
               empty[2] = {{.offset = 0, .numel = 10}, {.offset = 10, .numel = 0}};
    assert_false(optim_spans_tile(gap, 2, 16));
    assert_false(optim_spans_tile(overlap, 2, 15));
    assert_false(optim_spans_tile(empty, 2, 10));
    assert_true(optim_spans_tile(NULL, 0, 0));
}

static float pseudo(size_t i, unsigned salt) {
    uint32_t x = (uint32_t)i * 2654435761u ^ (salt * 40503u + 1u);
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return ((float)(x & 0xffff) / 65535.0f) * 2.0f - 1.0f;
}

/* Three consuming steps of cfg over the layout, with or without the spans (every other one rewritten where
 * rewrite_odd), on `threads` threads: the parameters and the state after them, and the gradients (which every
 * step must leave zero but in the rewritten tensors) in one buffer. */
static float *run_steps(const snug_optim_config *cfg, bool with_spans, bool rewrite_odd, int threads) {
    optim_span spans[N_TENSORS];
    const size_t n = layout(spans);
    for (int i = 1; i < N_TENSORS; i += 2) spans[i].rewritten = rewrite_odd;
    const int slots = optim_state_slots(cfg);
    float *out = calloc((size_t)(2 + slots) * n, sizeof *out);
    assert_non_null(out);
    float *p = out, *g = out + n, *s = out + 2 * n;
    for (size_t i = 0; i < n; i++) p[i] = pseudo(i, 1);
    optim_state st = {.cfg = *cfg, .state = s, .n = n, .spans = with_spans ? spans : NULL,
                      .n_spans = with_spans ? N_TENSORS : 0};
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    for (unsigned step = 1; step <= 3; step++) {
        for (size_t i = 0; i < n; i++) g[i] = pseudo(i, 10 + step);
        optim_step_consume(&st, p, g, 0.5f, cfg->lr);
    }
    omp_set_num_threads(saved);
    return out;
}

static void update_same_bits_with_shares(const snug_optim_config *cfg) {
    const size_t n = layout((optim_span[N_TENSORS]){0}), floats = (size_t)(2 + optim_state_slots(cfg)) * n;
    float *want = run_steps(cfg, false, false, 1);
    for (size_t i = n; i < 2 * n; i++) assert_true(want[i] == 0.0f); /* consumed */
    for (int threads = 1; threads <= 3; threads++) {
        float *got = run_steps(cfg, true, false, threads);
        assert_memory_equal(got, want, floats * sizeof *got);
        free(got);
    }
    free(want);
}

/* Rewritten tensors (optim_span.rewritten): the same parameters and state, and their gradients left as the last
 * step read them (its inputs, unscaled) where every other one is zero; on one thread and on a team. */
static void rewritten_keep_their_gradients(void **unused) {
    (void)unused;
    const snug_optim_config cfg = {.kind = SNUG_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f};
    optim_span spans[N_TENSORS];
    const size_t n = layout(spans), slots = (size_t)optim_state_slots(&cfg);
    float *want = run_steps(&cfg, true, false, 1);
    for (int threads = 1; threads <= 2; threads++) {
        float *got = run_steps(&cfg, true, true, threads);
        assert_memory_equal(got, want, n * sizeof *got);                   /* parameters */
        assert_memory_equal(got + 2 * n, want + 2 * n, slots * n * sizeof *got); /* state */
        for (int t = 0; t < N_TENSORS; t++)
            for (size_t i = spans[t].offset; i < spans[t].offset + spans[t].numel; i++)
                assert_true(got[n + i] == (t % 2 ? pseudo(i, 13) : 0.0f));
        free(got);
    }
    free(want);
}

static void sgd_update_same_bits(void **unused) {
    (void)unused;
    snug_optim_config c = {.kind = SNUG_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f};
    update_same_bits_with_shares(&c);
}

static void adamw_update_same_bits(void **unused) {
    (void)unused;
    snug_optim_config c = {.kind = SNUG_OPTIM_ADAMW, .lr = 1e-3f, .weight_decay = 0.05f, .beta1 = 0.9f,
                           .beta2 = 0.999f, .eps = 1e-8f};
    update_same_bits_with_shares(&c);
}

static void norm_same_bits_with_shares(void **unused) {
    (void)unused;
    optim_span spans[N_TENSORS];
    const size_t n = layout(spans);
    float *g = malloc(n * sizeof *g), *zero = calloc(n, sizeof *zero);
    assert_non_null(g);
    assert_non_null(zero);
    for (size_t i = 0; i < n; i++) g[i] = pseudo(i, 3);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const double want = grad_global_norm(g, n, NULL, 0);
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        /* a norm of other values first, so that a block no thread summed cannot pass with the last call's sum */
        assert_true(grad_global_norm(zero, n, spans, N_TENSORS) == 0.0);
        const double got = grad_global_norm(g, n, spans, N_TENSORS);
        assert_memory_equal(&got, &want, sizeof got);
    }
    omp_set_num_threads(saved);
    free(g);
    free(zero);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shares_tile_each_tensor),     cmocka_unit_test(shares_are_even),
        cmocka_unit_test(owner_agrees_with_shares),    cmocka_unit_test(spans_tile_checks),
        cmocka_unit_test(sgd_update_same_bits),        cmocka_unit_test(adamw_update_same_bits),
        cmocka_unit_test(norm_same_bits_with_shares),  cmocka_unit_test(rewritten_keep_their_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

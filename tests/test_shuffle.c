/* Epoch shuffles: valid permutations, a pure function of (seed, epoch), different across epochs and seeds, and
 * uniform. The uniformity bounds are loose chi-square bounds over fixed seeds: deterministic, so they cannot
 * flake, yet a biased shuffle (e.g. swapping with any position instead of a lower one) fails them by far. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "data/shuffle.h"

/* Each of 0..n-1 exactly once. */
static void assert_permutation(const size_t *perm, size_t n) {
    bool *seen = calloc(n ? n : 1, sizeof *seen);
    assert_non_null(seen);
    for (size_t i = 0; i < n; i++) {
        assert_true(perm[i] < n);
        assert_false(seen[perm[i]]);
        seen[perm[i]] = true;
    }
    free(seen);
}

static void test_valid_permutations(void **state) {
    (void)state;
    const size_t sizes[] = {1, 2, 3, 5, 7, 10, 101, 1000, 60001};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        size_t *perm = malloc(n * sizeof *perm);
        assert_non_null(perm);
        for (uint64_t epoch = 0; epoch < 3; epoch++) {
            shuffle_permutation(1234, epoch, perm, n);
            assert_permutation(perm, n);
        }
        free(perm);
    }
    size_t untouched = 77;
    shuffle_permutation(1, 0, &untouched, 0);  /* n = 0 writes nothing */
    assert_int_equal(untouched, 77);
}

static void test_identity(void **state) {
    (void)state;
    size_t perm[9];
    identity_permutation(perm, 9);
    for (size_t i = 0; i < 9; i++) assert_int_equal(perm[i], i);
}

static void test_deterministic(void **state) {
    (void)state;
    enum { N = 513 };
    size_t a[N], b[N];
    shuffle_permutation(42, 7, a, N);
    memset(b, 0xff, sizeof b);  /* the result must not depend on what the buffer held */
    shuffle_permutation(42, 7, b, N);
    assert_memory_equal(a, b, sizeof a);
}

/* For n = 100 two independent uniform permutations coincide with probability 1/100!: never by chance. */
static void test_differs_across_epochs_and_seeds(void **state) {
    (void)state;
    enum { N = 100 };
    size_t base[N], other[N], identity[N];
    identity_permutation(identity, N);
    shuffle_permutation(42, 0, base, N);
    assert_memory_not_equal(base, identity, sizeof base);
    for (uint64_t epoch = 1; epoch < 20; epoch++) {
        shuffle_permutation(42, epoch, other, N);
        assert_memory_not_equal(base, other, sizeof base);
    }
    for (uint64_t seed = 43; seed < 63; seed++) {
        shuffle_permutation(seed, 0, other, N);
        assert_memory_not_equal(base, other, sizeof base);
    }
}

/* Where element 0 lands, over many seeds: uniform over the n positions. */
static void test_position_of_first_element_is_uniform(void **state) {
    (void)state;
    enum { N = 7, DRAWS = 70000 };
    size_t counts[N] = {0}, perm[N];
    for (uint64_t seed = 0; seed < DRAWS; seed++) {
        shuffle_permutation(seed, 3, perm, N);
        for (size_t p = 0; p < N; p++)
            if (perm[p] == 0) counts[p]++;
    }
    double expected = (double)DRAWS / N, chi2 = 0;
    for (size_t p = 0; p < N; p++) chi2 += (counts[p] - expected) * (counts[p] - expected) / expected;
    /* 6 degrees of freedom: chi2 > 40 has probability about 3e-7 under uniformity. */
    if (chi2 >= 40) print_error("chi-square %.1f over positions\n", chi2);
    assert_true(chi2 < 40);
}

/* All 6 orders of 3 elements, over epochs of one seed: each equally likely. A naive shuffle (partner drawn from
 * all n positions) gives 27 equally likely paths onto 6 orders, off by 11% here: chi-square near 700. */
static void test_all_orders_equally_likely(void **state) {
    (void)state;
    enum { DRAWS = 60000 };
    size_t counts[6] = {0}, perm[3];
    for (uint64_t epoch = 0; epoch < DRAWS; epoch++) {
        shuffle_permutation(9, epoch, perm, 3);
        size_t code = perm[0] * 2 + (perm[1] > perm[2]);  /* Lehmer-style code of a permutation of 3 */
        assert_true(code < 6);
        counts[code]++;
    }
    double expected = DRAWS / 6.0, chi2 = 0;
    for (int c = 0; c < 6; c++) chi2 += (counts[c] - expected) * (counts[c] - expected) / expected;
    /* 5 degrees of freedom: chi2 > 40 has probability about 1.5e-7. */
    if (chi2 >= 40) print_error("chi-square %.1f over the 6 orders\n", chi2);
    assert_true(chi2 < 40);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_permutations),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_differs_across_epochs_and_seeds),
        cmocka_unit_test(test_position_of_first_element_is_uniform),
        cmocka_unit_test(test_all_orders_equally_likely),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

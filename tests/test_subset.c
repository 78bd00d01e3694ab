/* snug_dataset_subset: an evenly spaced view of another dataset (periodic evaluation scores one). Sample i of
 * a view of count samples over n is sample floor(i * n / count); inputs and targets follow the same mapping;
 * the view borrows the dataset; bad counts are refused with a message. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "data/dataset.h"
#include "snug.h"

#define N 10

/* Sample k: 2 pixels of value k and 100 + k, label k. */
static snug_dataset *numbered(void) {
    float x[N * 2];
    int32_t y[N];
    for (int k = 0; k < N; k++) x[2 * k] = (float)k, x[2 * k + 1] = 100.0f + (float)k, y[k] = k;
    snug_dataset *ds = NULL;
    snug_error err = {0};
    assert_int_equal(snug_dataset_from_memory(x, y, N, 1, 1, 2, N, &ds, &err), SNUG_OK);
    return ds;
}

static void test_evenly_spaced(void **state) {
    (void)state;
    snug_dataset *ds = numbered(), *v = NULL;
    snug_error err = {0};
    assert_int_equal(snug_dataset_subset(ds, 4, &v, &err), SNUG_OK);
    assert_int_equal(snug_dataset_size(v), 4);
    assert_int_equal(snug_dataset_classes(v), N);
    assert_int_equal(snug_dataset_sample_shape(v).dims[2], 2);
    const size_t idx[] = {3, 0, 2, 1}; /* any order, as a shuffled batch would ask */
    const int32_t want[] = {7, 0, 5, 2}; /* floor(i * 10 / 4) */
    float x[8];
    int32_t y[4];
    v->ops->fill_targets(v, idx, 4, y);
    v->ops->fill_inputs(v, idx, 4, x);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(y[i], want[i]);
        assert_true(x[2 * i] == (float)want[i] && x[2 * i + 1] == 100.0f + (float)want[i]);
    }
    snug_dataset_free(v); /* the view only: ds must still work */
    assert_int_equal(snug_dataset_subset(ds, N, &v, &err), SNUG_OK);
    v->ops->fill_targets(v, (const size_t[]){9}, 1, y);
    assert_int_equal(y[0], 9); /* count = n is the identity */
    snug_dataset_free(v);
    snug_dataset_free(ds);
}

/* More indices than the view's stack chunk: the mapping holds across chunks. */
static void test_many_indices(void **state) {
    (void)state;
    enum { M = 700 };
    static float x[M];
    static int32_t y[M];
    for (int k = 0; k < M; k++) x[k] = (float)k, y[k] = k % 7;
    snug_dataset *ds = NULL, *v = NULL;
    snug_error err = {0};
    assert_int_equal(snug_dataset_from_memory(x, y, M, 1, 1, 1, 7, &ds, &err), SNUG_OK);
    assert_int_equal(snug_dataset_subset(ds, 600, &v, &err), SNUG_OK);
    static size_t idx[600];
    static float got[600];
    for (size_t i = 0; i < 600; i++) idx[i] = 599 - i;
    v->ops->fill_inputs(v, idx, 600, got);
    for (size_t i = 0; i < 600; i++) assert_true(got[i] == (float)(idx[i] * M / 600));
    snug_dataset_free(v);
    snug_dataset_free(ds);
}

static void test_bad_counts(void **state) {
    (void)state;
    snug_dataset *ds = numbered(), *v = (snug_dataset *)&v;
    snug_error err = {0};
    assert_int_equal(snug_dataset_subset(ds, 0, &v, &err), SNUG_E_ARG);
    assert_null(v);
    assert_non_null(strstr(err.message, "a subset of 0 samples of a dataset of 10: choose between 1 and 10"));
    assert_int_equal(snug_dataset_subset(ds, 11, &v, &err), SNUG_E_ARG);
    assert_int_equal(snug_dataset_subset(NULL, 1, &v, &err), SNUG_E_ARG);
    assert_int_equal(snug_dataset_subset(ds, 1, NULL, &err), SNUG_E_ARG);
    snug_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evenly_spaced),
        cmocka_unit_test(test_many_indices),
        cmocka_unit_test(test_bad_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* snug_dataset_from_arrays (and snug_dataset_from_memory on top of it): any sample shape, several targets per
 * sample, copies of the caller's arrays, and clear refusals of bad sizes and labels; the borrowing forms. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "data/dataset.h"
#include "snug.h"

static void test_tokens_with_per_token_targets(void **state) {
    (void)state;
    float x[3 * 4];
    int32_t y[3 * 4];
    for (int i = 0; i < 12; i++) x[i] = (float)i, y[i] = i % 5 == 4 ? -1 : i % 5;
    snug_dataset *ds = NULL;
    snug_error err = {0};
    const snug_shape tokens = {.rank = 1, .dims = {4}};
    assert_int_equal(snug_dataset_from_arrays(x, tokens, y, 4, 3, 5, &ds, &err), SNUG_OK);
    memset(x, 0, sizeof x); /* copied: the caller's arrays may go */
    memset(y, 0, sizeof y);
    assert_int_equal(snug_dataset_size(ds), 3);
    assert_int_equal(snug_dataset_sample_shape(ds).rank, 1);
    assert_int_equal(ds->targets_per_sample, 4);
    float gx[8];
    int32_t gy[8];
    const size_t idx[] = {2, 0};
    ds->ops->fill_inputs(ds, idx, 2, gx);
    ds->ops->fill_targets(ds, idx, 2, gy);
    const float want_x[] = {8, 9, 10, 11, 0, 1, 2, 3};
    const int32_t want_y[] = {3, -1, 0, 1, 0, 1, 2, 3};
    for (int i = 0; i < 8; i++) {
        assert_true(gx[i] == want_x[i]);
        assert_int_equal(gy[i], want_y[i]);
    }
    snug_dataset_free(ds);
}

static void test_refusals(void **state) {
    (void)state;
    float x[4] = {0};
    int32_t y[4] = {0, 1, 7, 0};
    snug_dataset *ds = NULL;
    snug_error err = {0};
    const snug_shape two = {.rank = 1, .dims = {2}};
    assert_int_equal(snug_dataset_from_arrays(x, two, y, 2, 2, 5, &ds, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "label 2 is 7, outside [0, 5)"));
    assert_null(ds);
    const snug_shape none = {.rank = 0};
    assert_int_equal(snug_dataset_from_arrays(x, none, y, 1, 2, 8, &ds, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "1 to 4 dimensions"));
    assert_int_equal(snug_dataset_from_arrays(x, two, y, 0, 2, 8, &ds, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "every size must be > 0"));
    assert_int_equal(snug_dataset_from_arrays(NULL, two, y, 1, 2, 8, &ds, &err), SNUG_E_ARG);
    const snug_shape huge = {.rank = 2, .dims = {SIZE_MAX / 2, 4}};
    assert_int_equal(snug_dataset_from_arrays(x, huge, y, 1, 2, 8, &ds, &err), SNUG_E_OVERFLOW);
    /* the classification form still takes one label per sample */
    assert_int_equal(snug_dataset_from_memory(x, y, 2, 1, 1, 2, 2, &ds, &err), SNUG_OK);
    assert_int_equal(ds->targets_per_sample, 1);
    snug_dataset_free(ds);
}

/* Borrowed: the data set reads the caller's arrays where they are (a change after creation is what the next
 * micro-batch gets), holds none of its own memory, frees neither array, and refuses what the copying form does. */
static void test_borrowed_arrays_are_not_copied(void **state) {
    (void)state;
    float x[3 * 2] = {0, 1, 2, 3, 4, 5};
    int32_t y[3] = {0, 1, 2};
    snug_dataset *ds = NULL, *copied = NULL;
    snug_error err = {0};
    assert_int_equal(snug_dataset_borrow_memory(x, y, 3, 2, 1, 1, 3, &ds, &err), SNUG_OK);
    assert_int_equal(snug_dataset_from_memory(x, y, 3, 2, 1, 1, 3, &copied, &err), SNUG_OK);
    x[2] = 42.0f; /* sample 1's first input, after both were made */
    y[1] = 2;
    const size_t idx[] = {1};
    float got[2], kept[2];
    int32_t label, kept_label;
    ds->ops->fill_inputs(ds, idx, 1, got);
    ds->ops->fill_targets(ds, idx, 1, &label);
    copied->ops->fill_inputs(copied, idx, 1, kept);
    copied->ops->fill_targets(copied, idx, 1, &kept_label);
    assert_true(got[0] == 42.0f && got[1] == 3.0f);
    assert_int_equal(label, 2);
    assert_true(kept[0] == 2.0f && kept[1] == 3.0f); /* the copy keeps what was there */
    assert_int_equal(kept_label, 1);
    assert_int_equal(snug_dataset_memory(ds, 1), snug_dataset_memory(copied, 1) - sizeof x - sizeof y);
    snug_dataset_free(ds); /* x and y are the test's stack arrays: freeing them would abort under ASan */
    snug_dataset_free(copied);

    y[0] = 3;
    assert_int_equal(snug_dataset_borrow_memory(x, y, 3, 2, 1, 1, 3, &ds, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "label 0 is 3, outside [0, 3)"));
    assert_null(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_with_per_token_targets),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_borrowed_arrays_are_not_copied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

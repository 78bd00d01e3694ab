/* The byte-level text dataset: windows, targets shifted by one, the padded last window, the holdout split (no
 * window crosses it), bytes above 127, and every error with its message. With the Brown corpus fetched
 * (`make data-brown`), the real file is opened too. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snug.h"
#include "data/dataset.h"
#include "ops/op.h"

#define MAX_FILES 32

static char tmp_dir[64];
static char written[MAX_FILES][256];
static int n_written;

static int make_tmp_dir(void **state) {
    (void)state;
    strcpy(tmp_dir, "/tmp/snug_test_text_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state) {
    (void)state;
    for (int i = n_written - 1; i >= 0; i--) remove(written[i]);
    return rmdir(tmp_dir);
}

static const char *write_file(const char *name, const void *bytes, size_t len) {
    assert_true(n_written < MAX_FILES);
    char *path = written[n_written++];
    snprintf(path, sizeof written[0], "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static snug_dataset *open_ok(const char *path, size_t context, double holdout, bool heldout) {
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_text_open(path, context, holdout, heldout, &ds, &err);
    if (s != SNUG_OK) print_error("snug_text_open: %s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    assert_non_null(ds);
    return ds;
}

/* Sample i of ds against the part [part, part + len): inputs part[s + t], targets part[s + t + 1], with 0 and
 * SNUG_IGNORE_TARGET beyond the part. Computed here, independently of the library. */
static void expect_sample(const snug_dataset *ds, size_t i, const uint8_t *part, size_t len, size_t context) {
    float *x = malloc(context * sizeof *x);
    int32_t *y = malloc(context * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    ds->ops->fill_inputs(ds, &i, 1, x);
    ds->ops->fill_targets(ds, &i, 1, y);
    for (size_t t = 0; t < context; t++) {
        size_t s = i * context + t;
        float want_x = s < len ? (float)part[s] : 0.0f;
        int32_t want_y = s + 1 < len ? (int32_t)part[s + 1] : SNUG_IGNORE_TARGET;
        if (x[t] != want_x || y[t] != want_y)
            print_error("sample %zu position %zu: input %g target %d, want %g and %d\n", i, t, x[t], y[t], want_x,
                        want_y);
        assert_true(x[t] == want_x);
        assert_int_equal(y[t], want_y);
    }
    free(x);
    free(y);
}

static void test_exact_windows(void **state) {
    (void)state;
    const char *path = write_file("ten.txt", "abcdefghij", 10);
    snug_dataset *ds = open_ok(path, 3, 0.0, false);
    /* 9 targets (bytes 1..9) in windows of 3: exactly 3 samples, none padded. */
    assert_int_equal(snug_dataset_size(ds), 3);
    assert_int_equal(snug_dataset_classes(ds), 256);
    assert_int_equal(ds->targets_per_sample, 3);
    assert_int_equal(ds->sample_numel, 3);
    snug_shape sh = snug_dataset_sample_shape(ds);
    assert_int_equal(sh.rank, 1); /* (context): what snug_input_tokens(context) takes */
    assert_int_equal(sh.dims[0], 3);
    assert_int_equal(sh.dims[1], 0);
    for (size_t i = 0; i < 3; i++) expect_sample(ds, i, (const uint8_t *)"abcdefghij", 10, 3);
    /* Spelled out once: sample 2 is "ghi" -> "hij". */
    size_t idx = 2;
    float x[3];
    int32_t y[3];
    ds->ops->fill_inputs(ds, &idx, 1, x);
    ds->ops->fill_targets(ds, &idx, 1, y);
    assert_true(x[0] == 'g' && x[1] == 'h' && x[2] == 'i');
    assert_true(y[0] == 'h' && y[1] == 'i' && y[2] == 'j');
    snug_dataset_free(ds);
}

static void test_last_window_padded(void **state) {
    (void)state;
    const char *path = write_file("eleven.txt", "abcdefghijk", 11);
    snug_dataset *ds = open_ok(path, 3, 0.0, false);
    /* 10 targets in windows of 3: 4 samples, the last with one real target. */
    assert_int_equal(snug_dataset_size(ds), 4);
    size_t idx[2] = {3, 0};  /* several samples per call, out of order */
    float x[6];
    int32_t y[6];
    ds->ops->fill_inputs(ds, idx, 2, x);
    ds->ops->fill_targets(ds, idx, 2, y);
    assert_true(x[0] == 'j' && x[1] == 'k' && x[2] == 0.0f);
    assert_true(y[0] == 'k' && y[1] == SNUG_IGNORE_TARGET && y[2] == SNUG_IGNORE_TARGET);
    assert_true(x[3] == 'a' && x[4] == 'b' && x[5] == 'c');
    assert_true(y[3] == 'b' && y[4] == 'c' && y[5] == 'd');
    snug_dataset_free(ds);
}

/* 20 bytes with holdout 0.25: the training part is bytes 0..14, the held-out part 15..19. */
static void test_holdout_split(void **state) {
    (void)state;
    uint8_t bytes[20];
    for (int i = 0; i < 20; i++) bytes[i] = (uint8_t)(100 + 7 * i);  /* up to 233: bytes above 127 stay positive */
    const char *path = write_file("twenty.bin", bytes, sizeof bytes);
    snug_dataset *train = open_ok(path, 4, 0.25, false);
    snug_dataset *held = open_ok(path, 4, 0.25, true);
    assert_int_equal(snug_dataset_size(train), 4);  /* ceil(14 / 4) */
    assert_int_equal(snug_dataset_size(held), 1);   /* ceil(4 / 4) */
    for (size_t i = 0; i < 4; i++) expect_sample(train, i, bytes, 15, 4);
    expect_sample(held, 0, bytes + 15, 5, 4);
    /* The last training window stops at byte 14: byte 15 (held out) is never a training target. */
    size_t last = 3;
    int32_t y[4];
    train->ops->fill_targets(train, &last, 1, y);
    assert_int_equal(y[0], bytes[13]);
    assert_int_equal(y[1], bytes[14]);
    assert_int_equal(y[2], SNUG_IGNORE_TARGET);
    snug_dataset_free(train);
    snug_dataset_free(held);
}

/* Windows are read from the file as needed, not mapped: a file cut short under an open data set gives zeros
 * (inputs) and ignored targets, and a read status that names the file; the windows before the cut still read. */
static void test_file_cut_under_a_run(void **state) {
    (void)state;
    const char *text = "abcdefghijklmnopqrstuvwxyz";
    const char *path = write_file("cut.txt", text, 26);
    snug_dataset *ds = open_ok(path, 4, 0.0, false);
    snug_error err = {0};
    assert_int_equal(truncate(path, 10), 0);
    const size_t first[1] = {0}, last[1] = {5};
    float x[4];
    int32_t y[4];
    ds->ops->fill_inputs(ds, first, 1, x);
    ds->ops->fill_targets(ds, first, 1, y);
    assert_int_equal(dataset_read_status(ds, &err), SNUG_OK);
    assert_float_equal(x[3], (float)'d', 0);
    assert_int_equal(y[3], 'e');
    ds->ops->fill_inputs(ds, last, 1, x);
    ds->ops->fill_targets(ds, last, 1, y);
    for (int t = 0; t < 4; t++) {
        assert_float_equal(x[t], 0.0f, 0);
        assert_true(y[t] == 0 || y[t] == SNUG_IGNORE_TARGET);
    }
    assert_int_equal(dataset_read_status(ds, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "cut.txt at byte 20"));
    snug_dataset_free(ds);
}

static void expect_error(snug_status got, const snug_error *err, snug_status want, const char *a, const char *b) {
    if (got != want || !strstr(err->message, a) || !strstr(err->message, b))
        print_error("status %d (want %d), message: %s\n  (want \"%s\" and \"%s\")\n", got, want, err->message, a, b);
    assert_int_equal(got, want);
    assert_non_null(strstr(err->message, a));
    assert_non_null(strstr(err->message, b));
}

static snug_status open_err(const char *path, size_t context, double holdout, bool heldout, snug_error *err) {
    snug_dataset *ds = (snug_dataset *)1;
    memset(err, 0, sizeof *err);
    snug_status s = snug_text_open(path, context, holdout, heldout, &ds, err);
    assert_null(ds);
    return s;
}

static void test_errors(void **state) {
    (void)state;
    snug_error err;
    const char *good = write_file("good.txt", "hello world", 11);
    const char *empty = write_file("empty.txt", "", 0);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/no-such-file.txt", tmp_dir);
    expect_error(open_err(missing, 4, 0.1, false, &err), &err, SNUG_E_IO, missing, "No such file");
    expect_error(open_err(empty, 4, 0.1, false, &err), &err, SNUG_E_FORMAT, empty, "empty");
    expect_error(open_err(tmp_dir, 4, 0.1, false, &err), &err, SNUG_E_IO, tmp_dir, "is a directory, expected a text file");
    expect_error(open_err(good, 0, 0.1, false, &err), &err, SNUG_E_ARG, good, "context must be > 0");
    expect_error(open_err(good, 4, 1.0, false, &err), &err, SNUG_E_ARG, good, "holdout");
    expect_error(open_err(good, 4, -0.1, false, &err), &err, SNUG_E_ARG, good, "holdout");
    expect_error(open_err(good, 4, NAN, false, &err), &err, SNUG_E_ARG, good, "holdout");
    expect_error(open_err(NULL, 4, 0.1, false, &err), &err, SNUG_E_ARG, "snug_text_open", "path is NULL");
    /* 11 bytes, holdout 0.5: a training part of floor(5.5) = 5 bytes and a held-out part of 6, both less than a
     * window of 6 + 1. */
    expect_error(open_err(good, 6, 0.5, true, &err), &err, SNUG_E_ARG, good, "held-out part");
    expect_error(open_err(good, 6, 0.5, false, &err), &err, SNUG_E_ARG, good, "training part");
    /* No holdout: nothing to hold out. */
    expect_error(open_err(good, 2, 0.0, true, &err), &err, SNUG_E_ARG, good, "held-out part");
    /* Exactly one window fits: context + 1 bytes. */
    snug_dataset *ds = open_ok(good, 10, 0.0, false);
    assert_int_equal(snug_dataset_size(ds), 1);
    snug_dataset_free(ds);
    assert_int_equal(snug_text_open(good, 4, 0.1, false, NULL, &err), SNUG_E_ARG);
}

/* The Brown corpus, when fetched: 90% / 10% split, every byte printable ASCII or a newline. */
static void test_brown_corpus(void **state) {
    (void)state;
    const char *path = SNUG_SOURCE_DIR "/data/brown/brown.txt";
    struct stat st;
    if (stat(path, &st) != 0) {
        print_message("skipped: %s is absent (run `make data-brown`)\n", path);
        skip();
    }
    const size_t context = 256, len = (size_t)st.st_size;
    snug_dataset *train = open_ok(path, context, 0.1, false);
    snug_dataset *held = open_ok(path, context, 0.1, true);
    const size_t split = (size_t)floor((double)len * 0.9);
    assert_int_equal(snug_dataset_size(train), (split - 1 + context - 1) / context);
    assert_int_equal(snug_dataset_size(held), (len - split - 1 + context - 1) / context);
    size_t idx[3] = {0, snug_dataset_size(train) / 2, snug_dataset_size(train) - 1};
    float *x = malloc(3 * context * sizeof *x);
    int32_t *y = malloc(3 * context * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    train->ops->fill_inputs(train, idx, 3, x);
    train->ops->fill_targets(train, idx, 3, y);
    for (size_t p = 0; p < 3 * context; p++) {
        assert_true(x[p] == 0.0f || x[p] == '\n' || (x[p] >= ' ' && x[p] <= '~'));
        assert_true(y[p] == SNUG_IGNORE_TARGET || y[p] == '\n' || (y[p] >= ' ' && y[p] <= '~'));
    }
    assert_true(x[0] == 'T' && x[1] == 'h' && x[2] == 'e');  /* "The Fulton County Grand Jury ..." */
    free(x);
    free(y);
    snug_dataset_free(train);
    snug_dataset_free(held);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_windows),
        cmocka_unit_test(test_last_window_padded),
        cmocka_unit_test(test_holdout_split),
        cmocka_unit_test(test_file_cut_under_a_run),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_brown_corpus),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}

/* IDX reading and MNIST datasets: small IDX files written into a temporary directory, good and broken in every
 * way the reader checks; each failure must name the file and the problem. With SNUG_DATA_DIR pointing at the
 * real MNIST (data/mnist after `make data`), the real files are checked too. */
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
#include "data/idx.h"
#include "ops/op.h"

#define MAX_FILES 64

static char tmp_dir[64];
static char written[MAX_FILES][256];
static int n_written;

static int make_tmp_dir(void **state) {
    (void)state;
    strcpy(tmp_dir, "/tmp/snug_test_idx_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state) {
    (void)state;
    for (int i = n_written - 1; i >= 0; i--) remove(written[i]);  /* files, then subdirectories */
    return rmdir(tmp_dir);
}

/* The path of name inside the temporary directory (static storage, one per name written). */
static const char *tmp_path(const char *name) {
    assert_true(n_written < MAX_FILES);
    char *p = written[n_written++];
    snprintf(p, sizeof written[0], "%s/%s", tmp_dir, name);
    return p;
}

static const char *write_raw(const char *name, const void *bytes, size_t len) {
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* Writes magic 00 00 type ndims, the dims big-endian, then exactly data_len bytes of data (which may disagree
 * with the dims on purpose). */
static const char *write_idx(const char *name, uint8_t type, int ndims, const uint32_t *dims, const uint8_t *data,
                             size_t data_len) {
    size_t header = 4 + 4 * (size_t)ndims;
    uint8_t *buf = calloc(header + data_len + 1, 1);
    assert_non_null(buf);
    buf[2] = type;
    buf[3] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++)
        for (int b = 0; b < 4; b++) buf[4 + 4 * i + b] = (uint8_t)(dims[i] >> (24 - 8 * b));
    if (data_len) memcpy(buf + header, data, data_len);
    const char *path = write_raw(name, buf, header + data_len);
    free(buf);
    return path;
}

/* Three 2x3 images (not square, so H and W must come from the file) and their labels. */
static const uint8_t small_pixels[18] = {0, 255, 128, 1, 2, 3, 10, 20, 30, 40, 50, 60, 254, 0, 7, 77, 177, 200};
static const uint8_t small_labels[3] = {5, 0, 9};
static const uint32_t small_image_dims[3] = {3, 2, 3};
static const uint32_t small_label_dims[1] = {3};

static const char *write_small_images(const char *name) {
    return write_idx(name, 0x08, 3, small_image_dims, small_pixels, sizeof small_pixels);
}

static const char *write_small_labels(const char *name) {
    return write_idx(name, 0x08, 1, small_label_dims, small_labels, sizeof small_labels);
}

/* What ToTensor + Normalize give for a byte, in float32, computed independently of the library's table. */
static float normalised(uint8_t v) { return ((float)v / 255.0f - 0.1307f) / 0.3081f; }

/* The call failed with want, and the message names the file and says the key phrase. */
static void expect_error(snug_status got, const snug_error *err, snug_status want, const char *name,
                         const char *phrase) {
    if (got != want || !strstr(err->message, name) || !strstr(err->message, phrase))
        print_error("status %d (want %d), message: %s\n  (want it to contain \"%s\" and \"%s\")\n", got, want,
                    err->message, name, phrase);
    assert_int_equal(got, want);
    assert_non_null(strstr(err->message, name));
    assert_non_null(strstr(err->message, phrase));
}

static snug_status open_pair(const char *images, const char *labels, snug_dataset **ds, snug_error *err) {
    memset(err, 0, sizeof *err);
    *ds = (snug_dataset *)1;  /* must be reset to NULL on failure */
    return snug_mnist_open_files(images, labels, ds, err);
}

/* ---- valid files ---- */

static void test_valid_pair_loads_normalised(void **state) {
    (void)state;
    const char *images = write_small_images("valid-images");
    const char *labels = write_small_labels("valid-labels");
    snug_dataset *ds;
    snug_error err;
    assert_int_equal(open_pair(images, labels, &ds, &err), SNUG_OK);
    assert_int_equal(snug_dataset_size(ds), 3);
    assert_int_equal(snug_dataset_classes(ds), 10);
    snug_shape s = snug_dataset_sample_shape(ds);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dims[0], 1);
    assert_int_equal(s.dims[1], 2);
    assert_int_equal(s.dims[2], 3);
    assert_int_equal(ds->sample_numel, 6);
    assert_int_equal(ds->targets_per_sample, 1);

    const size_t idx[3] = {2, 0, 2};
    float x[18];
    int32_t y[3];
    ds->ops->fill_inputs(ds, idx, 3, x);
    ds->ops->fill_targets(ds, idx, 3, y);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(y[i], small_labels[idx[i]]);
        for (size_t p = 0; p < 6; p++) assert_float_equal(x[i * 6 + p], normalised(small_pixels[idx[i] * 6 + p]), 0);
    }
    /* Sample 0 holds a 0 and a 255: the ends of the range, against values worked out by hand. */
    assert_float_equal(x[6 + 0], -0.4242129, 1e-6);
    assert_float_equal(x[6 + 1], 2.8214865, 1e-6);
    snug_dataset_free(ds);
}

static void test_open_dir_uses_standard_names(void **state) {
    (void)state;
    const char *sub = tmp_path("mnist");
    assert_int_equal(mkdir(sub, 0700), 0);
    write_small_images("mnist/train-images-idx3-ubyte");
    write_small_labels("mnist/train-labels-idx1-ubyte");
    const uint32_t one_image[3] = {1, 2, 3}, one_label[1] = {1};
    const uint8_t seven = 7;
    write_idx("mnist/t10k-images-idx3-ubyte", 0x08, 3, one_image, small_pixels, 6);
    write_idx("mnist/t10k-labels-idx1-ubyte", 0x08, 1, one_label, &seven, 1);

    snug_dataset *train = NULL, *test = NULL;
    snug_error err = {0};
    assert_int_equal(snug_mnist_open(sub, true, &train, &err), SNUG_OK);
    assert_int_equal(snug_mnist_open(sub, false, &test, &err), SNUG_OK);
    assert_int_equal(snug_dataset_size(train), 3);
    assert_int_equal(snug_dataset_size(test), 1);
    const size_t first = 0;
    int32_t y;
    test->ops->fill_targets(test, &first, 1, &y);
    assert_int_equal(y, 7);
    snug_dataset_free(train);
    snug_dataset_free(test);
}

/* Enough pixels per call to take the OpenMP path: every sample must still land in its own slot. */
static void test_large_fill_matches_serial(void **state) {
    (void)state;
    enum { N = 700, H = 28, W = 28 };
    uint8_t *pixels = malloc((size_t)N * H * W);
    uint8_t labels[N];
    assert_non_null(pixels);
    for (size_t i = 0; i < (size_t)N * H * W; i++) pixels[i] = (uint8_t)((i * 2654435761u) >> 13);
    for (size_t i = 0; i < N; i++) labels[i] = (uint8_t)(i % 10);
    const uint32_t idims[3] = {N, H, W}, ldims[1] = {N};
    const char *images = write_idx("large-images", 0x08, 3, idims, pixels, (size_t)N * H * W);
    const char *lpath = write_idx("large-labels", 0x08, 1, ldims, labels, N);
    snug_dataset *ds;
    snug_error err;
    assert_int_equal(open_pair(images, lpath, &ds, &err), SNUG_OK);

    size_t idx[N];
    for (size_t i = 0; i < N; i++) idx[i] = (i * 263) % N;  /* 263 is prime to 700: a permutation */
    float *x = malloc(sizeof(float) * N * H * W);
    int32_t y[N];
    assert_non_null(x);
    ds->ops->fill_inputs(ds, idx, N, x);
    ds->ops->fill_targets(ds, idx, N, y);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(y[i], labels[idx[i]]);
        for (size_t p = 0; p < (size_t)H * W; p++)
            assert_float_equal(x[i * H * W + p], normalised(pixels[idx[i] * H * W + p]), 0);
    }
    free(x);
    free(pixels);
    snug_dataset_free(ds);
}

static void test_idx_open_reports_dims(void **state) {
    (void)state;
    const uint32_t dims[4] = {2, 3, 1, 2};
    const uint8_t data[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    const char *path = write_idx("four-d", 0x08, 4, dims, data, sizeof data);
    idx_file f;
    snug_error err = {0};
    assert_int_equal(idx_open(path, 0, &f, &err), SNUG_OK);
    assert_int_equal(f.ndims, 4);
    for (int i = 0; i < 4; i++) assert_int_equal(f.dims[i], dims[i]);
    assert_int_equal(f.count, 12);
    uint8_t read[12], part[5];
    assert_true(idx_read(&f, 0, sizeof read, read));
    assert_memory_equal(read, data, sizeof data);
    assert_true(idx_read(&f, 7, sizeof part, part)); /* any piece, at any element */
    assert_memory_equal(part, data + 7, sizeof part);
    assert_false(idx_read(&f, 8, sizeof part, part)); /* past the end: zeros, and the status names the file */
    for (size_t i = 0; i < sizeof part; i++) assert_int_equal(part[i], 0);
    assert_int_equal(idx_status(&f, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "four-d"));
    idx_close(&f);
    assert_int_equal(f.file.fd, -1);
    idx_close(&f);  /* twice is harmless */
}

/* The images are read as needed, not mapped: a file cut short under a running data set gives zeros and a read
 * status that names it (a mapped file would have ended the process with SIGBUS). The labels are read once and
 * are the data set's own memory. */
static void test_images_read_as_needed(void **state) {
    (void)state;
    const char *images = write_small_images("cut-images");
    const char *labels = write_small_labels("cut-labels");
    snug_dataset *ds;
    snug_error err;
    assert_int_equal(open_pair(images, labels, &ds, &err), SNUG_OK);
    assert_int_equal(snug_dataset_memory(ds, 4), 3);
    const size_t first[1] = {0}, last[1] = {2};
    float x[6];
    int32_t y[1];
    ds->ops->fill_inputs(ds, last, 1, x);
    assert_int_equal(dataset_read_status(ds, &err), SNUG_OK);
    assert_float_equal(x[5], normalised(small_pixels[17]), 0);
    assert_int_equal(truncate(images, 16 + 6 + 3), 0); /* header, sample 0, half of sample 1 */
    ds->ops->fill_inputs(ds, first, 1, x);
    assert_int_equal(dataset_read_status(ds, &err), SNUG_OK);
    ds->ops->fill_inputs(ds, last, 1, x);
    for (size_t p = 0; p < 6; p++) assert_float_equal(x[p], normalised(0), 0);
    ds->ops->fill_targets(ds, last, 1, y);
    assert_int_equal(y[0], small_labels[2]);
    assert_int_equal(dataset_read_status(ds, &err), SNUG_E_IO);
    assert_non_null(strstr(err.message, "cut-images at byte 28"));
    assert_non_null(strstr(err.message, "changed"));
    snug_dataset_free(ds);
}

/* ---- broken files ---- */

static void test_truncated_images(void **state) {
    (void)state;
    const char *images = write_idx("trunc-images", 0x08, 3, small_image_dims, small_pixels, 17);
    const char *labels = write_small_labels("trunc-labels");
    snug_dataset *ds;
    snug_error err;
    snug_status s = open_pair(images, labels, &ds, &err);
    expect_error(s, &err, SNUG_E_FORMAT, "trunc-images", "truncated: expected 34 bytes");
    assert_non_null(strstr(err.message, "found 33"));
    assert_null(ds);
}

static void test_trailing_bytes(void **state) {
    (void)state;
    uint8_t more[19];
    memcpy(more, small_pixels, 18);
    more[18] = 42;
    const char *images = write_idx("trail-images", 0x08, 3, small_image_dims, more, sizeof more);
    const char *labels = write_small_labels("trail-labels");
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(images, labels, &ds, &err), &err, SNUG_E_FORMAT, "trail-images", "trailing bytes");
    assert_null(ds);
}

static void test_bad_magic(void **state) {
    (void)state;
    /* A gzip file given without unpacking it: 1f 8b. */
    uint8_t gz[40] = {0x1f, 0x8b, 0x08, 0x00};
    const char *images = write_raw("gz-images", gz, sizeof gz);
    const char *labels = write_small_labels("gz-labels");
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(images, labels, &ds, &err), &err, SNUG_E_FORMAT, "gz-images", "bad magic");
    assert_null(ds);
}

static void test_wrong_type_byte(void **state) {
    (void)state;
    /* 0x0D is float in IDX: a valid IDX file, but not one of bytes. */
    const char *images = write_idx("float-images", 0x0D, 3, small_image_dims, small_pixels, sizeof small_pixels);
    const char *labels = write_small_labels("float-labels");
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(images, labels, &ds, &err), &err, SNUG_E_FORMAT, "float-images", "bad magic");
    assert_non_null(strstr(err.message, "0x0d"));
}

static void test_zero_dimension(void **state) {
    (void)state;
    const uint32_t dims[3] = {3, 0, 3};
    const char *images = write_idx("zero-images", 0x08, 3, dims, NULL, 0);
    const char *labels = write_small_labels("zero-labels");
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(images, labels, &ds, &err), &err, SNUG_E_FORMAT, "zero-images", "dimension 1 is 0");
}

static void test_overflowing_dimensions(void **state) {
    (void)state;
    const uint32_t dims[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    const char *images = write_idx("huge-images", 0x08, 3, dims, NULL, 0);
    const char *labels = write_small_labels("huge-labels");
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(images, labels, &ds, &err), &err, SNUG_E_FORMAT, "huge-images", "overflow");
}

static void test_header_only_and_empty(void **state) {
    (void)state;
    const char *labels = write_small_labels("short-labels");
    snug_dataset *ds;
    snug_error err;

    const char *header_only = write_idx("header-only-images", 0x08, 3, small_image_dims, NULL, 0);
    expect_error(open_pair(header_only, labels, &ds, &err), &err, SNUG_E_FORMAT, "header-only-images",
                 "truncated: expected 34 bytes");

    const char *empty = write_raw("empty-images", NULL, 0);
    expect_error(open_pair(empty, labels, &ds, &err), &err, SNUG_E_FORMAT, "empty-images", "empty");

    const uint8_t two[2] = {0, 0};
    const char *tiny = write_raw("tiny-images", two, sizeof two);
    expect_error(open_pair(tiny, labels, &ds, &err), &err, SNUG_E_FORMAT, "tiny-images", "truncated");

    /* Magic says 3 dimensions but the file ends inside the dimension list. */
    const uint8_t cut[10] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0};
    const char *cut_header = write_raw("cut-header-images", cut, sizeof cut);
    expect_error(open_pair(cut_header, labels, &ds, &err), &err, SNUG_E_FORMAT, "cut-header-images",
                 "truncated");
}

static void test_missing_file_and_directory(void **state) {
    (void)state;
    const char *labels = write_small_labels("lonely-labels");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no-such-images", tmp_dir);
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(missing, labels, &ds, &err), &err, SNUG_E_IO, missing, "IDX files in one directory");
    assert_null(ds);

    /* The whole directory missing: snug_mnist_open names the file it looked for. */
    snprintf(missing, sizeof missing, "%s/no-such-dir", tmp_dir);
    memset(&err, 0, sizeof err);
    expect_error(snug_mnist_open(missing, true, &ds, &err), &err, SNUG_E_IO, "no-such-dir/train-images-idx3-ubyte",
                 "IDX files in one directory");

    expect_error(open_pair(tmp_dir, labels, &ds, &err), &err, SNUG_E_IO, tmp_dir, "is a directory");
}

static void test_label_count_mismatch(void **state) {
    (void)state;
    const uint32_t two[1] = {2};
    const char *images = write_small_images("count-images");
    const char *labels = write_idx("count-labels", 0x08, 1, two, small_labels, 2);
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(images, labels, &ds, &err), &err, SNUG_E_FORMAT, "count-images", "3 images");
    assert_non_null(strstr(err.message, "count-labels"));
    assert_non_null(strstr(err.message, "2 labels"));
    assert_null(ds);
}

static void test_label_out_of_range(void **state) {
    (void)state;
    const uint8_t bad[3] = {5, 10, 255};
    const char *images = write_small_images("corrupt-images");
    const char *labels = write_idx("corrupt-labels", 0x08, 1, small_label_dims, bad, sizeof bad);
    snug_dataset *ds;
    snug_error err;
    /* The first bad one is reported: index 1, value 10. */
    expect_error(open_pair(images, labels, &ds, &err), &err, SNUG_E_FORMAT, "corrupt-labels", "label 1 is 10");
    assert_non_null(strstr(err.message, "corrupt"));
}

static void test_labels_given_as_images(void **state) {
    (void)state;
    const char *labels = write_small_labels("swapped-labels");
    snug_dataset *ds;
    snug_error err;
    expect_error(open_pair(labels, labels, &ds, &err), &err, SNUG_E_FORMAT, "swapped-labels",
                 "1 dimension, expected 3");
    const char *images = write_small_images("swapped-images");
    expect_error(open_pair(images, images, &ds, &err), &err, SNUG_E_FORMAT, "swapped-images",
                 "3 dimensions, expected 1");
}

static void test_bad_arguments(void **state) {
    (void)state;
    snug_dataset *ds;
    snug_error err = {0};
    assert_int_equal(snug_mnist_open(NULL, true, &ds, &err), SNUG_E_ARG);
    assert_int_equal(snug_mnist_open_files("a", NULL, &ds, &err), SNUG_E_ARG);
    assert_int_equal(snug_mnist_open_files("a", "b", NULL, &err), SNUG_E_ARG);
    snug_dataset_free(NULL);
    assert_int_equal(snug_dataset_size(NULL), 0);
    assert_int_equal(snug_dataset_classes(NULL), 0);
    assert_int_equal(snug_dataset_sample_shape(NULL).rank, 0);
}

/* ---- datasets over memory (the other opener the accessors serve) ---- */

static void test_memory_dataset(void **state) {
    (void)state;
    float inputs[3 * 2 * 2];
    for (int i = 0; i < 12; i++) inputs[i] = (float)i * 0.5f - 1.0f;
    int32_t labels[3] = {2, SNUG_IGNORE_TARGET, 0};
    snug_dataset *ds;
    snug_error err = {0};
    assert_int_equal(snug_dataset_from_memory(inputs, labels, 3, 1, 2, 2, 3, &ds, &err), SNUG_OK);
    /* A copy: the caller's arrays may change afterwards. */
    inputs[8] = 99.0f;
    labels[2] = 1;
    assert_int_equal(snug_dataset_size(ds), 3);
    assert_int_equal(snug_dataset_classes(ds), 3);
    assert_int_equal(snug_dataset_sample_shape(ds).dims[1], 2);
    const size_t idx[2] = {2, 1};
    float x[8];
    int32_t y[2];
    ds->ops->fill_inputs(ds, idx, 2, x);
    ds->ops->fill_targets(ds, idx, 2, y);
    assert_float_equal(x[0], 3.0f, 0);  /* sample 2 starts at element 8: 8 * 0.5 - 1 */
    assert_float_equal(x[4], 1.0f, 0);  /* sample 1 starts at element 4 */
    assert_int_equal(y[0], 0);
    assert_int_equal(y[1], SNUG_IGNORE_TARGET);
    snug_dataset_free(ds);
}

static void test_memory_dataset_rejects(void **state) {
    (void)state;
    const float inputs[4] = {0};
    const int32_t labels[2] = {0, 3};
    snug_dataset *ds;
    snug_error err = {0};
    assert_int_equal(snug_dataset_from_memory(inputs, labels, 0, 1, 2, 1, 3, &ds, &err), SNUG_E_ARG);
    assert_null(ds);
    assert_int_equal(snug_dataset_from_memory(inputs, labels, 2, 1, 2, 1, 0, &ds, &err), SNUG_E_ARG);
    assert_int_equal(snug_dataset_from_memory(inputs, labels, 2, 1, 2, 1, 3, &ds, &err), SNUG_E_ARG);
    assert_non_null(strstr(err.message, "label 1 is 3"));
    const int32_t negative[2] = {0, -2};
    assert_int_equal(snug_dataset_from_memory(inputs, negative, 2, 1, 2, 1, 3, &ds, &err), SNUG_E_ARG);
    assert_int_equal(snug_dataset_from_memory(inputs, labels, SIZE_MAX / 2, 4, 1, 1, 4, &ds, &err),
                     SNUG_E_OVERFLOW);
    assert_int_equal(snug_dataset_from_memory(NULL, labels, 2, 1, 2, 1, 4, &ds, &err), SNUG_E_ARG);
}

/* ---- the real MNIST, when present ---- */

/* The directory holding the real files: $SNUG_DATA_DIR itself or its mnist/ subdirectory; NULL when absent. */
static const char *real_mnist_dir(char *buf, size_t len) {
    const char *dir = getenv("SNUG_DATA_DIR");
    if (!dir || !*dir) return NULL;
    const char *candidates[2] = {"", "/mnist"};
    for (int i = 0; i < 2; i++) {
        char probe[4200];
        snprintf(buf, len, "%s%s", dir, candidates[i]);
        snprintf(probe, sizeof probe, "%s/train-images-idx3-ubyte", buf);
        if (access(probe, R_OK) == 0) return buf;
    }
    return NULL;
}

static void check_real_set(const char *dir, bool train, size_t n, const size_t *histogram) {
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_mnist_open(dir, train, &ds, &err);
    if (s != SNUG_OK) print_error("%s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    assert_int_equal(snug_dataset_size(ds), n);
    snug_shape shape = snug_dataset_sample_shape(ds);
    assert_int_equal(shape.dims[0], 1);
    assert_int_equal(shape.dims[1], 28);
    assert_int_equal(shape.dims[2], 28);

    size_t *idx = malloc(n * sizeof *idx);
    int32_t *y = malloc(n * sizeof *y);
    assert_non_null(idx);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    ds->ops->fill_targets(ds, idx, n, y);
    size_t counts[10] = {0}, total = 0;
    for (size_t i = 0; i < n; i++) {
        assert_in_range(y[i], 0, 9);
        counts[y[i]]++;
    }
    for (int c = 0; c < 10; c++) {
        assert_int_equal(counts[c], histogram[c]);
        total += counts[c];
    }
    assert_int_equal(total, n);
    if (train) assert_int_equal(y[0], 5);

    /* The first image: pixels span the full byte range, so the normalised values reach both ends. */
    float x[28 * 28];
    ds->ops->fill_inputs(ds, idx, 1, x);
    float lo = x[0], hi = x[0];
    for (int p = 0; p < 28 * 28; p++) {
        lo = fminf(lo, x[p]);
        hi = fmaxf(hi, x[p]);
    }
    assert_float_equal(lo, normalised(0), 0);
    assert_float_equal(hi, normalised(255), 0);
    free(idx);
    free(y);
    snug_dataset_free(ds);
}

static void test_real_mnist(void **state) {
    (void)state;
    char dir[4096];
    if (!real_mnist_dir(dir, sizeof dir)) {
        print_message("SNUG_DATA_DIR unset or without MNIST: skipping the real-data check\n");
        skip();
    }
    /* The published class counts of the MNIST training and test sets. */
    const size_t train_hist[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
    const size_t test_hist[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    check_real_set(dir, true, 60000, train_hist);
    check_real_set(dir, false, 10000, test_hist);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_pair_loads_normalised),
        cmocka_unit_test(test_open_dir_uses_standard_names),
        cmocka_unit_test(test_large_fill_matches_serial),
        cmocka_unit_test(test_idx_open_reports_dims),
        cmocka_unit_test(test_images_read_as_needed),
        cmocka_unit_test(test_truncated_images),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_wrong_type_byte),
        cmocka_unit_test(test_zero_dimension),
        cmocka_unit_test(test_overflowing_dimensions),
        cmocka_unit_test(test_header_only_and_empty),
        cmocka_unit_test(test_missing_file_and_directory),
        cmocka_unit_test(test_label_count_mismatch),
        cmocka_unit_test(test_label_out_of_range),
        cmocka_unit_test(test_labels_given_as_images),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_memory_dataset),
        cmocka_unit_test(test_memory_dataset_rejects),
        cmocka_unit_test(test_real_mnist),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}

/* Padding an image dataset into a larger frame: every element checked against an independent construction, for
 * per-sample labels (a memory dataset), per-pixel targets (synthetic shapes: the frame is ignored) and MNIST
 * padded to 32x32 (a tiny IDX pair written here: the frame is the normalised 0 pixel). */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snug.h"
#include "data/dataset.h"
#include "ops/op.h"

static snug_dataset *pad_ok(snug_dataset *inner, size_t ph, size_t pw, float value) {
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_dataset_pad(inner, ph, pw, value, &ds, &err);
    if (s != SNUG_OK) print_error("snug_dataset_pad: %s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    return ds;
}

/* 3 samples of (2, 2, 3), values 1000 i + 100 c + 10 r + x; padded by 1 row and 2 columns with -7. */
static void test_pad_labels(void **state) {
    (void)state;
    enum { N = 3, C = 2, H = 2, W = 3, PH = 1, PW = 2, HP = H + 2 * PH, WP = W + 2 * PW };
    float inputs[N * C * H * W];
    const int32_t labels[N] = {4, 0, 9};
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            for (int r = 0; r < H; r++)
                for (int x = 0; x < W; x++)
                    inputs[((i * C + c) * H + r) * W + x] = (float)(1000 * i + 100 * c + 10 * r + x);
    snug_dataset *inner = NULL;
    snug_error err = {0};
    assert_int_equal(snug_dataset_from_memory(inputs, labels, N, C, H, W, 10, &inner, &err), SNUG_OK);
    snug_dataset *ds = pad_ok(inner, PH, PW, -7.0f);
    snug_shape sh = snug_dataset_sample_shape(ds);
    assert_true(sh.rank == 3 && sh.dims[0] == C && sh.dims[1] == HP && sh.dims[2] == WP && sh.dims[3] == 0);
    assert_int_equal(ds->sample_numel, C * HP * WP);
    assert_int_equal(ds->targets_per_sample, 1);
    assert_int_equal(snug_dataset_size(ds), N);
    assert_int_equal(snug_dataset_classes(ds), 10);
    const size_t idx[4] = {2, 0, 1, 2};
    float x[4 * C * HP * WP];
    int32_t y[4];
    ds->ops->fill_inputs(ds, idx, 4, x);
    ds->ops->fill_targets(ds, idx, 4, y);
    for (int j = 0; j < 4; j++) {
        assert_int_equal(y[j], labels[idx[j]]);
        for (int c = 0; c < C; c++)
            for (int r = 0; r < HP; r++)
                for (int q = 0; q < WP; q++) {
                    const bool frame = r < PH || r >= PH + H || q < PW || q >= PW + W;
                    const float want = frame ? -7.0f : (float)(1000 * (int)idx[j] + 100 * c + 10 * (r - PH) + (q - PW));
                    assert_true(x[((j * C + c) * HP + r) * WP + q] == want);
                }
    }
    snug_dataset_free(ds);
}

/* Per-pixel targets: the inner targets centred, the frame SNUG_IGNORE_TARGET; inputs centred likewise. */
static void test_pad_pixel_targets(void **state) {
    (void)state;
    enum { H = 6, W = 5, PH = 2, PW = 1, HP = H + 2 * PH, WP = W + 2 * PW };
    snug_dataset *inner = NULL, *twin = NULL;
    snug_error err = {0};
    assert_int_equal(snug_shapes_new(8, H, W, 99, &inner, &err), SNUG_OK);
    assert_int_equal(snug_shapes_new(8, H, W, 99, &twin, &err), SNUG_OK);
    snug_dataset *ds = pad_ok(inner, PH, PW, 0.5f);
    assert_int_equal(ds->targets_per_sample, HP * WP);
    assert_int_equal(snug_dataset_classes(ds), 2);
    const size_t idx[2] = {5, 1};
    float x[2 * HP * WP], tx[2 * H * W];
    int32_t y[2 * HP * WP], ty[2 * H * W];
    ds->ops->fill_inputs(ds, idx, 2, x);
    ds->ops->fill_targets(ds, idx, 2, y);
    twin->ops->fill_inputs(twin, idx, 2, tx);
    twin->ops->fill_targets(twin, idx, 2, ty);
    for (int j = 0; j < 2; j++)
        for (int r = 0; r < HP; r++)
            for (int q = 0; q < WP; q++) {
                const bool frame = r < PH || r >= PH + H || q < PW || q >= PW + W;
                const size_t p = (size_t)(j * HP + r) * WP + q, t = (size_t)(j * H + r - PH) * W + (q - PW);
                assert_true(x[p] == (frame ? 0.5f : tx[t]));
                assert_int_equal(y[p], frame ? SNUG_IGNORE_TARGET : ty[t]);
            }
    snug_dataset_free(ds);
    snug_dataset_free(twin);
}

/* ---- MNIST padded, from IDX files written into a temporary folder ---- */

static char tmp_dir[64];

static int make_tmp_dir(void **state) {
    (void)state;
    strcpy(tmp_dir, "/tmp/snug_test_pad_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static const char *const idx_names[2] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};

static int remove_tmp_dir(void **state) {
    (void)state;
    char path[128];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", tmp_dir, idx_names[i]);
        remove(path);
    }
    return rmdir(tmp_dir);
}

/* An IDX file: magic 00 00 08 ndims, the dims big-endian, then the bytes. */
static void write_idx(const char *name, int ndims, const uint32_t *dims, const uint8_t *data, size_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    const uint8_t magic[4] = {0, 0, 8, (uint8_t)ndims};
    assert_int_equal(fwrite(magic, 1, 4, f), 4);
    for (int i = 0; i < ndims; i++) {
        const uint8_t be[4] = {(uint8_t)(dims[i] >> 24), (uint8_t)(dims[i] >> 16), (uint8_t)(dims[i] >> 8),
                               (uint8_t)dims[i]};
        assert_int_equal(fwrite(be, 1, 4, f), 4);
    }
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static float normalised(uint8_t v) { return ((float)v / 255.0f - 0.1307f) / 0.3081f; }

/* Two 28x28 images padded by 2: 32x32, the frame the normalised 0 pixel, the image centred and unchanged. */
static void test_mnist_padded(void **state) {
    (void)state;
    enum { N = 2, S = 28, P = 2, SP = S + 2 * P };
    static uint8_t pixels[N * S * S];
    for (size_t p = 0; p < sizeof pixels; p++) pixels[p] = (uint8_t)(p * 37 + 11);
    const uint8_t labels[N] = {3, 8};
    write_idx(idx_names[0], 3, (const uint32_t[]){N, S, S}, pixels, sizeof pixels);
    write_idx(idx_names[1], 1, (const uint32_t[]){N}, labels, sizeof labels);
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_mnist_open_padded(tmp_dir, true, P, &ds, &err);
    if (s != SNUG_OK) print_error("snug_mnist_open_padded: %s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    snug_shape sh = snug_dataset_sample_shape(ds);
    assert_true(sh.rank == 3 && sh.dims[0] == 1 && sh.dims[1] == 32 && sh.dims[2] == 32);
    assert_int_equal(snug_dataset_classes(ds), 10);
    const size_t idx[2] = {1, 0};
    static float x[N * SP * SP];
    int32_t y[N];
    ds->ops->fill_inputs(ds, idx, N, x);
    ds->ops->fill_targets(ds, idx, N, y);
    for (int j = 0; j < N; j++) {
        assert_int_equal(y[j], labels[idx[j]]);
        for (int r = 0; r < SP; r++)
            for (int q = 0; q < SP; q++) {
                const bool frame = r < P || r >= P + S || q < P || q >= P + S;
                const size_t inside = (idx[j] * S + (size_t)(r - P)) * S + (size_t)(q - P);
                const float want = frame ? normalised(0) : normalised(pixels[inside]);
                assert_true(x[(j * SP + r) * SP + q] == want);
            }
    }
    snug_dataset_free(ds);
    /* A missing folder fails as snug_mnist_open does, naming the file. */
    ds = (snug_dataset *)1;
    assert_int_equal(snug_mnist_open_padded("/nonexistent-snug-dir", true, P, &ds, &err), SNUG_E_IO);
    assert_null(ds);
    assert_non_null(strstr(err.message, "/nonexistent-snug-dir/train-images-idx3-ubyte"));
}

/* Failures free the inner dataset (the leak checker would see it otherwise). */
static void test_pad_errors(void **state) {
    (void)state;
    snug_dataset *inner = NULL, *ds = (snug_dataset *)1;
    snug_error err = {0};
    assert_int_equal(snug_shapes_new(2, 4, 4, 1, &inner, &err), SNUG_OK);
    assert_int_equal(snug_dataset_pad(inner, SIZE_MAX / 2, 0, 0.0f, &ds, &err), SNUG_E_OVERFLOW);
    assert_null(ds);
    assert_non_null(strstr(err.message, "overflows"));
    assert_int_equal(snug_dataset_pad(NULL, 1, 1, 0.0f, &ds, &err), SNUG_E_ARG);
    assert_int_equal(snug_shapes_new(2, 4, 4, 1, &inner, &err), SNUG_OK);
    assert_int_equal(snug_dataset_pad(inner, 1, 1, 0.0f, NULL, &err), SNUG_E_ARG);
    assert_int_equal(snug_shapes_new(2, 4, 4, 1, &inner, &err), SNUG_OK);
    ds = pad_ok(inner, 0, 0, 0.0f);  /* zero padding: the same samples */
    assert_int_equal(ds->sample_numel, 16);
    snug_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_labels),
        cmocka_unit_test(test_pad_pixel_targets),
        cmocka_unit_test(test_mnist_padded),
        cmocka_unit_test(test_pad_errors),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}

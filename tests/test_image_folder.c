/* Image folders (snug_image_folder_open, the named data set images:DIR): small PNG and JPEG files written here
 * with libpng and libjpeg into a temporary folder, read back and checked value by value: class order and labels,
 * channel conversion, exact copies, resize and crop against hand-computed weights, the normalisation (computed
 * against a float64 reference, the same for 1 and 2 threads, or given), a validation folder matched against the
 * training folder's classes, and each error by the file or folder it names. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE 700

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <omp.h>
#include <png.h>
#include <stdio.h>  /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snug.h"
#include "data/dataset.h"

static char tmp_dir[64];

static int make_tmp_dir(void **state) {
    (void)state;
    strcpy(tmp_dir, "/tmp/snug_test_images_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    chmod(path, 0755);
    return remove(path);
}

static int remove_tmp_dir(void **state) {
    (void)state;
    return nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- writing files ---- */

/* tmp/a/b/... joined into a static ring of buffers (paths are short-lived in a test). */
static const char *path_of(const char *fmt, ...) {
    static char ring[16][512];
    static int next;
    char *p = ring[next++ % 16];
    int w = snprintf(p, sizeof ring[0], "%s/", tmp_dir);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p + w, sizeof ring[0] - (size_t)w, fmt, ap);
    va_end(ap);
    return p;
}

static const char *make_dir(const char *path) {
    assert_int_equal(mkdir(path, 0755), 0);
    return path;
}

/* An 8-bit gray (channels 1) or RGB (3) PNG of (h, w, channels) interleaved pixels. */
static void write_png(const char *path, size_t h, size_t w, size_t channels, const uint8_t *pixels) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    assert_non_null(info);
    if (setjmp(png_jmpbuf(png))) fail_msg("libpng could not write %s", path);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (size_t r = 0; r < h; r++) png_write_row(png, pixels + r * w * channels);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    assert_int_equal(fclose(f), 0);
}

/* A JPEG at quality 100 of (h, w, channels) pixels: channels 1 gray, 3 RGB, 4 CMYK; baseline, or progressive. */
static void write_jpeg_coded(const char *path, size_t h, size_t w, int channels, const uint8_t *pixels,
                             bool progressive) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = channels;
    c.in_color_space = channels == 1 ? JCS_GRAYSCALE : channels == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 100, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)c.next_scanline * w * (size_t)channels);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    assert_int_equal(fclose(f), 0);
}

static void write_jpeg(const char *path, size_t h, size_t w, int channels, const uint8_t *pixels) {
    write_jpeg_coded(path, h, w, channels, pixels, false);
}

static void write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* A gray 2x2 PNG of one value. */
static void flat_png(const char *path, uint8_t v) {
    const uint8_t px[4] = {v, v, v, v};
    write_png(path, 2, 2, 1, px);
}

/* ---- opening and reading ---- */

static const snug_normalise unit_norm1 = {1, {0}, {1}};
static const snug_normalise unit_norm3 = {3, {0, 0, 0}, {1, 1, 1}};

static snug_image_folder_options options(size_t c, size_t h, size_t w, const snug_normalise *norm) {
    return (snug_image_folder_options){.input = {.rank = 3, .dims = {c, h, w}}, .normalise = norm};
}

static snug_dataset *open_ok(const char *dir, const snug_image_folder_options *o) {
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_image_folder_open(dir, o, &ds, &err);
    if (s != SNUG_OK) print_error("snug_image_folder_open: %s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    return ds;
}

/* Opening fails with status and a message holding both needles. */
static void open_fails(const char *dir, const snug_image_folder_options *o, snug_status status, const char *needle,
                       const char *needle2) {
    snug_dataset *ds = (snug_dataset *)1;
    snug_error err = {0};
    snug_status s = snug_image_folder_open(dir, o, &ds, &err);
    print_message("%s\n", err.message);
    assert_int_equal(s, status);
    assert_null(ds);
    assert_non_null(strstr(err.message, needle));
    if (needle2) assert_non_null(strstr(err.message, needle2));
}

/* Every sample's inputs (n, numel) and targets (n). */
static float *inputs_of(const snug_dataset *ds, int32_t *y) {
    size_t *idx = malloc(ds->n * sizeof *idx);
    float *x = malloc(ds->n * ds->sample_numel * sizeof *x);
    assert_non_null(idx);
    assert_non_null(x);
    for (size_t i = 0; i < ds->n; i++) idx[i] = i;
    ds->ops->fill_inputs(ds, idx, ds->n, x);
    if (y) ds->ops->fill_targets(ds, idx, ds->n, y);
    free(idx);
    snug_error err = {0};
    assert_int_equal(dataset_read_status(ds, &err), SNUG_OK);
    return x;
}

/* ---- classes, labels, files ---- */

/* Classes in byte order ("B" < "a" < "b"), files in byte order within each, other entries ignored. */
static void test_class_order_and_labels(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("order"));
    make_dir(path_of("order/b"));
    make_dir(path_of("order/a"));
    make_dir(path_of("order/B"));
    make_dir(path_of("order/.cache"));  /* hidden: not a class */
    write_bytes(path_of("order/README.txt"), "x", 1);
    flat_png(path_of("order/b/2.png"), 31);
    flat_png(path_of("order/b/10.PNG"), 30);  /* "10.PNG" < "2.png" */
    flat_png(path_of("order/a/z.png"), 21);
    flat_png(path_of("order/a/y.png"), 20);
    flat_png(path_of("order/B/only.png"), 10);
    write_bytes(path_of("order/a/notes.txt"), "not an image", 12);
    write_bytes(path_of("order/a/.hidden.png"), "garbage", 7);
    write_bytes(path_of("order/a/png"), "garbage", 7);
    snug_image_folder_options o = options(1, 2, 2, &unit_norm1);
    snug_dataset *ds = open_ok(dir, &o);
    assert_int_equal(snug_dataset_size(ds), 5);
    assert_int_equal(snug_dataset_classes(ds), 3);
    assert_string_equal(snug_dataset_class_name(ds, 0), "B");
    assert_string_equal(snug_dataset_class_name(ds, 1), "a");
    assert_string_equal(snug_dataset_class_name(ds, 2), "b");
    assert_null(snug_dataset_class_name(ds, 3));
    const int32_t want_label[5] = {0, 1, 1, 2, 2};
    const uint8_t want_value[5] = {10, 20, 21, 30, 31};
    int32_t y[5];
    float *x = inputs_of(ds, y);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(y[i], want_label[i]);
        for (size_t p = 0; p < 4; p++) assert_true(x[i * 4 + p] == (float)want_value[i] / 255.0f);
    }
    free(x);
    snug_normalise got;
    assert_true(snug_dataset_normalisation(ds, &got));
    assert_memory_equal(&got, &unit_norm1, sizeof got);
    assert_true(snug_dataset_memory(ds, 1) >= 5 * sizeof(int32_t));
    snug_dataset_free(ds);
}

/* ---- pixels: channels, exact copies, resize and crop ---- */

/* RGB to gray by the BT.601 luma; gray to RGB replicated. */
static void test_channel_conversion(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("channels"));
    make_dir(path_of("channels/rgb"));
    make_dir(path_of("channels/zgray"));
    uint8_t rgb[2 * 3 * 3], gray[6];
    for (int p = 0; p < 6; p++) {
        for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (uint8_t)(30 * p + 70 * c + 5);
        gray[p] = (uint8_t)(200 - 31 * p);
    }
    write_png(path_of("channels/rgb/a.png"), 2, 3, 3, rgb);
    write_png(path_of("channels/zgray/a.png"), 2, 3, 1, gray);

    snug_image_folder_options o1 = options(1, 2, 3, &unit_norm1);
    snug_dataset *ds = open_ok(dir, &o1);
    float *x = inputs_of(ds, NULL);
    for (int p = 0; p < 6; p++) {
        const double luma = 0.299 * rgb[p * 3] + 0.587 * rgb[p * 3 + 1] + 0.114 * rgb[p * 3 + 2];
        assert_float_equal(x[p], luma / 255.0, 1e-6);
        assert_true(x[6 + p] == (float)gray[p] / 255.0f);
    }
    free(x);
    snug_dataset_free(ds);

    snug_image_folder_options o3 = options(3, 2, 3, &unit_norm3);
    ds = open_ok(dir, &o3);
    x = inputs_of(ds, NULL);
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 6; p++) {
            assert_true(x[c * 6 + p] == (float)rgb[p * 3 + c] / 255.0f);
            assert_true(x[18 + c * 6 + p] == (float)gray[p] / 255.0f);
        }
    free(x);
    snug_dataset_free(ds);
}

/* An image of the input's size is copied exactly, in every mode; normalised as (v / 255 - mean) / std. */
static void test_exact_copy(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("exact"));
    make_dir(path_of("exact/c"));
    uint8_t rgb[3 * 4 * 3];
    for (int i = 0; i < 36; i++) rgb[i] = (uint8_t)(i * 7 + 3);
    write_png(path_of("exact/c/a.png"), 3, 4, 3, rgb);
    const snug_normalise norm = {3, {0.25f, 0.5f, 0.125f}, {0.5f, 0.3f, 2.0f}};
    const snug_resize modes[3] = {SNUG_RESIZE_AUTO, SNUG_RESIZE_AREA, SNUG_RESIZE_BILINEAR};
    for (int k = 0; k < 3; k++) {
        snug_image_folder_options o = options(3, 3, 4, &norm);
        o.resize = modes[k];
        snug_dataset *ds = open_ok(dir, &o);
        float *x = inputs_of(ds, NULL);
        for (int c = 0; c < 3; c++)
            for (int p = 0; p < 12; p++)
                assert_true(x[c * 12 + p] == ((float)rgb[p * 3 + c] / 255.0f - norm.mean[c]) / norm.std[c]);
        free(x);
        snug_dataset_free(ds);
    }
}

/* out = Wy * img * Wx^T, on the 0..1 scale. */
static void reference(double *out, const uint8_t *img, size_t sw, const double *wy, size_t H, size_t sh,
                      const double *wx, size_t W) {
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < W; x++) {
            double acc = 0;
            for (size_t r = 0; r < sh; r++)
                for (size_t c = 0; c < sw; c++) acc += wy[y * sh + r] * wx[x * sw + c] * img[r * sw + c];
            out[y * W + x] = acc / 255.0;
        }
}

/* One gray image in folder name/c, read at (1, H, W) with mode. */
static float *read_resized(const char *name, size_t sh, size_t sw, const uint8_t *img, size_t H, size_t W,
                           snug_resize mode) {
    make_dir(path_of("%s", name));
    make_dir(path_of("%s/c", name));
    write_png(path_of("%s/c/i.png", name), sh, sw, 1, img);
    snug_image_folder_options o = options(1, H, W, &unit_norm1);
    o.resize = mode;
    snug_dataset *ds = open_ok(path_of("%s", name), &o);
    float *x = inputs_of(ds, NULL);
    snug_dataset_free(ds);
    return x;
}

static void assert_near(const float *x, const double *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (fabs(x[i] - want[i]) > 1e-6) fail_msg("value %zu: %.8f, expected %.8f", i, (double)x[i], want[i]);
    }
}

/* A 3x5 image to 2x2: scaled to 2x3 (the height decides; 5 * 2 / 3 rounds to 3), the left 2 columns kept
 * ((3 - 2) / 2 = 0). Weights worked out by hand from the definitions in image_resize.h. */
static void test_resize_non_square(void **state) {
    (void)state;
    uint8_t img[15];
    for (int i = 0; i < 15; i++) img[i] = (uint8_t)((i * 53 + 11) % 251);
    /* area: rows [0, 1.5) and [1.5, 3); columns [0, 5/3) and [5/3, 10/3) */
    const double ay[2 * 3] = {2.0 / 3, 1.0 / 3, 0, 0, 1.0 / 3, 2.0 / 3};
    const double ax[2 * 5] = {0.6, 0.4, 0, 0, 0, 0, 0.2, 0.6, 0.2, 0};
    /* bilinear: rows at 0.25 and 1.75; columns at 1/3 and 2 */
    const double by[2 * 3] = {0.75, 0.25, 0, 0, 0.25, 0.75};
    const double bx[2 * 5] = {2.0 / 3, 1.0 / 3, 0, 0, 0, 0, 0, 1, 0, 0};
    double want[4];
    float *x = read_resized("area35", 3, 5, img, 2, 2, SNUG_RESIZE_AREA);
    reference(want, img, 5, ay, 2, 3, ax, 2);
    assert_near(x, want, 4);
    free(x);
    x = read_resized("auto35", 3, 5, img, 2, 2, SNUG_RESIZE_AUTO);  /* shrinking: area */
    assert_near(x, want, 4);
    free(x);
    x = read_resized("bilinear35", 3, 5, img, 2, 2, SNUG_RESIZE_BILINEAR);
    reference(want, img, 5, by, 2, 3, bx, 2);
    assert_near(x, want, 4);
    free(x);
}

/* Enlarging 2x2 to 4x4 (AUTO: bilinear): sources at -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1). A
 * wide image of the target's height is only cropped: its centre columns, exactly. */
static void test_resize_enlarge_and_crop(void **state) {
    (void)state;
    const uint8_t img[4] = {10, 200, 90, 30};
    const double w[4 * 2] = {1, 0, 0.75, 0.25, 0.25, 0.75, 0, 1};
    double want[16];
    reference(want, img, 2, w, 4, 2, w, 4);
    float *x = read_resized("enlarge", 2, 2, img, 4, 4, SNUG_RESIZE_AUTO);
    assert_near(x, want, 16);
    free(x);
    x = read_resized("enlarge_area", 2, 2, img, 4, 4, SNUG_RESIZE_AREA);  /* each output inside one source */
    for (int i = 0; i < 16; i++) assert_true(x[i] == (float)img[(i / 4 / 2) * 2 + (i % 4) / 2] / 255.0f);
    free(x);
    uint8_t wide[2 * 7];
    for (int i = 0; i < 14; i++) wide[i] = (uint8_t)(i * 17);
    x = read_resized("wide", 2, 7, wide, 2, 3, SNUG_RESIZE_AUTO);  /* columns (7 - 3) / 2 = 2 .. 4 */
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) assert_true(x[r * 3 + c] == (float)wide[r * 7 + 2 + c] / 255.0f);
    free(x);
}

/* ---- normalisation ---- */

/* RGB images of the input's size and one wider (only cropped), so the reference is exact pixel values; a
 * constant channel gets std 1. */
static void test_normalisation_computed(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("stats"));
    make_dir(path_of("stats/a"));
    make_dir(path_of("stats/b"));
    uint8_t img[3][4 * 6 * 3];
    double sum[3] = {0}, sq[3] = {0};
    for (int k = 0; k < 3; k++) {
        const size_t w = k == 2 ? 6 : 4;
        for (size_t p = 0; p < 4 * w; p++) {
            img[k][p * 3] = (uint8_t)((p * 37 + (size_t)k * 101) % 256);
            img[k][p * 3 + 1] = (uint8_t)((p * p * 13 + (size_t)k) % 256);
            img[k][p * 3 + 2] = 77;  /* constant */
            if (w == 6 && (p % 6 == 0 || p % 6 == 5)) continue;  /* cropped away */
            for (int c = 0; c < 3; c++) {
                double v = img[k][p * 3 + c] / 255.0;
                sum[c] += v;
                sq[c] += v * v;
            }
        }
        write_png(path_of("stats/%s/%d.png", k ? "b" : "a", k), 4, w, 3, img[k]);
    }
    snug_image_folder_options o = options(3, 4, 4, NULL);
    snug_dataset *ds = open_ok(dir, &o);
    snug_normalise got;
    assert_true(snug_dataset_normalisation(ds, &got));
    assert_int_equal(got.channels, 3);
    const double count = 3 * 16;
    for (int c = 0; c < 2; c++) {
        const double mean = sum[c] / count, sd = sqrt(sq[c] / count - mean * mean);
        print_message("channel %d: mean %.6f std %.6f (reference %.6f %.6f)\n", c, (double)got.mean[c],
                      (double)got.std[c], mean, sd);
        assert_float_equal(got.mean[c], mean, 1e-6 * mean);
        assert_float_equal(got.std[c], sd, 1e-6 * sd);
    }
    assert_float_equal(got.mean[2], 77 / 255.0, 1e-7);
    assert_true(got.std[2] == 1.0f);
    float *x = inputs_of(ds, NULL);
    for (int c = 0; c < 3; c++)  /* sample 0's first pixel */
        assert_true(x[c * 16] == ((float)img[0][c] / 255.0f - got.mean[c]) / got.std[c]);
    free(x);
    snug_dataset_free(ds);
}

/* Twelve images of assorted sizes (all resized): the normalisation is bitwise the same on 1 and 2 threads. */
static void test_normalisation_thread_independent(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("threads"));
    make_dir(path_of("threads/x"));
    make_dir(path_of("threads/y"));
    uint8_t px[23 * 31 * 3];
    for (int k = 0; k < 12; k++) {
        const size_t h = 5 + (size_t)k * 3 % 19, w = 7 + (size_t)k * 5 % 24;
        for (size_t i = 0; i < h * w * 3; i++) px[i] = (uint8_t)((i * 2654435761u + (size_t)k * 977) >> 7);
        write_png(path_of("threads/%s/%02d.png", k % 2 ? "x" : "y", k), h, w, 3, px);
    }
    const int saved = omp_get_max_threads();
    snug_normalise got[2];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        snug_image_folder_options o = options(3, 9, 11, NULL);
        snug_dataset *ds = open_ok(dir, &o);
        memset(&got[t], 0, sizeof got[t]);
        assert_true(snug_dataset_normalisation(ds, &got[t]));
        snug_dataset_free(ds);
    }
    omp_set_num_threads(saved);
    print_message("means %.9f %.9f %.9f\n", (double)got[0].mean[0], (double)got[0].mean[1], (double)got[0].mean[2]);
    assert_memory_equal(&got[0], &got[1], sizeof got[0]);
}

/* ---- a validation folder against the training folder's classes ---- */

static void test_val_with_train_classes(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("val"));
    const char *names[4] = {"cat", "dog", "eel", "fox"};
    for (int c = 0; c < 3; c++) {
        make_dir(path_of("val/%s", names[c]));
        flat_png(path_of("val/%s/1.png", names[c]), (uint8_t)(c * 50));
    }
    const char *order[3] = {"eel", "cat", "dog"};  /* the training folder's order (its own classes, say) */
    snug_image_folder_options o = options(1, 2, 2, &unit_norm1);
    o.classes = order;
    o.class_count = 3;
    snug_dataset *ds = open_ok(dir, &o);
    assert_string_equal(snug_dataset_class_name(ds, 0), "eel");
    int32_t y[3];
    float *x = inputs_of(ds, y);
    /* samples class by class in the given order: eel (value 100), cat (0), dog (50) */
    assert_int_equal(y[0], 0);
    assert_int_equal(y[1], 1);
    assert_int_equal(y[2], 2);
    assert_true(x[0] == 100 / 255.0f && x[4] == 0 && x[8] == 50 / 255.0f);
    free(x);
    snug_dataset_free(ds);

    const char *four[4] = {"cat", "dog", "eel", "fox"};
    o.classes = four;
    o.class_count = 4;
    open_fails(dir, &o, SNUG_E_FORMAT, "no folder for class 3 'fox'", dir);
    o.class_count = 2;  /* cat, dog: eel is extra */
    open_fails(dir, &o, SNUG_E_FORMAT, "/eel is a class folder", "do not have");
}

/* ---- JPEG ---- */

/* Gray and RGB JPEGs (upper-case extensions too) decode close to what was written; a PNG named .jpg decodes as
 * the PNG it is. */
static void test_jpeg_files(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("jpeg"));
    make_dir(path_of("jpeg/g"));
    make_dir(path_of("jpeg/r"));
    uint8_t gray[8 * 8], rgb[8 * 8 * 3];
    memset(gray, 140, sizeof gray);
    for (int p = 0; p < 64; p++) {
        rgb[p * 3] = 200;
        rgb[p * 3 + 1] = 60;
        rgb[p * 3 + 2] = 20;
    }
    write_jpeg(path_of("jpeg/g/a.JPG"), 8, 8, 1, gray);
    write_jpeg(path_of("jpeg/r/b.jpeg"), 8, 8, 3, rgb);
    uint8_t png_px[64];
    memset(png_px, 7, sizeof png_px);
    write_png(path_of("jpeg/r/c.jpg"), 8, 8, 1, png_px);
    snug_image_folder_options o = options(3, 8, 8, &unit_norm3);
    snug_dataset *ds = open_ok(dir, &o);
    assert_int_equal(snug_dataset_size(ds), 3);
    float *x = inputs_of(ds, NULL);
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 64; p++) {
            assert_float_equal(x[c * 64 + p] * 255.0f, 140, 1.01);
            assert_float_equal(x[192 + c * 64 + p] * 255.0f, rgb[c], 3.01);
            assert_true(x[384 + c * 64 + p] == 7 / 255.0f);
        }
    free(x);
    snug_dataset_free(ds);
}

/* ---- errors ---- */

static void test_error_corrupt_png(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("badpng"));
    make_dir(path_of("badpng/a"));
    flat_png(path_of("badpng/a/1.png"), 3);
    const unsigned char junk[40] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    const char *bad = path_of("badpng/a/2.png");
    write_bytes(bad, junk, sizeof junk);
    snug_image_folder_options o = options(1, 2, 2, NULL);
    open_fails(dir, &o, SNUG_E_FORMAT, bad, "corrupt PNG");
}

/* The first half of a JPEG: refused as truncated, not delivered with gray made-up rows. */
static void test_error_truncated_jpeg(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("cutjpeg"));
    make_dir(path_of("cutjpeg/a"));
    uint8_t px[32 * 32 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 31 % 256);
    const char *path = path_of("cutjpeg/a/1.jpg");
    write_jpeg(path, 32, 32, 3, px);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    snug_image_folder_options o = options(3, 32, 32, &unit_norm3);
    open_fails(dir, &o, SNUG_E_FORMAT, path, "truncated");
}

static void test_error_cmyk_jpeg(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("cmyk"));
    make_dir(path_of("cmyk/a"));
    uint8_t px[8 * 8 * 4];
    memset(px, 90, sizeof px);
    const char *path = path_of("cmyk/a/ink.jpg");
    write_jpeg(path, 8, 8, 4, px);
    snug_image_folder_options o = options(3, 8, 8, NULL);
    open_fails(dir, &o, SNUG_E_FORMAT, path, "CMYK");
}

static void test_error_folders(void **state) {
    (void)state;
    snug_image_folder_options o = options(1, 2, 2, NULL);
    const char *empty = make_dir(path_of("noclasses"));
    write_bytes(path_of("noclasses/1.png"), "x", 1);  /* images at the top are not classes */
    open_fails(empty, &o, SNUG_E_FORMAT, "holds no class folders", empty);
    const char *dir = make_dir(path_of("emptyclass"));
    make_dir(path_of("emptyclass/a"));
    const char *b = make_dir(path_of("emptyclass/b"));
    flat_png(path_of("emptyclass/a/1.png"), 1);
    write_bytes(path_of("emptyclass/b/readme.txt"), "x", 1);
    open_fails(dir, &o, SNUG_E_FORMAT, b, "holds no .png, .jpg or .jpeg images");
    open_fails(path_of("does-not-exist"), &o, SNUG_E_IO, "cannot open the image folder", "does-not-exist");
}

/* A folder or a pipe named like an image, a dangling link, an unreadable file: each refused by name. */
static void test_error_unreadable(void **state) {
    (void)state;
    snug_image_folder_options o = options(1, 2, 2, NULL);
    const char *d1 = make_dir(path_of("unread1"));
    make_dir(path_of("unread1/a"));
    const char *folder = make_dir(path_of("unread1/a/x.png"));
    open_fails(d1, &o, SNUG_E_IO, folder, "not a regular file");
    const char *d4 = make_dir(path_of("unread4"));
    make_dir(path_of("unread4/a"));
    const char *fifo = path_of("unread4/a/x.jpeg");  /* opening it would wait for a writer */
    assert_int_equal(mkfifo(fifo, 0644), 0);
    open_fails(d4, &o, SNUG_E_IO, fifo, "not a regular file");
    const char *d2 = make_dir(path_of("unread2"));
    make_dir(path_of("unread2/a"));
    const char *link = path_of("unread2/a/x.jpg");
    assert_int_equal(symlink(path_of("nowhere.jpg"), link), 0);
    open_fails(d2, &o, SNUG_E_IO, link, "cannot open");
    if (geteuid() == 0) {
        print_message("running as root: a file without read permission is readable, not tested\n");
        return;
    }
    const char *d3 = make_dir(path_of("unread3"));
    make_dir(path_of("unread3/a"));
    const char *locked = path_of("unread3/a/x.png");
    flat_png(locked, 5);
    assert_int_equal(chmod(locked, 0), 0);
    open_fails(d3, &o, SNUG_E_IO, locked, "Permission denied");
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Rewrites the height and width in the frame header (baseline or progressive) of the JPEG file at path. */
static void declare_jpeg_size(const char *path, uint16_t height, uint16_t width) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    size_t sof = 0;
    for (size_t i = 0; i + 1 < n && !sof; i++)
        if (buf[i] == 0xFF && (buf[i + 1] == 0xC0 || buf[i + 1] == 0xC2)) sof = i;
    assert_true(sof > 0);
    buf[sof + 5] = (uint8_t)(height >> 8);
    buf[sof + 6] = (uint8_t)height;
    buf[sof + 7] = (uint8_t)(width >> 8);
    buf[sof + 8] = (uint8_t)width;
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* A PNG header declaring 20000 x 20000 RGB (1.1 GiB, an empty IDAT after it) and a JPEG declaring 60000 x 60000: refused before
 * decoding. */
static void test_error_too_large(void **state) {
    (void)state;
    snug_image_folder_options o = options(3, 2, 2, NULL);
    const char *d1 = make_dir(path_of("large1"));
    make_dir(path_of("large1/a"));
    uint8_t png[8 + 25 + 12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    put32(png + 8, 13);
    memcpy(png + 12, "IHDR", 4);
    put32(png + 16, 20000);
    put32(png + 20, 20000);
    png[24] = 8;  /* bit depth */
    png[25] = 2;  /* RGB */
    put32(png + 29, crc32_of(png + 12, 17));
    memcpy(png + 37, "IDAT", 4);  /* libpng reads the header up to the first IDAT chunk */
    put32(png + 41, crc32_of(png + 37, 4));
    const char *big_png = path_of("large1/a/big.png");
    write_bytes(big_png, png, sizeof png);
    open_fails(d1, &o, SNUG_E_FORMAT, big_png, "refused before decoding");

    const char *d2 = make_dir(path_of("large2"));
    make_dir(path_of("large2/a"));
    const char *big_jpg = path_of("large2/a/big.jpg");
    uint8_t px[8 * 8 * 3] = {0};
    write_jpeg(big_jpg, 8, 8, 3, px);
    declare_jpeg_size(big_jpg, 60000, 60000);
    open_fails(d2, &o, SNUG_E_FORMAT, big_jpg, "refused before decoding");
}

/* Gray JPEGs of 8 x 8 pixels whose frame headers declare 12000 x 12000 (137 MiB of pixels, under the byte
 * bound; the progressive one would hold 275 MiB of coefficients besides): refused by their pixel count from the
 * header, before anything is allocated for them. */
static void test_error_too_many_jpeg_pixels(void **state) {
    (void)state;
    snug_image_folder_options o = options(1, 2, 2, NULL);
    uint8_t px[8 * 8] = {0};
    for (int progressive = 0; progressive < 2; progressive++) {
        const char *dir = make_dir(path_of(progressive ? "pixels2" : "pixels1"));
        make_dir(path_of(progressive ? "pixels2/a" : "pixels1/a"));
        const char *jpg = path_of(progressive ? "pixels2/a/big.jpg" : "pixels1/a/big.jpg");
        write_jpeg_coded(jpg, 8, 8, 1, px, progressive);
        declare_jpeg_size(jpg, 12000, 12000);
        open_fails(dir, &o, SNUG_E_FORMAT, "declares 12000 x 12000 pixels", "64 Mi pixels");
    }
}

/* A read limit (a run's budget): a progressive JPEG of 8 x 8 pixels whose frame header declares 4000 x 4000
 * (under the decoders' bounds; its coefficients alone would be 96 MiB) is refused from its header by the limit,
 * before any file is decoded: the message is the limit's, not the decoder's, which would find its data cut short
 * only after allocating for the whole image. A PNG's IHDR is read the same way. */
static void test_read_limit(void **state) {
    (void)state;
    snug_image_folder_options o = options(1, 2, 2, NULL);
    o.read_limit = (size_t)20 << 20;
    uint8_t px[8 * 8] = {0};
    const char *dir = make_dir(path_of("limit1"));
    make_dir(path_of("limit1/a"));
    flat_png(path_of("limit1/a/0.png"), 7);
    const char *jpg = path_of("limit1/a/big.jpg");
    write_jpeg_coded(jpg, 8, 8, 1, px, 1);
    declare_jpeg_size(jpg, 4000, 4000);
    open_fails(dir, &o, SNUG_E_OOM, "big.jpg is 4000 x 4000 pixels", "more than the memory budget (20.00 MiB): "
               "refused before decoding any image");
    o.read_limit = 0;
    open_fails(dir, &o, SNUG_E_FORMAT, "big.jpg", NULL);  /* without a limit the decoder finds it cut short */

    const char *dir2 = make_dir(path_of("limit2"));
    make_dir(path_of("limit2/a"));
    uint8_t big[64 * 64] = {0};
    write_png(path_of("limit2/a/big.png"), 64, 64, 1, big);
    o.read_limit = 1024;
    open_fails(dir2, &o, SNUG_E_OOM, "big.png is 64 x 64 pixels", "more than the memory budget");
    o.read_limit = (size_t)1 << 20;
    snug_dataset *ds = open_ok(dir2, &o);
    assert_true(ds->scratch_bytes > 64 * 64 && ds->scratch_bytes <= o.read_limit);
    snug_dataset_free(ds);
}

/* A file that breaks after opening: its sample reads as zeros and the data set's read status names it. */
static void test_error_after_open(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("later"));
    make_dir(path_of("later/a"));
    flat_png(path_of("later/a/1.png"), 9);
    const char *victim = path_of("later/a/2.png");
    flat_png(victim, 9);
    snug_image_folder_options o = options(1, 2, 2, NULL);
    snug_dataset *ds = open_ok(dir, &o);
    write_bytes(victim, "broken", 6);
    const size_t idx[2] = {0, 1};
    float x[8];
    ds->ops->fill_inputs(ds, idx, 2, x);
    snug_error err = {0};
    assert_int_equal(dataset_read_status(ds, &err), SNUG_E_FORMAT);
    print_message("%s\n", err.message);
    assert_non_null(strstr(err.message, victim));
    for (int p = 0; p < 4; p++) assert_true(x[4 + p] == 0);
    snug_dataset_free(ds);
}

static void test_bad_options(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("opts"));
    make_dir(path_of("opts/a"));
    flat_png(path_of("opts/a/1.png"), 1);
    snug_image_folder_options o = options(2, 2, 2, NULL);
    open_fails(dir, &o, SNUG_E_SHAPE, "C = 1 (gray) or 3 (RGB)", "(2, 2, 2)");
    o = options(3, 2, 2, &unit_norm1);
    open_fails(dir, &o, SNUG_E_ARG, "1 channel(s)", "have 3");
    snug_normalise zero = unit_norm1;
    zero.std[0] = 0;
    o = options(1, 2, 2, &zero);
    open_fails(dir, &o, SNUG_E_ARG, "std", "above 0");
}

/* ---- the named data set ---- */

static void test_named_images(void **state) {
    (void)state;
    const char *root = make_dir(path_of("named"));
    make_dir(path_of("named/train"));
    make_dir(path_of("named/val"));
    const char *cls[2] = {"no", "yes"};
    for (int c = 0; c < 2; c++) {
        make_dir(path_of("named/train/%s", cls[c]));
        make_dir(path_of("named/val/%s", cls[c]));
        for (int k = 0; k < 3; k++) flat_png(path_of("named/train/%s/%d.png", cls[c], k), (uint8_t)(40 * c + 9 * k));
        flat_png(path_of("named/val/%s/v.png", cls[c]), (uint8_t)(200 - c));
    }
    char name[600], why[256];
    snprintf(name, sizeof name, "images:%s", root);
    assert_true(snug_data_name_valid(name, why, sizeof why));
    assert_false(snug_data_name_valid("images:", why, sizeof why));
    assert_non_null(strstr(why, "images:DIR"));
    const snug_shape in = {.rank = 3, .dims = {1, 2, 2}};
    snug_data d;
    snug_error err = {0};
    assert_int_equal(snug_data_open(name, NULL, in, true, NULL, &d, &err), SNUG_OK);
    assert_string_equal(d.kind, "images");
    assert_string_equal(d.unit, "images of 1x2x2");
    assert_string_equal(d.eval_name, "validation");
    assert_non_null(strstr(d.source, "2 classes"));
    assert_int_equal(snug_dataset_size(d.train), 6);
    assert_int_equal(snug_dataset_size(d.eval), 2);
    snug_normalise nt, ne;
    assert_true(snug_dataset_normalisation(d.train, &nt) && snug_dataset_normalisation(d.eval, &ne));
    assert_memory_equal(&nt, &ne, sizeof nt);  /* val scaled as train */
    snug_data_close(&d);

    /* Evaluation only: val alone, with the normalisation handed in. */
    const snug_normalise given = {1, {0.5f}, {0.25f}};
    snug_data_options opt = snug_data_options_default();
    assert_int_equal(opt.train_samples, 2000);
    opt.normalise = &given;
    assert_int_equal(snug_data_open(name, NULL, in, false, &opt, &d, &err), SNUG_OK);
    assert_null(d.train);
    assert_int_equal(snug_dataset_size(d.eval), 2);
    assert_true(snug_dataset_normalisation(d.eval, &ne));
    assert_memory_equal(&ne, &given, sizeof ne);
    snug_data_close(&d);

    snprintf(name, sizeof name, "images:%s/nothing", tmp_dir);
    assert_int_equal(snug_data_open(name, NULL, in, true, NULL, &d, &err), SNUG_E_IO);
    print_message("%s\n", err.message);
    assert_non_null(strstr(err.message, "nothing/train does not exist"));
}

/* Trained on a folder and saved, the weights carry its class names and normalisation (snug_weights_data_read);
 * the confusion counts of an evaluation add up to its items, their diagonal to its correct answers. */
static void test_weights_keep_the_data(void **state) {
    (void)state;
    const char *dir = make_dir(path_of("kept"));
    const char *names[3] = {"cat", "dog", "eel"};
    for (int c = 0; c < 3; c++) {
        make_dir(path_of("kept/%s", names[c]));
        for (int i = 0; i < 4; i++) flat_png(path_of("kept/%s/%d.png", names[c], i), (uint8_t)(40 * c + 10 * i));
    }
    snug_image_folder_options o = options(1, 2, 2, NULL);
    snug_dataset *ds = open_ok(dir, &o);
    snug_normalise want;
    assert_true(snug_dataset_normalisation(ds, &want));
    snug_graph *g = snug_graph_new("tiny");
    snug_softmax_cross_entropy(g, "loss", snug_linear(g, "fc", snug_flatten(g, "flat", snug_input(g, "in", 1, 2, 2)), 3));
    assert_int_equal(snug_graph_check(g, NULL), SNUG_OK);
    snug_train_config c = snug_train_config_default();
    c.epochs = 2;
    snug_plan_request req = snug_plan_request_default(4);
    snug_plan *plan;
    snug_trainer *tr;
    snug_error err;
    assert_int_equal(snug_plan_new(g, &req, &plan, NULL, &err), SNUG_OK);
    assert_int_equal(snug_trainer_new(plan, &c, &tr, &err), SNUG_OK);
    assert_int_equal(snug_trainer_fit(tr, ds, &err), SNUG_OK);
    const char *weights = path_of("kept.safetensors");
    assert_int_equal(snug_trainer_save(tr, weights, &err), SNUG_OK);
    snug_weights_data wd;
    assert_int_equal(snug_weights_data_read(weights, &wd, &err), SNUG_OK);
    assert_int_equal(wd.classes, 3);
    for (int k = 0; k < 3; k++) assert_string_equal(wd.class_names[k], names[k]);
    assert_true(wd.has_normalise);
    assert_int_equal(wd.normalise.channels, 1);
    assert_true(wd.normalise.mean[0] == want.mean[0] && wd.normalise.std[0] == want.std[0]);
    snug_weights_data_free(&wd);
    size_t m[9];
    snug_eval_result res;
    assert_int_equal(snug_trainer_classes(tr), 3);
    assert_int_equal(snug_trainer_evaluate_confusion(tr, ds, &res, m, &err), SNUG_OK);
    size_t all = 0, diagonal = 0;
    for (int k = 0; k < 9; k++) all += m[k], diagonal += k % 4 == 0 ? m[k] : 0;
    assert_int_equal(all, res.items);
    assert_true(fabs((double)diagonal / (double)all - res.accuracy) < 1e-12);
    snug_trainer_free(tr);
    snug_plan_free(plan);
    snug_graph_free(g);
    snug_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_keep_the_data),
        cmocka_unit_test(test_class_order_and_labels),
        cmocka_unit_test(test_read_limit),
        cmocka_unit_test(test_channel_conversion),
        cmocka_unit_test(test_exact_copy),
        cmocka_unit_test(test_resize_non_square),
        cmocka_unit_test(test_resize_enlarge_and_crop),
        cmocka_unit_test(test_normalisation_computed),
        cmocka_unit_test(test_normalisation_thread_independent),
        cmocka_unit_test(test_val_with_train_classes),
        cmocka_unit_test(test_jpeg_files),
        cmocka_unit_test(test_error_corrupt_png),
        cmocka_unit_test(test_error_truncated_jpeg),
        cmocka_unit_test(test_error_cmyk_jpeg),
        cmocka_unit_test(test_error_folders),
        cmocka_unit_test(test_error_unreadable),
        cmocka_unit_test(test_error_too_large),
        cmocka_unit_test(test_error_too_many_jpeg_pixels),
        cmocka_unit_test(test_error_after_open),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_named_images),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}

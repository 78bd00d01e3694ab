/* Segmentation datasets. Synthetic shapes: determinism, targets that match what was drawn, class balance, and one
 * sample at 1400x2100. PNG folders: small PNGs written here with libpng (gray, RGB, palette, 16-bit, alpha,
 * interlaced), loaded and checked value by value; every error names its file. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "snug.h"
#include "data/dataset.h"
#include "ops/op.h"

/* ---- shapes ---- */

static snug_dataset *shapes_ok(size_t n, size_t h, size_t w, uint64_t seed) {
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_shapes_new(n, h, w, seed, &ds, &err);
    if (s != SNUG_OK) print_error("snug_shapes_new: %s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    return ds;
}

typedef struct sample_buf {
    float *x;    /* (n, 1, H, W) */
    int32_t *y;  /* (n, H * W) */
} sample_buf;

static sample_buf fill(const snug_dataset *ds, const size_t *idx, size_t n) {
    sample_buf b = {malloc(n * ds->sample_numel * sizeof(float)), malloc(n * ds->targets_per_sample * 4)};
    assert_non_null(b.x);
    assert_non_null(b.y);
    ds->ops->fill_inputs(ds, idx, n, b.x);
    ds->ops->fill_targets(ds, idx, n, b.y);
    return b;
}

static void release(sample_buf b) {
    free(b.x);
    free(b.y);
}

static void test_shapes_header(void **state) {
    (void)state;
    snug_dataset *ds = shapes_ok(10, 24, 40, 7);
    assert_int_equal(snug_dataset_size(ds), 10);
    assert_int_equal(snug_dataset_classes(ds), 2);
    assert_int_equal(ds->targets_per_sample, 24 * 40);
    snug_shape s = snug_dataset_sample_shape(ds);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dims[0], 1);
    assert_int_equal(s.dims[1], 24);
    assert_int_equal(s.dims[2], 40);
    snug_dataset_free(ds);
}

/* Same (seed, i): the same sample, whatever else is in the call and whichever dataset object draws it. */
static void test_shapes_deterministic(void **state) {
    (void)state;
    snug_dataset *a = shapes_ok(100, 32, 48, 42), *b = shapes_ok(100, 32, 48, 42), *c = shapes_ok(100, 32, 48, 43);
    const size_t numel = 32 * 48, one[1] = {17}, many[3] = {5, 17, 99};
    sample_buf sa = fill(a, one, 1), sb = fill(b, many, 3), sc = fill(c, one, 1);
    assert_memory_equal(sa.x, sb.x + numel, numel * sizeof(float));
    assert_memory_equal(sa.y, sb.y + numel, numel * sizeof(int32_t));
    assert_memory_not_equal(sa.x, sc.x, numel * sizeof(float));
    assert_memory_not_equal(sb.x, sb.x + numel, numel * sizeof(float));  /* samples differ from each other */
    release(sa);
    release(sb);
    release(sc);
    snug_dataset_free(a);
    snug_dataset_free(b);
    snug_dataset_free(c);
}

/* Targets mark what was drawn: across a 0/1 boundary between neighbours the intensity jumps by a shape's
 * contrast, between two background neighbours it changes by noise (and a gentle ramp) only. Targets shifted by
 * one pixel, or unrelated to the image, would make the two kinds of pairs alike. */
static void test_shapes_targets_match_pixels(void **state) {
    (void)state;
    const size_t n = 16, H = 64, W = 64;
    snug_dataset *ds = shapes_ok(n, H, W, 3);
    size_t idx[16];
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sample_buf b = fill(ds, idx, n);
    double edge_sum = 0, flat_sum = 0;
    size_t edges = 0, flats = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < H; r++)
            for (size_t c = 0; c + 1 < W; c++) {
                size_t p = i * H * W + r * W + c;
                double d = fabs((double)b.x[p] - b.x[p + 1]);
                if (b.y[p] != b.y[p + 1]) {
                    edge_sum += d;
                    edges++;
                } else if (b.y[p] == 0) {
                    flat_sum += d;
                    flats++;
                }
            }
    assert_true(edges > 100 && flats > 1000);
    double edge_mean = edge_sum / (double)edges, flat_mean = flat_sum / (double)flats;
    print_message("mean |step| across shape edges %.3f, inside the background %.3f\n", edge_mean, flat_mean);
    assert_true(edge_mean > 2.5 * flat_mean);
    release(b);
    snug_dataset_free(ds);
}

/* Neither class is rare, every sample has some of each, and the inputs are roughly normalised. */
static void test_shapes_balance(void **state) {
    (void)state;
    const size_t n = 64, H = 48, W = 64, pixels = H * W;
    snug_dataset *ds = shapes_ok(n, H, W, 11);
    size_t idx[64];
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sample_buf b = fill(ds, idx, n);
    size_t fg_total = 0;
    double sum = 0, sum2 = 0;
    for (size_t i = 0; i < n; i++) {
        size_t fg = 0;
        for (size_t p = 0; p < pixels; p++) {
            int32_t t = b.y[i * pixels + p];
            assert_true(t == 0 || t == 1);
            fg += (size_t)t;
            double v = b.x[i * pixels + p];
            sum += v;
            sum2 += v * v;
        }
        assert_true(fg > 0 && fg < pixels);
        fg_total += fg;
    }
    double fraction = (double)fg_total / (double)(n * pixels);
    double mean = sum / (double)(n * pixels), sd = sqrt(sum2 / (double)(n * pixels) - mean * mean);
    print_message("foreground %.3f, inputs mean %.3f sd %.3f\n", fraction, mean, sd);
    assert_true(fraction > 0.08 && fraction < 0.5);
    assert_true(fabs(mean) < 0.5 && sd > 0.2 && sd < 2.0);
    release(b);
    snug_dataset_free(ds);
}

/* The task is not a threshold: shapes are brighter or darker than a sloped background, so no single cut on the
 * pixel value (either way round) segments the data well. */
static void test_shapes_not_a_threshold(void **state) {
    (void)state;
    const size_t n = 32, H = 48, W = 64, total = n * H * W;
    snug_dataset *ds = shapes_ok(n, H, W, 23);
    size_t idx[32];
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sample_buf b = fill(ds, idx, n);
    double best = 0;
    for (int k = -80; k <= 80; k++) {
        const float t = 0.05f * (float)k;
        for (int above = 0; above < 2; above++) {
            size_t inter = 0, uni = 0;
            for (size_t p = 0; p < total; p++) {
                const bool predicted = above ? b.x[p] > t : b.x[p] < t, truth = b.y[p] == 1;
                inter += predicted && truth;
                uni += predicted || truth;
            }
            if (uni && (double)inter / (double)uni > best) best = (double)inter / (double)uni;
        }
    }
    print_message("best IoU of a global threshold: %.3f\n", best);
    assert_true(best < 0.5);
    release(b);
    snug_dataset_free(ds);
}

static void test_shapes_large(void **state) {
    (void)state;
    const size_t H = 1400, W = 2100;
    snug_dataset *ds = shapes_ok(4, H, W, 5);
    const size_t idx[1] = {2};
    sample_buf b = fill(ds, idx, 1);
    size_t fg = 0;
    for (size_t p = 0; p < H * W; p++) {
        assert_true(isfinite(b.x[p]));
        fg += (size_t)b.y[p];
    }
    assert_true(fg > 0 && fg < H * W);
    /* The same sample at the same size again: identical (nothing depends on threads or on the call). */
    sample_buf again = fill(ds, idx, 1);
    assert_memory_equal(b.x, again.x, H * W * sizeof(float));
    assert_memory_equal(b.y, again.y, H * W * sizeof(int32_t));
    release(b);
    release(again);
    snug_dataset_free(ds);
}

static void test_shapes_errors(void **state) {
    (void)state;
    snug_dataset *ds = (snug_dataset *)1;
    snug_error err = {0};
    assert_int_equal(snug_shapes_new(0, 8, 8, 1, &ds, &err), SNUG_E_ARG);
    assert_null(ds);
    assert_non_null(strstr(err.message, "must be > 0"));
    assert_int_equal(snug_shapes_new(4, 8, 0, 1, &ds, &err), SNUG_E_ARG);
    assert_int_equal(snug_shapes_new(4, (size_t)1 << 20, (size_t)1 << 20, 1, &ds, &err), SNUG_E_OVERFLOW);
    assert_non_null(strstr(err.message, "too many"));
    assert_int_equal(snug_shapes_new(4, 8, 8, 1, NULL, &err), SNUG_E_ARG);
}

/* ---- PNG folders ---- */

#define MAX_PATHS 256

static char tmp_dir[64];
static char created[MAX_PATHS][256];  /* files and folders, removed in reverse order */
static int n_created;

static int make_tmp_dir(void **state) {
    (void)state;
    strcpy(tmp_dir, "/tmp/snug_test_seg_XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state) {
    (void)state;
    for (int i = n_created - 1; i >= 0; i--) remove(created[i]);
    return rmdir(tmp_dir);
}

/* dir/sub/name (sub may be empty), remembered for removal. */
static const char *record(const char *dir, const char *sub, const char *name) {
    assert_true(n_created < MAX_PATHS);
    char joined[sizeof created[0]];  /* dir is often an earlier entry of created: join outside it */
    snprintf(joined, sizeof joined, "%s%s%s/%s", dir, *sub ? "/" : "", sub, name);
    char *p = created[n_created++];
    memcpy(p, joined, sizeof joined);
    return p;
}

/* A dataset folder tmp/name with images/ and masks/; returns its path. */
static const char *make_set(const char *name) {
    const char *dir = record(tmp_dir, "", name);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(mkdir(record(dir, "", "images"), 0755), 0);
    assert_int_equal(mkdir(record(dir, "", "masks"), 0755), 0);
    return dir;
}

typedef struct png_spec {
    size_t h, w;
    int color_type;        /* PNG_COLOR_TYPE_* */
    int bit_depth;
    int interlace;         /* PNG_INTERLACE_NONE or PNG_INTERLACE_ADAM7 */
    const void *pixels;    /* (h, w, channels) samples of bit_depth (16-bit: native uint16_t) */
} png_spec;

static int spec_channels(int color_type) {
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: case PNG_COLOR_TYPE_PALETTE: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    default: return 4;
    }
}

/* Writes a PNG with libpng (8- or 16-bit samples; a palette image gets a 256-entry gray-ramp palette). */
static void write_png(const char *path, const png_spec *s) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    assert_non_null(png);
    assert_non_null(info);
    if (setjmp(png_jmpbuf(png))) fail_msg("libpng could not write %s", path);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)s->w, (png_uint_32)s->h, s->bit_depth, s->color_type, s->interlace,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (s->color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color palette[256];
        for (int i = 0; i < 256; i++) palette[i] = (png_color){(png_byte)i, (png_byte)i, (png_byte)i};
        png_set_PLTE(png, info, palette, 256);
    }
    png_write_info(png, info);
    if (s->bit_depth == 16) png_set_swap(png);  /* native little-endian samples in, PNG big-endian out */
    int passes = png_set_interlace_handling(png);
    const size_t row = s->w * (size_t)spec_channels(s->color_type) * (size_t)(s->bit_depth / 8);
    for (int pass = 0; pass < passes; pass++)
        for (size_t r = 0; r < s->h; r++) png_write_row(png, (png_const_bytep)s->pixels + r * row);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    assert_int_equal(fclose(f), 0);
}

/* dir/sub/name written from spec. */
static const char *put_png(const char *dir, const char *sub, const char *name, const png_spec *s) {
    const char *path = record(dir, sub, name);
    write_png(path, s);
    return path;
}

static const char *put_bytes(const char *dir, const char *sub, const char *name, const void *bytes, size_t len) {
    const char *path = record(dir, sub, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static png_spec gray8(size_t h, size_t w, const uint8_t *pixels) {
    return (png_spec){h, w, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE, pixels};
}

static float unit(uint8_t v) { return (float)v / 127.5f - 1.0f; }

static snug_dataset *seg_ok(const char *dir) {
    snug_dataset *ds = NULL;
    snug_error err = {0};
    snug_status s = snug_segmentation_open(dir, &ds, &err);
    if (s != SNUG_OK) print_error("snug_segmentation_open: %s\n", err.message);
    assert_int_equal(s, SNUG_OK);
    return ds;
}

/* Three 3x5 gray images, masks with classes 0..2 and 255 (ignore); files written out of name order. */
static void test_png_gray(void **state) {
    (void)state;
    const char *dir = make_set("gray");
    uint8_t img[3][15], mask[3][15];
    for (int k = 0; k < 3; k++)
        for (int p = 0; p < 15; p++) {
            img[k][p] = (uint8_t)(17 * k + 13 * p);
            mask[k][p] = p == 4 ? 255 : (uint8_t)((p + k) % 3);
        }
    const char *names[3] = {"b.png", "a.png", "c.png"};  /* sorted: a (k 1), b (k 0), c (k 2) */
    for (int k = 0; k < 3; k++) {
        png_spec si = gray8(3, 5, img[k]), sm = gray8(3, 5, mask[k]);
        put_png(dir, "images", names[k], &si);
        put_png(dir, "masks", names[k], &sm);
    }
    put_bytes(dir, "images", "notes.txt", "not an image", 12);  /* ignored: not *.png */
    snug_dataset *ds = seg_ok(dir);
    assert_int_equal(snug_dataset_size(ds), 3);
    assert_int_equal(snug_dataset_classes(ds), 3);
    assert_int_equal(ds->targets_per_sample, 15);
    snug_shape sh = snug_dataset_sample_shape(ds);
    assert_true(sh.rank == 3 && sh.dims[0] == 1 && sh.dims[1] == 3 && sh.dims[2] == 5);
    const size_t idx[3] = {2, 0, 1}, k_of[3] = {1, 0, 2};  /* sample i is the file of k_of[i] */
    sample_buf b = fill(ds, idx, 3);
    for (int j = 0; j < 3; j++) {
        size_t k = k_of[idx[j]];
        for (int p = 0; p < 15; p++) {
            assert_true(b.x[j * 15 + p] == unit(img[k][p]));
            assert_int_equal(b.y[j * 15 + p], mask[k][p] == 255 ? SNUG_IGNORE_TARGET : mask[k][p]);
        }
    }
    release(b);
    snug_dataset_free(ds);
}

/* RGB images arrive planar (C, H, W); palette images are expanded to RGB; RGBA loses its alpha; a palette mask
 * gives its indices; 16-bit samples are scaled to 8 bits; interlaced files decode the same. */
static void test_png_colour_formats(void **state) {
    (void)state;
    const char *dir = make_set("colour");
    uint8_t rgb[2 * 3 * 3], rgba[2 * 3 * 4], pal[6], mask[6] = {0, 1, 1, 0, 255, 1};
    for (int p = 0; p < 6; p++) {
        for (int c = 0; c < 3; c++) rgb[p * 3 + c] = (uint8_t)(40 * c + 9 * p);
        for (int c = 0; c < 3; c++) rgba[p * 4 + c] = (uint8_t)(200 - 30 * c - p);
        rgba[p * 4 + 3] = (uint8_t)(p * 50);  /* alpha: must not leak into the pixels */
        pal[p] = (uint8_t)(250 - 40 * p);
    }
    png_spec s_rgb = {2, 3, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7, rgb};
    png_spec s_rgba = {2, 3, PNG_COLOR_TYPE_RGB_ALPHA, 8, PNG_INTERLACE_NONE, rgba};
    png_spec s_pal = {2, 3, PNG_COLOR_TYPE_PALETTE, 8, PNG_INTERLACE_NONE, pal};
    png_spec s_mask = {2, 3, PNG_COLOR_TYPE_PALETTE, 8, PNG_INTERLACE_NONE, mask};
    put_png(dir, "images", "1.png", &s_rgb);
    put_png(dir, "images", "2.png", &s_rgba);
    put_png(dir, "images", "3.png", &s_pal);
    for (int k = 1; k <= 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "%d.png", k);
        put_png(dir, "masks", name, &s_mask);
    }
    snug_dataset *ds = seg_ok(dir);
    snug_shape sh = snug_dataset_sample_shape(ds);
    assert_true(sh.dims[0] == 3 && sh.dims[1] == 2 && sh.dims[2] == 3);
    assert_int_equal(snug_dataset_classes(ds), 2);
    const size_t idx[3] = {0, 1, 2};
    sample_buf b = fill(ds, idx, 3);
    for (size_t c = 0; c < 3; c++)
        for (size_t p = 0; p < 6; p++) {
            assert_true(b.x[0 * 18 + c * 6 + p] == unit(rgb[p * 3 + c]));
            assert_true(b.x[1 * 18 + c * 6 + p] == unit(rgba[p * 4 + c]));
            assert_true(b.x[2 * 18 + c * 6 + p] == unit(pal[p]));  /* the palette is a gray ramp */
        }
    for (size_t p = 0; p < 6; p++) assert_int_equal(b.y[12 + p], mask[p] == 255 ? -1 : mask[p]);
    release(b);
    snug_dataset_free(ds);

    /* 16-bit gray: 0xffff is 255, 0 is 0, 0x8080 is 128. */
    const char *dir16 = make_set("sixteen");
    const uint16_t deep[2] = {0xffff, 0x8080};
    const uint8_t mask2[2] = {1, 0};
    png_spec s16 = {1, 2, PNG_COLOR_TYPE_GRAY, 16, PNG_INTERLACE_NONE, deep};
    png_spec sm = gray8(1, 2, mask2);
    put_png(dir16, "images", "x.png", &s16);
    put_png(dir16, "masks", "x.png", &sm);
    ds = seg_ok(dir16);
    const size_t zero[1] = {0};
    b = fill(ds, zero, 1);
    assert_true(b.x[0] == unit(255) && b.x[1] == unit(128));
    release(b);
    snug_dataset_free(ds);
}

static void expect_open_error(const char *dir, snug_status want, const char *a, const char *b) {
    snug_dataset *ds = (snug_dataset *)1;
    snug_error err = {0};
    snug_status got = snug_segmentation_open(dir, &ds, &err);
    if (got != want || !strstr(err.message, a) || !strstr(err.message, b))
        print_error("status %d (want %d), message: %s\n  (want \"%s\" and \"%s\")\n", got, want, err.message, a, b);
    assert_int_equal(got, want);
    assert_null(ds);
    assert_non_null(strstr(err.message, a));
    assert_non_null(strstr(err.message, b));
}

/* One good pair named name in dir, 4x4, classes 0 and 1. */
static void put_pair(const char *dir, const char *name) {
    static const uint8_t img[16] = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150};
    static const uint8_t mask[16] = {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1};
    png_spec si = gray8(4, 4, img), sm = gray8(4, 4, mask);
    put_png(dir, "images", name, &si);
    put_png(dir, "masks", name, &sm);
}

static void test_png_errors(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/no-such-set", tmp_dir);
    expect_open_error(path, SNUG_E_IO, "no-such-set/images", "No such file");

    const char *empty = make_set("empty");
    expect_open_error(empty, SNUG_E_FORMAT, "empty/images", "no .png images");

    const char *nomask = make_set("nomask");
    put_pair(nomask, "a.png");
    static const uint8_t img[16] = {0};
    png_spec si = gray8(4, 4, img);
    const char *lonely = put_png(nomask, "images", "b.png", &si);
    expect_open_error(nomask, SNUG_E_IO, lonely, "has no mask");

    const char *sizes = make_set("sizes");
    put_pair(sizes, "a.png");
    png_spec small = gray8(2, 8, img);
    const char *odd = put_png(sizes, "images", "b.png", &small);
    put_png(sizes, "masks", "b.png", &small);
    expect_open_error(sizes, SNUG_E_FORMAT, odd, "all images must have one size");

    const char *channels = make_set("channels");
    put_pair(channels, "a.png");
    static const uint8_t rgb[48] = {0};
    png_spec srgb = {4, 4, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE, rgb};
    const char *colour = put_png(channels, "images", "b.png", &srgb);
    put_png(channels, "masks", "b.png", &si);
    expect_open_error(channels, SNUG_E_FORMAT, colour, "3 channel(s)");

    const char *masksize = make_set("masksize");
    put_png(masksize, "images", "a.png", &si);
    const char *bad_mask = put_png(masksize, "masks", "a.png", &small);
    expect_open_error(masksize, SNUG_E_FORMAT, bad_mask, "is 2 x 8 but its image");

    const char *notpng = make_set("notpng");
    put_pair(notpng, "a.png");
    const char *text = put_bytes(notpng, "images", "b.png", "hello, this is text", 19);
    put_png(notpng, "masks", "b.png", &si);
    expect_open_error(notpng, SNUG_E_FORMAT, text, "not a PNG file");

    /* A good PNG cut short: libpng fails inside (longjmp), and the message still names the file. */
    const char *corrupt = make_set("corrupt");
    put_pair(corrupt, "a.png");
    char good_path[256];
    snprintf(good_path, sizeof good_path, "%s/images/a.png", corrupt);
    FILE *f = fopen(good_path, "rb");
    assert_non_null(f);
    uint8_t bytes[4096];
    size_t len = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    assert_true(len > 60);
    const char *cut = put_bytes(corrupt, "images", "b.png", bytes, len - 20);
    put_png(corrupt, "masks", "b.png", &si);
    expect_open_error(corrupt, SNUG_E_FORMAT, cut, "corrupt PNG");
    bytes[40] ^= 0xff;  /* a flipped byte inside the pixel data: a CRC or zlib error */
    const char *flipped = put_bytes(corrupt, "images", "b.png", bytes, len);
    expect_open_error(corrupt, SNUG_E_FORMAT, flipped, "corrupt PNG");

    const char *deep = make_set("deepmask");
    static const uint16_t deep_mask[16] = {0};
    png_spec s16 = {4, 4, PNG_COLOR_TYPE_GRAY, 16, PNG_INTERLACE_NONE, deep_mask};
    put_png(deep, "images", "a.png", &si);
    const char *m16 = put_png(deep, "masks", "a.png", &s16);
    expect_open_error(deep, SNUG_E_FORMAT, m16, "8-bit grayscale or palette");

    /* Foreground saved as 255 (which means ignore): one class only. */
    const char *binary = make_set("binary255");
    static const uint8_t m255[16] = {0, 255, 0, 255};
    png_spec s255 = gray8(4, 4, m255);
    put_png(binary, "images", "a.png", &si);
    put_png(binary, "masks", "a.png", &s255);
    expect_open_error(binary, SNUG_E_FORMAT, "binary255/masks", "not 255");

    snug_error err = {0};
    assert_int_equal(snug_segmentation_open(NULL, &(snug_dataset *){NULL}, &err), SNUG_E_ARG);
    assert_int_equal(snug_segmentation_open(binary, NULL, &err), SNUG_E_ARG);
}

/* ---- decompression bombs: a PNG's header is read and checked before a byte of pixels is decoded ---- */

static uint32_t crc32_of(const uint8_t *bytes, size_t len) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        c ^= bytes[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

static size_t put_be32(uint8_t *at, uint32_t v) {
    for (int i = 0; i < 4; i++) at[i] = (uint8_t)(v >> (24 - 8 * i));
    return 4;
}

/* One chunk (length, type, data, CRC of type and data) at `at`; returns its size. */
static size_t put_chunk(uint8_t *at, const char type[4], const uint8_t *data, uint32_t len) {
    size_t n = put_be32(at, len);
    memcpy(at + n, type, 4);
    if (len) memcpy(at + n + 4, data, len);
    n += 4 + len;
    return n + put_be32(at + n, crc32_of(at + 4, 4 + len));
}

/* A 70-byte PNG, every CRC valid, whose header declares an 8-bit grayscale image of h x w pixels and whose one
 * IDAT holds a complete zlib stream of one byte: what libpng would allocate for is the header's, not the file's. */
static const char *put_bomb(const char *dir, const char *sub, const char *name, uint32_t h, uint32_t w) {
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const uint8_t zlib_one_byte[] = {0x78, 0x01, 0x01, 0x01, 0x00, 0xfe, 0xff, 0x00, 0x00, 0x01, 0x00, 0x01};
    uint8_t ihdr[13] = {0}, file[128];
    put_be32(ihdr, w);
    put_be32(ihdr + 4, h);
    ihdr[8] = 8;  /* bit depth; colour type 0 (gray), deflate, adaptive filters, no interlace */
    size_t n = 0;
    memcpy(file, signature, sizeof signature);
    n += sizeof signature;
    n += put_chunk(file + n, "IHDR", ihdr, sizeof ihdr);
    n += put_chunk(file + n, "IDAT", zlib_one_byte, sizeof zlib_one_byte);
    n += put_chunk(file + n, "IEND", NULL, 0);
    return put_bytes(dir, sub, name, file, n);
}

/* A 4 x 4 image whose zTXt chunk declares 2 GB and holds 4 bytes: libpng allocated and cleared the declared
 * length before reading it (2 GB resident, seconds, for a file of 80 bytes). Text and profile chunks are now
 * skipped unread: the file is refused as truncated without the process growing. */
static void test_png_chunk_bomb_allocates_nothing(void **state) {
    (void)state;
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13] = {0}, file[128];
    put_be32(ihdr, 4);
    put_be32(ihdr + 4, 4);
    ihdr[8] = 8;
    size_t n = sizeof signature;
    memcpy(file, signature, n);
    n += put_chunk(file + n, "IHDR", ihdr, sizeof ihdr);
    n += put_be32(file + n, 0x7e7e7e7e); /* the declared length; then the type and 4 bytes, and the file ends */
    memcpy(file + n, "zTXt\0\0\0\0", 8);
    n += 8;
    const char *dir = make_set("chunk-bomb");
    const char *path = put_bytes(dir, "images", "a.png", file, n);
    put_pair(dir, "b.png");
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    expect_open_error(dir, SNUG_E_FORMAT, path, "");
    getrusage(RUSAGE_SELF, &after);
    assert_true(after.ru_maxrss - before.ru_maxrss < 64 * 1024); /* KiB: nothing near the declared 2 GB */
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A 60000 x 60000 header (3.6 GB of pixels) is refused by its size, by name, before anything is decoded: as the
 * first image (the bound on one image), after another (the size of the set), as a mask, and when it replaces a
 * good file after open (its sample is blanked). The whole test takes milliseconds. */
static void test_png_bomb_refused_before_decoding(void **state) {
    (void)state;
    const double start = seconds_now();
    const char *first = make_set("bomb-first");
    const char *huge = put_bomb(first, "images", "a.png", 60000, 60000);
    put_bomb(first, "masks", "a.png", 60000, 60000);
    expect_open_error(first, SNUG_E_FORMAT, huge, "60000 x 60000");
    expect_open_error(first, SNUG_E_FORMAT, huge, "more than the 256 MiB");

    const char *second = make_set("bomb-second");
    put_pair(second, "a.png");
    const char *odd = put_bomb(second, "images", "b.png", 60000, 60000);
    put_bomb(second, "masks", "b.png", 4, 4);
    expect_open_error(second, SNUG_E_FORMAT, odd, "is 60000 x 60000 with 1 channel(s) but");
    expect_open_error(second, SNUG_E_FORMAT, odd, "all images must have one size");

    const char *mask = make_set("bomb-mask");
    put_pair(mask, "a.png");
    static const uint8_t img[16] = {0};
    png_spec si = gray8(4, 4, img);
    put_png(mask, "images", "b.png", &si);
    const char *bad_mask = put_bomb(mask, "masks", "b.png", 60000, 60000);
    expect_open_error(mask, SNUG_E_FORMAT, bad_mask, "is 60000 x 60000 but its image");

    const char *later = make_set("bomb-later");
    put_pair(later, "a.png");
    put_pair(later, "b.png");
    snug_dataset *ds = seg_ok(later);
    put_bomb(later, "images", "b.png", 60000, 60000);
    put_bomb(later, "masks", "b.png", 60000, 60000);
    const size_t idx[2] = {0, 1};
    sample_buf b = fill(ds, idx, 2);
    for (size_t p = 0; p < 16; p++) {
        assert_true(b.x[16 + p] == 0.0f);
        assert_int_equal(b.y[16 + p], SNUG_IGNORE_TARGET);
    }
    release(b);
    snug_dataset_free(ds);
    const double took = seconds_now() - start;
    print_message("four bombs refused in %.3f s\n", took);
    assert_true(took < 0.5);
}

/* A file replaced by garbage after open: its sample is blanked (inputs 0, targets ignored), the others load. */
static void test_png_changed_after_open(void **state) {
    (void)state;
    const char *dir = make_set("changed");
    put_pair(dir, "a.png");
    put_pair(dir, "b.png");
    snug_dataset *ds = seg_ok(dir);
    put_bytes(dir, "images", "b.png", "garbage!", 8);
    put_bytes(dir, "masks", "b.png", "garbage!", 8);
    const size_t idx[2] = {0, 1};
    sample_buf b = fill(ds, idx, 2);
    assert_true(b.x[1] == unit(10));
    assert_int_equal(b.y[2], 1);
    for (size_t p = 0; p < 16; p++) {
        assert_true(b.x[16 + p] == 0.0f);
        assert_int_equal(b.y[16 + p], SNUG_IGNORE_TARGET);
    }
    release(b);
    snug_dataset_free(ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_header),
        cmocka_unit_test(test_shapes_deterministic),
        cmocka_unit_test(test_shapes_targets_match_pixels),
        cmocka_unit_test(test_shapes_balance),
        cmocka_unit_test(test_shapes_not_a_threshold),
        cmocka_unit_test(test_shapes_large),
        cmocka_unit_test(test_shapes_errors),
        cmocka_unit_test(test_png_gray),
        cmocka_unit_test(test_png_colour_formats),
        cmocka_unit_test(test_png_errors),
        cmocka_unit_test(test_png_changed_after_open),
        cmocka_unit_test(test_png_bomb_refused_before_decoding),
        cmocka_unit_test(test_png_chunk_bomb_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}

/* A segmentation dataset from PNG files: dir/images/NAME.png and its mask dir/masks/NAME.png, samples in the
 * byte order of the names. Images are grayscale (1 channel) or colour (3 channels, palette and alpha handled by
 * png_read.c), all of one size and channel count; a mask has its image's size and holds a class index per pixel,
 * 255 meaning "ignore" (SNUG_IGNORE_TARGET). Classes = the largest index in any mask + 1.
 *
 * open decodes every file once, streaming (one file in memory at a time): the fill functions cannot report an
 * error, so a corrupt or inconsistent file must be found here, by name, not in the middle of training. Nothing
 * is kept but the names; the fill functions decode again. Pixels are normalised to [-1, 1] as v / 127.5 - 1 and
 * written channel-major (C, H, W). */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/png_read.h"

#define SEG_IGNORE_VALUE 255
#define SEG_PATH_MAX 4096

typedef struct seg_impl {
    char *dir;
    char **names;   /* (count) file names inside images/ and masks/ */
    size_t count;
    png_header shape;
    size_t classes;
} seg_impl;

/* dir/sub/name into buf; false when it does not fit. */
static bool seg_path(char *buf, const seg_impl *m, const char *sub, size_t i) {
    int w = snprintf(buf, SEG_PATH_MAX, "%s/%s/%s", m->dir, sub, m->names[i]);
    return w >= 0 && w < SEG_PATH_MAX;
}

/* ---- decoding into a micro-batch ---- */

typedef struct fill_ctx {
    const seg_impl *m;
    float *x;        /* (C, H, W) */
    int32_t *y;      /* (H, W) */
} fill_ctx;

/* The fill functions ask png_decode for the size the dataset was opened with, so a file replaced since then by
 * one of another size is refused before it is decoded. */
static snug_status put_image(void *ctx, const uint8_t *pixels, const png_header *h, snug_error *err) {
    (void)err;
    fill_ctx *f = ctx;
    const size_t plane = h->height * h->width, C = h->channels;
    for (size_t p = 0; p < plane; p++)  /* interleaved (H, W, C) to planar (C, H, W) */
        for (size_t c = 0; c < C; c++) f->x[c * plane + p] = (float)pixels[p * C + c] / 127.5f - 1.0f;
    return SNUG_OK;
}

static snug_status put_mask(void *ctx, const uint8_t *pixels, const png_header *h, snug_error *err) {
    fill_ctx *f = ctx;
    const size_t plane = h->height * h->width;
    for (size_t p = 0; p < plane; p++) {
        if (pixels[p] != SEG_IGNORE_VALUE && pixels[p] >= f->m->classes)
            return snug_fail(err, SNUG_E_FORMAT, "the mask has class %u at pixel %zu, beyond the %zu classes found "
                             "when the dataset was opened", (unsigned)pixels[p], p, f->m->classes);
        f->y[p] = pixels[p] == SEG_IGNORE_VALUE ? SNUG_IGNORE_TARGET : (int32_t)pixels[p];
    }
    return SNUG_OK;
}

/* A file that was good at open and is not any more (replaced during training) cannot fail the step: its sample
 * is blanked (inputs 0, targets ignored, so it adds nothing to the loss) and the problem is reported once. */
static void report_changed(const char *path, const snug_error *err) {
    fprintf(stderr, "snug: warning: %s changed since the dataset was opened and cannot be used (%s); its sample "
            "is ignored\n", path, err->message);
}

static void seg_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // (n, C, H, W)
    const seg_impl *m = ds->impl;
#pragma omp parallel for schedule(dynamic) if (n > 1)
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        fill_ctx f = {.m = m, .x = x + i * ds->sample_numel};
        char path[SEG_PATH_MAX];
        snug_error err = {0};
        seg_path(path, m, "images", idx[i]);  /* fits: checked at open */
        png_header h;
        if (png_decode(path, PNG_AS_IMAGE, &m->shape, &h, put_image, &f, &err) != SNUG_OK) {
            memset(f.x, 0, ds->sample_numel * sizeof *f.x);
            report_changed(path, &err);
        }
    }
}

static void seg_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // (n, H * W)
    const seg_impl *m = ds->impl;
#pragma omp parallel for schedule(dynamic) if (n > 1)
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        fill_ctx f = {.m = m, .y = y + i * ds->targets_per_sample};
        char path[SEG_PATH_MAX];
        snug_error err = {0};
        seg_path(path, m, "masks", idx[i]);
        png_header h;
        const png_header want = {.height = m->shape.height, .width = m->shape.width, .channels = 1};
        if (png_decode(path, PNG_AS_MASK, &want, &h, put_mask, &f, &err) != SNUG_OK) {
            for (size_t p = 0; p < ds->targets_per_sample; p++) f.y[p] = SNUG_IGNORE_TARGET;
            report_changed(path, &err);
        }
    }
}

static void seg_destroy(snug_dataset *ds) {
    seg_impl *m = ds->impl;
    if (!m) return;
    for (size_t i = 0; i < m->count; i++) free(m->names[i]);
    free(m->names);
    free(m->dir);
    free(m);
    ds->impl = NULL;
}

static const dataset_ops seg_ops = {
    .fill_inputs = seg_fill_inputs,
    .fill_targets = seg_fill_targets,
    .destroy = seg_destroy,
};

/* ---- opening: list, then check every file ---- */

static bool is_png_name(const char *name) {
    size_t len = strlen(name);
    return name[0] != '.' && len > 4 && strcmp(name + len - 4, ".png") == 0;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of name to m->names. */
static snug_status add_name(seg_impl *m, size_t *capacity, const char *name, snug_error *err) {
    if (m->count == *capacity) {
        size_t grown = *capacity ? 2 * *capacity : 64;
        char **names = realloc(m->names, grown * sizeof *names);
        if (!names) return snug_fail(err, SNUG_E_OOM, "snug_segmentation_open: out of host memory for file names");
        m->names = names;
        *capacity = grown;
    }
    m->names[m->count] = strdup(name);
    if (!m->names[m->count]) return snug_fail(err, SNUG_E_OOM, "snug_segmentation_open: out of host memory");
    m->count++;
    return SNUG_OK;
}

/* The *.png names in dir/images, sorted. */
static snug_status list_images(seg_impl *m, snug_error *err) {
    char path[SEG_PATH_MAX];
    int w = snprintf(path, sizeof path, "%s/images", m->dir);
    if (w < 0 || w >= SEG_PATH_MAX)
        return snug_fail(err, SNUG_E_ARG, "snug_segmentation_open: the folder path is too long (%zu bytes)",
                         strlen(m->dir));
    DIR *d = opendir(path);
    if (!d)
        return snug_fail(err, SNUG_E_IO, "cannot open the image folder %s: %s (a segmentation dataset is a folder "
                         "with images/*.png and masks/*.png of the same names)", path, strerror(errno));
    size_t capacity = 0;
    snug_status s = SNUG_OK;
    for (struct dirent *e; s == SNUG_OK && (e = readdir(d));)
        if (is_png_name(e->d_name)) s = add_name(m, &capacity, e->d_name, err);
    closedir(d);
    if (s != SNUG_OK) return s;
    if (m->count == 0)
        return snug_fail(err, SNUG_E_FORMAT, "%s holds no .png images: nothing to train on", path);
    qsort(m->names, m->count, sizeof *m->names, compare_names);
    return SNUG_OK;
}

typedef struct scan_ctx {
    uint8_t largest;  /* the largest class index seen in any mask */
} scan_ctx;

static snug_status scan_mask(void *ctx, const uint8_t *pixels, const png_header *h, snug_error *err) {
    (void)err;
    scan_ctx *sc = ctx;
    const size_t plane = h->height * h->width;
    for (size_t p = 0; p < plane; p++)
        if (pixels[p] != SEG_IGNORE_VALUE && pixels[p] > sc->largest) sc->largest = pixels[p];
    return SNUG_OK;
}

/* Decodes image i and its mask; their sizes are checked against the first image's before they are decoded. */
static snug_status check_sample(seg_impl *m, size_t i, scan_ctx *sc, snug_error *err) {
    char image[SEG_PATH_MAX], mask[SEG_PATH_MAX];
    if (!seg_path(image, m, "images", i) || !seg_path(mask, m, "masks", i))
        return snug_fail(err, SNUG_E_ARG, "snug_segmentation_open: the path of %s in %s is longer than %d bytes",
                         m->names[i], m->dir, SEG_PATH_MAX - 1);
    png_header h, hm;
    snug_status s = png_decode(image, PNG_AS_IMAGE, i == 0 ? NULL : &m->shape, &h, NULL, NULL, err);
    if (s == SNUG_E_SHAPE)
        return snug_fail(err, SNUG_E_FORMAT, "%s is %zu x %zu with %zu channel(s) but %s/images/%s (the first) is "
                         "%zu x %zu with %zu: all images must have one size and channel count", image, h.height,
                         h.width, h.channels, m->dir, m->names[0], m->shape.height, m->shape.width,
                         m->shape.channels);
    if (s != SNUG_OK) return s;
    if (i == 0) m->shape = h;
    FILE *probe = fopen(mask, "rb");
    if (!probe)
        return snug_fail(err, SNUG_E_IO, "the image %s has no mask: cannot open %s: %s", image, mask,
                         strerror(errno));
    fclose(probe);
    const png_header want = {.height = h.height, .width = h.width, .channels = 1};
    s = png_decode(mask, PNG_AS_MASK, &want, &hm, scan_mask, sc, err);
    if (s == SNUG_E_SHAPE)
        return snug_fail(err, SNUG_E_FORMAT, "the mask %s is %zu x %zu but its image %s is %zu x %zu", mask,
                         hm.height, hm.width, image, h.height, h.width);
    return s;
}

static snug_status check_all(seg_impl *m, snug_error *err) {
    scan_ctx sc = {0};
    for (size_t i = 0; i < m->count; i++) {
        snug_status s = check_sample(m, i, &sc, err);
        if (s != SNUG_OK) return s;
    }
    m->classes = (size_t)sc.largest + 1;
    if (m->classes < 2)
        return snug_fail(err, SNUG_E_FORMAT, "the masks in %s/masks hold only class 0 (and 255, which means "
                         "ignore): a segmentation needs at least 2 classes; binary masks must mark the foreground "
                         "with 1, not 255", m->dir);
    return SNUG_OK;
}

snug_status snug_segmentation_open(const char *dir, snug_dataset **out, snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_segmentation_open: out is NULL");
    *out = NULL;
    if (!dir) return snug_fail(err, SNUG_E_ARG, "snug_segmentation_open: dir is NULL");
    snug_dataset *ds = calloc(1, sizeof *ds);
    seg_impl *m = calloc(1, sizeof *m);
    char *dir_copy = strdup(dir);
    if (!ds || !m || !dir_copy) {
        free(ds);
        free(m);
        free(dir_copy);
        return snug_fail(err, SNUG_E_OOM, "snug_segmentation_open: out of host memory for the dataset header");
    }
    m->dir = dir_copy;
    ds->ops = &seg_ops;
    ds->impl = m;
    snug_status s = list_images(m, err);
    if (s == SNUG_OK) s = check_all(m, err);
    if (s != SNUG_OK) {
        snug_dataset_free(ds);
        return s;
    }
    const png_header *h = &m->shape;
    ds->n = m->count;
    ds->sample_shape = (snug_shape){.rank = 3, .dims = {h->channels, h->height, h->width}};
    ds->sample_numel = h->channels * h->height * h->width;  /* png_decode allocated this many bytes */
    ds->classes = m->classes;
    ds->targets_per_sample = h->height * h->width;
    /* the listing, and one image decoding per thread */
    ds->memory_bytes = strlen(m->dir) + 1 + m->count * sizeof *m->names;
    for (size_t i = 0; i < m->count; i++) ds->memory_bytes += strlen(m->names[i]) + 1;
    ds->scratch_bytes = png_decode_bytes(h);
    *out = ds;
    return SNUG_OK;
}

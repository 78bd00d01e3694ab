/* Labelled images in one folder per class (snug_image_folder_open, include/snug.h). Opening lists the class
 * folders and their images, reads every file's size from its header (a file too large to read within the
 * budget or on this machine is refused before any decoding), then decodes every file once over the OpenMP
 * threads: that finds a bad file by name
 * before training, records the largest decoding (the scratch a reading thread holds) and, when no normalisation
 * is given, sums each file's pixels after resize and crop. The per-file sums are added in file order, so the
 * normalisation does not depend on the thread count. Only the names, the labels and the normalisation are kept;
 * the fill functions decode again, and a file that fails then (changed or removed since) leaves zeros and a
 * sticky error that the trainer reads before it uses the batch (dataset_ops.read_status). */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/escape.h"
#include "core/shape.h"
#include "data/dataset.h"
#include "data/image_decode.h"
#include "data/image_resize.h"

#define FOLDER_PATH_MAX 4096
/* A channel whose standard deviation over the folder is below this is constant: it is divided by 1. */
#define FOLDER_STD_MIN 1e-6

typedef struct folder_impl {
    char *dir;
    char **class_names;  /* (classes) */
    char **files;        /* (n) file names inside their class folder */
    int32_t *labels;     /* (n) class indices */
    size_t capacity;     /* of files and labels */
    snug_normalise norm;
    snug_resize resize;
    size_t read_limit;   /* snug_image_folder_options.read_limit */
    snug_error failure;  /* the first failed read since opened; status SNUG_OK while none */
} folder_impl;

/* dir/class/file of sample i into buf; false when it does not fit. */
static bool sample_path(char *buf, const folder_impl *m, size_t i) {
    int w = snprintf(buf, FOLDER_PATH_MAX, "%s/%s/%s", m->dir, m->class_names[m->labels[i]], m->files[i]);
    return w >= 0 && w < FOLDER_PATH_MAX;
}

/* ---- one sample: decode, resize and crop (0..255), normalise ---- */

typedef struct sample_ctx {
    const snug_dataset *ds;
    float *x;         /* (C, H, W) */
    image_header h;   /* the file's, once decoded */
} sample_ctx;

static snug_status put_sample(void *ctx, const uint8_t *pixels, const image_header *h, snug_error *err) {
    sample_ctx *s = ctx;
    const snug_shape *in = &s->ds->sample_shape;
    const size_t C = in->dims[0], H = in->dims[1], W = in->dims[2];
    const size_t bytes = image_resize_scratch_bytes(h->height, h->width, C, H, W);
    void *scratch = malloc(bytes);
    if (!scratch) return snug_fail(err, SNUG_E_OOM, "out of host memory for %zu bytes of resize buffers", bytes);
    image_resize_crop(s->x, pixels, h->height, h->width, h->channels, C, H, W,
                      ((const folder_impl *)s->ds->impl)->resize, scratch);
    free(scratch);
    s->h = *h;
    return SNUG_OK;
}

/* Sample i as floats on the 0..255 scale into x; *h (when not NULL) its file's header. */
static snug_status read_sample(const snug_dataset *ds, size_t i, float *x, image_header *h, snug_error *err) {
    char path[FOLDER_PATH_MAX];
    if (!sample_path(path, ds->impl, i))
        return snug_fail(err, SNUG_E_ARG, "the path of image %zu is longer than %d bytes", i, FOLDER_PATH_MAX - 1);
    sample_ctx s = {.ds = ds, .x = x};
    snug_status st = image_decode(path, &s.h, put_sample, &s, err);
    if (st == SNUG_OK && h) *h = s.h;
    return st;
}

static void normalise(const snug_dataset *ds, float *x) {  // (C, H, W)
    const folder_impl *m = ds->impl;
    const size_t plane = ds->sample_shape.dims[1] * ds->sample_shape.dims[2];
    for (size_t c = 0; c < m->norm.channels; c++)
        for (size_t p = 0; p < plane; p++)
            x[c * plane + p] = (x[c * plane + p] / 255.0f - m->norm.mean[c]) / m->norm.std[c];
}

/* ---- the data set's table ---- */

static void note_failure(folder_impl *m, const snug_error *e) {
#pragma omp critical(snug_image_folder_failure)
    if (m->failure.status == SNUG_OK) m->failure = *e;
}

static void folder_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n, float *x) {  // (n, C, H, W)
#pragma omp parallel for schedule(dynamic) if (n > 1)
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        float *xi = x + i * ds->sample_numel;
        snug_error e = {0};
        if (read_sample(ds, idx[i], xi, NULL, &e) == SNUG_OK) {
            normalise(ds, xi);
            continue;
        }
        if (e.status == SNUG_E_IO || e.status == SNUG_E_FORMAT)
            snug_error_append(&e, " (the file changed since the image folder was opened: restore it, or remove "
                              "it and start again)");
        note_failure(ds->impl, &e);
        memset(xi, 0, ds->sample_numel * sizeof *xi);
    }
}

static void folder_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // (n)
    const folder_impl *m = ds->impl;
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        y[i] = m->labels[idx[i]];
    }
}

static snug_status folder_read_status(const snug_dataset *ds, snug_error *err) {
    const folder_impl *m = ds->impl;
    if (m->failure.status == SNUG_OK) return SNUG_OK;
    if (err) *err = m->failure;
    return m->failure.status;
}

static const char *folder_class_name(const snug_dataset *ds, size_t i) {
    return ((const folder_impl *)ds->impl)->class_names[i];
}

static bool folder_normalisation(const snug_dataset *ds, snug_normalise *out) {
    *out = ((const folder_impl *)ds->impl)->norm;
    return true;
}

static void folder_destroy(snug_dataset *ds) {
    folder_impl *m = ds->impl;
    if (!m) return;
    for (size_t i = 0; i < ds->n; i++) free(m->files[i]);
    for (size_t c = 0; m->class_names && c < ds->classes; c++) free(m->class_names[c]);
    free(m->files);
    free(m->labels);
    free(m->class_names);
    free(m->dir);
    free(m);
    ds->impl = NULL;
}

static const dataset_ops folder_ops = {
    .fill_inputs = folder_fill_inputs,
    .fill_targets = folder_fill_targets,
    .destroy = folder_destroy,
    .read_status = folder_read_status,
    .class_name = folder_class_name,
    .normalisation = folder_normalisation,
};

/* ---- listing: class folders, then their images ---- */

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool is_image_name(const char *name) {
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot && dot != name &&
           (strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

/* A growing array of names; *count names, *capacity slots. */
static snug_status push_name(char ***names, size_t *count, size_t *capacity, const char *name, snug_error *err) {
    if (*count == *capacity) {
        size_t grown = *capacity ? 2 * *capacity : 16;
        char **more = realloc(*names, grown * sizeof *more);
        if (!more) return snug_fail(err, SNUG_E_OOM, "snug_image_folder_open: out of host memory for file names");
        *names = more;
        *capacity = grown;
    }
    if (!((*names)[*count] = strdup(name)))
        return snug_fail(err, SNUG_E_OOM, "snug_image_folder_open: out of host memory for file names");
    (*count)++;
    return SNUG_OK;
}

static void free_names(char **names, size_t count) {
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

static bool is_folder(const char *dir, const char *name) {
    char path[FOLDER_PATH_MAX];
    struct stat st;
    int w = snprintf(path, sizeof path, "%s/%s", dir, name);
    return w >= 0 && w < FOLDER_PATH_MAX && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The class folders of dir (not hidden), sorted. */
static snug_status list_classes(const char *dir, char ***names, size_t *count, snug_error *err) {
    DIR *d = opendir(dir);
    if (!d)
        return snug_fail(err, SNUG_E_IO, "cannot open the image folder %s: %s (an image folder holds one folder "
                         "per class, each with its .png, .jpg or .jpeg images)", dir, strerror(errno));
    size_t capacity = 0;
    snug_status s = SNUG_OK;
    for (struct dirent *e; s == SNUG_OK && (e = readdir(d));)
        if (e->d_name[0] != '.' && is_folder(dir, e->d_name)) s = push_name(names, count, &capacity, e->d_name, err);
    closedir(d);
    if (s != SNUG_OK) return s;
    if (*count == 0)
        return snug_fail(err, SNUG_E_FORMAT, "%s holds no class folders: an image folder holds one folder per "
                         "class (e.g. %s/cat/1.jpg, %s/dog/2.png)", dir, dir, dir);
    qsort(*names, *count, sizeof **names, compare_names);
    return SNUG_OK;
}

/* The classes to use: the folder's own, or the expected ones in their order, when the folder has exactly those. */
static snug_status match_classes(const char *dir, char **found, size_t n_found, const snug_image_folder_options *o,
                                 snug_error *err) {
    for (size_t c = 0; c < o->class_count; c++) {
        const char *key = o->classes[c];
        if (!bsearch(&key, found, n_found, sizeof *found, compare_names))
            return snug_fail(err, SNUG_E_FORMAT, "%s has no folder for class %zu '%s' of the %zu classes it must "
                             "match (the training folder's): add %s/%s with that class's images", dir, c,
                             escape_text(key).text, o->class_count, dir, escape_text(key).text);
    }
    for (size_t f = 0; f < n_found; f++) {
        size_t c = 0;
        while (c < o->class_count && strcmp(o->classes[c], found[f]) != 0) c++;
        if (c == o->class_count)
            return snug_fail(err, SNUG_E_FORMAT, "%s/%s is a class folder that the %zu classes it must match (the "
                             "training folder's) do not have: remove it, or train with that class", dir,
                             escape_text(found[f]).text, o->class_count);
    }
    return SNUG_OK;
}

/* The classes of the data set into m->class_names, ds->classes. */
static snug_status take_classes(snug_dataset *ds, const snug_image_folder_options *o, snug_error *err) {
    folder_impl *m = ds->impl;
    char **found = NULL;
    size_t n_found = 0;
    snug_status s = list_classes(m->dir, &found, &n_found, err);
    if (s == SNUG_OK && o->classes) s = match_classes(m->dir, found, n_found, o, err);
    if (s != SNUG_OK || !o->classes) {
        m->class_names = found;
        ds->classes = n_found;
        return s;
    }
    free_names(found, n_found);
    size_t capacity = 0;
    for (size_t c = 0; s == SNUG_OK && c < o->class_count; c++)
        s = push_name(&m->class_names, &ds->classes, &capacity, o->classes[c], err);
    return s;
}

/* Appends the images of class c, sorted. */
static snug_status list_images(snug_dataset *ds, size_t c, snug_error *err) {
    folder_impl *m = ds->impl;
    char path[FOLDER_PATH_MAX];
    int w = snprintf(path, sizeof path, "%s/%s", m->dir, m->class_names[c]);
    if (w < 0 || w >= FOLDER_PATH_MAX)
        return snug_fail(err, SNUG_E_ARG, "the path %s/%s is longer than %d bytes", m->dir,
                         escape_text(m->class_names[c]).text, FOLDER_PATH_MAX - 1);
    DIR *d = opendir(path);
    if (!d)
        return snug_fail(err, SNUG_E_IO, "cannot open the class folder %s: %s", escape_text(path).text,
                         strerror(errno));
    const size_t first = ds->n;
    snug_status s = SNUG_OK;
    for (struct dirent *e; s == SNUG_OK && (e = readdir(d));) {
        if (!is_image_name(e->d_name)) continue;
        const size_t before = m->capacity;
        s = push_name(&m->files, &ds->n, &m->capacity, e->d_name, err);
        if (s == SNUG_OK && m->capacity != before) {
            int32_t *labels = realloc(m->labels, m->capacity * sizeof *labels);
            if (!labels) s = snug_fail(err, SNUG_E_OOM, "snug_image_folder_open: out of host memory for labels");
            else m->labels = labels;
        }
        if (s == SNUG_OK) m->labels[ds->n - 1] = (int32_t)c;
    }
    closedir(d);
    if (s != SNUG_OK) return s;
    if (ds->n == first)
        return snug_fail(err, SNUG_E_FORMAT, "the class folder %s holds no .png, .jpg or .jpeg images: add its "
                         "images or remove the folder", escape_text(path).text);
    qsort(m->files + first, ds->n - first, sizeof *m->files, compare_names);
    return SNUG_OK;
}

/* ---- the pass over every file ---- */

typedef struct file_result {
    size_t need;          /* bytes one read of it holds: decoding and resize buffers */
    double sum[3], sq[3]; /* per channel, of v / 255 after resize and crop */
} file_result;

/* Decodes, resizes and crops file i into x (as a fill would); with stats, sums its channels too. */
static snug_status scan_file(const snug_dataset *ds, size_t i, bool stats, float *x, file_result *r,
                             snug_error *err) {
    const size_t C = ds->sample_shape.dims[0], H = ds->sample_shape.dims[1], W = ds->sample_shape.dims[2];
    image_header h = {0};
    snug_status s = read_sample(ds, i, x, &h, err);
    if (s != SNUG_OK) return s;
    r->need = h.decode_bytes + image_resize_scratch_bytes(h.height, h.width, C, H, W);
    for (size_t c = 0; stats && c < C; c++)
        for (size_t p = 0; p < H * W; p++) {
            const double v = (double)x[c * H * W + p] / 255.0;
            r->sum[c] += v;
            r->sq[c] += v * v;
        }
    return SNUG_OK;
}

/* Per channel mean and standard deviation from the per-file sums, added in file order. */
static void take_statistics(snug_dataset *ds, const file_result *r) {
    folder_impl *m = ds->impl;
    const size_t C = ds->sample_shape.dims[0];
    const double count = (double)ds->n * (double)(ds->sample_shape.dims[1] * ds->sample_shape.dims[2]);
    m->norm.channels = C;
    for (size_t c = 0; c < C; c++) {
        double sum = 0, sq = 0;
        for (size_t i = 0; i < ds->n; i++) {
            sum += r[i].sum[c];
            sq += r[i].sq[c];
        }
        const double mean = sum / count, var = sq / count - mean * mean, sd = var > 0 ? sqrt(var) : 0;
        m->norm.mean[c] = (float)mean;
        m->norm.std[c] = sd < FOLDER_STD_MIN ? 1.0f : (float)sd;
    }
}

/* What reading file i holds (decoding and resize buffers), from its header alone, into *need. */
static snug_status size_file(const snug_dataset *ds, size_t i, size_t *need, snug_error *err) {
    const size_t C = ds->sample_shape.dims[0], H = ds->sample_shape.dims[1], W = ds->sample_shape.dims[2];
    char path[FOLDER_PATH_MAX];
    if (!sample_path(path, ds->impl, i))
        return snug_fail(err, SNUG_E_ARG, "the path of image %zu is longer than %d bytes", i, FOLDER_PATH_MAX - 1);
    image_header h = {0};
    snug_status s = image_read_size(path, &h, err);
    if (s != SNUG_OK) return s;
    *need = h.decode_bytes + image_resize_scratch_bytes(h.height, h.width, C, H, W);
    const size_t limit = ((const folder_impl *)ds->impl)->read_limit;
    snug_machine_memory mm;
    snug_machine_memory_get(&mm);
    const bool machine = mm.usable && *need > mm.usable;
    if (!machine && (!limit || *need <= limit)) return SNUG_OK;
    char needs[32], offered[32];
    return snug_fail(err, SNUG_E_OOM, "%s is %zu x %zu pixels: reading it holds %s, more than %s (%s): refused "
                     "before decoding any image (resize it)", escape_text(path).text, h.height, h.width,
                     snug_format_bytes(*need, needs, sizeof needs), machine ? "this machine's memory" : "the memory "
                     "budget", snug_format_bytes(machine ? mm.usable : limit, offered, sizeof offered));
}

/* Every file's size from its header, in parallel, before any is decoded: the scratch a reading thread holds is
 * known, and a file too large to read within the budget or on this machine is refused before a single image
 * is decoded. The first bad file in sample order is the one reported. */
static snug_status size_all(snug_dataset *ds, snug_error *err) {
    size_t bad = SIZE_MAX, largest = 0;
    snug_error first = {0};
#pragma omp parallel for schedule(dynamic) reduction(max : largest)
    for (size_t i = 0; i < ds->n; i++) {
        snug_error e = {0};
        size_t need = 0;
        snug_status s = size_file(ds, i, &need, &e);
        if (need > largest) largest = need;
#pragma omp critical(snug_image_folder_size)
        if (s != SNUG_OK && i < bad) {
            bad = i;
            first = e;
        }
    }
    if (first.status != SNUG_OK && err) *err = first;
    if (first.status == SNUG_OK) ds->scratch_bytes = largest;
    return first.status;
}

/* Every file decoded, in parallel; the first bad file in sample order is the one reported. */
static snug_status scan_all(snug_dataset *ds, bool stats, snug_error *err) {
    file_result *r = calloc(ds->n, sizeof *r);
    if (!r) return snug_fail(err, SNUG_E_OOM, "snug_image_folder_open: out of host memory for %zu files", ds->n);
    size_t bad = SIZE_MAX;
    snug_error first = {0};
#pragma omp parallel for schedule(dynamic)
    for (size_t i = 0; i < ds->n; i++) {
        snug_error e = {0};
        float *x = malloc(ds->sample_numel * sizeof *x);
        snug_status s = x ? scan_file(ds, i, stats, x, &r[i], &e)
                          : snug_fail(&e, SNUG_E_OOM, "out of host memory for one image of %zu floats",
                                      ds->sample_numel);
        free(x);
#pragma omp critical(snug_image_folder_scan)
        if (s != SNUG_OK && i < bad) {
            bad = i;
            first = e;
        }
    }
    snug_status s = first.status;
    if (s != SNUG_OK && err) *err = first;
    if (s == SNUG_OK && stats) take_statistics(ds, r);
    for (size_t i = 0; s == SNUG_OK && i < ds->n; i++)
        if (r[i].need > ds->scratch_bytes) ds->scratch_bytes = r[i].need;
    free(r);
    return s;
}

/* ---- opening ---- */

static snug_status check_options(const snug_image_folder_options *o, snug_error *err) {
    char shape[64];
    const snug_shape *in = &o->input;
    if (in->rank != 3 || (in->dims[0] != 1 && in->dims[0] != 3) || in->dims[1] == 0 || in->dims[2] == 0)
        return snug_fail(err, SNUG_E_SHAPE, "an image folder feeds images (C, H, W) with C = 1 (gray) or 3 (RGB), "
                         "but the model takes %s", snug_shape_format(in, shape, sizeof shape));
    if (o->resize != SNUG_RESIZE_AUTO && o->resize != SNUG_RESIZE_AREA && o->resize != SNUG_RESIZE_BILINEAR)
        return snug_fail(err, SNUG_E_ARG, "snug_image_folder_open: unknown resize mode %d", (int)o->resize);
    if (o->classes && o->class_count == 0)
        return snug_fail(err, SNUG_E_ARG, "snug_image_folder_open: classes given but class_count is 0");
    for (size_t c = 0; o->classes && c < o->class_count; c++)
        if (!o->classes[c] || !o->classes[c][0])
            return snug_fail(err, SNUG_E_ARG, "snug_image_folder_open: class name %zu is empty", c);
    const snug_normalise *nz = o->normalise;
    if (!nz) return SNUG_OK;
    if (nz->channels != in->dims[0])
        return snug_fail(err, SNUG_E_ARG, "the normalisation given has %zu channel(s) but the model's images "
                         "have %zu", nz->channels, in->dims[0]);
    for (size_t c = 0; c < nz->channels; c++)
        if (!isfinite(nz->mean[c]) || !isfinite(nz->std[c]) || !(nz->std[c] > 0))
            return snug_fail(err, SNUG_E_ARG, "the normalisation given has channel %zu mean %g std %g: a mean must "
                             "be finite and a std finite and above 0", c, (double)nz->mean[c], (double)nz->std[c]);
    return SNUG_OK;
}

/* What the data set keeps: the folder, class and file names, the labels. */
static size_t kept_bytes(const snug_dataset *ds) {
    const folder_impl *m = ds->impl;
    size_t bytes = sizeof *m + strlen(m->dir) + 1 + ds->classes * sizeof *m->class_names +
                   m->capacity * (sizeof *m->files + sizeof *m->labels);
    for (size_t c = 0; c < ds->classes; c++) bytes += strlen(m->class_names[c]) + 1;
    for (size_t i = 0; i < ds->n; i++) bytes += strlen(m->files[i]) + 1;
    return bytes;
}

static snug_status open_folder(snug_dataset *ds, const snug_image_folder_options *o, snug_error *err) {
    folder_impl *m = ds->impl;
    ds->sample_shape = o->input;
    ds->targets_per_sample = 1;
    if (!size_prod(o->input.dims, 3, &ds->sample_numel) || ds->sample_numel > SIZE_MAX / sizeof(float))
        return snug_fail(err, SNUG_E_OVERFLOW, "snug_image_folder_open: the image size overflows");
    snug_status s = take_classes(ds, o, err);
    for (size_t c = 0; s == SNUG_OK && c < ds->classes; c++) s = list_images(ds, c, err);
    if (s == SNUG_OK && ds->n > INT32_MAX)
        s = snug_fail(err, SNUG_E_ARG, "%s holds %zu images, more than an image folder takes", m->dir, ds->n);
    if (s != SNUG_OK) return s;
    m->resize = o->resize;
    m->read_limit = o->read_limit;
    if (o->normalise) m->norm = *o->normalise;
    s = size_all(ds, err);
    if (s == SNUG_OK) s = scan_all(ds, o->normalise == NULL, err);
    ds->memory_bytes = kept_bytes(ds);
    return s;
}

snug_status snug_image_folder_open(const char *dir, const snug_image_folder_options *o, snug_dataset **out,
                                   snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_image_folder_open: out is NULL");
    *out = NULL;
    if (!dir || !o) return snug_fail(err, SNUG_E_ARG, "snug_image_folder_open: dir and options are both needed");
    snug_status s = check_options(o, err);
    if (s != SNUG_OK) return s;
    snug_dataset *ds = calloc(1, sizeof *ds);
    folder_impl *m = calloc(1, sizeof *m);
    char *dir_copy = strdup(dir);
    if (!ds || !m || !dir_copy) {
        free(ds);
        free(m);
        free(dir_copy);
        return snug_fail(err, SNUG_E_OOM, "snug_image_folder_open: out of host memory for the data set header");
    }
    m->dir = dir_copy;
    ds->ops = &folder_ops;
    ds->impl = m;
    s = open_folder(ds, o, err);
    if (s != SNUG_OK) {
        snug_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SNUG_OK;
}

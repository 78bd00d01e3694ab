/* MNIST as a dataset: an images IDX file (N, H, W), read sample by sample into the micro-batch buffer, and a
 * labels IDX file (N), read once and kept (N bytes: the data set's own memory, counted in a run's data). Pixels
 * are normalised on the way in, through a 256-entry table that holds exactly what PyTorch's
 * ToTensor + Normalize((0.1307,), (0.3081,)) computes in float32. */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/idx.h"

#define MNIST_CLASSES 10
#define MNIST_MEAN 0.1307f
#define MNIST_STD 0.3081f
/* Below this many pixels per call a parallel region costs more than it saves (a 64-sample micro-batch is 50k). */
#define MNIST_PARALLEL_MIN_PIXELS ((size_t)1 << 18)

typedef struct mnist_impl {
    idx_file images;  /* (n, H, W), read as needed */
    uint8_t *labels;  /* (n), read when opened */
    float table[256]; /* normalised value of each byte */
} mnist_impl;

/* Each sample's bytes are read into the last quarter of its own float slot and widened from the front: float p
 * (bytes 4p..4p+3) overwrites only bytes before byte 3 * pixels + p + 1, which are read already, so no scratch
 * buffer is needed. */
static void mnist_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n,
                              float *x) {  // (n, 1, H, W)
    mnist_impl *m = ds->impl;
    const size_t pixels = ds->sample_numel;
    const float *table = m->table;
#pragma omp parallel for schedule(static) if (n * pixels >= MNIST_PARALLEL_MIN_PIXELS)
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        float *dst = x + i * pixels;
        uint8_t *src = (uint8_t *)dst + 3 * pixels;
        idx_read(&m->images, idx[i] * pixels, pixels, src); /* zeros when it fails: see mnist_read_status */
        for (size_t p = 0; p < pixels; p++) dst[p] = table[src[p]];
    }
}

static void mnist_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n, int32_t *y) {  // y: (n)
    const mnist_impl *m = ds->impl;
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        y[i] = m->labels[idx[i]];
    }
}

static void mnist_destroy(snug_dataset *ds) {
    mnist_impl *m = ds->impl;
    if (!m) return;
    idx_close(&m->images);
    free(m->labels);
    free(m);
    ds->impl = NULL;
}

static snug_status mnist_read_status(const snug_dataset *ds, snug_error *err) {
    return idx_status(&((const mnist_impl *)ds->impl)->images, err);
}

static bool mnist_normalisation(const snug_dataset *ds, snug_normalise *out) {
    (void)ds;
    *out = (snug_normalise){.channels = 1, .mean = {MNIST_MEAN}, .std = {MNIST_STD}};
    return true;
}

static const dataset_ops mnist_ops = {
    .fill_inputs = mnist_fill_inputs,
    .fill_targets = mnist_fill_targets,
    .destroy = mnist_destroy,
    .read_status = mnist_read_status,
    .normalisation = mnist_normalisation,
};

/* The pair must describe the same samples, and every label must be a digit. Reads the labels into m. */
static snug_status read_labels(const char *images_path, const char *labels_path, mnist_impl *m, snug_error *err) {
    idx_file labels;
    snug_status s = idx_open(labels_path, 1, &labels, err);
    if (s != SNUG_OK) return s;
    if (m->images.dims[0] != labels.dims[0])
        s = snug_fail(err, SNUG_E_FORMAT, "%s has %zu images but %s has %zu labels: the two files do not belong "
                      "together (train-* and t10k-* mixed?)", images_path, m->images.dims[0], labels_path,
                      labels.dims[0]);
    else if (!(m->labels = malloc(labels.count)))
        s = snug_fail(err, SNUG_E_OOM, "out of memory for the %zu labels of %s", labels.count, labels_path);
    else if (!idx_read(&labels, 0, labels.count, m->labels))
        s = idx_status(&labels, err);
    for (size_t i = 0; s == SNUG_OK && i < labels.count; i++)
        if (m->labels[i] >= MNIST_CLASSES)
            s = snug_fail(err, SNUG_E_FORMAT, "%s: label %zu is %u, outside 0..%d: the labels file is corrupt; "
                          "re-download it with `make data`", labels_path, i, (unsigned)m->labels[i],
                          MNIST_CLASSES - 1);
    idx_close(&labels);
    return s;
}

static void fill_table(float *table) {  // (256)
    /* The same float32 operations, in the same order, as ToTensor (x / 255) then Normalize ((x - mean) / std). */
    for (int v = 0; v < 256; v++) table[v] = ((float)v / 255.0f - MNIST_MEAN) / MNIST_STD;
}

snug_status snug_mnist_open_files(const char *images_path, const char *labels_path, snug_dataset **out,
                                  snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_mnist_open_files: out is NULL");
    *out = NULL;
    if (!images_path || !labels_path)
        return snug_fail(err, SNUG_E_ARG, "snug_mnist_open_files: images_path and labels_path must not be NULL");
    snug_dataset *ds = calloc(1, sizeof *ds);
    mnist_impl *m = calloc(1, sizeof *m);
    if (!ds || !m) {
        free(ds);
        free(m);
        return snug_fail(err, SNUG_E_OOM, "snug_mnist_open_files: out of host memory for the dataset header");
    }
    ds->ops = &mnist_ops;
    ds->impl = m;
    snug_status s = idx_open(images_path, 3, &m->images, err);
    if (s == SNUG_OK) s = read_labels(images_path, labels_path, m, err);
    if (s != SNUG_OK) {
        snug_dataset_free(ds);
        return s;
    }
    fill_table(m->table);
    ds->n = m->images.dims[0];
    ds->sample_shape = (snug_shape){.rank = 3, .dims = {1, m->images.dims[1], m->images.dims[2]}};
    ds->sample_numel = m->images.dims[1] * m->images.dims[2];  /* cannot overflow: idx_open checked the product */
    ds->classes = MNIST_CLASSES;
    ds->targets_per_sample = 1;
    ds->memory_bytes = m->images.dims[0]; /* the labels */
    *out = ds;
    return SNUG_OK;
}

/* dir + "/" + name into buf; false when it does not fit. */
static bool join_path(char *buf, size_t len, const char *dir, const char *name) {
    int w = snprintf(buf, len, "%s/%s", dir, name);
    return w >= 0 && (size_t)w < len;
}

snug_status snug_mnist_open(const char *dir, bool train, snug_dataset **out, snug_error *err) {
    if (out) *out = NULL;
    if (!dir) return snug_fail(err, SNUG_E_ARG, "snug_mnist_open: dir is NULL (the MNIST directory, e.g. data/mnist)");
    const char *images_name = train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte";
    const char *labels_name = train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte";
    char images[4096], labels[4096];
    if (!join_path(images, sizeof images, dir, images_name) || !join_path(labels, sizeof labels, dir, labels_name))
        return snug_fail(err, SNUG_E_ARG, "snug_mnist_open: the directory path is too long (%zu bytes)",
                         strlen(dir));
    return snug_mnist_open_files(images, labels, out, err);
}

snug_status snug_mnist_open_padded(const char *dir, bool train, size_t pad, snug_dataset **out, snug_error *err) {
    if (out) *out = NULL;
    snug_dataset *ds = NULL;
    snug_status s = snug_mnist_open(dir, train, &ds, err);
    if (s != SNUG_OK) return s;
    /* The frame is background: what a 0 pixel becomes after normalisation, exactly as inside the image. */
    const float background = ((mnist_impl *)ds->impl)->table[0];
    return snug_dataset_pad(ds, pad, pad, background, out, err);
}

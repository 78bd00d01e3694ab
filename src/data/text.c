/* A byte-level text dataset for language models: vocabulary 256 (a token is a byte), the whole file mapped
 * read-only. The file splits into a training part (the first 1 - holdout of its bytes) and a held-out part (the
 * rest); a sample is a window of one part, and no window crosses from one part into the other.
 *
 * Sample i of a part starts at byte s = i * context of the part: its inputs are bytes [s, s + context), its
 * targets bytes [s + 1, s + context + 1) (the next byte at each position). Windows advance by context, so every
 * byte of a part except the first is predicted exactly once per epoch. The last window may run past the end of
 * the part: its missing inputs are 0 and its missing targets SNUG_IGNORE_TARGET, so no byte is dropped and the
 * loss normaliser counts only real targets (a ragged token count, which the trainer must handle). */
#define _POSIX_C_SOURCE 200809L

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/error.h"
#include "data/dataset.h"

#define TEXT_VOCAB 256

typedef struct text_impl {
    void *map;            /* the whole file, read-only */
    size_t map_len;
    const uint8_t *part;  /* (len) the bytes of this part, inside the mapping */
    size_t len;
    size_t context;
} text_impl;

static void text_fill_inputs(const snug_dataset *ds, const size_t *idx, size_t n,
                             float *x) {  // (n, context)
    const text_impl *t = ds->impl;
    const size_t T = t->context;
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        const size_t s = idx[i] * T;
        float *dst = x + i * T;
        for (size_t p = 0; p < T; p++) dst[p] = s + p < t->len ? (float)t->part[s + p] : 0.0f;
    }
}

static void text_fill_targets(const snug_dataset *ds, const size_t *idx, size_t n,
                              int32_t *y) {  // (n, context)
    const text_impl *t = ds->impl;
    const size_t T = t->context;
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->n);
        const size_t s = idx[i] * T + 1;
        int32_t *dst = y + i * T;
        for (size_t p = 0; p < T; p++) dst[p] = s + p < t->len ? (int32_t)t->part[s + p] : SNUG_IGNORE_TARGET;
    }
}

static void text_destroy(snug_dataset *ds) {
    text_impl *t = ds->impl;
    if (!t) return;
    if (t->map) munmap(t->map, t->map_len);
    free(t);
    ds->impl = NULL;
}

static const dataset_ops text_ops = {
    .fill_inputs = text_fill_inputs,
    .fill_targets = text_fill_targets,
    .destroy = text_destroy,
};

/* Maps the regular, non-empty file at path read-only into t->map. */
static snug_status map_file(const char *path, text_impl *t, snug_error *err) {
    /* O_NONBLOCK: a FIFO given by mistake must fail below, not hang here; regular files ignore it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return snug_fail(err, SNUG_E_IO, "cannot open the text file %s: %s", path, strerror(errno));
    struct stat st;
    snug_status s = SNUG_OK;
    if (fstat(fd, &st) != 0)
        s = snug_fail(err, SNUG_E_IO, "cannot stat %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = snug_fail(err, SNUG_E_IO, "%s is not a regular file, expected a text file", path);
    else if (st.st_size == 0)
        s = snug_fail(err, SNUG_E_FORMAT, "%s is empty (0 bytes): a text dataset needs text", path);
    else if ((uintmax_t)st.st_size > SIZE_MAX)
        s = snug_fail(err, SNUG_E_FORMAT, "%s is too large to map (%jd bytes)", path, (intmax_t)st.st_size);
    if (s == SNUG_OK) {
        t->map_len = (size_t)st.st_size;
        void *map = mmap(NULL, t->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED)
            s = snug_fail(err, SNUG_E_IO, "cannot map %s (%zu bytes): %s", path, t->map_len, strerror(errno));
        else
            t->map = map;
    }
    close(fd);  /* the mapping keeps the file alive */
    return s;
}

/* Points t->part at the requested part: [0, split) for training, [split, len) held out. */
static snug_status select_part(const char *path, double holdout, bool heldout_part, text_impl *t,
                               snug_error *err) {
    const size_t len = t->map_len;
    /* floor, so that a file is split the same way on every machine; exact for files below 2^53 bytes */
    const size_t split = (size_t)floor((double)len * (1.0 - holdout));
    const size_t start = heldout_part ? split : 0, end = heldout_part ? len : split;
    t->part = (const uint8_t *)t->map + start;
    t->len = end - start;
    /* A full window: context inputs and the byte that follows the last of them. */
    if (t->len < t->context + 1)
        return snug_fail(err, SNUG_E_ARG, "%s: the %s part (bytes %zu to %zu of %zu, holdout %g) has %zu bytes, "
                         "less than one window of context %zu + 1: use a shorter context, %s holdout, or a "
                         "longer file", path, heldout_part ? "held-out" : "training", start, end, len, holdout,
                         t->len, t->context, heldout_part ? "a larger" : "a smaller");
    return SNUG_OK;
}

static snug_status check_args(const char *path, size_t context, double holdout, snug_error *err) {
    if (!path) return snug_fail(err, SNUG_E_ARG, "snug_text_open: path is NULL");
    if (context == 0) return snug_fail(err, SNUG_E_ARG, "snug_text_open: %s: context must be > 0 tokens", path);
    if (!(holdout >= 0.0 && holdout < 1.0))
        return snug_fail(err, SNUG_E_ARG, "snug_text_open: %s: holdout is %g, expected a fraction in [0, 1) "
                         "(e.g. 0.1 holds out the last 10%% of the bytes)", path, holdout);
    return SNUG_OK;
}

snug_status snug_text_open(const char *path, size_t context, double holdout, bool heldout_part,
                           snug_dataset **out, snug_error *err) {
    if (!out) return snug_fail(err, SNUG_E_ARG, "snug_text_open: out is NULL");
    *out = NULL;
    snug_status s = check_args(path, context, holdout, err);
    if (s != SNUG_OK) return s;
    snug_dataset *ds = calloc(1, sizeof *ds);
    text_impl *t = calloc(1, sizeof *t);
    if (!ds || !t) {
        free(ds);
        free(t);
        return snug_fail(err, SNUG_E_OOM, "snug_text_open: out of host memory for the dataset header");
    }
    ds->ops = &text_ops;
    ds->impl = t;
    t->context = context;
    s = map_file(path, t, err);
    if (s == SNUG_OK) s = select_part(path, holdout, heldout_part, t, err);
    if (s != SNUG_OK) {
        snug_dataset_free(ds);
        return s;
    }
    /* Targets are bytes 1 .. len-1 of the part, context per window: ceil((len - 1) / context) windows. */
    ds->n = (t->len - 1) / context + ((t->len - 1) % context != 0);
    /* Rank 3, like the images: the graph input of every model is (C, H, W) for now. */
    ds->sample_shape = (snug_shape){.rank = 1, .dims = {context}}; /* snug_input_tokens(context) */
    ds->sample_numel = context;
    ds->classes = TEXT_VOCAB;
    ds->targets_per_sample = context;
    *out = ds;
    return SNUG_OK;
}
